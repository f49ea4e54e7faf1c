//! The inputs of a retention decision, and the checks made with them, shared by everything that
//! decides whether a backup may be deleted: the retention-worker (which marks), the deleter
//! (which decides again before it deletes anything) and the API (a user's delete). They load a
//! cluster/plan group's records and its policy the same way, so they cannot disagree about what
//! the plan is.
//!
//! The judgement made with them (may a backup go now?) is the retention crate's
//! ([`sexton_retention::judge`]); the functions here are its adapters to the catalog's records.
//! They are where the engine is run over the catalog's records, so that the model stays values
//! (the records' engine form is [`crate::engine_form`]) and the services stay I/O: besides the
//! deletion checks, whether an awaited copy is made now ([`judge_copy`], the copier's) and
//! which backups a binlog collection must keep their own ranges for ([`range_only_backups`],
//! [`kept_for_ranges`], the deleter's).
//!
//! A group's policy comes from the schedules of that cluster and plan. A group without one, or
//! whose schedules disagree, is not planned at all: everything is kept
//! ([`sexton_retention::group`] says so; this loads the schedules it reads).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context as _;
use async_nats::jetstream::kv;
use chrono::{DateTime, Utc};
use sexton_retention::judge;

use crate::binlog::BinlogIndex;
use crate::catalog::{Catalog, Versioned};
use crate::copies::{CopyRule, CopySelect, CopyState, CopyVerdict};
use crate::names::{ClusterName, LocationName, PlanName};
use crate::records::{BackupRecord, Policy, ScheduleRecord};

/// Everything a retention decision about one cluster reads, loaded at one moment.
#[derive(Debug, Clone)]
pub struct ClusterState {
    pub schedules: Vec<ScheduleRecord>,
    pub records: Vec<Versioned<BackupRecord>>,
}

/// The schedules of `cluster`. One unreadable schedule fails the whole load: it might be the
/// one that carries the policy, and deciding without it could delete what it keeps.
pub async fn load_schedules(
    schedules: &kv::Store,
    cluster: &ClusterName,
) -> anyhow::Result<Vec<ScheduleRecord>> {
    let mut all = load_all_schedules(schedules).await?;
    all.retain(|schedule| schedule.cluster == *cluster);
    Ok(all)
}

/// Every schedule, read as one sweep of the bucket's stream (the last value of each key). A
/// service that reads the schedules for every run keeps a [`crate::schedules_view`] instead.
pub async fn load_all_schedules(schedules: &kv::Store) -> anyhow::Result<Vec<ScheduleRecord>> {
    let mut out = Vec::new();
    crate::stream_read::list_last_per_key(
        schedules,
        &format!("{}>", schedules.prefix),
        "a schedule listing",
        |entry| {
            if !entry.is_removal() {
                out.push(
                    serde_json::from_slice(entry.payload)
                        .with_context(|| format!("schedule {} is unreadable", entry.subject))?,
                );
            }
            Ok(())
        },
    )
    .await?;
    Ok(out)
}

/// The schedules, then the catalog records, of `cluster`.
pub async fn load_cluster(
    schedules: &kv::Store,
    catalog: &Catalog,
    cluster: &ClusterName,
) -> anyhow::Result<ClusterState> {
    let schedules = load_schedules(schedules, cluster).await?;
    let records = catalog.list_cluster(cluster).await?;
    Ok(ClusterState { schedules, records })
}

/// The distinct policies each plan's schedules give it ([`sexton_retention::group`]).
pub fn group_policies(schedules: &[ScheduleRecord]) -> BTreeMap<PlanName, Vec<Policy>> {
    sexton_retention::group::group_policies(
        schedules
            .iter()
            .map(|schedule| (schedule.plan.clone(), &schedule.policy)),
    )
}

/// The one policy of `plan`, or why the group is not planned (everything kept): the rule is
/// [`sexton_retention::group::group_policy`].
pub fn policy_for<'a>(
    policies: &'a BTreeMap<PlanName, Vec<Policy>>,
    plan: &PlanName,
) -> Result<&'a Policy, String> {
    sexton_retention::group::group_policy(policies.get(plan).map_or(&[], Vec::as_slice))
}

