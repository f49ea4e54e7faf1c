//! A schedule's timing beyond robfig: deterministic jitter and random descriptors spread over
//! their interval, blackout windows (skip and defer) across DST changes in a named zone, and
//! the input checks that refuse what cannot mean what it says.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Timelike, Utc};
use proptest::prelude::*;
use serde_json::json;
use sexton_schedule::spread::{jitter_offset_seconds, resolve_random_descriptor};
use sexton_schedule::{
    Action, OnBlackout, Reason, RunEffect, ScheduleState, Span, Timing, TimingSpec, WindowSpec,
};

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn windows(json: serde_json::Value) -> Vec<WindowSpec> {
    serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"))
}

fn timing(
    name: &str,
    cron: &str,
    jitter: Option<&str>,
    exclude: &[WindowSpec],
    on: OnBlackout,
) -> Timing {
    Timing::new(&TimingSpec {
        name,
        cron,
        jitter: jitter.map(|j| Span::parse(j).unwrap_or_else(|e| panic!("{e}"))),
        exclude,
        on_blackout: on,
    })
    .unwrap_or_else(|e| panic!("{cron}: {e}"))
}

fn created(text: &str) -> ScheduleState {
    ScheduleState {
        created_at: at(text),
        paused: false,
        skip_immediately: None,
        last_backup: None,
        last_skipped: None,
        in_flight: false,
        starting_deadline_seconds: None,
        activation_pending: false,
    }
}

