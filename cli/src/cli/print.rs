//! How the online commands print what the services answered: per verb (a schedule's and a
//! backup's description, the runs ahead, what a destructive command's dry run says), and the
//! generic tables of `crate::output` for the rest. One module for each kind of thing printed;
//! this one dispatches an answer to them and holds the cells they share.

use serde_json::Value;

use super::args::*;
use crate::{client::decode_reply, failure::Failure, output::Output};

mod backups;
mod destructive;
mod lists;
mod retention;
mod schedules;

pub(super) use destructive::describe_destructive;
pub(super) use lists::{listed_rows, print_changes};
pub(super) use schedules::{print_runs, print_schedule_description};

/// Prints the answer of an online command in `output`: the server's document as it came
/// (`-o json|yaml`, and the generic tables), the answers a verb prints as text read typed.
pub(super) fn print_answer(
    command: &Command,
    output: Output,
    value: &mut Value,
    columns: &[&str],
) -> Result<(), Failure> {
    let table = matches!(output, Output::Table | Output::Wide);
    match command {
        Command::Schedule(ScheduleCommand::List { .. }) => {
            if let Value::Array(rows) = &mut *value {
                rows.retain(|row| lists::shows_row(command, row));
                if table {
                    rows.iter_mut().for_each(schedules::schedule_cells);
                }
            }
            crate::output::schedules(output, value)
        }
        Command::Schedule(
            ScheduleCommand::Get { .. }
            | ScheduleCommand::Create(_)
            | ScheduleCommand::Update(_)
            | ScheduleCommand::Pause { .. }
            | ScheduleCommand::Unpause { .. },
        ) => {
            if table {
                schedules::schedule_cells(value);
            }
            crate::output::schedules(output, value)
        }
        Command::Schedule(ScheduleCommand::Describe { .. }) if table => {
            schedules::print_schedule_description(&decode_reply(
                "schedule.describe",
                value.clone(),
            )?)
        }
        Command::Backup(BackupCommand::Describe { .. }) if table => {
            let described = decode_reply("backup.describe", value.clone())?;
            backups::print_backup_description(&described)
        }
        Command::Backup(BackupCommand::List { location, .. }) => {
            if let Value::Array(rows) = &mut *value {
                rows.retain(|row| lists::shows_row(command, row));
                if table {
                    let now = crate::output::now();
                    for row in rows.iter_mut() {
                        backups::backup_cells(row, now, location.as_deref());
                    }
                }
            }
            let rows: Vec<Value> = value.as_array().cloned().unwrap_or_default();
            let rows: Vec<&Value> = rows.iter().collect();
            crate::output::backups(output, value, &rows)
        }
        Command::Backup(BackupCommand::Orphans { .. }) => crate::output::orphans(output, value),
        Command::Retention(RetentionCommand::Preview { .. }) => {
            // A run the circuit breaker holds says so above the table, with how to approve it.
            if table {
                retention::print_preview_notes(value)?;
            }
            crate::output::preview(output, value)
        }
        Command::Recovery(RecoveryCommand::Window { .. }) if table => {
            let places: Vec<sexton_shared::recovery::PlaceRecovery> =
                decode_reply("recovery.window", value.clone())?;
            crate::output::emit(&crate::recovery::text(&places, crate::output::now()));
        }
        Command::Plugin(PluginCommand::List { .. }) => {
            if let Value::Array(rows) = &mut *value {
                rows.retain(|row| lists::shows_row(command, row));
            }
            crate::output::plugins(output, value)
        }
        _ => print_value(output, value, columns),
    }
    Ok(())
}

/// Prints what a binlog append did with each file, a row each (appended, already indexed, …).
pub(super) fn print_shipped(output: Output, shipped: &[sexton_executor::binlog_append::Shipped]) {
    let value = serde_json::to_value(shipped).expect("shipped segments serialise");
    print_value(
        output,
        &value,
        &["key", "action", "first_event", "last_event", "size"],
    );
}

/// A JSON value as a table cell reads (`crate::output::text`).
pub(super) fn cell(value: Option<&Value>) -> String {
    crate::output::text(value)
}

/// Prints `value` as JSON or YAML, or as a table with `columns` (dotted paths into each row).
pub(super) fn print_value(output: Output, value: &Value, columns: &[&str]) {
    crate::output::generic(output, value, columns)
}

/// Prints a table of `rows` under `header` (`crate::output::table`).
pub(super) fn print_table(header: &[String], rows: &[Vec<String>]) {
    crate::output::table(header, rows)
}

/// A typed value as its JSON cell reads (`crate::output::text`): what the generic tables show.
pub(super) fn shown<T: serde::Serialize>(value: &T) -> String {
    cell(serde_json::to_value(value).ok().as_ref())
}
