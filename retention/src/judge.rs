//! Whether a backup may be deleted now, whoever asks: the retention-worker before it carries out
//! a user's delete, the deleter before it deletes anything, the API when a user asks.
//!
//! This is the engine's own judgement, so it lives next to the engine: a marked backup is judged
//! by making the plan again, now, over its group as it would be had nobody marked it. The
//! callers load the group; this module only decides, on the engine's records, and never reads
//! the clock (`now` is a parameter).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::{evaluate, BackupRecord, BackupStatus, Catalog, KeepCount, Policy, Verdict};

/// One backup of a group as the judgement sees it: the engine's record as it stands (with its
/// marks), and the status it had before retention or a user's delete marked it `expiring`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub record: BackupRecord,
    /// Unknown (a record written by an older build) counts as `completed`, the status that
    /// makes a plan keep more.
    pub expired_from: Option<BackupStatus>,
}

impl Member {
    /// The record as a plan made now would have seen it had nobody marked it `expiring`.
    /// Other statuses are unchanged.
    pub fn unmarked(&self) -> BackupRecord {
        let mut record = self.record.clone();
        if record.status == BackupStatus::Expiring {
            record.status = self.expired_from.unwrap_or(BackupStatus::Completed);
        }
        record
    }
}

/// How the deletion of a candidate was asked for, which decides the policy it is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// Retention marked it: judged by the group's policy.
    Retention,
    /// A user's delete: judged by [`user_delete_policy`] (nothing kept needs it).
    User,
    /// A user's forced delete: it goes.
    ForcedUser,
}

/// Why a backup may never be deleted now, whoever asks: a legal hold, a hold, or a backup that
/// is still being taken (pgbackrest 2622 swept one).
pub fn protection(record: &BackupRecord) -> Option<String> {
    if record.legal_hold {
        return Some(format!("backup {} is under legal hold", record.id));
    }
    if !record.holds.is_empty() {
        return Some(format!(
            "backup {} is held: {}",
            record.id,
            record.holds.join(", ")
        ));
    }
    if record.status == BackupStatus::InProgress {
        return Some(format!("backup {} is in progress", record.id));
    }
    None
}

/// Why a backup may not be deleted at `now` because of its Object Lock (issue 29).
pub fn locked_at(record: &BackupRecord, now: DateTime<Utc>) -> Option<String> {
    record
        .locked_until
        .filter(|until| *until > now)
        .map(|until| {
            format!(
                "backup {} is locked until {}",
                record.id,
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )
        })
}

/// The policy a user's delete is judged by: every completed backup is kept, so a requested
/// backup goes only if no completed backup needs it and it is not the newest full one.
pub fn user_delete_policy() -> Policy {
    Policy {
        keep_last: Some(KeepCount::Unlimited),
        ..Policy::default()
    }
}

