//! How the `sexton` command prints, in kubectl's manner: `-o table` (the default), `-o wide`
//! (more columns, absolute times), `-o json`, `-o yaml` and `-o name`; `--no-headers`; human
//! ages (`5m`, `3h`, `2d`) in tables and times to the second. Everything written to stdout goes
//! through [`emit`], so a closed pipe (`| head`, `| true`) ends the command quietly with exit 0.
//!
//! The per-verb views (which columns a schedule or a backup has) are here too, so that
//! `cli.rs` only says which view a command answers with.

use std::{
    fmt::Write as _,
    io::Write as _,
    sync::{Mutex, OnceLock},
};

use chrono::{DateTime, Utc};
use serde_json::Value;

/// `-o`: how a command prints.
#[derive(Clone, Copy, Debug, clap::ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// Columns for people, ages instead of times.
    Table,
    /// The table with more columns and absolute times (to the second, UTC).
    Wide,
    Json,
    Yaml,
    /// `kind/name`, one per line (`schedule/nightly`, `backup/<id>`).
    Name,
    /// A self-contained page, written to the file named after it (`retention simulate` and
    /// `schedule describe --simulate` only).
    Html,
}

/// Settings every printer reads: given once by `cli::run`.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Tables without their header row (`--no-headers`).
    pub no_headers: bool,
}

static SETTINGS: Mutex<Settings> = Mutex::new(Settings { no_headers: false });

/// Sets what every printer of this process reads.
pub fn configure(settings: Settings) {
    *SETTINGS.lock().unwrap_or_else(|poison| poison.into_inner()) = settings;
}

fn settings() -> Settings {
    *SETTINGS.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The instant ages are measured from: now, or `SEXTON_CLI_NOW` (RFC 3339), which the golden
/// tests set so that an AGE column prints the same every run.
pub fn now() -> DateTime<Utc> {
    static NOW: OnceLock<Option<DateTime<Utc>>> = OnceLock::new();
    NOW.get_or_init(|| {
        std::env::var("SEXTON_CLI_NOW")
            .ok()
            .and_then(|text| DateTime::parse_from_rfc3339(&text).ok())
            .map(|t| t.with_timezone(&Utc))
    })
    .unwrap_or_else(Utc::now)
}

/// Writes `text` to stdout. A closed pipe is the reader saying it has seen enough: the
/// command stops here with exit 0, as `ls | head` does, instead of panicking.
pub fn emit(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    if let Err(err) = written {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {err}");
        std::process::exit(1);
    }
}

/// `println!` panics on a closed stdout ("failed printing to stdout: Broken pipe"); the few
/// printers outside this module still use it (the simulation's calendar, describe texts).
/// This hook turns that one panic into the same quiet exit 0 as [`emit`].
pub fn exit_quietly_on_closed_pipe() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if payload.contains("failed printing to stdout") && payload.contains("Broken pipe") {
            std::process::exit(0);
        }
        previous(info);
    }));
}

/// A document as JSON or YAML (the other formats fall back to JSON).
pub fn document(output: Output, value: &Value) {
    match output {
        Output::Yaml => emit(&to_yaml(value)),
        _ => emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(value).expect("json prints")
        )),
    }
}

// ----- YAML ------------------------------------------------------------------------------

/// `value` as block-style YAML (the subset JSON needs: maps, sequences, scalars). A string is
/// written plain only when no YAML reader could take it for anything else; otherwise it is
/// double-quoted with JSON's escapes, which YAML reads the same.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    if is_leaf(value) {
        out.push_str(&yaml_scalar(value));
        out.push('\n');
        return out;
    }
    for line in yaml_lines(value, 0) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn is_leaf(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => true,
    }
}

