//! One retention run: load → plan (pure) → mark and publish. Also the preview, which stops
//! after the plan.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::Serialize;
use sexton_retention::Reason;
use sexton_shared::{
    api::{ApiError, ErrorCode, PreviewRequest, ScrubRequest},
    catalog::{CasError, Catalog, Versioned},
    config::Config,
    names::{BackupId, ClusterName, PlanName},
    nats::publish_once,
    object_store::ObjectStore,
    outcome::{publish_incident, Outcome},
    planning,
    records::{BackupRecord, BackupStatus, Policy},
    topology::{self, Topology},
    wire::{
        self, BackupRetention, CheckpointComplete, DecisionSummary, DeleteJob, Incident,
        MergeBackup, MergeJob, Message, PartialSummary, RetentionSweep,
    },
    Shutdown,
};

use crate::binlog::{self, BinlogInput, IndexState};
use crate::decisions::{self, RunDecision};
use crate::metrics::Metrics;
use crate::safety::{self, BreakerState, Envelope};
use crate::scrub::{self, ScrubReport};
use crate::view::{CatalogView, Members};

#[derive(Clone)]
pub struct Worker {
    topology: Topology,
    catalog: Catalog,
    /// The catalog as runs read it: brought up to date from the stream before each run
    /// ([`crate::view`]).
    view: Arc<CatalogView>,
    metrics: Arc<Metrics>,
    /// Reads the binlog indexes (never writes them: the deleter does).
    store: ObjectStore,
    prefix: String,
    /// When the last successful run of each cluster started (this replica's). A checkpoint or
    /// sweep published well before that is already covered: the run read a catalog that held
    /// the checkpoint's backup (the scheduler records a backup before it publishes the event).
    last_runs: Arc<std::sync::Mutex<std::collections::HashMap<ClusterName, DateTime<Utc>>>>,
    /// Compare-and-set conflicts met while marking or unmarking records, ever. A run that met
    /// one decided over a catalog that changed under it (a deleter took a mark off, a merge
    /// was recorded): it asks for another run of the cluster ([`Worker::rerun`]).
    conflicts: Arc<std::sync::atomic::AtomicU64>,
    /// The circuit breaker, its approvals and the audit trail (docs/safety.md).
    envelope: Arc<Envelope>,
}

/// How much earlier than a run's start an event must have been published to count as covered
/// by it: room for the clocks of the NATS server and this host to disagree. Skew beyond it only
/// makes an event run again, or (the other way) wait for the next event or sweep: retention
/// then keeps a backup longer, never deletes one sooner.
const COVERED_MARGIN: chrono::Duration = chrono::Duration::seconds(1);

/// Whether a run that started at `last_run` (if any) covers an event published at `published`.
fn is_covered(last_run: Option<DateTime<Utc>>, published: DateTime<Utc>) -> bool {
    last_run.is_some_and(|started| started >= published + COVERED_MARGIN)
}

/// The retention decision for one cluster/plan group.
#[derive(Debug, Serialize)]
pub struct GroupPlan {
    pub cluster: ClusterName,
    pub plan: PlanName,
    /// Why nothing is deleted in this group, when that is the case for a reason other than
    /// the policy (no policy, conflicting policies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_reason: Option<String>,
    /// The whole plan, every backup rendered: previews and `binlog.status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<sexton_retention::Plan>,
    /// The hash of the group's policy, as audit entries name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    /// The circuit breaker tripped on the decision: held (nothing is marked) unless a
    /// person's approval covers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerState>,
    /// What a run acts on ([`crate::decisions`]): runs only, instead of `decision` (which a
    /// run renders too only when it deletes something: the breaker and the audit judge it).
    #[serde(skip)]
    pub run: Option<RunDecision>,
    /// The group's records in the engine's form, shared with the catalog view ([`Members`]):
    /// a run reads the few it acts on whole from the catalog ([`Worker::record_at`]).
    #[serde(skip)]
    pub members: Arc<Members>,
    #[serde(skip)]
    pub policy: Option<Policy>,
}

impl GroupPlan {
    /// The binlog part of the group's plan, if it was planned.
    pub fn binlog(&self) -> Option<&sexton_retention::BinlogPlan> {
        match (&self.decision, &self.run) {
            (Some(plan), _) => Some(&plan.binlog),
            (None, Some(run)) => Some(&run.binlog),
            (None, None) => None,
        }
    }
}

/// How much of a group's plan to render: all of it (a preview), or what a run acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Render {
    Plan,
    Run,
}

impl Worker {
    pub fn new(
        topology: Topology,
        config: Config,
        metrics: Arc<Metrics>,
        store: ObjectStore,
    ) -> Worker {
        let envelope = Arc::new(Envelope::new(
            topology.jetstream.clone(),
            topology.breaker.clone(),
            config.breaker.clone(),
            metrics.clone(),
        ));
        Worker {
            catalog: Catalog::new(topology.catalog.clone()),
            view: Arc::new(CatalogView::new(topology.catalog.clone())),
            topology,
            metrics,
            store,
            prefix: config.s3.prefix,
            last_runs: Arc::default(),
            conflicts: Arc::default(),
            envelope,
        }
    }

    /// Whether a successful run of `cluster` started after `published` (with the margin).
    fn covered(&self, cluster: &ClusterName, published: DateTime<Utc>) -> bool {
        let last_runs = self.last_runs.lock().expect("last runs");
        is_covered(last_runs.get(cluster).copied(), published)
    }

