//! What a destructive command's dry run says, and the question to ask before going ahead.

use serde_json::Value;
use sexton_shared::api::{
    BackupDeleted, ClusterForgotten, DeleteAction, OrphansFound, PreviewGroup, ScheduleDeleted,
};

use super::super::args::*;
use super::cell;
use crate::{client::decode_reply, failure::Failure};

/// Whether a person is there to answer: stdin and stderr are terminals.
fn on_a_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// What a destructive command's dry run (its answer on `subject`) says, and the question to
/// ask before going ahead (`None`: it deletes nothing, so nothing to ask). The dry run is read
/// as the reply type its service sends.
pub(in crate::cli) fn describe_destructive(
    command: &Command,
    subject: &str,
    plan: Value,
) -> Result<(String, Option<String>), Failure> {
    Ok(match command {
        Command::Schedule(ScheduleCommand::Delete { name, .. }) => {
            let plan: ScheduleDeleted = decode_reply(subject, plan)?;
            let n = plan.remove_records + plan.delete_with_objects;
            (
                plan.summary,
                (n > 0).then(|| format!("Delete schedule {name} and remove {n} backup record(s)?")),
            )
        }
        Command::Cluster(ClusterCommand::Forget { cluster, .. }) => {
            let plan: ClusterForgotten = decode_reply(subject, plan)?;
            let n = plan.delete_with_objects;
            (
                plan.summary,
                (n > 0).then(|| {
                    format!("Forget cluster {cluster} and delete {n} backup(s) with their objects?")
                }),
            )
        }
        Command::Backup(BackupCommand::Delete { id, cluster, .. }) => {
            let id = id.as_deref().unwrap_or("(oldest)");
            let cluster = cluster.as_deref().unwrap_or("-");
            let plan: BackupDeleted = decode_reply(subject, plan)?;
            let reason = plan.reason.as_deref().unwrap_or("-");
            if let Some(location) = &plan.location {
                let destroys = plan.action == DeleteAction::Deleting;
                return Ok((
                    format!("deleting the copy of backup {id} of cluster {cluster} at {location}: {reason}"),
                    destroys.then(|| {
                        format!("Delete the copy of backup {id} of cluster {cluster} at {location} and its objects there?")
                    }),
                ));
            }
            if !plan.dependents.is_empty() || !plan.already_deleting.is_empty() {
                // The reason names them: `it and the N backup(s) that build on it (…) go …`.
                let n = plan.dependents.len() + 1;
                let objects = if plan.remote {
                    " and their objects"
                } else {
                    ""
                };
                return Ok((
                    format!("deleting backup {id} of cluster {cluster}: {reason}"),
                    Some(format!(
                        "Delete {n} backup(s) of cluster {cluster}{objects}: {id} and what builds on it?"
                    )),
                ));
            }
            let what = match (plan.action, plan.remote) {
                (DeleteAction::RecordDeleted, _) => {
                    format!("removes its catalog record: {reason}")
                }
                (DeleteAction::Deleting, true) => "deletes it with its objects".to_string(),
                (DeleteAction::Deleting, false) => "deleting".to_string(),
                (DeleteAction::Deferred, true) => {
                    format!("deletes it with its objects once nothing kept needs it ({reason})")
                }
                (DeleteAction::Deferred, false) => {
                    format!("removes its record once nothing kept needs it ({reason})")
                }
                (DeleteAction::AlreadyDeleting, _) => {
                    "nothing: it is being deleted already".to_string()
                }
            };
            let destroys = plan.remote
                && matches!(plan.action, DeleteAction::Deleting | DeleteAction::Deferred);
            let question = if destroys {
                Some(format!(
                    "Delete backup {id} of cluster {cluster} and its objects?"
                ))
            } else if plan.action == DeleteAction::RecordDeleted && on_a_terminal() {
                // Undoable (catalog import --include-removed), so asked on a terminal only: a
                // script goes on as before (issue 50).
                Some(format!(
                    "Remove the record of backup {id} of cluster {cluster} (its objects stay)?"
                ))
            } else {
                None
            };
            (
                format!("deleting backup {id} of cluster {cluster} {what}"),
                question,
            )
        }
        Command::Backup(BackupCommand::Orphans { cluster, .. }) => {
            let plan: OrphansFound = decode_reply(subject, plan)?;
            let n = plan.orphans.len();
            (
                format!(
                    "{n} orphaned object(s) under {} would be deleted",
                    plan.prefix
                ),
                (n > 0).then(|| format!("Delete {n} orphaned object(s) of cluster {cluster}?")),
            )
        }
        Command::Retention(RetentionCommand::Approve {
            cluster,
            plan: name,
            ..
        }) => {
            let groups: Vec<PreviewGroup> = decode_reply(subject, plan)?;
            let breaker = groups.into_iter().next().and_then(|group| group.breaker);
            // Without the hint to run `approve`: this is that run (issue 50).
            let lines = breaker
                .as_ref()
                .map(|breaker| {
                    let mut lines = crate::safety::held_lines(breaker);
                    lines.retain(|line| !line.contains(&breaker.approve_with));
                    lines
                })
                .unwrap_or_else(|| {
                    vec![format!(
                        "retention of cluster {cluster} plan {name} is not held now"
                    )]
                });
            (
                lines.join("\n"),
                breaker.map(|breaker| {
                    let n = breaker.deleting.len();
                    format!("Let this run of {cluster}/{name} delete {n} backup(s), once?")
                }),
            )
        }
        _ => (cell(plan.get("summary")), None),
    })
}
