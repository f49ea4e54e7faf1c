//! The run's catalog writes: compare-and-set marks (`expiring`, whole or per volume) and the
//! volume marks a plan no longer wants taken off, each on the revision the run planned on, with
//! the delete job a mark asks for ([`super::publish`]); users' delete requests marked once they
//! may go. A conflict is counted (the run then asks for another) and never retried here. What
//! to mark is decided elsewhere (the plan, [`super::run`]); the deleter does the deleting.

use chrono::{DateTime, Utc};
use sexton_model::{
    names::BackupId,
    records::{BackupRecord, BackupStatus},
    wire::{DecisionSummary, PartialSummary},
};
use sexton_shared::{
    catalog::{CasError, Versioned},
    planning,
};

use super::publish::{Jobs, Mark};
use super::Worker;
use crate::group_plan::GroupPlan;
use crate::safety;
use crate::view::Members;

impl Worker {
    /// Records a compare-and-set conflict.
    fn conflict(&self) {
        // A run that met one decided over a catalog that changed under it (a deleter took a
        // mark off, a merge was recorded): it asks for another run of the cluster.
        super::count_conflict(&self.metrics);
    }

    /// The revision a compare-and-set write of the run made, or `None` after a conflict
    /// (counted: the record changed since the run read it, and the next run decides again).
    pub(super) fn written(&self, write: Result<u64, CasError>) -> anyhow::Result<Option<u64>> {
        match write {
            Ok(revision) => Ok(Some(revision)),
            Err(CasError::Conflict) => {
                self.conflict();
                Ok(None)
            }
            Err(CasError::Other(err)) => Err(err),
        }
    }

    /// The record at `index` of `group`, read whole from the catalog: the view keeps only its
    /// engine form ([`crate::view`]). Only the revision the run planned on is returned, so the
    /// record is the one the plan was made over. One changed or removed since is `None`; if
    /// the caller `writes` it, that is a compare-and-set conflict (another run is asked for),
    /// as a write on the planned revision would have been; a caller that only reads it (a job
    /// published again, a merge) leaves it to the next run, the change being newer.
    pub(super) async fn record_at(
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

    /// Marks one backup expiring (if it is not already) and adds its delete job to `jobs`.
    /// Returns the mark whose job is now on its way, if any.
    pub(super) async fn expire(
        &self,
        record: &Versioned<BackupRecord>,
        reasons: &[String],
        policy_hash: &str,
        jobs: &mut Jobs,
    ) -> anyhow::Result<Option<Mark>> {
        // A user who asks again after a deletion failed retries it.
        let markable = match record.value.status {
            BackupStatus::Completed | BackupStatus::Failed => true,
            // Only a user's word deletes these (the plan keeps a missing backup otherwise).
            BackupStatus::DeleteFailed | BackupStatus::Missing => {
                record.value.delete_request.is_some()
            }
            _ => false,
        };
        let mark = match record.value.status {
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
                // The mark's revision is the one this write makes (the job carries it).
                marked.expiring_revision = None;
                let written = self.catalog.update(&marked, record.revision).await;
                let Some(revision) = self.written(written)? else {
                    return Ok(None);
                };
                tracing::info!(cluster = %record.value.cluster, plan = %record.value.plan, backup = %record.value.id, reasons = ?reasons, policy = policy_hash, "backup marked expiring");
                Mark::new(revision)
            }
            // Marked by an earlier run whose job may have been lost: publish it again; the
            // message id makes a second copy a no-op.
            BackupStatus::Expiring => Mark::again(record.value.mark_revision(record.revision)),
            _ => return Ok(None),
        };
        jobs.delete(&record.value, mark.revision, reasons, &[]);
        Ok(Some(mark))
    }

    /// Takes the `expiring` mark off the volumes of `record` that `decision` keeps.
    pub(super) async fn unmark_kept_volumes(
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
        let written = self.catalog.update(&unmarked, record.revision).await;
        if self.written(written)?.is_some() {
            tracing::info!(cluster = %current.cluster, backup = %current.id, "kept after all: volume marks taken off");
        }
        Ok(())
    }

