//! What a verb that acts on one thing prints: kubectl's form, `kind/name verb-ed`, with what
//! matters after a colon (`backup/b1 held in cluster db1: holds legal:case-7`), the same form
//! `apply` prints (`schedule/nightly configured`). `-o name` prints the `kind/name` alone; JSON
//! and YAML stay the service's document. One home for every action verb (issue 50: the verbs
//! used to answer with tables of differently named columns and flags as `false` cells).

use serde_json::Value;
use sexton_shared::api::{
    BackupDeleted, ClusterForgotten, DeleteAction, PluginSpec, ScheduleDeleted, VerifyAsked,
};

use super::args::*;
use crate::{client::decode_reply, failure::Failure, output::Output};

/// What an action verb says: its lines for a table, and the `kind/name` of each thing it acted
/// on for `-o name`.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Said {
    pub lines: Vec<String>,
    pub names: Vec<String>,
    /// Said on stderr: a warning the service gave with its answer.
    pub warnings: Vec<String>,
}

/// Whether `command` is an action verb this module prints.
pub(super) fn is_action(command: &Command) -> bool {
    matches!(
        command,
        Command::Backup(
            BackupCommand::Hold { .. }
                | BackupCommand::Release { .. }
                | BackupCommand::Delete { .. }
                | BackupCommand::Create { .. }
                | BackupCommand::Verify { .. }
        ) | Command::Schedule(ScheduleCommand::Delete { .. } | ScheduleCommand::Backfill { .. })
            | Command::Cluster(ClusterCommand::Forget { .. })
            | Command::Plugin(PluginCommand::Register { .. } | PluginCommand::Unregister { .. })
            | Command::Retention(RetentionCommand::Approve { dry_run: false, .. })
    )
}

/// Prints the answer of an action verb in `output`. `summary_said`: the dry run before it said
/// the summary on stderr already, so the result leaves it out.
pub(super) fn print(
    command: &Command,
    output: Output,
    value: &Value,
    summary_said: bool,
) -> Result<(), Failure> {
    match output {
        Output::Json | Output::Yaml => {
            super::print::print_value(output, value, &[]);
            return Ok(());
        }
        _ => {}
    }
    let said = said(command, value, summary_said)?;
    for warning in &said.warnings {
        eprintln!("warning: {warning}");
    }
    let lines = if output == Output::Name {
        &said.names
    } else {
        &said.lines
    };
    for line in lines {
        crate::output::emit(&format!("{line}\n"));
    }
    Ok(())
}

fn text(value: &Value, field: &str) -> String {
    crate::output::text(value.get(field))
}

/// `, ` between the items of a list field, `none` for an empty one.
fn listed(value: &Value, field: &str) -> String {
    match value.get(field).and_then(Value::as_array) {
        Some(items) if !items.is_empty() => items
            .iter()
            .map(|item| crate::output::text(Some(item)))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "none".to_string(),
    }
}

fn dry(dry_run: bool) -> &'static str {
    if dry_run {
        " (dry run)"
    } else {
        ""
    }
}

/// What `command`'s answer `value` says, as lines and names.
pub(super) fn said(command: &Command, value: &Value, summary_said: bool) -> Result<Said, Failure> {
    match command {
        Command::Backup(command) => backup_said(command, value, summary_said),
        Command::Schedule(command) => schedule_said(command, value, summary_said),
        Command::Cluster(command) => cluster_said(command, value, summary_said),
        Command::Plugin(command) => plugin_said(command, value),
        Command::Retention(command) => retention_said(command, value),
        _ => unreachable!("is_action names the verbs said here"),
    }
}

/// One line about one thing, without warnings.
fn one(name: String, line: String) -> Said {
    Said {
        lines: vec![line],
        names: vec![name],
        warnings: Vec::new(),
    }
}

