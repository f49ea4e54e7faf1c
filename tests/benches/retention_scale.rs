//! Issue 17's retention-run bench: what one retention run costs when one cluster holds 10,000,
//! 100,000 or 1,000,000 records in a real JetStream key-value bucket, next to a raw listing of
//! the same records measured in the same run.
//!
//! Per size, in a cluster of its own (the bucket keeps the smaller clusters' records, as a
//! fleet's would): `N` completed backups with a policy keeping the newest `N` (so each new
//! backup expires exactly the oldest one), a paused schedule carrying it. Then:
//!
//! - the raw listing (`Catalog::list_cluster`, what every run read before issue 17): time and
//!   bytes received, three times;
//! - the first run of the retention-worker (a release process of its own), which lists the
//!   cluster once into its view: time until the run is counted, and the process's resident
//!   memory before and after (the view's bytes per record);
//! - `--runs` steady runs: a new backup's record, then its `checkpoint-complete`; timed from the
//!   event's publication until the oldest record is seen marked `expiring` in the bucket (and,
//!   separately, until the run is counted); bytes the server sent the worker's connection
//!   during the run (`/connz`). Then the bench removes the marked record, as the deleter would,
//!   so the cluster stays at `N`;
//! - the worker restarted: its first run again (what a persisted view could save).
//!
//! ```sh
//! cargo bench -p sexton-tests --bench retention_scale -- [--sizes 10000,100000] [--runs 30]
//! SEXTON_BENCH_LARGE=1 cargo bench -p sexton-tests --bench retention_scale   # 1,000,000 too
//! ```

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use serde_json::json;
use sexton_model::{
    names::{BackupId, ClusterName},
    records::BackupRecord,
    wire::{self, CheckpointComplete, ObjectDigest},
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{fault::*, fixtures::*, *};

struct Args {
    sizes: Vec<usize>,
    runs: usize,
}

fn args() -> Args {
    // A million records take minutes to fill and gigabytes to list: asked for, not default.
    let large = std::env::var("SEXTON_BENCH_LARGE").is_ok_and(|v| v == "1");
    let mut args = Args {
        sizes: if large {
            vec![10_000, 100_000, 1_000_000]
        } else {
            vec![10_000, 100_000]
        },
        runs: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--sizes" => {
                args.sizes = it
                    .next()
                    .expect("--sizes needs a list")
                    .split(',')
                    .map(|n| n.trim().parse().expect("--sizes: numbers"))
                    .collect()
            }
            "--runs" => {
                args.runs = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--runs needs a number")
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

fn main() {
    let args = args();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(args));
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// A completed backup as intake records it: a data object and `metadata.json`, each with its
/// size and SHA-256, the report's size and the time intake saw the objects.
fn record(cluster: &str, n: usize) -> BackupRecord {
    let mut record = backup(cluster, "full", &format!("b{n:08}"), None, n as i64, 1);
    record.objects = record
        .artifacts
        .iter()
        .map(|key| ObjectDigest {
            key: key.clone(),
            size: 4096,
            sha256: Some(format!("{:064x}", n as u128 * 0x9e37_79b9_7f4a_7c15)),
            version_id: None,
        })
        .collect();
    record.size_bytes = Some(8192);
    record.seen_at = record.completed_at.map(|t| t.with_timezone(&chrono::Utc));
    record
}

/// Bytes the server has sent the connection named `name` (`/connz`), summed over such
/// connections.
fn bytes_sent_to(monitor_port: u16, name: &str) -> u64 {
    let (_, body) = http_get(monitor_port, "/connz?limit=1024").expect("/connz");
    let connz: serde_json::Value = serde_json::from_str(&body).expect("/connz is JSON");
    connz["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == json!(name))
        .map(|c| c["out_bytes"].as_u64().unwrap_or(0))
        .sum()
}

fn resident_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                let rest = line.strip_prefix("VmRSS:")?;
                rest.trim().trim_end_matches("kB").trim().parse().ok()
            })
        })
        .unwrap_or(0)
}

fn runs_done(port: u16) -> f64 {
    metric(port, "sexton_retention_runs_total", "outcome=\"done\"").unwrap_or(0.0)
}

