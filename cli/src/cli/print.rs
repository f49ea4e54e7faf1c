//! How the online commands print what the services answered: per verb (a schedule's and a
//! backup's description, the runs ahead, what a destructive command's dry run says), and the
//! generic tables of `crate::output` for the rest.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sexton_shared::{
    api::{
        BackupDeleted, BackupDescription, ClusterForgotten, DeleteAction, OrphansFound,
        PreviewGroup, ScheduleDeleted, ScheduleDescription, TimingView,
    },
    records::{Verification, VerificationState},
};

use super::args::*;
use crate::{client::decode_reply, failure::Failure, output::Output};

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
                rows.retain(|row| shows_row(command, row));
                if table {
                    rows.iter_mut().for_each(schedule_cells);
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
                schedule_cells(value);
            }
            crate::output::schedules(output, value)
        }
        Command::Schedule(ScheduleCommand::Describe { .. }) if table => {
            print_schedule_description(&decode_reply("schedule.describe", value.clone())?)
        }
        Command::Backup(BackupCommand::Describe { .. }) if table => {
            let described = decode_reply("backup.describe", value.clone())?;
            print_backup_description(&described)
        }
        Command::Backup(BackupCommand::List { location, .. }) => {
            if let Value::Array(rows) = &mut *value {
                rows.retain(|row| shows_row(command, row));
                if table {
                    let now = crate::output::now();
                    for row in rows.iter_mut() {
                        backup_cells(row, now, location.as_deref());
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
                let groups: Vec<PreviewGroup> = decode_reply("retention.preview", value.clone())?;
                for group in groups {
                    if let Some(breaker) = &group.breaker {
                        crate::output::emit(&format!(
                            "{}/{}: {}\n",
                            group.cluster,
                            group.plan,
                            crate::safety::held_lines(breaker).join("\n  ")
                        ));
                    }
                    if !group.early_deletions.is_empty() {
                        crate::output::emit(&early_deletion_lines(&group));
                    }
                    if let Some(line) = locked_only_line(&group) {
                        crate::output::emit(&line);
                    }
                    crate::output::emit(&own_range_lines(&group));
                    if let Some(place) = &group.recovery {
                        crate::output::emit(&crate::recovery::after_plan_line(
                            group.cluster.as_str(),
                            place,
                        ));
                    }
                }
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
                rows.retain(|row| shows_row(command, row));
            }
            crate::output::plugins(output, value)
        }
        _ => print_value(output, value, columns),
    }
    Ok(())
}

