//! Replays the 23 Velero schedule-controller cases of `data/velero_cases.json` through
//! `explain`, one reconcile per step, carrying the recorded state from step to step.
//!
//! How Velero's fields map onto Sexton's (each mapping is applied by rule, never per case id):
//!
//! * `phase: FailedValidation` is action `invalid` with an error; `Enabled` is any other action
//!   with no error. `reconciled: false` (Velero filters paused schedules) would be `paused`.
//! * `backup_created` is action `fire`; `backup_name` is Velero's `<schedule>-<now as
//!   YYYYMMDDhhmmss>`, checked against the step's `now`.
//! * `in_flight_backup_phases`: a backup in phase "", `New` or `InProgress` is in flight.
//! * Skip-immediately: Velero resolves `spec.skipImmediately` on every reconcile and stops a
//!   repeat by writing `false` back into the spec. Sexton resolves it only on the evaluation that
//!   follows creation or unpause (`activation_pending`, which defaults to true for a document
//!   that does not say) and resets the flag to *unset*, as issue 4 asks, so the next unpause
//!   consults the server default again. So Velero's `skip_immediately_after: false` means "no
//!   skip pending": Sexton's value must not be `Some(true)`, must be `None` where the skip was
//!   consumed and must be unchanged otherwise; and `activation_pending_after` must be false.
//! * Invalid cron: Velero consumes skip-immediately even on a schedule that fails validation;
//!   Sexton records nothing for it (the flag and the pending activation wait for a valid spec).
//!   No case has a skip pending on an invalid schedule, so only the bookkeeping differs.
//! * Overlap: when a due schedule has a backup in flight, Velero creates nothing and records
//!   nothing (it retries on its one-minute resync). Sexton records the run as skipped, with the
//!   reason (issue 4: "the tick is recorded as skipped"), because its timer queue has no resync
//!   and a due run left unrecorded would be re-evaluated in a loop. So there Sexton's
//!   `last_skipped_after` is `now` where Velero's is unchanged.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sexton_schedule::{explain, Action, Explanation, ScheduleDoc};

const DATA: &str = include_str!("data/velero_cases.json");

fn time(value: &Value) -> Result<Option<DateTime<Utc>>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|e| format!("bad time {text}: {e}")),
        other => Err(format!("not a time: {other}")),
    }
}

fn flag(value: &Value) -> Result<Option<bool>, String> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        other => Err(format!("not a bool: {other}")),
    }
}

fn in_flight(case: &Value) -> Result<bool, String> {
    let phases = case["in_flight_backup_phases"]
        .as_array()
        .ok_or("in_flight_backup_phases missing")?;
    Ok(phases
        .iter()
        .any(|phase| matches!(phase.as_str(), Some("" | "New" | "InProgress"))))
}

/// Compares one expected field when the case states it.
fn expect_eq<T: PartialEq + std::fmt::Debug>(
    expect: &Value,
    key: &str,
    want: impl FnOnce(&Value) -> Result<T, String>,
    got: T,
) -> Result<(), String> {
    if expect.get(key).is_none() {
        return Ok(());
    }
    let want = want(&expect[key])?;
    if want == got {
        Ok(())
    } else {
        Err(format!("{key}: expected {want:?}, got {got:?}"))
    }
}

