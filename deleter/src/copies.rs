//! Copy delete jobs (issue 28): a location's retention let a backup's copy there go, and the
//! deleter removes it from that location, trusting the job no more than a delete job.
//!
//! A job is judged against a catalog view holding its mark ([`judge`], pure): the record is the
//! one the job names (uid), its copy at the location is `expiring` with the job's mark (the
//! revision the mark was written over), it is not held, every key of the copy lies in the
//! backup's own directory under the location's prefix, and the plan the copy rule's policy
//! makes now over that location's copies still deletes it. Then the copy is claimed
//! (`deleting`, compare-and-set), its data objects go, then `metadata.json`, then the record
//! forgets the copy; the record itself goes only when no place holds the backup any more
//! (its objects at primary deleted too). A claimed copy is never judged again, only finished.
//!
//! The jobs have a durable of their own (`deleter-copies`), beside the delete and binlog jobs:
//! a location that is down delays its copies' deletions, never a backup's at primary.
//!
//! After a job's copy is deleted (or the job finds it deleted), the location's binlog archive of
//! the cluster is collected up to its new horizon ([`crate::copies_binlog`]); that pass never
//! fails the job.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{self};
use chrono::{DateTime, Utc};
use sexton_model::{
    copies::{copy_policy, CopyDeleteJob, CopyState},
    names::{BackupId, LocationName},
    records::{BackupRecord, ScheduleRecord},
};
use sexton_retention::judge;
use sexton_shared::{
    audit::{AuditBackup, AuditEvent, AuditObject},
    catalog::{CasError, Versioned},
    channels,
    object_store::{check_backup_key, ObjectStore},
    outcome::Outcome,
    planning, topology, Shutdown,
};

use crate::{context::Deleter, copies_binlog::LocationCollector};

/// What the catalog says of a copy delete job, decided without I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyVerdict {
    /// Nothing left to do: the record or its copy is gone (an earlier delivery finished).
    AlreadyDone(String),
    /// The job must not run; nothing is deleted. `unmark`: the copy is marked at the job's
    /// mark but a plan made now keeps it (or it is held): take the mark off.
    Refuse { reason: String, unmark: bool },
    /// The copy is `expiring` at the job's mark and may go: claim it.
    Claim,
    /// An earlier delivery claimed it and was interrupted: finish.
    Resume,
    /// The copy is not marked with the job's mark in this view: the caller asks the leader
    /// whether the view lags (wait) or the job is stale or forged (refuse).
    Unmatched(String),
}

fn refuse(reason: impl Into<String>, unmark: bool) -> CopyVerdict {
    CopyVerdict::Refuse {
        reason: reason.into(),
        unmark,
    }
}