/// Whether each of `candidates` (ids of backups of `group`, with how their deletion was asked
/// for) may go now:
///
/// - a retention expiry: the plan of the group's policy, made now over the group as it would
///   be had nobody marked the candidates, still deletes it (so a stale job, whose backup a
///   new policy or a new dependent now keeps, is refused);
/// - a user's delete: the same with [`user_delete_policy`] (nothing kept needs it);
/// - a user's forced delete: yes.
///
/// Several candidates are judged in one evaluation. That gives the same answers as judging
/// them one by one: a plan's rules never count a backup they do not keep, so taking the mark
/// off backups that the plan deleted changes nothing for the others.
pub fn may_go(
    group: &[Member],
    candidates: &[(&str, Asked)],
    group_policy: Result<&Policy, &str>,
    now: DateTime<Utc>,
) -> Vec<Result<(), String>> {
    let user_policy = user_delete_policy();
    let mut answers: Vec<Option<Result<(), String>>> = vec![None; candidates.len()];
    let mut by_retention = Vec::new();
    let mut by_user = Vec::new();
    for (index, (id, asked)) in candidates.iter().enumerate() {
        // Not even a forced delete: the store would refuse it, and the backup would only be
        // marked as failing to delete.
        if let Some(locked) = group
            .iter()
            .find(|member| member.record.id == *id)
            .and_then(|member| locked_at(&member.record, now))
        {
            answers[index] = Some(Err(locked));
            continue;
        }
        match asked {
            Asked::ForcedUser => answers[index] = Some(Ok(())),
            Asked::User => by_user.push(index),
            Asked::Retention => match group_policy {
                Ok(_) => by_retention.push(index),
                Err(reason) => answers[index] = Some(Err(reason.to_string())),
            },
        }
    }
    for (indices, policy) in [
        (by_retention, group_policy.ok()),
        (by_user, Some(&user_policy)),
    ] {
        let Some(policy) = policy else { continue };
        if indices.is_empty() {
            continue;
        }
        let ids: Vec<&str> = indices.iter().map(|&i| candidates[i].0).collect();
        for (index, answer) in indices.iter().zip(still_deletes(group, &ids, policy, now)) {
            answers[*index] = Some(answer);
        }
    }
    answers
        .into_iter()
        .map(|answer| answer.expect("every candidate is judged"))
        .collect()
}