/// The records of a cluster by plan (a retention group), in catalog order.
pub fn groups(
    records: Vec<Versioned<BackupRecord>>,
) -> BTreeMap<PlanName, Vec<Versioned<BackupRecord>>> {
    let mut groups: BTreeMap<PlanName, Vec<Versioned<BackupRecord>>> = BTreeMap::new();
    for record in records {
        groups
            .entry(record.value.plan.clone())
            .or_default()
            .push(record);
    }
    groups
}

/// The judgement itself is the retention crate's ([`sexton_retention::judge`]); these take the
/// catalog's records, give the engine its view of them, and ask.
pub use sexton_retention::judge::{user_delete_policy, UserDelete};

/// Why a backup may never be deleted now, whoever asks ([`judge::protection`]). Called on
/// every record of a group, so it copies only what the judgement reads, not the whole record
/// ([`BackupRecord::to_protection_form`]).
pub fn protection(record: &BackupRecord) -> Option<String> {
    judge::protection(&record.to_protection_form())
}

/// Whether each of `candidates` (backups of `group`) may go now, judged the way it was asked
/// ([`judge::may_go`]).
pub fn may_go(
    group: &[&BackupRecord],
    candidates: &[&BackupRecord],
    group_policy: Result<&Policy, &str>,
    now: DateTime<Utc>,
) -> Vec<Result<(), String>> {
    let group: Vec<judge::Member> = group.iter().map(|record| record.to_member()).collect();
    may_go_members(&group, candidates, group_policy, now)
}

/// [`may_go`] over a group already in the judgement's form: each record's engine form and the
/// status it had before its mark (what a catalog view keeps instead of the records).
pub fn may_go_members(
    group: &[judge::Member],
    candidates: &[&BackupRecord],
    group_policy: Result<&Policy, &str>,
    now: DateTime<Utc>,
) -> Vec<Result<(), String>> {
    let candidates: Vec<(&str, judge::Asked)> = candidates
        .iter()
        .map(|record| (record.id.as_str(), record.delete_asked()))
        .collect();
    judge::may_go(group, &candidates, group_policy, now)
}