fn check_step(
    doc: &ScheduleDoc,
    server_default: bool,
    now: DateTime<Utc>,
    expect: &Value,
) -> Result<Explanation, String> {
    let got = explain(doc, now, server_default);
    let context = |why: String| format!("{why} (explanation: {got:?})");

    // Phase and validation.
    match expect["phase"].as_str() {
        Some("FailedValidation") if got.action == Action::Invalid && got.error.is_some() => {}
        Some("Enabled") if got.action != Action::Invalid && got.error.is_none() => {}
        other => {
            return Err(context(format!(
                "phase {other:?} but action {}",
                got.action
            )))
        }
    }
    if expect["reconciled"].as_bool() == Some(false) && got.action != Action::Paused {
        return Err(context(
            "Velero did not reconcile, but the action is not paused".to_owned(),
        ));
    }

    expect_eq(
        expect,
        "due",
        |v| v.as_bool().ok_or("due".to_owned()),
        got.due,
    )
    .map_err(context)?;
    expect_eq(expect, "next_run_time", time, got.next_run_time).map_err(context)?;
    expect_eq(
        expect,
        "backup_created",
        |v| v.as_bool().ok_or("backup_created".to_owned()),
        got.action == Action::Fire,
    )
    .map_err(context)?;
    if let Some(name) = expect["backup_name"].as_str() {
        let velero_name = format!("name-{}", now.format("%Y%m%d%H%M%S"));
        if name != velero_name || got.action != Action::Fire {
            return Err(context(format!(
                "expected backup {name}, Velero would name it {velero_name}"
            )));
        }
    }
    expect_eq(expect, "last_backup_after", time, got.last_backup_after).map_err(context)?;

    // Overlap: Sexton records the skipped run (see the module comment).
    let overlap_skip = doc.in_flight && expect["due"].as_bool() == Some(true);
    let velero_last_skipped = |v: &Value| -> Result<Option<DateTime<Utc>>, String> {
        if overlap_skip {
            Ok(Some(now))
        } else {
            time(v)
        }
    };
    expect_eq(
        expect,
        "last_skipped_after",
        velero_last_skipped,
        got.last_skipped_after,
    )
    .map_err(context)?;

    // Skip-immediately: Velero's `false` is Sexton's "nothing pending", reset to unset when
    // consumed (see the module comment).
    if let Some(velero_after) = expect.get("skip_immediately_after") {
        let velero_after = velero_after
            .as_bool()
            .ok_or("skip_immediately_after".to_owned())?;
        if got.skip_immediately_after.unwrap_or(false) != velero_after {
            return Err(context(format!(
                "skip_immediately_after: Velero has {velero_after}"
            )));
        }
        // An invalid schedule records nothing in Sexton, so the activation stays pending.
        let evaluated = got.action != Action::Invalid;
        let consumed =
            evaluated && doc.activation_pending && doc.skip_immediately.unwrap_or(server_default);
        let sexton_after = if consumed { None } else { doc.skip_immediately };
        let pending_after = doc.activation_pending && !evaluated;
        if got.skip_immediately_after != sexton_after
            || got.activation_pending_after != pending_after
        {
            return Err(context(format!(
                "skip-immediately should be {sexton_after:?}, activation pending {pending_after}"
            )));
        }
    }
    Ok(got)
}

fn check_case(case: &Value) -> Result<usize, String> {
    let mut doc = ScheduleDoc {
        cron: case["cron"].as_str().ok_or("cron missing")?.to_owned(),
        created_at: time(&case["created_at"])?.ok_or("created_at missing")?,
        paused: case["paused"].as_bool().ok_or("paused missing")?,
        skip_immediately: flag(&case["skip_immediately"])?,
        last_backup: time(&case["last_backup"])?,
        last_skipped: time(&case["last_skipped"])?,
        in_flight: in_flight(case)?,
        starting_deadline_seconds: None,
        activation_pending: true,
        name: None,
        jitter: None,
        exclude: Vec::new(),
        on_blackout: Default::default(),
    };
    let server_default = case["server_default_skip_immediately"]
        .as_bool()
        .ok_or("server_default_skip_immediately missing")?;
    let steps = case["steps"].as_array().ok_or("steps missing")?;
    for (index, step) in steps.iter().enumerate() {
        let now = time(&step["now"])?.ok_or("step without now")?;
        let got = check_step(&doc, server_default, now, &step["expect"])
            .map_err(|why| format!("step {index}: {why}"))?;
        // The next reconcile sees what this one recorded.
        doc.last_backup = got.last_backup_after;
        doc.last_skipped = got.last_skipped_after;
        doc.skip_immediately = got.skip_immediately_after;
        doc.activation_pending = got.activation_pending_after;
    }
    Ok(steps.len())
}

#[test]
fn all_velero_cases_pass() {
    let data: Value =
        serde_json::from_str(DATA).unwrap_or_else(|e| panic!("velero_cases.json: {e}"));
    let cases = data["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no cases array"));
    assert_eq!(cases.len(), 23, "the data file should hold 23 cases");

    let mut failures = Vec::new();
    let mut steps = 0;
    for case in cases {
        let id = case["id"].as_str().unwrap_or("<no id>");
        match check_case(case) {
            Ok(n) => steps += n,
            Err(why) => failures.push(format!("{id}: {why}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} Velero cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(steps >= cases.len(), "every case has at least one step");
}
