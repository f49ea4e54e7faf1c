//! Executor reports → catalog records → `checkpoint-complete`.
//!
//! A report is validated before anything is written: the cluster and schedule must be known,
//! every artifact key must lie under the cluster's prefix, a completion cannot be in the
//! future. A repeated report is an idempotent no-op; a report that contradicts the catalog
//! (say, "completed" for a backup already expiring) changes nothing.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use sexton_retention::VolumeArtifact;
use sexton_shared::{
    catalog::{CasError, Catalog, Lookup},
    channels,
    config::Config,
    nats::publish_once,
    object_store::{check_backup_key, ObjectStore},
    outcome::Outcome,
    records::{
        BackupKind, BackupRecord, BackupStatus, InFlight, ScheduleRecord, RECORD_SCHEMA_VERSION,
    },
    topology::{self, Topology},
    wire::{self, CheckpointComplete, MergeDone, ObjectDigest, Report, ReportStatus},
    Shutdown,
};

use crate::{intake, metrics::Metrics};

/// How far in the future a completion time may lie before it is refused (clock skew).
const MAX_CLOCK_SKEW: chrono::Duration = chrono::Duration::minutes(5);

pub async fn run(
    topology: Topology,
    clusters_bucket: async_nats::jetstream::kv::Store,
    store: ObjectStore,
    dues: async_nats::jetstream::kv::Store,
    config: Config,
    metrics: Arc<Metrics>,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let gate = intake::Intake {
        store,
        dues,
        metrics: metrics.intake_checks.clone(),
        jetstream: topology.jetstream.clone(),
    };
    let consumer = channels::REPORTS_DURABLE
        .open(
            &topology.jetstream,
            None,
            channels::Settings::ack_wait(Duration::from_secs(30)),
        )
        .await?;
    let mut messages = consumer
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading executor reports")?;
    let catalog = Catalog::new(topology.catalog.clone());
    metrics.consumer.spawn_poller(
        topology.jetstream.clone(),
        topology::STREAM_REPORTS,
        topology::CONSUMER_REPORTS,
        Duration::from_secs(5),
        shutdown.clone(),
    );
    // Reports are independent of each other (each write is a compare-and-set, and a report
    // that finds its record changed decides again), and intake spends most of a report's time
    // waiting on the bucket, so several are handled at once.
    let state = Arc::new(Handler {
        topology,
        clusters_bucket,
        catalog,
        gate,
        config,
        metrics,
    });
    sexton_shared::nats::handle_concurrently(
        &mut messages,
        &mut shutdown,
        "executor reports",
        REPORTS_IN_FLIGHT,
        |message| {
            let state = state.clone();
            async move {
                let metrics = &state.metrics;
                let status = std::sync::Mutex::new("malformed");
                let outcome = channels::deliver(
                    &channels::REPORTS,
                    "scheduler",
                    &state.topology.jetstream,
                    Some(&metrics.consumer),
                    &message,
                    |report| async {
                        let (handled, outcome) = handle(&state, report, &message).await;
                        *status.lock().expect("not poisoned") = handled;
                        outcome
                    },
                )
                .await;
                // A report refused before it was read (it does not decode, or names another
                // cluster than its subject) counts as `malformed`.
                let status = *status.lock().expect("not poisoned");
                metrics
                    .reports
                    .with_label_values(&[status, outcome.label()])
                    .inc();
            }
        },
    )
    .await
}

/// Reports handled at once by one replica.
const REPORTS_IN_FLIGHT: usize = 32;

/// What every report handler shares.
struct Handler {
    topology: Topology,
    clusters_bucket: async_nats::jetstream::kv::Store,
    catalog: Catalog,
    gate: intake::Intake,
    config: Config,
    metrics: Arc<Metrics>,
}

/// One report, received (decoded, its subject checked): recorded, and its status for the
/// metrics. A report that does not decode or names another cluster than its subject is poison
/// before it gets here (`channels::REPORTS`), counted as `malformed`.
async fn handle(
    state: &Handler,
    report: Report,
    message: &jetstream::Message,
) -> (&'static str, Outcome) {
    tracing::Span::current().record("backup", report.backup_id.as_str());
    let delivered = message.info().map(|info| info.delivered).unwrap_or(1);
    // When the executor published it, by the server's clock (not when this scheduler reads it:
    // a report that waited out an outage is as late as it was when sent).
    let published = message.info().ok().and_then(|info| {
        chrono::DateTime::from_timestamp(
            info.published.unix_timestamp(),
            info.published.nanosecond(),
        )
    });
    let status = match report.status {
        ReportStatus::Started => "started",
        ReportStatus::Completed => "completed",
        ReportStatus::Failed => "failed",
    };
    let outcome = match record_report(
        &state.topology,
        &state.clusters_bucket,
        &state.catalog,
        &state.gate,
        &state.config,
        &report,
        Delivery {
            delivered,
            published,
        },
    )
    .await
    {
        Ok(outcome) => outcome,
        Err(err) => {
            tracing::warn!(
                error = format!("{err:#}"),
                "report not recorded; will retry"
            );
            Outcome::RetryAfter(Duration::from_secs(2))
        }
    };
    (status, outcome)
}

/// How a report came: its delivery count, and when the executor published it (the NATS
/// server's clock).
#[derive(Clone, Copy)]
struct Delivery {
    delivered: i64,
    published: Option<chrono::DateTime<Utc>>,
}