    fn ran(&self, cluster: &ClusterName, started: DateTime<Utc>) {
        let mut last_runs = self.last_runs.lock().expect("last runs");
        let entry = last_runs.entry(cluster.clone()).or_insert(started);
        *entry = (*entry).max(started);
    }

    /// Handles one `checkpoint-complete` or `retention-sweep` message.
    pub async fn handle(&self, message: &jetstream::Message) -> Outcome {
        let (trigger, cluster, scrub) = if message.subject.contains(".retention.checkpoint.") {
            match wire::decode::<CheckpointComplete>(&message.payload) {
                Ok(event) => ("checkpoint", event.cluster, false),
                Err(err) => return Outcome::Poison(err.to_string()),
            }
        } else {
            match wire::decode::<RetentionSweep>(&message.payload) {
                Ok(event) => ("sweep", event.cluster, event.scrub),
                Err(err) => return Outcome::Poison(err.to_string()),
            }
        };
        // The scheduler's sweep asks for the cluster's scrub once per scrub interval: the
        // bucket first, so this very run counts only what is there. A bucket that cannot be
        // listed costs this scrub, not the run (the next interval scrubs again).
        if scrub {
            if let Err(err) = self.scrub(&cluster, false).await {
                tracing::warn!(%cluster, error = format!("{err:#}"), "scrub failed; retention runs on the catalog as it is");
            }
        }
        // Under a burst of completions the queue holds many checkpoints of one cluster; one run
        // covers every one published before it started.
        let published = message.info().ok().and_then(|info| {
            DateTime::from_timestamp(info.published.unix_timestamp(), info.published.nanosecond())
        });
        if published.is_some_and(|published| self.covered(&cluster, published)) {
            self.metrics
                .runs
                .with_label_values(&[trigger, "covered"])
                .inc();
            return Outcome::Done;
        }
        let started = Utc::now();
        let timer = self.metrics.run_duration.start_timer();
        let conflicts = self.conflicts.load(std::sync::atomic::Ordering::Relaxed);
        let result = self.run_cluster(&cluster, started).await;
        timer.observe_duration();
        let result = match result {
            Ok(()) if self.conflicts.load(std::sync::atomic::Ordering::Relaxed) != conflicts => {
                self.rerun(&cluster, started).await
            }
            other => other,
        };
        match result {
            Ok(()) => {
                self.ran(&cluster, started);
                self.metrics
                    .runs
                    .with_label_values(&[trigger, "done"])
                    .inc();
                Outcome::Done
            }
            Err(err) => {
                tracing::warn!(%cluster, error = format!("{err:#}"), "retention run failed; will retry");
                self.metrics
                    .runs
                    .with_label_values(&[trigger, "retry"])
                    .inc();
                Outcome::RetryAfter(Duration::from_secs(5))
            }
        }
    }

    /// Compares the cluster's catalog with its bucket (see [`crate::scrub`]) and, unless
    /// `dry_run`, writes what changed: `missing` records (with an incident each) and records
    /// found again. Only `checked` records whose revision did not move are written.
    pub async fn scrub(&self, cluster: &ClusterName, dry_run: bool) -> anyhow::Result<ScrubReport> {
        let records = self.catalog.list_cluster(cluster).await?;
        let listing: BTreeMap<String, u64> = self
            .store
            .list(&self.store.cluster_prefix(cluster))
            .await
            .map_err(|err| {
                self.metrics.scrubs.with_label_values(&["error"]).inc();
                anyhow::Error::new(err).context("listing the cluster's objects")
            })?
            .into_iter()
            .map(|object| (object.key, object.size.max(0) as u64))
            .collect();
        let binlog_prefix = sexton_shared::binlog::binlog_prefix(&self.prefix, cluster);
        let mut report = scrub::judge(cluster, &records, &listing, &binlog_prefix);
        report.dry_run = dry_run;
        if dry_run {
            return Ok(report);
        }
        let now = Utc::now();
        let by_id: BTreeMap<&str, &Versioned<BackupRecord>> =
            records.iter().map(|r| (r.value.id.as_str(), r)).collect();
        for finding in &report.findings {
            let Some(current) = by_id.get(finding.id.as_str()) else {
                continue;
            };
            let updated = scrub::apply(&current.value, finding, now);
            match self.catalog.update(&updated, finding.revision).await {
                Ok(_) if finding.becomes == BackupStatus::Missing => {
                    let reason = updated.last_error.clone().unwrap_or_default();
                    tracing::warn!(%cluster, backup = %finding.id, %reason, "backup missing: it no longer counts");
                    publish_incident(
                        &self.topology.jetstream,
                        wire::Incident {
                            schema_version: wire::SCHEMA_VERSION,
                            service: "retention-worker".into(),
                            kind: "backup-missing".into(),
                            cluster: Some(cluster.to_string()),
                            backup_id: Some(finding.id.clone()),
                            subject: "scrub".into(),
                            reason,
                            at: now,
                        },
                    )
                    .await;
                }
                Ok(_) => {
                    tracing::info!(%cluster, backup = %finding.id, "backup found again: its objects are there as recorded");
                }
                Err(CasError::Conflict) => report.changed_meanwhile.push(finding.id.clone()),
                Err(CasError::Other(err)) => return Err(err),
            }
        }
        // Written findings only: a changed record keeps its state until the next pass.
        for id in &report.changed_meanwhile {
            if let Some(finding) = report.findings.iter().find(|f| &f.id == id) {
                match finding.becomes {
                    BackupStatus::Missing => report.missing_after -= 1,
                    _ => report.missing_after += 1,
                }
            }
        }
        self.metrics
            .missing
            .with_label_values(&[cluster.as_str()])
            .set(report.missing_after as i64);
        self.metrics
            .last_scrub
            .with_label_values(&[cluster.as_str()])
            .set(now.timestamp());
        self.metrics.scrubs.with_label_values(&["done"]).inc();
        tracing::info!(%cluster, checked = report.checked, findings = report.findings.len(), unowned = report.unowned_objects, "scrub done");
        Ok(report)
    }

