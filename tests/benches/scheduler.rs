//! The scheduler at scale, against a real nats-server: 100,000 schedules with mixed specs on one
//! release-built `sexton-scheduler` process.
//!
//! ```sh
//! cargo bench -p sexton-tests --bench scheduler
//! SEXTON_BENCH_SCHEDULES=20000 SEXTON_BENCH_MINUTES=2 cargo bench -p sexton-tests --bench scheduler
//! ```
//!
//! It prints, with a baseline measured in the same run:
//!
//! * **lateness** of firing (the instant the stream stored the `due-backup` minus the tick it is
//!   for), p50 / p99 / max over every firing in a few minutes, against the same figure for one
//!   schedule firing alone;
//! * **idle CPU**: the process's CPU time over the seconds of a minute when nothing is due,
//!   against the same process holding no schedule at all;
//! * **memory per schedule**: resident-set growth from the empty process to the loaded one;
//! * the **load rate**: concurrent key-value creates per second (the raw write rate) and how long
//!   the scheduler's watch took to hold every schedule.
//!
//! The mix is what a fleet of Velero users writes: hourly and daily runs at random minutes,
//! weekday and weekly runs in several zones, monthly runs, `@every` with periods of 15 min to
//! 12 h, and descriptors. Every spec fires at second 0 of a minute (the `@every` ones are
//! created at whole minutes), so the seconds between are the idle window, and each minute
//! boundary is a burst of several hundred firings: the lateness is a burst's.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use chrono::{DateTime, Duration as Delta, DurationRound, Timelike, Utc};
use futures::StreamExt;
use sexton_model::records::{ScheduleRecord, ScheduleStatus, RECORD_SCHEMA_VERSION};
use sexton_tests::*;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A random spec of the mix, and the creation instant that puts its `@every` runs on whole
/// minutes with the first run still ahead.
fn spec(rng: &mut Rng, now: DateTime<Utc>) -> (String, DateTime<Utc>) {
    const ZONES: &[&str] = &[
        "Europe/Berlin",
        "America/New_York",
        "Asia/Kolkata",
        "Australia/Sydney",
        "America/Sao_Paulo",
    ];
    let minute = rng.below(60);
    let hour = rng.below(24);
    let roll = rng.below(100);
    let created = now;
    let cron = match roll {
        0..=29 => format!("{minute} * * * *"),
        30..=59 => format!("{minute} {hour} * * *"),
        60..=69 => format!(
            "CRON_TZ={} {minute} {hour} * * 1-5",
            ZONES[rng.below(ZONES.len() as u64) as usize]
        ),
        70..=79 => format!("{minute} {hour} * * {}", rng.below(7)),
        80..=84 => format!("{minute} {hour} {} * *", 1 + rng.below(28)),
        85..=94 => {
            let period = [15u64, 30, 60, 120, 360, 720][rng.below(6) as usize];
            // Created on a whole minute less than one period ago: runs fall on whole minutes,
            // and the first is still to come (no catch-up firing at load).
            let phase = rng.below(period);
            let created =
                now.duration_trunc(Delta::minutes(1)).unwrap() - Delta::minutes(phase as i64);
            let every = if period.is_multiple_of(60) {
                format!("@every {}h", period / 60)
            } else {
                format!("@every {period}m")
            };
            return (every, created);
        }
        _ => ["@hourly", "@daily", "@weekly", "@monthly"][rng.below(4) as usize].to_string(),
    };
    (cron, created)
}

fn record(name: String, cluster: u64, cron: String, created_at: DateTime<Utc>) -> ScheduleRecord {
    ScheduleRecord {
        schema_version: RECORD_SCHEMA_VERSION,
        name: name.parse().unwrap(),
        cluster: format!("db-{cluster}").parse().unwrap(),
        plan: "full".parse().unwrap(),
        cron,
        paused: false,
        skip_immediately: None,
        policy: sexton_model::records::Policy::from_json(r#"{"keep_last": 7, "keep_daily": 7}"#)
            .unwrap(),
        labels: Default::default(),
        remote_cleanup: false,
        overlap_policy: Default::default(),
        starting_deadline_seconds: None,
        jitter: None,
        exclude: Vec::new(),
        on_blackout: Default::default(),
        pause_after_failures: None,
        annotations: Default::default(),
        full_every: None,
        volumes: Vec::new(),
        backup_owner: Default::default(),
        verify: None,
        breaker: None,
        copies: Vec::new(),
        objectives: None,
        created_at,
        generation: 1,
        status: ScheduleStatus {
            // As the API stores a new schedule that has been evaluated once.
            phase: sexton_model::records::SchedulePhase::Enabled,
            observed_generation: 1,
            ..Default::default()
        },
    }
}

/// Resident set size of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS")
}