/// For each of `ids`, whether a plan made now with `policy` over `group`, with the marks of
/// `ids` taken off, deletes it; if not, why it keeps it.
pub fn still_deletes(
    group: &[Member],
    ids: &[&str],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Vec<Result<(), String>> {
    let unmark: HashSet<&str> = ids.iter().copied().collect();
    let catalog = Catalog {
        backups: group
            .iter()
            .map(|member| {
                if unmark.contains(member.record.id.as_str()) {
                    member.unmarked()
                } else {
                    member.record.clone()
                }
            })
            .collect(),
        binlog_segments: Vec::new(),
    };
    let evaluation = match evaluate(&catalog, policy, now) {
        Ok(evaluation) => evaluation,
        Err(err) => {
            let why = format!("retention refused to plan: {err}; keeping everything");
            return ids.iter().map(|_| Err(why.clone())).collect();
        }
    };
    ids.iter()
        .map(|id| match evaluation.index_of(id) {
            None => Err(format!("backup {id} is not in its group's catalog")),
            Some(index) if evaluation.verdict_at(index) == Verdict::Delete => Ok(()),
            Some(index) => Err(format!(
                "the retention plan now keeps backup {id}: {}",
                evaluation.reasons_at(index).join("; ")
            )),
        })
        .collect()
}

/// Whether a plan made now with `policy` over `group`, with the `expiring` marks of `volumes`
/// of backup `target` taken off, deletes every one of those volumes and keeps the record (a
/// partial deletion's re-check in the deleter); if not, why not.
pub fn still_deletes_volumes(
    group: &[BackupRecord],
    target: &str,
    volumes: &[String],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<(), String> {
    let catalog = Catalog {
        backups: group
            .iter()
            .map(|record| {
                let mut record = record.clone();
                if record.id == target {
                    for volume in &mut record.volumes {
                        if volumes.contains(&volume.name) {
                            volume.expiring = false;
                        }
                    }
                }
                record
            })
            .collect(),
        binlog_segments: Vec::new(),
    };
    let evaluation = evaluate(&catalog, policy, now)
        .map_err(|err| format!("retention refused to plan: {err}; keeping everything"))?;
    let id = target;
    match evaluation.verdict(id) {
        None => return Err(format!("backup {id} is not in its group's catalog")),
        Some(Verdict::Partial) => {}
        Some(_) => {
            let index = evaluation.index_of(id).expect("has a verdict");
            return Err(format!(
                "the retention plan now does not delete some volumes of backup {id} and keep \
                 the rest: {}",
                evaluation.reasons_at(index).join("; ")
            ));
        }
    }
    match volumes
        .iter()
        .find(|volume| !evaluation.deletes_volume(id, volume))
    {
        Some(kept) => Err(format!(
            "the retention plan now keeps volume {kept} of backup {id}"
        )),
        None => Ok(()),
    }
}

/// The reasons a plan made now with `policy` over `backups` deletes `candidate` at once;
/// `None` when it keeps it, or when no plan can be made (the caller then does what it would do
/// without the policy). The `select: kept` judgement of a copy rule (issue 28): `backups` is
/// the location's view (what it holds, and each copy awaited there counted as made, the
/// candidate's too). The copier asks it through `sexton_shared::planning::judge_copy`, the
/// simulator directly.
pub fn deleted_at_once(
    backups: Vec<BackupRecord>,
    candidate: &str,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Option<Vec<String>> {
    let catalog = Catalog {
        backups,
        binlog_segments: Vec::new(),
    };
    let plan = crate::plan(&catalog, policy, now).ok()?;
    plan.delete
        .iter()
        .find(|decision| decision.id == candidate)
        .map(|decision| crate::Reason::texts(&decision.reasons))
}

/// What becomes of a user's delete of one backup (`sexton backup delete`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserDelete {
    /// Nothing kept needs it: it goes now.
    Now,
    /// A kept backup needs it: it goes when nothing does (the retention-worker carries it out).
    Deferred(String),
    /// Not at all, with the reason: held, in progress, or the newest full backup without force.
    Refused(String),
    /// It is already on its way out.
    AlreadyDeleting,
}

/// A full backup for the floor, as the engine counts it: a full, or any backup with volumes
/// (each volume has its own chain; issue 8).
pub fn counts_as_full(record: &BackupRecord) -> bool {
    record.kind == crate::BackupKind::Full || !record.volumes.is_empty()
}

/// Judges a user's delete of `target`, a backup of `group` (named `group_name` in reasons, as
/// `<cluster>/<plan>`). Holds and a backup in progress are never overridden; `force` overrides
/// the newest-full rule and dependents. Only the target's mark matters here (it is not
/// `expiring`, or the delete is already under way), so the group is the engine's records as
/// they stand.
pub fn judge_user_delete(
    group: &[BackupRecord],
    target: &BackupRecord,
    group_name: &str,
    force: bool,
    now: DateTime<Utc>,
) -> UserDelete {
    if let Some(why) = protection(target) {
        return UserDelete::Refused(why);
    }
    if matches!(
        target.status,
        BackupStatus::Expiring | BackupStatus::Deleting
    ) {
        return UserDelete::AlreadyDeleting;
    }
    if force {
        return UserDelete::Now;
    }
    let is_completed_full =
        |r: &BackupRecord| r.status == BackupStatus::Completed && counts_as_full(r);
    if is_completed_full(target) {
        let newest = group
            .iter()
            .filter(|r| is_completed_full(r))
            .max_by_key(|r| r.completed_at);
        if newest.is_some_and(|newest| newest.id == target.id) {
            return UserDelete::Refused(format!(
                "backup {} is the newest full backup of {group_name}: it is what a restore \
                 starts from (--force deletes it anyway)",
                target.id
            ));
        }
    }
    let requested = BackupRecord {
        delete_requested: true,
        ..target.clone()
    };
    let others: Vec<Member> = group
        .iter()
        .filter(|r| r.id != target.id)
        .chain([&requested])
        .map(|record| Member {
            record: record.clone(),
            expired_from: None,
        })
        .collect();
    match may_go(
        &others,
        &[(requested.id.as_str(), Asked::User)],
        Err("unused"),
        now,
    )
    .remove(0)
    {
        Ok(()) => UserDelete::Now,
        Err(why) => UserDelete::Deferred(why),
    }
}

/// barman's `minimum_redundancy` for a user's delete (issue 30): why deleting `going` (ids of
/// `group`) is refused, if it would leave fewer than `floor` counted backups (completed, not
/// asked to be deleted) where there were more. Nothing overrides it, not even `--force`: barman
/// has no override either.
pub fn below_minimum_redundancy(
    group: &[BackupRecord],
    going: &[&str],
    floor: Option<std::num::NonZeroU32>,
    group_name: &str,
) -> Option<String> {
    let floor = floor?.get() as usize;
    let counted = |r: &&BackupRecord| r.status == BackupStatus::Completed && !r.delete_requested;
    let before = group.iter().filter(counted).count();
    let after = group
        .iter()
        .filter(counted)
        .filter(|r| !going.contains(&r.id.as_str()))
        .count();
    (after < floor && after < before).then(|| {
        format!(
            "{group_name} has {before} completed backup(s) and its policy's minimum_redundancy \
             is {floor}: this delete would leave {after}; nothing is deleted (lower the floor \
             in the schedule's policy first)"
        )
    })
}

/// What `backup delete --with-dependents` removes (pgBackRest's `expire --set`, barman's
/// `delete`): the backup and every backup that builds on it, through its own parent or a
/// volume's, at any depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependentDelete {
    /// The backup first, then its dependents, oldest first: the ones to mark.
    pub ids: Vec<String>,
    /// Dependents already on their way out (expiring or deleting): not marked again.
    pub already: Vec<String>,
}

/// The backups of `group` that build on `target`, at any depth (their ids, in group order).
/// A failed backup builds on nothing.
pub fn dependents(group: &[BackupRecord], target: &str) -> Vec<String> {
    let set = dependent_set(group, target);
    group
        .iter()
        .filter(|r| set.contains(r.id.as_str()))
        .map(|r| r.id.clone())
        .collect()
}

/// The ids of [`dependents`], found in one pass over the group and one walk down from the
/// target (each backup is visited once, whatever the catalog's order or a cycle in it).
fn dependent_set<'g>(group: &'g [BackupRecord], target: &str) -> HashSet<&'g str> {
    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    for record in group.iter().filter(|r| r.status != BackupStatus::Failed) {
        let parents: Vec<&str> = if record.volumes.is_empty() {
            match (&record.kind, &record.parent) {
                (crate::BackupKind::Incremental, Some(parent)) => vec![parent.as_str()],
                _ => Vec::new(),
            }
        } else {
            record
                .volumes
                .iter()
                .filter(|v| v.kind == crate::BackupKind::Incremental)
                .filter_map(|v| v.parent.as_deref())
                .collect()
        };
        for parent in parents {
            children.entry(parent).or_default().push(record.id.as_str());
        }
    }
    let mut found = HashSet::new();
    let mut next = vec![target];
    while let Some(id) = next.pop() {
        for &child in children.get(id).into_iter().flatten() {
            if child != target && found.insert(child) {
                next.push(child);
            }
        }
    }
    found
}