/// What a prompt scheduler does from `from` to `until`: wakes when the decision says, records
/// what it decides, and reports each firing and skip as (action, reason, nominal tick, instant).
fn run_prompt(
    timing: &Timing,
    mut state: ScheduleState,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<(Action, Reason, DateTime<Utc>, DateTime<Utc>)> {
    let mut log = Vec::new();
    let mut now = from;
    for _ in 0..10_000 {
        if now > until {
            break;
        }
        let decision = timing.evaluate(&state, now, false);
        if matches!(decision.action, Action::Fire | Action::Skip) {
            log.push((
                decision.action,
                decision.reason,
                decision.tick.unwrap_or_default(),
                now,
            ));
            state.last_backup = decision.last_backup_after;
            state.last_skipped = decision.last_skipped_after;
        }
        // Due means strictly after: wake a millisecond past the instant the decision names.
        match decision.next_run_after {
            Some(next) => now = next.max(now) + TimeDelta::milliseconds(1),
            None => break,
        }
    }
    log
}

// --- spread ------------------------------------------------------------------------------

/// Counts `values` (each below `bound`) into `buckets` equal buckets and checks each holds
/// between half and one and a half times its fair share.
fn check_spread(values: &[u64], bound: u64, buckets: u64, what: &str) {
    let mut counts = vec![0u64; buckets as usize];
    for value in values {
        assert!(*value < bound, "{what}: {value} not below {bound}");
        counts[(value * buckets / bound) as usize] += 1;
    }
    let fair = values.len() as f64 / buckets as f64;
    for (bucket, count) in counts.iter().enumerate() {
        let share = *count as f64 / fair;
        assert!(
            (0.5..=1.5).contains(&share),
            "{what}: bucket {bucket} of {buckets} holds {count}, fair share {fair:.0}: {counts:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// 1,000 schedules of one fleet (names sharing a prefix and differing in a number, as
    /// generated fleets are named) spread their jitter offsets over the whole interval, and
    /// each offset is the same every time it is computed.
    #[test]
    fn jitter_offsets_spread_over_the_interval(
        prefix in "[a-z][a-z0-9-]{0,20}",
        jitter in 60u64..=86_400,
    ) {
        let names: Vec<String> = (0..1_000).map(|n| format!("{prefix}-{n}")).collect();
        let offsets: Vec<u64> = names.iter().map(|name| jitter_offset_seconds(name, jitter)).collect();
        check_spread(&offsets, jitter, 10, "jitter offsets");
        for (name, offset) in names.iter().zip(&offsets) {
            prop_assert_eq!(jitter_offset_seconds(name, jitter), *offset);
        }
    }

    /// The random descriptors' minute, hour and weekday spread over their ranges too.
    #[test]
    fn random_descriptors_spread_their_fields(prefix in "[a-z][a-z0-9-]{0,20}") {
        let mut minutes = Vec::new();
        let mut hours = Vec::new();
        let mut weekdays = Vec::new();
        for n in 0..1_000 {
            let name = format!("{prefix}-{n}");
            let spec = resolve_random_descriptor("@weekly-random", &name).unwrap_or_default();
            let fields: Vec<u64> = spec.split_whitespace().filter_map(|f| f.parse().ok()).collect();
            prop_assert_eq!(fields.len(), 3, "{}", spec);
            minutes.push(fields[0]);
            hours.push(fields[1]);
            weekdays.push(fields[2]);
            // The daily and hourly draws are the weekly one's minute and hour.
            let daily = resolve_random_descriptor("@daily-random", &name).unwrap_or_default();
            prop_assert_eq!(daily, format!("{} {} * * *", fields[0], fields[1]));
        }
        check_spread(&minutes, 60, 6, "minutes");
        check_spread(&hours, 24, 4, "hours");
        check_spread(&weekdays, 7, 7, "weekdays");
    }
}

#[test]
fn jitter_moves_every_run_by_the_same_offset_and_keeps_the_nominal_tick() {
    let jittered = timing("nightly", "0 3 * * *", Some("1h"), &[], OnBlackout::Skip);
    // The pinned offset of "nightly" within an hour (see spread's tests): 36m46s.
    assert_eq!(jittered.offset(), TimeDelta::seconds(2_206));
    let log = run_prompt(
        &jittered,
        created("2026-01-01T12:00:00Z"),
        at("2026-01-01T12:00:00Z"),
        at("2026-01-04T12:00:00Z"),
    );
    let fired: Vec<(DateTime<Utc>, DateTime<Utc>)> = log
        .iter()
        .map(|(action, _, tick, now)| {
            assert_eq!(*action, Action::Fire);
            (*tick, *now)
        })
        .collect();
    assert_eq!(fired.len(), 3, "{log:?}");
    for (n, (tick, fired_at)) in fired.iter().enumerate() {
        assert_eq!(
            *tick,
            at("2026-01-02T03:00:00Z") + TimeDelta::days(n as i64)
        );
        let late = *fired_at - *tick - TimeDelta::seconds(2_206);
        assert!(
            late >= TimeDelta::zero() && late < TimeDelta::seconds(1),
            "{fired:?}"
        );
    }
    // Offline, the same runs: `schedule next` agrees with the scheduler.
    let planned = jittered.upcoming(at("2026-01-01T12:00:00Z"), 3);
    assert_eq!(
        planned.iter().map(|p| p.at).collect::<Vec<_>>(),
        fired
            .iter()
            .map(|(tick, _)| *tick + TimeDelta::seconds(2_206))
            .collect::<Vec<_>>()
    );
}

#[test]
fn the_starting_deadline_counts_from_the_due_time_not_the_cron_time() {
    let jittered = timing("nightly", "0 3 * * *", Some("1h"), &[], OnBlackout::Skip);
    let state = ScheduleState {
        starting_deadline_seconds: Some(600),
        ..created("2026-01-01T12:00:00Z")
    };
    // Due at 03:36:46; five minutes later is within the deadline, twenty is not.
    let in_time = jittered.evaluate(&state, at("2026-01-02T03:41:46Z"), false);
    assert_eq!(in_time.action, Action::Fire);
    let late = jittered.evaluate(&state, at("2026-01-02T03:56:47Z"), false);
    assert_eq!(
        (late.action, late.reason),
        (Action::Skip, Reason::StartingDeadlineExceeded)
    );
}

// --- blackout windows across DST ---------------------------------------------------------

/// Europe/Berlin changes to summer time at 02:00 on 2026-03-29 and back at 03:00 on
/// 2026-10-25. The window is 01:00 to 04:00 Berlin time each night; the schedule runs every
/// hour on the hour (in UTC).
fn nightly_window() -> Vec<WindowSpec> {
    windows(json!([{"cron": "0 1 * * *", "duration": "3h", "zone": "Europe/Berlin"}]))
}

fn hours(log: &[(Action, Reason, DateTime<Utc>, DateTime<Utc>)], reason: Reason) -> Vec<u32> {
    log.iter()
        .filter(|entry| entry.1 == reason)
        .map(|entry| entry.2.hour())
        .collect()
}

#[test]
fn blackout_skip_follows_the_wall_clock_across_both_dst_changes() {
    let hourly = timing("h", "0 * * * *", None, &nightly_window(), OnBlackout::Skip);
    let mut skipped_per_night = BTreeMap::new();
    for (night, from) in [
        ("winter", "2026-03-27T21:30:00Z"),
        ("spring forward", "2026-03-28T21:30:00Z"),
        ("summer", "2026-03-30T20:30:00Z"),
        ("fall back", "2026-10-24T20:30:00Z"),
    ] {
        let from = at(from);
        let log = run_prompt(
            &hourly,
            created(&from.to_rfc3339()),
            from,
            from + TimeDelta::hours(8),
        );
        skipped_per_night.insert(night, hours(&log, Reason::Blackout));
        // Nothing inside a window fires; everything outside does.
        for (action, reason, tick, _) in &log {
            let inside = hourly.blackout_at(*tick).is_some();
            assert_eq!(
                inside,
                *reason == Reason::Blackout,
                "{night}: {tick} {action:?}"
            );
        }
    }
    // 01:00-04:00 Berlin is 00-03Z in winter, 23-02Z in summer; 00-02Z on the short night
    // (2 h) and 23-03Z on the long one (4 h).
    assert_eq!(skipped_per_night["winter"], [0, 1, 2]);
    assert_eq!(skipped_per_night["spring forward"], [0, 1]);
    assert_eq!(skipped_per_night["summer"], [23, 0, 1]);
    assert_eq!(skipped_per_night["fall back"], [23, 0, 1, 2]);
}

#[test]
fn blackout_defer_fires_once_at_the_end_across_both_dst_changes() {
    let hourly = timing("h", "0 * * * *", None, &nightly_window(), OnBlackout::Defer);
    for (night, from, blackout_end) in [
        ("winter", "2026-03-27T21:30:00Z", "2026-03-28T03:00:00Z"),
        (
            "spring forward",
            "2026-03-28T21:30:00Z",
            "2026-03-29T02:00:00Z",
        ),
        ("fall back", "2026-10-24T20:30:00Z", "2026-10-25T03:00:00Z"),
    ] {
        let from = at(from);
        let log = run_prompt(
            &hourly,
            created(&from.to_rfc3339()),
            from,
            from + TimeDelta::hours(8),
        );
        assert!(log.iter().all(|e| e.0 == Action::Fire), "{night}: {log:?}");
        // The first run held back fires at the blackout's end, once, under its own tick; the
        // runs after it follow from then.
        let end = at(blackout_end);
        let at_end: Vec<_> = log
            .iter()
            .filter(|e| e.3 >= end && e.3 < end + TimeDelta::seconds(1))
            .collect();
        assert_eq!(at_end.len(), 1, "{night}: {log:?}");
        assert!(
            hourly.blackout_at(at_end[0].2).is_some(),
            "{night}: a held-back tick"
        );
        let inside = log
            .iter()
            .filter(|e| hourly.blackout_at(e.3).is_some())
            .count();
        assert_eq!(inside, 0, "{night}: nothing fires inside: {log:?}");
        // `schedule next` says the same.
        let planned = hourly.upcoming(from, 6);
        let deferred: Vec<_> = planned
            .iter()
            .filter_map(|p| match p.effect {
                RunEffect::Deferred { blackout } => Some(blackout.end),
                _ => None,
            })
            .collect();
        assert_eq!(deferred, [end], "{night}: {planned:?}");
    }
}

#[test]
fn a_deferred_run_meets_the_starting_deadline_at_the_blackouts_end() {
    // Daily at 00:00Z, which is 01:00 Berlin time: inside the window every winter night.
    let daily = timing("d", "0 0 * * *", None, &nightly_window(), OnBlackout::Defer);
    let state = ScheduleState {
        starting_deadline_seconds: Some(1_800),
        ..created("2026-03-27T20:00:00Z")
    };
    let inside = daily.evaluate(&state, at("2026-03-28T00:00:01Z"), false);
    assert_eq!(
        (inside.action, inside.reason, inside.next_run_after),
        (
            Action::Wait,
            Reason::BlackoutDeferred,
            Some(at("2026-03-28T03:00:00Z"))
        )
    );
    assert_eq!(inside.tick, Some(at("2026-03-28T00:00:00Z")));
    // At 03:00 the run held back is three hours old: skipped, and said why.
    let at_end = daily.evaluate(&state, at("2026-03-28T03:00:00.001Z"), false);
    assert_eq!(at_end.reason, Reason::StartingDeadlineExceeded);
    // Without a deadline it fires then, under its own tick.
    let lenient = ScheduleState {
        starting_deadline_seconds: None,
        ..state
    };
    let fired = daily.evaluate(&lenient, at("2026-03-28T03:00:00.001Z"), false);
    assert_eq!(
        (fired.action, fired.tick),
        (Action::Fire, Some(at("2026-03-28T00:00:00Z")))
    );
}

// --- input that means one thing ----------------------------------------------------------

/// `Ok(n)`: accepted with `n` warnings; `Err(text)`: refused, the message holding `text`.
fn check_input(
    cron: &str,
    jitter: Option<&str>,
    exclude: serde_json::Value,
    expected: Result<usize, &str>,
) {
    let exclude = windows(exclude);
    let spec = TimingSpec {
        name: "s",
        cron,
        jitter: jitter.map(|j| Span::parse(j).unwrap_or_else(|e| panic!("{e}"))),
        exclude: &exclude,
        on_blackout: OnBlackout::Skip,
    };
    match (
        Timing::check_input(&spec, at("2026-01-01T00:00:00Z")),
        expected,
    ) {
        (Ok((_, warnings)), Ok(n)) => assert_eq!(warnings.len(), n, "{cron}: {warnings:?}"),
        (Err(err), Err(fragment)) => assert!(err.to_string().contains(fragment), "{cron}: {err}"),
        (got, _) => panic!("{cron}: got {got:?}, expected {expected:?}"),
    }
}

#[test]
fn input_is_refused_or_warned_with_a_clear_message() {
    check_input("@daily-random", None, json!([]), Ok(0));
    check_input(
        "CRON_TZ=Europe/Berlin @weekly-random",
        Some("30m"),
        json!([]),
        Ok(0),
    );
    check_input("@every 0s", None, json!([]), Err("positive"));
    check_input("@every -1s", None, json!([]), Err("positive"));
    check_input("@every 1ms", None, json!([]), Err("under one second"));
    check_input("0 0 30 2 *", None, json!([]), Err("can never fire"));
    check_input(
        "0 0 31 4 *",
        None,
        json!([]),
        Err("day 31 never falls in april"),
    );
    check_input("0 0 31 * *", None, json!([]), Ok(1));
    check_input("@hourly", Some("2h"), json!([]), Ok(1));
    check_input("@every 10m", Some("5m"), json!([]), Ok(0));
    check_input(
        "@monthly-random",
        None,
        json!([]),
        Err("unrecognized descriptor"),
    );
    check_input(
        "@hourly",
        None,
        json!([{"cron": "0 1 * * *"}]),
        Err("blackout window 0: a recurring window (cron) needs a duration"),
    );
    check_input(
        "@hourly",
        None,
        json!([{"from": "2026-01-01", "duration": "1d", "zone": "Europe/Nowhere"}]),
        Err("unknown time zone"),
    );
}

/// `describe`'s upcoming runs of an `@every` schedule are counted from its last run, not from
/// the moment describe is asked (issue 26: each row was offset by the time describe ran).
#[test]
fn upcoming_runs_of_every_count_from_the_last_run_not_from_now() {
    let ats = |timing: &Timing, state: &ScheduleState, now: &str, n: usize| -> Vec<_> {
        timing
            .upcoming_for(state, at(now), n)
            .iter()
            .map(|run| run.at)
            .collect()
    };
    let every = timing("s", "@every 1m", None, &[], OnBlackout::Skip);
    let mut state = created("2026-03-01T19:50:43Z");
    state.last_backup = Some(at("2026-03-01T19:50:43Z"));
    assert_eq!(
        ats(&every, &state, "2026-03-01T19:51:03Z", 3),
        [
            at("2026-03-01T19:51:43Z"),
            at("2026-03-01T19:52:43Z"),
            at("2026-03-01T19:53:43Z")
        ]
    );
    // Overdue (the scheduler was away): the due run first, then the runs after it from now.
    assert_eq!(
        ats(&every, &state, "2026-03-01T20:30:00Z", 3),
        [
            at("2026-03-01T19:51:43Z"),
            at("2026-03-01T20:31:00Z"),
            at("2026-03-01T20:32:00Z")
        ]
    );
    // A calendar spec reads the same either way.
    let daily = timing("s", "0 3 * * *", None, &[], OnBlackout::Skip);
    let mut state = created("2026-03-01T00:00:00Z");
    state.last_backup = Some(at("2026-03-01T03:00:00Z"));
    assert_eq!(
        ats(&daily, &state, "2026-03-01T12:00:00Z", 2),
        [at("2026-03-02T03:00:00Z"), at("2026-03-03T03:00:00Z")]
    );
}