fn yaml_lines(value: &Value, indent: usize) -> Vec<String> {
    let pad = " ".repeat(indent);
    let mut lines = Vec::new();
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                let key = yaml_string(key);
                if is_leaf(item) {
                    lines.push(format!("{pad}{key}: {}", yaml_scalar(item)));
                } else {
                    lines.push(format!("{pad}{key}:"));
                    // Sequences under a key at the key's indent, as kubectl writes them.
                    let inner = if item.is_array() { indent } else { indent + 2 };
                    lines.extend(yaml_lines(item, inner));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_leaf(item) {
                    lines.push(format!("{pad}- {}", yaml_scalar(item)));
                } else {
                    let mut nested = yaml_lines(item, indent + 2);
                    if let Some(first) = nested.first_mut() {
                        *first = format!("{pad}- {}", &first[indent + 2..]);
                    }
                    lines.extend(nested);
                }
            }
        }
        leaf => lines.push(format!("{pad}{}", yaml_scalar(leaf))),
    }
    lines
}

fn yaml_scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => yaml_string(s),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

fn yaml_string(text: &str) -> String {
    const RESERVED: &[&str] = &[
        "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~",
    ];
    let plain = text.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !text.ends_with(' ')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " _./-()".contains(c))
        && !RESERVED.contains(&text.to_ascii_lowercase().as_str());
    if plain {
        text.to_string()
    } else {
        serde_json::to_string(text).expect("a string serialises")
    }
}

// ----- cells -----------------------------------------------------------------------------

/// What a column shows of its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// As is: a string, a number, `-` for nothing; a list joined with commas, a map as
    /// `key=value` pairs.
    Text,
    /// A past instant as an age: `45s`, `12m`, `3h`, `5d`.
    Age,
    /// A future instant as `in 3h` (a past one as its age).
    Until,
    /// An instant to the second, in UTC: `2026-11-23T19:38:58Z`.
    Time,
    /// Bytes: `512B`, `1.5KiB`, `12MiB`.
    Size,
}

/// A column of a table: its header, the dotted path of its value in a row, what it shows,
/// and whether only `-o wide` shows it.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub header: &'static str,
    pub path: &'static str,
    pub kind: Kind,
    pub wide: bool,
}

const fn col(header: &'static str, path: &'static str, kind: Kind) -> Column {
    Column {
        header,
        path,
        kind,
        wide: false,
    }
}

const fn wide(header: &'static str, path: &'static str, kind: Kind) -> Column {
    Column {
        header,
        path,
        kind,
        wide: true,
    }
}

pub fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    if path == "." {
        return Some(value);
    }
    path.split('.').try_fold(value, |v, part| v.get(part))
}

fn parse_instant(value: Option<&Value>) -> Option<DateTime<Utc>> {
    value
        .and_then(Value::as_str)
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// `45s`, `12m`, `3h`, `5d` (kubectl's short ages).
pub fn age(age: chrono::Duration) -> String {
    let seconds = age.num_seconds().max(0);
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7199 => format!("{}m", seconds / 60),
        7200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// An instant to the second in UTC.
pub fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Bytes in binary units with one decimal below 10 (`1.5KiB`, `12MiB`).
pub fn size(bytes: u64) -> String {
    const UNITS: &[&str] = &["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut amount = bytes as f64 / 1024.0;
    let mut unit = 0;
    while amount >= 1024.0 && unit + 1 < UNITS.len() {
        amount /= 1024.0;
        unit += 1;
    }
    if amount < 10.0 {
        format!("{amount:.1}{}", UNITS[unit])
    } else {
        format!("{amount:.0}{}", UNITS[unit])
    }
}

/// A value as a table cell; an RFC 3339 string prints to the second.
pub fn text(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) if s.len() > 20 => time(t.with_timezone(&Utc)),
            _ => s.clone(),
        },
        Some(Value::Array(items)) if items.is_empty() => "-".into(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| text(Some(item)))
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(map)) if map.is_empty() => "-".into(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(key, item)| format!("{key}={}", text(Some(item))))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

fn render(column: &Column, row: &Value, now: DateTime<Utc>) -> String {
    let value = lookup(row, column.path);
    match column.kind {
        Kind::Text => text(value),
        Kind::Age => match parse_instant(value) {
            Some(t) => age(now - t),
            None => text(value),
        },
        Kind::Until => match parse_instant(value) {
            Some(t) if t > now => format!("in {}", age(t - now)),
            Some(t) => format!("{} ago", age(now - t)),
            None => text(value),
        },
        Kind::Time => match parse_instant(value) {
            Some(t) => time(t),
            None => text(value),
        },
        Kind::Size => match value.and_then(Value::as_u64) {
            Some(bytes) => size(bytes),
            None => text(value),
        },
    }
}

// ----- tables ----------------------------------------------------------------------------

/// A table: columns padded to their widest cell, two spaces apart; no header row with
/// `--no-headers`.
pub fn table(header: &[String], rows: &[Vec<String>]) {
    emit(&table_text(header, rows));
}

/// A table as text (its header row unless `--no-headers`), each line ending in a newline.
pub fn table_text(header: &[String], rows: &[Vec<String>]) -> String {
    let widths = widths(header, rows.iter());
    let mut out = String::new();
    if !settings().no_headers {
        out.push_str(&line(header, &widths));
        out.push('\n');
    }
    for row in rows {
        out.push_str(&line(row, &widths));
        out.push('\n');
    }
    out
}

/// Each column's width: its widest cell, the header's included.
fn widths<'a>(header: &[String], rows: impl Iterator<Item = &'a Vec<String>>) -> Vec<usize> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    widths
}

