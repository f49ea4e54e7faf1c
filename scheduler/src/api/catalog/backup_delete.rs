//! `backup.delete`: a user's delete of one backup (seed 003). Remote cleanup is opt-in: without
//! `--remote`, or `remote_cleanup` on the backup, its schedule or all the schedules of its
//! cluster/plan, only the catalog record goes and the objects stay (`sexton backup orphans`
//! finds them). With remote cleanup it runs through the deleter's pipeline: the request is
//! recorded on the backup and a retention sweep is asked for, the retention-worker marks it
//! and publishes the job, and the deleter judges it again before deleting anything.
//!
//! Refused with the reason: a backup on hold or in progress, and — unless `--force` — the
//! newest full backup. A backup that a kept backup depends on is deferred (`delete_requested`):
//! it goes once nothing needs it, or now with `--force`.

use chrono::Utc;
use serde_json::Value;
use sexton_model::records::{BackupRecord, DeleteRequest, ScheduleRecord};
use sexton_shared::{
    api::{reply_value, ApiError, BackupDelete, BackupDeleted, DeleteAction, ErrorCode},
    catalog::CasError,
    planning::{self, UserDelete},
};

use crate::api::{invalid, unavailable, Api};

/// Whether deleting `target` removes its objects too.
fn remote_cleanup(
    request: &BackupDelete,
    target: &BackupRecord,
    schedules: &[ScheduleRecord],
) -> bool {
    let own_schedule = target
        .schedule
        .as_ref()
        .and_then(|name| schedules.iter().find(|s| s.name == *name));
    let group: Vec<&ScheduleRecord> = schedules.iter().filter(|s| s.plan == target.plan).collect();
    request.remote
        || target.remote_cleanup
        || own_schedule.is_some_and(|s| s.remote_cleanup)
        || (!group.is_empty() && group.iter().all(|s| s.remote_cleanup))
}

/// The backups of `target`'s plan still held at primary (what a user's delete is judged
/// against), or the refusal when `target` itself is gone from primary and stays only for its
/// copies.
fn primary_group<'s>(
    state: &'s planning::ClusterState,
    target: &BackupRecord,
) -> Result<Vec<&'s BackupRecord>, ApiError> {
    if !target.held_at_primary() {
        let held: Vec<String> = target
            .copies
            .iter()
            .filter(|(_, copy)| copy.is_held())
            .map(|(location, _)| location.to_string())
            .collect();
        return Err(invalid(format!(
            "refused: backup {} is deleted at primary already; its record stays for its \
             copies at {}, which each location's copy rule keeps or lets go (deleting a \
             copy by hand is not built yet)",
            target.id,
            held.join(", ")
        )));
    }
    Ok(state
        .records
        .iter()
        .map(|r| &r.value)
        .filter(|r| r.plan == target.plan && r.held_at_primary())
        .collect())
}

/// Where a record-only delete leaves a backup's objects, and how the record comes back.
fn objects_kept(prefix: &str, target: &sexton_model::records::BackupRecord) -> String {
    let copies: Vec<&str> = target
        .copies
        .iter()
        .filter(|(_, copy)| copy.is_held())
        .map(|(name, _)| name.as_str())
        .collect();
    format!(
        "its objects stay under {prefix}{}; `sexton catalog import --cluster {} \
         --include-removed` brings the record back, `sexton backup orphans --cluster {} --grace \
         1s` lists the objects",
        if copies.is_empty() {
            String::new()
        } else {
            format!(" (and its copies at {})", copies.join(", "))
        },
        target.cluster,
        target.cluster
    )
}

