//! What Object Lock costs over a schedule's life (issue 29), next to the raw
//! `PutObjectRetention` rate of the same SeaweedFS in the same run.
//!
//! 1. **A schedule's life** (pure, no store): `--days` days of `--per-day` backups under a GFS
//!    policy with a lock tier per rule. Before each retention run (one per new backup) the
//!    engine plans, `lock::lock_dates` says how long each kept backup should be locked, and
//!    `lock::extensions` keeps only what lengthens a lock. Counted: locks set (new backups),
//!    extended (a pick whose period ended), requests (× `--objects` per backup), per day.
//!    Backups the plan deletes leave the catalog once their lock has run out, as the deleter
//!    would delete them.
//! 2. **At `--backups` backups** (pure): a group of that many kept backups, every lock already
//!    set; one new backup comes. Timed: plan + lock dates + extensions; counted: requests. The
//!    cost of a run follows what changed, not the catalog's size.
//! 3. **The store** (SeaweedFS, Object Lock bucket): `--raw` objects written, then locked with
//!    raw `PutObjectRetention` requests, 8 in flight: the baseline rate. Then the same number
//!    locked through `ObjectStore::lock_version`, the call the retention-worker makes. From the
//!    rates: store time per day of the schedule's life.
//!
//! ```sh
//! cargo bench -p sexton-tests --bench locks
//! cargo bench -p sexton-tests --profile dev --bench locks -- --days 7 --backups 20000 --raw 200
//! ```

use std::collections::HashMap;
use std::time::Instant;

use chrono::{DateTime, Duration, FixedOffset, Utc};
use futures::StreamExt;
use sexton_retention::{
    evaluate,
    lock::{extensions, lock_dates, parse_lock_duration, LockMode, LockTiers},
    BackupKind, BackupRecord, BackupStatus, Catalog, KeepCount, Policy,
};
use sexton_tests::*;

struct Args {
    days: usize,
    per_day: usize,
    objects: usize,
    backups: usize,
    raw: usize,
}