/// One line of a table: the cells padded to `widths`, two spaces apart.
fn line(cells: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            out.push_str("  ");
        }
        let _ = write!(out, "{cell:<width$}", width = widths[i]);
    }
    out.trim_end().to_string()
}

/// The columns `output` shows (the wide ones only with `-o wide`), their headers, and each
/// row's cells.
fn cells(output: Output, rows: &[&Value], columns: &[Column]) -> (Vec<String>, Vec<Vec<String>>) {
    let now = now();
    let shown: Vec<&Column> = columns
        .iter()
        .filter(|c| !c.wide || output == Output::Wide)
        .collect();
    let header: Vec<String> = shown.iter().map(|c| c.header.to_string()).collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| shown.iter().map(|c| render(c, row, now)).collect())
        .collect();
    (header, cells)
}

/// The marker after a row `--watch` prints once more because it is no longer listed.
pub const DELETED: &str = "(deleted)";

/// A table's rows under `--watch` after its first listing (kubectl's `get --watch`): no
/// header, only the `changed` rows (each with whether it was deleted, which ends its line in
/// [`DELETED`]), padded as the table of the listing now (`all`) would pad them.
pub fn watched_rows(
    output: Output,
    columns: &[Column],
    all: &[&Value],
    changed: &[(&Value, bool)],
) {
    let rows: Vec<&Value> = changed.iter().map(|(row, _)| *row).collect();
    let (header, changed_cells) = cells(output, &rows, columns);
    let (_, all_cells) = cells(output, all, columns);
    let widths = widths(&header, all_cells.iter().chain(&changed_cells));
    let mut out = String::new();
    for (cells, (_, deleted)) in changed_cells.iter().zip(changed) {
        out.push_str(&line(cells, &widths));
        if *deleted {
            out.push_str("  ");
            out.push_str(DELETED);
        }
        out.push('\n');
    }
    emit(&out);
}

/// A list verb's answer in `output`: the rows as a table of `columns` (wide ones with
/// `-o wide`), `kind/name` lines, or the whole answer as JSON or YAML.
pub fn list(
    output: Output,
    answer: &Value,
    rows: &[&Value],
    columns: &[Column],
    name: impl Fn(&Value) -> String,
) {
    match output {
        Output::Json | Output::Yaml => document(output, answer),
        Output::Name => {
            let mut out = String::new();
            for row in rows {
                out.push_str(&name(row));
                out.push('\n');
            }
            emit(&out);
        }
        Output::Table | Output::Wide | Output::Html => {
            let (header, cells) = cells(output, rows, columns);
            table(&header, &cells);
        }
    }
}