    /// Answers `catalog.scrub` requests until shutdown.
    pub async fn serve_scrubs(
        self,
        client: async_nats::Client,
        shutdown: Shutdown,
    ) -> anyhow::Result<()> {
        sexton_shared::api::serve_requests(
            client,
            "catalog",
            "scrub",
            shutdown,
            |req: ScrubRequest, _| {
                let worker = self.clone();
                async move { worker.scrub_and_recount(&req).await }
            },
        )
        .await
    }

    /// A scrub asked for by a user; one that changed something asks for a retention run of
    /// the cluster, so counting follows at once.
    async fn scrub_and_recount(&self, req: &ScrubRequest) -> Result<serde_json::Value, ApiError> {
        let report = self
            .scrub(&req.cluster, req.dry_run)
            .await
            .map_err(|err| ApiError::new(ErrorCode::Unavailable, format!("{err:#}")))?;
        let changed = !report.dry_run && report.findings.len() > report.changed_meanwhile.len();
        if changed {
            if let Err(err) = self.rerun(&req.cluster, Utc::now()).await {
                tracing::warn!(cluster = %req.cluster, error = format!("{err:#}"), "no retention run asked after the scrub");
            }
        }
        sexton_shared::api::reply_value(report)
    }

    /// Records a compare-and-set conflict; always `false` (nothing was marked).
    fn conflict(&self) -> bool {
        self.conflicts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        false
    }

    /// Asks for another run of `cluster`: this one met a record that changed under it, and
    /// what it left undecided must not wait for the next hourly sweep (a backup whose deleter
    /// took a partial mark off while this run marked it whole would stay). The event is
    /// published after this run started, so this run does not cover it; its message id names
    /// the run's start, so a redelivery of this run asks once.
    async fn rerun(&self, cluster: &ClusterName, started: DateTime<Utc>) -> anyhow::Result<()> {
        tracing::info!(%cluster, "the catalog changed under the run; another run asked for");
        let sweep = RetentionSweep {
            schema_version: wire::SCHEMA_VERSION,
            cluster: cluster.clone(),
            requested_at: Utc::now(),
            scrub: false,
        };
        publish_once(
            &self.topology.jetstream,
            topology::sweep_subject(cluster),
            &format!("rerun.{cluster}.{}", started.timestamp_micros()),
            wire::encode(&sweep),
        )
        .await
        .context("asking for another retention run")?;
        Ok(())
    }