/// What a `backup` verb's answer says: a hold or release, a delete, a request for a backup or
/// for a restore test.
fn backup_said(
    command: &BackupCommand,
    value: &Value,
    summary_said: bool,
) -> Result<Said, Failure> {
    Ok(match command {
        BackupCommand::Hold { .. } | BackupCommand::Release { .. } => {
            let name = format!("backup/{}", text(value, "id"));
            let mut said = one(
                name.clone(),
                format!(
                    "{name} {} in cluster {}: holds {}",
                    text(value, "action"),
                    text(value, "cluster"),
                    listed(value, "holds")
                ),
            );
            if let Some(warning) = value.get("warning").filter(|w| !w.is_null()) {
                said.warnings.push(crate::output::text(Some(warning)));
            }
            said
        }
        BackupCommand::Delete { .. } => {
            let deleted: BackupDeleted = decode_reply("backup.delete", value.clone())?;
            deletion(&deleted, summary_said)
        }
        BackupCommand::Create { .. } => {
            let name = format!("backup/{}", text(value, "backup_id"));
            let verb = if value.get("duplicate").and_then(Value::as_bool) == Some(true) {
                "requested already"
            } else {
                "requested"
            };
            one(
                name.clone(),
                format!(
                    "{name} {verb} from schedule {} (run of {})",
                    text(value, "schedule"),
                    text(value, "tick")
                ),
            )
        }
        BackupCommand::Verify { .. } => {
            let asked: VerifyAsked = decode_reply("backup.verify", value.clone())?;
            let name = format!("backup/{}", asked.backup_id);
            let mut line = format!(
                "{name} restore test requested: request {}",
                asked.request_id
            );
            if let Some(deadline) = asked.deadline {
                line.push_str(&format!(
                    ", verdict due by {}",
                    crate::output::time(deadline)
                ));
            }
            if asked.duplicate == Some(true) {
                line.push_str(" (asked already)");
            }
            if let Some(recorded) = &asked.recorded {
                line.push_str(&format!("; {recorded}"));
            }
            one(name, line)
        }
        _ => unreachable!("is_action names the verbs said here"),
    })
}

/// What a `schedule` verb's answer says: a delete, or a backfill.
fn schedule_said(
    command: &ScheduleCommand,
    value: &Value,
    summary_said: bool,
) -> Result<Said, Failure> {
    Ok(match command {
        ScheduleCommand::Delete { .. } => {
            let deleted: ScheduleDeleted = decode_reply("schedule.delete", value.clone())?;
            let name = format!("schedule/{}", deleted.schedule);
            let verb = match (deleted.dry_run, deleted.deleted) {
                (true, _) => "would be deleted (dry run)",
                (false, true) => "deleted",
                (false, false) => "not deleted",
            };
            one(
                name.clone(),
                with_summary(format!("{name} {verb}"), &deleted.summary, summary_said),
            )
        }
        ScheduleCommand::Backfill { .. } => {
            let name = format!(
                "schedule/{}",
                crate::output::text(value.pointer("/schedule/name"))
            );
            let ticks = value.pointer("/backfill/ticks").and_then(Value::as_u64);
            let runs = match ticks {
                Some(1) => "1 run".to_string(),
                Some(n) => format!("{n} runs"),
                None => "runs".to_string(),
            };
            one(
                name.clone(),
                format!(
                    "{name} backfilled: {runs} from {} to {} (overlap {})",
                    crate::output::text(value.pointer("/backfill/first")),
                    crate::output::text(value.pointer("/backfill/last")),
                    crate::output::text(value.pointer("/backfill/overlap")),
                ),
            )
        }
        _ => unreachable!("is_action names the verbs said here"),
    })
}

/// What `cluster forget` answered.
fn cluster_said(
    command: &ClusterCommand,
    value: &Value,
    summary_said: bool,
) -> Result<Said, Failure> {
    Ok(match command {
        ClusterCommand::Forget { .. } => {
            let forgotten: ClusterForgotten = decode_reply("cluster.forget", value.clone())?;
            let name = format!("cluster/{}", forgotten.cluster);
            let verb = match (forgotten.dry_run, forgotten.forgotten) {
                (true, _) => "would be forgotten (dry run)",
                (false, true) => "forgotten",
                (false, false) => "not forgotten",
            };
            one(
                name.clone(),
                with_summary(format!("{name} {verb}"), &forgotten.summary, summary_said),
            )
        }
    })
}