/// Any other answer: a table of the dotted `paths` (headers from their last part), or the
/// answer as a document when there are no columns.
pub fn generic(output: Output, value: &Value, paths: &[&str]) {
    let rows: Vec<&Value> = match value {
        Value::Array(rows) => rows.iter().collect(),
        other => vec![other],
    };
    match output {
        Output::Json | Output::Yaml => document(output, value),
        Output::Name => list(output, value, &rows, &[], generic_name),
        _ if paths.is_empty() => document(Output::Json, value),
        _ => {
            let header: Vec<String> = paths
                .iter()
                .map(|c| header_of(c.rsplit('.').next().unwrap_or(c)))
                .collect();
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|row| {
                    paths
                        .iter()
                        .map(|c| whole_seconds(text(lookup(row, c))))
                        .collect()
                })
                .collect();
            table(&header, &cells);
        }
    }
}

/// A column's header from its field: upper case, words apart (`horizon_backup` →
/// `HORIZON BACKUP`), as every table's headers are written (docs/migrating.md#output).
fn header_of(field: &str) -> String {
    field.replace('_', " ").to_uppercase()
}

/// A cell that is an instant, to the second in UTC (`2026-03-01T03:00:00Z`): people read
/// tables, and the service's nanoseconds are for `-o json`. Any other text as it is.
fn whole_seconds(cell: String) -> String {
    match DateTime::parse_from_rfc3339(&cell) {
        Ok(t) => time(t.with_timezone(&Utc)),
        Err(_) => cell,
    }
}

/// `kind/name` of an answer that names one thing.
fn generic_name(row: &Value) -> String {
    for (path, kind) in [
        ("schedule.name", "schedule"),
        ("backup.id", "backup"),
        ("backup_id", "backup"),
        ("id", "backup"),
        ("name", "plugin"),
        ("cluster", "cluster"),
    ] {
        if let Some(name) = lookup(row, path).and_then(Value::as_str) {
            return format!("{kind}/{name}");
        }
    }
    text(Some(row))
}

// ----- views -----------------------------------------------------------------------------

/// Schedules, as `schedule list` and `get` answer them (`[{schedule, ...}]` or one).
pub const SCHEDULE_COLUMNS: &[Column] = &[
    col("NAME", "schedule.name", Kind::Text),
    col("CLUSTER", "schedule.cluster", Kind::Text),
    col("PLAN", "schedule.plan", Kind::Text),
    col("CRON", "schedule.cron", Kind::Text),
    col("PHASE", "schedule.status.phase", Kind::Text),
    col("LAST BACKUP", "last_backup_cell", Kind::Age),
    col("NEXT RUN", "schedule.status.next_run_time", Kind::Until),
    col("AGE", "schedule.created_at", Kind::Age),
    wide("LAST BACKUP AT", "last_backup_cell", Kind::Time),
    wide("NEXT RUN AT", "schedule.status.next_run_time", Kind::Time),
    wide("RETENTION", "retention.outcome", Kind::Text),
    wide("RETENTION SINCE", "retention.since", Kind::Age),
    wide("LABELS", "schedule.labels", Kind::Text),
];

pub fn schedules(output: Output, answer: &Value) {
    let rows: Vec<&Value> = match answer {
        Value::Array(rows) => rows.iter().collect(),
        one => vec![one],
    };
    list(output, answer, &rows, SCHEDULE_COLUMNS, |row| {
        format!("schedule/{}", text(lookup(row, "schedule.name")))
    });
}

/// Backups, as `backup list` answers them; the row gains `verified` (see
/// `cli::verified_cell`) before it comes here.
pub const BACKUP_COLUMNS: &[Column] = &[
    col("NAME", "id", Kind::Text),
    col("CLUSTER", "cluster", Kind::Text),
    col("PLAN", "plan", Kind::Text),
    col("SCHEDULE", "schedule", Kind::Text),
    col("KIND", "kind", Kind::Text),
    col("STATUS", "status", Kind::Text),
    col("SIZE", "size_bytes", Kind::Size),
    col("HOLDS", "holds", Kind::Text),
    col("VERIFIED", "verified_cell", Kind::Text),
    col("AGE", "completed_at", Kind::Age),
    wide("PARENT", "parent", Kind::Text),
    wide("STARTED", "started_at", Kind::Time),
    wide("COMPLETED", "completed_at", Kind::Time),
    wide("VERIFIED AT", "verification.at", Kind::Time),
    wide("COPIES", "copies_cell", Kind::Text),
    wide("LABELS", "labels", Kind::Text),
];