/// CPU time of every thread of `pid` (user + system), in nanoseconds, from schedstat.
fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("proc task")
        .filter_map(|task| {
            let path = task.ok()?.path().join("schedstat");
            let text = std::fs::read_to_string(path).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

fn metric(port: u16, name: &str) -> Option<f64> {
    let (_, page) = http_get(port, "/metrics")?;
    page.lines()
        .find(|line| line.starts_with(name) && line[name.len()..].starts_with(' '))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Lateness in milliseconds of every firing stored since `since`, sorted, and the largest
/// number of firings that shared one tick (the biggest burst).
async fn lateness_ms(
    js: &async_nats::jetstream::Context,
    since: DateTime<Utc>,
    skip: &BTreeSet<String>,
) -> (Vec<f64>, usize, Vec<String>) {
    let events: Vec<DueEvent> = due_events(js)
        .await
        .into_iter()
        .filter(|e| e.stored_at >= since && !skip.contains(&e.schedule))
        .collect();
    let ms = |e: &DueEvent| (e.stored_at - e.tick).num_microseconds().unwrap() as f64 / 1e3;
    let mut per_tick = std::collections::BTreeMap::<DateTime<Utc>, Vec<f64>>::new();
    for event in &events {
        per_tick.entry(event.tick).or_default().push(ms(event));
    }
    let bursts: Vec<String> = per_tick
        .iter_mut()
        .filter(|(_, late)| late.len() >= 10)
        .map(|(tick, late)| {
            late.sort_by(f64::total_cmp);
            format!(
                "{}: {} firings, p50 {:.1} ms, max {:.1} ms",
                tick.format("%H:%M:%S"),
                late.len(),
                percentile(late, 0.5),
                late.last().unwrap()
            )
        })
        .collect();
    let biggest = per_tick.values().map(Vec::len).max().unwrap_or(0);
    let mut late: Vec<f64> = events.iter().map(ms).collect();
    late.sort_by(f64::total_cmp);
    (late, biggest, bursts)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(wait) = (at - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n_schedules = env_number("SEXTON_BENCH_SCHEDULES", 100_000);
    let minutes = env_number("SEXTON_BENCH_MINUTES", 3);
    let load_at_start = load_average();
    let nats = Nats::start();
    let mut config = nats_config(&nats);
    let port = free_port();
    config.http.listen = format!("127.0.0.1:{port}");
    let logs = tempfile::tempdir().unwrap();
    let mut scheduler = ServiceProcess::start("sexton-scheduler", &[], &config, logs.path());
    let pid = scheduler.pid().unwrap();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topology = eventually("the scheduler's topology", Duration::from_secs(60), || {
        let js = js.clone();
        async move { sexton_shared::topology::ensure(&js, 1).await.ok() }
    })
    .await;
    eventually(
        "the scheduler's metrics",
        Duration::from_secs(30),
        || async { metric(port, "sexton_schedules") },
    )
    .await;

    // Baselines: the empty process, idle; one schedule firing alone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_empty = rss_kib(pid);
    let idle_seconds = 20;
    let cpu_before = cpu_ns(pid);
    tokio::time::sleep(Duration::from_secs(idle_seconds)).await;
    let cpu_empty_ns = cpu_ns(pid) - cpu_before;

    let alone = record("alone".into(), 0, "@every 1s".into(), Utc::now());
    topology
        .schedules
        .create("alone", serde_json::to_vec(&alone).unwrap().into())
        .await
        .unwrap();
    let alone_since = Utc::now();
    tokio::time::sleep(Duration::from_secs(30)).await;
    topology.schedules.delete("alone").await.unwrap();
    let (alone_late, _, _) = lateness_ms(&js, alone_since, &BTreeSet::new()).await;

    // Load: concurrent creates straight into the bucket, as many at once as NATS allows.
    let mut rng = Rng::seeded(0x5e_c700);
    let now = Utc::now();
    let records: Vec<ScheduleRecord> = (0..n_schedules)
        .map(|i| {
            let (cron, created) = spec(&mut rng, now);
            record(format!("s{i:06}"), i / 50, cron, created)
        })
        .collect();
    let bodies: Vec<(String, bytes::Bytes)> = records
        .iter()
        .map(|r| (r.name.to_string(), serde_json::to_vec(r).unwrap().into()))
        .collect();
    let average_json = bodies.iter().map(|(_, b)| b.len()).sum::<usize>() / bodies.len();
    let load_started = Instant::now();
    let store = topology.schedules.clone();
    let failures = futures::stream::iter(bodies)
        .map(|(key, body)| {
            let store = store.clone();
            async move { store.create(&key, body).await.is_err() }
        })
        .buffer_unordered(1024)
        .filter(|failed| futures::future::ready(*failed))
        .count()
        .await;
    assert_eq!(failures, 0, "some creates failed");
    let write_seconds = load_started.elapsed().as_secs_f64();
    eventually(
        "every schedule in the timer queue",
        Duration::from_secs(600),
        || async { metric(port, "sexton_schedules").filter(|n| *n as u64 >= n_schedules) },
    )
    .await;
    let loaded_seconds = load_started.elapsed().as_secs_f64();
    // Let the watch's buffers drain and the allocator settle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rss_loaded = rss_kib(pid);

    // Idle: from second 3 to second 57 of a minute nothing is due.
    let mut minute = Utc::now().duration_trunc(Delta::minutes(1)).unwrap() + Delta::minutes(1);
    if Utc::now().second() > 50 {
        minute += Delta::minutes(1);
    }
    sleep_until(minute + Delta::seconds(3)).await;
    let idle_from = Instant::now();
    let cpu_before = cpu_ns(pid);
    sleep_until(minute + Delta::seconds(57)).await;
    let cpu_loaded_ns = cpu_ns(pid) - cpu_before;
    let idle_loaded_seconds = idle_from.elapsed().as_secs_f64();

    // Firing: the bursts at the next minute boundaries.
    let fire_since = Utc::now();
    sleep_until(minute + Delta::minutes(minutes as i64) + Delta::seconds(20)).await;
    let skip: BTreeSet<String> = ["alone".to_string()].into();
    let (late, biggest_burst, bursts) = lateness_ms(&js, fire_since, &skip).await;
    let cpu_share = |ns: u64, seconds: f64| ns as f64 / 1e9 / seconds * 100.0;

    println!();
    println!(
        "scheduler benchmark: {n_schedules} schedules, one release-built replica, nats-server 2.15.1, {} cores, load average {load_at_start} at start, {} at end",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average()
    );
    println!(
        "  load: {n_schedules} concurrent KV creates in {write_seconds:.1} s ({:.0}/s raw write rate, {average_json} B of JSON each); all in the timer queue after {loaded_seconds:.1} s",
        n_schedules as f64 / write_seconds
    );
    println!(
        "  lateness, {} firings over {minutes} minute boundaries (bursts of up to {biggest_burst} sharing a tick): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        late.len(),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.last().copied().unwrap_or(f64::NAN)
    );
    for burst in &bursts {
        println!("    burst at {burst}");
    }
    println!(
        "  baseline, one schedule alone ({} firings): p50 {:.1} ms, p99 {:.1} ms; ratio p50 {:.1}x, p99 {:.1}x",
        alone_late.len(),
        percentile(&alone_late, 0.5),
        percentile(&alone_late, 0.99),
        percentile(&late, 0.5) / percentile(&alone_late, 0.5),
        percentile(&late, 0.99) / percentile(&alone_late, 0.99)
    );
    println!(
        "  idle CPU with {n_schedules} schedules: {:.3} s over {idle_loaded_seconds:.0} s ({:.3} %); empty process: {:.3} s over {idle_seconds} s ({:.3} %)",
        cpu_loaded_ns as f64 / 1e9,
        cpu_share(cpu_loaded_ns, idle_loaded_seconds),
        cpu_empty_ns as f64 / 1e9,
        cpu_share(cpu_empty_ns, idle_seconds as f64),
    );
    println!(
        "  memory: RSS {} MiB empty, {} MiB loaded: {:.0} B per schedule",
        rss_empty / 1024,
        rss_loaded / 1024,
        (rss_loaded.saturating_sub(rss_empty)) as f64 * 1024.0 / n_schedules as f64
    );
    let scheduler_late = metric(port, "sexton_fire_lateness_seconds_count");
    println!("  (the scheduler's own count of firings: {scheduler_late:?})");
    assert!(scheduler.is_running(), "{}", scheduler.logs());
    scheduler.terminate(Duration::from_secs(30));
}
