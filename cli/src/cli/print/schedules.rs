//! A schedule as the commands print it: `schedule describe` as text, section by section, the
//! runs ahead of `schedule next`, and the LAST BACKUP cell of a schedule row.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sexton_shared::api::{ScheduleDescription, TimingView};

use super::{cell, print_table, shown};

/// A schedule row's cells worked out for the table: LAST BACKUP is the latest of when the
/// schedule last fired and when its latest backup completed, so a backup taken by hand counts
/// (issue 50: `-` after manual backups).
pub(super) fn schedule_cells(row: &mut Value) {
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

/// An instant as the schedule's zone reads it (UTC without `CRON_TZ`), with its offset.
fn in_zone(t: DateTime<Utc>, zone: chrono_tz::Tz) -> String {
    t.with_timezone(&zone).to_rfc3339()
}

/// The upcoming runs of `schedule next` and `describe`, in the schedule's zone: when each
/// fires, its cron time, and what a blackout does to it.
pub(in crate::cli) fn print_runs(runs: &[sexton_schedule::PlannedRun], zone: chrono_tz::Tz) {
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

/// How the cluster's retention runs are going, in a line: when the last one decided, or since
/// when they fail or are held, how many, and why.
fn retention_line(status: &sexton_model::records::RetentionStatus) -> String {
    use sexton_model::records::RetentionOutcome;
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

/// `schedule describe` as text: the schedule's settings, its timing in words (the zone said
/// even when it is UTC), what happens now and why, and its next runs.
pub(in crate::cli) fn print_schedule_description(described: &ScheduleDescription) {
    print_identity(described);
    print_settings(described);
    print_timing(described);
    print_state(described);
    print_upcoming(&described.timing);
}

/// One line of `schedule describe`: its label, padded, then the text.
fn line(label: &str, text: String) {
    println!("{:<14}{text}", format!("{label}:"));
}

/// What the schedule is: its name, cluster and plan, its policy with its copy rules, and its
/// labels and annotations.
fn print_identity(described: &ScheduleDescription) {
    let schedule = &described.schedule;
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
}

/// Every setting that decides what a run takes and what happens to its backups, and when the
/// schedule was created.
fn print_settings(described: &ScheduleDescription) {
    let schedule = &described.schedule;
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
}

/// When it runs: its timing in words, the deadline for a missed run, and after how many
/// failures it pauses.
fn print_timing(described: &ScheduleDescription) {
    let schedule = &described.schedule;
    let status = &schedule.status;
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
}

/// How it is going: its phase, its last backup, its cluster's retention runs, its last skip and
/// backfill, and what happens now and why.
fn print_state(described: &ScheduleDescription) {
    let status = &described.schedule.status;
    let explain = &described.explain;
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
}

/// The runs ahead, in the schedule's zone, as a table below the lines.
fn print_upcoming(timing: &TimingView) {
    if let TimingView::Parsed { zone, upcoming, .. } = timing {
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
struct PlannedRunView {
    nominal: DateTime<Utc>,
    at: DateTime<Utc>,
    effect: String,
    #[serde(default)]
    blackout: Option<BlackoutView>,
}

/// The blackout that skips or defers an upcoming run: when it ends.
#[derive(serde::Deserialize)]
struct BlackoutView {
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

/// One copy rule in a line: `to dr: keep_last=5; selects all; after 1h; in STANDARD_IA, to
/// GLACIER after 30 days; objectives rpo=1h`.
fn copy_rule_text(rule: &sexton_model::copies::CopyRule) -> String {
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
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {

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
        let rule: sexton_model::copies::CopyRule = serde_json::from_value(serde_json::json!({
            "to": "dr", "policy": {"keep_last": 5}, "select": "fulls", "delay": "1h",
            "storage_class": "STANDARD_IA",
            "transitions": [{"after_days": 30, "storage_class": "GLACIER"}],
        }))
        .unwrap();
        assert_eq!(
            super::copy_rule_text(&rule),
            "to dr: keep_last=5; selects fulls; after 1h; in STANDARD_IA, to GLACIER after 30 days"
        );
        let rule: sexton_model::copies::CopyRule =
            serde_json::from_value(serde_json::json!({"to": "vault", "policy": {"keep_daily": 7}}))
                .unwrap();
        assert_eq!(
            super::copy_rule_text(&rule),
            "to vault: keep_daily=7; selects all; in the location's class"
        );
    }
}