fn args() -> Args {
    let mut args = Args {
        days: 400,
        per_day: 24,
        objects: 2,
        backups: 100_000,
        raw: 1000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match flag.as_str() {
            "--days" => args.days = value("--days"),
            "--per-day" => args.per_day = value("--per-day"),
            "--objects" => args.objects = value("--objects"),
            "--backups" => args.backups = value("--backups"),
            "--raw" => args.raw = value("--raw"),
            "--bench" => {}
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

fn count(n: u32) -> Option<KeepCount> {
    Some(KeepCount::Limited(std::num::NonZeroU32::new(n).unwrap()))
}

fn policy() -> Policy {
    Policy {
        keep_hourly: count(24),
        keep_daily: count(30),
        keep_weekly: count(8),
        keep_monthly: count(12),
        keep_yearly: count(7),
        ..Policy::default()
    }
}

fn tiers() -> LockTiers {
    let d = |text: &str| Some(parse_lock_duration(text).unwrap());
    LockTiers {
        min: d("1d"),
        hourly: d("2d"),
        daily: d("35d"),
        weekly: d("9w"),
        monthly: d("400d"),
        yearly: d("7y"),
        ..LockTiers::default()
    }
}

fn backup(
    n: usize,
    at: DateTime<FixedOffset>,
    locked_until: Option<DateTime<Utc>>,
) -> BackupRecord {
    BackupRecord {
        id: format!("b{n:08}"),
        completed_at: Some(at),
        status: BackupStatus::Completed,
        kind: BackupKind::Full,
        locked_until,
        ..BackupRecord::default()
    }
}

#[derive(Default)]
struct Day {
    set: usize,
    extended: usize,
}

/// Part 1: per day, the locks a retention run per backup sets and extends.
fn life(args: &Args) -> Vec<Day> {
    let policy = policy();
    let tiers = tiers();
    let start = DateTime::parse_from_rfc3339("2026-01-01T00:30:00+00:00").unwrap();
    let step = Duration::seconds(86_400 / args.per_day as i64);
    let mut catalog = Catalog::default();
    let mut days = Vec::new();
    let mut n = 0;
    for _ in 0..args.days {
        let mut day = Day::default();
        for _ in 0..args.per_day {
            let at = start + step * n as i32;
            n += 1;
            catalog.backups.push(backup(n, at, None));
            let now = at.with_timezone(&Utc) + Duration::minutes(1);
            let plan = evaluate(&catalog, &policy, now).unwrap().to_plan();
            let wanted = lock_dates(&catalog, &plan, &tiers);
            let current: HashMap<String, Option<DateTime<Utc>>> = catalog
                .backups
                .iter()
                .map(|b| (b.id.clone(), b.locked_until))
                .collect();
            let longer: Vec<(String, DateTime<Utc>)> =
                extensions(&wanted, |id| current.get(id).copied().flatten(), now)
                    .into_iter()
                    .map(|(id, until)| (id.to_string(), until))
                    .collect();
            for (id, until) in longer {
                let record = catalog.backups.iter_mut().find(|b| b.id == id).unwrap();
                if record.locked_until.is_none() {
                    day.set += 1;
                } else {
                    day.extended += 1;
                }
                record.locked_until = Some(until);
            }
            // What the plan deletes goes (its lock, if any, ran out: the plan keeps it else).
            catalog.backups.retain(|b| plan.keeps(&b.id));
        }
        days.push(day);
    }
    days
}

/// Part 2: a run over `n` kept backups, all locked as wanted, after one new backup.
fn at_scale(n: usize) -> (std::time::Duration, usize, usize) {
    let tiers = tiers();
    let policy = Policy {
        keep_last: count(n as u32 + 1),
        ..policy()
    };
    let start = DateTime::parse_from_rfc3339("2016-01-01T00:30:00+00:00").unwrap();
    let step = Duration::hours(1);
    let mut catalog = Catalog {
        backups: (0..n)
            .map(|i| backup(i, start + step * i as i32, None))
            .collect(),
        binlog_segments: Vec::new(),
    };
    let now = (start + step * n as i32).with_timezone(&Utc);
    let plan = evaluate(&catalog, &policy, now).unwrap().to_plan();
    let wanted = lock_dates(&catalog, &plan, &tiers);
    for record in &mut catalog.backups {
        record.locked_until = wanted.get(&record.id).copied();
    }
    catalog
        .backups
        .push(backup(n, start + step * n as i32, None));
    let now = now + Duration::minutes(1);
    let began = Instant::now();
    let plan = evaluate(&catalog, &policy, now).unwrap().to_plan();
    let wanted = lock_dates(&catalog, &plan, &tiers);
    let current: HashMap<&str, Option<DateTime<Utc>>> = catalog
        .backups
        .iter()
        .map(|b| (b.id.as_str(), b.locked_until))
        .collect();
    let longer = extensions(&wanted, |id| current.get(id).copied().flatten(), now);
    let took = began.elapsed();
    let new = longer
        .iter()
        .filter(|(id, _)| current[id].is_none())
        .count();
    (took, new, longer.len() - new)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = args();

    let began = Instant::now();
    let days = life(&args);
    let simulated = began.elapsed();
    let total_set: usize = days.iter().map(|d| d.set).sum();
    let total_extended: usize = days.iter().map(|d| d.extended).sum();
    let backups = args.days * args.per_day;
    println!(
        "schedule's life: {} days × {} backups, {} objects each, policy hourly 24 / daily 30 / \
         weekly 8 / monthly 12 / yearly 7, tiers min 1d / hourly 2d / daily 35d / weekly 9w / \
         monthly 400d / yearly 7y ({:.1} s to simulate)",
        args.days,
        args.per_day,
        args.objects,
        simulated.as_secs_f64()
    );
    println!(
        "  locks set {total_set}, extended {total_extended}: {:.3} lock requests per backup \
         ({:.2} extensions per backup)",
        (total_set + total_extended) as f64 * args.objects as f64 / backups as f64,
        total_extended as f64 / backups as f64
    );
    let busiest = days
        .iter()
        .map(|d| (d.set + d.extended) * args.objects)
        .max()
        .unwrap_or(0);
    let per_day = (total_set + total_extended) * args.objects / args.days.max(1);
    println!("  requests per day: {per_day} on average, {busiest} on the busiest day");

    let (took, new, extended) = at_scale(args.backups);
    println!(
        "at {} kept backups, one new: plan + lock dates + extensions {:.1} ms; {} to lock, {} \
         to extend ({} requests)",
        args.backups,
        took.as_secs_f64() * 1e3,
        new,
        extended,
        (new + extended) * args.objects
    );

    // Part 3: the store.
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.s3.bucket = "locked".into();
    let store = object_store(&config).await;
    store
        .client()
        .create_bucket()
        .bucket("locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    let keys: Vec<String> = (0..args.raw * 2)
        .map(|i| format!("bench/o{i:06}"))
        .collect();
    let versions: Vec<(String, Option<String>)> = futures::stream::iter(keys.clone())
        .map(|key| {
            let store = store.clone();
            async move {
                let out = store
                    .client()
                    .put_object()
                    .bucket("locked")
                    .key(&key)
                    .body(aws_sdk_s3::primitives::ByteStream::from_static(b"x"))
                    .send()
                    .await
                    .unwrap();
                (key, out.version_id().map(str::to_string))
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let until = Utc::now() + Duration::days(1);
    let (raw, sexton) = versions.split_at(args.raw);
    let began = Instant::now();
    futures::stream::iter(raw.iter().cloned())
        .map(|(key, version)| {
            let store = store.clone();
            async move {
                let retention = aws_sdk_s3::types::ObjectLockRetention::builder()
                    .mode(aws_sdk_s3::types::ObjectLockRetentionMode::Governance)
                    .retain_until_date(aws_sdk_s3::primitives::DateTime::from_secs(
                        until.timestamp(),
                    ))
                    .build();
                store
                    .client()
                    .put_object_retention()
                    .bucket("locked")
                    .key(&key)
                    .set_version_id(version)
                    .retention(retention)
                    .send()
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    let raw_rate = args.raw as f64 / began.elapsed().as_secs_f64();
    let began = Instant::now();
    futures::stream::iter(sexton.iter().cloned())
        .map(|(key, version)| {
            let store = store.clone();
            async move {
                store
                    .lock_version(&key, version.as_deref(), LockMode::Governance, until)
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    let sexton_rate = sexton.len() as f64 / began.elapsed().as_secs_f64();
    println!(
        "store: raw PutObjectRetention {raw_rate:.0}/s, through ObjectStore::lock_version \
         {sexton_rate:.0}/s ({:.0} % of raw), 8 in flight, {} requests each",
        sexton_rate / raw_rate * 100.0,
        args.raw
    );
    println!(
        "  a day of the schedule's life costs {:.3} s of store time on average, {:.3} s on the \
         busiest day",
        per_day as f64 / sexton_rate,
        busiest as f64 / sexton_rate
    );
    drop(s3);
    drop(nats);
}
