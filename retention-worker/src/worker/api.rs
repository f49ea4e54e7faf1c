//! The worker's answers to requests: `retention.preview` (the plans, nothing marked),
//! `catalog.scrub` and the scrub itself (which a sweep asks for too: the catalog against the
//! bucket's listing, judged by [`crate::scrub`], the findings written with compare-and-set),
//! and the planning half of `retention.approve` (the breaker's half is [`crate::safety`]).
//! Retention runs are not started here, only asked for ([`Worker::rerun`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sexton_model::{
    copies::CopyState,
    names::{ClusterName, LocationName, PlanName},
    records::{BackupRecord, BackupStatus},
    wire,
};
use sexton_shared::{
    api::{ApiError, ApproveRequest, ErrorCode, PreviewRequest, ScrubRequest, StatusRequest},
    audit::{AuditEvent, TamperedEntry},
    catalog::{CasError, Versioned},
    outcome::publish_incident,
    Shutdown,
};

use super::Worker;
use crate::safety;
use crate::scrub::{self, ScrubReport};

impl Worker {
    /// Compares the cluster's catalog with its bucket (see [`crate::scrub`]) and, unless
    /// `dry_run`, writes what changed: `missing` records (with an incident each) and records
    /// found again. Only `checked` records whose revision did not move are written.
    pub async fn scrub(&self, cluster: &ClusterName, dry_run: bool) -> anyhow::Result<ScrubReport> {
        let records = self.catalog.list_cluster(cluster).await?;
        let mut report = self.judge_primary(cluster, &records, dry_run).await?;
        self.judge_locations(cluster, &records, &mut report).await;
        if dry_run {
            return Ok(report);
        }
        self.write_copy_findings(cluster, &records, &mut report)
            .await?;
        let now = Utc::now();
        self.report_tampering(cluster, &report, now).await;
        self.write_findings(cluster, &records, &mut report, now)
            .await?;
        recount_missing(&mut report);
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

    /// The scrub's first step: the cluster's records at primary against primary's listing.
    /// A listing that fails fails the scrub (counted as an `error`).
    async fn judge_primary(
        &self,
        cluster: &ClusterName,
        records: &[Versioned<BackupRecord>],
        dry_run: bool,
    ) -> anyhow::Result<ScrubReport> {
        let failed = |err: sexton_shared::object_store::ObjectError| {
            self.metrics.scrubs.with_label_values(&["error"]).inc();
            anyhow::Error::new(err).context("listing the cluster's objects")
        };
        let prefix = self.store.cluster_prefix(cluster);
        // A versioned bucket is listed version by version: the recorded versions are what
        // counts, whatever was written over them (issue 29).
        let (listing, versions) = list_for_scrub(&self.store, &prefix).await.map_err(failed)?;
        let binlog_prefix = sexton_shared::binlog::binlog_prefix(&self.prefix, cluster);
        // Records of another store (issue 54) are not judged by this bucket's listing: their
        // objects are where they were written, not missing.
        let (elsewhere, here): (Vec<_>, Vec<_>) = records
            .iter()
            .cloned()
            .partition(|record| record.value.stranded_from(self.store.place()).is_some());
        let mut report = scrub::judge(cluster, &here, &listing, versions.as_ref(), &binlog_prefix);
        report.dry_run = dry_run;
        report.elsewhere = elsewhere.len();
        Ok(report)
    }

    /// Each location's copies against that location's own listing: a copy gone at one place
    /// stops counting there, and nowhere else. A versioned location (Object Lock) is judged by
    /// the versions the copier recorded, as primary is (issue 47). A location that cannot be
    /// listed is named in the report and judged next pass.
    async fn judge_locations(
        &self,
        cluster: &ClusterName,
        records: &[Versioned<BackupRecord>],
        report: &mut ScrubReport,
    ) {
        for (name, store) in &self.locations {
            match list_for_scrub(store, &store.cluster_prefix(cluster)).await {
                Ok((listing, versions)) => {
                    // Copies written to another store than the location's now (issue 54)
                    // are not judged by its listing.
                    let there: Vec<_> = records
                        .iter()
                        .filter(|r| r.value.copy_stranded_from(name, store.place()).is_none())
                        .cloned()
                        .collect();
                    let found = scrub::judge_copies(
                        &there,
                        name,
                        &listing,
                        versions.as_ref(),
                        &mut report.tampered,
                    );
                    report.copies.extend(found);
                }
                Err(err) => {
                    tracing::warn!(%cluster, location = %name, error = %err, "cannot list the location; its copies are judged next pass");
                    report.locations_unchecked.push(name.to_string());
                }
            }
        }
    }

    /// Writes what the scrub found of the copies (compare-and-set on each record): a copy
    /// missing is an incident, one found whole again is logged; a record changed meanwhile is
    /// left to the next pass.
    async fn write_copy_findings(
        &self,
        cluster: &ClusterName,
        records: &[Versioned<BackupRecord>],
        report: &mut ScrubReport,
    ) -> anyhow::Result<()> {
        let now_copies = Utc::now();
        for finding in &report.copies {
            let Some(current) = records.iter().find(|r| r.value.id.as_str() == finding.id) else {
                continue;
            };
            let updated = scrub::apply_copy(&current.value, finding);
            match self.catalog.update(&updated, finding.revision).await {
                Ok(_) if finding.becomes == CopyState::Missing => {
                    let reason = format!(
                        "the copy of backup {} at {} no longer counts there: {}",
                        finding.id,
                        finding.location,
                        finding.problems.join("; ")
                    );
                    tracing::warn!(%cluster, backup = %finding.id, location = %finding.location, %reason, "copy missing");
                    publish_incident(
                        &self.topology.jetstream,
                        wire::Incident {
                            schema_version: wire::SCHEMA_VERSION,
                            service: "retention-worker".into(),
                            kind: "copy-missing".into(),
                            cluster: Some(cluster.to_string()),
                            backup_id: Some(finding.id.clone()),
                            subject: "scrub".into(),
                            reason,
                            at: now_copies,
                        },
                    )
                    .await;
                }
                Ok(_) => {
                    tracing::info!(%cluster, backup = %finding.id, location = %finding.location, "copy found whole again");
                }
                Err(CasError::Conflict) => report
                    .changed_meanwhile
                    .push(format!("{} at {}", finding.id, finding.location)),
                Err(CasError::Other(err)) => return Err(err),
            }
        }
        Ok(())
    }

    /// Says what was tampered with (issue 29): an incident each, one audit entry for them
    /// all, and the cluster's gauge.
    async fn report_tampering(
        &self,
        cluster: &ClusterName,
        report: &ScrubReport,
        now: DateTime<Utc>,
    ) {
        for tampered in &report.tampered {
            let (what, kind) = match &tampered.location {
                None => (format!("backup {}", tampered.id), "backup-tampered"),
                Some(location) => (
                    format!("the copy of backup {} at {location}", tampered.id),
                    "copy-tampered",
                ),
            };
            let reason = format!(
                "{what} was tampered with behind Sexton's back; its recorded versions are \
                 all still there, so it still counts: {}",
                tampered.problems.join("; ")
            );
            tracing::warn!(%cluster, backup = %tampered.id, location = ?tampered.location, %reason, "backup tampered with");
            publish_incident(
                &self.topology.jetstream,
                wire::Incident {
                    schema_version: wire::SCHEMA_VERSION,
                    service: "retention-worker".into(),
                    kind: kind.into(),
                    cluster: Some(cluster.to_string()),
                    backup_id: Some(tampered.id.clone()),
                    subject: "scrub".into(),
                    reason,
                    at: now,
                },
            )
            .await;
        }
        if !report.tampered.is_empty() {
            let found: Vec<TamperedEntry> = report
                .tampered
                .iter()
                .map(|t| TamperedEntry {
                    id: t.id.clone(),
                    location: t.location.as_ref().map(ToString::to_string),
                    problems: t.problems.clone(),
                })
                .collect();
            let entries = self
                .envelope
                .audit
                .entries(Some(cluster), None, found, |found| {
                    AuditEvent::TamperingFound { backups: found }
                });
            if let Err(err) = self.envelope.audit.record(entries).await {
                tracing::warn!(%cluster, error = %err, "the audit did not take the tampering found; the incidents say it");
            }
        }
        self.metrics
            .tampered
            .with_label_values(&[cluster.as_str()])
            .set(report.tampered.len() as i64);
    }

    /// Writes the records' findings (compare-and-set on each): a backup missing is an
    /// incident, one found again is logged; a record changed meanwhile is left to the next
    /// pass.
    async fn write_findings(
        &self,
        cluster: &ClusterName,
        records: &[Versioned<BackupRecord>],
        report: &mut ScrubReport,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
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
        Ok(())
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

    /// Answers `retention.approve` requests until shutdown (the approval itself is
    /// [`Worker::approve`]).
    pub async fn serve_approvals(
        self,
        client: async_nats::Client,
        shutdown: Shutdown,
    ) -> anyhow::Result<()> {
        sexton_shared::api::serve_requests(
            client,
            "retention",
            "approve",
            shutdown,
            |req: ApproveRequest, actor| {
                let worker = self.clone();
                async move {
                    worker
                        .approve(&req.cluster, &req.plan, req.location.as_ref(), actor)
                        .await
                }
            },
        )
        .await
    }

    /// Answers `binlog.status` requests until shutdown.
    pub async fn serve_binlog_status(
        self,
        client: async_nats::Client,
        shutdown: Shutdown,
    ) -> anyhow::Result<()> {
        sexton_shared::api::serve_requests(
            client,
            "binlog",
            "status",
            shutdown,
            |req: StatusRequest, _| {
                let worker = self.clone();
                async move {
                    let status = worker
                        .binlog_status(&req.cluster, Utc::now())
                        .await
                        .map_err(|err| ApiError::new(ErrorCode::Unavailable, format!("{err:#}")))?;
                    sexton_shared::api::reply_value(status)
                }
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
        let changed = !report.dry_run
            && report.findings.len() + report.copies.len() > report.changed_meanwhile.len();
        if changed {
            if let Err(err) = self.rerun(&req.cluster, Utc::now()).await {
                tracing::warn!(cluster = %req.cluster, error = format!("{err:#}"), "no retention run asked after the scrub");
            }
        }
        sexton_shared::api::reply_value(report)
    }

    /// `retention.approve`: plans the group now and, if the breaker holds it, stores a
    /// person's approval of exactly what it would delete and asks for a run at once.
    pub async fn approve(
        &self,
        cluster: &ClusterName,
        plan: &PlanName,
        location: Option<&LocationName>,
        actor: sexton_shared::audit::Actor,
    ) -> Result<serde_json::Value, ApiError> {
        let now = Utc::now();
        let unavailable =
            |err: anyhow::Error| ApiError::new(ErrorCode::Unavailable, format!("{err:#}"));
        let groups = self
            .plan_places(cluster, Some(plan), now)
            .await
            .map_err(unavailable)?;
        let Some(group) = groups
            .into_iter()
            .find(|group| group.location.as_ref() == location)
        else {
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
            .approve(cluster, plan, location, state, actor, now)
            .await
            .map_err(unavailable)?;
        self.rerun(cluster, now).await.map_err(unavailable)?;
        serde_json::to_value(&record)
            .map_err(|err| ApiError::new(ErrorCode::Unavailable, err.to_string()))
    }

    /// `retention.preview`: the plan of one group, or of every group of the cluster, made now.
    async fn preview(&self, req: &PreviewRequest) -> Result<serde_json::Value, ApiError> {
        let unavailable =
            |err: anyhow::Error| ApiError::new(ErrorCode::Unavailable, format!("{err:#}"));
        let Some(location) = &req.location else {
            let now = Utc::now();
            let mut plans = self
                .plan_cluster(&req.cluster, req.plan.as_ref(), now)
                .await
                .map_err(unavailable)?;
            let archive = crate::binlog::load(&self.store, &self.prefix, &req.cluster).await;
            for group in &mut plans {
                group.recovery = recovery_after(group, &archive.segments(), now);
            }
            return sexton_shared::api::reply_value(plans);
        };
        // The plans of the copies at one location (issue 28).
        let now = Utc::now();
        let mut plans: Vec<_> = self
            .plan_places(&req.cluster, req.plan.as_ref(), now)
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|group| group.location.as_ref() == Some(location))
            .collect();
        if let Some(store) = self.locations.get(location) {
            let archive = crate::binlog::load(store, store.prefix(), &req.cluster).await;
            for group in &mut plans {
                group.recovery = recovery_after(group, &archive.segments(), now);
            }
        }
        // What deleting each copy early costs: its record read whole (the view keeps the
        // engine's form only), its class and time in it.
        let default_class = self.location_classes.get(location).cloned().flatten();
        for group in &mut plans {
            let deleting: Vec<String> = group
                .decision
                .as_ref()
                .map(|plan| plan.delete.iter().map(|d| d.id.clone()).collect())
                .unwrap_or_default();
            for id in deleting {
                let Ok(id) = sexton_model::names::BackupId::new(&id) else {
                    continue;
                };
                let Some(entry) = self
                    .catalog
                    .get(&req.cluster, &id)
                    .await
                    .map_err(unavailable)?
                else {
                    continue;
                };
                if let Some(early) = entry.value.copies.get(location).and_then(|copy| {
                    sexton_model::copies::early_deletion(
                        id.as_str(),
                        copy,
                        default_class.as_deref(),
                        now,
                    )
                }) {
                    group.early_deletions.push(early);
                }
            }
        }
        sexton_shared::api::reply_value(plans)
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
                async move { worker.preview(&req).await }
            },
        )
        .await
    }
}

/// Counts a finding whose write met a changed record as not made: that record keeps its state
/// until the next pass, so `missing_after` is what the catalog holds now.
fn recount_missing(report: &mut ScrubReport) {
    for id in &report.changed_meanwhile {
        if let Some(finding) = report.findings.iter().find(|f| &f.id == id) {
            match finding.becomes {
                BackupStatus::Missing => report.missing_after -= 1,
                _ => report.missing_after += 1,
            }
        }
    }
}

/// A store's listing for the scrub: current objects (key → size) and, on a versioned store,
/// every version and delete marker ([`scrub::Versions`]).
async fn list_for_scrub(
    store: &sexton_shared::object_store::ObjectStore,
    prefix: &str,
) -> Result<
    (BTreeMap<String, u64>, Option<scrub::Versions>),
    sexton_shared::object_store::ObjectError,
> {
    if store.is_versioned().await? {
        let entries = store.list_versions(prefix).await?;
        let (versions, listing) = scrub::Versions::from_entries(&entries);
        return Ok((listing, Some(versions)));
    }
    let listing = store
        .list(prefix)
        .await?
        .into_iter()
        .map(|object| (object.key, object.size.max(0) as u64))
        .collect();
    Ok((listing, None))
}

/// What a previewed group's place can restore once its plan is carried out (issue 47): the
/// recovery value over the group less what the plan deletes, with the place's own archive
/// (`segments`) less what it collects, and the group's objectives checked. `None` for a group
/// without a plan (everything is kept: the recovery value is today's, `sexton recovery window`).
fn recovery_after(
    group: &crate::group_plan::GroupPlan,
    segments: &[sexton_retention::BinlogSegment],
    now: chrono::DateTime<Utc>,
) -> Option<sexton_shared::recovery::PlaceRecovery> {
    let plan = group.decision.as_ref()?;
    let catalog = sexton_retention::Catalog {
        backups: group.members.engine.backups.clone(),
        binlog_segments: segments.to_vec(),
    };
    let left = sexton_retention::recovery::after_plan(&catalog, plan);
    let promised = group
        .policy
        .as_ref()
        .and_then(|policy| policy.recovery_window.map(|w| w.to_string()));
    Some(super::observe::place_value(
        group,
        &left,
        promised,
        |id| left.backups.iter().any(|b| b.id == id),
        now,
    ))
}
