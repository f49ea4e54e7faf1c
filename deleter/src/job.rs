//! The pure half of a delete job: what the catalog says about it ([`verify`], [`verify_all`]),
//! and what is left when a deletion stops part way ([`remaining`]). The order its objects go in
//! (data, then `metadata.json`) is the batch's ([`crate::batch`]). No I/O here: the batch pipeline ([`crate::batch`]) reads the
//! catalog, calls these, and acts on the verdicts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sexton_model::{
    names::{BackupId, PlanName},
    records::{BackupRecord, BackupStatus, Policy},
    wire::DeleteJob,
};
use sexton_shared::{catalog::Versioned, object_store::check_backup_key, planning};

/// What the catalog says about a job, decided without I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The record is gone: an earlier delivery finished the work.
    AlreadyDone,
    /// A partial deletion whose backup is now being deleted whole (its last volumes were
    /// merged away meanwhile, say): the whole deletion takes these volumes too. Acknowledged
    /// without an incident: nothing is wrong.
    Superseded(String),
    /// The job must not run; nothing is deleted.
    Refuse(Refusal),
    /// The backup is expiring at the job's revision and may go: claim it.
    Claim,
    /// An earlier delivery of this job claimed it and was interrupted: finish.
    Resume,
    /// The job's mark is stored but this replica's view has not applied it yet: judge it at
    /// the next delivery (never from [`verify`], which judges a view that holds the mark).
    Lagging,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub reason: String,
    /// The backup is marked `expiring` at the job's revision, but a plan made now keeps it
    /// (or it is held): take the mark off, so the catalog says what the plan says and no
    /// further job is published for it.
    pub unmark: bool,
}

fn refuse(reason: impl Into<String>) -> Verdict {
    Verdict::Refuse(Refusal {
        reason: reason.into(),
        unmark: false,
    })
}

/// Checks a job against the current catalog record alone: the backup is the one the job
/// names (unique id), it is `expiring` at the job's revision (or was claimed by this job), not
/// held, and every key lies under the cluster's prefix. [`verify_all`] adds what needs the
/// rest of the catalog.
pub fn verify(job: &DeleteJob, current: Option<&Versioned<BackupRecord>>, prefix: &str) -> Verdict {
    let Some(current) = current else {
        return Verdict::AlreadyDone;
    };
    let record = &current.value;
    if record.uid != job.uid {
        return refuse(format!(
            "backup {} has unique id {}, the job names {}",
            record.id, record.uid, job.uid
        ));
    }
    if record.cluster != job.cluster || record.id != job.backup_id {
        return refuse(format!(
            "the catalog entry of {}/{} is backup {}/{}",
            job.cluster, job.backup_id, record.cluster, record.id
        ));
    }
    // Its objects at primary are gone and the record stays for its copies elsewhere (issue
    // 28): an earlier delivery finished this job's work.
    if !record.held_at_primary() {
        return Verdict::AlreadyDone;
    }
    let marked_for_this_job = record.status == BackupStatus::Expiring
        && record.mark_revision(current.revision) == job.revision;
    if let Some(why) = planning::protection(record) {
        return Verdict::Refuse(Refusal {
            reason: why,
            unmark: marked_for_this_job,
        });
    }
    if !job.volumes.is_empty() {
        return verify_volumes(job, current, prefix);
    }
    for key in record.all_keys().iter() {
        if let Err(err) = check_backup_key(
            prefix,
            &record.cluster,
            &record.backup_name,
            record.id.as_str(),
            key,
        ) {
            return refuse(format!("backup {}: {err}", record.id));
        }
    }
    match record.status {
        BackupStatus::Expiring if marked_for_this_job => Verdict::Claim,
        BackupStatus::Expiring => refuse(format!(
            "stale job: backup {} was marked expiring at revision {}, the job names {}",
            record.id,
            record.mark_revision(current.revision),
            job.revision
        )),
        BackupStatus::Deleting if record.expiring_revision == Some(job.revision) => Verdict::Resume,
        status => refuse(format!(
            "backup {} is {}, not expiring",
            record.id,
            status.as_str()
        )),
    }
}