/// For each of `ids`, whether a plan made now with `policy` over `group`, with the marks of
/// `ids` taken off, deletes it ([`judge::still_deletes`]).
pub fn still_deletes(
    group: &[&BackupRecord],
    ids: &[&str],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Vec<Result<(), String>> {
    let group: Vec<judge::Member> = group.iter().map(|record| record.to_member()).collect();
    judge::still_deletes(&group, ids, policy, now)
}

/// Whether a plan made now still deletes `volumes` of `target` and keeps the record (a partial
/// deletion's re-check in the deleter; [`judge::still_deletes_volumes`]).
pub fn still_deletes_volumes(
    group: &[&BackupRecord],
    target: &BackupRecord,
    volumes: &[String],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<(), String> {
    let group: Vec<sexton_retention::BackupRecord> =
        group.iter().map(|record| record.to_engine()).collect();
    judge::still_deletes_volumes(&group, target.id.as_str(), volumes, policy, now)
}

/// Why a user's delete of `going` (ids of `group`, backups of `plan`) is refused by the
/// group's `minimum_redundancy`, if it is ([`judge::below_minimum_redundancy`]). A group
/// without one policy (no schedule, or schedules that disagree) has no floor.
pub fn below_minimum_redundancy(
    group: &[&BackupRecord],
    schedules: &[ScheduleRecord],
    plan: &PlanName,
    cluster: &ClusterName,
    going: &[&str],
) -> Option<String> {
    let policies = group_policies(schedules);
    let floor = policy_for(&policies, plan).ok()?.minimum_redundancy;
    let group: Vec<sexton_retention::BackupRecord> =
        group.iter().map(|record| record.to_engine()).collect();
    judge::below_minimum_redundancy(&group, going, floor, &format!("{cluster}/{plan}"))
}

/// Judges `backup delete --with-dependents` of `target`, a backup of `group`
/// ([`judge::judge_delete_with_dependents`]).
pub fn judge_delete_with_dependents(
    group: &[&BackupRecord],
    target: &BackupRecord,
    now: DateTime<Utc>,
) -> Result<judge::DependentDelete, String> {
    let group: Vec<sexton_retention::BackupRecord> =
        group.iter().map(|record| record.to_engine()).collect();
    let group_name = format!("{}/{}", target.cluster, target.plan);
    judge::judge_delete_with_dependents(&group, &target.to_engine(), &group_name, now)
}

/// Judges a user's delete of `target`, a backup of `group` ([`judge::judge_user_delete`]).
pub fn judge_user_delete(
    group: &[&BackupRecord],
    target: &BackupRecord,
    force: bool,
    now: DateTime<Utc>,
) -> UserDelete {
    let group: Vec<sexton_retention::BackupRecord> =
        group.iter().map(|record| record.to_engine()).collect();
    let group_name = format!("{}/{}", target.cluster, target.plan);
    judge::judge_user_delete(&group, &target.to_engine(), &group_name, force, now)
}

/// Judges the copy of `candidate` (a backup awaiting its copy at `location`) under `rule` (its
/// schedule's rule there; `None` once the rule is gone: copy, as the rule asked when the
/// backup completed). `group` is every record of the candidate's plan (the candidate too).
///
/// - `delay`: not before the backup completed plus the delay.
/// - `select: kept`: the rule's policy judged now over what the location holds of the group
///   with every backup still awaiting a copy there counted as copied (those are the copies
///   that will be there; [`crate::engine_form::view_with_awaited_at`]); the candidate is
///   copied only if that plan keeps it ([`judge::deleted_at_once`]). A plan that cannot be
///   made copies it: the copy is a recovery point, and skipping one is never the guess. A
///   copy found missing there is copied again whatever the policy says (it was kept when it
///   was copied; the location's retention judges it once it is back).
pub fn judge_copy(
    group: &[&BackupRecord],
    candidate: &BackupRecord,
    location: &LocationName,
    rule: Option<&CopyRule>,
    now: DateTime<Utc>,
) -> CopyVerdict {
    let Some(rule) = rule else {
        return CopyVerdict::Copy;
    };
    if let (Some(delay), Some(completed)) = (rule.delay, candidate.completed_at) {
        let due = completed.with_timezone(&Utc) + delay.delta();
        if due > now {
            return CopyVerdict::NotBefore(due);
        }
    }
    let again = candidate
        .copies
        .get(location)
        .is_some_and(|copy| copy.state == CopyState::Missing);
    if rule.select != CopySelect::Kept || again {
        return CopyVerdict::Copy;
    }
    let view = crate::engine_form::view_with_awaited_at(group, location);
    match judge::deleted_at_once(view, candidate.id.as_str(), &rule.policy, now) {
        Some(reasons) => CopyVerdict::Skip(reasons),
        None => CopyVerdict::Copy,
    }
}

/// The backups of a cluster that a plan made now, over the records at primary and each
/// group's one policy, keeps restorable to their own end only (standalone, past `pitr_full`,
/// or an incremental of one: [`sexton_retention::BinlogPlan::range_only`]). The deleter's
/// re-check of a binlog job: such a backup does not pull the horizon back
/// ([`crate::binlog::safe_horizon_with`]). A group without one policy, or that the engine
/// refuses to plan, gives none: its fulls pull the horizon back as they always did.
pub fn range_only_backups(
    records: &[BackupRecord],
    policies: &BTreeMap<PlanName, Vec<Policy>>,
    now: DateTime<Utc>,
) -> BTreeSet<String> {
    let mut groups: BTreeMap<&PlanName, Vec<&BackupRecord>> = BTreeMap::new();
    for record in records.iter().filter(|r| r.held_at_primary()) {
        groups.entry(&record.plan).or_default().push(record);
    }
    let mut out = BTreeSet::new();
    for (plan, members) in groups {
        let Ok(policy) = policy_for(policies, plan) else {
            continue;
        };
        if policy.pitr_full.is_none()
            && !members
                .iter()
                .any(|record| sexton_retention::holds_standalone(&record.holds))
        {
            continue;
        }
        // Which backups are range-only does not depend on the segments.
        let catalog = crate::engine_form::catalog(&members);
        if let Ok(plan) = sexton_retention::plan(&catalog, policy, now) {
            out.extend(plan.binlog.range_only.into_iter().map(|r| r.backup));
        }
    }
    out
}

/// The keys of `candidates` that the own range of a backup of `range_only` needs
/// ([`sexton_retention::own_range_needs`]): kept whatever the job says.
pub fn kept_for_ranges(
    index: &BinlogIndex,
    candidates: &[String],
    records: &[BackupRecord],
    range_only: &BTreeSet<String>,
) -> BTreeSet<String> {
    let owners: Vec<sexton_retention::BackupRecord> = records
        .iter()
        .filter(|record| range_only.contains(record.id.as_str()))
        .map(BackupRecord::to_engine)
        .collect();
    if owners.is_empty() {
        return BTreeSet::new();
    }
    index
        .segments
        .iter()
        .filter(|segment| candidates.contains(&segment.key))
        .filter(|segment| {
            let segment = segment.to_engine();
            owners
                .iter()
                .any(|owner| sexton_retention::own_range_needs(owner, &segment))
        })
        .map(|segment| segment.key.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{BackupStatus, DeleteRequest};

    fn record(id: &str, hour: u32, status: BackupStatus, parent: Option<&str>) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
            "backup_name": "s", "kind": if parent.is_some() { "incremental" } else { "full" },
            "parent": parent, "status": status,
            "completed_at": format!("2026-01-01T{hour:02}:00:00Z"),
        }))
        .unwrap()
    }

    fn now() -> DateTime<Utc> {
        "2026-01-02T00:00:00Z".parse().unwrap()
    }

    fn check(
        group: &[BackupRecord],
        candidates: &[&str],
        policy: Result<&Policy, &str>,
    ) -> Vec<Result<(), String>> {
        let refs: Vec<&BackupRecord> = group.iter().collect();
        let candidates: Vec<&BackupRecord> = candidates
            .iter()
            .map(|id| group.iter().find(|r| r.id.as_str() == *id).unwrap())
            .collect();
        may_go(&refs, &candidates, policy, now())
    }

    #[test]
    fn a_job_the_plan_still_makes_goes_and_a_stale_one_is_refused() {
        // keep_last 2 marked b1 and b2 expiring; the plan made now agrees.
        let mut group = vec![
            record("b4", 4, BackupStatus::Completed, None),
            record("b3", 3, BackupStatus::Completed, None),
            record("b2", 2, BackupStatus::Expiring, None),
            record("b1", 1, BackupStatus::Expiring, None),
        ];
        let keep2 = Policy::keep_last(2);
        assert_eq!(
            check(&group, &["b2", "b1"], Ok(&keep2)),
            vec![Ok(()), Ok(())]
        );
        assert_eq!(check(&group, &["b1"], Ok(&keep2)), vec![Ok(())]);
        // The policy now keeps 3: b2 is kept again, b1 still goes.
        let keep3 = Policy::keep_last(3);
        let answers = check(&group, &["b2", "b1"], Ok(&keep3));
        assert!(answers[0].as_ref().unwrap_err().contains("keeps backup b2"));
        assert_eq!(answers[1], Ok(()));
        // A new incremental on b1 is kept, so b1 is needed again.
        group.push(record("i5", 5, BackupStatus::Completed, Some("b1")));
        let answers = check(&group, &["b1"], Ok(&keep3));
        assert!(
            answers[0].as_ref().unwrap_err().contains("needed by i5"),
            "{answers:?}"
        );
        // No policy: everything is kept.
        let answers = check(&group, &["b2"], Err("no policy"));
        assert_eq!(answers, vec![Err("no policy".to_string())]);
    }

    #[test]
    fn a_failed_backup_is_judged_as_failed() {
        let mut failed = record("f1", 1, BackupStatus::Expiring, None);
        failed.expired_from = Some(BackupStatus::Failed);
        let group = vec![record("b4", 4, BackupStatus::Completed, None), failed];
        // As `completed` keep_last 2 would keep it; as `failed` (past its grace) it goes.
        assert_eq!(
            check(&group, &["f1"], Ok(&Policy::keep_last(2))),
            vec![Ok(())]
        );
    }

    #[test]
    fn user_deletes_go_unless_something_kept_needs_them() {
        let request = |force| {
            Some(DeleteRequest {
                requested_at: now(),
                remote: true,
                force,
            })
        };
        let mut group = vec![
            record("b3", 3, BackupStatus::Completed, None),
            record("i2", 2, BackupStatus::Completed, Some("b1")),
            record("b1", 1, BackupStatus::Expiring, None),
        ];
        group[2].delete_request = request(false);
        let answers = check(&group, &["b1"], Err("no policy"));
        assert!(answers[0].as_ref().unwrap_err().contains("needed by i2"));
        group[2].delete_request = request(true);
        assert_eq!(check(&group, &["b1"], Err("no policy")), vec![Ok(())]);
        // Without the dependent it goes, whatever the group's policy says.
        group.remove(1);
        group[1].delete_request = request(false);
        assert_eq!(check(&group, &["b1"], Err("no policy")), vec![Ok(())]);
        // The newest full backup is the floor: a user's delete of it is refused.
        group[0].delete_request = request(false);
        group[0].status = BackupStatus::Expiring;
        let answers = check(&group, &["b3"], Err("no policy"));
        assert!(
            answers[0].as_ref().unwrap_err().contains("floor"),
            "{answers:?}"
        );
    }

    #[test]
    fn user_deletes_are_refused_deferred_or_carried_out() {
        let group = [
            record("b3", 3, BackupStatus::Completed, None),
            record("i2", 2, BackupStatus::Completed, Some("b1")),
            record("b1", 1, BackupStatus::Completed, None),
            record("b0", 0, BackupStatus::Completed, None),
        ];
        let refs: Vec<&BackupRecord> = group.iter().collect();
        let judge = |id: &str, force| {
            let target = group.iter().find(|r| r.id.as_str() == id).unwrap();
            judge_user_delete(&refs, target, force, now())
        };
        assert!(
            matches!(judge("b3", false), UserDelete::Refused(why) if why.contains("newest full"))
        );
        assert_eq!(judge("b3", true), UserDelete::Now);
        assert!(
            matches!(judge("b1", false), UserDelete::Deferred(why) if why.contains("needed by i2"))
        );
        assert_eq!(judge("b1", true), UserDelete::Now);
        assert_eq!(judge("i2", false), UserDelete::Now);
        assert_eq!(judge("b0", false), UserDelete::Now);
        let mut held = group[3].clone();
        held.legal_hold = true;
        assert!(matches!(
            judge_user_delete(&refs, &held, true, now()),
            UserDelete::Refused(why) if why.contains("legal hold")
        ));
        let mut expiring = group[3].clone();
        expiring.status = BackupStatus::Expiring;
        assert_eq!(
            judge_user_delete(&refs, &expiring, false, now()),
            UserDelete::AlreadyDeleting
        );
    }

    /// A backup with volumes counts as a full (each volume has its own chain), whatever its
    /// backup-level kind: the newest is the floor, and the binlog horizon stays before it.
    #[test]
    fn a_backup_with_volumes_counts_as_a_full() {
        let mut newest = record("v2", 2, BackupStatus::Completed, Some("v1"));
        newest.volumes = vec![sexton_retention::VolumeArtifact::incremental(
            "pv1",
            "v1",
            vec![],
        )];
        let mut oldest = record("v1", 1, BackupStatus::Completed, None);
        oldest.volumes = vec![sexton_retention::VolumeArtifact::full("pv1", vec![])];
        let group = [newest.clone(), oldest];
        let refs: Vec<&BackupRecord> = group.iter().collect();
        assert!(matches!(
            judge_user_delete(&refs, &newest, false, now()),
            UserDelete::Refused(why) if why.contains("newest full")
        ));
        newest.started_at = Some("2026-01-01T01:30:00Z".parse().unwrap());
        let safe = crate::binlog::safe_horizon("2026-01-01T03:00:00Z".parse().unwrap(), &[newest]);
        assert_eq!(
            safe.horizon,
            Some("2026-01-01T01:30:00Z".parse().unwrap()),
            "{safe:?}"
        );
    }

    #[test]
    fn protections() {
        let mut r = record("b1", 1, BackupStatus::Completed, None);
        assert_eq!(protection(&r), None);
        r.holds = vec!["restore:x".into()];
        assert!(protection(&r).unwrap().contains("held: restore:x"));
        r.legal_hold = true;
        assert!(protection(&r).unwrap().contains("legal hold"));
        let r = record("b2", 1, BackupStatus::InProgress, None);
        assert!(protection(&r).unwrap().contains("in progress"));
    }
}