    /// The plans for every group of `cluster` (or one plan), decided at `now`, with the
    /// cluster's binlog segments from its index.
    pub async fn plan_cluster(
        &self,
        cluster: &ClusterName,
        only_plan: Option<&PlanName>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<GroupPlan>> {
        let binlog = binlog::load(&self.store, &self.prefix, cluster).await;
        self.plan_groups(cluster, only_plan, now, &binlog, Render::Plan)
            .await
    }

    /// `binlog.status`: the index and the horizon every group's plan gives now.
    pub async fn binlog_status(
        &self,
        cluster: &ClusterName,
        now: DateTime<Utc>,
    ) -> anyhow::Result<binlog::Status> {
        let input = binlog::load(&self.store, &self.prefix, cluster).await;
        let groups = self
            .plan_groups(cluster, None, now, &input, Render::Plan)
            .await?;
        Ok(binlog::status(cluster, &input, &groups, now))
    }

    /// The plans of `cluster`'s groups over the catalog view and the binlog segments of
    /// `binlog`: the schedules first, then the catalog brought up to date.
    async fn plan_groups(
        &self,
        cluster: &ClusterName,
        only_plan: Option<&PlanName>,
        now: DateTime<Utc>,
        binlog: &BinlogInput,
        render: Render,
    ) -> anyhow::Result<Vec<GroupPlan>> {
        let schedules = planning::load_schedules(&self.topology.schedules, cluster).await?;
        let policies = planning::group_policies(&schedules);
        let mut view = self.view.current(cluster).await?;
        let refresh = view.last_refresh;
        tracing::debug!(%cluster, records = view.len(), ?refresh, "catalog view current");
        let mut plans = Vec::new();
        for group in view.groups_mut() {
            if only_plan.is_some_and(|p| *p != group.plan) {
                continue;
            }
            let policy = planning::policy_for(&policies, &group.plan);
            if policy.is_ok() {
                // Before the plan shares the members: set while a run still holds them, the
                // segments would copy the whole group.
                Arc::make_mut(&mut group.members).engine.binlog_segments = binlog.segments();
            }
            let mut plan = GroupPlan {
                cluster: cluster.clone(),
                plan: group.plan.clone(),
                hold_reason: None,
                decision: None,
                policy_hash: None,
                breaker: None,
                run: None,
                members: group.members.clone(),
                policy: None,
            };
            let members = &*group.members;
            match policy {
                Err(reason) => plan.hold_reason = Some(reason),
                Ok(policy) => {
                    plan.policy = Some(policy.clone());
                    plan.policy_hash = Some(safety::hash_of(Some(policy)));
                    match sexton_retention::evaluate(&members.engine, policy, now) {
                        Ok(evaluation) => {
                            match render {
                                Render::Plan => plan.decision = Some(evaluation.to_plan()),
                                Render::Run => plan.run = Some(decisions::for_run(&evaluation)),
                            }
                            // A plan that deletes is judged by the circuit breaker, and a run
                            // that marks stores every verdict in the audit first: both read
                            // the whole plan, rendered only then.
                            let deletes = match (&plan.decision, &plan.run) {
                                (Some(owned), _) => {
                                    !owned.delete.is_empty() || !owned.partial.is_empty()
                                }
                                (None, Some(run)) => {
                                    !run.delete.is_empty() || !run.partial.is_empty()
                                }
                                (None, None) => false,
                            };
                            if deletes {
                                let owned =
                                    plan.decision.get_or_insert_with(|| evaluation.to_plan());
                                let limits = self.envelope.limits(&schedules, &plan.plan, now);
                                plan.breaker = self
                                    .envelope
                                    .judge(
                                        cluster,
                                        &plan.plan,
                                        &limits,
                                        &members.engine,
                                        owned,
                                        now,
                                    )
                                    .await;
                            }
                        }
                        Err(err) => {
                            plan.hold_reason = Some(format!(
                                "retention refused to plan: {err}; keeping everything"
                            ))
                        }
                    }
                }
            }
            plans.push(plan);
        }
        Ok(plans)
    }

    async fn run_cluster(&self, cluster: &ClusterName, now: DateTime<Utc>) -> anyhow::Result<()> {
        let binlog = binlog::load(&self.store, &self.prefix, cluster).await;
        let groups = self
            .plan_groups(cluster, None, now, &binlog, Render::Run)
            .await?;
        for group in &groups {
            self.metrics
                .last_run
                .with_label_values(&[cluster.as_str(), group.plan.as_str()])
                .set(now.timestamp());
            self.observe_group(group, now);
            let Some(decision) = &group.run else {
                if let Some(reason) = &group.hold_reason {
                    tracing::info!(%cluster, plan = %group.plan, reason, "retention keeps everything");
                }
                self.expire_user_requests(group, &[], &[], now).await?;
                continue;
            };
            let policy_hash = group.policy_hash.clone().unwrap_or_default();
            match &group.breaker {
                // Held: nothing of the plan is marked; users' own requests still go.
                Some(breaker) if breaker.held => {
                    self.envelope
                        .hold(cluster, &group.plan, breaker, &policy_hash)
                        .await;
                    let marked = self.expire_user_requests(group, &[], &[], now).await?;
                    self.envelope
                        .record_marks(cluster, &group.plan, &policy_hash, marked)
                        .await;
                    continue;
                }
                Some(breaker) => self.envelope.release(cluster, &group.plan, breaker).await?,
                None => self.envelope.passed(cluster, &group.plan),
            }
            // The decision is in the audit before anything of it is marked.
            if let Some(owned) = group
                .decision
                .as_ref()
                .filter(|_| !decision.delete.is_empty() || !decision.partial.is_empty())
            {
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
                if self.expire(record, &reasons, &policy_hash).await? {
                    self.metrics
                        .decisions
                        .with_label_values(&["delete", Reason::label_of_first(&delete.reasons)])
                        .inc();
                    marked.push(safety::marked(&record.value, &reasons, &[], &policy_hash));
                    deleting.push(DecisionSummary {
                        id: delete.id.clone(),
                        reasons,
                    });
                }
            }
            // Volumes marked by an earlier run that this plan keeps (a new dependent, a new
            // policy) lose their mark, unless a deleter has claimed them already.
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
                if self
                    .expire_volumes(record, &volumes, &reasons, &policy_hash)
                    .await?
                {
                    self.metrics
                        .decisions
                        .with_label_values(&["partial", Reason::label_of_first(&partial.reasons)])
                        .inc();
                    marked.push(safety::marked(
                        &record.value,
                        &reasons,
                        &volumes,
                        &policy_hash,
                    ));
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
            // Users' requests are judged after the plan's own deletions: a requested backup
            // that only a backup this run expired still needed (a deleted middle backup whose
            // dependents the plan just let go) goes now, not at the next run.
            marked.extend(
                self.expire_user_requests(group, &deleting, &trimming, now)
                    .await?,
            );
            self.envelope
                .record_marks(cluster, &group.plan, &policy_hash, marked)
                .await;
            if !deleting.is_empty() || !trimming.is_empty() {
                tracing::info!(
                    %cluster,
                    plan = %group.plan,
                    kept = decision.n_keep,
                    deleting = deleting.len(),
                    partial = trimming.len(),
                    "retention decided"
                );
                let event = BackupRetention {
                    schema_version: wire::SCHEMA_VERSION,
                    cluster: cluster.clone(),
                    plan: group.plan.clone(),
                    at: now,
                    keep: decision.keep_newest.clone(),
                    n_keep: Some(decision.n_keep),
                    delete: deleting,
                    partial: trimming,
                };
                let published = self
                    .topology
                    .jetstream
                    .publish(
                        topology::event_subject("retention", cluster.as_str()),
                        wire::encode(&event),
                    )
                    .await;
                if let Err(err) = published {
                    tracing::warn!(error = %err, "retention event not published");
                }
            }
        }
        self.publish_binlog(cluster, &groups, &binlog).await
    }

    /// After the backups are marked: one binlog job for the cluster, if every group's plan
    /// gives a horizon and the index could be read.
    async fn publish_binlog(
        &self,
        cluster: &ClusterName,
        groups: &[GroupPlan],
        binlog: &BinlogInput,
    ) -> anyhow::Result<()> {
        match &binlog.state {
            IndexState::Ok { .. } | IndexState::Missing => {}
            IndexState::Malformed { error } => {
                publish_incident(
                    &self.topology.jetstream,
                    Incident {
                        schema_version: wire::SCHEMA_VERSION,
                        service: "retention-worker".into(),
                        kind: "binlog-index-malformed".into(),
                        cluster: Some(cluster.to_string()),
                        backup_id: None,
                        subject: binlog.key.clone(),
                        reason: format!("{error}; binlog segments are kept until it is fixed"),
                        at: Utc::now(),
                    },
                )
                .await;
                return Ok(());
            }
            IndexState::Unavailable { error } => {
                tracing::warn!(%cluster, error, "binlog index not read; no binlog gc this run");
                return Ok(());
            }
        }
        let decision = match binlog::decide(groups) {
            Ok(decision) => decision,
            Err(why) => {
                tracing::debug!(%cluster, reason = %why, "no binlog gc");
                return Ok(());
            }
        };
        for (message_id, job) in binlog::jobs(cluster, &decision, binlog.etag()) {
            publish_once(
                &self.topology.jetstream,
                topology::binlog_job_subject(cluster),
                &message_id,
                wire::encode(&job),
            )
            .await?;
            self.metrics
                .jobs_published
                .with_label_values(&["binlog"])
                .inc();
        }
        if !decision.delete.is_empty() {
            tracing::info!(%cluster, horizon = %decision.horizon, segments = decision.delete.len(), "binlog gc job published");
        }
        Ok(())
    }

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
                .filter(|b| b.verification == sexton_shared::records::VerificationState::Verified)
                .filter_map(|b| b.completed_at)
                .max();
            self.metrics
                .last_verified
                .with_label_values(&[group.cluster.as_str(), group.plan.as_str()])
                .set(proven.map_or(0.0, |t| t.timestamp() as f64));
        }
        let oldest_full = match &group.run {
            Some(run) => run.oldest_kept_full,
            // Not planned: everything is kept.
            None => backups
                .iter()
                .filter(|b| b.status == BackupStatus::Completed)
                .filter(|b| b.kind == sexton_retention::BackupKind::Full || !b.volumes.is_empty())
                .filter_map(|b| b.started_at.or(b.completed_at))
                .min(),
        };
        if let Some(oldest) = oldest_full {
            self.metrics
                .recoverable_window
                .with_label_values(&[group.cluster.as_str(), group.plan.as_str()])
                .set((now - oldest.with_timezone(&Utc)).num_milliseconds() as f64 / 1e3);
        }
    }

