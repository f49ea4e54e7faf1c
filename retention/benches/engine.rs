//! Issue 3's benchmark: the engine on 1,000,000 backups next to the time it takes to sort
//! the same 1,000,000 timestamps in the same process, plus peak memory.
//!
//! Run with `CARGO_TARGET_DIR=/work/target-retention cargo bench -p sexton-retention --bench
//! engine`. `SEXTON_BENCH_BACKUPS` changes the size, `SEXTON_BENCH_POLICY` the policy (JSON),
//! `SEXTON_BENCH_VOLUMES=N` gives every backup N volumes with per-volume chains (issue 8; the
//! default, 0, is the single-artifact shape). The catalog is a realistic mix: a full
//! backup every day at midnight, an incremental every other hour, about 1 % failed (the next
//! incremental builds on the last good backup), a tagged backup a month for the last three years, two UTC offsets
//! (summer and winter time), and a binlog segment per day. The records are generated in a
//! shuffled order, as a key-value listing by id returns them, and their strings are
//! allocated in that order, as a deserialiser would.

// A benchmark times itself on the real clock and reads its settings from the environment (or
// the command line) and its memory from /proc: exempt from the crate's clippy.toml, which
// forbids those to the crate itself.
#![allow(clippy::disallowed_methods)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, Datelike, FixedOffset, TimeDelta, TimeZone, Utc};
use sexton_retention::{
    evaluate, restorable, BackupKind, BackupRecord, BackupStatus, BinlogSegment, Catalog, Policy,
    VolumeArtifact,
};

#[path = "support/random.rs"]
mod random;
use random::Random;

const RUNS: usize = 5;