impl Api {
    pub(in crate::api) async fn backup_delete(
        &self,
        request: BackupDelete,
        actor: &sexton_shared::audit::Actor,
    ) -> Result<Value, ApiError> {
        if let Some(location) = request.location.clone().filter(|l| !l.is_primary()) {
            return self.copy_delete(request, location).await;
        }
        if request.with_dependents {
            return self.delete_with_dependents(request).await;
        }
        for _ in 0..5 {
            let (state, at) = self
                .cluster_with_backup(&request.cluster, &request.id)
                .await?;
            let current = &state.records[at];
            let target = &current.value;
            let group = primary_group(&state, target)?;
            let remote = remote_cleanup(&request, target, &state.schedules);
            let now = Utc::now();
            // A record-only delete leaves the objects: where, and how to undo it (issue 50).
            let kept = objects_kept(
                &self
                    .store
                    .backup_prefix(&target.cluster, &target.backup_name, target.id.as_str()),
                target,
            );
            let reply = |action: DeleteAction, reason: Option<String>| {
                reply_value(BackupDeleted {
                    cluster: request.cluster.clone(),
                    id: request.id.clone(),
                    action,
                    remote,
                    force: request.force,
                    reason,
                    dry_run: request.dry_run,
                    location: None,
                    dependents: Vec::new(),
                    already_deleting: Vec::new(),
                })
            };
            // barman's minimum_redundancy: no user's delete goes below it, forced or not.
            if let Some(why) = planning::below_minimum_redundancy(
                &group,
                &state.schedules,
                &target.plan,
                &target.cluster,
                &[target.id.as_str()],
            ) {
                return Err(invalid(format!("refused: {why}")));
            }
            let verdict = planning::judge_user_delete(&group, target, request.force, now);
            if request.dry_run {
                // What would happen, in the words of the real answer; nothing is written.
                return match verdict {
                    UserDelete::Refused(why) => Err(invalid(format!("refused: {why}"))),
                    UserDelete::AlreadyDeleting => reply(DeleteAction::AlreadyDeleting, None),
                    UserDelete::Now if !remote => {
                        reply(DeleteAction::RecordDeleted, Some(kept.clone()))
                    }
                    UserDelete::Now => reply(DeleteAction::Deleting, None),
                    UserDelete::Deferred(why) => reply(DeleteAction::Deferred, Some(why)),
                };
            }
            let deferred_reason = match verdict {
                UserDelete::Refused(why) => return Err(invalid(format!("refused: {why}"))),
                UserDelete::AlreadyDeleting => {
                    return reply(
                        DeleteAction::AlreadyDeleting,
                        Some(format!(
                            "backup {} is {}",
                            target.id,
                            target.status.as_str()
                        )),
                    )
                }
                UserDelete::Now if !remote => {
                    // Record only: the objects stay.
                    match self
                        .catalog
                        .remove(&target.cluster, &target.id, current.revision)
                        .await
                    {
                        Ok(()) => {
                            tracing::info!(cluster = %target.cluster, backup = %target.id, "backup record deleted; objects kept");
                            self.audit_records_removed(
                                &[target],
                                "removed by a user, objects kept",
                                actor,
                            )
                            .await;
                            return reply(DeleteAction::RecordDeleted, Some(kept));
                        }
                        Err(CasError::Conflict) => continue,
                        Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
                    }
                }
                UserDelete::Now => None,
                UserDelete::Deferred(why) => Some(why),
            };
            let mut requested = target.clone();
            requested.delete_requested = true;
            requested.delete_request = Some(DeleteRequest {
                requested_at: now,
                remote,
                force: request.force,
            });
            let revision = match self.catalog.update(&requested, current.revision).await {
                Ok(revision) => revision,
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
            };
            // The retention-worker carries requests out; ask it to look at this cluster now.
            self.ask_retention_run(
                &request.cluster,
                &format!("user-delete.{}.{revision}", target.uid),
            )
            .await?;
            return match deferred_reason {
                Some(why) => reply(DeleteAction::Deferred, Some(why)),
                None => reply(DeleteAction::Deleting, None),
            };
        }
        Err(ApiError::new(
            ErrorCode::Conflict,
            format!("backup {} kept changing; try again", request.id),
        ))
    }