    /// The record at `index` of `group`, read whole from the catalog: the view keeps only its
    /// engine form ([`crate::view`]). Only the revision the run planned on is returned, so the
    /// record is the one the plan was made over. One changed or removed since is `None`; if
    /// the caller `writes` it, that is a compare-and-set conflict (another run is asked for),
    /// as a write on the planned revision would have been; a caller that only reads it (a job
    /// published again, a merge) leaves it to the next run, the change being newer.
    async fn record_at(
        &self,
        group: &GroupPlan,
        index: usize,
        writes: bool,
    ) -> anyhow::Result<Option<Versioned<BackupRecord>>> {
        let id: BackupId = group.members.id(index)?;
        let planned = group.members.entries[index].revision;
        match self.catalog.get(&group.cluster, &id).await? {
            Some(record) if record.revision == planned => Ok(Some(record)),
            _ => {
                if writes {
                    self.conflict();
                }
                Ok(None)
            }
        }
    }

    /// Marks one backup expiring (if it is not already) and publishes its delete job. Returns
    /// whether a job is now on its way.
    async fn expire(
        &self,
        record: &Versioned<BackupRecord>,
        reasons: &[String],
        policy_hash: &str,
    ) -> anyhow::Result<bool> {
        // A user who asks again after a deletion failed retries it.
        let markable = match record.value.status {
            BackupStatus::Completed | BackupStatus::Failed => true,
            // Only a user's word deletes these (the plan keeps a missing backup otherwise).
            BackupStatus::DeleteFailed | BackupStatus::Missing => {
                record.value.delete_request.is_some()
            }
            _ => false,
        };
        let revision = match record.value.status {
            _ if markable => {
                let mut marked = record.value.clone();
                marked.status = BackupStatus::Expiring;
                marked.expired_from = Some(match record.value.status {
                    BackupStatus::Failed => BackupStatus::Failed,
                    BackupStatus::Missing => BackupStatus::Missing,
                    _ => BackupStatus::Completed,
                });
                marked.delete_reasons = reasons.to_vec();
                marked.delete_policy = Some(policy_hash.to_string());
                match self.catalog.update(&marked, record.revision).await {
                    Ok(revision) => {
                        tracing::info!(cluster = %record.value.cluster, plan = %record.value.plan, backup = %record.value.id, reasons = ?reasons, policy = policy_hash, "backup marked expiring");
                        revision
                    }
                    // Changed since we read it: the next run decides again with the new state.
                    Err(CasError::Conflict) => return Ok(self.conflict()),
                    Err(CasError::Other(err)) => return Err(err),
                }
            }
            // Marked by an earlier run whose job may have been lost: publish it again; the
            // message id makes a second copy a no-op.
            BackupStatus::Expiring => record.revision,
            _ => return Ok(false),
        };
        let job = DeleteJob {
            schema_version: wire::SCHEMA_VERSION,
            cluster: record.value.cluster.clone(),
            backup_id: record.value.id.clone(),
            uid: record.value.uid.clone(),
            revision,
            reasons: reasons.to_vec(),
            volumes: Vec::new(),
        };
        publish_once(
            &self.topology.jetstream,
            topology::delete_job_subject(&record.value.cluster),
            &format!("del.{}.{}", record.value.uid, revision),
            wire::encode(&job),
        )
        .await?;
        self.metrics
            .jobs_published
            .with_label_values(&["backup"])
            .inc();
        Ok(true)
    }