/// Whether a list verb shows `row` of its answer: its `-l` selector holds (on a schedule's
/// labels, a backup's, a plugin's selector), and a backup list's `--schedule` names the
/// backup's schedule. Any other command shows every row.
fn shows_row(command: &Command, row: &Value) -> bool {
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
pub(super) fn listed_rows(command: &Command, answer: &Value) -> Option<Vec<(String, Value)>> {
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
pub(super) fn print_changes(
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

/// What a destructive command's dry run (its answer on `subject`) says, and the question to
/// ask before going ahead (`None`: it deletes nothing, so nothing to ask). The dry run is read
/// as the reply type its service sends.
/// Whether a person is there to answer: stdin and stderr are terminals.
fn on_a_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

pub(super) fn describe_destructive(
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

pub(super) fn print_shipped(output: Output, shipped: &[sexton_executor::binlog_append::Shipped]) {
    let value = serde_json::to_value(shipped).expect("shipped segments serialise");
    print_value(
        output,
        &value,
        &["key", "action", "first_event", "last_event", "size"],
    );
}

pub(super) fn cell(value: Option<&Value>) -> String {
    crate::output::text(value)
}

/// Prints `value` as JSON or YAML, or as a table with `columns` (dotted paths into each row).
pub(super) fn print_value(output: Output, value: &Value, columns: &[&str]) {
    crate::output::generic(output, value, columns)
}

pub(super) fn print_table(header: &[String], rows: &[Vec<String>]) {
    crate::output::table(header, rows)
}

/// A typed value as its JSON cell reads (`crate::output::text`): what the generic tables show.
pub(super) fn shown<T: serde::Serialize>(value: &T) -> String {
    cell(serde_json::to_value(value).ok().as_ref())
}

/// `backup describe` as text: the backup, the retention verdict, and one row per volume.
/// Where a described backup can be restored from: `primary, dr` when every place can, else
/// each place that cannot with why (`primary: no (…)`).
fn restorable_text(places: &[sexton_shared::api::RestorablePlace]) -> String {
    let can: Vec<&str> = places
        .iter()
        .filter(|p| p.restorable)
        .map(|p| p.location.as_str())
        .collect();
    let mut parts = vec![if can.is_empty() {
        "nowhere".to_string()
    } else {
        can.join(", ")
    }];
    for place in places.iter().filter(|p| !p.restorable) {
        parts.push(format!(
            "not at {} ({})",
            place.location,
            place.reason.as_deref().unwrap_or("-")
        ));
    }
    parts.join("; ")
}

pub(super) fn print_backup_description(described: &BackupDescription) {
    let backup = &described.backup;
    let size = backup
        .size_bytes
        .or_else(|| {
            (!backup.objects.is_empty()).then(|| backup.objects.iter().map(|o| o.size).sum())
        })
        .map_or_else(
            || "-".to_string(),
            |bytes| format!("{} ({bytes} bytes)", crate::output::size(bytes)),
        );
    // Everything a person asks of one backup (issue 26: parent, size, start time, labels and
    // objects were left out).
    for (label, value) in [
        ("id", shown(&backup.id)),
        ("cluster", shown(&backup.cluster)),
        ("plan", shown(&backup.plan)),
        ("schedule", shown(&backup.schedule)),
        ("status", backup.status_text().to_string()),
        ("kind", shown(&backup.kind)),
        ("parent", shown(&backup.parent)),
        ("started", shown(&backup.started_at)),
        ("completed", shown(&backup.completed_at)),
        ("size", size),
        ("labels", shown(&backup.labels)),
        ("tags", shown(&backup.tags)),
        ("holds", shown(&backup.holds)),
        ("legal hold", shown(&backup.legal_hold)),
        ("locked", locked_text(backup)),
        ("copies", copies_text(backup)),
        ("last error", shown(&backup.last_error)),
    ] {
        println!("{:<12}{value}", format!("{label}:"));
    }
    let verified = verified_text(backup.verification.as_ref(), Utc::now());
    println!("{:<12}{verified}", "verified:");
    let retention = &described.retention;
    println!(
        "{:<12}{}{}",
        "retention:",
        shown(&retention.verdict),
        in_parentheses(&retention.reasons)
    );
    for (location, verdict) in &described.copies_retention {
        println!(
            "{:<12}{}{}",
            format!("at {location}:"),
            shown(&verdict.verdict),
            in_parentheses(&verdict.reasons)
        );
    }
    if !described.restorable.is_empty() {
        println!(
            "{:<12}{}",
            "restorable:",
            restorable_text(&described.restorable)
        );
    }
    if !described.volumes.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = described
            .volumes
            .iter()
            .map(|v| {
                vec![
                    shown(&v.name),
                    shown(&v.kind),
                    shown(&v.parent),
                    shown(&v.state),
                    join_reasons(&v.reasons),
                ]
            })
            .collect();
        print_table(
            &["VOLUME", "KIND", "PARENT", "STATE", "WHY"].map(String::from),
            &rows,
        );
    }
    println!();
    let rows: Vec<Vec<String>> = if backup.objects.is_empty() {
        // A record from before intake described objects: its keys, sizes unknown.
        backup
            .artifacts
            .iter()
            .map(|key| vec![key.clone(), "-".into(), "-".into()])
            .collect()
    } else {
        backup
            .objects
            .iter()
            .map(|o| {
                vec![
                    o.key.clone(),
                    o.size.to_string(),
                    o.sha256.clone().unwrap_or_else(|| "-".into()),
                ]
            })
            .collect()
    };
    print_table(&["OBJECT", "BYTES", "SHA256"].map(String::from), &rows);
    let history = backup.verification.as_ref().map(|v| &v.history);
    if let Some(history) = history.filter(|h| !h.is_empty()) {
        println!();
        let rows: Vec<Vec<String>> = history
            .iter()
            .map(|e| {
                vec![
                    shown(&e.at),
                    shown(&e.outcome),
                    shown(&e.duration_ms),
                    shown(&e.request_id),
                    shown(&e.reason),
                ]
            })
            .collect();
        print_table(
            &["TESTED", "OUTCOME", "MS", "REQUEST", "WHY"].map(String::from),
            &rows,
        );
    }
}

/// A schedule row's cells worked out for the table: LAST BACKUP is the latest of when the
/// schedule last fired and when its latest backup completed, so a backup taken by hand counts
/// (issue 50: `-` after manual backups).
fn schedule_cells(row: &mut Value) {
    let at = |path: &str| {
        row.pointer(path)
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    let last = at("/schedule/status/last_backup")
        .into_iter()
        .chain(at("/schedule/status/last_completed"))
        .max();
    row["last_backup_cell"] = last.map_or(Value::Null, |t| {
        Value::String(t.with_timezone(&Utc).to_rfc3339())
    });
}

/// Whether `place` (`primary`, or a location) holds the backup of `row`: its objects at primary
/// are not deleted, or its copy there is in any state but `deleted` and `skipped`.
fn held_at(row: &Value, place: &str) -> bool {
    if place == "primary" {
        return row.get("primary_deleted_at").is_none_or(Value::is_null);
    }
    row.pointer(&format!("/copies/{place}/state"))
        .and_then(Value::as_str)
        .is_some_and(|state| state != "deleted" && state != "skipped")
}

/// A backup row's cells worked out for the table: VERIFIED; COPIES (`dr:copied`, each place's
/// state); and STATUS `copies-only` once its objects at primary are gone and only copies
/// elsewhere hold it (issue 28), or, listing a location, the copy's state there (issue 50).
fn backup_cells(row: &mut Value, now: chrono::DateTime<Utc>, location: Option<&str>) {
    row["verified_cell"] = Value::String(verified_cell(row, now));
    let copies: Vec<String> = row
        .get("copies")
        .and_then(Value::as_object)
        .map(|copies| {
            copies
                .iter()
                .map(|(name, copy)| format!("{name}:{}", copy["state"].as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    row["copies_cell"] = Value::String(if copies.is_empty() {
        "-".into()
    } else {
        copies.join(",")
    });
    match location.filter(|place| *place != "primary") {
        Some(place) => {
            if let Some(state) = row.pointer(&format!("/copies/{place}/state")).cloned() {
                row["status"] = state;
            }
        }
        None => {
            if row
                .get("primary_deleted_at")
                .is_some_and(|at| !at.is_null())
            {
                row["status"] = Value::String("copies-only".into());
            }
        }
    }
}

pub(super) fn verified_cell(record: &Value, now: chrono::DateTime<Utc>) -> String {
    let verification = record
        .get("verification")
        .filter(|v| !v.is_null())
        .and_then(|v| serde_json::from_value::<Verification>(v.clone()).ok());
    verified_text(verification.as_ref(), now)
}

/// The copies a location's plan deletes before their class's minimum duration, with what that
/// What a group keeps only for its Object Locks (issue 29), above the preview's table: the
/// cost of the locks beyond the policy.
pub(super) fn locked_only_line(group: &sexton_shared::api::PreviewGroup) -> Option<String> {
    let locked = group.locked_only.filter(|locked| locked.backups > 0)?;
    let at = group
        .location
        .as_ref()
        .map_or_else(String::new, |location| format!(" at {location}"));
    Some(format!(
        "{}/{}{at}: {} backup(s) the policy lets go are kept only by their Object Locks \
         (expired, locked until T), {} ({} bytes)\n",
        group.cluster,
        group.plan,
        locked.backups,
        crate::output::size(locked.bytes),
        locked.bytes
    ))
}

/// The kept backups of a group restorable to their own end only (issue 30), above the
/// preview's table: the binlog archive keeps their own ranges, not every segment after them.
pub(super) fn own_range_lines(group: &sexton_shared::api::PreviewGroup) -> String {
    let Some(plan) = &group.decision else {
        return String::new();
    };
    plan.binlog
        .range_only
        .iter()
        .map(|range| {
            format!(
                "{}/{}: {} is {} ({} binlog segment(s) kept for it)\n",
                group.cluster,
                group.plan,
                range.backup,
                range.reason,
                range.segments.len()
            )
        })
        .collect()
}

/// costs: the days charged for nothing, per copy and in all.
pub(super) fn early_deletion_lines(group: &sexton_shared::api::PreviewGroup) -> String {
    let at = group
        .location
        .as_ref()
        .map_or_else(String::new, |location| format!(" at {location}"));
    let mut text = format!(
        "{}/{}{at}: {} copy(ies) deleted before their storage class's minimum duration:\n",
        group.cluster,
        group.plan,
        group.early_deletions.len()
    );
    let mut byte_days: u128 = 0;
    for early in &group.early_deletions {
        byte_days += u128::from(early.bytes) * u128::from(early.days_charged());
        text.push_str(&format!(
            "  {}: {} for {} of its {} days; {} more days of {} bytes charged\n",
            early.id,
            early.storage_class,
            early.days_in_class,
            early.minimum_days,
            early.days_charged(),
            early.bytes
        ));
    }
    text.push_str(&format!(
        "  in all {:.3} GiB-months charged for nothing\n",
        byte_days as f64 / (1u64 << 30) as f64 / 30.0
    ));
    text
}

/// How long ago a restore test proved the backup, `failed`, `testing` while one runs, `-` when
/// never tested.
/// Where a backup's copies stand (issue 28): each location a copy rule sends it to, copied
/// (when) or awaiting its copy (the backup is held at its source meanwhile); `-` for none.
pub(super) fn copies_text(backup: &sexton_shared::records::BackupRecord) -> String {
    let mut parts: Vec<String> = backup
        .copies
        .iter()
        .map(|(location, copy)| {
            let at = copy
                .copied_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            match copy.state {
                sexton_shared::copies::CopyState::Copied => {
                    let mut text = format!("{location}: copied {at}");
                    if let Some(class) = &copy.storage_class {
                        text.push_str(&format!(" in {class}"));
                    }
                    if let Some(test) = &copy.verification {
                        let when = test.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                        text.push_str(&match test.outcome.as_str() {
                            "verified" => format!(", restore-tested there {when}"),
                            other => format!(", restore test there {other} {when}"),
                        });
                    }
                    text
                }
                sexton_shared::copies::CopyState::Deleted => format!(
                    "{location}: deleted {} ({})",
                    copy.deleted_at.map_or_else(
                        || "-".to_string(),
                        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    ),
                    copy.delete_reasons.join("; ")
                ),
                sexton_shared::copies::CopyState::Skipped => format!(
                    "{location}: skipped {at} (its policy there would not keep it: {})",
                    copy.delete_reasons.join("; ")
                ),
                sexton_shared::copies::CopyState::Missing => format!(
                    "{location}: missing (copied {at}; {})",
                    copy.problems.join("; ")
                ),
                state => format!(
                    "{location}: {} (copied {at}; {})",
                    state.as_str(),
                    copy.delete_reasons.join("; ")
                ),
            }
        })
        .collect();
    if let Some(at) = backup.primary_deleted_at {
        parts.insert(
            0,
            format!(
                "primary: deleted {}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        );
    }
    parts.extend(backup.awaiting_copy().map(|location| {
        if backup.held_at_primary() {
            format!("{location}: awaiting copy (held at primary until copied)")
        } else {
            format!("{location}: awaiting copy, which cannot be made: primary's objects are gone")
        }
    }));
    if parts.is_empty() {
        "-".to_string()
    } else {
        parts.join(", ")
    }
}

pub(super) fn verified_text(
    verification: Option<&Verification>,
    now: chrono::DateTime<Utc>,
) -> String {
    let Some(verification) = verification else {
        return "-".into();
    };
    if verification.pending.is_some() {
        return "testing".into();
    }
    match verification.state {
        VerificationState::Verified => verification
            .at
            .map(|at| format!("{} ago", crate::output::age(now - at)))
            .unwrap_or_else(|| "verified".into()),
        VerificationState::Failed => "failed".into(),
        VerificationState::Unverified => "-".into(),
    }
}

/// An instant as the schedule's zone reads it (UTC without `CRON_TZ`), with its offset.
pub(super) fn in_zone(t: DateTime<Utc>, zone: chrono_tz::Tz) -> String {
    t.with_timezone(&zone).to_rfc3339()
}

/// The upcoming runs of `schedule next` and `describe`, in the schedule's zone: when each
/// fires, its cron time, and what a blackout does to it.
pub(super) fn print_runs(runs: &[sexton_schedule::PlannedRun], zone: chrono_tz::Tz) {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let effect = match run.effect {
                sexton_schedule::RunEffect::Fires => "fires".to_string(),
                sexton_schedule::RunEffect::Skipped { blackout } => {
                    format!("skipped: blackout until {}", in_zone(blackout.end, zone))
                }
                sexton_schedule::RunEffect::Deferred { blackout } => {
                    format!("deferred: fires at {}", in_zone(blackout.end, zone))
                }
            };
            vec![in_zone(run.at, zone), in_zone(run.nominal, zone), effect]
        })
        .collect();
    print_table(&["RUN AT", "CRON TIME", "EFFECT"].map(String::from), &rows);
}

/// `schedule describe` as text: the schedule's settings, its timing in words (the zone said
/// even when it is UTC), what happens now and why, and its next runs.
/// How the cluster's retention runs are going, in a line: when the last one decided, or since
/// when they fail or are held, how many, and why.
fn retention_line(status: &sexton_shared::records::RetentionStatus) -> String {
    use sexton_shared::records::RetentionOutcome;
    let ago = |at: chrono::DateTime<chrono::Utc>| {
        format!(
            "{} ({} ago)",
            crate::output::time(at),
            crate::output::age(crate::output::now() - at)
        )
    };
    let last_decided = match status.last_decided {
        Some(at) => format!("last decided {}", ago(at)),
        None => "never decided".into(),
    };
    let runs = |n: u64| {
        if n == 1 {
            "1 run".to_string()
        } else {
            format!("{n} runs")
        }
    };
    match status.outcome {
        RetentionOutcome::Decided => format!("decided {}", ago(status.at)),
        RetentionOutcome::Failed => format!(
            "FAILING since {} ({}; {last_decided}): {}",
            ago(status.since),
            runs(status.runs),
            status.reason.as_deref().unwrap_or("no reason given")
        ),
        RetentionOutcome::Held => format!(
            "HELD since {} ({}; {last_decided}): {}",
            ago(status.since),
            runs(status.runs),
            status.reason.as_deref().unwrap_or("no reason given")
        ),
    }
}

pub(super) fn print_schedule_description(described: &ScheduleDescription) {
    let schedule = &described.schedule;
    let status = &schedule.status;
    let explain = &described.explain;
    let line = |label: &str, text: String| println!("{:<14}{text}", format!("{label}:"));
    line("name", shown(&schedule.name));
    line("cluster", shown(&schedule.cluster));
    line("plan", shown(&schedule.plan));
    // The policy as its keys, one line: `keep_last=7, recovery_window=30d`.
    line("policy", shown(&schedule.policy).replace(',', ", "));
    for reading in schedule.policy.month_readings() {
        line("policy note", reading);
    }
    // Each copy rule whole (issue 50: describe left them out): where, its policy there, what it
    // selects, after what delay, in which class and when it moves.
    for rule in &schedule.copies {
        line("copy", copy_rule_text(rule));
    }
    if !schedule.labels.is_empty() {
        line("labels", shown(&schedule.labels));
    }
    if !schedule.annotations.is_empty() {
        line("annotations", shown(&schedule.annotations));
    }
    // Every setting that decides what a run takes and what happens to its backups, said even
    // at its default (issue 26: describe left these out).
    line(
        "full every",
        match schedule.full_every {
            Some(n) => format!("{}: every {} backup is a full", shown(&n), ordinal(n.get())),
            None => "unset: every backup is a full unless the executor chains it".into(),
        },
    );
    if !schedule.volumes.is_empty() {
        line("volumes", schedule.volumes.join(", "));
    }
    line("overlap", shown(&schedule.overlap_policy));
    line("backup owner", shown(&schedule.backup_owner));
    line(
        "remote clean",
        if schedule.remote_cleanup {
            "on: deleting a record deletes its objects".into()
        } else {
            "off: deleting a record leaves its objects (backup orphans finds them)".to_string()
        },
    );
    if let Some(verify) = &schedule.verify {
        line("restore test", shown(verify));
    }
    if let Some(breaker) = &schedule.breaker {
        line("breaker", shown(breaker));
    }
    let created = schedule.created_at;
    line(
        "created",
        format!(
            "{} ({} ago)",
            crate::output::time(created),
            crate::output::age(crate::output::now() - created)
        ),
    );
    match &described.timing {
        TimingView::Parsed { settings, .. } => {
            for setting in settings {
                let text = shown(setting);
                match text.split_once(": ") {
                    Some((label, rest)) => line(label, rest.to_string()),
                    None => line("timing", text),
                }
            }
        }
        TimingView::Error { error } => line("timing", shown(error)),
    }
    if let Some(seconds) = schedule.starting_deadline_seconds {
        let deadline = sexton_schedule::Span::from_seconds(seconds)
            .map_or_else(|_| format!("{seconds}s"), |s| s.to_string());
        line(
            "deadline",
            format!("{deadline}: a run missed by more than this is skipped"),
        );
    }
    if let Some(n) = schedule.pause_after_failures {
        line(
            "pause after",
            format!(
                "{n} consecutive failed backups ({} so far)",
                status.consecutive_failures
            ),
        );
    }
    line("phase", shown(&status.phase));
    if let Some(reason) = &status.paused_reason {
        line("paused", shown(reason));
    }
    // The latest of its fired runs and its completions: a backup taken by hand counts.
    line(
        "last backup",
        shown(
            &status
                .last_backup
                .into_iter()
                .chain(status.last_completed)
                .max(),
        ),
    );
    if let Some(retention) = &described.retention {
        line("retention", retention_line(retention));
    }
    if let Some(skip) = &described.last_skip {
        line(
            "last skip",
            format!("{}: {}", shown(&skip.reason), shown(&skip.explanation)),
        );
    }
    if let Some(backfill) = &status.backfill {
        line(
            "backfill",
            format!(
                "{} to {}: {} of {} ticks done{}",
                shown(&backfill.from),
                shown(&backfill.to),
                backfill.done,
                backfill.ticks.len(),
                match backfill.finished_at {
                    Some(at) => format!(", finished {}", shown(&at)),
                    None => String::new(),
                }
            ),
        );
    }
    // What happens now: `sexton_schedule::Explanation` as the scheduler wrote it.
    line(
        "now",
        format!(
            "{}: {}",
            cell(explain.get("action")),
            cell(explain.get("reason"))
        ),
    );
    if let Some(error) = explain.get("error").filter(|e| !e.is_null()) {
        line("error", cell(Some(error)));
    }
    if let TimingView::Parsed { zone, upcoming, .. } = &described.timing {
        if let Ok(runs) = serde_json::from_value::<Vec<PlannedRunView>>(upcoming.clone()) {
            let zone = zone.parse().unwrap_or(chrono_tz::UTC);
            println!();
            let rows: Vec<Vec<String>> = runs.iter().map(|run| run.row(zone)).collect();
            print_table(&["RUN AT", "CRON TIME", "EFFECT"].map(String::from), &rows);
        }
    }
}

/// An upcoming run as `describe` sends it (`PlannedRun`'s JSON).
#[derive(serde::Deserialize)]
pub(super) struct PlannedRunView {
    nominal: DateTime<Utc>,
    at: DateTime<Utc>,
    effect: String,
    #[serde(default)]
    blackout: Option<BlackoutView>,
}

#[derive(serde::Deserialize)]
pub(super) struct BlackoutView {
    end: DateTime<Utc>,
}

impl PlannedRunView {
    fn row(&self, zone: chrono_tz::Tz) -> Vec<String> {
        let end = self
            .blackout
            .as_ref()
            .map_or_else(|| "?".to_string(), |b| in_zone(b.end, zone));
        let effect = match self.effect.as_str() {
            "skipped" => format!("skipped: blackout until {end}"),
            "deferred" => format!("deferred: fires at {end}"),
            other => other.to_string(),
        };
        vec![in_zone(self.at, zone), in_zone(self.nominal, zone), effect]
    }
}

/// Reasons as one cell: each as the tables show text, `; ` between.
fn join_reasons(reasons: &[String]) -> String {
    reasons.iter().map(shown).collect::<Vec<_>>().join("; ")
}

/// One copy rule in a line: `to dr: keep_last=5; selects all; after 1h; in STANDARD_IA, to
/// GLACIER after 30 days; objectives rpo=1h`.
pub(super) fn copy_rule_text(rule: &sexton_shared::copies::CopyRule) -> String {
    let mut parts = vec![
        format!("to {}: {}", rule.to, shown(&rule.policy).replace(',', ", ")),
        format!("selects {}", shown(&rule.select)),
    ];
    if let Some(delay) = &rule.delay {
        parts.push(format!("after {delay}"));
    }
    let mut class = rule
        .storage_class
        .as_ref()
        .map(|class| format!("in {class}"))
        .unwrap_or_else(|| "in the location's class".into());
    for transition in &rule.transitions {
        class.push_str(&format!(
            ", to {} after {} days",
            transition.storage_class, transition.after_days
        ));
    }
    parts.push(class);
    if let Some(objectives) = &rule.objectives {
        parts.push(format!("objectives {}", shown(objectives)));
    }
    parts.join("; ")
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`, ...
pub(super) fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// ` (a; b)`, or nothing for no reasons (issue 50: an empty `()` said nothing).
fn in_parentheses(reasons: &[String]) -> String {
    if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", join_reasons(reasons))
    }
}

/// Until when each place's objects of the backup are under S3 Object Lock, one place after
/// another (issue 50: `locked: -` while the copy at dr was locked).
pub(super) fn locked_text(backup: &sexton_shared::records::BackupRecord) -> String {
    let at =
        |until: chrono::DateTime<Utc>| until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut places: Vec<String> = Vec::new();
    if let Some(until) = backup.locked_until.filter(|_| backup.held_at_primary()) {
        places.push(format!("primary until {}", at(until)));
    }
    for (location, copy) in &backup.copies {
        if let Some(until) = copy.locked_until.filter(|_| copy.is_held()) {
            places.push(format!("{location} until {}", at(until)));
        }
    }
    if places.is_empty() {
        "-".into()
    } else {
        format!("{} (S3 Object Lock)", places.join(", "))
    }
}

#[cfg(test)]
mod copies_tests {
    use super::copies_text;

    #[test]
    fn early_deletions_are_priced_per_copy_and_in_all() {
        let group: sexton_shared::api::PreviewGroup = serde_json::from_value(serde_json::json!({
            "cluster": "c1", "plan": "p", "location": "dr",
            "early_deletions": [{"id": "b1", "storage_class": "GLACIER_IR", "days_in_class": 10,
                                 "minimum_days": 90, "bytes": 1073741824u64}]
        }))
        .unwrap();
        assert_eq!(
            super::early_deletion_lines(&group),
            "c1/p at dr: 1 copy(ies) deleted before their storage class's minimum duration:\n  \
             b1: GLACIER_IR for 10 of its 90 days; 80 more days of 1073741824 bytes charged\n  \
             in all 2.667 GiB-months charged for nothing\n"
        );
    }

    #[test]
    fn backups_restorable_to_their_own_end_are_said_above_the_table() {
        let group: sexton_shared::api::PreviewGroup = serde_json::from_value(serde_json::json!({
            "cluster": "c1", "plan": "p",
            "decision": {"keep": [], "delete": [], "merges": [],
                         "binlog": {"horizon": null, "keep": ["s1"], "delete": [],
                                    "range_only": [{"backup": "b1",
                                                    "reason": "standalone: restorable to its own end only",
                                                    "segments": ["s1"]}]}}
        }))
        .unwrap();
        assert_eq!(
            super::own_range_lines(&group),
            "c1/p: b1 is standalone: restorable to its own end only (1 binlog segment(s) kept \
             for it)\n"
        );
        let none: sexton_shared::api::PreviewGroup =
            serde_json::from_value(serde_json::json!({"cluster": "c1", "plan": "p"})).unwrap();
        assert_eq!(super::own_range_lines(&none), "");
    }

    #[test]
    fn what_only_locks_keep_is_counted_and_priced() {
        let group: sexton_shared::api::PreviewGroup = serde_json::from_value(serde_json::json!({
            "cluster": "c1", "plan": "p",
            "locked_only": {"backups": 2, "bytes": 3221225472u64}
        }))
        .unwrap();
        assert_eq!(
            super::locked_only_line(&group).unwrap(),
            "c1/p: 2 backup(s) the policy lets go are kept only by their Object Locks (expired, \
             locked until T), 3.0GiB (3221225472 bytes)\n"
        );
        let none: sexton_shared::api::PreviewGroup =
            serde_json::from_value(serde_json::json!({"cluster": "c1", "plan": "p"})).unwrap();
        assert_eq!(super::locked_only_line(&none), None);
    }

    #[test]
    fn copies_say_where_a_backup_lives_and_what_it_awaits() {
        let mut record: sexton_shared::records::BackupRecord =
            serde_json::from_value(serde_json::json!({
                "id": "b1", "uid": "u1", "cluster": "c1", "plan": "p", "backup_name": "s",
                "kind": "full", "status": "completed", "copy_to": ["dr", "vault"],
                "copies": {"dr": {"state": "copied", "copied_at": "2026-03-01T00:00:00Z"}},
            }))
            .unwrap();
        assert_eq!(
            copies_text(&record),
            "dr: copied 2026-03-01T00:00:00Z, vault: awaiting copy (held at primary until copied)"
        );
        let dr = sexton_shared::names::LocationName::new("dr").unwrap();
        let copy = record.copies.get_mut(&dr).unwrap();
        copy.storage_class = Some("STANDARD_IA".into());
        copy.verification = Some(
            serde_json::from_value(serde_json::json!({
                "request_id": "r", "outcome": "failed", "at": "2026-03-02T00:00:00Z"
            }))
            .unwrap(),
        );
        assert_eq!(
            copies_text(&record),
            "dr: copied 2026-03-01T00:00:00Z in STANDARD_IA, restore test there failed \
             2026-03-02T00:00:00Z, vault: awaiting copy (held at primary until copied)"
        );
        record.copy_to.clear();
        record.copies.clear();
        assert_eq!(copies_text(&record), "-");
    }

    #[test]
    fn ordinals_read_as_english() {
        let said: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111]
            .into_iter()
            .map(super::ordinal)
            .collect();
        assert_eq!(
            said,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd",
                "101st", "111th"
            ]
        );
    }

    #[test]
    fn a_copy_rule_is_said_whole() {
        let rule: sexton_shared::copies::CopyRule = serde_json::from_value(serde_json::json!({
            "to": "dr", "policy": {"keep_last": 5}, "select": "fulls", "delay": "1h",
            "storage_class": "STANDARD_IA",
            "transitions": [{"after_days": 30, "storage_class": "GLACIER"}],
        }))
        .unwrap();
        assert_eq!(
            super::copy_rule_text(&rule),
            "to dr: keep_last=5; selects fulls; after 1h; in STANDARD_IA, to GLACIER after 30 days"
        );
        let rule: sexton_shared::copies::CopyRule =
            serde_json::from_value(serde_json::json!({"to": "vault", "policy": {"keep_daily": 7}}))
                .unwrap();
        assert_eq!(
            super::copy_rule_text(&rule),
            "to vault: keep_daily=7; selects all; in the location's class"
        );
    }

    #[test]
    fn locks_are_said_place_by_place() {
        let mut record: sexton_shared::records::BackupRecord =
            serde_json::from_value(serde_json::json!({
                "id": "b1", "uid": "u1", "cluster": "c1", "plan": "p", "backup_name": "s",
                "kind": "full", "status": "completed",
                "copies": {"dr": {"state": "copied", "copied_at": "2026-03-01T00:00:00Z",
                                  "locked_until": "2026-04-01T00:00:00Z"}},
            }))
            .unwrap();
        assert_eq!(
            super::locked_text(&record),
            "dr until 2026-04-01T00:00:00Z (S3 Object Lock)"
        );
        record.locked_until = Some("2026-03-08T00:00:00Z".parse().unwrap());
        assert_eq!(
            super::locked_text(&record),
            "primary until 2026-03-08T00:00:00Z, dr until 2026-04-01T00:00:00Z (S3 Object Lock)"
        );
        // Gone at primary: its lock there says nothing any more.
        record.primary_deleted_at = Some("2026-03-09T00:00:00Z".parse().unwrap());
        record.copy_to = vec!["vault".parse().unwrap()];
        assert_eq!(
            super::locked_text(&record),
            "dr until 2026-04-01T00:00:00Z (S3 Object Lock)"
        );
        assert!(copies_text(&record).contains("vault: awaiting copy, which cannot be made"));
        assert_eq!(super::in_parentheses(&[]), "");
        assert_eq!(super::in_parentheses(&["a".into(), "b".into()]), " (a; b)");
    }
}