    /// Marks the volumes a partial verdict deletes `expiring` (the record stays `completed`:
    /// its other volumes remain restorable) and adds a delete job naming them to `jobs`.
    /// Returns the mark whose job is now on its way, if any. A backup a user asked to delete,
    /// one already being deleted whole, or one whose partial deletion the deleter has claimed
    /// is left alone.
    pub(super) async fn expire_volumes(
        &self,
        record: &Versioned<BackupRecord>,
        volumes: &[String],
        reasons: &[String],
        policy_hash: &str,
        jobs: &mut Jobs,
    ) -> anyhow::Result<Option<Mark>> {
        let current = &record.value;
        if volumes.is_empty()
            || current.status != BackupStatus::Completed
            || current.delete_request.is_some()
            || current.volume_deletion.is_some()
            || planning::protection(current).is_some()
        {
            return Ok(None);
        }
        let already = current
            .volumes
            .iter()
            .filter(|v| volumes.contains(&v.name))
            .all(|v| v.expiring);
        let mark = if already {
            // Marked by an earlier run whose job may have been lost: publish it again.
            Mark::again(record.revision)
        } else {
            let mut marked = current.clone();
            for volume in &mut marked.volumes {
                if volumes.contains(&volume.name) {
                    volume.expiring = true;
                }
            }
            marked.delete_reasons = reasons.to_vec();
            marked.delete_policy = Some(policy_hash.to_string());
            let written = self.catalog.update(&marked, record.revision).await;
            let Some(revision) = self.written(written)? else {
                return Ok(None);
            };
            tracing::info!(cluster = %current.cluster, plan = %current.plan, backup = %current.id, volumes = ?volumes, reasons = ?reasons, policy = policy_hash, "volumes marked expiring");
            Mark::new(revision)
        };
        jobs.delete(current, mark.revision, reasons, volumes);
        Ok(Some(mark))
    }

    /// Marks the backups users asked to delete (`sexton backup delete`) once nothing kept
    /// needs them, or at once when forced; the deleter judges them again the same way
    /// ([`planning::may_go`]). A request on a backup whose deletion failed is a retry.
    /// `expired` and `trimmed` list the backups and volumes this run has just marked expiring:
    /// they are judged as such (the group's snapshot was read before).
    pub(super) async fn expire_user_requests(
        &self,
        group: &GroupPlan,
        expired: &[DecisionSummary],
        trimmed: &[PartialSummary],
        now: DateTime<Utc>,
        jobs: &mut Jobs,
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
        let all = members_after(members, expired, trimmed);
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
                    if let Some(mark) = self.expire(record, &reasons, &policy_hash, jobs).await? {
                        self.metrics
                            .decisions
                            .with_label_values(&["delete", "user"])
                            .inc();
                        if mark.new {
                            marked.push(safety::marked(&record.value, &reasons, &[], &policy_hash));
                        }
                    }
                }
                Err(why) => {
                    tracing::info!(cluster = %group.cluster, backup = %record.value.id, why, "user delete deferred")
                }
            }
        }
        Ok(marked)
    }
}

/// Pure: the group's members as this run left them, for judging users' requests: the backups
/// in `expired` are expiring, the volumes in `trimmed` too. One pass, the run's marks looked up
/// by id.
fn members_after(
    members: &Members,
    expired: &[DecisionSummary],
    trimmed: &[PartialSummary],
) -> Vec<sexton_retention::judge::Member> {
    let expired: std::collections::HashSet<&str> = expired.iter().map(|e| e.id.as_str()).collect();
    let trimmed: std::collections::HashMap<&str, &[String]> = trimmed
        .iter()
        .map(|t| (t.id.as_str(), t.volumes_delete.as_slice()))
        .collect();
    (members.engine.backups.iter())
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
        .collect()
}