async fn wait_runs(port: u16, at_least: f64, timeout: Duration) -> Duration {
    let started = Instant::now();
    while runs_done(port) < at_least {
        assert!(
            started.elapsed() < timeout,
            "the retention run did not finish within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    started.elapsed()
}

async fn run(args: Args) {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::ConnectOptions::new()
        .name("bench")
        .connect(nats.url())
        .await
        .unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let mut fleet = ProcessFleet::start_roles(&config, 1, &[Role::RetentionWorker]);
    fleet.wait_ready(Duration::from_secs(120));
    let worker_name = "sexton-retention-worker";

    // Marks as the bucket sees them: the instant each `<cluster>.<backup>` was first seen
    // `expiring`.
    let marked: Arc<Mutex<BTreeMap<String, Instant>>> = Default::default();
    let mut updates = client
        .subscribe(format!("$KV.{}.>", topology::BUCKET_CATALOG))
        .await
        .unwrap();
    client.flush().await.unwrap();
    {
        let marked = marked.clone();
        tokio::spawn(async move {
            while let Some(message) = updates.next().await {
                if memchr(&message.payload, br#""status":"expiring""#) {
                    // `<cluster>.<id>`: the sizes' clusters reuse the same backup ids.
                    let key = message.subject.splitn(3, '.').nth(2).unwrap_or_default();
                    marked
                        .lock()
                        .unwrap()
                        .entry(key.to_string())
                        .or_insert_with(Instant::now);
                }
            }
        });
    }

    let mut summary = Vec::new();
    for &size in &args.sizes {
        let cluster = format!("scale-{size}");
        println!("\n== {size} records in cluster {cluster}");
        put_schedule(
            &topo,
            &format!("scale-{size}"),
            &cluster,
            "full",
            json!({"keep_last": size}),
        )
        .await;
        let started = Instant::now();
        futures::stream::iter(0..size)
            .map(|n| {
                let catalog = &catalog;
                let cluster = &cluster;
                async move { catalog.create(&record(cluster, n)).await.unwrap() }
            })
            .buffer_unordered(256)
            .collect::<Vec<u64>>()
            .await;
        let one = serde_json::to_vec(&record(&cluster, 0)).unwrap().len();
        println!(
            "filled in {:.1?} ({:.0} records/s); a record is {one} bytes of JSON",
            started.elapsed(),
            size as f64 / started.elapsed().as_secs_f64()
        );

        // The raw listing, as every run read it before.
        let cluster_name = ClusterName::new(cluster.as_str()).unwrap();
        let mut listing_ms = Vec::new();
        let mut listing_bytes = 0;
        for _ in 0..3 {
            let before = client
                .statistics()
                .in_bytes
                .load(std::sync::atomic::Ordering::Relaxed);
            let started = Instant::now();
            let records = catalog.list_cluster(&cluster_name).await.unwrap();
            listing_ms.push(started.elapsed().as_secs_f64() * 1e3);
            assert_eq!(records.len(), size);
            listing_bytes = client
                .statistics()
                .in_bytes
                .load(std::sync::atomic::Ordering::Relaxed)
                - before;
        }
        listing_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "raw KV listing of the cluster: {:.0} ms (median of 3: {:?}), {:.1} MiB received",
            listing_ms[1],
            listing_ms.iter().map(|m| m.round()).collect::<Vec<_>>(),
            listing_bytes as f64 / (1 << 20) as f64
        );

        let (port, pid) = {
            let replica = fleet.of(Role::RetentionWorker).next().unwrap();
            (replica.http_port, replica.process.pid().unwrap())
        };
        let publish_checkpoint = |backup: String, n: usize| {
            let js = js.clone();
            let cluster = cluster_name.clone();
            async move {
                let event = CheckpointComplete {
                    schema_version: wire::SCHEMA_VERSION,
                    cluster: cluster.clone(),
                    plan: "full".parse().unwrap(),
                    backup_id: BackupId::new(backup.as_str()).unwrap(),
                    schedule: None,
                };
                js.publish_with_headers(
                    sexton_shared::channels::CHECKPOINTS.subject(&cluster),
                    {
                        let mut headers = async_nats::HeaderMap::new();
                        headers.insert("Nats-Msg-Id", format!("bench.{cluster}.{n}").as_str());
                        headers
                    },
                    wire::encode(&event),
                )
                .await
                .unwrap()
                .await
                .unwrap();
            }
        };

        // First run: the view lists the cluster once.
        let rss_before = resident_kib(pid);
        let done_before = runs_done(port);
        let first_started = Instant::now();
        publish_checkpoint(format!("b{:08}", size - 1), 0).await;
        wait_runs(port, done_before + 1.0, Duration::from_secs(1200)).await;
        let first_run = first_started.elapsed();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_after = resident_kib(pid);
        let per_record = (rss_after.saturating_sub(rss_before) * 1024) as f64 / size as f64;
        println!(
            "first run (lists the cluster into the view): {first_run:.2?}; worker resident {} -> {} MiB: {per_record:.0} bytes per record",
            rss_before / 1024,
            rss_after / 1024
        );

        // Steady runs: one new backup each, which expires the oldest.
        let mut alive: VecDeque<usize> = (0..size).collect();
        let mut mark_ms = Vec::new();
        let mut run_ms = Vec::new();
        let mut run_bytes = Vec::new();
        for r in 0..args.runs {
            let n = size + r;
            catalog.create(&record(&cluster, n)).await.unwrap();
            alive.push_back(n);
            let oldest = alive.pop_front().unwrap();
            let oldest_id = format!("b{oldest:08}");
            // Past the covered margin: the event must not count as covered by the last run.
            tokio::time::sleep(Duration::from_millis(1100)).await;
            let bytes_before = bytes_sent_to(nats.monitor_port, worker_name);
            let done_before = runs_done(port);
            let published = Instant::now();
            publish_checkpoint(format!("b{n:08}"), n).await;
            let mark_deadline = Instant::now() + Duration::from_secs(120);
            let seen = loop {
                let key = format!("{cluster}.{oldest_id}");
                if let Some(at) = marked.lock().unwrap().get(&key).copied() {
                    break at;
                }
                assert!(
                    Instant::now() < mark_deadline,
                    "{oldest_id} was never marked"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            mark_ms.push(seen.saturating_duration_since(published).as_secs_f64() * 1e3);
            wait_runs(port, done_before + 1.0, Duration::from_secs(120)).await;
            run_ms.push(published.elapsed().as_secs_f64() * 1e3);
            run_bytes.push(bytes_sent_to(nats.monitor_port, worker_name) - bytes_before);
            // The deleter's part: the marked record goes, and the cluster stays at `size`.
            let id = BackupId::new(oldest_id.as_str()).unwrap();
            let current = catalog.get(&cluster_name, &id).await.unwrap().unwrap();
            catalog
                .remove(&cluster_name, &id, current.revision)
                .await
                .unwrap();
        }
        mark_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        run_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
        run_bytes.sort();
        let bytes_median = run_bytes[run_bytes.len() / 2];
        println!(
            "{} steady runs: checkpoint -> mark written p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; run counted p50 {:.1} ms, p99 {:.1} ms",
            args.runs,
            percentile(&mark_ms, 50.0),
            percentile(&mark_ms, 99.0),
            mark_ms.last().unwrap(),
            percentile(&run_ms, 50.0),
            percentile(&run_ms, 99.0),
        );
        println!(
            "NATS bytes to the worker per run: median {bytes_median}, max {} = {:.3}% of a raw listing ({listing_bytes})",
            run_bytes.last().unwrap(),
            100.0 * bytes_median as f64 / listing_bytes as f64
        );
        let rss_steady = resident_kib(pid);

        // A restart: the first run lists the cluster again.
        let replica = fleet.of(Role::RetentionWorker).next().unwrap();
        replica.process.restart();
        fleet.wait_ready(Duration::from_secs(120));
        let (port, _) = {
            let replica = fleet.of(Role::RetentionWorker).next().unwrap();
            (replica.http_port, replica.process.pid().unwrap())
        };
        let n = size + args.runs;
        catalog.create(&record(&cluster, n)).await.unwrap();
        let oldest = alive.pop_front().unwrap();
        alive.push_back(n);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let done_before = runs_done(port);
        let restarted = Instant::now();
        publish_checkpoint(format!("b{n:08}"), n).await;
        wait_runs(port, done_before + 1.0, Duration::from_secs(1200)).await;
        let after_restart = restarted.elapsed();
        println!("first run after a restart (lists again): {after_restart:.2?}");
        let id = BackupId::new(format!("b{oldest:08}").as_str()).unwrap();
        if let Some(current) = catalog.get(&cluster_name, &id).await.unwrap() {
            let _ = catalog.remove(&cluster_name, &id, current.revision).await;
        }
        summary.push(json!({
            "records": size,
            "raw_listing_ms": listing_ms[1],
            "raw_listing_bytes": listing_bytes,
            "first_run_ms": first_run.as_secs_f64() * 1e3,
            "first_run_after_restart_ms": after_restart.as_secs_f64() * 1e3,
            "mark_p50_ms": percentile(&mark_ms, 50.0),
            "mark_p99_ms": percentile(&mark_ms, 99.0),
            "run_p50_ms": percentile(&run_ms, 50.0),
            "run_p99_ms": percentile(&run_ms, 99.0),
            "bytes_per_run_median": bytes_median,
            "bytes_per_run_share_of_listing": bytes_median as f64 / listing_bytes as f64,
            "worker_bytes_per_record": per_record,
            "worker_resident_mib_steady": rss_steady / 1024,
        }));
    }
    println!("\n{}", serde_json::to_string_pretty(&summary).unwrap());
    assert!(fleet.exited().is_empty(), "the retention-worker exited");
}

fn memchr(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
