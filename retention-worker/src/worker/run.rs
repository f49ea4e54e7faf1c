//! One retention run of a cluster, acting on its groups' plans ([`super::groups`]) in order:
//! the breaker's hold or release, the decision in the audit, merge jobs, then the plan's whole
//! and partial deletions marked, stale volume marks taken off, users' delete requests, the marks
//! in the audit and the `retention` event; the cluster's binlog job last. Also the gauges a run
//! sets per group. The catalog writes themselves are in [`super::marks`], the jobs and events in
//! [`super::publish`]; nothing here plans or writes the catalog directly.

use chrono::{DateTime, Utc};
use sexton_model::{
    names::ClusterName,
    records::BackupStatus,
    wire::{DecisionSummary, PartialSummary},
};
use sexton_retention::Reason;
use sexton_shared::audit::AuditBackup;

use super::groups::Places;
use super::publish::Jobs;
use super::Worker;
use crate::binlog;
use crate::decisions::RunDecision;
use crate::group_plan::{GroupPlan, Render};
use crate::safety;

impl Worker {
    pub(super) async fn run_cluster(
        &self,
        cluster: &ClusterName,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let binlog = binlog::load(&self.store, &self.prefix, cluster).await;
        let groups = self
            .plan_groups(cluster, None, now, &binlog, Render::Run, Places::All)
            .await?;
        let (at_locations, at_primary): (Vec<GroupPlan>, Vec<GroupPlan>) = groups
            .into_iter()
            .partition(|group| group.location.is_some());
        let mut locks = std::collections::HashMap::new();
        let segments = binlog.segments();
        for group in &at_primary {
            locks.extend(self.run_group(group, now).await?);
            self.observe_recovery(group, &segments, now);
        }
        // Locks on the binlog archive follow the bases locked just now (issue 29).
        if !locks.is_empty() && binlog.collectable() {
            self.lock_segments(cluster, None, &at_primary, &binlog.segments(), &locks, now)
                .await;
        }
        let mut location_locks: std::collections::BTreeMap<_, std::collections::HashMap<_, _>> =
            Default::default();
        // Each location's own copy of the archive, read once per run: the log a restore
        // there replays (the recovery gauges), and what its locks follow.
        let mut archives: std::collections::BTreeMap<_, binlog::BinlogInput> = Default::default();
        for location in at_locations.iter().filter_map(|g| g.location.as_ref()) {
            if let (false, Some(store)) = (
                archives.contains_key(location),
                self.locations.get(location),
            ) {
                archives.insert(
                    location.clone(),
                    binlog::load(store, store.prefix(), cluster).await,
                );
            }
        }
        for group in &at_locations {
            let locks = self.run_location_group(group).await?;
            if let Some(location) = &group.location {
                let segments = archives
                    .get(location)
                    .map(binlog::BinlogInput::segments)
                    .unwrap_or_default();
                self.observe_recovery(group, &segments, now);
                location_locks
                    .entry(location.clone())
                    .or_default()
                    .extend(locks);
            }
        }
        // A location's copy of the archive is locked as the copies there that need it.
        for (location, locks) in &location_locks {
            let Some(archive) = archives.get(location).filter(|_| !locks.is_empty()) else {
                continue;
            };
            if archive.collectable() {
                let at_location = at_locations
                    .iter()
                    .filter(|g| g.location.as_ref() == Some(location));
                self.lock_segments(
                    cluster,
                    Some(location),
                    at_location,
                    &archive.segments(),
                    locks,
                    now,
                )
                .await;
            }
        }
        // The binlog archive is at primary: only the primary's plans say what it needs.
        self.publish_binlog(cluster, &at_primary, &binlog).await
    }