    /// Takes the `expiring` mark off the volumes of `record` that `decision` keeps.
    async fn unmark_kept_volumes(
        &self,
        record: &Versioned<BackupRecord>,
        decision: &sexton_retention::Decision,
    ) -> anyhow::Result<()> {
        let current = &record.value;
        let stale = |name: &str| decision.volumes_keep.iter().any(|v| v.name == name);
        if current.volume_deletion.is_some()
            || !current.volumes.iter().any(|v| v.expiring && stale(&v.name))
        {
            return Ok(());
        }
        let mut unmarked = current.clone();
        for volume in &mut unmarked.volumes {
            if stale(&volume.name) {
                volume.expiring = false;
            }
        }
        match self.catalog.update(&unmarked, record.revision).await {
            Ok(_) => {
                tracing::info!(cluster = %current.cluster, backup = %current.id, "kept after all: volume marks taken off");
                Ok(())
            }
            // Changed since we read it: the next run decides again.
            Err(CasError::Conflict) => {
                self.conflict();
                Ok(())
            }
            Err(CasError::Other(err)) => Err(err),
        }
    }

    /// Marks the volumes a partial verdict deletes `expiring` (the record stays `completed`:
    /// its other volumes remain restorable) and publishes a delete job naming them. Returns
    /// whether a job is now on its way. A backup a user asked to delete, one already being
    /// deleted whole, or one whose partial deletion the deleter has claimed is left alone.
    async fn expire_volumes(
        &self,
        record: &Versioned<BackupRecord>,
        volumes: &[String],
        reasons: &[String],
        policy_hash: &str,
    ) -> anyhow::Result<bool> {
        let current = &record.value;
        if volumes.is_empty()
            || current.status != BackupStatus::Completed
            || current.delete_request.is_some()
            || current.volume_deletion.is_some()
            || planning::protection(current).is_some()
        {
            return Ok(false);
        }
        let already = current
            .volumes
            .iter()
            .filter(|v| volumes.contains(&v.name))
            .all(|v| v.expiring);
        let revision = if already {
            // Marked by an earlier run whose job may have been lost: publish it again.
            record.revision
        } else {
            let mut marked = current.clone();
            for volume in &mut marked.volumes {
                if volumes.contains(&volume.name) {
                    volume.expiring = true;
                }
            }
            marked.delete_reasons = reasons.to_vec();
            marked.delete_policy = Some(policy_hash.to_string());
            match self.catalog.update(&marked, record.revision).await {
                Ok(revision) => {
                    tracing::info!(cluster = %current.cluster, plan = %current.plan, backup = %current.id, volumes = ?volumes, reasons = ?reasons, policy = policy_hash, "volumes marked expiring");
                    revision
                }
                Err(CasError::Conflict) => return Ok(self.conflict()),
                Err(CasError::Other(err)) => return Err(err),
            }
        };
        let job = DeleteJob {
            schema_version: wire::SCHEMA_VERSION,
            cluster: current.cluster.clone(),
            backup_id: current.id.clone(),
            uid: current.uid.clone(),
            revision,
            reasons: reasons.to_vec(),
            volumes: volumes.to_vec(),
        };
        publish_once(
            &self.topology.jetstream,
            topology::delete_job_subject(&current.cluster),
            &format!("del.{}.{}", current.uid, revision),
            wire::encode(&job),
        )
        .await?;
        self.metrics
            .jobs_published
            .with_label_values(&["volumes"])
            .inc();
        Ok(true)
    }

