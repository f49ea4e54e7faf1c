//! `schedule.delete`: what happens to a schedule's backup records is the schedule's
//! `backup_owner` (seed 003's `backupOwnerReference`):
//!
//! - `none` (the default) and `cluster`: the records stay (a `cluster`-owned record goes with
//!   the cluster's records: `sexton cluster forget`, once the cluster has no schedule left).
//! - `schedule`: the records go with the schedule. A record whose backup (or the schedule) opted
//!   into remote cleanup goes through the deleter's pipeline, as a forced user delete with
//!   `--remote`: the retention-worker marks it, the deleter judges and deletes the objects, then
//!   the record. Any other record is removed from the catalog only; its objects stay
//!   (`sexton backup orphans` finds them).
//!
//! Never removed, whatever the owner, and said why: a backup that is held (legal hold or
//! in use), in progress, or needed by a backup that stays (of another schedule, or a held one of
//! this schedule, through its parent or a volume's parent). Backups already being deleted are
//! left to the deleter.
//!
//! `dry_run` answers with the same summary and writes nothing: `sexton schedule delete` shows
//! it before it deletes. The records are handled before the schedule record goes, so a crash
//! in between leaves the schedule, and deleting it again finishes the work (every step is
//! idempotent).

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use serde_json::Value;
use sexton_model::{
    names::{BackupId, ClusterName},
    records::{BackupOwner, BackupRecord, DeleteRequest, ScheduleRecord},
};
use sexton_shared::{
    api::{reply_value, ApiError, ErrorCode, KeptRecord, ScheduleDelete, ScheduleDeleted},
    catalog::{CasError, Versioned},
    channels, planning,
};

use super::{unavailable, Api};

/// What deleting the schedule (or forgetting the cluster) does to one of its records.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Fate {
    /// The record goes; its objects stay.
    RemoveRecord,
    /// Through the deleter: objects, then the record.
    DeleteWithObjects,
    /// Already expiring or being deleted.
    AlreadyDeleting,
    Keep(String),
}

/// The fate of each of `own` (the schedule's records) under `schedule`'s owner mode; `others`
/// are the cluster's other records. Pure.
fn fates(
    schedule: &ScheduleRecord,
    own: &[&BackupRecord],
    others: &[&BackupRecord],
) -> Vec<(String, Fate)> {
    let keep_all = |why: &str| {
        own.iter()
            .map(|r| (r.id.to_string(), Fate::Keep(why.to_string())))
            .collect()
    };
    match schedule.backup_owner {
        BackupOwner::Standalone => {
            return keep_all("backup_owner none: the records stay when the schedule goes")
        }
        BackupOwner::Cluster => {
            return keep_all(
                "backup_owner cluster: the records stay until the cluster's records are removed \
                 (sexton cluster forget)",
            )
        }
        BackupOwner::Schedule => {}
    }
    let kept = kept_with_reasons(own, others);
    own.iter()
        .map(|record| {
            let fate = if let Some(why) = kept.get(record.id.as_str()) {
                Fate::Keep(why.clone())
            } else if record.status.is_being_deleted() {
                Fate::AlreadyDeleting
            } else if schedule.remote_cleanup || record.remote_cleanup {
                Fate::DeleteWithObjects
            } else {
                Fate::RemoveRecord
            };
            (record.id.to_string(), fate)
        })
        .collect()
}