    /// Carries out one group's plan: everything a run does for it, in order. Returns the
    /// group's lock dates (empty without locks).
    async fn run_group(
        &self,
        group: &GroupPlan,
        now: DateTime<Utc>,
    ) -> anyhow::Result<std::collections::HashMap<String, DateTime<Utc>>> {
        let cluster = &group.cluster;
        self.metrics
            .last_run
            .with_label_values(&[cluster.as_str(), group.plan.as_str()])
            .set(now.timestamp());
        self.observe_group(group, now);
        let Some(decision) = &group.run else {
            if let Some(reason) = &group.hold_reason {
                tracing::info!(%cluster, plan = %group.plan, reason, "retention keeps everything");
            }
            let policy_hash = safety::hash_of(group.policy.as_ref());
            self.requests_only(group, &policy_hash, now).await?;
            return Ok(Default::default());
        };
        // Locks first: a backup counts for the plan's deletions only once it is locked, and a
        // held run still locks what it keeps.
        let locks = self.lock_planned(group, now).await?;
        let policy_hash = group.policy_hash.clone().unwrap_or_default();
        match &group.breaker {
            // Held: nothing of the plan is marked; users' own requests still go.
            Some(breaker) if breaker.held => {
                self.envelope
                    .hold(cluster, &group.plan, None, breaker, &policy_hash)
                    .await;
                self.requests_only(group, &policy_hash, now).await?;
                return Ok(locks);
            }
            Some(breaker) => {
                self.envelope
                    .release(cluster, &group.plan, None, breaker)
                    .await?
            }
            None => self.envelope.passed(cluster, &group.plan, None),
        }
        // The decision is in the audit before anything of it is marked.
        if let Some(owned) = group.decision.as_ref().filter(|_| group.deletes()) {
            self.envelope
                .record_decision(cluster, &group.plan, &policy_hash, owned)
                .await?;
        }
        let mut marked = Vec::new();
        for (rule, n_kept) in &decision.keep_rules {
            self.metrics
                .decisions
                .with_label_values(&["keep", rule])
                .inc_by(*n_kept);
        }
        self.publish_merges(group, &decision.merges, &decision.volume_merges)
            .await?;
        let mut jobs = Jobs::default();
        let deleting = self
            .expire_planned(group, decision, &policy_hash, &mut marked, &mut jobs)
            .await?;
        self.unmark_planned(group, decision).await?;
        let trimming = self
            .trim_planned(group, decision, &policy_hash, &mut marked, &mut jobs)
            .await?;
        // Users' requests are judged after the plan's own deletions: a requested backup
        // that only a backup this run expired still needed (a deleted middle backup whose
        // dependents the plan just let go) goes now, not at the next run.
        marked.extend(
            self.expire_user_requests(group, &deleting, &trimming, now, &mut jobs)
                .await?,
        );
        self.audit_and_publish(group, &policy_hash, marked, jobs)
            .await?;
        self.announce(group, decision, deleting, trimming, now)
            .await;
        Ok(locks)
    }

    /// A group whose plan marks nothing of its own (none, or held): users' delete requests
    /// still go.
    async fn requests_only(
        &self,
        group: &GroupPlan,
        policy_hash: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let mut jobs = Jobs::default();
        let marked = self
            .expire_user_requests(group, &[], &[], now, &mut jobs)
            .await?;
        self.audit_and_publish(group, policy_hash, marked, jobs)
            .await
    }

    /// The run's marks in the audit, then their delete jobs: a mark is in the audit before any
    /// deleter can claim it.
    async fn audit_and_publish(
        &self,
        group: &GroupPlan,
        policy_hash: &str,
        marked: Vec<AuditBackup>,
        jobs: Jobs,
    ) -> anyhow::Result<()> {
        self.envelope
            .record_marks(&group.cluster, &group.plan, policy_hash, marked)
            .await;
        self.publish_jobs(jobs).await
    }

    /// The plan's whole deletions: each backup marked expiring (or its earlier mark's job
    /// published again). Returns what was marked, for the `retention` event; the audit's
    /// entries go to `marked`.
    async fn expire_planned(
        &self,
        group: &GroupPlan,
        decision: &RunDecision,
        policy_hash: &str,
        marked: &mut Vec<AuditBackup>,
        jobs: &mut Jobs,
    ) -> anyhow::Result<Vec<DecisionSummary>> {
        let mut deleting = Vec::new();
        for (index, delete) in &decision.delete {
            // A user's delete request is carried out as it was asked, below.
            if group.members.entries[*index].delete_request {
                continue;
            }
            // What `expire` does with the record as planned: marks it (a write), publishes
            // the job of an earlier mark again, or nothing.
            let writes = match group.members.engine.backups[*index].status {
                BackupStatus::Completed | BackupStatus::Failed => true,
                BackupStatus::Expiring => false,
                _ => continue,
            };
            let Some(record) = self.record_at(group, *index, writes).await? else {
                continue;
            };
            let record = &record;
            let reasons = Reason::texts(&delete.reasons);
            if let Some(mark) = self.expire(record, &reasons, policy_hash, jobs).await? {
                self.metrics
                    .decisions
                    .with_label_values(&["delete", Reason::label_of_first(&delete.reasons)])
                    .inc();
                if mark.new {
                    marked.push(safety::marked(&record.value, &reasons, &[], policy_hash));
                }
                deleting.push(DecisionSummary {
                    id: delete.id.clone(),
                    reasons,
                });
            }
        }
        Ok(deleting)
    }

    /// Volumes marked by an earlier run that this plan keeps (a new dependent, a new
    /// policy) lose their mark, unless a deleter has claimed them already.
    async fn unmark_planned(
        &self,
        group: &GroupPlan,
        decision: &RunDecision,
    ) -> anyhow::Result<()> {
        for (index, kept) in &decision.kept_marked {
            // `unmark_kept_volumes`'s own test, on the record as planned: whole records
            // are read only to be written.
            let backup = &group.members.engine.backups[*index];
            let stale = |name: &str| kept.volumes_keep.iter().any(|v| v.name == name);
            if group.members.entries[*index].volume_deletion
                || !backup.volumes.iter().any(|v| v.expiring && stale(&v.name))
            {
                continue;
            }
            if let Some(record) = self.record_at(group, *index, true).await? {
                self.unmark_kept_volumes(&record, kept).await?;
            }
        }
        Ok(())
    }