pub fn backups(output: Output, answer: &Value, rows: &[&Value]) {
    list(output, answer, rows, BACKUP_COLUMNS, |row| {
        format!("backup/{}", text(row.get("id")))
    });
}

/// Delete plugins (`plugin list`).
pub const PLUGIN_COLUMNS: &[Column] = &[
    col("NAME", "name", Kind::Text),
    col("SUBJECT", "subject", Kind::Text),
    col("SELECTOR", "selector", Kind::Text),
    col("TIMEOUT", "timeout_seconds", Kind::Text),
    col("ERROR", "error", Kind::Text),
];

pub fn plugins(output: Output, answer: &Value) {
    let rows: Vec<&Value> = answer
        .as_array()
        .map(|r| r.iter().collect())
        .unwrap_or_default();
    list(output, answer, &rows, PLUGIN_COLUMNS, |row| {
        format!("plugin/{}", text(row.get("name")))
    });
}

/// `backup orphans`: one row per unowned object, then what was left out and why.
pub const ORPHAN_COLUMNS: &[Column] = &[
    col("KEY", "key", Kind::Text),
    col("SIZE", "size", Kind::Size),
    col("AGE", "last_modified", Kind::Age),
    wide("MODIFIED", "last_modified", Kind::Time),
];

pub fn orphans(output: Output, answer: &Value) {
    let rows: Vec<&Value> = answer
        .get("orphans")
        .and_then(Value::as_array)
        .map(|r| r.iter().collect())
        .unwrap_or_default();
    list(output, answer, &rows, ORPHAN_COLUMNS, |row| {
        format!("object/{}", text(row.get("key")))
    });
    if matches!(output, Output::Table | Output::Wide) {
        // The grace as people write it (24h, not 86400s), and a dry run of --delete says that
        // it deleted nothing and what it would (issue 50).
        let grace = answer
            .get("grace_seconds")
            .and_then(Value::as_u64)
            .and_then(|s| sexton_schedule::Span::from_seconds(s).ok())
            .map_or_else(
                || format!("{}s", text(answer.get("grace_seconds"))),
                |span| span.to_string(),
            );
        let dry_run = answer.get("dry_run").and_then(Value::as_bool) == Some(true);
        let mut notes = format!(
            "orphans: {}{}; not counted: {} younger than the grace period ({grace}), {} of \
             backups in progress, {} in the binlog archive\n",
            rows.len(),
            if dry_run {
                " (a dry run: nothing was deleted; --delete without --dry-run deletes these)"
            } else {
                ""
            },
            text(answer.get("n_young")),
            text(answer.get("n_in_progress")),
            text(answer.get("n_binlog")),
        );
        if let Some(warning) = answer.get("warning").filter(|w| !w.is_null()) {
            let _ = writeln!(notes, "warning: {}", text(Some(warning)));
        }
        if let Some(deleted) = answer.get("deleted").filter(|d| !d.is_null()) {
            let _ = writeln!(notes, "deleted: {}", text(Some(deleted)));
        }
        // Notes go to stderr: stdout stays the rows, for `| wc -l` and `--no-headers`.
        eprint!("{notes}");
    }
}

/// `retention preview`: one row per backup of every group, with its decision and reasons.
pub const PREVIEW_COLUMNS: &[Column] = &[
    col("CLUSTER", "cluster", Kind::Text),
    col("PLAN", "plan", Kind::Text),
    col("NAME", "id", Kind::Text),
    col("DECISION", "decision", Kind::Text),
    col("REASONS", "reasons", Kind::Text),
];