/// Judges `job` against one cluster's records (a view holding every change stored before the
/// job was taken), the cluster's schedules, and the location's key prefix.
pub fn judge(
    job: &CopyDeleteJob,
    records: &HashMap<BackupId, Versioned<BackupRecord>>,
    schedules: &[ScheduleRecord],
    location_prefix: &str,
    now: DateTime<Utc>,
) -> CopyVerdict {
    let Some(current) = records.get(&job.backup_id) else {
        return CopyVerdict::AlreadyDone(format!("backup {} is not in the catalog", job.backup_id));
    };
    let record = &current.value;
    if record.uid != job.uid {
        return refuse(
            format!(
                "backup {} has unique id {}, the job names {}",
                record.id, record.uid, job.uid
            ),
            false,
        );
    }
    if record.cluster != job.cluster || record.id != job.backup_id {
        return refuse(
            format!(
                "the catalog entry of {}/{} is backup {}/{}",
                job.cluster, job.backup_id, record.cluster, record.id
            ),
            false,
        );
    }
    let location = &job.location;
    let Some(copy) = record.copies.get(location) else {
        return CopyVerdict::AlreadyDone(format!("backup {} has no copy at {location}", record.id));
    };
    if copy.state == CopyState::Deleted {
        return CopyVerdict::AlreadyDone(format!(
            "the copy of backup {} at {location} is deleted",
            record.id
        ));
    }
    if copy.state == CopyState::Skipped {
        return CopyVerdict::AlreadyDone(format!(
            "backup {} was never copied to {location} (skipped)",
            record.id
        ));
    }
    let ours = copy.expiring_revision == Some(job.revision);
    match copy.state {
        CopyState::Deleting if ours => return CopyVerdict::Resume,
        CopyState::Expiring if ours => {}
        state => {
            return CopyVerdict::Unmatched(format!(
                "the copy of backup {} at {location} is {} (mark {:?}), the job names mark {}",
                record.id,
                state.as_str(),
                copy.expiring_revision,
                job.revision
            ))
        }
    }
    if let Some(why) = planning::protection(record) {
        return refuse(why, true);
    }
    for object in &copy.objects {
        if let Err(err) = check_backup_key(
            location_prefix,
            &record.cluster,
            &record.backup_name,
            record.id.as_str(),
            &object.key,
        ) {
            return refuse(
                format!("the copy of backup {} at {location}: {err}", record.id),
                false,
            );
        }
    }
    let rules = schedules
        .iter()
        .filter(|s| s.cluster == record.cluster && s.plan == record.plan)
        .flat_map(|s| &s.copies);
    let policy = match copy_policy(rules, location) {
        Ok(policy) => policy,
        Err(why) => return refuse(why, true),
    };
    let group: Vec<judge::Member> = records
        .values()
        .filter(|r| r.value.plan == record.plan)
        .filter_map(|r| r.value.to_member_at(location))
        .collect();
    match judge::still_deletes(&group, &[record.id.as_str()], policy, now)
        .into_iter()
        .next()
    {
        Some(Ok(())) => CopyVerdict::Claim,
        Some(Err(why)) => refuse(format!("at {location}: {why}"), true),
        None => refuse("no verdict", false),
    }
}

/// Runs the copy delete jobs until `shutdown`: at most `concurrency` at once.
pub async fn run(
    deleter: Arc<Deleter>,
    locations: BTreeMap<LocationName, ObjectStore>,
    jetstream: jetstream::Context,
    concurrency: usize,
    ack_wait: Duration,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let consumer = channels::COPY_DELETE_DURABLE
        .open(
            &jetstream,
            None,
            channels::Settings {
                ack_wait,
                max_ack_pending: Some((4 * concurrency) as i64),
            },
        )
        .await?;
    let mut messages = consumer
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading copy delete jobs")?;
    let locations = Arc::new(locations);
    let binlogs = crate::copies_binlog::LocationCollector::new();
    sexton_shared::nats::handle_concurrently(
        &mut messages,
        &mut shutdown,
        "copy delete jobs",
        concurrency,
        |message| {
            let deleter = deleter.clone();
            let locations = locations.clone();
            let binlogs = binlogs.clone();
            async move {
                let keep = sexton_shared::nats::KeepInProgress::start(&message, ack_wait / 3);
                // A job refused before it was read counts under `unknown`, `refused`.
                let labels = std::sync::Mutex::new(("unknown".to_string(), "refused"));
                channels::deliver(
                    &channels::COPY_DELETE_JOBS,
                    "deleter",
                    &deleter.topology().jetstream,
                    None,
                    &message,
                    |job| async {
                        let (location, label, outcome) =
                            handle(&deleter, &locations, &binlogs, job, &message).await;
                        *labels.lock().expect("not poisoned") = (location, label);
                        outcome
                    },
                )
                .await;
                drop(keep);
                let (location, label) = labels.into_inner().expect("not poisoned");
                deleter
                    .metrics()
                    .copy_deletions
                    .with_label_values(&[&location, label])
                    .inc();
            }
        },
    )
    .await
}