/// What a `plugin` verb's answer says: a registration, or an unregistration.
fn plugin_said(command: &PluginCommand, value: &Value) -> Result<Said, Failure> {
    Ok(match command {
        PluginCommand::Register { .. } => {
            let spec: PluginSpec = decode_reply("plugin.register", value.clone())?;
            let name = format!("plugin/{}", spec.name);
            let selector = if spec.selector.is_empty() {
                "every backup".to_string()
            } else {
                spec.selector
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let timeout = match spec.timeout_seconds {
                Some(seconds) => format!("{seconds}s"),
                None => "the deleter's default".to_string(),
            };
            one(
                name.clone(),
                format!(
                    "{name} registered: subject {}, selector {selector}, timeout {timeout}",
                    spec.subject
                ),
            )
        }
        PluginCommand::Unregister { .. } => {
            let name = format!("plugin/{}", text(value, "unregistered"));
            one(name.clone(), format!("{name} unregistered"))
        }
        _ => unreachable!("is_action names the verbs said here"),
    })
}

/// What `retention approve` answered: the backups its next run deletes, one a line.
fn retention_said(command: &RetentionCommand, value: &Value) -> Result<Said, Failure> {
    Ok(match command {
        RetentionCommand::Approve { .. } => {
            let deleting: Vec<String> = value
                .get("deleting")
                .and_then(Value::as_array)
                .map(|ids| ids.iter().map(|id| crate::output::text(Some(id))).collect())
                .unwrap_or_default();
            let backups = match deleting.len() {
                1 => "1 backup".to_string(),
                n => format!("{n} backups"),
            };
            let mut lines = vec![format!(
                "retention/{}/{} approved: its next run deletes {backups}",
                text(value, "cluster"),
                text(value, "plan")
            )];
            // One backup a line (issue 50: ten IDs in one cell).
            lines.extend(deleting.iter().map(|id| format!("  backup/{id}")));
            Said {
                lines,
                names: deleting.iter().map(|id| format!("backup/{id}")).collect(),
                warnings: Vec::new(),
            }
        }
        _ => unreachable!("is_action names the verbs said here"),
    })
}

fn with_summary(line: String, summary: &str, summary_said: bool) -> String {
    if summary_said || summary.is_empty() {
        line
    } else {
        format!("{line}: {summary}")
    }
}

/// A backup's delete: one line for it, and one for each backup that goes with it.
fn deletion(deleted: &BackupDeleted, summary_said: bool) -> Said {
    let name = format!("backup/{}", deleted.id);
    let cluster = &deleted.cluster;
    let would = deleted.dry_run;
    let verb = match (deleted.action, would) {
        (DeleteAction::RecordDeleted, false) => "record removed",
        (DeleteAction::RecordDeleted, true) => "record would be removed",
        (DeleteAction::Deleting, false) => "deleting",
        (DeleteAction::Deleting, true) => "would be deleted",
        (DeleteAction::Deferred, false) => "deletion deferred",
        (DeleteAction::Deferred, true) => "deletion would be deferred",
        (DeleteAction::AlreadyDeleting, _) => "being deleted already",
    };
    let place = match &deleted.location {
        Some(location) => format!(" (the copy at {location})"),
        None => String::new(),
    };
    let objects = match (deleted.action, deleted.remote || deleted.location.is_some()) {
        (DeleteAction::Deleting | DeleteAction::Deferred, true) => ", with its objects",
        (DeleteAction::Deleting | DeleteAction::Deferred, false) => ", the record only",
        _ => "",
    };
    let mut line = format!("{name}{place} {verb} in cluster {cluster}{objects}");
    if let Some(reason) = deleted.reason.as_deref().filter(|_| !summary_said) {
        line.push_str(&format!(": {reason}"));
    }
    line.push_str(dry(would && deleted.action == DeleteAction::AlreadyDeleting));
    let mut said = Said {
        lines: vec![line],
        names: vec![name],
        warnings: Vec::new(),
    };
    for id in &deleted.dependents {
        let dependent = format!("backup/{id}");
        said.lines
            .push(format!("{dependent} {verb} with it in cluster {cluster}"));
        said.names.push(dependent);
    }
    for id in &deleted.already_deleting {
        let other = format!("backup/{id}");
        said.lines.push(format!(
            "{other} being deleted already in cluster {cluster}"
        ));
        said.names.push(other);
    }
    said
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;
    use serde_json::json;

    use super::*;

    fn command(args: &[&str]) -> Command {
        let mut argv = vec!["sexton"];
        argv.extend_from_slice(args);
        crate::cli::args::Cli::try_parse_from(argv).unwrap().command
    }

    #[test]
    fn a_hold_names_the_backup_its_cluster_and_every_hold() {
        let hold = command(&[
            "backup",
            "hold",
            "b1",
            "--cluster",
            "db1",
            "--reason",
            "x:1",
        ]);
        let said = said(
            &hold,
            &json!({"cluster": "db1", "id": "b1", "action": "held", "reason": "x:1",
                    "holds": ["legal:7", "x:1"], "warning": "b1 is deleting"}),
            false,
        )
        .unwrap();
        assert_eq!(
            said.lines,
            ["backup/b1 held in cluster db1: holds legal:7, x:1"]
        );
        assert_eq!(said.names, ["backup/b1"]);
        assert_eq!(said.warnings, ["b1 is deleting"]);
        let release = command(&[
            "backup",
            "release",
            "b1",
            "--cluster",
            "db1",
            "--reason",
            "x:1",
        ]);
        let said = said_of(
            &release,
            json!({"cluster": "db1", "id": "b1", "action": "released", "holds": []}),
        );
        assert_eq!(
            said.lines,
            ["backup/b1 released in cluster db1: holds none"]
        );
    }

    fn said_of(command: &Command, value: Value) -> Said {
        said(command, &value, false).unwrap()
    }

    #[test]
    fn a_delete_says_what_became_of_the_record_and_the_objects_without_flag_cells() {
        let delete = command(&["backup", "delete", "b1", "--cluster", "db1", "--remote"]);
        let answer = |action: &str, remote: bool, dry_run: bool| {
            json!({"cluster": "db1", "id": "b1", "action": action, "remote": remote,
                   "force": false, "reason": null, "dry_run": dry_run,
                   "dependents": ["b2"]})
        };
        let said = said_of(&delete, answer("deleting", true, false));
        assert_eq!(
            said.lines,
            [
                "backup/b1 deleting in cluster db1, with its objects",
                "backup/b2 deleting with it in cluster db1"
            ]
        );
        assert_eq!(said.names, ["backup/b1", "backup/b2"]);
        let said = said_of(&delete, answer("deleting", true, true));
        assert_eq!(
            said.lines[0],
            "backup/b1 would be deleted in cluster db1, with its objects"
        );
        let said = said_of(&delete, answer("record-deleted", false, false));
        assert!(
            !said.lines[0].contains("false") && said.lines[0].contains("record removed"),
            "{:?}",
            said.lines
        );
    }

    #[test]
    fn an_approval_lists_one_backup_a_line() {
        let approve = command(&["retention", "approve", "--cluster", "c", "--plan", "p"]);
        let said = said_of(
            &approve,
            json!({"cluster": "c", "plan": "p", "approved_at": "2026-12-01T00:00:00Z",
                   "deleting": ["a", "b"]}),
        );
        assert_eq!(
            said.lines,
            [
                "retention/c/p approved: its next run deletes 2 backups",
                "  backup/a",
                "  backup/b"
            ]
        );
        assert_eq!(said.names, ["backup/a", "backup/b"]);
    }

    #[test]
    fn a_malformed_answer_is_a_clear_error_not_a_guess() {
        let delete = command(&["backup", "delete", "b1", "--cluster", "db1"]);
        let err = said(&delete, &json!({"id": 3}), false).unwrap_err();
        assert!(err.message.contains("backup.delete"), "{}", err.message);
    }
}