pub fn preview(output: Output, answer: &Value) {
    let mut rows = Vec::new();
    for group in answer.as_array().into_iter().flatten() {
        let base = |id: &Value, decision: &str, reasons: Value| {
            serde_json::json!({
                "cluster": group.get("cluster"),
                "plan": group.get("plan"),
                "id": id,
                "decision": decision,
                "reasons": reasons,
            })
        };
        match group.get("decision").filter(|d| !d.is_null()) {
            None => rows.push(base(
                &Value::Null,
                "hold",
                serde_json::json!([group.get("hold_reason")]),
            )),
            Some(decision) => {
                for key in ["keep", "partial", "delete"] {
                    for entry in decision
                        .get(key)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        let reasons = entry
                            .get("reasons")
                            .cloned()
                            .unwrap_or(Value::Array(vec![]));
                        rows.push(base(entry.get("id").unwrap_or(&Value::Null), key, reasons));
                    }
                }
            }
        }
    }
    let refs: Vec<&Value> = rows.iter().collect();
    match output {
        Output::Table | Output::Wide => {
            let now = now();
            let header: Vec<String> = PREVIEW_COLUMNS
                .iter()
                .map(|c| c.header.to_string())
                .collect();
            // Reasons joined with "; " (a reason may hold commas).
            let cells: Vec<Vec<String>> = refs
                .iter()
                .map(|row| {
                    PREVIEW_COLUMNS
                        .iter()
                        .map(|c| match c.path {
                            "reasons" => row
                                .get("reasons")
                                .and_then(Value::as_array)
                                .map(|r| {
                                    r.iter()
                                        .map(|v| text(Some(v)))
                                        .collect::<Vec<_>>()
                                        .join("; ")
                                })
                                .unwrap_or_default(),
                            _ => render(c, row, now),
                        })
                        .collect()
                })
                .collect();
            table(&header, &cells);
        }
        _ => list(output, answer, &refs, PREVIEW_COLUMNS, |row| {
            format!("backup/{}", text(row.get("id")))
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(value: Value, expected: &str) {
        assert_eq!(to_yaml(&value), expected);
    }

    #[test]
    fn generic_headers_and_instants_follow_the_table_conventions() {
        assert_eq!(header_of("horizon_backup"), "HORIZON BACKUP");
        assert_eq!(header_of("cluster"), "CLUSTER");
        assert_eq!(
            whole_seconds("2026-03-01T04:00:00.123456789+01:00".into()),
            "2026-03-01T03:00:00Z"
        );
        assert_eq!(whole_seconds("ok".into()), "ok");
    }

    #[test]
    fn yaml_writes_json_values_block_style() {
        check(json!(null), "null\n");
        check(json!({}), "{}\n");
        check(
            json!({"name": "nightly", "cron": "0 3 * * *", "n": 3, "paused": false,
                   "labels": {"team": "db"}, "holds": [], "tags": ["a", "yes"],
                   "runs": [{"at": "2026-11-23T03:00:00Z", "effect": "fires"}, [1, 2]]}),
            "cron: \"0 3 * * *\"\nholds: []\nlabels:\n  team: db\n\"n\": 3\nname: nightly\n\
             paused: false\nruns:\n- at: \"2026-11-23T03:00:00Z\"\n  effect: fires\n- - 1\n  - 2\n\
             tags:\n- a\n- \"yes\"\n",
        );
        check(json!("line\nbreak"), "\"line\\nbreak\"\n");
    }

    #[test]
    fn cells_read_as_people_write_them() {
        assert_eq!(size(512), "512B");
        assert_eq!(size(1536), "1.5KiB");
        assert_eq!(size(12 << 20), "12MiB");
        assert_eq!(age(chrono::Duration::seconds(45)), "45s");
        assert_eq!(age(chrono::Duration::hours(50)), "2d");
        assert_eq!(
            text(Some(&json!("2026-11-23T19:38:58.001962551Z"))),
            "2026-11-23T19:38:58Z"
        );
        assert_eq!(text(Some(&json!({"a": "1", "b": "2"}))), "a=1,b=2");
        assert_eq!(text(Some(&json!(["x", "y"]))), "x,y");
    }
}