    /// One merge job per merge the plan asks for (`chain_mode: merge`), for the executors:
    /// whole-backup merges and, on schedules with volumes, one job per volume chain.
    /// Nothing is deleted here: the plan keeps the sources (`merge into <target> pending`)
    /// until the scheduler has recorded the target (or the target's volume) as a synthetic
    /// full. The message id names the target's and the sources' uids (and the volume), so a
    /// re-run within the duplicate window publishes nothing new; after it, a job still pending
    /// is asked for again (merging is idempotent).
    async fn publish_merges(
        &self,
        group: &GroupPlan,
        merges: &[sexton_retention::Merge],
        volume_merges: &[sexton_retention::VolumeMerge],
    ) -> anyhow::Result<()> {
        if merges.is_empty() && volume_merges.is_empty() {
            return Ok(());
        }
        // Merge jobs of this cluster still waiting (no executor has taken them yet): ask for
        // nothing more, so a fleet without a merging executor does not pile up a job per
        // merge per run in the work queue. What is still missing is asked for once they drain.
        let subject = topology::merge_job_subject(&group.cluster);
        let mut waiting = self
            .topology
            .jetstream
            .get_stream(topology::STREAM_JOBS)
            .await
            .context("opening the jobs stream")?
            .info_with_subjects(&subject)
            .await
            .context("counting waiting merge jobs")?;
        while let Some((_, count)) = waiting
            .try_next()
            .await
            .context("counting waiting merge jobs")?
        {
            if count > 0 {
                tracing::info!(cluster = %group.cluster, waiting = count, "merge jobs still waiting for an executor; none added");
                return Ok(());
            }
        }
        // The records the merges name, whole (a job carries their uids and keys); one changed
        // since the plan is left out, and its merge is asked for by the next run, which plans
        // over the change.
        let mut fetched: Vec<Versioned<BackupRecord>> = Vec::new();
        let named: std::collections::BTreeSet<&str> = merges
            .iter()
            .map(|merge| (&merge.target, &merge.sources))
            .chain(
                volume_merges
                    .iter()
                    .map(|merge| (&merge.target, &merge.sources)),
            )
            .flat_map(|(target, sources)| sources.iter().chain([target]))
            .map(String::as_str)
            .collect();
        let indexes: Vec<usize> = (group.members.engine.backups.iter().enumerate())
            .filter(|(_, backup)| named.contains(backup.id.as_str()))
            .map(|(index, _)| index)
            .collect();
        for index in indexes {
            if let Some(record) = self.record_at(group, index, false).await? {
                fetched.push(record);
            }
        }
        let by_id: BTreeMap<&str, &Versioned<BackupRecord>> =
            fetched.iter().map(|r| (r.value.id.as_str(), r)).collect();
        let by_id = &by_id;
        let whole = merges
            .iter()
            .map(|merge| (None, &merge.target, &merge.sources));
        let volumes = volume_merges
            .iter()
            .map(|merge| (Some(merge.volume.as_str()), &merge.target, &merge.sources));
        for (volume, target, sources) in whole.chain(volumes) {
            let job = match merge_job(group, by_id, volume, target, sources) {
                Ok(job) => job,
                Err(why) => {
                    tracing::info!(cluster = %group.cluster, %target, volume, why, "merge not asked for");
                    continue;
                }
            };
            // The sources are one chain ending at the target's parent (validated): the first
            // and the last with their count name it.
            let first = &job.sources[0].uid;
            let last = &job.sources[job.sources.len() - 1].uid;
            let id = match volume {
                None => format!(
                    "merge.{}.{}.{first}.{last}.{}",
                    group.cluster,
                    job.target.uid,
                    job.sources.len()
                ),
                Some(volume) => format!(
                    "merge.{}.{}.{volume}.{first}.{last}.{}",
                    group.cluster,
                    job.target.uid,
                    job.sources.len()
                ),
            };
            publish_once(
                &self.topology.jetstream,
                subject.clone(),
                &id,
                wire::encode(&job),
            )
            .await?;
            tracing::info!(cluster = %group.cluster, %target, volume, ?sources, "merge job published");
        }
        Ok(())
    }

    /// Marks the backups users asked to delete (`sexton backup delete`) once nothing kept
    /// needs them, or at once when forced; the deleter judges them again the same way
    /// ([`planning::may_go`]). A request on a backup whose deletion failed is a retry.
    /// `expired` and `trimmed` list the backups and volumes this run has just marked expiring:
    /// they are judged as such (the group's snapshot was read before).
    async fn expire_user_requests(
        &self,
        group: &GroupPlan,
        expired: &[DecisionSummary],
        trimmed: &[PartialSummary],
        now: DateTime<Utc>,
    ) -> anyhow::Result<Vec<sexton_shared::audit::AuditBackup>> {
        let mut marked = Vec::new();
        let policy_hash = safety::hash_of(group.policy.as_ref());
        let members = &*group.members;
        let indexes: Vec<usize> = (members.engine.backups.iter().zip(&members.entries))
            .enumerate()
            .filter(|(_, (_, entry))| entry.delete_request)
            // `planning::protection`, on the engine form it is made from.
            .filter(|(_, (backup, _))| sexton_retention::judge::protection(backup).is_none())
            .filter(|(_, (backup, _))| {
                matches!(
                    backup.status,
                    BackupStatus::Completed
                        | BackupStatus::Failed
                        | BackupStatus::DeleteFailed
                        | BackupStatus::Expiring
                        | BackupStatus::Missing
                )
            })
            .map(|(index, _)| index)
            .collect();
        if indexes.is_empty() {
            return Ok(marked);
        }
        // The requests as they were asked: each record whole, at the revision planned on (one
        // changed since counts as a conflict, as the mark of a request that may go would).
        let mut candidates: Vec<Versioned<BackupRecord>> = Vec::with_capacity(indexes.len());
        for index in indexes {
            if let Some(record) = self.record_at(group, index, true).await? {
                candidates.push(record);
            }
        }
        // The group as this run left it: one pass, the run's marks looked up by id.
        let expired: std::collections::HashSet<&str> =
            expired.iter().map(|e| e.id.as_str()).collect();
        let trimmed: std::collections::HashMap<&str, &[String]> = trimmed
            .iter()
            .map(|t| (t.id.as_str(), t.volumes_delete.as_slice()))
            .collect();
        let all: Vec<sexton_retention::judge::Member> = (members.engine.backups.iter())
            .zip(&members.entries)
            .map(|(backup, entry)| {
                let mut record = backup.clone();
                if expired.contains(backup.id.as_str()) {
                    record.status = BackupStatus::Expiring;
                } else if let Some(volumes_delete) = trimmed.get(backup.id.as_str()) {
                    for volume in &mut record.volumes {
                        volume.expiring |= volumes_delete.contains(&volume.name);
                    }
                }
                sexton_retention::judge::Member {
                    record,
                    expired_from: entry.expired_from,
                }
            })
            .collect();
        let judged: Vec<&BackupRecord> = candidates.iter().map(|r| &r.value).collect();
        let answers = planning::may_go_members(&all, &judged, Err("unused"), now);
        for (record, answer) in candidates.iter().zip(answers) {
            match answer {
                Ok(()) => {
                    let forced = record
                        .value
                        .delete_request
                        .as_ref()
                        .is_some_and(|r| r.force);
                    let reason = if forced {
                        "delete requested by a user (forced)"
                    } else {
                        "delete requested by a user"
                    };
                    let reasons = [reason.to_string()];
                    if self.expire(record, &reasons, &policy_hash).await? {
                        self.metrics
                            .decisions
                            .with_label_values(&["delete", "user"])
                            .inc();
                        marked.push(safety::marked(&record.value, &reasons, &[], &policy_hash));
                    }
                }
                Err(why) => {
                    tracing::info!(cluster = %group.cluster, backup = %record.value.id, why, "user delete deferred")
                }
            }
        }
        Ok(marked)
    }

