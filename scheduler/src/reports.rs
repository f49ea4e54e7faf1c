//! Executor reports → catalog records → `checkpoint-complete`.
//!
//! A report is validated before anything is written: the cluster and schedule must be known,
//! every artifact key must lie under the cluster's prefix, a completion cannot be in the
//! future. A repeated report is an idempotent no-op; a report that contradicts the catalog
//! (say, "completed" for a backup already expiring) changes nothing.
//!
//! A merge report is recorded by `merges`; what a report changes on its schedule's status, by
//! `schedule_status`.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use sexton_model::{
    records::{BackupRecord, BackupStatus, ScheduleRecord, RECORD_SCHEMA_VERSION},
    wire::{self, CheckpointComplete, Report, ReportStatus},
};
use sexton_retention::VolumeArtifact;
use sexton_shared::{
    catalog::{CasError, Catalog, Lookup, Versioned},
    channels,
    config::Config,
    object_store::{check_backup_key, ObjectStore},
    outcome::Outcome,
    topology::{self, Topology},
    Shutdown,
};

use crate::{intake, merges, metrics::Metrics, schedule_status};

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

/// Records one report in the catalog: admitted (its schedule and cluster known, its keys its
/// own), a merge handed to `merges`, intake's verdict on a completion, the record written with
/// a compare-and-set, then [`finish`]ed.
async fn record_report(
    topology: &Topology,
    clusters_bucket: &async_nats::jetstream::kv::Store,
    catalog: &Catalog,
    gate: &intake::Intake,
    config: &Config,
    report: &Report,
    delivery: Delivery,
) -> anyhow::Result<Outcome> {
    let schedule = report_schedule(topology, report).await?;
    let admitted = admit(clusters_bucket, catalog, config, report, schedule.as_ref()).await?;
    if let Err(why) = admitted {
        return Ok(Outcome::Poison(why));
    }
    if let Some(merge) = &report.merge {
        return match &merge.volume {
            None => merges::record_merge(topology, catalog, gate, report, merge).await,
            Some(volume) => {
                merges::record_volume_merge(topology, catalog, gate, report, merge, volume).await
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
        let existing = match existing_record(catalog, report, delivery.delivered).await? {
            Ok(existing) => existing,
            Err(outcome) => return Ok(outcome),
        };
        let writes = existing
            .as_ref()
            .is_none_or(|current| current.value.status == BackupStatus::InProgress);
        if writes && report.status == ReportStatus::Completed && verdict.is_none() {
            match judge_intake(gate, config, report, delivery).await {
                Ok((judged, refused)) => (verdict, refused_at) = (Some(judged), refused),
                Err(outcome) => return Ok(outcome),
            }
        }
        let (effective, findings) = as_recorded(report, verdict.as_ref(), refused_at, &schedule);
        let report = effective.as_ref();
        let (written, result) = match &existing {
            None => {
                let record = new_record(report, findings, schedule.as_ref(), gate);
                let result = catalog.create(&record).await;
                (record, result.map(|_| ()))
            }
            Some(current) => match settled(&current.value, report, findings) {
                Change::Repeat => return finish(topology, report, Some(&current.value)).await,
                Change::Answer(outcome) => return Ok(outcome),
                Change::Settle(record) => {
                    let result = catalog.update(&record, current.revision).await;
                    (*record, result.map(|_| ()))
                }
            },
        };
        match result {
            Ok(()) => {
                count_verdict(gate, verdict.as_ref(), report).await;
                return finish(topology, report, Some(&written)).await;
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    Ok(Outcome::RetryAfter(Duration::from_millis(500)))
}

/// The schedule the report names, as the leader has it; `None` when it names none, or one
/// that is gone.
async fn report_schedule(
    topology: &Topology,
    report: &Report,
) -> anyhow::Result<Option<ScheduleRecord>> {
    let Some(name) = &report.schedule else {
        return Ok(None);
    };
    match sexton_shared::leader_read::value(&topology.schedules, name.as_str()).await? {
        Some(body) => Ok(Some(
            serde_json::from_slice::<ScheduleRecord>(&body)
                .context("decoding the report's schedule")?,
        )),
        None => Ok(None),
    }
}

/// Judges the report against what Sexton knows ([`validate_report`]); `Err(why)` refuses it.
async fn admit(
    clusters_bucket: &async_nats::jetstream::kv::Store,
    catalog: &Catalog,
    config: &Config,
    report: &Report,
    schedule: Option<&ScheduleRecord>,
) -> anyhow::Result<Result<(), String>> {
    let cluster_known = schedule.is_some()
        || clusters_bucket
            .get(report.cluster.as_str())
            .await
            .context("reading the cluster record")?
            .is_some();
    // The schedule was deleted while this backup ran (`schedule delete` keeps a backup in
    // progress, and says so): its report still settles the record the catalog holds, rather
    // than leave it in progress for ever. Judged as a report without a schedule.
    let settles_orphan = match (&report.schedule, schedule) {
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
        schedule,
        cluster_known,
        &config.s3.prefix,
        Utc::now(),
    ) {
        return Ok(Err(why));
    }
    if settles_orphan {
        tracing::info!(cluster = %report.cluster, backup = %report.backup_id, "the backup's schedule was deleted while it ran; its record is settled and kept");
    }
    Ok(Ok(()))
}

/// The record the catalog holds for the reported backup (`None`: none yet, or one deleted
/// that this report does not bring back); `Err(outcome)` answers the report at once.
async fn existing_record(
    catalog: &Catalog,
    report: &Report,
    delivered: i64,
) -> anyhow::Result<Result<Option<Versioned<BackupRecord>>, Outcome>> {
    Ok(
        match catalog.lookup(&report.cluster, &report.backup_id).await? {
            Lookup::Live(current) => Ok(Some(*current)),
            Lookup::Never => Ok(None),
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
                    return Ok(Err(Outcome::Done));
                }
                if same {
                    return Ok(Err(Outcome::Poison(format!(
                    "backup {} of {} was deleted from the catalog; a report does not bring it back",
                    report.backup_id, report.cluster
                ))));
                }
                Ok(None)
            }
        },
    )
}

/// Intake's verdict on a completed report: its objects as seen in the bucket, and its times
/// against the due it answers; with the instant a report refused for its times is recorded
/// at. `Err(outcome)`: the bucket or the dues cannot be read, and the report waits.
async fn judge_intake(
    gate: &intake::Intake,
    config: &Config,
    report: &Report,
    delivery: Delivery,
) -> Result<(intake::Verdict, Option<DateTime<Utc>>), Outcome> {
    let Delivery {
        delivered,
        published,
    } = delivery;
    match intake::examine(&gate.store, report).await {
        Ok(judged) => {
            // A backdated completion (issue 29) is refused like missing objects:
            // against the due it answers, and by how late it was published.
            let due = match crate::dues::recall(&gate.dues, &report.cluster, &report.backup_id)
                .await
            {
                Ok(due) => due,
                Err(err) => {
                    tracing::warn!(cluster = %report.cluster, backup = %report.backup_id, error = %format!("{err:#}"), "cannot read the due-backup this report answers; the report waits");
                    return Err(Outcome::RetryAfter(intake_retry_delay(delivered)));
                }
            };
            let late = intake::judge_times(report, due.as_ref(), published, &config.scheduler);
            Ok(match (judged, late) {
                (intake::Verdict::Seen(_), Some(why)) => (
                    intake::Verdict::Refused(vec![why]),
                    Some(published.unwrap_or_else(Utc::now)),
                ),
                (judged, _) => (judged, None),
            })
        }
        Err(err) => {
            gate.metrics.with_label_values(&["retry"]).inc();
            tracing::warn!(cluster = %report.cluster, backup = %report.backup_id, error = %err, "cannot read the backup's objects; the report waits");
            Err(Outcome::RetryAfter(intake_retry_delay(delivered)))
        }
    }
}

/// What a report's record is written with besides the report: its status, the objects
/// intake saw (and when), and the locations it is to be copied to.
struct Findings {
    status: BackupStatus,
    objects: Vec<sexton_model::wire::ObjectDigest>,
    seen_at: Option<DateTime<Utc>>,
    copy_to: Vec<sexton_model::names::LocationName>,
}

/// The report as it is recorded, and its [`Findings`]. A report intake refused is recorded as
/// the failure it is (at `refused_at`, when refused for its times).
fn as_recorded<'a>(
    report: &'a Report,
    verdict: Option<&intake::Verdict>,
    refused_at: Option<DateTime<Utc>>,
    schedule: &Option<ScheduleRecord>,
) -> (std::borrow::Cow<'a, Report>, Findings) {
    let (effective, seen) = match verdict {
        Some(intake::Verdict::Refused(problems)) => (
            std::borrow::Cow::Owned(Report {
                status: ReportStatus::Failed,
                error: Some(intake::Verdict::reason(problems)),
                started_at: refused_at.map_or(report.started_at, |at| Some(at.fixed_offset())),
                completed_at: refused_at.map_or(report.completed_at, |at| Some(at.fixed_offset())),
                ..report.clone()
            }),
            Vec::new(),
        ),
        Some(intake::Verdict::Seen(objects)) => {
            (std::borrow::Cow::Borrowed(report), objects.clone())
        }
        None => (std::borrow::Cow::Borrowed(report), Vec::new()),
    };
    let status = match effective.status {
        ReportStatus::Started => BackupStatus::InProgress,
        ReportStatus::Completed => BackupStatus::Completed,
        ReportStatus::Failed => BackupStatus::Failed,
    };
    let seen_at = (!seen.is_empty()).then(Utc::now);
    let copy_to = copy_targets(schedule.as_ref(), &effective, status);
    let findings = Findings {
        status,
        objects: seen,
        seen_at,
        copy_to,
    };
    (effective, findings)
}

/// The record of a backup the catalog has not heard of: as reported.
fn new_record(
    report: &Report,
    findings: Findings,
    schedule: Option<&ScheduleRecord>,
    gate: &intake::Intake,
) -> BackupRecord {
    BackupRecord {
        schema_version: RECORD_SCHEMA_VERSION,
        id: report.backup_id.clone(),
        uid: uuid::Uuid::new_v4().simple().to_string(),
        cluster: report.cluster.clone(),
        plan: report.plan.clone(),
        schedule: report.schedule.clone(),
        backup_name: report.backup_name.clone(),
        kind: report.kind,
        parent: report.parent.clone(),
        status: findings.status,
        started_at: report.started_at,
        completed_at: report.completed_at,
        tick: report.tick,
        artifacts: artifacts_of(report),
        size_bytes: report.size_bytes,
        objects: findings.objects,
        seen_at: findings.seen_at,
        volumes: volumes_of(report),
        labels: report.labels.clone(),
        tags: report.tags.clone(),
        legal_hold: false,
        holds: report.holds.clone(),
        immutable: false,
        remote_cleanup: schedule.is_some_and(|s| s.remote_cleanup),
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
        copy_to: findings.copy_to,
        copies: Default::default(),
        primary_deleted_at: None,
        locked_until: None,
        log_range: report.log_range.clone(),
        differential: report.differential,
        store: Some(gate.store.place().clone()),
    }
}

/// What a report does to the record the catalog holds.
enum Change {
    /// The same news again, or news older than what we know: nothing to write.
    Repeat,
    /// The backup in progress ends: this record is written.
    Settle(Box<BackupRecord>),
    /// Nothing is written, and the report is answered so.
    Answer(Outcome),
}

/// The change a report makes to `record`, the backup as the catalog holds it.
fn settled(record: &BackupRecord, report: &Report, findings: Findings) -> Change {
    match (record.status, findings.status) {
        (a, b) if a == b => Change::Repeat,
        (BackupStatus::InProgress, BackupStatus::Completed | BackupStatus::Failed) => {
            let mut record = record.clone();
            record.status = findings.status;
            record.kind = report.kind;
            record.parent = report.parent.clone();
            record.completed_at = report.completed_at;
            record.started_at = report.started_at.or(record.started_at);
            record.tick = report.tick.or(record.tick);
            record.artifacts = artifacts_of(report);
            record.size_bytes = report.size_bytes;
            record.objects = findings.objects;
            record.seen_at = findings.seen_at;
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
            record.copy_to = findings.copy_to;
            Change::Settle(Box::new(record))
        }
        (_, BackupStatus::InProgress) => Change::Answer(Outcome::Done),
        (current_status, _) => Change::Answer(Outcome::Poison(format!(
            "backup {} is already {current_status:?}; the report changes nothing",
            report.backup_id
        ))),
    }
}

/// Counts intake's verdict on a record written; a refused one is also raised as an incident.
async fn count_verdict(gate: &intake::Intake, verdict: Option<&intake::Verdict>, report: &Report) {
    match verdict {
        Some(intake::Verdict::Seen(_)) => {
            gate.metrics.with_label_values(&["seen"]).inc();
        }
        Some(intake::Verdict::Refused(_)) => {
            gate.metrics.with_label_values(&["refused"]).inc();
            gate.refused(report).await;
        }
        None => {}
    }
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

/// The volumes as taken (see [`sexton_model::records::volume_artifacts`]).
fn volumes_of(report: &Report) -> Vec<VolumeArtifact> {
    sexton_model::records::volume_artifacts(&report.volumes)
}

/// The locations a completed backup is to be copied to: its schedule's copy rules that pick
/// its kind (issue 28). A backup recorded failed or in progress goes nowhere.
fn copy_targets(
    schedule: Option<&ScheduleRecord>,
    report: &Report,
    status: BackupStatus,
) -> Vec<sexton_model::names::LocationName> {
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
    schedule_status::track_in_flight(topology, report).await?;
    if report.status != ReportStatus::Completed {
        return Ok(Outcome::Done);
    }
    if let Some(record) = record.filter(|r| r.status == BackupStatus::Completed) {
        for location in record.awaiting_copy() {
            let job = sexton_model::copies::CopyJob {
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