/// [`verify`] for a partial deletion (the job names volumes): the record stays `completed`,
/// each named volume is in it and marked `expiring`, its keys lie in the backup's own
/// directory. Claimed at the job's revision; resumed when the record's `volume_deletion` is
/// this job's.
fn verify_volumes(job: &DeleteJob, current: &Versioned<BackupRecord>, prefix: &str) -> Verdict {
    let record = &current.value;
    if let Some(claimed) = &record.volume_deletion {
        return if claimed.revision == job.revision && claimed.volumes == job.volumes {
            Verdict::Resume
        } else {
            refuse(format!(
                "backup {}: another partial deletion (revision {}) is under way",
                record.id, claimed.revision
            ))
        };
    }
    if matches!(
        record.status,
        BackupStatus::Expiring | BackupStatus::Deleting
    ) {
        return Verdict::Superseded(format!(
            "backup {} is {}: its whole deletion takes these volumes too",
            record.id,
            record.status.as_str()
        ));
    }
    if record.status != BackupStatus::Completed {
        return refuse(format!(
            "backup {} is {}: a partial deletion needs a completed backup",
            record.id,
            record.status.as_str()
        ));
    }
    for name in &job.volumes {
        let Some(volume) = record.volumes.iter().find(|v| v.name == *name) else {
            return refuse(format!("backup {} has no volume {name}", record.id));
        };
        if !volume.expiring {
            return refuse(format!(
                "backup {} volume {name} is not marked expiring",
                record.id
            ));
        }
        for key in &volume.keys {
            if let Err(err) = check_backup_key(
                prefix,
                &record.cluster,
                &record.backup_name,
                record.id.as_str(),
                key,
            ) {
                return refuse(format!("backup {} volume {name}: {err}", record.id));
            }
            if BackupRecord::is_metadata_key(key) {
                return refuse(format!(
                    "backup {} volume {name} lists the backup's metadata.json, which stays \
                     with the record",
                    record.id
                ));
            }
        }
    }
    if current.revision != job.revision {
        return refuse(format!(
            "stale job: backup {} is at revision {}, the job names {}",
            record.id, current.revision, job.revision
        ));
    }
    Verdict::Claim
}

/// One cluster's catalog and the policies of its plans, as read for one batch.
pub struct ClusterView<'a> {
    pub records: &'a HashMap<BackupId, Versioned<BackupRecord>>,
    pub policies: &'a BTreeMap<PlanName, Vec<Policy>>,
}

