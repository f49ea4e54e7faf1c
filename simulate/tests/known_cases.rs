//! The simulator on cases whose answer is known in advance, checked exactly: the counts of
//! every day, the worst gap, the engine's reasons where they explain a surprise, and the
//! agreement with `retention::plan` over the whole history ("one engine, two paths").

use chrono::{DateTime, Datelike, TimeDelta, Utc};
use sexton_retention::{plan, BackupStatus, Policy};
use sexton_schedule::{evaluate, Action, CronSpec, ScheduleState};
use sexton_simulate::{
    simulate, Days, Failures, Scenario, Simulation, SurpriseKind, SweepInterval,
};

/// The combined policy of the retention engine's benchmark (`retention/benches/engine.rs`):
/// restic's GFS counts with keep_within and keep_tags, Karbor's retention_duration and a
/// recovery window, all at once. The brief calls it the compass policy.
const COMBINED_POLICY: &str = r#"{"keep_last": 48, "keep_daily": 30, "keep_weekly": 12,
    "keep_monthly": 24, "keep_yearly": 10, "keep_within": "7d",
    "keep_tags": [["monthly-report"]], "retention_duration": 14, "recovery_window": "30d"}"#;

fn at(text: &str) -> DateTime<Utc> {
    text.parse()
        .unwrap_or_else(|error| panic!("{text}: {error}"))
}

fn scenario(cron: &str, policy: &str, from: &str, days: i64) -> Scenario {
    Scenario::new(
        CronSpec::parse(cron).unwrap(),
        Policy::from_json(policy).unwrap(),
        at(from),
        Days::new(days).unwrap(),
    )
}

/// Simulates and checks the restore points of every day and the summary's worst gap.
fn check(
    scenario: &Scenario,
    expected_counts: &[usize],
    expected_max_gap: Option<TimeDelta>,
) -> Simulation {
    let simulation = simulate(scenario).unwrap_or_else(|error| panic!("{error}"));
    let counts: Vec<usize> = simulation.days.iter().map(|day| day.count).collect();
    assert_eq!(counts, expected_counts, "counts of {}", scenario.cron);
    assert_eq!(
        simulation
            .summary
            .max_gap
            .as_ref()
            .map(|gap| gap.gap.duration()),
        expected_max_gap,
        "max gap of {}",
        scenario.cron
    );
    simulation
}

fn reasons_on_last_day(simulation: &Simulation) -> Vec<(String, Vec<String>)> {
    let last = simulation.days.len() - 1;
    simulation.days[last]
        .backups
        .iter()
        .map(|&index| {
            let backup = &simulation.backups[index];
            (
                backup.record.id.clone(),
                backup.reasons_on(last).unwrap().to_vec(),
            )
        })
        .collect()
}

fn kinds(simulation: &Simulation) -> Vec<SurpriseKind> {
    simulation
        .summary
        .surprises
        .iter()
        .map(|surprise| surprise.kind)
        .collect()
}