/// Checks a report against what Sexton knows; `Err(why)` refuses it. `cluster_known` says
/// whether a schedule has ever named the report's cluster (the clusters bucket has it).
pub fn validate_report(
    report: &Report,
    schedule: Option<&ScheduleRecord>,
    cluster_known: bool,
    prefix: &str,
    now: chrono::DateTime<Utc>,
) -> Result<(), String> {
    if let Some(name) = &report.schedule {
        let Some(schedule) = schedule else {
            return Err(format!("unknown schedule {name}"));
        };
        if schedule.cluster != report.cluster || schedule.plan != report.plan {
            return Err(format!(
                "schedule {name} backs up {}/{}, not {}/{}",
                schedule.cluster, schedule.plan, report.cluster, report.plan
            ));
        }
    }
    for time in [report.completed_at, report.started_at]
        .into_iter()
        .flatten()
    {
        if time.with_timezone(&Utc) > now + MAX_CLOCK_SKEW {
            return Err(format!("time {time} is in the future"));
        }
        if time.timestamp() < 0 {
            return Err(format!("time {time} is before 1970"));
        }
    }
    if let (Some(started), Some(completed)) = (report.started_at, report.completed_at) {
        if completed < started {
            return Err("completed_at is before started_at".into());
        }
    }
    // Under the backup's own directory, not merely the cluster's: a report naming another
    // backup's objects would have them deleted when its own record expires.
    let volume_keys = report.volumes.iter().flat_map(|v| v.keys.iter());
    for key in report.artifacts.iter().chain(volume_keys) {
        check_backup_key(
            prefix,
            &report.cluster,
            &report.backup_name,
            report.backup_id.as_str(),
            key,
        )
        .map_err(|e| format!("backup {}: {e}", report.backup_id))?;
    }
    // A volume's objects go when the volume does; `metadata.json` describes the whole backup
    // and stays with the record. Two volumes sharing an object would lose it with either.
    let mut volume_keys = std::collections::HashSet::new();
    for volume in &report.volumes {
        for key in &volume.keys {
            if BackupRecord::is_metadata_key(key) {
                return Err(format!(
                    "volume {} lists the backup's metadata.json as its own",
                    volume.name
                ));
            }
            if !volume_keys.insert(key.as_str()) {
                return Err(format!("object {key} is listed by two volumes"));
            }
        }
    }
    if report.status == ReportStatus::Completed && report.artifacts.is_empty() {
        return Err("a completed backup must list its artifacts".into());
    }
    // A report naming a known schedule names a known cluster (checked above).
    if schedule.is_none() && !cluster_known {
        return Err(format!(
            "unknown cluster {}: no schedule has named it",
            report.cluster
        ));
    }
    Ok(())
}