/// Decides every job of one cluster in a batch: [`verify`], then two checks that need the
/// whole catalog. A backup to claim must not share an object with a backup that is not being
/// deleted (a kept backup would lose it), and the plan made now must still let it go
/// ([`planning::may_go`]: a stale job whose backup is now kept is refused). A resumed job is
/// not judged again: its deletion has begun, and stopping would leave it half done.
pub fn verify_all(
    jobs: &[&DeleteJob],
    view: &ClusterView<'_>,
    prefix: &str,
    now: DateTime<Utc>,
) -> Vec<Verdict> {
    let mut verdicts: Vec<Verdict> = jobs
        .iter()
        .map(|job| verify(job, view.records.get(&job.backup_id), prefix))
        .collect();
    let claims: Vec<usize> = (0..jobs.len())
        .filter(|&i| verdicts[i] == Verdict::Claim)
        .collect();
    if claims.is_empty() {
        return verdicts;
    }
    let kept_keys: HashSet<&str> = view
        .records
        .values()
        .filter(|r| r.value.held_at_primary() && !r.value.status.is_being_deleted())
        .flat_map(|r| {
            r.value
                .artifacts
                .iter()
                .chain(r.value.volumes.iter().flat_map(|v| &v.keys))
                .map(String::as_str)
        })
        .collect();
    let mut by_plan: BTreeMap<&PlanName, Vec<usize>> = BTreeMap::new();
    let mut partial_by_plan: BTreeMap<&PlanName, Vec<usize>> = BTreeMap::new();
    for &i in &claims {
        let record = &view.records[&jobs[i].backup_id].value;
        if !jobs[i].volumes.is_empty() {
            // The named volumes' keys may belong to no other backup, and to no volume of this
            // one that stays.
            let going = record.volume_keys(&jobs[i].volumes);
            let staying: HashSet<&str> = record
                .artifacts
                .iter()
                .filter(|key| !going.contains(key))
                .chain(
                    record
                        .volumes
                        .iter()
                        .filter(|v| !jobs[i].volumes.contains(&v.name))
                        .flat_map(|v| &v.keys),
                )
                .map(String::as_str)
                .collect();
            let others: HashSet<&str> = view
                .records
                .values()
                .filter(|r| {
                    r.value.id != record.id
                        && r.value.held_at_primary()
                        && !r.value.status.is_being_deleted()
                })
                .flat_map(|r| r.value.all_keys_iter())
                .collect();
            if let Some(key) = going
                .iter()
                .find(|key| staying.contains(key.as_str()) || others.contains(key.as_str()))
            {
                verdicts[i] = refuse(format!(
                    "backup {}: object {key} also belongs to an artifact that stays",
                    record.id
                ));
                continue;
            }
            partial_by_plan.entry(&record.plan).or_default().push(i);
            continue;
        }
        if let Some(key) = record.all_keys_iter().find(|key| kept_keys.contains(key)) {
            verdicts[i] = refuse(format!(
                "backup {}: object {key} also belongs to a backup that is not being deleted",
                record.id
            ));
            continue;
        }
        by_plan.entry(&record.plan).or_default().push(i);
    }
    for (plan, indices) in partial_by_plan {
        let policy = planning::policy_for(view.policies, plan);
        for i in indices {
            let record = &view.records[&jobs[i].backup_id].value;
            let group: Vec<&BackupRecord> = view
                .records
                .values()
                .map(|r| &r.value)
                .filter(|r| r.plan == *plan && r.held_at_primary())
                .collect();
            let answer = match &policy {
                Ok(policy) => {
                    planning::still_deletes_volumes(&group, record, &jobs[i].volumes, policy, now)
                }
                Err(reason) => Err(reason.clone()),
            };
            if let Err(reason) = answer {
                verdicts[i] = Verdict::Refuse(Refusal {
                    reason,
                    unmark: true,
                });
            }
        }
    }
    for (plan, indices) in by_plan {
        let group: Vec<&BackupRecord> = view
            .records
            .values()
            .map(|r| &r.value)
            .filter(|r| r.plan == *plan && r.held_at_primary())
            .collect();
        let candidates: Vec<&BackupRecord> = indices
            .iter()
            .map(|&i| &view.records[&jobs[i].backup_id].value)
            .collect();
        let policy = planning::policy_for(view.policies, plan);
        let policy = match &policy {
            Ok(policy) => Ok(*policy),
            Err(reason) => Err(reason.as_str()),
        };
        let answers = planning::may_go(&group, &candidates, policy, now);
        for (i, answer) in indices.into_iter().zip(answers) {
            if let Err(reason) = answer {
                verdicts[i] = Verdict::Refuse(Refusal {
                    reason,
                    unmark: true,
                });
            }
        }
    }
    verdicts
}

/// The artifacts not known to be deleted, in their recorded order: what a `delete-failed`
/// record lists, so that nothing is ever silently half-cleaned.
pub fn remaining(artifacts: &[String], gone: &HashSet<String>) -> Vec<String> {
    artifacts
        .iter()
        .filter(|key| !gone.contains(*key))
        .cloned()
        .collect()
}

/// A job claiming catalog revision `revision` of a backup whose latest entry (put or removal)
/// the catalog stream's leader has at `latest` (`None`: the key was never written): a revision
/// past it was never a revision of that backup (a forged or corrupted job), and waiting for it
/// would wait for ever (issue 26). Refused with nothing deleted.
pub fn never_stored(revision: u64, latest: Option<u64>) -> Option<Refusal> {
    let reason = match latest {
        Some(latest) if revision <= latest => return None,
        Some(latest) => format!(
            "the job claims catalog revision {revision} of the backup, but its latest entry is \
             revision {latest}: a revision that was never stored (a forged or corrupted job); \
             nothing deleted"
        ),
        None => format!(
            "the job claims catalog revision {revision} of a backup the catalog never stored \
             (a forged or corrupted job); nothing deleted"
        ),
    };
    Some(Refusal {
        reason,
        unmark: false,
    })
}

