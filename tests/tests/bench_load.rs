//! Scenario 7, load: backup completions reported straight to `sexton.v1.report.*` at a fixed
//! rate (500/s by default) for a bounded time, through report → retention → deletion, with the
//! services as processes. It prints the throughput each stage sustained, the latency from the
//! `checkpoint-complete` that expires a backup to its record leaving the catalog (after its
//! objects are gone), the CPU each process used, and, measured on the same server in the same
//! run, the raw JetStream publish → consume rate as the ceiling.
//!
//! A bench, not a timed test: it is ignored unless asked for.
//!
//! ```sh
//! cargo test --release -p sexton-tests --test bench_load -- --ignored --nocapture
//! ```
//!
//! Knobs (environment): `SEXTON_BENCH_RATE` (completions/s, 500), `SEXTON_BENCH_SECONDS` (30),
//! `SEXTON_BENCH_CLUSTERS` (20; one paused schedule keeping the newest backup per cluster),
//! `SEXTON_BENCH_REPLICAS` (of each service, 1), `SEXTON_BENCH_DELETER_CONCURRENCY` (4),
//! `SEXTON_BENCH_WARM` (set: each cluster's first two backups, the first deleted, before the
//! clock starts, so the figures leave out each view's first listing).
//! `scaling_bench` prints issue 32's table (see its comment).
//! Each backup has one 32-byte object, written before the clock starts.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use async_nats::jetstream::{self, consumer::pull, message::PublishMessage, stream};
use futures::StreamExt;
use serde_json::json;
use sexton_shared::topology;
use sexton_tests::{fault::*, *};

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    Some(sorted[rank.min(sorted.len() - 1)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a bench: run with --ignored (and --release)"]
async fn load_bench() {
    let figures = run_load(Load {
        rate: knob("SEXTON_BENCH_RATE", 500),
        seconds: knob("SEXTON_BENCH_SECONDS", 30),
        clusters: knob("SEXTON_BENCH_CLUSTERS", 20) as usize,
        replicas: knob("SEXTON_BENCH_REPLICAS", 1) as usize,
        warm: std::env::var_os("SEXTON_BENCH_WARM").is_some(),
    })
    .await;
    record_figures("load", figures);
}

/// The scaling table of issue 32 in one run: the same steady rate with 20 clusters and with
/// `SEXTON_BENCH_MANY_CLUSTERS` (2,000), each with one and with three replicas of every
/// service, every cluster warmed up first (its first backup recorded and its views listed,
/// a one-time cost) so the figures are the steady path's. The first row is the baseline the
/// others are divided by.
///
/// ```sh
/// SEXTON_BENCH_RATE=60 cargo test --release -p sexton-tests --test bench_load scaling -- --ignored --nocapture
/// ```
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a bench: run with --ignored (and --release)"]
async fn scaling_bench() {
    let rate = knob("SEXTON_BENCH_RATE", 60);
    let seconds = knob("SEXTON_BENCH_SECONDS", 30);
    let many = knob("SEXTON_BENCH_MANY_CLUSTERS", 2000) as usize;
    let mut rows = Vec::new();
    for (clusters, replicas) in [(20, 1), (20, 3), (many, 1), (many, 3)] {
        let figures = run_load(Load {
            rate,
            seconds,
            clusters,
            replicas,
            warm: true,
        })
        .await;
        rows.push(figures);
    }
    let base = &rows[0];
    let ratio = |row: &serde_json::Value, pointer: &str| match (
        row.pointer(pointer).and_then(|v| v.as_f64()),
        base.pointer(pointer).and_then(|v| v.as_f64()),
    ) {
        (Some(value), Some(base)) if base > 0.0 => format!("{value:.1} ({:.2}×)", value / base),
        (Some(value), _) => format!("{value:.1}"),
        _ => "—".into(),
    };
    println!();
    println!("| clusters | replicas | offered | end to end | p50 / p99 checkpoint → gone | CPU-ms per completion | NATS messages in / out per completion | conflicts + reruns per completion | jobs handled per deletion | consumers created |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for row in &rows {
        println!(
            "| {} | {} | {}/s × {} s | {:.0}/s | {:.0} / {:.0} ms | {} | {} / {} | {:.4} | {:.2} | {} |",
            row["clusters"],
            row["replicas_per_service"],
            row["offered_rate_per_s"],
            seconds,
            row["end_to_end_rate_per_s"].as_f64().unwrap_or(0.0),
            row.pointer("/latency_ms/p50").and_then(|v| v.as_f64()).unwrap_or(f64::NAN),
            row.pointer("/latency_ms/p99").and_then(|v| v.as_f64()).unwrap_or(f64::NAN),
            ratio(row, "/cpu_ms_per_completion"),
            ratio(row, "/nats/messages_in_per_completion"),
            ratio(row, "/nats/messages_out_per_completion"),
            row["conflicts_and_reruns_per_completion"].as_f64().unwrap_or(f64::NAN),
            row["delete_jobs_handled_per_deletion"].as_f64().unwrap_or(f64::NAN),
            row["consumers_created"],
        );
    }
    // Memory per cluster: what the many-cluster run's processes hold beyond the 20-cluster
    // run's, per cluster more, by service (one replica each).
    let mut memory = serde_json::Map::new();
    if let (Some(small), Some(large)) = (
        rows[0]["rss_kib"].as_object(),
        rows[2]["rss_kib"].as_object(),
    ) {
        for (service, kib) in large {
            if let (Some(large), Some(small)) =
                (kib.as_f64(), small.get(service).and_then(|v| v.as_f64()))
            {
                let per_cluster = (large - small) * 1024.0 / (many - 20).max(1) as f64;
                println!("memory per cluster, {service}: {per_cluster:.0} B");
                memory.insert(service.clone(), json!(per_cluster));
            }
        }
    }
    record_figures(
        "load-scaling",
        json!({"rows": rows, "memory_bytes_per_cluster": memory}),
    );
}

/// One load run's parameters.
struct Load {
    rate: u64,
    seconds: u64,
    clusters: usize,
    replicas: usize,
    /// Record each cluster's first backup (and let every replica list its views) before the
    /// clock starts, so the figures leave out that one-time cost.
    warm: bool,
}

/// Runs one load against servers and a fleet of its own; returns its figures.
async fn run_load(load: Load) -> serde_json::Value {
    let Load {
        rate,
        seconds,
        clusters,
        replicas,
        warm,
    } = load;
    // Warming up gives each cluster two backups, the first deleted: each service has listed
    // the cluster's views and decided on it once.
    let warmup = if warm { 2 * clusters } else { 0 };
    let total = (rate * seconds) as usize + warmup;

    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.deleter.concurrency = knob("SEXTON_BENCH_DELETER_CONCURRENCY", 4) as usize;
    let mut fleet = ProcessFleet::start_roles(
        &config,
        replicas,
        &[Role::Scheduler, Role::RetentionWorker, Role::Deleter],
    );
    fleet.wait_ready(Duration::from_secs(120));
    // The retention-workers' and the deleters' partitions settled among the replicas (issue
    // 32): the bench measures the steady path, not a rebalance.
    for role in [Role::RetentionWorker, Role::Deleter] {
        wait_partitions_settled(&mut fleet, role, Duration::from_secs(120)).await;
    }
    let client = client(&nats.url()).await;
    let js = jetstream::new(client.clone());
    let store = object_store(&config).await;

    // One paused schedule per cluster gives it a policy: keep the newest backup only, so each
    // completion expires the one before it.
    let mut loads = Vec::new();
    for c in 0..clusters {
        let schedule = LoadSchedule {
            name: format!("bench-{c}"),
            cluster: format!("bench-c{c}"),
            interval: Duration::from_secs(86_400),
            keep_last: 1,
        };
        api(
            &client,
            "schedule",
            "create",
            json!({"schema_version": 1, "name": schedule.name, "cluster": schedule.cluster,
                   "plan": "full", "cron": "@daily", "paused": true, "policy": {"keep_last": 1},
                   // A run deletes most of the group on purpose: no circuit breaker.
                   "breaker": {"enabled": false}}),
        )
        .await
        .expect("a bench schedule");
        loads.push(ReportLoad::new(schedule));
    }
    // Backup n belongs to cluster n % clusters; its objects (data, then the metadata.json
    // intake reads) are written before the clock starts.
    let written = Instant::now();
    futures::stream::iter(0..total)
        .map(|n| {
            let store = store.clone();
            let objects = loads[n % clusters].objects_of("backups", n);
            async move {
                for (key, body) in objects {
                    // SeaweedFS answers an occasional 500 on a loaded machine: retry those.
                    let mut attempt = 0;
                    loop {
                        match store.put(&key, body.clone()).await {
                            Ok(()) => break,
                            Err(err) if !err.permanent && attempt < 5 => {
                                attempt += 1;
                                tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                            }
                            Err(err) => panic!("writing bench object {key}: {err}"),
                        }
                    }
                }
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    let prewrite = written.elapsed();

    // What the servers see: checkpoint-complete events and catalog removals, as they happen.
    let checkpoints: Arc<Mutex<BTreeMap<String, Instant>>> = Default::default();
    let removals: Arc<Mutex<BTreeMap<String, Instant>>> = Default::default();
    let mut checkpoint_sub = client
        .subscribe("sexton.v1.retention.checkpoint.>")
        .await
        .unwrap();
    let mut catalog_sub = client
        .subscribe(format!("$KV.{}.>", topology::BUCKET_CATALOG))
        .await
        .unwrap();
    client.flush().await.unwrap();
    let watcher = {
        let checkpoints = checkpoints.clone();
        let removals = removals.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(m) = checkpoint_sub.next() => {
                        let event: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
                        let id = event["backup_id"].as_str().unwrap_or_default().to_string();
                        checkpoints.lock().unwrap().entry(id).or_insert_with(Instant::now);
                    }
                    Some(m) = catalog_sub.next() => {
                        let deleted = m.headers.as_ref().and_then(|h| h.get("KV-Operation")).is_some();
                        if deleted {
                            let id = m.subject.rsplit('.').next().unwrap_or_default().to_string();
                            removals.lock().unwrap().entry(id).or_insert_with(Instant::now);
                        }
                    }
                    else => return,
                }
            }
        })
    };
    let warm_removed = if warmup > 0 {
        publish_reports(&js, &loads, 0..warmup).await;
        let deadline = Instant::now() + Duration::from_secs(600);
        while removals.lock().unwrap().len() < clusters && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // And every queue empty: the clock starts on an idle fleet.
        while Instant::now() < deadline {
            let mut idle = true;
            for (stream, durable) in &CONSUMERS[1..] {
                idle &= matches!(consumer_backlog(&js, stream, durable).await, Some(0) | None);
            }
            if idle {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        removals.lock().unwrap().len()
    } else {
        0
    };
    let counted_before = counted(&mut fleet);
    let cpu_before: Vec<(String, Option<f64>)> = fleet
        .replicas
        .iter()
        .map(|r| {
            (
                r.role.name().to_string(),
                r.process.pid().and_then(cpu_seconds),
            )
        })
        .collect();
    // Consumers the server creates while the load runs: none per message or batch on the
    // steady path (issue 32), only each view's first listing.
    let consumers_created = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut advisories = client
        .subscribe("$JS.EVENT.ADVISORY.CONSUMER.CREATED.>")
        .await
        .unwrap();
    client.flush().await.unwrap();
    let advisory_counter = {
        let consumers_created = consumers_created.clone();
        tokio::spawn(async move {
            while advisories.next().await.is_some() {
                consumers_created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let varz_before = nats_traffic(nats.monitor_port);
    let clients_before = nats_traffic_by_client(nats.monitor_port);
    let servers_before = (
        nats.server.pid().and_then(cpu_seconds),
        s3.server.pid().and_then(cpu_seconds),
    );

    // Offer `rate` completions per second, in 10 ms slices, for `seconds`.
    eprintln!(
        "bench_load: offering {rate}/s for {seconds} s from now (to profile the steady state)"
    );
    let started = Instant::now();
    // Every 2 s: the backlog (pending + unacknowledged) of each stage's consumer.
    let timeline: Arc<Mutex<Vec<serde_json::Value>>> = Default::default();
    let sampler = {
        let js = js.clone();
        let timeline = timeline.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            loop {
                let mut row = json!({"t_s": t0.elapsed().as_secs()});
                for (stream, durable) in &CONSUMERS[1..] {
                    row[*durable] = json!(consumer_backlog(&js, stream, durable).await);
                }
                timeline.lock().unwrap().push(row);
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };
    let mut sent = warmup;
    let mut acks = futures::stream::FuturesUnordered::new();
    while sent < total {
        let due =
            (warmup + (started.elapsed().as_secs_f64() * rate as f64) as usize + 1).min(total);
        while sent < due {
            let load = &loads[sent % clusters];
            let ack = js
                .send_publish(
                    format!("sexton.v1.report.{}", load.schedule.cluster),
                    PublishMessage::build()
                        .payload(load.genuine_report("backups", sent))
                        .message_id(format!("bench.{sent}")),
                )
                .await
                .expect("publishing a report");
            acks.push(std::future::IntoFuture::into_future(ack));
            sent += 1;
        }
        while let Some(Some(ack)) = futures::FutureExt::now_or_never(acks.next()) {
            ack.expect("report stored");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while let Some(ack) = acks.next().await {
        ack.expect("report stored");
    }
    let offered_for = started.elapsed();

    // Drain: every backup but the newest of each cluster deleted.
    // More clusters than backups leaves some clusters with one backup and nothing to delete.
    let want = total.saturating_sub(clusters);
    let drain_deadline =
        Instant::now() + Duration::from_secs(knob("SEXTON_BENCH_DRAIN_SECONDS", 600));
    while removals.lock().unwrap().len() < want && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drained_after = started.elapsed();
    let deleted = removals.lock().unwrap().len();
    // Checkpoints still queued for the retention-worker once every deletion is done, and how
    // long they take to clear (each is a run over its cluster that finds nothing left to do).
    let retention_backlog_at_drain = consumer_backlog(
        &js,
        topology::STREAM_RETENTION,
        topology::CONSUMER_RETENTION,
    )
    .await;
    while consumer_backlog(
        &js,
        topology::STREAM_RETENTION,
        topology::CONSUMER_RETENTION,
    )
    .await
        != Some(0)
        && Instant::now() < drain_deadline
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let retention_queue_cleared_after = started.elapsed();
    // Binlog jobs still queued once the deletions are done, and when the last is handled.
    let binlog_backlog = || sexton_tests::binlog_backlog(&js);
    let binlog_backlog_at_drain = binlog_backlog().await;
    while binlog_backlog().await != Some(0) && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let binlog_queue_cleared_after = started.elapsed();
    let varz_after = nats_traffic(nats.monitor_port);
    let clients_after = nats_traffic_by_client(nats.monitor_port);
    sampler.abort();
    watcher.abort();
    advisory_counter.abort();
    let consumers_created = consumers_created.load(std::sync::atomic::Ordering::Relaxed);
    let timeline = timeline.lock().unwrap().clone();

    // Latency: from the checkpoint-complete of backup n + clusters (the next of the same
    // cluster, which expires n) to n's record leaving the catalog.
    let mut latencies: Vec<f64> = Vec::new();
    {
        let checkpoints = checkpoints.lock().unwrap();
        let removals = removals.lock().unwrap();
        // Backups expired by a checkpoint of the measured part.
        for n in warmup.saturating_sub(clusters)..total.saturating_sub(clusters) {
            let load = &loads[n % clusters];
            let next = load.backup_id(n + clusters);
            if let (Some(expired_by), Some(gone)) =
                (checkpoints.get(&next), removals.get(&load.backup_id(n)))
            {
                latencies.push(gone.saturating_duration_since(*expired_by).as_secs_f64() * 1000.0);
            }
        }
    }
    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let stage_times = |map: &Arc<Mutex<BTreeMap<String, Instant>>>| {
        let map = map.lock().unwrap();
        let first = map.values().min().copied();
        let last = map.values().max().copied();
        (
            map.len(),
            first.zip(last).map(|(a, b)| (b - a).as_secs_f64()),
        )
    };
    let (checkpointed, ckpt_span) = stage_times(&checkpoints);
    let (_, del_span) = stage_times(&removals);

    let mut cpu: BTreeMap<String, f64> = BTreeMap::new();
    for (replica, (name, before)) in fleet.replicas.iter().zip(&cpu_before) {
        if let (Some(before), Some(after)) = (before, replica.process.pid().and_then(cpu_seconds)) {
            *cpu.entry(name.clone()).or_default() += after - before;
        }
    }
    if let (Some(b), Some(a)) = (servers_before.0, nats.server.pid().and_then(cpu_seconds)) {
        cpu.insert("nats-server".into(), a - b);
    }
    if let (Some(b), Some(a)) = (servers_before.1, s3.server.pid().and_then(cpu_seconds)) {
        cpu.insert("seaweedfs".into(), a - b);
    }
    let cpu_total: f64 = cpu.values().sum();

    // Messages handled per stage (more than offered: redeliveries and retries).
    let counted_now = counted(&mut fleet);
    let mut handled = serde_json::Map::new();
    for (name, count) in &counted_now {
        handled.insert(
            name.to_string(),
            json!(count - counted_before.get(name).unwrap_or(&0.0)),
        );
    }
    let run_seconds: f64 = fleet
        .of(Role::RetentionWorker)
        .map(|r| r.http_port)
        .collect::<Vec<_>>()
        .into_iter()
        .filter_map(|port| metric(port, "sexton_retention_run_duration_seconds_sum", ""))
        .sum();

    let delete_jobs_handled = handled
        .get("sexton_delete_jobs_total")
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    // Per deletion of the measured part (the warm-up's are left out like its CPU and traffic).
    let per_completion = |n: f64| n / (deleted.saturating_sub(warm_removed).max(1) as f64);
    let handled_count = |name: &str| handled.get(name).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let conflicts_and_reruns = handled_count("sexton_retention_conflicts_total")
        + handled_count("sexton_retention_reruns_total");
    let mut rss = BTreeMap::<String, f64>::new();
    for replica in &fleet.replicas {
        if let Some(kib) = replica.process.pid().and_then(rss_kib) {
            *rss.entry(replica.role.name().to_string()).or_default() += kib;
        }
    }
    // Per service (all its replicas' connections): where the messages go.
    let by_client: BTreeMap<String, serde_json::Value> = clients_after
        .iter()
        .map(|(name, after)| {
            let before = clients_before.get(name).copied().unwrap_or_default();
            (
                name.clone(),
                json!({
                    "messages_in_per_completion": per_completion(after.0 - before.0),
                    "messages_out_per_completion": per_completion(after.1 - before.1),
                }),
            )
        })
        .collect();
    let nats_traffic = varz_before.zip(varz_after).map(|(before, after)| {
        json!({
            "messages_in_per_completion": per_completion(after.0 - before.0),
            "messages_out_per_completion": per_completion(after.1 - before.1),
            "bytes_in_per_completion": per_completion(after.2 - before.2),
            "bytes_out_per_completion": per_completion(after.3 - before.3),
            "by_client": by_client,
        })
    });

    // The ceiling: raw JetStream publish → consume on the same server, same run.
    let raw = raw_jetstream_rate(&js, 100_000).await;

    let figures = json!({
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "offered_rate_per_s": rate,
        "offered_for_s": offered_for.as_secs_f64(),
        "backups": total,
        "clusters": clusters,
        "replicas_per_service": replicas,
        "deleter_concurrency": config.deleter.concurrency,
        "objects_prewritten_in_s": prewrite.as_secs_f64(),
        "checkpointed": checkpointed,
        "checkpoint_rate_per_s": ckpt_span.map(|s| checkpointed as f64 / s.max(0.001)),
        "deleted": deleted,
        "deleted_of_expected": format!("{deleted}/{want}"),
        "deletion_rate_per_s": del_span.map(|s| deleted as f64 / s.max(0.001)),
        // Deletions of the measured part (not the warm-up's) over the measured time.
        "end_to_end_rate_per_s":
            deleted.saturating_sub(warm_removed) as f64 / drained_after.as_secs_f64(),
        "drained_after_s": drained_after.as_secs_f64(),
        "retention_backlog_when_drained": retention_backlog_at_drain,
        "retention_queue_cleared_after_s": retention_queue_cleared_after.as_secs_f64(),
        "latency_ms": {
            "samples": latencies.len(),
            "p50": percentile(&latencies, 50.0),
            "p90": percentile(&latencies, 90.0),
            "p99": percentile(&latencies, 99.0),
            "max": latencies.last(),
        },
        "handled": handled,
        "warm_up_backups": warmup,
        "conflicts_and_reruns_per_completion": per_completion(conflicts_and_reruns),
        "rss_kib": rss,
        "delete_jobs_handled_per_deletion": per_completion(delete_jobs_handled),
        "binlog_backlog_when_drained": binlog_backlog_at_drain,
        "binlog_queue_cleared_after_s": binlog_queue_cleared_after.as_secs_f64(),
        "consumers_created": consumers_created,
        "consumers_created_per_completion": per_completion(consumers_created as f64),
        "nats": nats_traffic,
        "cpu_ms_per_completion": per_completion(cpu_total * 1000.0),
        "retention_run_seconds_total": run_seconds,
        "cpu_seconds": cpu,
        "cpu_seconds_total": cpu_total,
        // The CPU is read once the retention queue is clear too, so over that whole time.
        "cpu_utilisation_of_2_cores":
            cpu_total / (2.0 * retention_queue_cleared_after.as_secs_f64()),
        "raw_jetstream": raw,
        "backlog_timeline": timeline,
    });
    assert!(fleet.exited().is_empty(), "services exited");
    figures
}

/// Counters summed over each service's replicas: messages handled per stage (more than offered:
/// redeliveries and retries), and the retention-worker's conflicts and reruns.
fn counted(fleet: &mut ProcessFleet) -> BTreeMap<&'static str, f64> {
    let mut out = BTreeMap::new();
    for (role, metric_name) in [
        (Role::Scheduler, "sexton_executor_reports_total"),
        (Role::RetentionWorker, "sexton_retention_runs_total"),
        (Role::RetentionWorker, "sexton_retention_conflicts_total"),
        (Role::RetentionWorker, "sexton_retention_reruns_total"),
        (Role::Deleter, "sexton_delete_jobs_total"),
    ] {
        let count: f64 = fleet
            .of(role)
            .filter_map(|r| metric(r.http_port, metric_name, ""))
            .sum();
        out.insert(metric_name, count);
    }
    out
}

/// Publishes the reports of backups `range` (backup n of cluster n % clusters) and waits until
/// the stream stored each.
async fn publish_reports(
    js: &jetstream::Context,
    loads: &[ReportLoad],
    range: std::ops::Range<usize>,
) {
    let mut acks = Vec::new();
    for n in range {
        let load = &loads[n % loads.len()];
        let ack = js
            .send_publish(
                format!("sexton.v1.report.{}", load.schedule.cluster),
                PublishMessage::build()
                    .payload(load.genuine_report("backups", n))
                    .message_id(format!("bench.{n}")),
            )
            .await
            .expect("publishing a report");
        acks.push(ack);
    }
    for ack in acks {
        ack.await.expect("report stored");
    }
}

/// Resident memory of a process, in KiB (`/proc/<pid>/status`).
fn rss_kib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The server's message and byte counters, in and out (`/varz`), all clients together.
fn nats_traffic(monitor_port: u16) -> Option<(f64, f64, f64, f64)> {
    let (_, body) = http_get(monitor_port, "/varz")?;
    let varz: serde_json::Value = serde_json::from_str(&body).ok()?;
    let field = |name: &str| varz[name].as_f64();
    Some((
        field("in_msgs")?,
        field("out_msgs")?,
        field("in_bytes")?,
        field("out_bytes")?,
    ))
}

/// Messages in and out per client name (`/connz`), summed over a name's connections: the
/// services name theirs (`sexton-deleter`, …), so this tells which service's traffic grew.
fn nats_traffic_by_client(monitor_port: u16) -> BTreeMap<String, (f64, f64)> {
    let mut traffic = BTreeMap::new();
    let Some((_, body)) = http_get(monitor_port, "/connz?limit=4096") else {
        return traffic;
    };
    let Ok(connz) = serde_json::from_str::<serde_json::Value>(&body) else {
        return traffic;
    };
    for connection in connz["connections"].as_array().into_iter().flatten() {
        let name = connection["name"].as_str().unwrap_or("unnamed").to_string();
        let entry: &mut (f64, f64) = traffic.entry(name).or_default();
        entry.0 += connection["in_msgs"].as_f64().unwrap_or(0.0);
        entry.1 += connection["out_msgs"].as_f64().unwrap_or(0.0);
    }
    traffic
}

/// Publishes `count` report-sized messages to a stream of their own as fast as acks allow
/// (up to 256 in flight) while one pull consumer reads and acks them; returns both rates.
async fn raw_jetstream_rate(js: &jetstream::Context, count: usize) -> serde_json::Value {
    let _ = js.delete_stream("BENCH_RAW").await;
    let stream = js
        .create_stream(stream::Config {
            name: "BENCH_RAW".into(),
            subjects: vec!["bench.raw".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .unwrap();
    let consumer: jetstream::consumer::PullConsumer = stream
        .create_consumer(pull::Config {
            durable_name: Some("bench".into()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .unwrap();
    let payload = bytes::Bytes::from(vec![b'x'; 420]);
    let started = Instant::now();
    let consume = tokio::spawn(async move {
        let mut messages = consumer.messages().await.unwrap();
        let mut n = 0;
        while n < count {
            let message = messages.next().await.unwrap().unwrap();
            message.ack().await.unwrap();
            n += 1;
        }
        started.elapsed()
    });
    let mut acks: futures::stream::FuturesUnordered<
        <jetstream::context::PublishAckFuture as std::future::IntoFuture>::IntoFuture,
    > = futures::stream::FuturesUnordered::new();
    for _ in 0..count {
        if acks.len() >= 256 {
            acks.next().await.unwrap().unwrap();
        }
        let ack = js.publish("bench.raw", payload.clone()).await.unwrap();
        acks.push(std::future::IntoFuture::into_future(ack));
    }
    while let Some(ack) = acks.next().await {
        ack.unwrap();
    }
    let published = started.elapsed();
    let consumed = consume.await.unwrap();
    let _ = js.delete_stream("BENCH_RAW").await;
    json!({
        "messages": count,
        "publish_rate_per_s": count as f64 / published.as_secs_f64(),
        "publish_to_consume_rate_per_s": count as f64 / consumed.as_secs_f64(),
    })
}