    /// `retention.approve`: plans the group now and, if the breaker holds it, stores a
    /// person's approval of exactly what it would delete and asks for a run at once.
    pub async fn approve(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        actor: sexton_shared::audit::Actor,
    ) -> Result<serde_json::Value, ApiError> {
        let now = Utc::now();
        let unavailable =
            |err: anyhow::Error| ApiError::new(ErrorCode::Unavailable, format!("{err:#}"));
        let groups = self
            .plan_cluster(cluster, Some(plan), now)
            .await
            .map_err(unavailable)?;
        let Some(group) = groups.into_iter().next() else {
            return Err(safety::nothing_held(
                cluster,
                plan,
                "the group has no backups",
            ));
        };
        let Some(state) = group.breaker.as_ref() else {
            return Err(safety::nothing_held(
                cluster,
                plan,
                group
                    .hold_reason
                    .as_deref()
                    .unwrap_or("the breaker does not trip on its plan now"),
            ));
        };
        let record = self
            .envelope
            .approve(cluster, plan, state, actor, now)
            .await
            .map_err(unavailable)?;
        self.rerun(cluster, now).await.map_err(unavailable)?;
        serde_json::to_value(&record)
            .map_err(|err| ApiError::new(ErrorCode::Unavailable, err.to_string()))
    }

    /// Answers `retention.preview` requests until shutdown.
    pub async fn serve_previews(
        self,
        client: async_nats::Client,
        shutdown: Shutdown,
    ) -> anyhow::Result<()> {
        sexton_shared::api::serve_requests(
            client,
            "retention",
            "preview",
            shutdown,
            |req: PreviewRequest, _| {
                let worker = self.clone();
                async move {
                    let plans = worker
                        .plan_cluster(&req.cluster, req.plan.as_ref(), Utc::now())
                        .await
                        .map_err(|err| ApiError::new(ErrorCode::Unavailable, format!("{err:#}")))?;
                    sexton_shared::api::reply_value(plans)
                }
            },
        )
        .await
    }
}

/// The merge job for `target` and `sources` (backup ids, oldest first) as the catalog has them
/// now: of the whole backups, or of one volume's artifacts. `Err` says why none is asked for:
/// a backup gone, not settled, or (for a volume) without that volume's artifact, or a chain
/// that no longer holds together.
fn merge_job(
    group: &GroupPlan,
    by_id: &BTreeMap<&str, &Versioned<BackupRecord>>,
    volume: Option<&str>,
    target: &str,
    sources: &[String],
) -> Result<MergeJob, String> {
    let mut backups = Vec::with_capacity(sources.len() + 1);
    for id in sources.iter().map(String::as_str).chain([target]) {
        let Some(record) = by_id.get(id) else {
            return Err(format!("backup {id} is gone"));
        };
        let record = &record.value;
        if record.status != BackupStatus::Completed {
            return Err(format!("backup {id} is {:?}", record.status));
        }
        let (parent, artifacts) = match volume {
            // Only whole backups without volumes are merged whole.
            None if record.volumes.is_empty() => (record.parent.clone(), record.artifacts.clone()),
            None => return Err(format!("backup {id} has volumes")),
            Some(name) => {
                let Some(artifact) = record.volumes.iter().find(|v| v.name == name) else {
                    return Err(format!("backup {id} has no volume {name}"));
                };
                if artifact.expiring || artifact.keys.is_empty() {
                    return Err(format!("volume {name} of backup {id} is being deleted"));
                }
                let parent = match &artifact.parent {
                    None => None,
                    Some(parent) => Some(parent.parse().map_err(|e| format!("{e}"))?),
                };
                (parent, artifact.keys.clone())
            }
        };
        backups.push(MergeBackup {
            id: record.id.clone(),
            uid: record.uid.clone(),
            backup_name: record.backup_name.clone(),
            parent,
            artifacts,
        });
    }
    let target = backups.pop().expect("the target was pushed last");
    let job = MergeJob {
        schema_version: wire::SCHEMA_VERSION,
        cluster: group.cluster.clone(),
        plan: group.plan.clone(),
        target,
        sources: backups,
        volume: volume.map(str::to_owned),
    };
    job.validate()?;
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_covered_only_by_a_run_that_started_well_after_it() {
        let at: DateTime<Utc> = "2026-03-01T12:00:00Z".parse().unwrap();
        let ms = chrono::Duration::milliseconds;
        assert!(!is_covered(None, at), "no run yet");
        assert!(!is_covered(Some(at - ms(5)), at), "a run before the event");
        assert!(!is_covered(Some(at), at), "a run at the same instant");
        assert!(
            !is_covered(Some(at + ms(999)), at),
            "inside the clock margin"
        );
        assert!(is_covered(Some(at + ms(1000)), at));
        assert!(is_covered(Some(at + ms(60_000)), at));
    }
}