/// The delay before the next delivery of a job that failed for a transient reason: 1 s, 2 s,
/// 4 s, … at most a minute.
pub fn retry_delay(delivered: i64) -> Duration {
    let exponent = delivered.clamp(1, 7) as u32 - 1;
    Duration::from_secs((1u64 << exponent).min(60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sexton_model::names::ClusterName;
    use sexton_model::records::DeleteRequest;

    #[test]
    fn a_revision_past_the_last_stored_is_refused_not_awaited() {
        assert_eq!(never_stored(5, Some(5)), None);
        assert_eq!(never_stored(1, Some(5)), None);
        let refused = never_stored(1005, Some(5)).expect("refused");
        assert!(!refused.unmark);
        assert!(refused.reason.contains("1005"), "{}", refused.reason);
        assert!(never_stored(u64::MAX, Some(5)).is_some());
        assert!(never_stored(1, None).is_some());
    }

    fn record(id: &str, status: BackupStatus) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
            "backup_name": "s", "kind": "full", "status": status,
            "completed_at": format!("2026-01-01T0{}:00:00Z", id.trim_start_matches('b')),
            "artifacts": [format!("pre/c1/s/{id}/backup.xbstream"), format!("pre/c1/s/{id}/metadata.json")],
        }))
        .unwrap()
    }

    fn job(id: &str, revision: u64) -> DeleteJob {
        DeleteJob {
            schema_version: 1,
            cluster: ClusterName::new("c1").unwrap(),
            backup_id: BackupId::new(id).unwrap(),
            uid: format!("u-{id}"),
            revision,
            reasons: vec![],
            volumes: Vec::new(),
        }
    }

    fn at(value: BackupRecord, revision: u64) -> Versioned<BackupRecord> {
        Versioned { value, revision }
    }

    fn refused(verdict: &Verdict) -> bool {
        matches!(verdict, Verdict::Refuse(_))
    }

    #[test]
    fn a_write_about_copies_keeps_the_marks_job_and_a_record_gone_from_primary_is_done() {
        // Marked at revision 7; the copier then records a copy (revision 8), keeping the mark.
        let mut record = record("b1", BackupStatus::Expiring);
        record.keep_mark(7);
        assert_eq!(
            verify(&job("b1", 7), Some(&at(record.clone(), 8)), "pre"),
            Verdict::Claim
        );
        // A later such write keeps the same mark; an older job stays stale.
        record.keep_mark(8);
        assert_eq!(
            verify(&job("b1", 7), Some(&at(record.clone(), 9)), "pre"),
            Verdict::Claim
        );
        assert!(refused(&verify(
            &job("b1", 6),
            Some(&at(record.clone(), 9)),
            "pre"
        )));
        // Without the mark kept, a write after the mark makes the job stale (as before).
        let plain = super::tests::record("b1", BackupStatus::Expiring);
        assert!(refused(&verify(&job("b1", 7), Some(&at(plain, 8)), "pre")));
        // Its objects at primary deleted, the record kept for copies: nothing left to do.
        let mut away = super::tests::record("b1", BackupStatus::Deleting);
        away.expiring_revision = Some(7);
        away.primary_deleted_at = Some("2026-01-02T00:00:00Z".parse().unwrap());
        assert_eq!(
            verify(&job("b1", 7), Some(&at(away, 12)), "pre"),
            Verdict::AlreadyDone
        );
    }

    #[test]
    fn verdicts_from_the_record_alone() {
        let b1 = |status| record("b1", status);
        assert_eq!(verify(&job("b1", 7), None, "pre"), Verdict::AlreadyDone);
        assert_eq!(
            verify(
                &job("b1", 7),
                Some(&at(b1(BackupStatus::Expiring), 7)),
                "pre"
            ),
            Verdict::Claim
        );
        let mut claimed = b1(BackupStatus::Deleting);
        claimed.expiring_revision = Some(7);
        assert_eq!(
            verify(&job("b1", 7), Some(&at(claimed.clone(), 9)), "pre"),
            Verdict::Resume
        );
        let with = |change: fn(&mut BackupRecord)| {
            let mut r = b1(BackupStatus::Expiring);
            change(&mut r);
            at(r, 7)
        };
        let cases: Vec<(DeleteJob, Versioned<BackupRecord>, &str, bool)> = vec![
            (
                job("b1", 6),
                at(b1(BackupStatus::Expiring), 7),
                "stale job",
                false,
            ),
            (
                job("b1", 6),
                at(claimed, 9),
                "deleting, not expiring",
                false,
            ),
            (
                job("b1", 7),
                at(b1(BackupStatus::Completed), 7),
                "completed, not expiring",
                false,
            ),
            (
                job("b1", 7),
                at(b1(BackupStatus::InProgress), 7),
                "in progress",
                false,
            ),
            (
                DeleteJob {
                    uid: "other".into(),
                    ..job("b1", 7)
                },
                at(b1(BackupStatus::Expiring), 7),
                "unique id",
                false,
            ),
            (
                job("b1", 7),
                with(|r| r.legal_hold = true),
                "legal hold",
                true,
            ),
            (
                job("b1", 7),
                with(|r| r.holds = vec!["restore:x".into()]),
                "held: restore:x",
                true,
            ),
            (
                job("b1", 7),
                with(|r| r.artifacts = vec!["pre/c1/s/b2/backup.xbstream".into()]),
                "backup's own",
                false,
            ),
            (
                job("b1", 7),
                with(|r| r.artifacts = vec!["pre/c2/s/b1/x".into()]),
                "not under the cluster's prefix",
                false,
            ),
            (
                job("b1", 7),
                with(|r| r.artifacts = vec!["pre/c1/../c2/x".into()]),
                "'..' segment",
                false,
            ),
            (
                job("b1", 7),
                with(|r| r.artifacts = vec!["/pre/c1/s/b1/x".into()]),
                "not under the cluster's prefix",
                false,
            ),
        ];
        for (job, current, needle, unmark) in cases {
            match verify(&job, Some(&current), "pre") {
                Verdict::Refuse(refusal) => {
                    assert!(refusal.reason.contains(needle), "{refusal:?} vs {needle}");
                    assert_eq!(refusal.unmark, unmark, "{needle}");
                }
                other => panic!("{needle}: {other:?}"),
            }
        }
    }

    fn view_of(records: Vec<(BackupRecord, u64)>) -> HashMap<BackupId, Versioned<BackupRecord>> {
        records
            .into_iter()
            .map(|(r, rev)| (r.id.clone(), at(r, rev)))
            .collect()
    }

    #[test]
    fn the_plan_made_now_decides_and_shared_objects_are_refused() {
        let records = view_of(vec![
            (record("b4", BackupStatus::Completed), 4),
            (record("b3", BackupStatus::Completed), 3),
            (record("b2", BackupStatus::Expiring), 12),
            (record("b1", BackupStatus::Expiring), 11),
        ]);
        let policies_with =
            |policy: Policy| BTreeMap::from([(PlanName::new("p").unwrap(), vec![policy])]);
        let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
        let keep2 = policies_with(Policy::keep_last(2));
        let view = ClusterView {
            records: &records,
            policies: &keep2,
        };
        let (j2, j1) = (job("b2", 12), job("b1", 11));
        assert_eq!(
            verify_all(&[&j2, &j1], &view, "pre", now),
            vec![Verdict::Claim, Verdict::Claim]
        );
        // The policy changed to keep 3: the job for b2 is stale now, and its mark comes off.
        let keep3 = policies_with(Policy::keep_last(3));
        let view = ClusterView {
            records: &records,
            policies: &keep3,
        };
        let verdicts = verify_all(&[&j2, &j1], &view, "pre", now);
        match &verdicts[0] {
            Verdict::Refuse(r) => assert!(r.unmark && r.reason.contains("keeps backup b2")),
            other => panic!("{other:?}"),
        }
        assert_eq!(verdicts[1], Verdict::Claim);
        // No policy at all: keep everything.
        let none = BTreeMap::new();
        let view = ClusterView {
            records: &records,
            policies: &none,
        };
        assert!(verify_all(&[&j1], &view, "pre", now).iter().all(refused));
        // b4, which is kept, also lists an object of b1: refused, whatever the plan says.
        // (A record listing another backup's directory is refused earlier, by the key check.)
        let mut records = records.clone();
        let b4 = records.get_mut(&BackupId::new("b4").unwrap()).unwrap();
        b4.value
            .artifacts
            .push("pre/c1/s/b1/backup.xbstream".into());
        let view = ClusterView {
            records: &records,
            policies: &keep2,
        };
        match &verify_all(&[&j1], &view, "pre", now)[0] {
            Verdict::Refuse(r) => assert!(r.reason.contains("also belongs"), "{r:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_forced_user_delete_skips_the_plan_but_not_the_holds() {
        let mut newest = record("b4", BackupStatus::Expiring);
        newest.delete_request = Some(DeleteRequest {
            requested_at: "2026-01-01T05:00:00Z".parse().unwrap(),
            remote: true,
            force: false,
        });
        let records = view_of(vec![(newest.clone(), 20)]);
        let none = BTreeMap::new();
        let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
        let view = ClusterView {
            records: &records,
            policies: &none,
        };
        let j = job("b4", 20);
        // The newest full backup: a user's delete of it needs --force.
        assert!(refused(&verify_all(&[&j], &view, "pre", now)[0]));
        newest.delete_request.as_mut().unwrap().force = true;
        let records = view_of(vec![(newest.clone(), 20)]);
        let view = ClusterView {
            records: &records,
            policies: &none,
        };
        assert_eq!(verify_all(&[&j], &view, "pre", now), vec![Verdict::Claim]);
        newest.legal_hold = true;
        let records = view_of(vec![(newest, 20)]);
        let view = ClusterView {
            records: &records,
            policies: &none,
        };
        assert!(refused(&verify_all(&[&j], &view, "pre", now)[0]));
    }

    fn with_volumes(id: &str, hour: u32, volumes: serde_json::Value) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
            "backup_name": "s", "kind": "full", "status": "completed",
            "completed_at": format!("2026-01-01T{hour:02}:00:00Z"),
            "artifacts": [format!("pre/c1/s/{id}/metadata.json")],
            "volumes": volumes,
        }))
        .unwrap()
    }

    fn vol(id: &str, name: &str, parent: Option<&str>, expiring: bool) -> serde_json::Value {
        serde_json::json!({
            "name": name, "kind": if parent.is_some() { "incremental" } else { "full" },
            "parent": parent, "expiring": expiring,
            "keys": [format!("pre/c1/s/{id}/vol-{name}.img")],
        })
    }

    /// Seed 001 with `full_every: 2`, keep 3: d2's pv1 may go, its pv2 (needed by d3) not.
    #[test]
    fn a_partial_job_deletes_exactly_the_volumes_the_plan_made_now_deletes() {
        let d2 = |pv1_expiring, pv2_expiring| {
            with_volumes(
                "d2",
                2,
                serde_json::json!([
                    vol("d2", "pv1", Some("d1"), pv1_expiring),
                    vol("d2", "pv2", None, pv2_expiring)
                ]),
            )
        };
        let others = [
            with_volumes(
                "d3",
                3,
                serde_json::json!([
                    vol("d3", "pv1", None, false),
                    vol("d3", "pv2", Some("d2"), false)
                ]),
            ),
            with_volumes(
                "d4",
                4,
                serde_json::json!([
                    vol("d4", "pv1", Some("d3"), false),
                    vol("d4", "pv2", None, false)
                ]),
            ),
            with_volumes(
                "d5",
                5,
                serde_json::json!([
                    vol("d5", "pv1", None, false),
                    vol("d5", "pv2", Some("d4"), false)
                ]),
            ),
        ];
        let policies = BTreeMap::from([(PlanName::new("p").unwrap(), vec![Policy::keep_last(3)])]);
        let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
        let judge = |target: BackupRecord, revision: u64, job: DeleteJob| {
            let mut all: Vec<(BackupRecord, u64)> =
                others.iter().cloned().map(|r| (r, 3)).collect();
            all.push((target, revision));
            let records = view_of(all);
            let view = ClusterView {
                records: &records,
                policies: &policies,
            };
            verify_all(&[&job], &view, "pre", now).remove(0)
        };
        let volume_job = |revision, volumes: &[&str]| DeleteJob {
            volumes: volumes.iter().map(|v| v.to_string()).collect(),
            ..job("d2", revision)
        };
        assert_eq!(
            judge(d2(true, false), 9, volume_job(9, &["pv1"])),
            Verdict::Claim
        );
        let refusals: Vec<(BackupRecord, u64, DeleteJob, &str)> = vec![
            // pv2 is needed by d3's incremental: never, even if marked.
            (
                d2(true, true),
                9,
                volume_job(9, &["pv1", "pv2"]),
                "keeps volume pv2",
            ),
            (
                d2(false, false),
                9,
                volume_job(9, &["pv1"]),
                "not marked expiring",
            ),
            (d2(true, false), 10, volume_job(9, &["pv1"]), "stale job"),
            (
                d2(true, false),
                9,
                volume_job(9, &["pv9"]),
                "has no volume pv9",
            ),
            (
                {
                    let mut r = d2(true, false);
                    r.holds = vec!["restore:r1".into()];
                    r
                },
                9,
                volume_job(9, &["pv1"]),
                "held: restore:r1",
            ),
            (
                {
                    let mut r = d2(true, false);
                    r.volumes[0].keys = vec!["pre/c1/s/d3/vol-pv1.img".into()];
                    r
                },
                9,
                volume_job(9, &["pv1"]),
                "backup's own",
            ),
            (
                {
                    let mut r = d2(true, false);
                    r.volumes[0].keys.push("pre/c1/s/d2/vol-pv2.img".into());
                    r
                },
                9,
                volume_job(9, &["pv1"]),
                "also belongs to an artifact that stays",
            ),
        ];
        for (target, revision, job, needle) in refusals {
            match judge(target, revision, job) {
                Verdict::Refuse(refusal) => {
                    assert!(refusal.reason.contains(needle), "{refusal:?} vs {needle}")
                }
                other => panic!("{needle}: {other:?}"),
            }
        }
        // The backup is now being deleted whole: the partial job is superseded, not refused.
        for status in [BackupStatus::Expiring, BackupStatus::Deleting] {
            let mut whole = d2(true, false);
            whole.status = status;
            match verify(&volume_job(9, &["pv1"]), Some(&at(whole, 12)), "pre") {
                Verdict::Superseded(why) => assert!(why.contains("whole deletion"), "{why}"),
                other => panic!("{status:?}: {other:?}"),
            }
        }
        let mut failed = d2(true, false);
        failed.status = BackupStatus::DeleteFailed;
        assert!(refused(&verify(
            &volume_job(9, &["pv1"]),
            Some(&at(failed, 12)),
            "pre"
        )));
        // A redelivery of the claimed job resumes; another job is refused.
        let mut claimed = d2(true, false);
        claimed.volume_deletion = Some(sexton_model::records::VolumeDeletion {
            revision: 9,
            volumes: vec!["pv1".into()],
        });
        assert_eq!(
            verify(
                &volume_job(9, &["pv1"]),
                Some(&at(claimed.clone(), 11)),
                "pre"
            ),
            Verdict::Resume
        );
        assert!(refused(&verify(
            &volume_job(10, &["pv1"]),
            Some(&at(claimed, 11)),
            "pre"
        )));
    }

    #[test]
    fn metadata_goes_last() {
        // The batch deletes every key that is not `metadata.json` first, then `metadata.json`
        // (`Batch::delete_objects` with `metadata` false, then true), telling them apart so.
        let artifacts = [
            "p/c/s/b/metadata.json".to_string(),
            "p/c/s/b/backup.xbstream".into(),
            "p/c/s/b/extra.bin".into(),
        ];
        let (data, metadata): (Vec<&String>, Vec<&String>) = artifacts
            .iter()
            .partition(|key| !BackupRecord::is_metadata_key(key));
        assert_eq!(data, vec!["p/c/s/b/backup.xbstream", "p/c/s/b/extra.bin"]);
        assert_eq!(metadata, vec!["p/c/s/b/metadata.json"]);
    }

    #[test]
    fn what_remains_and_when_to_retry() {
        let artifacts = vec!["a".to_string(), "b".into(), "m".into()];
        let gone = HashSet::from(["a".to_string()]);
        assert_eq!(remaining(&artifacts, &gone), vec!["b", "m"]);
        let delays: Vec<u64> = [0, 1, 2, 3, 6, 7, 20]
            .iter()
            .map(|&n| retry_delay(n).as_secs())
            .collect();
        assert_eq!(delays, vec![1, 1, 2, 4, 32, 60, 60]);
    }
}