/// One job: the location and outcome labels, and the outcome.
async fn handle(
    deleter: &Deleter,
    locations: &BTreeMap<LocationName, ObjectStore>,
    binlogs: &LocationCollector,
    job: CopyDeleteJob,
    message: &jetstream::Message,
) -> (String, &'static str, Outcome) {
    let Some(store) = locations.get(&job.location) else {
        return (
            "unknown".into(),
            "refused",
            Outcome::Poison(format!(
                "copy delete job for backup {} of {}: location {} is not configured here; \
                 nothing deleted (the copy stays marked, and its job is published again by a \
                 later retention run)",
                job.backup_id, job.cluster, job.location
            )),
        );
    };
    let label = job.location.to_string();
    let delivered = message.info().map(|info| info.delivered).unwrap_or(1);
    match delete_copy(deleter, &job, store).await {
        Ok(Step::Deleted(objects)) => {
            deleter
                .metrics()
                .copy_objects_deleted
                .with_label_values(&[&label])
                .inc_by(objects);
            // The copy went: the location may need fewer binlog segments now.
            binlogs
                .collect(deleter, &job.location, store, &job.cluster)
                .await;
            (label, "deleted", Outcome::Done)
        }
        Ok(Step::Nothing(why)) => {
            tracing::info!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, "copy delete job: nothing to do: {why}");
            // An earlier delivery deleted the copy and may have stopped before its pass.
            binlogs
                .collect(deleter, &job.location, store, &job.cluster)
                .await;
            (label, "done", Outcome::Done)
        }
        Ok(Step::Refused(why)) => (label, "refused", Outcome::Poison(why)),
        Err(err) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered);
            tracing::warn!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, delay_s = delay.as_secs(), error = format!("{err:#}"), "copy not deleted yet; will retry");
            (label, "retry", Outcome::RetryAfter(delay))
        }
    }
}

enum Step {
    /// The copy's objects went and the record forgot it; how many objects.
    Deleted(u64),
    Nothing(String),
    Refused(String),
}