fn main() {
    let n_backups: usize = std::env::var("SEXTON_BENCH_BACKUPS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1_000_000);
    let policy_text = std::env::var("SEXTON_BENCH_POLICY").unwrap_or_else(|_| {
        r#"{"keep_last": 48, "keep_daily": 30, "keep_weekly": 12, "keep_monthly": 24,
            "keep_yearly": 10, "keep_within": "7d", "keep_tags": [["monthly-report"]],
            "retention_duration": 14, "recovery_window": "30d"}"#
            .to_owned()
    });
    let policy = Policy::from_json(&policy_text).expect("the bench policy is valid");
    let n_volumes: usize = std::env::var("SEXTON_BENCH_VOLUMES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0);

    let build_started = Instant::now();
    let (catalog, now) = build_catalog(n_backups, n_volumes);
    let build_time = build_started.elapsed();
    let timestamps: Vec<DateTime<Utc>> = catalog
        .backups
        .iter()
        .map(|backup| {
            backup
                .completed_at
                .or(backup.started_at)
                .expect("every bench backup has a time")
                .with_timezone(&Utc)
        })
        .collect();
    println!(
        "catalog: {} backups ({} failed), {} volumes each, {} binlog segments, built in {:.2?}",
        catalog.backups.len(),
        catalog
            .backups
            .iter()
            .filter(|b| b.status == BackupStatus::Failed)
            .count(),
        n_volumes,
        catalog.binlog_segments.len(),
        build_time
    );
    println!("policy: {}", serde_json::to_string(&policy).unwrap());

    let mut sort_stable = Vec::new();
    let mut sort_unstable = Vec::new();
    let mut engine = Vec::new();
    let rss_before = memory_kib("VmRSS");
    reset_peak_memory();
    let mut peak_during_engine = 0;
    for _ in 0..RUNS {
        let mut copy = timestamps.clone();
        let started = Instant::now();
        copy.sort();
        sort_stable.push(started.elapsed());
        black_box(&copy);

        let mut copy = timestamps.clone();
        let started = Instant::now();
        copy.sort_unstable();
        sort_unstable.push(started.elapsed());
        black_box(&copy);
        drop(copy);

        let rss_at_start = memory_kib("VmRSS");
        reset_peak_memory();
        let started = Instant::now();
        let evaluation = evaluate(&catalog, &policy, now).expect("the bench catalog is valid");
        engine.push(started.elapsed());
        peak_during_engine = peak_during_engine.max(memory_kib("VmHWM") - rss_at_start);
        black_box(&evaluation);
    }
    let evaluation = evaluate(&catalog, &policy, now).unwrap();
    let summary = evaluation.summary();

    let render_started = Instant::now();
    let plan = evaluation.to_plan();
    let render_time = render_started.elapsed();
    let lookup_started = Instant::now();
    let probe = &catalog.backups[catalog.backups.len() / 2].id;
    let deletes_probe = evaluation.deletes(probe);
    let lookup_time = lookup_started.elapsed();
    drop(plan);

    let sort_stable = median(&mut sort_stable);
    let sort_unstable = median(&mut sort_unstable);
    let engine = median(&mut engine);
    println!(
        "plan: keep {} partial {} delete {} (volumes deleted {}) binlog keep {} delete {}, horizon {:?}",
        summary.n_keep,
        summary.n_partial,
        summary.n_delete,
        summary.n_volumes_delete,
        summary.n_binlog_keep,
        summary.n_binlog_delete,
        summary.horizon.map(|h| h.to_rfc3339())
    );
    println!("median of {RUNS} runs:");
    println!("  sort 1M timestamps, slice::sort          {sort_stable:>10.2?}");
    println!("  sort 1M timestamps, slice::sort_unstable {sort_unstable:>10.2?}");
    println!("  engine (evaluate)                        {engine:>10.2?}");
    println!(
        "  ratio engine / sort: {:.2} (stable), {:.2} (unstable); target <= 3",
        ratio(engine, sort_stable),
        ratio(engine, sort_unstable)
    );
    println!("  rendering the owned Plan (1 string per id and reason) {render_time:>10.2?} (not part of the ratio)");
    println!(
        "  one 'does it delete X' lookup on the evaluation {lookup_time:>10.2?} ({deletes_probe})"
    );
    println!(
        "memory: resident before the runs {:.0} MiB (catalog and timestamps), engine's own peak {:.1} MiB, process peak {:.0} MiB",
        rss_before as f64 / 1024.0,
        peak_during_engine as f64 / 1024.0,
        memory_kib("VmHWM").max(rss_before) as f64 / 1024.0
    );

    // Issue 47's recovery value on the same catalog, with its archive and without one (every
    // instant between two backups a gap, each with its reasons), next to the same sort.
    let points_only = Catalog {
        backups: catalog.backups.clone(),
        binlog_segments: Vec::new(),
    };
    let mut with_log = Vec::new();
    let mut without_log = Vec::new();
    let mut shapes = (0, 0, 0, 0);
    for _ in 0..RUNS {
        let started = Instant::now();
        let value = restorable(&catalog, now);
        with_log.push(started.elapsed());
        shapes.0 = value.points.len();
        shapes.1 = value.gaps.len();
        black_box(&value);
        let started = Instant::now();
        let value = restorable(&points_only, now);
        without_log.push(started.elapsed());
        shapes.2 = value.points.len();
        shapes.3 = value.gaps.len();
        black_box(&value);
    }
    let with_log = median(&mut with_log);
    let without_log = median(&mut without_log);
    println!(
        "recovery value (restorable), median of {RUNS} runs: with the archive {with_log:.2?} \
         ({} points, {} gaps) = {:.2} x the stable sort; without one {without_log:.2?} ({} \
         points, {} gaps) = {:.2} x",
        shapes.0,
        shapes.1,
        ratio(with_log, sort_stable),
        shapes.2,
        shapes.3,
        ratio(without_log, sort_stable)
    );
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// A field of `/proc/self/status` in KiB (0 where there is no procfs).
fn memory_kib(field: &str) -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or(0)
}

/// Resets the peak resident size (`VmHWM`) to the current one (Linux `clear_refs`).
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn build_catalog(n_backups: usize, n_volumes: usize) -> (Catalog, DateTime<Utc>) {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let start = Utc.with_ymd_and_hms(1990, 1, 1, 0, 0, 0).unwrap();
    let summer = FixedOffset::east_opt(2 * 3600).unwrap();
    let winter = FixedOffset::east_opt(3600).unwrap();

    // First the chronology: kind, status and parent of each backup in time order.
    let mut failed = vec![false; n_backups];
    let mut parent_of = vec![usize::MAX; n_backups];
    let mut last_good = usize::MAX;
    for hour in 0..n_backups {
        let full = hour % 24 == 0;
        failed[hour] = random.below(100) == 0;
        if !full {
            parent_of[hour] = last_good;
        }
        if !failed[hour] {
            last_good = hour;
        }
    }
    // Then the records in a shuffled order, allocating their strings in that order.
    let mut order: Vec<usize> = (0..n_backups).collect();
    for i in (1..n_backups).rev() {
        let j = random.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let backups = order
        .iter()
        .map(|&hour| {
            let completed = start + TimeDelta::hours(hour as i64) + TimeDelta::minutes(20);
            let offset = if (4..=9).contains(&completed.month()) {
                summer
            } else {
                winter
            };
            let completed_at = completed.with_timezone(&offset);
            let full = hour % 24 == 0;
            // A full whose first backup failed has no good parent yet: take a full instead.
            let parent = parent_of[hour];
            let kind = if full || parent == usize::MAX {
                BackupKind::Full
            } else {
                BackupKind::Incremental
            };
            BackupRecord {
                id: format!("{hour:08x}-5b1c-4e0a-9f0e-backup"),
                completed_at: Some(completed_at),
                started_at: Some(completed_at - TimeDelta::minutes(15)),
                status: if failed[hour] {
                    BackupStatus::Failed
                } else {
                    BackupStatus::Completed
                },
                kind,
                parent: (kind == BackupKind::Incremental)
                    .then(|| format!("{parent:08x}-5b1c-4e0a-9f0e-backup")),
                tags: if hour % (24 * 30) == 12 && hour + 24 * 365 * 3 > n_backups {
                    vec!["monthly-report".to_owned()]
                } else {
                    Vec::new()
                },
                volumes: (0..n_volumes)
                    .map(|volume| VolumeArtifact {
                        name: format!("pvc-{volume}"),
                        kind,
                        parent: (kind == BackupKind::Incremental)
                            .then(|| format!("{parent:08x}-5b1c-4e0a-9f0e-backup")),
                        keys: vec![format!("app/{hour:08x}/pvc-{volume}.qcow2")],
                        failed: failed[hour] && volume == 0,
                        expiring: false,
                        size_bytes: None,
                    })
                    .collect(),
                ..BackupRecord::default()
            }
        })
        .collect();
    let n_days = n_backups / 24 + 1;
    let binlog_segments = (0..n_days)
        .map(|day| {
            let first = start + TimeDelta::days(day as i64);
            BinlogSegment {
                key: format!("binlog/mysql-bin.{day:08}"),
                first_event: Some(first.fixed_offset()),
                last_event: Some(
                    (first + TimeDelta::days(1) - TimeDelta::seconds(1)).fixed_offset(),
                ),
            }
        })
        .collect();
    let now = start + TimeDelta::hours(n_backups as i64) + TimeDelta::minutes(30);
    (
        Catalog {
            backups,
            binlog_segments,
        },
        now,
    )
}