/// [`judge_copy`], moved here from `sexton_model::records` with the function.
#[cfg(test)]
mod copy_tests {
    use super::*;

    fn rule(json: serde_json::Value) -> Result<CopyRule, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    fn awaiting(id: &str, completed: &str, tags: &[&str]) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
            "backup_name": "s", "schedule": "nightly", "kind": "full", "status": "completed",
            "completed_at": completed, "tags": tags, "copy_to": ["dr"],
        }))
        .unwrap()
    }

    fn copied(mut record: BackupRecord) -> BackupRecord {
        record.copies.insert(
            LocationName::new("dr").unwrap(),
            serde_json::from_value(serde_json::json!({
                "state": "copied", "copied_at": "2026-03-01T00:00:00Z"
            }))
            .unwrap(),
        );
        record
    }

    fn now() -> DateTime<Utc> {
        "2026-03-10T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_delayed_copy_waits_for_its_time_then_is_copied() {
        let dr = LocationName::new("dr").unwrap();
        let rule = rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3},
            "delay": "1d"}))
        .unwrap();
        let young = awaiting("b2", "2026-03-10T00:00:00Z", &[]);
        let old = awaiting("b1", "2026-03-09T00:00:00Z", &[]);
        let group = [&old, &young];
        assert_eq!(
            judge_copy(&group, &young, &dr, Some(&rule), now()),
            CopyVerdict::NotBefore("2026-03-11T00:00:00Z".parse().unwrap())
        );
        assert_eq!(
            judge_copy(&group, &old, &dr, Some(&rule), now()),
            CopyVerdict::Copy
        );
        // The rule gone from the schedule: copied at once, as asked when it completed.
        assert_eq!(
            judge_copy(&group, &young, &dr, None, now()),
            CopyVerdict::Copy
        );
    }

    #[test]
    fn kept_copies_only_what_the_policy_there_keeps_counting_what_awaits() {
        let dr = LocationName::new("dr").unwrap();
        let kept = |policy: serde_json::Value| {
            rule(serde_json::json!({"to": "dr", "policy": policy, "select": "kept"})).unwrap()
        };
        let b1 = copied(awaiting("b1", "2026-03-01T00:00:00Z", &[]));
        let b2 = awaiting("b2", "2026-03-08T00:00:00Z", &[]);
        let b3 = awaiting("b3", "2026-03-09T00:00:00Z", &["monthly"]);
        let b4 = awaiting("b4", "2026-03-10T00:00:00Z", &[]);
        let group = [&b1, &b2, &b3, &b4];
        // keep_last 2 over b1 (there) and b2..b4 (awaited, counted as there): b2 would go
        // at once, b3 and b4 stay.
        let last2 = kept(serde_json::json!({"keep_last": 2}));
        match judge_copy(&group, &b2, &dr, Some(&last2), now()) {
            CopyVerdict::Skip(reasons) => assert!(!reasons.is_empty()),
            other => panic!("b2 should be skipped, got {other:?}"),
        }
        for keeper in [&b3, &b4] {
            assert_eq!(
                judge_copy(&group, keeper, &dr, Some(&last2), now()),
                CopyVerdict::Copy
            );
        }
        // A tag policy: only the tagged one.
        let tagged = kept(serde_json::json!({"keep_tags": [["monthly"]]}));
        assert_eq!(
            judge_copy(&group, &b3, &dr, Some(&tagged), now()),
            CopyVerdict::Copy
        );
        assert!(matches!(
            judge_copy(&group, &b2, &dr, Some(&tagged), now()),
            CopyVerdict::Skip(_)
        ));
        // The newest is kept by the engine's floor whatever the rules say.
        assert_eq!(
            judge_copy(&group, &b4, &dr, Some(&tagged), now()),
            CopyVerdict::Copy,
        );
        // `all` copies whatever the policy keeps.
        let all = rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 2}})).unwrap();
        assert_eq!(
            judge_copy(&group, &b2, &dr, Some(&all), now()),
            CopyVerdict::Copy
        );
        // A copy found missing there is copied again, whatever the policy says now.
        let mut lost = copied(awaiting("b2", "2026-03-08T00:00:00Z", &[]));
        lost.copies.get_mut(&dr).unwrap().state = CopyState::Missing;
        let group = [&b1, &lost, &b3, &b4];
        assert_eq!(
            judge_copy(&group, &lost, &dr, Some(&last2), now()),
            CopyVerdict::Copy
        );
    }
}