async fn record_report(
    topology: &Topology,
    clusters_bucket: &async_nats::jetstream::kv::Store,
    catalog: &Catalog,
    gate: &intake::Intake,
    config: &Config,
    report: &Report,
    delivery: Delivery,
) -> anyhow::Result<Outcome> {
    let Delivery {
        delivered,
        published,
    } = delivery;
    let schedule = match &report.schedule {
        Some(name) => {
            match sexton_shared::leader_read::value(&topology.schedules, name.as_str()).await? {
                Some(body) => Some(
                    serde_json::from_slice::<ScheduleRecord>(&body)
                        .context("decoding the report's schedule")?,
                ),
                None => None,
            }
        }
        None => None,
    };
    let cluster_known = schedule.is_some()
        || clusters_bucket
            .get(report.cluster.as_str())
            .await
            .context("reading the cluster record")?
            .is_some();
    // The schedule was deleted while this backup ran (`schedule delete` keeps a backup in
    // progress, and says so): its report still settles the record the catalog holds, rather
    // than leave it in progress for ever. Judged as a report without a schedule.
    let settles_orphan = match (&report.schedule, &schedule) {
        (Some(name), None) => catalog
            .get(&report.cluster, &report.backup_id)
            .await?
            .is_some_and(|current| {
                current.value.status == BackupStatus::InProgress
                    && current.value.schedule.as_ref() == Some(name)
                    && current.value.plan == report.plan
            }),
        _ => false,
    };
    let judged = if settles_orphan {
        std::borrow::Cow::Owned(Report {
            schedule: None,
            ..report.clone()
        })
    } else {
        std::borrow::Cow::Borrowed(report)
    };
    if let Err(why) = validate_report(
        &judged,
        schedule.as_ref(),
        cluster_known,
        &config.s3.prefix,
        Utc::now(),
    ) {
        return Ok(Outcome::Poison(why));
    }
    if settles_orphan {
        tracing::info!(cluster = %report.cluster, backup = %report.backup_id, "the backup's schedule was deleted while it ran; its record is settled and kept");
    }
    if let Some(merge) = &report.merge {
        return match &merge.volume {
            None => record_merge(topology, catalog, gate, report, merge).await,
            Some(volume) => {
                record_volume_merge(topology, catalog, gate, report, merge, volume).await
            }
        };
    }
    // Up to a few rounds of read → decide → compare-and-set. A completed report is judged by
    // intake once, when it is about to be written (not for a repeat of what is recorded).
    let mut verdict: Option<intake::Verdict> = None;
    // A report refused for the times it claims is timed by when Sexton saw it: its failed
    // record's grace (after which retention removes it and its objects) counts from then,
    // not from a forged instant long past.
    let mut refused_at: Option<DateTime<Utc>> = None;
    for _ in 0..5 {
        let existing = match catalog.lookup(&report.cluster, &report.backup_id).await? {
            Lookup::Live(current) => Some(*current),
            Lookup::Never => None,
            // The backup was recorded, then deleted (retention, a user): a report of it must
            // not bring its record back, whose objects are gone. That is a report delivered
            // again after a crash between recording and acknowledging (routine), or a late
            // duplicate (an operator should see it). A report of another backup that re-uses
            // the id (other times) is judged as new, and intake checks its objects.
            Lookup::Removed => {
                let removed = catalog
                    .removed_record(&report.cluster, &report.backup_id)
                    .await?;
                let same = report.status == ReportStatus::Started
                    || removed.as_ref().is_some_and(|r| same_backup(r, report));
                if same && delivered > 1 || report.status == ReportStatus::Started {
                    tracing::info!(cluster = %report.cluster, backup = %report.backup_id, delivered, "report of a backup already deleted; not recorded again");
                    return Ok(Outcome::Done);
                }
                if same {
                    return Ok(Outcome::Poison(format!(
                        "backup {} of {} was deleted from the catalog; a report does not bring it back",
                        report.backup_id, report.cluster
                    )));
                }
                None
            }
        };
        let writes = existing
            .as_ref()
            .is_none_or(|current| current.value.status == BackupStatus::InProgress);
        if writes && report.status == ReportStatus::Completed && verdict.is_none() {
            match intake::examine(&gate.store, report).await {
                Ok(judged) => {
                    // A backdated completion (issue 29) is refused like missing objects:
                    // against the due it answers, and by how late it was published.
                    let due = match crate::dues::recall(
                        &gate.dues,
                        &report.cluster,
                        &report.backup_id,
                    )
                    .await
                    {
                        Ok(due) => due,
                        Err(err) => {
                            tracing::warn!(cluster = %report.cluster, backup = %report.backup_id, error = %format!("{err:#}"), "cannot read the due-backup this report answers; the report waits");
                            return Ok(Outcome::RetryAfter(intake_retry_delay(delivered)));
                        }
                    };
                    let late =
                        intake::judge_times(report, due.as_ref(), published, &config.scheduler);
                    verdict = Some(match (judged, late) {
                        (intake::Verdict::Seen(_), Some(why)) => {
                            refused_at = Some(published.unwrap_or_else(Utc::now));
                            intake::Verdict::Refused(vec![why])
                        }
                        (judged, _) => judged,
                    });
                }
                Err(err) => {
                    gate.metrics.with_label_values(&["retry"]).inc();
                    tracing::warn!(cluster = %report.cluster, backup = %report.backup_id, error = %err, "cannot read the backup's objects; the report waits");
                    return Ok(Outcome::RetryAfter(intake_retry_delay(delivered)));
                }
            }
        }
        // A report intake refused is recorded as the failure it is.
        let (effective, seen) = match &verdict {
            Some(intake::Verdict::Refused(problems)) => (
                std::borrow::Cow::Owned(Report {
                    status: ReportStatus::Failed,
                    error: Some(intake::Verdict::reason(problems)),
                    started_at: refused_at.map_or(report.started_at, |at| Some(at.fixed_offset())),
                    completed_at: refused_at
                        .map_or(report.completed_at, |at| Some(at.fixed_offset())),
                    ..report.clone()
                }),
                Vec::new(),
            ),
            Some(intake::Verdict::Seen(objects)) => {
                (std::borrow::Cow::Borrowed(report), objects.clone())
            }
            None => (std::borrow::Cow::Borrowed(report), Vec::new()),
        };
        let report = effective.as_ref();
        let new_status = match report.status {
            ReportStatus::Started => BackupStatus::InProgress,
            ReportStatus::Completed => BackupStatus::Completed,
            ReportStatus::Failed => BackupStatus::Failed,
        };
        let seen_at = (!seen.is_empty()).then(Utc::now);
        let copy_to = copy_targets(schedule.as_ref(), report, new_status);
        let written: Option<BackupRecord>;
        let result = match &existing {
            None => {
                let record = BackupRecord {
                    schema_version: RECORD_SCHEMA_VERSION,
                    id: report.backup_id.clone(),
                    uid: uuid::Uuid::new_v4().simple().to_string(),
                    cluster: report.cluster.clone(),
                    plan: report.plan.clone(),
                    schedule: report.schedule.clone(),
                    backup_name: report.backup_name.clone(),
                    kind: report.kind,
                    parent: report.parent.clone(),
                    status: new_status,
                    started_at: report.started_at,
                    completed_at: report.completed_at,
                    tick: report.tick,
                    artifacts: artifacts_of(report),
                    size_bytes: report.size_bytes,
                    objects: seen,
                    seen_at,
                    volumes: volumes_of(report),
                    labels: report.labels.clone(),
                    tags: report.tags.clone(),
                    legal_hold: false,
                    holds: report.holds.clone(),
                    immutable: false,
                    remote_cleanup: schedule.as_ref().is_some_and(|s| s.remote_cleanup),
                    delete_requested: false,
                    expiring_revision: None,
                    delete_reasons: Vec::new(),
                    delete_policy: None,
                    last_error: report.error.clone(),
                    expired_from: None,
                    delete_request: None,
                    plugin_errors: Vec::new(),
                    volume_deletion: None,
                    verification: Default::default(),
                    copy_to,
                    copies: Default::default(),
                    primary_deleted_at: None,
                    locked_until: None,
                    log_range: report.log_range.clone(),
                    differential: report.differential,
                    store: Some(gate.store.place().clone()),
                };
                let result = catalog.create(&record).await.map(|_| ());
                written = Some(record);
                result
            }
            Some(current) => {
                let record = &current.value;
                match (record.status, new_status) {
                    // The same news again, or news older than what we know: nothing to do.
                    (a, b) if a == b => return finish(topology, report, Some(record)).await,
                    (BackupStatus::InProgress, BackupStatus::Completed | BackupStatus::Failed) => {
                        let mut record = record.clone();
                        record.status = new_status;
                        record.kind = report.kind;
                        record.parent = report.parent.clone();
                        record.completed_at = report.completed_at;
                        record.started_at = report.started_at.or(record.started_at);
                        record.tick = report.tick.or(record.tick);
                        record.artifacts = artifacts_of(report);
                        record.size_bytes = report.size_bytes;
                        record.objects = seen;
                        record.seen_at = seen_at;
                        record.volumes = volumes_of(report);
                        record.log_range = report.log_range.clone().or(record.log_range.take());
                        record.differential = report.differential;
                        for hold in &report.holds {
                            if !record.holds.contains(hold) {
                                record.holds.push(hold.clone());
                            }
                        }
                        record.tags = report.tags.clone();
                        record.last_error = report.error.clone();
                        record.copy_to = copy_to;
                        let result = catalog.update(&record, current.revision).await.map(|_| ());
                        written = Some(record);
                        result
                    }
                    (_, BackupStatus::InProgress) => return Ok(Outcome::Done),
                    (current_status, _) => {
                        return Ok(Outcome::Poison(format!(
                            "backup {} is already {current_status:?}; the report changes nothing",
                            report.backup_id
                        )))
                    }
                }
            }
        };
        match result {
            Ok(()) => {
                match &verdict {
                    Some(intake::Verdict::Seen(_)) => {
                        gate.metrics.with_label_values(&["seen"]).inc();
                    }
                    Some(intake::Verdict::Refused(_)) => {
                        gate.metrics.with_label_values(&["refused"]).inc();
                        gate.refused(report).await;
                    }
                    None => {}
                }
                return finish(topology, report, written.as_ref()).await;
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    Ok(Outcome::RetryAfter(Duration::from_millis(500)))
}

/// How long a report waits for an unreadable bucket before its next delivery: doubling from
/// 2 s to a minute, so the consumer's 20 deliveries span about a quarter of an hour of outage
/// before the report is left in the stream (it is never recorded on a guess).
fn intake_retry_delay(delivered: i64) -> Duration {
    let doublings = delivered.clamp(1, 6) as u32;
    Duration::from_secs((1u64 << doublings).min(60))
}

/// Whether `report` reports the backup `removed` was: the same times (a new backup re-using the
/// id was taken at another time).
fn same_backup(removed: &BackupRecord, report: &Report) -> bool {
    let same_start = match (removed.started_at, report.started_at) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let same_end = match (removed.completed_at, report.completed_at) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    same_start && same_end
}

/// Records a merge job done (Trilio's consolidation): the target becomes a synthetic full
/// (kind full, no parent) listing its old objects and the consolidated ones, then a retention
/// sweep of the cluster lets the sources go through the deleter, since nothing needs them now.
/// Refused (and nothing written) unless the target is still the backup the job named (its
/// uid), completed, and still builds on exactly the merged chain (each source on the one
/// before, the first a full), and the report keeps every object the target had. A repeated
/// report is a no-op.
async fn record_merge(
    topology: &Topology,
    catalog: &Catalog,
    gate: &intake::Intake,
    report: &Report,
    merge: &MergeDone,
) -> anyhow::Result<Outcome> {
    let poison = |why: String| {
        Ok(Outcome::Poison(format!(
            "merge into {}: {why}",
            report.backup_id
        )))
    };
    if report.status != ReportStatus::Completed
        || report.kind != BackupKind::Full
        || report.parent.is_some()
        || !report.volumes.is_empty()
        || merge.sources.is_empty()
    {
        return poison(
            "a merge report is a completed full with no parent, no volumes and its sources".into(),
        );
    }
    for _ in 0..5 {
        let Some(current) = catalog.get(&report.cluster, &report.backup_id).await? else {
            return poison("no such backup".into());
        };
        let record = &current.value;
        if record.uid != merge.target_uid || record.backup_name != report.backup_name {
            return poison("the backup is not the one the merge was asked for".into());
        }
        let recorded = record.kind == BackupKind::Full
            && record.parent.is_none()
            && report
                .artifacts
                .iter()
                .all(|k| record.artifacts.contains(k));
        if recorded {
            // Recorded before (a redelivery, or the sweep below failed): ask again.
            sweep_after_merge(topology, report, &record.uid).await?;
            return Ok(Outcome::Done);
        }
        if record.status != BackupStatus::Completed || !record.volumes.is_empty() {
            return poison(format!(
                "the backup is {:?}{}; nothing recorded",
                record.status,
                if record.volumes.is_empty() {
                    ""
                } else {
                    " with volumes"
                }
            ));
        }
        if record.parent.as_ref() != merge.sources.last() {
            return poison(format!(
                "the backup builds on {:?}, not on the merged chain's last {:?}",
                record.parent,
                merge.sources.last()
            ));
        }
        let whole = |source: &BackupRecord| {
            Some((source.kind, source.parent.as_ref().map(|p| p.to_string())))
        };
        if let Err(why) =
            check_merged_chain(catalog, &report.cluster, &merge.sources, whole).await?
        {
            return poison(why);
        }
        if let Some(key) = record
            .artifacts
            .iter()
            .find(|k| !report.artifacts.contains(k))
        {
            return poison(format!("the report drops the backup's object {key}"));
        }
        let mut updated = record.clone();
        updated.kind = BackupKind::Full;
        updated.parent = None;
        updated.artifacts = report.artifacts.clone();
        updated.size_bytes = add_bytes(record.size_bytes, report.size_bytes);
        if !updated.tags.iter().any(|t| t == "synthetic-full") {
            updated.tags.push("synthetic-full".into());
        }
        // The consolidated objects must be in the bucket before the sources may go.
        let seen = match merged_objects(gate, report).await {
            Ok(seen) => seen,
            Err(outcome) => return outcome,
        };
        updated.objects = with_seen(&record.objects, &seen);
        updated.seen_at = Some(Utc::now());
        if let Some(total) = size_of_objects(&updated) {
            updated.size_bytes = Some(total);
        }
        match catalog.update(&updated, current.revision).await {
            Ok(_) => {
                tracing::info!(cluster = %report.cluster, target = %report.backup_id, sources = ?merge.sources, "merge recorded: the target is a synthetic full");
                sweep_after_merge(topology, report, &record.uid).await?;
                return Ok(Outcome::Done);
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    Ok(Outcome::RetryAfter(Duration::from_millis(500)))
}

/// Records a volume merge done (issue 8: `chain_mode: merge` on a schedule with volumes): the
/// target's artifact of `volume` becomes a synthetic full (kind full, no parent) listing its old
/// keys and the consolidated ones; the target's other volumes are untouched. Then a retention
/// sweep lets the sources' artifacts of that volume go. Refused (and nothing written) unless
/// the target is still the backup the job named, completed, its volume still builds on exactly
/// the merged chain of that volume (each source's artifact on the one before, the first a
/// full), and the report keeps every key the volume had and lists no other volume. A repeated
/// report is a no-op.
async fn record_volume_merge(
    topology: &Topology,
    catalog: &Catalog,
    gate: &intake::Intake,
    report: &Report,
    merge: &MergeDone,
    volume: &str,
) -> anyhow::Result<Outcome> {
    let poison = |why: String| {
        Ok(Outcome::Poison(format!(
            "merge of volume {volume} into {}: {why}",
            report.backup_id
        )))
    };
    if let Err(err) = sexton_shared::names::check_name("volume name", volume) {
        return poison(err.to_string());
    }
    let reported = match report.volumes.as_slice() {
        [only] if only.name == volume && only.kind == BackupKind::Full && only.parent.is_none() => {
            only
        }
        _ => {
            return poison(
                "a volume merge report lists exactly that volume, a full with no parent".into(),
            )
        }
    };
    if report.status != ReportStatus::Completed
        || report
            .artifacts
            .iter()
            .any(|k| !reported.keys.contains(k) && !BackupRecord::is_metadata_key(k))
        || merge.sources.is_empty()
    {
        return poison(
            "a volume merge report is completed, lists only the volume's keys and names its sources"
                .into(),
        );
    }
    for _ in 0..5 {
        let Some(current) = catalog.get(&report.cluster, &report.backup_id).await? else {
            return poison("no such backup".into());
        };
        let record = &current.value;
        if record.uid != merge.target_uid || record.backup_name != report.backup_name {
            return poison("the backup is not the one the merge was asked for".into());
        }
        let Some(position) = record.volumes.iter().position(|v| v.name == volume) else {
            return poison("the backup has no such volume".into());
        };
        let artifact = &record.volumes[position];
        let recorded = artifact.kind == BackupKind::Full
            && artifact.parent.is_none()
            && reported.keys.iter().all(|k| artifact.keys.contains(k));
        if recorded {
            // Recorded before (a redelivery, or the sweep below failed): ask again.
            sweep_after_merge(topology, report, &format!("{}.{volume}", record.uid)).await?;
            return Ok(Outcome::Done);
        }
        if record.status != BackupStatus::Completed || artifact.expiring {
            return poison(format!(
                "the backup is {:?}{}; nothing recorded",
                record.status,
                if artifact.expiring {
                    " and the volume is being deleted"
                } else {
                    ""
                }
            ));
        }
        if artifact.parent.as_deref() != merge.sources.last().map(|id| id.as_str()) {
            return poison(format!(
                "the volume builds on {:?}, not on the merged chain's last {:?}",
                artifact.parent,
                merge.sources.last()
            ));
        }
        let of_volume = |source: &BackupRecord| {
            let artifact = source.volumes.iter().find(|v| v.name == volume)?;
            Some((artifact.kind, artifact.parent.clone()))
        };
        if let Err(why) =
            check_merged_chain(catalog, &report.cluster, &merge.sources, of_volume).await?
        {
            return poison(why);
        }
        if let Some(key) = artifact.keys.iter().find(|k| !reported.keys.contains(k)) {
            return poison(format!("the report drops the volume's object {key}"));
        }
        // Deleting this volume later deletes its keys: none may be another volume's.
        let others = record.volumes.iter().filter(|v| v.name != volume);
        if let Some(key) = others
            .flat_map(|v| &v.keys)
            .find(|k| reported.keys.contains(k))
        {
            return poison(format!("the report claims {key}, another volume's object"));
        }
        let mut updated = record.clone();
        {
            let artifact = &mut updated.volumes[position];
            artifact.kind = BackupKind::Full;
            artifact.parent = None;
            artifact.keys = reported.keys.clone();
            artifact.size_bytes = add_bytes(artifact.size_bytes, reported.size_bytes);
        }
        for key in &reported.keys {
            if !updated.artifacts.contains(key) {
                updated.artifacts.push(key.clone());
            }
        }
        if updated.volumes.iter().all(|v| v.kind == BackupKind::Full) {
            updated.kind = BackupKind::Full;
        }
        updated.size_bytes = add_bytes(record.size_bytes, report.size_bytes);
        let tag = format!("synthetic-full:{volume}");
        if !updated.tags.contains(&tag) {
            updated.tags.push(tag);
        }
        // The consolidated objects must be in the bucket before the sources may go.
        let seen = match merged_objects(gate, report).await {
            Ok(seen) => seen,
            Err(outcome) => return outcome,
        };
        updated.objects = with_seen(&record.objects, &seen);
        updated.seen_at = Some(Utc::now());
        if let Some(total) = size_of_objects(&updated) {
            updated.size_bytes = Some(total);
        }
        match catalog.update(&updated, current.revision).await {
            Ok(_) => {
                tracing::info!(cluster = %report.cluster, target = %report.backup_id, volume, sources = ?merge.sources, "volume merge recorded: the target's volume is a synthetic full");
                sweep_after_merge(topology, report, &format!("{}.{volume}", record.uid)).await?;
                return Ok(Outcome::Done);
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    Ok(Outcome::RetryAfter(Duration::from_millis(500)))
}

/// Intake of a merge report: the objects it lists as seen, or the outcome that ends the report
/// (refused: poison, naming the merge as the other refusals do; unreadable bucket: retry).
async fn merged_objects(
    gate: &intake::Intake,
    report: &Report,
) -> Result<Vec<ObjectDigest>, anyhow::Result<Outcome>> {
    let what = match report.merge.as_ref().and_then(|m| m.volume.as_deref()) {
        Some(volume) => format!("merge of volume {volume} into {}", report.backup_id),
        None => format!("merge into {}", report.backup_id),
    };
    match intake::examine(&gate.store, report).await {
        Ok(intake::Verdict::Seen(seen)) => {
            gate.metrics.with_label_values(&["seen"]).inc();
            Ok(seen)
        }
        Ok(intake::Verdict::Refused(problems)) => {
            gate.metrics.with_label_values(&["refused"]).inc();
            Err(Ok(Outcome::Poison(format!(
                "{what}: {}",
                intake::Verdict::reason(&problems)
            ))))
        }
        Err(err) => {
            gate.metrics.with_label_values(&["retry"]).inc();
            tracing::warn!(cluster = %report.cluster, backup = %report.backup_id, error = %err, "cannot read the merged objects; the report waits");
            Err(Ok(Outcome::RetryAfter(Duration::from_secs(5))))
        }
    }
}

/// The bytes of every object of the record, when intake has seen them all.
fn size_of_objects(record: &BackupRecord) -> Option<u64> {
    record
        .all_keys()
        .iter()
        .map(|key| {
            record
                .objects
                .iter()
                .find(|o| &o.key == key)
                .map(|o| o.size)
        })
        .try_fold(0u64, |total, size| Some(total + size?))
}

/// A record's objects with those intake saw just now put in: same key replaced, new appended.
fn with_seen(objects: &[ObjectDigest], seen: &[ObjectDigest]) -> Vec<ObjectDigest> {
    let mut merged: Vec<ObjectDigest> = objects
        .iter()
        .filter(|o| !seen.iter().any(|s| s.key == o.key))
        .cloned()
        .collect();
    merged.extend(seen.iter().cloned());
    merged
}

/// A size plus what a merge added; either alone when the other is unknown.
fn add_bytes(size: Option<u64>, added: Option<u64>) -> Option<u64> {
    match (size, added) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// Whether `sources` (oldest first) are still where the merged chain had them: the first a
/// full, each other building on the one before, as `link` reads a backup (its own kind and
/// parent, or one volume's; `None` when it holds no such artifact). `Ok(Err(why))` when not.
async fn check_merged_chain(
    catalog: &Catalog,
    cluster: &sexton_shared::names::ClusterName,
    sources: &[sexton_shared::names::BackupId],
    link: impl Fn(&BackupRecord) -> Option<(BackupKind, Option<String>)>,
) -> anyhow::Result<Result<(), String>> {
    for (n, id) in sources.iter().enumerate() {
        let Some(source) = catalog.get(cluster, id).await? else {
            return Ok(Err(format!("source {id} is gone")));
        };
        let Some((kind, parent)) = link(&source.value) else {
            return Ok(Err(format!("source {id} has no artifact of the volume")));
        };
        let expected = n.checked_sub(1).map(|before| sources[before].as_str());
        if parent.as_deref() != expected || (n == 0 && kind != BackupKind::Full) {
            return Ok(Err(format!(
                "source {id} is not where the merged chain had it"
            )));
        }
    }
    Ok(Ok(()))
}

/// Asks for a retention sweep of the cluster: the merged sources can go now.
async fn sweep_after_merge(topology: &Topology, report: &Report, uid: &str) -> anyhow::Result<()> {
    channels::request_sweep(
        &topology.jetstream,
        &report.cluster,
        Utc::now(),
        false,
        &channels::SweepCause::MergeRecorded {
            uid: uid.to_string(),
        },
    )
    .await?;
    Ok(())
}

/// Every object of the reported backup: its artifacts and its volumes' keys (once each), so
/// that deleting the whole backup removes them all and no other backup may list them.
fn artifacts_of(report: &Report) -> Vec<String> {
    let mut artifacts = report.artifacts.clone();
    for key in report.volumes.iter().flat_map(|v| &v.keys) {
        if !artifacts.contains(key) {
            artifacts.push(key.clone());
        }
    }
    artifacts
}

/// The volumes as taken (see [`sexton_shared::records::volume_artifacts`]).
fn volumes_of(report: &Report) -> Vec<VolumeArtifact> {
    sexton_shared::records::volume_artifacts(&report.volumes)
}

/// Records on the schedule which of its backups is in progress, for the overlap policy: set on
/// `started`, cleared on `completed` or `failed` of that same backup (which also ends a
/// backfill's wait for it). Also which volumes' latest upload failed (their next backup is a
/// full, even after the failed record is cleaned up): set by a failed report, cleared by a
/// completed one that took the volume. And the run of consecutive failures: at the schedule's
/// `pause_after_failures` it is paused, with an incident.
async fn track_in_flight(topology: &Topology, report: &Report) -> anyhow::Result<()> {
    let Some(name) = &report.schedule else {
        return Ok(());
    };
    for _ in 0..5 {
        let Some(entry) =
            sexton_shared::leader_read::latest(&topology.schedules, name.as_str()).await?
        else {
            return Ok(());
        };
        let mut schedule: ScheduleRecord =
            serde_json::from_slice(&entry.value).context("decoding the report's schedule")?;
        let before = schedule.status.clone();
        let paused_before = schedule.paused;
        let current = schedule.status.in_flight.as_ref().map(|f| &f.backup_id);
        match report.status {
            ReportStatus::Started if current != Some(&report.backup_id) => {
                schedule.status.in_flight = Some(InFlight {
                    backup_id: report.backup_id.clone(),
                    since: report
                        .started_at
                        .map(|t| t.with_timezone(&Utc))
                        .unwrap_or_else(Utc::now),
                    tick: report.tick,
                });
            }
            ReportStatus::Completed | ReportStatus::Failed
                if current == Some(&report.backup_id) =>
            {
                schedule.status.in_flight = None;
            }
            _ => {}
        }
        if report.status != ReportStatus::Started {
            // A backfill waiting for this backup goes on. The report may also come before the
            // step that fired it has recorded what it waits for: remembered, so that step does
            // not wait (both write this record by compare-and-set, so one sees the other).
            if let Some(backfill) = schedule
                .status
                .backfill
                .as_mut()
                .filter(|b| b.finished_at.is_none())
            {
                if backfill.waiting_for.as_ref() == Some(&report.backup_id) {
                    backfill.waiting_for = None;
                    backfill.waiting_since = None;
                }
                backfill.last_reported = Some(report.backup_id.clone());
            }
        }
        remember_failures(&mut schedule.status, report);
        remember_completion(&mut schedule.status, &before, report, Utc::now());
        let pause = pause_after_failures(&schedule);
        if let Some(reason) = &pause {
            schedule.paused = true;
            schedule.status.phase = sexton_shared::records::SchedulePhase::Paused;
            schedule.status.paused_reason = Some(reason.clone());
        }
        if schedule.status == before && schedule.paused == paused_before {
            return Ok(());
        }
        if let Some(reason) = &pause {
            // Published before the pause is recorded, under an id of the failure that paused
            // it: a crash in between publishes it again as a duplicate, never loses it.
            announce_pause(topology, &schedule, report, reason).await?;
        }
        let body = serde_json::to_vec(&schedule)?;
        match topology
            .schedules
            .update(name.as_str(), body.into(), entry.revision)
            .await
        {
            Ok(_) => {
                if pause.is_some() {
                    tracing::warn!(schedule = %name, failures = schedule.status.consecutive_failures, "schedule paused after consecutive failed backups");
                }
                return Ok(());
            }
            Err(err)
                if err.kind() == async_nats::jetstream::kv::UpdateErrorKind::WrongLastRevision =>
            {
                continue
            }
            Err(err) => return Err(err.into()),
        }
    }
    anyhow::bail!("schedule {name} kept changing while recording an in-flight backup")
}

/// Which volumes' (or, without volumes, whether the backup's) latest upload failed, and how
/// many backups in a row failed. A failed backup is counted once however often its report is
/// delivered; a completed one ends the run.
fn remember_failures(status: &mut sexton_shared::records::ScheduleStatus, report: &Report) {
    match report.status {
        ReportStatus::Started => {}
        ReportStatus::Failed => {
            if report.volumes.is_empty() {
                status.last_backup_failed = true;
            }
            for volume in report.volumes.iter().filter(|v| v.failed) {
                if !status.failed_volumes.contains(&volume.name) {
                    status.failed_volumes.push(volume.name.clone());
                }
            }
            if status.last_failed_backup.as_ref() != Some(&report.backup_id) {
                status.consecutive_failures = status.consecutive_failures.saturating_add(1);
                status.last_failed_backup = Some(report.backup_id.clone());
            }
        }
        ReportStatus::Completed => {
            if report.volumes.is_empty() {
                status.last_backup_failed = false;
            }
            status
                .failed_volumes
                .retain(|name| !report.volumes.iter().any(|v| v.name == *name));
            status.consecutive_failures = 0;
            status.last_failed_backup = None;
        }
    }
}

/// When the schedule's latest backup completed (its status's `last_completed`, for health
/// checks). Never moved back by a report delivered again or late. Exact when the report
/// changes the status anyway (it ends the backup in flight, or a run of failures); otherwise
/// kept to the minute, so a schedule completing many backups a minute does not cost a write of
/// its record each. A completion claimed later than `now` cannot be true: it is taken as `now`,
/// so a forged future time cannot pin the status and hide every later completion.
fn remember_completion(
    status: &mut sexton_shared::records::ScheduleStatus,
    before: &sexton_shared::records::ScheduleStatus,
    report: &Report,
    now: chrono::DateTime<Utc>,
) {
    let Some(completed) = report
        .completed_at
        .filter(|_| report.status == ReportStatus::Completed)
        .map(|t| t.with_timezone(&chrono::Utc).min(now))
    else {
        return;
    };
    let newer = match status.last_completed {
        None => true,
        Some(last) if completed <= last => false,
        Some(_) if status != before => true,
        Some(last) => completed - last >= chrono::Duration::minutes(1),
    };
    if newer {
        status.last_completed = Some(completed);
    }
}

/// Why the schedule is to be paused now, if its run of failures reached its
/// `pause_after_failures` and it is not paused yet.
fn pause_after_failures(schedule: &ScheduleRecord) -> Option<String> {
    let limit = schedule.pause_after_failures?;
    let failures = schedule.status.consecutive_failures;
    if schedule.paused || failures < limit {
        return None;
    }
    Some(format!(
        "paused after {failures} consecutive failed backups (pause_after_failures {limit}); the \
         last, {}: unpause to resume",
        schedule
            .status
            .last_failed_backup
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    ))
}

/// The incident of a schedule paused after failures, de-duplicated by schedule and the failed
/// backup that paused it.
async fn announce_pause(
    topology: &Topology,
    schedule: &ScheduleRecord,
    report: &Report,
    reason: &str,
) -> anyhow::Result<()> {
    let incident = sexton_shared::wire::Incident {
        schema_version: wire::SCHEMA_VERSION,
        service: "scheduler".into(),
        kind: "schedule-paused-after-failures".into(),
        cluster: Some(schedule.cluster.to_string()),
        backup_id: Some(report.backup_id.to_string()),
        subject: sexton_shared::channels::REPORTS.subject(&report.cluster),
        reason: format!(
            "schedule {}: {reason}{}",
            schedule.name,
            report
                .error
                .as_deref()
                .map(|e| format!(" (its error: {e})"))
                .unwrap_or_default()
        ),
        at: Utc::now(),
    };
    publish_once(
        &topology.jetstream,
        topology::event_subject("incident", schedule.cluster.as_str()),
        &format!("paused.{}.{}", schedule.name, report.backup_id),
        wire::encode(&incident),
    )
    .await?;
    Ok(())
}

/// The locations a completed backup is to be copied to: its schedule's copy rules that pick
/// its kind (issue 28). A backup recorded failed or in progress goes nowhere.
fn copy_targets(
    schedule: Option<&ScheduleRecord>,
    report: &Report,
    status: BackupStatus,
) -> Vec<sexton_shared::names::LocationName> {
    if status != BackupStatus::Completed {
        return Vec::new();
    }
    schedule
        .map(|schedule| {
            schedule
                .copies
                .iter()
                .filter(|rule| rule.select.picks(report.kind, !report.volumes.is_empty()))
                .map(|rule| rule.to.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// After a completed report is recorded, tell retention and the copier; de-duplicated per
/// backup (and location). `record` is the backup as recorded, when this delivery knows it.
async fn finish(
    topology: &Topology,
    report: &Report,
    record: Option<&BackupRecord>,
) -> anyhow::Result<Outcome> {
    track_in_flight(topology, report).await?;
    if report.status != ReportStatus::Completed {
        return Ok(Outcome::Done);
    }
    if let Some(record) = record.filter(|r| r.status == BackupStatus::Completed) {
        for location in record.awaiting_copy() {
            let job = sexton_shared::copies::CopyJob {
                schema_version: wire::SCHEMA_VERSION,
                cluster: record.cluster.clone(),
                backup_id: record.id.clone(),
                uid: record.uid.clone(),
                location: location.clone(),
            };
            channels::COPY_JOBS
                .publish_once(&topology.jetstream, &job, &channels::ids::copy_job(&job))
                .await?;
        }
    }
    let event = CheckpointComplete {
        schema_version: wire::SCHEMA_VERSION,
        cluster: report.cluster.clone(),
        plan: report.plan.clone(),
        backup_id: report.backup_id.clone(),
        schedule: report.schedule.clone(),
    };
    channels::CHECKPOINTS
        .publish_once(
            &topology.jetstream,
            &event,
            &channels::ids::checkpoint(&event),
        )
        .await?;
    Ok(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: &str, status: ReportStatus) -> Report {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "backup_id": id, "cluster": "c1", "plan": "full",
            "schedule": "s", "backup_name": "s", "status": status,
        }))
        .unwrap()
    }

    /// Replays reports (`id:status`, status `f` failed, `c` completed, `s` started) on a
    /// schedule pausing after `limit` failures; expects the count and whether it paused.
    fn check(limit: u32, reports: &[&str], expected: (u32, bool)) {
        let mut schedule: ScheduleRecord = serde_json::from_value(serde_json::json!({
            "name": "s", "cluster": "c1", "plan": "full", "cron": "@daily",
            "policy": {"keep_last": 1}, "created_at": "2026-01-01T00:00:00Z",
            "pause_after_failures": limit,
        }))
        .unwrap();
        for text in reports {
            let (id, status) = text.split_once(':').unwrap();
            let status = match status {
                "f" => ReportStatus::Failed,
                "c" => ReportStatus::Completed,
                _ => ReportStatus::Started,
            };
            remember_failures(&mut schedule.status, &report(id, status));
            if let Some(reason) = pause_after_failures(&schedule) {
                schedule.paused = true;
                schedule.status.paused_reason = Some(reason);
            }
        }
        assert_eq!(
            (schedule.status.consecutive_failures, schedule.paused),
            expected,
            "{reports:?}"
        );
    }

    #[test]
    fn consecutive_failures_are_counted_once_per_backup_and_pause_at_the_limit() {
        check(3, &["a:f", "b:f"], (2, false));
        check(3, &["a:f", "b:f", "c:f"], (3, true));
        // A report delivered again counts once.
        check(3, &["a:f", "a:f", "b:f", "b:f"], (2, false));
        // A completed backup ends the run; a started one changes nothing.
        check(3, &["a:f", "b:f", "c:c", "d:s", "d:f"], (1, false));
        check(1, &["a:f"], (1, true));
        // Counting goes on while paused; the reason names the limit it reached.
        check(2, &["a:f", "b:f", "c:f"], (3, true));
    }

    #[test]
    fn the_latest_completion_is_kept_to_the_minute_and_never_moves_back() {
        let completed = |id: &str, at: &str| {
            let mut r = report(id, ReportStatus::Completed);
            r.completed_at = Some(at.parse().unwrap());
            r
        };
        let now: DateTime<Utc> = "2026-06-01T00:00:00Z".parse().unwrap();
        let replay = |reports: &[Report]| {
            let mut status = sexton_shared::records::ScheduleStatus::default();
            for r in reports {
                let before = status.clone();
                remember_failures(&mut status, r);
                remember_completion(&mut status, &before, r, now);
            }
            status.last_completed.map(|t| t.to_rfc3339())
        };
        let first = completed("a", "2026-01-01T00:00:00Z");
        assert_eq!(
            replay(std::slice::from_ref(&first)).as_deref(),
            Some("2026-01-01T00:00:00+00:00")
        );
        // 30 s later and nothing else changes: no write for it.
        let soon = completed("b", "2026-01-01T00:00:30Z");
        assert_eq!(
            replay(&[first.clone(), soon]).as_deref(),
            Some("2026-01-01T00:00:00+00:00")
        );
        let later = completed("c", "2026-01-01T00:05:00Z");
        assert_eq!(
            replay(&[first.clone(), later.clone(), first.clone()]).as_deref(),
            Some("2026-01-01T00:05:00+00:00"),
            "a report delivered again does not move it back"
        );
        // After a failure, the completion ending the run is recorded exactly.
        let failed = report("d", ReportStatus::Failed);
        let right_after = completed("e", "2026-01-01T00:00:10Z");
        assert_eq!(
            replay(&[first, failed, right_after]).as_deref(),
            Some("2026-01-01T00:00:10+00:00")
        );
        // A completion claimed in the future is taken as now: it cannot pin the status.
        let forged = completed("g", "2099-01-01T00:00:00Z");
        assert_eq!(
            replay(&[forged, later.clone()]).as_deref(),
            Some("2026-06-01T00:00:00+00:00")
        );
        // A failed report carries no completion.
        assert_eq!(replay(&[report("f", ReportStatus::Failed)]), None);
    }
}