#[test]
fn daily_keep_last_7_keeps_7_from_day_7_with_a_gap_of_one_day() {
    let simulation = check(
        &scenario("@daily", r#"{"keep_last": 7}"#, "2026-01-01T00:00:00Z", 14),
        &[1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7, 7, 7, 7],
        Some(TimeDelta::days(1)),
    );
    assert_eq!(
        simulation.ids_on(13),
        [14, 13, 12, 11, 10, 9, 8].map(|day| format!("sim-202601{day:02}000000"))
    );
    // Each backup lives seven days, then the eighth backup pushes it out.
    let first = &simulation.backups[0];
    assert_eq!(first.deleted_at, Some(at("2026-01-08T00:00:00Z")));
    assert_eq!(simulation.summary.steady.count, 7);
    assert_eq!(simulation.summary.steady.storage_bytes, 7 * (10 << 30));
    assert_eq!(
        simulation.summary.steady.settled_on,
        Some("2026-01-07".parse().unwrap())
    );
    assert_eq!(simulation.summary.max_count.value, 7);
    assert_eq!(
        simulation.n_runs,
        14 * 24,
        "hourly sweeps, ticks on sweep instants"
    );
    assert!(
        simulation.summary.surprises.is_empty(),
        "{:?}",
        simulation.summary
    );
}

/// barman 274: "a 3-day window keeps 4 backups". The engine keeps what completed at or after
/// now − 3 d (three daily backups by the day's end) and the newest backup before the window,
/// the base a restore to the window's first instant starts from. The floor (the newest full)
/// is the newest backup, already in the window: it adds nothing here. At the instant of a
/// tick the window's start falls exactly on the backup taken three days earlier, which is
/// still inside (the window includes its start), so for that instant there are five; the next
/// hourly sweep lets the oldest go.
#[test]
fn a_three_day_recovery_window_keeps_four_daily_backups() {
    let case = scenario(
        "@daily",
        r#"{"recovery_window": "3d"}"#,
        "2026-01-01T00:00:00Z",
        10,
    );
    let simulation = check(
        &case,
        &[1, 2, 3, 4, 4, 4, 4, 4, 4, 4],
        Some(TimeDelta::days(1)),
    );
    let peaks: Vec<usize> = simulation.days.iter().map(|day| day.peak_count).collect();
    assert_eq!(peaks, [1, 2, 3, 4, 5, 5, 5, 5, 5, 5]);
    assert_eq!(
        reasons_on_last_day(&simulation),
        [
            (
                "sim-20260110000000",
                vec!["recovery_window 3d", "floor: newest completed full backup"]
            ),
            ("sim-20260109000000", vec!["recovery_window 3d"]),
            ("sim-20260108000000", vec!["recovery_window 3d"]),
            (
                "sim-20260107000000",
                vec!["recovery_window 3d: newest before the window"]
            ),
        ]
        .map(|(id, reasons)| (
            id.to_owned(),
            reasons.into_iter().map(str::to_owned).collect::<Vec<_>>()
        ))
    );
    let surprises = kinds(&simulation);
    assert!(
        surprises.contains(&SurpriseKind::WindowKeepsOneMore),
        "{surprises:?}"
    );
    assert!(
        surprises.contains(&SurpriseKind::PeakAboveDayEnd),
        "{surprises:?}"
    );
    let message = &simulation.summary.surprises[surprises
        .iter()
        .position(|kind| *kind == SurpriseKind::WindowKeepsOneMore)
        .unwrap()]
    .message;
    assert!(message.contains("keeps 4 backups"), "{message}");

    // Without sweeps the engine runs only at ticks, and the day ends with the tick's five.
    let mut no_sweeps = case.clone();
    no_sweeps.sweep_every = None;
    check(
        &no_sweeps,
        &[1, 2, 3, 4, 5, 5, 5, 5, 5, 5],
        Some(TimeDelta::days(1)),
    );
}

/// The combined policy over hourly backups: every day's kept set is exactly what one plan
/// over every backup ever taken keeps at that day's sampling instant. The simulator prunes as
/// it goes and runs the engine 24 times a day over what is left; the plan sees the whole
/// history once: the same engine by two paths must agree.
#[test]
fn hourly_combined_policy_agrees_with_one_plan_over_the_whole_history() {
    for (policy, days) in [
        (COMBINED_POLICY, 400),
        (
            r#"{"keep_hourly": 24, "keep_daily": 7, "keep_weekly": 4, "keep_monthly": 12, "keep_yearly": 3}"#,
            400,
        ),
        // restic's own combined GFS case (policy 17 of its golden files).
        (
            r#"{"keep_daily": 7, "keep_weekly": 2, "keep_monthly": 3, "keep_yearly": 10}"#,
            120,
        ),
    ] {
        let case = scenario("@hourly", policy, "2026-01-01T00:00:00Z", days);
        let simulation = simulate(&case).unwrap();
        assert_eq!(simulation.backups.len(), days as usize * 24);
        for (index, day) in simulation.days.iter().enumerate() {
            let now = day.sampled_at.unwrap();
            let history = simulation.history_catalog(now);
            let plan = plan(&history, &case.policy, now).unwrap();
            let expected: Vec<&str> = plan.keep.iter().map(|d| d.id.as_str()).collect();
            assert_eq!(
                simulation.ids_on(index),
                expected,
                "{policy}: day {} ({})",
                index + 1,
                day.date
            );
            assert_eq!(day.count, plan.keep.len(), "{policy}: day {}", day.date);
        }
    }
}

#[test]
fn the_combined_policy_reports_its_idle_tag_rule_and_short_keep_last() {
    let simulation = simulate(&scenario(
        "@hourly",
        COMBINED_POLICY,
        "2026-01-01T00:00:00Z",
        60,
    ))
    .unwrap();
    let never: Vec<&str> = simulation
        .summary
        .rules
        .iter()
        .filter(|rule| rule.backups == 0)
        .map(|rule| rule.rule)
        .collect();
    assert_eq!(never, ["keep_tags"]);
    let surprises = kinds(&simulation);
    assert!(
        surprises.contains(&SurpriseKind::RuleNeverKeeps),
        "{surprises:?}"
    );
    assert!(
        surprises.contains(&SurpriseKind::KeepLastShort),
        "{surprises:?}"
    );
    // 30 days of hourly backups inside the window, kept by recovery_window: the worst gap
    // inside the promised 30 days is an hour.
    assert_eq!(simulation.summary.promised_window.as_deref(), Some("30d"));
    assert_eq!(
        simulation
            .days
            .last()
            .unwrap()
            .worst_gap
            .as_ref()
            .unwrap()
            .seconds,
        3600
    );
}

#[test]
fn counts_are_backups_not_periods() {
    let simulation = simulate(&scenario(
        "@daily",
        r#"{"keep_hourly": 24}"#,
        "2026-01-01T00:00:00Z",
        40,
    ))
    .unwrap();
    assert_eq!(simulation.days.last().unwrap().count, 24);
    let surprise = simulation
        .summary
        .surprises
        .iter()
        .find(|s| s.kind == SurpriseKind::CountSpansLonger)
        .expect("keep_hourly over daily backups is reported");
    assert!(
        surprise.message.contains("spanning about 24d"),
        "{}",
        surprise.message
    );
}

#[test]
fn a_weekly_schedule_with_a_short_duration_is_kept_by_the_floor() {
    let simulation = simulate(&scenario(
        "0 3 * * 1",
        r#"{"retention_duration": 2}"#,
        "2026-01-05T00:00:00Z",
        21,
    ))
    .unwrap();
    // Monday's backup is kept two days by the rule, then by the floor until next Monday.
    assert!(simulation.days.iter().all(|day| day.count == 1));
    let surprises = kinds(&simulation);
    assert!(
        surprises.contains(&SurpriseKind::FloorKeeps),
        "{surprises:?}"
    );
    assert!(
        surprises.contains(&SurpriseKind::WindowShorterThanInterval),
        "{surprises:?}"
    );
}

/// 3 of every 10 daily backups fail (30 %), at most two in a row: a failed backup is never
/// counted, is cleaned up after its grace period, and the worst gap grows to three days.
#[test]
fn failed_backups_are_never_counted_and_widen_the_gap() {
    let mut case = scenario("@daily", r#"{"keep_last": 7}"#, "2026-01-01T00:00:00Z", 60);
    case.failures = Failures::parse("ok,ok,fail,ok,ok,ok,fail,fail,ok,ok", 0).unwrap();
    let simulation = simulate(&case).unwrap();
    assert_eq!(simulation.summary.n_failed, 18);
    assert_eq!(
        simulation.summary.max_gap.as_ref().unwrap().gap.duration(),
        TimeDelta::days(3)
    );
    check_failed_backups_never_count(&simulation, "1h");
    assert!(simulation.days[20..].iter().all(|day| day.count == 7));
    assert!(kinds(&simulation).contains(&SurpriseKind::FailuresWidenGaps));

    // With a grace period of two days the failed backups are still there at the day's end:
    // they exist and take their place in the list, and still count for nothing.
    case.policy = Policy::from_json(r#"{"keep_last": 7, "failed_grace": "2d"}"#).unwrap();
    let simulation = simulate(&case).unwrap();
    check_failed_backups_never_count(&simulation, "2d");
    assert!(simulation.days.iter().any(|day| day.n_failed == 2));
    assert!(simulation.days[20..].iter().all(|day| day.count == 7));

    // A rate: seeded, so the same seed fails the same backups.
    let mut case = scenario("@daily", r#"{"keep_last": 7}"#, "2026-01-01T00:00:00Z", 200);
    case.failures = Failures::parse("30%", 42).unwrap();
    let simulation = simulate(&case).unwrap();
    let again = simulate(&case).unwrap();
    let failed_ids = |simulation: &Simulation| -> Vec<String> {
        simulation
            .backups
            .iter()
            .filter(|backup| backup.failed())
            .map(|backup| backup.record.id.clone())
            .collect()
    };
    assert_eq!(failed_ids(&simulation), failed_ids(&again));
    let n_failed = simulation.summary.n_failed;
    assert!(
        (40..=80).contains(&n_failed),
        "30 % of 200 failed: {n_failed}"
    );
    check_failed_backups_never_count(&simulation, "1h");
    // The worst gap is one day more than the longest run of failures among the backups taken
    // after the first seven (so that a full set of seven follows it).
    let longest_run = simulation
        .backups
        .iter()
        .fold((0, 0), |(longest, run), backup| {
            let run = if backup.failed() { run + 1 } else { 0 };
            (longest.max(run), run)
        })
        .0;
    let gap = simulation.summary.max_gap.as_ref().unwrap().gap.duration();
    assert!(gap > TimeDelta::days(1));
    assert!(
        gap <= TimeDelta::days(longest_run + 1),
        "{gap} vs run {longest_run}"
    );
}

/// Every day: a failed backup that still exists is kept only for its grace period, and the
/// count is the completed backups alone.
fn check_failed_backups_never_count(simulation: &Simulation, grace: &str) {
    for (index, day) in simulation.days.iter().enumerate() {
        let mut completed = 0;
        for &backup_index in &day.backups {
            let backup = &simulation.backups[backup_index];
            let reasons = backup.reasons_on(index).unwrap();
            if backup.failed() {
                assert_eq!(
                    reasons,
                    [format!("failed, within grace {grace}")],
                    "{}",
                    backup.record.id
                );
            } else {
                assert_eq!(backup.record.status, BackupStatus::Completed);
                completed += 1;
            }
        }
        assert_eq!(day.count, completed, "day {}", day.date);
        assert_eq!(day.count + day.n_failed, day.backups.len());
        assert!(day
            .worst_gap
            .as_ref()
            .is_none_or(|gap| !gap.after.is_empty()));
    }
}

#[test]
fn full_every_keeps_the_chains_of_kept_incrementals() {
    let mut case = scenario("@daily", r#"{"keep_last": 2}"#, "2026-01-01T00:00:00Z", 7);
    case.full_every = Some(sexton_retention::FullEvery::new(3).unwrap());
    let simulation = check(&case, &[1, 2, 3, 4, 2, 3, 4], Some(TimeDelta::days(1)));
    let kinds_taken: Vec<&str> = simulation
        .backups
        .iter()
        .map(|backup| backup.kind_reason.as_deref().unwrap())
        .collect();
    assert_eq!(
        kinds_taken,
        [
            "no_artifact",
            "chain_continues",
            "chain_continues",
            "full_every",
            "chain_continues",
            "chain_continues",
            "full_every"
        ]
    );
    // Day 7: d7 (full) and d6 by the rule, d5 and d4 because d6 builds on them.
    assert_eq!(
        simulation.days[6].storage_bytes,
        2 * (10 << 30) + 2 * (1 << 30)
    );
    assert_eq!(
        reasons_on_last_day(&simulation)[3],
        (
            "sim-20260104000000".to_owned(),
            vec!["needed by sim-20260106000000".to_owned()]
        )
    );
    assert!(kinds(&simulation).contains(&SurpriseKind::ChainKeeps));
}

#[test]
fn a_failed_backup_makes_the_next_one_a_full() {
    let mut case = scenario("@daily", r#"{"keep_last": 3}"#, "2026-01-01T00:00:00Z", 6);
    case.full_every = Some(sexton_retention::FullEvery::new(10).unwrap());
    case.failures = Failures::parse("ok,ok,fail,ok,ok,ok", 0).unwrap();
    let simulation = simulate(&case).unwrap();
    let taken: Vec<(&str, &str)> = simulation
        .backups
        .iter()
        .map(|backup| {
            (
                if backup.failed() { "failed" } else { "ok" },
                backup.kind_reason.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        taken,
        [
            ("ok", "no_artifact"),
            ("ok", "chain_continues"),
            ("failed", "chain_continues"),
            ("ok", "last_attempt_failed"),
            ("ok", "chain_continues"),
            ("ok", "chain_continues"),
        ]
    );
}

#[test]
fn volumes_keep_the_chains_each_volume_builds_on() {
    let mut case = scenario("@daily", r#"{"keep_last": 1}"#, "2026-01-01T00:00:00Z", 6);
    case.volumes = vec!["pv1".to_owned(), "pv2".to_owned()];
    case.full_every = Some(sexton_retention::FullEvery::new(3).unwrap());
    let simulation = simulate(&case).unwrap();
    // Every backup but the newest is kept only for the volumes the newest builds on: they
    // are whole (kept as "volume pvN: needed by ...").
    let last = simulation.days.last().unwrap();
    assert_eq!(last.count, 3, "{:?}", reasons_on_last_day(&simulation));
    assert_eq!(
        last.storage_bytes,
        2 * (10 << 30) + 4 * (1 << 30),
        "a chain of a full and two incrementals per volume"
    );
}

#[test]
fn merge_mode_folds_chains_into_the_kept_backup() {
    let mut case = scenario(
        "@daily",
        r#"{"keep_last": 2, "chain_mode": "merge"}"#,
        "2026-01-01T00:00:00Z",
        20,
    );
    case.full_every = Some(sexton_retention::FullEvery::new(30).unwrap());
    let simulation = simulate(&case).unwrap();
    // The chain never grows: what the rule lets go is merged into the oldest kept backup and
    // deleted at the next run, so each day ends with the two kept backups.
    assert!(
        simulation.days[2..]
            .iter()
            .all(|day| day.backups.len() == 2),
        "{:?}",
        simulation
            .days
            .iter()
            .map(|d| d.backups.len())
            .collect::<Vec<_>>()
    );
}

/// An hourly schedule in Berlin across both changes of 2026: the simulator fires exactly the
/// ticks the scheduler's decision function fires, and cuts days in Berlin time (23 hours on
/// 29 March, 25 on 25 October).
#[test]
fn an_hourly_schedule_across_berlin_dst_fires_the_schedulers_ticks() {
    for (from, days, short_or_long_day, expected) in [
        ("2026-03-27T23:00:00Z", 4, "2026-03-29", 23),
        ("2026-10-23T22:00:00Z", 4, "2026-10-25", 25),
    ] {
        let case = scenario(
            "CRON_TZ=Europe/Berlin 0 * * * *",
            r#"{"keep_last": 48}"#,
            from,
            days,
        );
        let simulation = simulate(&case).unwrap();
        let simulated: Vec<DateTime<Utc>> =
            simulation.backups.iter().map(|b| b.taken_at()).collect();
        assert_eq!(
            simulated,
            scheduler_ticks(&case.cron, case.from, simulation.until),
            "{from}"
        );
        assert_eq!(simulation.zone, "Europe/Berlin");
        let day = simulation
            .days
            .iter()
            .find(|day| day.date.to_string() == short_or_long_day)
            .unwrap();
        assert_eq!(day.taken, expected, "{short_or_long_day}");
        assert!(simulation
            .days
            .iter()
            .filter(|d| d.date.to_string() != short_or_long_day)
            .all(|d| d.taken == 24));
        assert_eq!(
            simulation.days[0].date.day(),
            if expected == 23 { 28 } else { 24 }
        );
    }
}

/// The ticks the scheduler fires for a schedule created just before `from`, found the way its
/// timer queue finds them: evaluate at the next run time (a millisecond after it), record the
/// firing, repeat.
fn scheduler_ticks(
    cron: &CronSpec,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let mut state = ScheduleState {
        created_at: from - TimeDelta::seconds(1),
        paused: false,
        skip_immediately: None,
        last_backup: None,
        last_skipped: None,
        in_flight: false,
        starting_deadline_seconds: None,
        activation_pending: true,
    };
    let mut now = state.created_at;
    let mut fired = Vec::new();
    loop {
        let decision = evaluate(cron, &state, now, false);
        if decision.action == Action::Fire {
            fired.push(decision.tick.unwrap());
        }
        state.last_backup = decision.last_backup_after;
        state.activation_pending = decision.activation_pending_after;
        let next = decision.next_run_after.unwrap();
        if next >= until {
            return fired;
        }
        now = next + TimeDelta::milliseconds(1);
    }
}

#[test]
fn sweeps_can_be_slower_than_the_fleet_default() {
    let mut case = scenario("@daily", r#"{"keep_last": 3}"#, "2026-01-01T00:00:00Z", 5);
    case.sweep_every = Some(SweepInterval::parse("6h").unwrap());
    let simulation = simulate(&case).unwrap();
    assert_eq!(simulation.n_runs, 5 * 4);
}

/// The progress a terminal shows (issue 26): every event is told, in order, ending at the
/// total, and watching changes nothing in the simulation.
#[test]
fn progress_is_told_event_by_event_and_changes_nothing() {
    let scenario = scenario(
        "0 * * * *",
        r#"{"keep_last": 3}"#,
        "2026-03-01T00:00:00Z",
        2,
    );
    let mut told = Vec::new();
    let watched = sexton_simulate::simulate_with_progress(&scenario, &mut |done, total| {
        told.push((done, total))
    })
    .unwrap();
    let unwatched = simulate(&scenario).unwrap();
    assert_eq!(
        serde_json::to_value(&watched).unwrap(),
        serde_json::to_value(&unwatched).unwrap()
    );
    let total = told.last().unwrap().1;
    assert!(total >= 48, "{told:?}");
    assert_eq!(told.len(), total);
    assert!(told
        .iter()
        .enumerate()
        .all(|(n, &(done, all))| done == n + 1 && all == total));
}

/// Object Locks in the simulation (issue 29): hourly backups under `keep_hourly 24,
/// keep_daily 7` with `min=1d,daily=35d`. Each day's 23:00 backup is its daily pick; once
/// its day is over its lock is lengthened to 35 days, so it stays that long whatever the
/// policy says. On the last day (2026-02-09, sampled at 23:00) the policy keeps the 24
/// hourlies and the dailies of Feb 3 to 8; the dailies of Jan 6 to Feb 2 (28 days, each 35
/// days from its time still ahead) are kept only by their locks; Jan 5's lock ends at that
/// very instant and it goes. Nothing goes before its lock's date.
#[test]
fn locks_keep_each_daily_pick_for_its_tier_and_price_it() {
    let policy = r#"{"keep_hourly": 24, "keep_daily": 7}"#;
    let unlocked = scenario("@hourly", policy, "2026-01-01T00:00:00Z", 40);
    let mut locked = unlocked.clone();
    locked.lock = Some(sexton_retention::lock::LockTiers {
        min: Some("1d".parse().unwrap()),
        daily: Some("35d".parse().unwrap()),
        ..Default::default()
    });
    let without = simulate(&unlocked).unwrap();
    let with = simulate(&locked).unwrap();
    let last = with.days.last().unwrap();
    assert_eq!(without.days.last().unwrap().count, 30);
    assert_eq!(last.count, 30 + 28);
    assert_eq!(last.n_locked_only, 28);
    assert_eq!(last.locked_only_bytes, 28 * (10u64 << 30));
    assert_eq!(without.days.last().unwrap().n_locked_only, 0);
    let summary = with.summary.locked_only.as_ref().expect("a lock summary");
    assert_eq!(
        (summary.last_count, summary.last_bytes),
        (28, 28 * (10u64 << 30))
    );
    assert!(without.summary.locked_only.is_none());
    for backup in &with.backups {
        let Some(deleted_at) = backup.deleted_at else {
            continue;
        };
        let taken = backup.taken_at();
        let daily_pick = taken.format("%H").to_string() == "23";
        let lock = if daily_pick {
            TimeDelta::days(35)
        } else {
            TimeDelta::days(1)
        };
        assert!(
            deleted_at >= taken + lock,
            "{} deleted at {deleted_at}, before its lock ran out",
            backup.record.id
        );
    }
    let reasons = reasons_on_last_day(&with);
    let only_locks = reasons
        .iter()
        .filter(|(_, reasons)| {
            reasons.len() == 1 && reasons[0].starts_with("expired, locked until ")
        })
        .count();
    assert_eq!(only_locks, 28, "{reasons:#?}");
}

fn copy_rules(json: &str) -> Vec<sexton_model::copies::CopyRule> {
    serde_json::from_str(json).unwrap_or_else(|error| panic!("{json}: {error}"))
}

const GIB: u64 = 1 << 30;

#[test]
fn a_kept_rule_a_month_late_copies_month_ends_while_the_source_holds_the_month() {
    let mut scenario = scenario(
        "0 3 * * *",
        r#"{"keep_daily": 7}"#,
        "2026-01-01T00:00:00Z",
        120,
    );
    scenario.copies = copy_rules(
        r#"[{"to": "dr", "policy": {"keep_monthly": 12}, "select": "kept", "delay": "32d",
             "storage_class": "STANDARD_IA",
             "transitions": [{"after_days": 60, "storage_class": "GLACIER_IR"}]}]"#,
    );
    let simulation = simulate(&scenario).unwrap();
    let dr = &simulation.locations[0];
    let ids = |day: usize| -> Vec<&str> {
        dr.days[day]
            .backups
            .iter()
            .map(|&index| simulation.backups[index].record.id.as_str())
            .collect()
    };
    // Due at dr by the end: the 88 backups taken by Mar 29 (32 days before May 1). Each was
    // copied or skipped, never copied and then let go.
    assert_eq!(dr.summary.copied + dr.summary.skipped, 88);
    assert_eq!(dr.summary.deleted, 0);
    // What it holds: the last of each whole month and, while its twelve months are not
    // filled, the oldest (restic's rule, the engine's).
    assert_eq!(
        ids(119),
        [
            "sim-20260228030000",
            "sim-20260131030000",
            "sim-20260101030000"
        ]
    );
    assert_eq!(dr.summary.copied, 3);
    // Classes: on Mar 5, Jan 1's copy (60 days old since Mar 2) is in GLACIER_IR, Jan 31's
    // (copied Mar 4) still in STANDARD_IA; at the end all three are in GLACIER_IR.
    assert_eq!(dr.days[63].date.to_string(), "2026-03-05");
    assert_eq!(
        dr.days[63].storage_by_class,
        std::collections::BTreeMap::from([
            ("GLACIER_IR".to_owned(), 10 * GIB),
            ("STANDARD_IA".to_owned(), 10 * GIB)
        ])
    );
    assert_eq!(
        dr.summary.storage_by_class,
        std::collections::BTreeMap::from([("GLACIER_IR".to_owned(), 30 * GIB)])
    );
    // The source holds each backup until its copy is due: the 32 taken from Mar 30 on.
    let awaiting = reasons_on_last_day(&simulation)
        .iter()
        .filter(|(_, reasons)| reasons.iter().any(|r| r.contains("awaiting copy to dr")))
        .count();
    assert_eq!(awaiting, 32);
    assert_eq!(simulation.days[119].count, 32);
}

#[test]
fn deleting_a_copy_before_its_class_minimum_is_charged_the_rest_of_it() {
    let mut scenario = scenario(
        "0 3 * * *",
        r#"{"keep_daily": 7}"#,
        "2026-01-01T00:00:00Z",
        120,
    );
    scenario.copies = copy_rules(
        r#"[{"to": "vault", "policy": {"keep_daily": 7, "keep_monthly": 3},
             "storage_class": "GLACIER_IR"},
            {"to": "dr", "policy": {"keep_daily": 7, "keep_monthly": 3}}]"#,
    );
    let simulation = simulate(&scenario).unwrap();
    let (vault, dr) = (&simulation.locations[0], &simulation.locations[1]);
    // Undelayed copies never hold the source: the primary is as without copies.
    let alone = simulate(&Scenario {
        copies: Vec::new(),
        ..scenario.clone()
    })
    .unwrap();
    let counts = |s: &Simulation| s.days.iter().map(|d| d.count).collect::<Vec<_>>();
    assert_eq!(counts(&simulation), counts(&alone));
    // Both places hold the same copies; only the class differs.
    assert_eq!(vault.summary.copied, 120);
    assert_eq!(vault.summary.deleted, dr.summary.deleted);
    for day in 0..vault.days.len() {
        assert_eq!(vault.days[day].backups, dr.days[day].backups, "day {day}");
    }
    assert_eq!(
        dr.summary.deleted_early, 0,
        "the default class has no minimum"
    );
    assert_eq!(dr.summary.early_charged_byte_days, 0);
    // GLACIER_IR charges 90 days: every copy the policy lets go sooner is charged the rest,
    // recomputed here from the days each copy was held (copied at its backup's tick, deleted
    // at a later tick: whole days).
    let mut expected = 0u64;
    let mut early = 0;
    for day in 1..vault.days.len() {
        for &index in &vault.days[day - 1].backups {
            if !vault.days[day].backups.contains(&index) {
                let held_days = day as u64 - taken_day(&simulation, index);
                if held_days < 90 {
                    early += 1;
                    expected += (90 - held_days) * 10 * GIB;
                }
            }
        }
    }
    assert!(early > 100, "{early}");
    assert_eq!(vault.summary.deleted_early, early);
    assert_eq!(vault.summary.early_charged_byte_days, expected);
}

/// The day index on which backup `index` was taken.
fn taken_day(simulation: &Simulation, index: usize) -> u64 {
    let taken = simulation.backups[index].taken_at().date_naive();
    (taken - simulation.days[0].date).num_days() as u64
}

#[test]
fn copy_rules_that_cannot_work_are_refused_as_the_api_refuses_them() {
    for (rules, why) in [
        (
            r#"[{"to": "primary", "policy": {"keep_last": 3}}]"#,
            "already at primary",
        ),
        (
            r#"[{"to": "dr", "policy": {"keep_last": 3}, "select": "kept", "delay": "400d"}]"#,
            "longer than 366 days",
        ),
        (
            r#"[{"to": "dr", "policy": {"keep_last": 3}}, {"to": "dr", "policy": {"keep_last": 1}}]"#,
            "two copy rules",
        ),
    ] {
        let mut scenario = scenario(
            "0 3 * * *",
            r#"{"keep_daily": 7}"#,
            "2026-01-01T00:00:00Z",
            10,
        );
        scenario.copies = copy_rules(rules);
        let error = simulate(&scenario).unwrap_err().to_string();
        assert!(error.contains(why), "{rules}: {error}");
    }
}

/// The binlog archive (issue 30), hourly segments of 1 MiB beside daily fulls at 03:00 kept by
/// keep_full 4: without pitr_full every segment since the oldest kept full stays (and the
/// segment ending at its start, which the strict horizon keeps); with
/// pitr_full 1 only what follows the newest full, and two segments around each older full (its
/// own range: the segments ending and starting at 03:00, within five minutes of its times).
/// The same answers as the engine's binlog plan over the last day's catalog.
#[test]
fn the_binlog_archive_keeps_the_point_in_time_window_and_the_older_fulls_own_ranges() {
    let run = |policy: &str| {
        let mut scenario = scenario("0 3 * * *", policy, "2026-01-01T00:00:00Z", 10);
        scenario.binlog = Some(sexton_simulate::BinlogArchive::parse("1h:1MiB").unwrap());
        simulate(&scenario).unwrap_or_else(|error| panic!("{error}"))
    };
    let all = run(r#"{"keep_full": 4}"#);
    let last = all.days.last().unwrap().binlog.unwrap();
    // The last day's sample is its last run, the 23:00 sweep of day 10: fulls at 03:00 on days
    // 7 to 10 are kept; the horizon is day 7 at 03:00; segments from 02:00–03:00 on day 7 to
    // the last closed one (22:00–23:00 on day 10): 1 + 21 + 24 + 24 + 23 = 93.
    assert_eq!(last.pitr_from, Some(at("2026-01-07T03:00:00Z")));
    assert_eq!(last.segments, 93);
    assert_eq!(last.bytes, 93 << 20);
    assert_eq!(last.own_range_segments, 0);
    let narrow = run(r#"{"keep_full": 4, "pitr_full": 1}"#);
    let last = narrow.days.last().unwrap().binlog.unwrap();
    assert_eq!(last.pitr_from, Some(at("2026-01-10T03:00:00Z")));
    // From 02:00 to 23:00 on day 10: 21 segments; and two for each of the three older fulls.
    assert_eq!(last.own_range_segments, 6);
    assert_eq!(last.segments, 21 + 6);
    let summary = narrow.summary.binlog.as_ref().unwrap();
    assert_eq!(summary.last_segments, 27);
    assert!(summary.max_bytes.value >= summary.last_bytes);
    // Without an archive, none of this is reported.
    let plain = simulate(&scenario(
        "0 3 * * *",
        r#"{"keep_full": 4}"#,
        "2026-01-01T00:00:00Z",
        10,
    ))
    .unwrap();
    assert!(plain.summary.binlog.is_none() && plain.days.iter().all(|d| d.binlog.is_none()));
    for (bad, says) in [
        ("1h", "EVERY:SIZE"),
        ("30s:1MiB", "a minute at least"),
        ("1h:lots", "size"),
    ] {
        let error = sexton_simulate::BinlogArchive::parse(bad)
            .unwrap_err()
            .to_string();
        assert!(error.contains(says), "{bad}: {error}");
    }
}