/// [`range_only_backups`] and [`kept_for_ranges`], moved here from `sexton_model::binlog` with
/// the functions.
#[cfg(test)]
mod range_tests {
    use chrono::FixedOffset;

    use super::*;
    use crate::binlog::{safe_horizon, safe_horizon_with, IndexSegment};
    use crate::records::BackupStatus;

    fn t(text: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(text).unwrap()
    }

    const PREFIX: &str = "backups/c1/binlog/";

    fn key(name: &str) -> String {
        format!("{PREFIX}{name}")
    }

    fn index(segments: &[(&str, Option<&str>, Option<&str>)]) -> BinlogIndex {
        BinlogIndex {
            segments: segments
                .iter()
                .map(|(name, first, last)| IndexSegment::new(key(name), first.map(t), last.map(t)))
                .collect(),
            ..BinlogIndex::empty()
        }
    }

    fn full(id: &str, status: BackupStatus, started: Option<&str>) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": "u", "cluster": "c1", "plan": "p", "backup_name": "s",
            "kind": "full", "status": status, "started_at": started,
            "completed_at": started,
        }))
        .unwrap()
    }

    /// Issue 30: what a plan made now keeps restorable to its own end only does not pull the
    /// horizon back, and its own range stays; a forged policy cannot come from a job.
    #[test]
    fn range_only_backups_keep_their_own_range_not_the_horizon() {
        let job = t("2026-01-10T00:10:00Z");
        let newest = full("new", BackupStatus::Completed, Some("2026-01-10T00:10:00Z"));
        let mut standalone = full("old", BackupStatus::Completed, Some("2026-01-05T00:10:00Z"));
        standalone.holds = vec!["standalone:yearly".into()];
        let records = vec![newest.clone(), standalone.clone()];
        let plan_name = PlanName::new("p").unwrap();
        let policies = BTreeMap::from([(
            plan_name.clone(),
            vec![sexton_retention::Policy::keep_last(1)],
        )]);
        let now = "2026-01-11T00:00:00Z".parse().unwrap();
        let range_only = range_only_backups(&records, &policies, now);
        assert_eq!(range_only, BTreeSet::from(["old".to_string()]));
        // Not pulled back to the standalone backup's start.
        let safe = safe_horizon_with(job, &records, &range_only);
        assert_eq!(safe.horizon, Some(job));
        // Without the set (or without a policy for the group), it is, as always.
        assert_eq!(
            safe_horizon(job, &records).horizon,
            Some(t("2026-01-05T00:10:00Z"))
        );
        assert!(range_only_backups(&records, &Default::default(), now).is_empty());
        // Its own range stays: the segment around 2026-01-05 00:10 by time, and the one it
        // names; the others go.
        let index = index(&[
            (
                "m.000001",
                Some("2026-01-04T00:00:00Z"),
                Some("2026-01-05T00:00:00Z"),
            ),
            (
                "m.000002",
                Some("2026-01-05T00:00:00Z"),
                Some("2026-01-06T00:00:00Z"),
            ),
            (
                "m.000003",
                Some("2026-01-06T00:00:00Z"),
                Some("2026-01-07T00:00:00Z"),
            ),
            (
                "m.000004",
                Some("2026-01-07T00:00:00Z"),
                Some("2026-01-08T00:00:00Z"),
            ),
        ]);
        let candidates: Vec<String> = ["m.000001", "m.000002", "m.000003", "m.000004"]
            .iter()
            .map(|name| key(name))
            .collect();
        let kept = kept_for_ranges(&index, &candidates, &records, &range_only);
        assert_eq!(kept, BTreeSet::from([key("m.000002")]));
        let mut named = standalone.clone();
        named.log_range = Some(sexton_retention::LogRange {
            first: "m.000002".into(),
            last: "m.000003".into(),
        });
        let records = vec![newest.clone(), named];
        let kept = kept_for_ranges(&index, &candidates, &records, &range_only);
        assert_eq!(kept, BTreeSet::from([key("m.000002"), key("m.000003")]));
        // pitr_full 1 over two fulls: the older is range-only, without any hold.
        let older = full(
            "older",
            BackupStatus::Completed,
            Some("2026-01-05T00:10:00Z"),
        );
        let pitr = BTreeMap::from([(
            plan_name,
            vec![
                sexton_retention::Policy::from_json(r#"{"keep_last": 2, "pitr_full": 1}"#).unwrap(),
            ],
        )]);
        assert_eq!(
            range_only_backups(&[newest, older], &pitr, now),
            BTreeSet::from(["older".to_string()])
        );
    }
}
