//! Issue 17's engine figure without the CLI: `evaluate` and `plan` (evaluate + the owned
//! `Plan`) on the catalog of `cli/benches/offline_plan.rs`, built in memory, timed in the same
//! process and alternated run by run, so that the ratio is not skewed by a noisy neighbour;
//! as wall time and as the thread's time on a CPU.
//!
//! The catalog: one backup every 5 minutes (a full at midnight, incrementals on the last good
//! backup, about 1 % failed, a `manual` tag once a week), its records and their strings
//! allocated in a shuffled order as a deserialiser reading a key-value listing would
//! (`--sorted`: oldest first). The policy is the issue's: keep last 10, hourly 48, daily 30,
//! weekly 12, monthly 24, yearly unlimited, within 7d, tag `manual`.
//!
//! ```sh
//! cargo bench -p sexton-retention --bench plan -- [--backups 1000000] [--runs 5] [--sorted]
//! ```
//!
//! `--plan-only` runs `plan` alone in a loop (for a profiler).
//!
//! The floor printed beside them: as many empty decisions (no string, no list, nothing
//! allocated but the list itself) pushed into a new list, alternated with the two. Any owned
//! plan of `Decision`s writes that much new memory; on a machine where a new page is dear
//! (a virtual machine: about 1.8 µs a page here), that alone is a large part of `evaluate`.

// A benchmark times itself on the real clock and reads its settings from the environment (or
// the command line) and its memory from /proc: exempt from the crate's clippy.toml, which
// forbids those to the crate itself.
#![allow(clippy::disallowed_methods)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sexton_retention::{
    evaluate, plan, BackupKind, BackupRecord, BackupStatus, Catalog, Decision, Policy,
};

#[path = "support/catalog.rs"]
mod catalog;

const POLICY: &str = r#"{"keep_last": 10, "keep_hourly": 48, "keep_daily": 30, "keep_weekly": 12,
    "keep_monthly": 24, "keep_yearly": -1, "keep_within": "7d", "keep_tags": [["manual"]]}"#;

fn main() {
    let mut backups = 1_000_000;
    let mut runs = 5;
    let mut sorted = false;
    let mut plan_only = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--backups" => backups = it.next().and_then(|v| v.parse().ok()).expect("a number"),
            "--runs" => runs = it.next().and_then(|v| v.parse().ok()).expect("a number"),
            "--sorted" => sorted = true,
            "--plan-only" => plan_only = true,
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    let (catalog, now) = build_catalog(backups, sorted);
    let policy = Policy::from_json(POLICY).expect("the bench policy is valid");
    println!(
        "catalog: {backups} backups, {}",
        if sorted { "oldest first" } else { "shuffled" }
    );
    if plan_only {
        for _ in 0..runs {
            let started = Instant::now();
            let owned = plan(&catalog, &policy, now).unwrap();
            println!("  plan {:.2?}", started.elapsed());
            black_box(&owned);
            drop(owned);
            settle_heap();
        }
        return;
    }
    let (mut evaluations, mut plans) = (Vec::new(), Vec::new());
    let (mut evaluations_cpu, mut plans_cpu) = (Vec::new(), Vec::new());
    let mut floors = Vec::new();
    for _ in 0..runs {
        let (wall, _) = timed(|| empty_decisions(backups));
        floors.push(wall);

        let (wall, cpu) = timed(|| evaluate(&catalog, &policy, now).unwrap());
        evaluations.push(wall);
        evaluations_cpu.push(cpu);

        let (wall, cpu) = timed(|| plan(&catalog, &policy, now).unwrap());
        plans.push(wall);
        plans_cpu.push(cpu);
        settle_heap();
    }
    let evaluate_median = median(&mut evaluations.clone());
    let floor = median(&mut floors);
    println!(
        "floor: {backups} empty decisions of {} bytes pushed into a new list: median {floor:.2?} = {:.2}x evaluate (wall time)",
        std::mem::size_of::<Decision>(),
        floor.as_secs_f64() / evaluate_median.as_secs_f64()
    );
    report("wall time", runs, evaluations, plans);
    if cpu_time() > Duration::ZERO {
        report("time on a CPU", runs, evaluations_cpu, plans_cpu);
    }
}