    /// `backup.delete --with-dependents` (issue 30): the backup and every backup that builds
    /// on it are asked to go, each recorded as a user's delete (`delete_requested`), then a
    /// retention run is asked for; the retention-worker marks them and the deleter judges
    /// each again before deleting anything. Since everything that builds on them goes too,
    /// nothing kept needs them and they go together at that run. Refused whole when any is
    /// held, in progress or locked, or when no completed full backup of the plan would be
    /// left ([`planning::judge_delete_with_dependents`]). A conflict part way re-reads and
    /// goes on: marks already made are kept and not made twice.
    async fn delete_with_dependents(&self, request: BackupDelete) -> Result<Value, ApiError> {
        'attempt: for _ in 0..5 {
            let (state, at) = self
                .cluster_with_backup(&request.cluster, &request.id)
                .await?;
            let target = &state.records[at].value;
            let group = primary_group(&state, target)?;
            let now = Utc::now();
            let judged = planning::judge_delete_with_dependents(&group, target, now)
                .map_err(|why| invalid(format!("refused: {why}")))?;
            let going: Vec<&str> = judged.ids.iter().map(String::as_str).collect();
            if let Some(why) = planning::below_minimum_redundancy(
                &group,
                &state.schedules,
                &target.plan,
                &target.cluster,
                &going,
            ) {
                return Err(invalid(format!("refused: {why}")));
            }
            let remote = remote_cleanup(&request, target, &state.schedules);
            let ids = |list: &[String]| -> Vec<sexton_model::names::BackupId> {
                list.iter().filter_map(|id| id.parse().ok()).collect()
            };
            let reply = reply_value(BackupDeleted {
                cluster: request.cluster.clone(),
                id: request.id.clone(),
                action: DeleteAction::Deleting,
                remote,
                force: false,
                reason: Some({
                    let dependents: Vec<&String> =
                        judged.ids[1..].iter().chain(&judged.already).collect();
                    let objects = if remote {
                        ", with their objects"
                    } else {
                        "; their objects stay"
                    };
                    if dependents.is_empty() {
                        format!(
                            "nothing builds on it; it goes at the cluster's next retention \
                             run{}",
                            if remote {
                                ", with its objects"
                            } else {
                                "; its objects stay"
                            }
                        )
                    } else {
                        format!(
                            "it and the {} backup(s) that build on it ({}) go at the \
                             cluster's next retention run{objects}",
                            dependents.len(),
                            dependents
                                .iter()
                                .map(|id| id.as_str())
                                .collect::<Vec<_>>()
                                .join(", "),
                        )
                    }
                }),
                dry_run: request.dry_run,
                location: None,
                dependents: ids(&judged.ids[1..]),
                already_deleting: ids(&judged.already),
            });
            if request.dry_run {
                return reply;
            }
            let mut marked = 0;
            for id in &judged.ids {
                let Some(current) = state.records.iter().find(|r| r.value.id.as_str() == id) else {
                    continue 'attempt;
                };
                if current.value.delete_requested {
                    continue;
                }
                let mut requested = current.value.clone();
                requested.delete_requested = true;
                requested.delete_request = Some(DeleteRequest {
                    requested_at: now,
                    remote,
                    force: false,
                });
                match self.catalog.update(&requested, current.revision).await {
                    Ok(_) => marked += 1,
                    Err(CasError::Conflict) => continue 'attempt,
                    Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
                }
            }
            tracing::info!(cluster = %request.cluster, backup = %request.id, marked, "backup and its dependents asked to go");
            self.ask_retention_run(
                &request.cluster,
                &format!("user-delete-tree.{}.{}", target.uid, now.timestamp_millis()),
            )
            .await?;
            return reply;
        }
        Err(ApiError::new(
            ErrorCode::Conflict,
            format!("backup {} kept changing; try again", request.id),
        ))
    }

    /// `backup.delete --location L`: the user's word that the copy at `L` may go. Recorded on
    /// the copy (`delete_requested_at`); the location's retention then deletes it like a
    /// backup a user asked to delete at primary: once no copy there builds on it, never while
    /// the backup is held, through the deleter's re-check. Nothing changes at primary or at
    /// another location.
    async fn copy_delete(
        &self,
        request: BackupDelete,
        location: sexton_model::names::LocationName,
    ) -> Result<Value, ApiError> {
        use sexton_model::copies::CopyState;
        if request.force || request.remote {
            return Err(invalid(
                "--force and --remote are for the backup itself; a copy at a location is \
                 always deleted with its objects, once no copy there builds on it",
            ));
        }
        for _ in 0..5 {
            let (state, at) = self
                .cluster_with_backup(&request.cluster, &request.id)
                .await?;
            let current = &state.records[at];
            let target = &current.value;
            let reply = |action: DeleteAction, reason: String| {
                reply_value(BackupDeleted {
                    cluster: request.cluster.clone(),
                    id: request.id.clone(),
                    action,
                    remote: true,
                    force: false,
                    reason: Some(reason),
                    dry_run: request.dry_run,
                    location: Some(location.clone()),
                    dependents: Vec::new(),
                    already_deleting: Vec::new(),
                })
            };
            let Some(copy) = target.copies.get(&location) else {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "backup {} has no copy at {location}; there is nothing there to delete",
                        request.id
                    ),
                ));
            };
            match copy.state {
                CopyState::Copied | CopyState::Missing => {}
                CopyState::Expiring | CopyState::Deleting => {
                    return reply(
                        DeleteAction::AlreadyDeleting,
                        format!("its copy at {location} is being deleted already"),
                    )
                }
                CopyState::Deleted => {
                    return Err(ApiError::new(
                        ErrorCode::Conflict,
                        format!(
                            "the copy of backup {} at {location} was deleted already",
                            request.id
                        ),
                    ))
                }
                CopyState::Skipped => {
                    return Err(ApiError::new(
                        ErrorCode::Conflict,
                        format!(
                            "backup {} was never copied to {location} (skipped: {}); there is \
                             nothing there to delete",
                            request.id,
                            copy.delete_reasons.join("; ")
                        ),
                    ))
                }
            }
            if target.legal_hold || !target.holds.is_empty() {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "backup {} is on hold ({}): its copies are kept everywhere until the \
                         hold is released",
                        request.id,
                        if target.legal_hold {
                            "legal hold".to_string()
                        } else {
                            target.holds.join(", ")
                        }
                    ),
                ));
            }
            let reason = format!(
                "the copy at {location} goes at the cluster's next retention run, once no copy \
                 there builds on it; nothing changes elsewhere"
            );
            if request.dry_run || copy.delete_requested_at.is_some() {
                return reply(DeleteAction::Deleting, reason);
            }
            let mut requested = target.clone();
            requested.keep_mark(current.revision);
            if let Some(copy) = requested.copies.get_mut(&location) {
                copy.delete_requested_at = Some(Utc::now());
            }
            let revision = match self.catalog.update(&requested, current.revision).await {
                Ok(revision) => revision,
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
            };
            self.ask_retention_run(
                &request.cluster,
                &format!("user-delete.{}.{location}.{revision}", target.uid),
            )
            .await?;
            return reply(DeleteAction::Deleting, reason);
        }
        Err(ApiError::new(
            ErrorCode::Conflict,
            format!("backup {} kept changing; try again", request.id),
        ))
    }
}