/// The oldest backup set of `group`: its oldest completed full backup not already asked to be
/// deleted (by completion time, then id, as pgBackRest and barman order by label), which
/// `backup delete --oldest` deletes with every backup that builds on it (barman's `delete
/// SERVER oldest`, pgBackRest's oldest set; issue 30). The delete itself is judged as any
/// `--with-dependents` one, so the floors still hold: the last full never goes.
pub fn oldest_set(group: &[BackupRecord]) -> Result<&str, String> {
    group
        .iter()
        .filter(|record| {
            record.status == BackupStatus::Completed
                && !record.delete_requested
                && counts_as_full(record)
        })
        .min_by(|a, b| {
            a.completed_at
                .cmp(&b.completed_at)
                .then_with(|| a.id.cmp(&b.id))
        })
        .map(|record| record.id.as_str())
        .ok_or_else(|| "the plan holds no completed full backup, so no backup set to delete".into())
}

/// Judges `backup delete --with-dependents` of `target` in `group` (named `group_name` in
/// reasons) at `now`: what goes, or why nothing does. Refused whole when the backup or any
/// dependent is held, in progress or under an unexpired Object Lock, and when it would leave
/// the group without a completed full backup (pgBackRest never expires the last full; a
/// restore starts from one). Nothing is overridden: there is no `--force` here.
pub fn judge_delete_with_dependents(
    group: &[BackupRecord],
    target: &BackupRecord,
    group_name: &str,
    now: DateTime<Utc>,
) -> Result<DependentDelete, String> {
    if matches!(
        target.status,
        BackupStatus::Expiring | BackupStatus::Deleting
    ) {
        return Err(format!("backup {} is being deleted already", target.id));
    }
    let dependent_ids = dependent_set(group, &target.id);
    let mut members: Vec<&BackupRecord> = group
        .iter()
        .filter(|r| dependent_ids.contains(r.id.as_str()))
        .collect();
    members.sort_by_key(|r| (r.completed_at.or(r.started_at), r.id.clone()));
    let mut refusals = Vec::new();
    for record in std::iter::once(target).chain(members.iter().copied()) {
        if let Some(why) = protection(record).or_else(|| locked_at(record, now)) {
            refusals.push(why);
        }
    }
    if !refusals.is_empty() {
        return Err(format!(
            "{}; nothing is deleted (release the holds, or wait for the backups in progress \
             and the locks)",
            refusals.join("; ")
        ));
    }
    let going = |r: &BackupRecord| r.id == target.id || dependent_ids.contains(r.id.as_str());
    let full_left = group.iter().any(|r| {
        !going(r) && r.status == BackupStatus::Completed && !r.delete_requested && counts_as_full(r)
    });
    if !full_left {
        return Err(format!(
            "deleting backup {} and the {} backup(s) that build on it would leave {group_name} \
             without a completed full backup, which every restore starts from; nothing is \
             deleted (take a new full first)",
            target.id,
            dependent_ids.len()
        ));
    }
    let (already, to_mark): (Vec<&BackupRecord>, Vec<&BackupRecord>) = members
        .into_iter()
        .partition(|r| matches!(r.status, BackupStatus::Expiring | BackupStatus::Deleting));
    Ok(DependentDelete {
        ids: std::iter::once(target.id.clone())
            .chain(to_mark.into_iter().map(|r| r.id.clone()))
            .collect(),
        already: already.into_iter().map(|r| r.id.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BackupKind, VolumeArtifact};

    fn record(id: &str, hour: u32, status: BackupStatus, parent: Option<&str>) -> BackupRecord {
        BackupRecord {
            id: id.into(),
            completed_at: Some(
                format!("2026-01-01T{hour:02}:00:00Z")
                    .parse()
                    .expect("a valid time"),
            ),
            status,
            kind: if parent.is_some() {
                BackupKind::Incremental
            } else {
                BackupKind::Full
            },
            parent: parent.map(str::to_string),
            ..BackupRecord::default()
        }
    }

    fn now() -> DateTime<Utc> {
        "2026-01-02T00:00:00Z".parse().unwrap()
    }

    fn members(group: &[BackupRecord]) -> Vec<Member> {
        group
            .iter()
            .map(|record| Member {
                record: record.clone(),
                expired_from: None,
            })
            .collect()
    }

    #[test]
    fn a_backup_the_plan_would_delete_at_once_is_told_with_the_reasons() {
        let group = vec![
            record("f1", 1, BackupStatus::Completed, None),
            record("f2", 2, BackupStatus::Completed, None),
        ];
        let keep_one = Policy::keep_last(1);
        let reasons = deleted_at_once(group.clone(), "f1", &keep_one, now())
            .expect("keep_last 1 deletes the older full");
        assert!(!reasons.is_empty());
        assert_eq!(deleted_at_once(group.clone(), "f2", &keep_one, now()), None);
        assert_eq!(deleted_at_once(group, "absent", &keep_one, now()), None);
    }

    #[test]
    fn the_oldest_set_starts_at_the_oldest_completed_full() {
        let mut requested = record("f0", 0, BackupStatus::Completed, None);
        requested.delete_requested = true;
        let group = [
            record("i3", 3, BackupStatus::Completed, Some("f2")),
            record("f2", 2, BackupStatus::Completed, None),
            record("i1", 1, BackupStatus::Completed, Some("fa")),
            record("fa", 1, BackupStatus::Failed, None),
            record("fb", 1, BackupStatus::Completed, None),
            requested,
        ];
        // f0 is already asked for, fa failed, i1 is no full: fb, at 01:00.
        assert_eq!(oldest_set(&group), Ok("fb"));
        // Two at the same time: the lower id, as the tools order by label.
        let tie = [
            record("fz", 1, BackupStatus::Completed, None),
            record("fb", 1, BackupStatus::Completed, None),
        ];
        assert_eq!(oldest_set(&tie), Ok("fb"));
        assert!(
            oldest_set(&[record("i", 1, BackupStatus::Completed, Some("x"))])
                .unwrap_err()
                .contains("no completed full backup")
        );
    }

    #[test]
    fn a_retention_job_the_plan_still_makes_goes_and_a_stale_one_is_refused() {
        let group = members(&[
            record("b3", 3, BackupStatus::Completed, None),
            record("b2", 2, BackupStatus::Expiring, None),
            record("b1", 1, BackupStatus::Expiring, None),
        ]);
        let candidates = [("b2", Asked::Retention), ("b1", Asked::Retention)];
        let answers = may_go(&group, &candidates, Ok(&Policy::keep_last(2)), now());
        assert!(answers[0].as_ref().unwrap_err().contains("keeps backup b2"));
        assert_eq!(answers[1], Ok(()));
        assert_eq!(
            may_go(&group, &candidates, Err("no policy"), now()),
            vec![Err("no policy".to_string()), Err("no policy".to_string())]
        );
    }

    #[test]
    fn a_marked_backup_is_judged_by_the_status_it_had() {
        let mut group = members(&[
            record("b4", 4, BackupStatus::Completed, None),
            record("f1", 1, BackupStatus::Expiring, None),
        ]);
        let candidates = [("f1", Asked::Retention)];
        // As `completed` (unknown) keep_last 2 keeps it; as `failed` (past its grace) it goes.
        let answers = may_go(&group, &candidates, Ok(&Policy::keep_last(2)), now());
        assert!(answers[0].is_err(), "{answers:?}");
        group[1].expired_from = Some(BackupStatus::Failed);
        let answers = may_go(&group, &candidates, Ok(&Policy::keep_last(2)), now());
        assert_eq!(answers, vec![Ok(())]);
    }

    #[test]
    fn user_deletes_are_refused_deferred_or_carried_out() {
        let group = [
            record("b3", 3, BackupStatus::Completed, None),
            record("i2", 2, BackupStatus::Completed, Some("b1")),
            record("b1", 1, BackupStatus::Completed, None),
        ];
        let judge = |id: &str, force| {
            let target = group.iter().find(|r| r.id == id).unwrap();
            judge_user_delete(&group, target, "c1/p", force, now())
        };
        assert!(
            matches!(judge("b3", false), UserDelete::Refused(why) if why.contains("newest full backup of c1/p"))
        );
        assert!(
            matches!(judge("b1", false), UserDelete::Deferred(why) if why.contains("needed by i2"))
        );
        assert_eq!(judge("b1", true), UserDelete::Now);
        assert_eq!(judge("i2", false), UserDelete::Now);
    }

    #[test]
    fn only_the_named_volumes_lose_their_mark() {
        let mut b2 = record("b2", 2, BackupStatus::Completed, None);
        b2.volumes = vec![VolumeArtifact::full("pv1", vec![])];
        let group = [b2];
        let answer = still_deletes_volumes(
            &group,
            "b2",
            &["pv1".to_string()],
            &Policy::keep_last(1),
            now(),
        );
        assert!(answer.unwrap_err().contains("does not delete some volumes"));
        assert!(
            still_deletes_volumes(&group, "b9", &[], &Policy::keep_last(1), now())
                .unwrap_err()
                .contains("not in its group's catalog")
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

    #[test]
    fn a_backup_goes_with_every_backup_that_builds_on_it_and_nothing_else() {
        use BackupStatus::*;
        // f1 ← i2 ← i3, f1 ← d4 (a second branch), f5 ← i6; x7 failed on i3.
        let mut failed = record("x7", 7, Failed, Some("i3"));
        failed.kind = BackupKind::Incremental;
        let group = vec![
            record("f1", 1, Completed, None),
            record("i2", 2, Completed, Some("f1")),
            record("i3", 3, Completed, Some("i2")),
            record("d4", 4, Completed, Some("f1")),
            record("f5", 5, Completed, None),
            record("i6", 6, Completed, Some("f5")),
            failed,
        ];
        let judged = judge_delete_with_dependents(&group, &group[0], "c1/p", now()).unwrap();
        assert_eq!(judged.ids, ["f1", "i2", "i3", "d4"]);
        assert!(judged.already.is_empty());
        let judged = judge_delete_with_dependents(&group, &group[1], "c1/p", now()).unwrap();
        assert_eq!(judged.ids, ["i2", "i3"]);
        let judged = judge_delete_with_dependents(&group, &group[4], "c1/p", now()).unwrap();
        assert_eq!(judged.ids, ["f5", "i6"]);
        // The last full (f1 is asked to go already), with everything on it: refused, as
        // pgBackRest refuses to expire the last full.
        let mut group = group;
        group[0].delete_requested = true;
        let why = judge_delete_with_dependents(&group, &group[4], "c1/p", now()).unwrap_err();
        assert!(
            why.starts_with("deleting backup f5 and the 1 backup(s) that build on it would leave c1/p without a completed full backup"),
            "{why}"
        );
    }

    #[test]
    fn a_held_or_locked_dependent_refuses_the_whole_delete() {
        use BackupStatus::*;
        let mut group = vec![
            record("f1", 1, Completed, None),
            record("i2", 2, Completed, Some("f1")),
            record("f3", 3, Completed, None),
        ];
        group[1].holds = vec!["restore:r1".into()];
        let why = judge_delete_with_dependents(&group, &group[0], "c1/p", now()).unwrap_err();
        assert!(
            why.contains("backup i2 is held: restore:r1") && why.contains("nothing is deleted"),
            "{why}"
        );
        group[1].holds.clear();
        group[1].locked_until = Some(now() + chrono::Duration::days(1));
        let why = judge_delete_with_dependents(&group, &group[0], "c1/p", now()).unwrap_err();
        assert!(why.contains("backup i2 is locked until"), "{why}");
        // A dependent already expiring is named, not marked again.
        group[1].locked_until = None;
        group[1].status = Expiring;
        let judged = judge_delete_with_dependents(&group, &group[0], "c1/p", now()).unwrap();
        assert_eq!(
            (judged.ids, judged.already),
            (vec!["f1".into()], vec!["i2".into()])
        );
    }

    #[test]
    fn volume_parents_are_dependencies_too() {
        use BackupStatus::*;
        let volume = |parent: Option<&str>| VolumeArtifact {
            name: "data".into(),
            kind: if parent.is_some() {
                BackupKind::Incremental
            } else {
                BackupKind::Full
            },
            parent: parent.map(str::to_string),
            ..VolumeArtifact::default()
        };
        let mut v1 = record("v1", 1, Completed, None);
        v1.volumes = vec![volume(None)];
        let mut v2 = record("v2", 2, Completed, None);
        v2.volumes = vec![volume(Some("v1"))];
        let mut v3 = record("v3", 3, Completed, None);
        v3.volumes = vec![volume(None)];
        let group = vec![v1, v2, v3];
        let judged = judge_delete_with_dependents(&group, &group[0], "c1/p", now()).unwrap();
        assert_eq!(judged.ids, ["v1", "v2"]);
    }

    proptest::proptest! {
        /// Whatever the chains: the backup and all that builds on it go, nothing that remains
        /// builds on what goes, and a full backup always remains.
        #[test]
        fn nothing_that_stays_needs_what_goes(
            parents in proptest::collection::vec(proptest::option::of(0usize..40), 1..40),
            target in 0usize..40,
        ) {
            let group: Vec<BackupRecord> = parents
                .iter()
                .enumerate()
                .map(|(i, parent)| {
                    // Only an older backup can be a parent.
                    let parent = parent.filter(|p| *p < i).map(|p| format!("b{p}"));
                    let mut r = record(&format!("b{i}"), 0, BackupStatus::Completed, parent.as_deref());
                    r.completed_at = Some(
                        ("2026-01-01T00:00:00Z".parse::<DateTime<chrono::FixedOffset>>().unwrap())
                            + chrono::Duration::minutes(i as i64),
                    );
                    r
                })
                .collect();
            let target = &group[target % group.len()];
            match judge_delete_with_dependents(&group, target, "c/p", now()) {
                Ok(judged) => {
                    proptest::prop_assert_eq!(&judged.ids[0], &target.id);
                    let going: std::collections::HashSet<&str> =
                        judged.ids.iter().map(String::as_str).collect();
                    for r in group.iter().filter(|r| !going.contains(r.id.as_str())) {
                        if let Some(parent) = &r.parent {
                            proptest::prop_assert!(!going.contains(parent.as_str()),
                                "{} stays and builds on {parent}, which goes", r.id);
                        }
                    }
                    proptest::prop_assert!(group.iter().any(|r| !going.contains(r.id.as_str())
                        && r.kind == BackupKind::Full));
                    // Everything that goes builds on the target.
                    for id in judged.ids.iter().skip(1) {
                        let mut at = group.iter().find(|r| &r.id == id).unwrap();
                        while at.id != target.id {
                            let parent = at.parent.as_ref().expect("a dependent has a parent");
                            at = group.iter().find(|r| &r.id == parent).unwrap();
                        }
                    }
                }
                Err(why) => {
                    proptest::prop_assert!(why.contains("without a completed full backup"), "{}", why);
                    let going = dependents(&group, &target.id);
                    proptest::prop_assert!(!group.iter().any(|r| r.id != target.id
                        && !going.contains(&r.id) && r.kind == BackupKind::Full));
                }
            }
        }
    }

    #[test]
    fn no_users_delete_goes_below_the_minimum_redundancy() {
        use BackupStatus::*;
        let floor = std::num::NonZeroU32::new(2);
        let mut group = vec![
            record("b1", 1, Completed, None),
            record("b2", 2, Completed, None),
            record("b3", 3, Completed, None),
            record("x4", 4, Failed, None),
        ];
        assert_eq!(
            below_minimum_redundancy(&group, &["b1"], floor, "c/p"),
            None
        );
        let why = below_minimum_redundancy(&group, &["b1", "b2"], floor, "c/p").unwrap();
        assert!(why.contains("this delete would leave 1"), "{why}");
        // A failed backup counts for nothing, so deleting it is never below the floor.
        group.truncate(2);
        group.push(record("x4", 4, Failed, None));
        assert_eq!(
            below_minimum_redundancy(&group, &["x4"], floor, "c/p"),
            None
        );
        assert!(below_minimum_redundancy(&group, &["b2"], floor, "c/p").is_some());
        // Without a floor, nothing is refused.
        assert_eq!(
            below_minimum_redundancy(&group, &["b1", "b2"], None, "c/p"),
            None
        );
    }
}