/// Prints medians, fastest runs and per-run ratios.
fn report(what: &str, runs: usize, mut evaluations: Vec<Duration>, mut plans: Vec<Duration>) {
    let ratios: Vec<String> = evaluations
        .iter()
        .zip(&plans)
        .map(|(e, p)| format!("{:.2}", p.as_secs_f64() / e.as_secs_f64()))
        .collect();
    let (evaluate_min, plan_min) = (
        *evaluations.iter().min().unwrap(),
        *plans.iter().min().unwrap(),
    );
    let (evaluate_median, plan_median) = (median(&mut evaluations), median(&mut plans));
    println!("{what}, {runs} runs, median (fastest):");
    println!("  evaluate                      {evaluate_median:>10.2?} ({evaluate_min:.2?})");
    println!(
        "  plan (evaluate + owned Plan)  {plan_median:>10.2?} ({plan_min:.2?})  {:.2}x evaluate ({:.2}x; goal <= 2; per run {})",
        plan_median.as_secs_f64() / evaluate_median.as_secs_f64(),
        plan_min.as_secs_f64() / evaluate_min.as_secs_f64(),
        ratios.join(" ")
    );
}

/// Runs `f` and drops what it made, untimed: the wall time and this thread's time on a CPU
/// that making it took.
fn timed<T>(f: impl FnOnce() -> T) -> (Duration, Duration) {
    let (started, cpu) = (Instant::now(), cpu_time());
    let made = f();
    let times = (started.elapsed(), cpu_time() - cpu);
    black_box(&made);
    drop(made);
    times
}

/// This thread's time on a CPU (`/proc/thread-self/schedstat`, in nanoseconds; zero where
/// there is none): on a machine shared with builds, wall time counts the time others ran.
fn cpu_time() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// Dropping a plan frees two million small blocks into glibc's fast bins, and the next large
/// allocation coalesces them all (`malloc_consolidate`, a tenth of a second at a million
/// backups). That bill is the drop's: paid here, untimed, not by the next `evaluate`.
fn settle_heap() {
    black_box(Vec::<u8>::with_capacity(4096));
}

/// `n` decisions that allocate nothing of their own, in a list of their own: the memory any
/// owned plan writes.
fn empty_decisions(n: usize) -> Vec<Decision> {
    let empty = Decision {
        id: String::new(),
        reasons: Default::default(),
        remove_objects: true,
        status: BackupStatus::Completed,
        kind: BackupKind::Full,
        completed_at: None,
        volumes_keep: Vec::new(),
        volumes_delete: Vec::new(),
    };
    let mut list = Vec::with_capacity(n);
    list.extend(std::iter::repeat_n(empty, n));
    list
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The issue's catalog ([`catalog::issue_catalog`]) as engine records, and the `now` to
/// decide at.
fn build_catalog(n_backups: usize, sorted: bool) -> (Catalog, DateTime<Utc>) {
    let (slots, now) = catalog::issue_catalog(n_backups, sorted);
    let backups = slots
        .into_iter()
        .map(|backup| BackupRecord {
            id: format!("db1-{:08}", backup.slot),
            completed_at: Some(backup.completed.fixed_offset()),
            started_at: Some(backup.started.fixed_offset()),
            status: if backup.failed {
                BackupStatus::Failed
            } else {
                BackupStatus::Completed
            },
            kind: if backup.parent.is_some() {
                BackupKind::Incremental
            } else {
                BackupKind::Full
            },
            parent: backup.parent.map(|parent| format!("db1-{parent:08}")),
            tags: if backup.manual {
                vec!["manual".to_owned()]
            } else {
                Vec::new()
            },
            ..BackupRecord::default()
        })
        .collect();
    (
        Catalog {
            backups,
            binlog_segments: Vec::new(),
        },
        now,
    )
}
