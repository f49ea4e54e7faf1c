//! The firing decision beyond Velero's own cases: Sexton's skip-immediately bookkeeping, overlap,
//! starting deadlines, catching up after downtime, tick identity, and the explain document.

use chrono::{DateTime, Utc};
use serde_json::json;
use sexton_schedule::{
    evaluate, explain, Action, CronSpec, Decision, Reason, ScheduleDoc, ScheduleState,
};

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn cron(text: &str) -> CronSpec {
    CronSpec::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// A schedule created at `created`, already evaluated once (no activation pending).
fn running(created: &str) -> ScheduleState {
    ScheduleState {
        created_at: at(created),
        paused: false,
        skip_immediately: None,
        last_backup: None,
        last_skipped: None,
        in_flight: false,
        starting_deadline_seconds: None,
        activation_pending: false,
    }
}

/// What the scheduler records after a decision.
fn record(state: &ScheduleState, decision: &Decision) -> ScheduleState {
    ScheduleState {
        last_backup: decision.last_backup_after,
        last_skipped: decision.last_skipped_after,
        skip_immediately: decision.skip_immediately_after,
        activation_pending: decision.activation_pending_after,
        ..*state
    }
}

#[test]
fn paused_changes_nothing() {
    let state = ScheduleState {
        paused: true,
        activation_pending: true,
        skip_immediately: Some(true),
        last_backup: Some(at("2024-01-01T00:00:00Z")),
        ..running("2023-01-01T00:00:00Z")
    };
    let decision = evaluate(&cron("@hourly"), &state, at("2024-06-01T00:00:00Z"), true);
    assert_eq!(decision.action, Action::Paused);
    assert!(!decision.due);
    assert_eq!(decision.next_run_time, None);
    assert_eq!(record(&state, &decision), state);
}

#[test]
fn server_default_skip_applies_once_per_activation() {
    // Created with no skip-immediately of its own while the server default is on.
    let hourly = cron("0 * * * *");
    let created = ScheduleState {
        activation_pending: true,
        ..running("2024-01-01T10:20:00Z")
    };
    let first = evaluate(&hourly, &created, at("2024-01-01T10:20:05Z"), true);
    assert_eq!(first.action, Action::Skip);
    assert_eq!(first.reason, Reason::SkipImmediately);
    assert_eq!(first.last_skipped_after, Some(at("2024-01-01T10:20:05Z")));
    assert_eq!(
        first.skip_immediately_after, None,
        "reset to unset, not pinned to false"
    );
    assert!(!first.activation_pending_after);
    assert_eq!(first.next_run_time, Some(at("2024-01-01T11:00:00Z")));
    assert_eq!(first.tick, None, "no run was due at creation");

    // The next evaluation, when 11:00 is due, fires: the server default is not applied again.
    let state = record(&created, &first);
    let second = evaluate(&hourly, &state, at("2024-01-01T11:00:01Z"), true);
    assert_eq!(second.action, Action::Fire);
    assert_eq!(second.tick, Some(at("2024-01-01T11:00:00Z")));
}

#[test]
fn unpause_with_skip_immediately_skips_the_run_that_is_due() {
    // Velero issue 6517: "45 * * * *", paused at :43, unpaused at :50, last backup an hour ago.
    let cron45 = cron("45 * * * *");
    let paused = ScheduleState {
        paused: true,
        last_backup: Some(at("2024-01-01T09:45:00Z")),
        ..running("2024-01-01T00:00:00Z")
    };
    let while_paused = evaluate(&cron45, &paused, at("2024-01-01T10:43:00Z"), false);
    assert_eq!(while_paused.action, Action::Paused);

    // Unpausing sets the activation; without skip-immediately the missed 10:45 run fires.
    let unpaused = ScheduleState {
        paused: false,
        activation_pending: true,
        ..paused
    };
    let now = at("2024-01-01T10:50:00Z");
    let plain = evaluate(&cron45, &unpaused, now, false);
    assert_eq!(plain.action, Action::Fire);
    assert_eq!(plain.tick, Some(at("2024-01-01T10:45:00Z")));
    assert!(!plain.activation_pending_after);

    // With `unpause --skip-immediately` it is skipped, and the next run is 11:45.
    let skipping = ScheduleState {
        skip_immediately: Some(true),
        ..unpaused
    };
    let skipped = evaluate(&cron45, &skipping, now, false);
    assert_eq!(skipped.action, Action::Skip);
    assert_eq!(
        skipped.tick,
        Some(at("2024-01-01T10:45:00Z")),
        "the run that was due"
    );
    assert!(!skipped.due);
    assert_eq!(skipped.next_run_after, Some(at("2024-01-01T11:45:00Z")));
    assert_eq!(skipped.last_backup_after, Some(at("2024-01-01T09:45:00Z")));
}

#[test]
fn skip_immediately_waits_for_an_activation() {
    // Set on a running schedule, the flag is kept for the next unpause rather than consumed.
    let state = ScheduleState {
        skip_immediately: Some(true),
        last_backup: Some(at("2024-01-01T09:00:00Z")),
        ..running("2024-01-01T00:00:00Z")
    };
    let decision = evaluate(&cron("@hourly"), &state, at("2024-01-01T10:00:01Z"), false);
    assert_eq!(decision.action, Action::Fire);
    assert_eq!(decision.skip_immediately_after, Some(true));

    // An explicit false beats a server default of true, and is kept.
    let no_skip = ScheduleState {
        skip_immediately: Some(false),
        activation_pending: true,
        ..state
    };
    let decision = evaluate(&cron("@hourly"), &no_skip, at("2024-01-01T10:00:01Z"), true);
    assert_eq!(decision.action, Action::Fire);
    assert_eq!(decision.skip_immediately_after, Some(false));
}

#[test]
fn after_downtime_a_schedule_fires_once() {
    let hourly = cron("0 * * * *");
    let state = ScheduleState {
        last_backup: Some(at("2024-01-01T00:00:00Z")),
        ..running("2023-12-01T00:00:00Z")
    };
    let now = at("2024-01-04T07:12:00Z");
    let decision = evaluate(&hourly, &state, now, false);
    assert_eq!(decision.action, Action::Fire);
    assert_eq!(
        decision.tick,
        Some(at("2024-01-01T01:00:00Z")),
        "the first missed run"
    );
    assert_eq!(
        decision.last_backup_after,
        Some(now),
        "the actual time, not the tick"
    );
    assert_eq!(decision.next_run_after, Some(at("2024-01-04T08:00:00Z")));

    // Recorded, the schedule waits for the next run: one backup for the whole outage.
    let after = evaluate(
        &hourly,
        &record(&state, &decision),
        at("2024-01-04T07:13:00Z"),
        false,
    );
    assert_eq!(after.action, Action::Wait);
    assert_eq!(after.reason, Reason::NotDue);
}

#[test]
fn the_tick_depends_on_the_state_not_on_the_replica_clock() {
    let state = ScheduleState {
        last_backup: Some(at("2024-01-01T09:00:00Z")),
        ..running("2024-01-01T00:00:00Z")
    };
    let spec = cron("*/15 * * * *");
    let replica_a = evaluate(&spec, &state, at("2024-01-01T09:15:00.001Z"), false);
    let replica_b = evaluate(&spec, &state, at("2024-01-01T09:29:59Z"), false);
    assert_eq!(replica_a.action, Action::Fire);
    assert_eq!(replica_b.action, Action::Fire);
    assert_eq!(replica_a.tick, replica_b.tick);
    assert_eq!(replica_a.tick, Some(at("2024-01-01T09:15:00Z")));
    // Exactly at the run time it is not yet due (due means strictly after).
    let on_time = evaluate(&spec, &state, at("2024-01-01T09:15:00Z"), false);
    assert_eq!(on_time.action, Action::Wait);
}

#[test]
fn overlap_skips_and_records_why() {
    let state = ScheduleState {
        last_backup: Some(at("2024-01-01T09:00:00Z")),
        in_flight: true,
        ..running("2024-01-01T00:00:00Z")
    };
    let now = at("2024-01-01T10:00:30Z");
    let decision = evaluate(&cron("@hourly"), &state, now, false);
    assert_eq!(decision.action, Action::Skip);
    assert_eq!(decision.reason, Reason::InFlight);
    assert!(decision.due);
    assert_eq!(decision.tick, Some(at("2024-01-01T10:00:00Z")));
    assert_eq!(decision.last_skipped_after, Some(now));
    assert_eq!(decision.last_backup_after, state.last_backup);
    assert_eq!(decision.next_run_after, Some(at("2024-01-01T11:00:00Z")));
}

#[test]
fn starting_deadline_judges_the_newest_missed_run() {
    let hourly = cron("0 * * * *");
    let state = ScheduleState {
        last_backup: Some(at("2024-01-01T05:00:00Z")),
        starting_deadline_seconds: Some(600),
        ..running("2024-01-01T00:00:00Z")
    };
    // Down from 05:50 to 10:05: 06:00 is long gone, but 10:00 is five minutes old: fire.
    let fresh = evaluate(&hourly, &state, at("2024-01-01T10:05:00Z"), false);
    assert_eq!(fresh.action, Action::Fire);
    // At 10:30 the newest missed run (10:00) is 30 minutes old: skip until 11:00.
    let stale = evaluate(&hourly, &state, at("2024-01-01T10:30:00Z"), false);
    assert_eq!(stale.action, Action::Skip);
    assert_eq!(stale.reason, Reason::StartingDeadlineExceeded);
    assert_eq!(stale.last_skipped_after, Some(at("2024-01-01T10:30:00Z")));
    assert_eq!(stale.next_run_after, Some(at("2024-01-01T11:00:00Z")));
    // A single missed run exactly at the deadline still fires.
    let single = ScheduleState {
        last_backup: Some(at("2024-01-01T09:00:00Z")),
        ..state
    };
    assert_eq!(
        evaluate(&hourly, &single, at("2024-01-01T10:10:00Z"), false).action,
        Action::Fire
    );
    assert_eq!(
        evaluate(&hourly, &single, at("2024-01-01T10:10:01Z"), false).action,
        Action::Skip
    );

    // @every: runs at 00:10, 00:20, ...; at 01:03 the newest (01:00) is 3 minutes old.
    let every = ScheduleState {
        last_backup: Some(at("2024-01-01T00:00:00Z")),
        starting_deadline_seconds: Some(120),
        ..running("2024-01-01T00:00:00Z")
    };
    let decision = evaluate(
        &cron("@every 10m"),
        &every,
        at("2024-01-01T01:03:00Z"),
        false,
    );
    assert_eq!(decision.reason, Reason::StartingDeadlineExceeded);
    let generous = ScheduleState {
        starting_deadline_seconds: Some(180),
        ..every
    };
    let decision = evaluate(
        &cron("@every 10m"),
        &generous,
        at("2024-01-01T01:03:00Z"),
        false,
    );
    assert_eq!(decision.action, Action::Fire);
}

#[test]
fn a_spec_with_no_run_within_five_years_is_never_due() {
    // robfig returns the zero time and Velero would then fire on every reconcile.
    let decision = evaluate(
        &cron("0 0 30 2 *"),
        &running("2024-01-01T00:00:00Z"),
        at("2024-06-01T00:00:00Z"),
        false,
    );
    assert_eq!(decision.action, Action::Wait);
    assert_eq!(decision.reason, Reason::NoRunWithinFiveYears);
    assert!(!decision.due);
    assert_eq!(decision.next_run_time, None);
}

#[test]
fn invalid_specs_are_explained_and_record_nothing() {
    let doc: ScheduleDoc = serde_json::from_value(json!({
        "cron": "0 0 * * 7",
        "created_at": "2024-01-01T00:00:00Z",
        "skip_immediately": true,
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let explanation = explain(&doc, at("2024-06-01T00:00:00Z"), false);
    assert_eq!(explanation.action, Action::Invalid);
    let error = explanation.error.clone().unwrap_or_default();
    assert!(
        error.starts_with("invalid cron spec: day-of-week: 7"),
        "{error}"
    );
    assert_eq!(explanation.skip_immediately_after, Some(true));
    assert!(explanation.activation_pending_after);
    assert_eq!(explanation.last_skipped_after, None);

    let paused = ScheduleDoc {
        paused: true,
        ..doc
    };
    let explanation = explain(&paused, at("2024-06-01T00:00:00Z"), false);
    assert_eq!(explanation.action, Action::Paused);
    assert!(explanation.error.is_some());
}

#[test]
fn schedule_documents_are_strict_and_defaulted() {
    let minimal: ScheduleDoc = serde_json::from_value(json!({
        "cron": "@daily",
        "created_at": "2024-01-01T00:00:00Z",
        "skip_immediately": null,
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(!minimal.paused && !minimal.in_flight);
    assert_eq!(minimal.skip_immediately, None);
    assert!(
        minimal.activation_pending,
        "a document that does not say is a new schedule"
    );

    let typo = serde_json::from_value::<ScheduleDoc>(json!({
        "cron": "@daily",
        "created_at": "2024-01-01T00:00:00Z",
        "skipImmediately": true,
    }));
    assert!(typo.is_err());
}

#[test]
fn explain_prints_the_documented_json() {
    let doc: ScheduleDoc = serde_json::from_value(json!({
        "cron": "0 9 * * *",
        "created_at": "2017-08-10T12:27:00Z",
        "last_backup": "2017-08-10T12:27:00Z",
        "activation_pending": false,
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let explanation = explain(&doc, at("2017-08-11T09:01:00Z"), false);
    let printed = serde_json::to_value(&explanation).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(printed["action"], "fire");
    assert_eq!(printed["due"], true);
    assert_eq!(printed["next_run_time"], "2017-08-11T09:00:00Z");
    assert_eq!(printed["tick"], "2017-08-11T09:00:00Z");
    assert_eq!(printed["last_backup_after"], "2017-08-11T09:01:00Z");
    assert_eq!(printed["last_skipped_after"], serde_json::Value::Null);
    assert_eq!(printed["skip_immediately_after"], serde_json::Value::Null);
    assert_eq!(printed["reason_code"], "due");
    assert!(
        printed.get("error").is_none(),
        "error is omitted when there is none"
    );
    assert!(printed["reason"]
        .as_str()
        .is_some_and(|r| r.starts_with("due since")));
}