async fn delete_copy(
    deleter: &Deleter,
    job: &CopyDeleteJob,
    store: &ObjectStore,
) -> anyhow::Result<Step> {
    let schedules = deleter.schedules().all().await?;
    let (verdict, current) = {
        let view = deleter.views().current(&job.cluster).await?;
        let verdict = judge(job, &view.records, &schedules, store.prefix(), Utc::now());
        let verdict = match verdict {
            CopyVerdict::Unmatched(why) => {
                let latest = deleter
                    .views()
                    .latest_revision(&job.cluster, &job.backup_id)
                    .await?;
                if latest.is_some_and(|latest| latest > view.applied()) {
                    anyhow::bail!("the catalog view is behind the leader ({why})");
                }
                refuse(format!("stale or forged job: {why}"), false)
            }
            other => other,
        };
        (verdict, view.records.get(&job.backup_id).cloned())
    };
    let claimed = match verdict {
        CopyVerdict::AlreadyDone(why) => return Ok(Step::Nothing(why)),
        CopyVerdict::Refuse { reason, unmark } => {
            if unmark {
                if let Some(current) = &current {
                    unmark_copy(deleter, job, current).await;
                }
            }
            return Ok(Step::Refused(reason));
        }
        CopyVerdict::Unmatched(why) => return Ok(Step::Refused(why)),
        CopyVerdict::Resume => current.context("the record of a resumed copy")?.value,
        CopyVerdict::Claim => {
            let current = current.context("the record of a claimed copy")?;
            let mut claimed = current.value.clone();
            claimed.keep_mark(current.revision);
            if let Some(copy) = claimed.copies.get_mut(&job.location) {
                copy.state = CopyState::Deleting;
            }
            match deleter.catalog().update(&claimed, current.revision).await {
                Ok(_) => {}
                Err(CasError::Conflict) => anyhow::bail!("the record changed while claimed"),
                Err(CasError::Other(err)) => return Err(err),
            }
            tracing::info!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, reasons = ?job.reasons, "copy claimed for deletion");
            claimed
        }
    };
    let copy = claimed
        .copies
        .get(&job.location)
        .context("the claimed copy")?;
    let audited = AuditBackup {
        id: claimed.id.to_string(),
        uid: claimed.uid.clone(),
        revision: Some(job.revision),
        reasons: copy.delete_reasons.clone(),
        policy_hash: copy.delete_policy.clone(),
        volumes: Vec::new(),
        objects: copy
            .objects
            .iter()
            .map(|object| AuditObject {
                key: object.key.clone(),
                size: Some(object.size),
            })
            .collect(),
    };
    // In the audit before anything goes (a claim that cannot be recorded waits).
    let audit = deleter.audit();
    audit
        .record(vec![audit.entry(
            Some(&claimed.cluster),
            Some(&claimed.plan),
            AuditEvent::CopyClaimed {
                location: job.location.to_string(),
                backups: vec![audited.clone()],
            },
        )])
        .await
        .map_err(|err| anyhow::anyhow!("recording the claim in the audit: {err}"))?;
    // Data first, `metadata.json` last: a copy half deleted never looks whole at the location.
    let (metadata, data): (Vec<String>, Vec<String>) = copy
        .objects
        .iter()
        .map(|object| object.key.clone())
        .partition(|key| BackupRecord::is_metadata_key(key));
    let mut deleted = 0u64;
    for keys in [data, metadata] {
        // Every version of each key on a versioned location (a key delete there keeps the
        // bytes): the deleter deletes versions, never bare keys, there.
        let report = store
            .delete_keys_each(&keys)
            .await
            .with_context(|| format!("deleting the copy at {}", job.location))?;
        if let Some(err) = report.request_failed {
            return Err(anyhow::Error::new(err))
                .with_context(|| format!("deleting the copy at {}", job.location));
        }
        if let Some(failure) = report.failed.first() {
            anyhow::bail!(
                "deleting the copy at {}: {failure} ({} refused)",
                job.location,
                report.failed.len()
            );
        }
        deleted += report.deleted.len() as u64;
    }
    let record_removed = forget_copy(deleter, job).await?;
    let _ = audit
        .record(vec![audit.entry(
            Some(&claimed.cluster),
            Some(&claimed.plan),
            AuditEvent::CopyDeleted {
                location: job.location.to_string(),
                backups: vec![audited],
                record_removed,
            },
        )])
        .await;
    tracing::info!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, objects = deleted, reasons = ?job.reasons, "copy deleted");
    Ok(Step::Deleted(deleted))
}

