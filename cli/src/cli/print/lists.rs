//! The list verbs' tables: which rows a list shows (its `-l` selector, a backup list's
//! `--schedule` and `--location`), and what `--watch` prints after the first listing.

use serde_json::Value;

use super::super::args::*;
use super::backups::{backup_cells, held_at};
use super::cell;
use super::schedules::schedule_cells;
use crate::output::Output;

/// Whether a list verb shows `row` of its answer: its `-l` selector holds (on a schedule's
/// labels, a backup's, a plugin's selector), and a backup list's `--schedule` names the
/// backup's schedule. Any other command shows every row.
pub(super) fn shows_row(command: &Command, row: &Value) -> bool {
    let selected = |list: &crate::listing::ListArgs, labels: Option<&Value>| {
        list.selector
            .as_ref()
            .is_none_or(|selector| selector.matches(labels))
    };
    match command {
        Command::Schedule(ScheduleCommand::List { list, .. }) => {
            selected(list, row.pointer("/schedule/labels"))
        }
        Command::Backup(BackupCommand::List {
            schedule,
            list,
            location,
            ..
        }) => {
            schedule
                .as_ref()
                .is_none_or(|s| row.get("schedule").and_then(Value::as_str) == Some(s))
                && selected(list, row.get("labels"))
                && location.as_deref().is_none_or(|place| held_at(row, place))
        }
        Command::Plugin(PluginCommand::List { list }) => selected(list, row.get("selector")),
        _ => true,
    }
}

/// The columns of a list verb's table, and what names one of its rows (a schedule's name, a
/// backup's cluster and id, a plugin's name); `None` for any other command.
fn list_view(
    command: &Command,
) -> Option<(&'static [crate::output::Column], &'static [&'static str])> {
    match command {
        Command::Schedule(ScheduleCommand::List { .. }) => {
            Some((crate::output::SCHEDULE_COLUMNS, &["schedule.name"]))
        }
        Command::Backup(BackupCommand::List { .. }) => {
            Some((crate::output::BACKUP_COLUMNS, &["cluster", "id"]))
        }
        Command::Plugin(PluginCommand::List { .. }) => {
            Some((crate::output::PLUGIN_COLUMNS, &["name"]))
        }
        _ => None,
    }
}

/// The rows a list verb's table shows of its answer, each with the key that names it; `None`
/// for a command that lists nothing.
pub(in crate::cli) fn listed_rows(
    command: &Command,
    answer: &Value,
) -> Option<Vec<(String, Value)>> {
    let (_, key) = list_view(command)?;
    let rows = answer.as_array().map(Vec::as_slice).unwrap_or_default();
    Some(
        rows.iter()
            .filter(|row| shows_row(command, row))
            .map(|row| {
                let key: Vec<String> = key
                    .iter()
                    .map(|path| cell(crate::output::lookup(row, path)))
                    .collect();
                (key.join("/"), row.clone())
            })
            .collect(),
    )
}

/// Whether two rows of a list verb's answer show the same: the values under every column
/// (the wide ones too) are equal. A row whose age or `in 3h` moved on is the same row; one
/// whose status, time or labels changed is not.
fn same_row(command: &Command, before: &Value, after: &Value) -> bool {
    let Some((columns, _)) = list_view(command) else {
        return before == after;
    };
    columns.iter().all(|column| {
        // The VERIFIED cell is drawn from the record's verification.
        let path = match column.path {
            "verified_cell" => "verification",
            "copies_cell" => "copies",
            "last_backup_cell" => "schedule.status",
            path => path,
        };
        crate::output::lookup(before, path) == crate::output::lookup(after, path)
    })
}

/// `--watch` after the first listing, in a table: only the rows that are new, changed, or no
/// longer listed since the listing `before` (those marked deleted), padded as the table of
/// `after` would be.
pub(in crate::cli) fn print_changes(
    command: &Command,
    output: Output,
    before: &[(String, Value)],
    after: &[(String, Value)],
) {
    let Some((columns, _)) = list_view(command) else {
        return;
    };
    let changes = crate::listing::changes(before, after, |a, b| same_row(command, a, b));
    if changes.is_empty() {
        return;
    }
    // A backup's VERIFIED cell is worked out for the table, as `print_answer` does.
    let shown = |row: &Value| {
        let mut row = row.clone();
        match command {
            Command::Backup(BackupCommand::List { location, .. }) => {
                backup_cells(&mut row, crate::output::now(), location.as_deref());
            }
            Command::Schedule(ScheduleCommand::List { .. }) => schedule_cells(&mut row),
            _ => {}
        }
        row
    };
    let all: Vec<Value> = after.iter().map(|(_, row)| shown(row)).collect();
    let changed: Vec<(Value, bool)> = changes
        .iter()
        .map(|(change, row)| (shown(row), *change == crate::listing::Change::Deleted))
        .collect();
    crate::output::watched_rows(
        output,
        columns,
        &all.iter().collect::<Vec<_>>(),
        &changed
            .iter()
            .map(|(row, deleted)| (row, *deleted))
            .collect::<Vec<_>>(),
    );
}