    /// The plan's partial deletions: each backup's volumes marked expiring (or an earlier
    /// mark's job published again). Returns what was marked, for the `retention` event; the
    /// audit's entries go to `marked`.
    async fn trim_planned(
        &self,
        group: &GroupPlan,
        decision: &RunDecision,
        policy_hash: &str,
        marked: &mut Vec<AuditBackup>,
        jobs: &mut Jobs,
    ) -> anyhow::Result<Vec<PartialSummary>> {
        let mut trimming = Vec::new();
        for (index, partial) in &decision.partial {
            let volumes: Vec<String> = partial
                .volumes_delete
                .iter()
                .map(|v| v.name.clone())
                .collect();
            // `expire_volumes`'s own tests, on the record as planned: what it leaves
            // alone is not read; what it marks is a write; volumes marked already have
            // their job published again.
            let backup = &group.members.engine.backups[*index];
            let entry = &group.members.entries[*index];
            if volumes.is_empty()
                || backup.status != BackupStatus::Completed
                || entry.delete_request
                || entry.volume_deletion
                || sexton_retention::judge::protection(backup).is_some()
            {
                continue;
            }
            let already = backup
                .volumes
                .iter()
                .filter(|v| volumes.contains(&v.name))
                .all(|v| v.expiring);
            let Some(record) = self.record_at(group, *index, !already).await? else {
                continue;
            };
            let record = &record;
            let reasons = Reason::texts(&partial.reasons);
            if let Some(mark) = self
                .expire_volumes(record, &volumes, &reasons, policy_hash, jobs)
                .await?
            {
                self.metrics
                    .decisions
                    .with_label_values(&["partial", Reason::label_of_first(&partial.reasons)])
                    .inc();
                if mark.new {
                    marked.push(safety::marked(
                        &record.value,
                        &reasons,
                        &volumes,
                        policy_hash,
                    ));
                }
                trimming.push(PartialSummary {
                    id: partial.id.clone(),
                    reasons,
                    volumes_delete: volumes,
                    volumes_keep: partial
                        .volumes_keep
                        .iter()
                        .map(|v| DecisionSummary {
                            id: v.name.clone(),
                            reasons: Reason::texts(&v.reasons),
                        })
                        .collect(),
                });
            }
        }
        Ok(trimming)
    }

    /// The gauges of one group as this run planned it: the policy's promised window, the age
    /// of the newest backup, the newest proven by a restore test, the recoverable window.
    fn observe_group(&self, group: &GroupPlan, now: DateTime<Utc>) {
        let promised = group.policy.as_ref().map_or(0.0, |policy| {
            let window = [
                policy.recovery_window.map(|w| w.as_delta()),
                policy.retention_duration.map(|d| d.as_delta()),
            ]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or_default();
            window.num_seconds() as f64
        });
        self.metrics
            .policy_window
            .with_label_values(&[group.cluster.as_str(), group.plan.as_str()])
            .set(promised);
        let backups = &group.members.engine.backups;
        // Copies still to make (issue 28): the holds `BackupRecord::holds_with_copies` gave.
        let mut awaiting: std::collections::BTreeMap<String, (i64, f64)> = Default::default();
        for backup in backups
            .iter()
            .filter(|b| b.status == BackupStatus::Completed)
        {
            for location in backup
                .holds
                .iter()
                .filter_map(|hold| sexton_model::copies::awaited_location(hold))
            {
                // Lagging only past the rule's delay: a delayed copy is not late.
                let delay = group.copy_delays.get(location).copied().unwrap_or_default();
                let lag = backup.completed_at.map_or(0.0, |t| {
                    (now - t.with_timezone(&Utc) - delay).num_milliseconds() as f64 / 1e3
                });
                let entry = awaiting.entry(location.to_string()).or_default();
                entry.0 += 1;
                entry.1 = entry.1.max(lag);
            }
        }
        self.metrics
            .observe_copies(group.cluster.as_str(), group.plan.as_str(), &awaiting);
        let newest = backups
            .iter()
            .filter(|b| b.status == BackupStatus::Completed)
            .filter_map(|b| b.completed_at)
            .max();
        if let Some(newest) = newest {
            self.metrics
                .newest_backup_age
                .with_label_values(&[group.cluster.as_str(), group.plan.as_str()])
                .set((now - newest.with_timezone(&Utc)).num_milliseconds() as f64 / 1e3);
        }
        // Groups whose backups have been tested: when the newest proven one completed.
        if group.members.entries.iter().any(|entry| entry.tested) {
            let proven = backups
                .iter()
                .filter(|b| b.status == BackupStatus::Completed)
                .filter(|b| b.verification == sexton_model::records::VerificationState::Verified)
                .filter_map(|b| b.completed_at)
                .max();
            self.metrics
                .last_verified
                .with_label_values(&[group.cluster.as_str(), group.plan.as_str()])
                .set(proven.map_or(0.0, |t| t.timestamp() as f64));
        }
    }
}