/// The record says the copy at the job's location is deleted; the record goes when no place
/// holds the backup any more.
async fn forget_copy(deleter: &Deleter, job: &CopyDeleteJob) -> anyhow::Result<bool> {
    for _ in 0..5 {
        let Some(current) = deleter.catalog().get(&job.cluster, &job.backup_id).await? else {
            return Ok(false);
        };
        let mut record = current.value;
        if record.uid != job.uid {
            return Ok(false);
        }
        record.keep_mark(current.revision);
        // The copy stays on the record as `deleted`: the rule counts as served (nothing
        // awaits it, a late copy job copies nothing), and describe says when it went.
        match record.copies.get_mut(&job.location) {
            Some(copy) if copy.state == CopyState::Deleting => {
                copy.state = CopyState::Deleted;
                copy.deleted_at = Some(Utc::now());
            }
            _ => return Ok(false),
        }
        let removing = !record.held_at_primary() && !record.held_elsewhere();
        let written = if removing {
            deleter
                .catalog()
                .remove(&record.cluster, &record.id, current.revision)
                .await
        } else {
            deleter
                .catalog()
                .update(&record, current.revision)
                .await
                .map(|_| ())
        };
        match written {
            Ok(()) => return Ok(removing),
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    anyhow::bail!("the record kept changing")
}

/// Takes the mark off a copy that a plan made now keeps (or that is held), if it still carries
/// the job's mark. Best effort: a later run marks or unmarks again.
async fn unmark_copy(deleter: &Deleter, job: &CopyDeleteJob, current: &Versioned<BackupRecord>) {
    let mut record = current.value.clone();
    record.keep_mark(current.revision);
    let Some(copy) = record.copies.get_mut(&job.location) else {
        return;
    };
    if copy.state != CopyState::Expiring || copy.expiring_revision != Some(job.revision) {
        return;
    }
    copy.state = CopyState::Copied;
    copy.expiring_revision = None;
    copy.delete_reasons.clear();
    copy.delete_policy = None;
    match deleter.catalog().update(&record, current.revision).await {
        Ok(_) => {
            tracing::info!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, "copy kept after all: mark taken off")
        }
        Err(err) => {
            tracing::warn!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, error = ?err, "cannot take the copy's mark off; a later run decides again")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sexton_model::names::ClusterName;

    const NOW: &str = "2026-01-02T00:00:00Z";

    /// A completed full backup of c1/p at hour `hour`, copied to dr in `state` (marked with
    /// `mark`), its copy's objects under dr's prefix `dr`.
    fn copied(id: &str, hour: u32, state: &str, mark: Option<u64>) -> Versioned<BackupRecord> {
        let value = serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
            "backup_name": "s", "kind": "full", "status": "completed",
            "completed_at": format!("2026-01-01T{hour:02}:00:00Z"),
            "copy_to": ["dr"],
            "copies": {"dr": {
                "state": state, "copied_at": "2026-01-01T23:00:00Z",
                "objects": [
                    {"key": format!("dr/c1/s/{id}/backup.xbstream"), "size": 1},
                    {"key": format!("dr/c1/s/{id}/metadata.json"), "size": 1},
                ],
                "expiring_revision": mark,
            }},
        }))
        .unwrap();
        Versioned {
            value,
            revision: 10 + u64::from(hour),
        }
    }

    fn schedule(copies: serde_json::Value) -> ScheduleRecord {
        serde_json::from_value(serde_json::json!({
            "name": "s", "cluster": "c1", "plan": "p", "cron": "0 3 * * *",
            "policy": {"keep_last": 1}, "copies": copies,
            "created_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    fn keep_dr(n: u32) -> Vec<ScheduleRecord> {
        vec![schedule(
            serde_json::json!([{"to": "dr", "policy": {"keep_last": n}}]),
        )]
    }

    fn job(id: &str, revision: u64) -> CopyDeleteJob {
        CopyDeleteJob {
            schema_version: 1,
            cluster: ClusterName::new("c1").unwrap(),
            backup_id: BackupId::new(id).unwrap(),
            uid: format!("u-{id}"),
            location: LocationName::new("dr").unwrap(),
            revision,
            reasons: vec![],
        }
    }

    fn catalog(
        records: Vec<Versioned<BackupRecord>>,
    ) -> HashMap<BackupId, Versioned<BackupRecord>> {
        records
            .into_iter()
            .map(|r| (r.value.id.clone(), r))
            .collect()
    }

    fn verdict(
        job: &CopyDeleteJob,
        records: &HashMap<BackupId, Versioned<BackupRecord>>,
        schedules: &[ScheduleRecord],
    ) -> CopyVerdict {
        judge(job, records, schedules, "dr", NOW.parse().unwrap())
    }

    fn refused(verdict: CopyVerdict) -> (String, bool) {
        match verdict {
            CopyVerdict::Refuse { reason, unmark } => (reason, unmark),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_marked_copy_the_plan_still_deletes_is_claimed_and_a_claimed_one_resumed() {
        let records = catalog(vec![
            copied("b1", 1, "expiring", Some(7)),
            copied("b2", 2, "copied", None),
        ]);
        assert_eq!(
            verdict(&job("b1", 7), &records, &keep_dr(1)),
            CopyVerdict::Claim
        );
        let records = catalog(vec![
            copied("b1", 1, "deleting", Some(7)),
            copied("b2", 2, "copied", None),
        ]);
        // Claimed: finished whatever the plan says now.
        assert_eq!(
            verdict(&job("b1", 7), &records, &keep_dr(5)),
            CopyVerdict::Resume
        );
    }

    #[test]
    fn a_job_that_is_not_the_marks_is_not_claimed() {
        let records = catalog(vec![
            copied("b1", 1, "copied", None),
            copied("b2", 2, "expiring", Some(7)),
        ]);
        // Not marked at all, another mark, a deleted copy, an absent record or copy.
        assert!(matches!(
            verdict(&job("b1", 11), &records, &keep_dr(1)),
            CopyVerdict::Unmatched(_)
        ));
        assert!(matches!(
            verdict(&job("b2", 8), &records, &keep_dr(1)),
            CopyVerdict::Unmatched(_)
        ));
        let deleted = catalog(vec![copied("b1", 1, "deleted", Some(7))]);
        assert!(matches!(
            verdict(&job("b1", 7), &deleted, &keep_dr(1)),
            CopyVerdict::AlreadyDone(_)
        ));
        assert!(matches!(
            verdict(&job("b9", 7), &records, &keep_dr(1)),
            CopyVerdict::AlreadyDone(_)
        ));
        let mut elsewhere = job("b2", 7);
        elsewhere.location = LocationName::new("vault").unwrap();
        assert!(matches!(
            verdict(&elsewhere, &records, &keep_dr(1)),
            CopyVerdict::AlreadyDone(_)
        ));
        // Another uid: refused, the mark left alone.
        let mut other = job("b2", 7);
        other.uid = "u-someone-else".into();
        let (why, unmark) = refused(verdict(&other, &records, &keep_dr(1)));
        assert!(why.contains("unique id"), "{why}");
        assert!(!unmark);
    }

    #[test]
    fn a_copy_the_plan_keeps_now_or_that_is_held_is_refused_and_unmarked() {
        let marked = || {
            catalog(vec![
                copied("b1", 1, "expiring", Some(7)),
                copied("b2", 2, "copied", None),
            ])
        };
        // The rule now keeps two.
        let (why, unmark) = refused(verdict(&job("b1", 7), &marked(), &keep_dr(2)));
        assert!(why.contains("keeps"), "{why}");
        assert!(unmark);
        // No rule to dr any more, or two that disagree: everything is kept there.
        for schedules in [
            vec![schedule(serde_json::json!([]))],
            vec![
                schedule(serde_json::json!([{"to": "dr", "policy": {"keep_last": 1}}])),
                schedule(serde_json::json!([{"to": "dr", "policy": {"keep_last": 3}}])),
            ],
        ] {
            let (_, unmark) = refused(verdict(&job("b1", 7), &marked(), &schedules));
            assert!(unmark);
        }
        // A hold on the backup holds its copies too.
        let mut held = marked();
        held.get_mut(&BackupId::new("b1").unwrap())
            .unwrap()
            .value
            .legal_hold = true;
        let (_, unmark) = refused(verdict(&job("b1", 7), &held, &keep_dr(1)));
        assert!(unmark);
        // A newer backup on its way to dr (awaited, no copy yet) whose parent is b1 keeps it.
        let mut child = copied("b3", 3, "copied", None);
        child.value.copies.clear();
        child.value.kind = sexton_retention::BackupKind::Incremental;
        child.value.parent = Some(BackupId::new("b1").unwrap());
        let mut records = marked();
        records.insert(child.value.id.clone(), child);
        let (why, unmark) = refused(verdict(&job("b1", 7), &records, &keep_dr(1)));
        assert!(unmark, "{why}");
    }

    #[test]
    fn a_copy_whose_keys_leave_its_directory_is_refused() {
        let mut forged = copied("b1", 1, "expiring", Some(7));
        forged
            .value
            .copies
            .get_mut(&LocationName::new("dr").unwrap())
            .unwrap()
            .objects[0]
            .key = "dr/c1/s/b2/backup.xbstream".into();
        let records = catalog(vec![forged, copied("b2", 2, "copied", None)]);
        let (why, unmark) = refused(verdict(&job("b1", 7), &records, &keep_dr(1)));
        assert!(why.contains("directory"), "{why}");
        assert!(!unmark);
    }
}