/// Which of `own` (records about to be removed) must stay, and why: protected ones (held,
/// legal-held, in progress), and whatever a record that stays (one of `others` not being
/// deleted, or a kept one of `own`) builds on, through its parent or a volume's parent. Pure.
pub(super) fn kept_with_reasons(
    own: &[&BackupRecord],
    others: &[&BackupRecord],
) -> BTreeMap<String, String> {
    let parents = |record: &BackupRecord| -> Vec<String> {
        record
            .parent
            .iter()
            .map(|p| p.to_string())
            .chain(record.volumes.iter().filter_map(|v| v.parent.clone()))
            .collect()
    };
    let mut kept: BTreeMap<String, String> = BTreeMap::new();
    for record in own {
        if let Some(why) = planning::protection(record) {
            kept.insert(record.id.to_string(), why);
        }
    }
    let own_ids: BTreeSet<String> = own.iter().map(|r| r.id.to_string()).collect();
    // Whatever stays keeps what it builds on: walk parents from every record that stays
    // until nothing changes.
    loop {
        let mut changed = false;
        let staying = others
            .iter()
            .filter(|r| !r.status.is_being_deleted())
            .chain(own.iter().filter(|r| kept.contains_key(r.id.as_str())));
        let mut needed: Vec<(String, String)> = Vec::new();
        for record in staying {
            for parent in parents(record) {
                if own_ids.contains(&parent) && !kept.contains_key(&parent) {
                    needed.push((parent, format!("needed by {}", record.id)));
                }
            }
        }
        for (id, why) in needed {
            if let std::collections::btree_map::Entry::Vacant(entry) = kept.entry(id) {
                entry.insert(why);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    kept
}

/// What a list of fates comes to: the counts the API answers with, the kept records with
/// their reasons, and the words of the summary ("removes 2 …; keeps 1 …"). Shared by
/// `schedule.delete` and `cluster.forget`.
pub(super) struct Tally {
    pub(super) n_remove: usize,
    pub(super) n_delete: usize,
    pub(super) n_already: usize,
    pub(super) kept: Vec<KeptRecord>,
}

impl Tally {
    pub(super) fn of(fates: &[(String, Fate)]) -> Tally {
        let count = |wanted: Fate| fates.iter().filter(|(_, fate)| *fate == wanted).count();
        Tally {
            n_remove: count(Fate::RemoveRecord),
            n_delete: count(Fate::DeleteWithObjects),
            n_already: count(Fate::AlreadyDeleting),
            kept: fates
                .iter()
                .filter_map(|(id, fate)| match fate {
                    Fate::Keep(why) => Some(KeptRecord {
                        id: id.clone(),
                        reason: why.clone(),
                    }),
                    _ => None,
                })
                .collect(),
        }
    }

    /// The summary's words, `None` when there are no records.
    pub(super) fn words(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.n_remove > 0 {
            parts.push(format!(
                "removes {} backup record(s) from the catalog, keeping their objects",
                self.n_remove
            ));
        }
        if self.n_delete > 0 {
            parts.push(format!(
                "deletes {} backup(s) with their objects, through the deleter",
                self.n_delete
            ));
        }
        if !self.kept.is_empty() {
            parts.push(format!("keeps {} backup record(s)", self.kept.len()));
        }
        if self.n_already > 0 {
            parts.push(format!("leaves {} already being deleted", self.n_already));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

fn summary(
    schedule: &ScheduleRecord,
    fates: &[(String, Fate)],
    dry_run: bool,
    deleted: bool,
) -> ScheduleDeleted {
    let tally = Tally::of(fates);
    let text = match tally.words() {
        None => format!("schedule {} has no backup records", schedule.name),
        Some(words) => format!(
            "deleting schedule {} (backup_owner {}) {words}",
            schedule.name,
            schedule.backup_owner.as_str(),
        ),
    };
    ScheduleDeleted {
        schedule: schedule.name.clone(),
        deleted,
        dry_run,
        backup_owner: schedule.backup_owner,
        remote_cleanup: schedule.remote_cleanup,
        records: fates.len(),
        remove_records: tally.n_remove,
        delete_with_objects: tally.n_delete,
        already_deleting: tally.n_already,
        keep: tally.kept,
        summary: text,
    }
}

impl Api {
    pub(super) async fn schedule_delete(
        &self,
        req: ScheduleDelete,
        actor: &sexton_shared::audit::Actor,
    ) -> Result<Value, ApiError> {
        let (schedule, revision) = self.read(req.name.as_str()).await?;
        let state =
            planning::load_cluster(&self.topology.schedules, &self.catalog, &schedule.cluster)
                .await
                .map_err(|err| unavailable(format!("{err:#}")))?;
        let (own, others): (Vec<&Versioned<BackupRecord>>, Vec<&Versioned<BackupRecord>>) = state
            .records
            .iter()
            .partition(|r| r.value.schedule.as_ref() == Some(&schedule.name));
        let own_values: Vec<&BackupRecord> = own.iter().map(|r| &r.value).collect();
        let other_values: Vec<&BackupRecord> = others.iter().map(|r| &r.value).collect();
        let fates = fates(&schedule, &own_values, &other_values);
        if req.dry_run {
            return reply_value(summary(&schedule, &fates, true, false));
        }
        self.carry_out(
            &own,
            &fates,
            actor,
            &schedule.cluster,
            &format!("schedule-delete.{}.{revision}", schedule.name),
            |id| {
                format!(
                    "backup {id} changed while schedule {} was being deleted; the schedule is \
                     still there: delete it again",
                    schedule.name
                )
            },
        )
        .await?;
        self.topology
            .schedules
            .delete_expect_revision(req.name.as_str(), Some(revision))
            .await
            .map_err(|err| ApiError::new(ErrorCode::Conflict, err.to_string()))?;
        self.audit_schedule(Some(&schedule), None, actor).await;
        tracing::info!(schedule = %schedule.name, owner = schedule.backup_owner.as_str(), records = fates.len(), "schedule deleted");
        reply_value(summary(&schedule, &fates, false, true))
    }
}

impl Api {
    /// Carries out the fates of `records` (removing records, or asking the deleter for them
    /// with their objects), each write a compare-and-set on the revision read; a record that
    /// changed meanwhile stops it with `conflict` (the caller's message). When anything went to
    /// the deleter, asks for a retention sweep of `cluster` with message id `sweep_id`.
    pub(super) async fn carry_out(
        &self,
        records: &[&Versioned<BackupRecord>],
        fates: &[(String, Fate)],
        actor: &sexton_shared::audit::Actor,
        cluster: &ClusterName,
        sweep_id: &str,
        conflict: impl Fn(&BackupId) -> String,
    ) -> Result<(), ApiError> {
        let now = Utc::now();
        let mut requested = false;
        let mut removed: Vec<&BackupRecord> = Vec::new();
        for (current, (_, fate)) in records.iter().zip(fates) {
            let result = match fate {
                Fate::RemoveRecord => {
                    self.catalog
                        .remove(&current.value.cluster, &current.value.id, current.revision)
                        .await
                }
                Fate::DeleteWithObjects => {
                    let mut record = current.value.clone();
                    record.delete_requested = true;
                    record.delete_request = Some(DeleteRequest {
                        requested_at: now,
                        remote: true,
                        // Everything chosen goes together, and nothing that stays needs these
                        // (the fates checked it): the floor and dependents do not apply.
                        force: true,
                    });
                    requested = true;
                    self.catalog
                        .update(&record, current.revision)
                        .await
                        .map(|_| ())
                }
                Fate::AlreadyDeleting | Fate::Keep(_) => continue,
            };
            match result {
                Ok(()) if *fate == Fate::RemoveRecord => removed.push(&current.value),
                Ok(()) => {}
                Err(CasError::Conflict) => {
                    self.audit_records_removed(&removed, "removed by a user, objects kept", actor)
                        .await;
                    return Err(ApiError::new(
                        ErrorCode::Conflict,
                        conflict(&current.value.id),
                    ));
                }
                Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
            }
        }
        self.audit_records_removed(&removed, "removed by a user, objects kept", actor)
            .await;
        if requested {
            channels::request_sweep(
                &self.topology.jetstream,
                cluster,
                now,
                false,
                &channels::SweepCause::ScheduleDeleted {
                    id: sweep_id.to_string(),
                },
            )
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        }
        Ok(())
    }
}
