//! Issue 20's benchmark: a year of hourly backups under the retention engine's combined bench
//! policy, simulated (8,760 engine runs, each over what exists), next to two baselines
//! measured in the same process:
//!
//! - the floor: one engine run over the final catalog (what exists at the end), 8,760 times:
//!   the cost of the runs alone, without taking backups, applying verdicts or sampling days;
//! - the naive replay: at every tick, one engine run over the whole history so far (nothing
//!   pruned), which is what replaying decisions costs without deleting as it goes.
//!
//! Run with `cargo bench -p sexton-simulate --bench simulate`. `SEXTON_BENCH_DAYS` changes the
//! period (default 365), `SEXTON_BENCH_POLICY` the policy (JSON), `SEXTON_BENCH_NAIVE=0`
//! skips the naive replay (it grows with the square of the period).

// A benchmark times itself on the real clock and reads its settings from the environment (or
// the command line) and its memory from /proc: exempt from the crate's clippy.toml, which
// forbids those to the crate itself.
#![allow(clippy::disallowed_methods)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sexton_retention::{evaluate, Catalog, Policy};
use sexton_schedule::CronSpec;
use sexton_simulate::{simulate, Days, Scenario};

const RUNS: usize = 3;

/// The default policy of `retention/benches/engine.rs`.
const COMBINED_POLICY: &str = r#"{"keep_last": 48, "keep_daily": 30, "keep_weekly": 12,
    "keep_monthly": 24, "keep_yearly": 10, "keep_within": "7d",
    "keep_tags": [["monthly-report"]], "retention_duration": 14, "recovery_window": "30d"}"#;

fn main() {
    let days: i64 = std::env::var("SEXTON_BENCH_DAYS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(365);
    let policy_text =
        std::env::var("SEXTON_BENCH_POLICY").unwrap_or_else(|_| COMBINED_POLICY.to_owned());
    let naive = std::env::var("SEXTON_BENCH_NAIVE").map_or(true, |value| value != "0");
    let policy = Policy::from_json(&policy_text).expect("the bench policy is valid");
    let from: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
    let scenario = Scenario::new(
        CronSpec::parse("@hourly").unwrap(),
        policy.clone(),
        from,
        Days::new(days).expect("SEXTON_BENCH_DAYS is 1 to 3660"),
    );
    println!(
        "scenario: @hourly for {days} days from {from}, sweeps every hour (on the ticks)\npolicy: {}",
        serde_json::to_string(&policy).unwrap()
    );

    let mut simulation_times = Vec::new();
    let mut simulation = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let result = simulate(&scenario).expect("the bench scenario simulates");
        simulation_times.push(started.elapsed());
        simulation = Some(black_box(result));
    }
    let simulation = simulation.expect("at least one run");
    let n_runs = simulation.n_runs;
    let mean_existing = simulation
        .days
        .iter()
        .map(|day| day.backups.len())
        .sum::<usize>() as f64
        / simulation.days.len() as f64;
    println!(
        "simulated: {} backups taken, {} engine runs, {:.0} backups exist on an average day, \
         {} at the end",
        simulation.backups.len(),
        n_runs,
        mean_existing,
        simulation.final_catalog.backups.len()
    );

    // Baseline 1: the engine alone, over the final catalog, as many times as the simulation
    // ran it.
    let final_catalog = &simulation.final_catalog;
    let now = simulation.days.last().unwrap().sampled_at.unwrap();
    let mut floor_times = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        for _ in 0..n_runs {
            black_box(evaluate(final_catalog, &policy, now).unwrap().n_keep());
        }
        floor_times.push(started.elapsed());
    }

    let simulation_time = median(&mut simulation_times);
    let floor_time = median(&mut floor_times);
    println!(
        "simulation: {simulation_time:.2?} (median of {RUNS}); per engine run {:.1?}",
        simulation_time / n_runs as u32
    );
    println!(
        "baseline, engine over the final catalog x {n_runs}: {floor_time:.2?} (the simulation \
         takes {:.2}x that: the runs, plus taking backups, carrying out verdicts, sampling days)",
        simulation_time.as_secs_f64() / floor_time.as_secs_f64()
    );

    // Baseline 2: a replay that never prunes: each tick plans the whole history so far.
    if naive {
        let mut history = Catalog::default();
        let started = Instant::now();
        for backup in &simulation.backups {
            history.backups.push(backup.record.clone());
            let now = backup.taken_at();
            black_box(evaluate(&history, &policy, now).unwrap().n_keep());
        }
        let naive_time = started.elapsed();
        println!(
            "baseline, naive replay over the whole history at each tick: {naive_time:.2?} \
             (the simulation is {:.0}x faster)",
            naive_time.as_secs_f64() / simulation_time.as_secs_f64()
        );
    }
    let goal = Duration::from_secs(1);
    println!(
        "goal: a year of hourly backups under {goal:?}: {}",
        if simulation_time < goal && days <= 365 {
            "met"
        } else if days > 365 {
            "not applicable (period differs)"
        } else {
            "missed"
        }
    );
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}
