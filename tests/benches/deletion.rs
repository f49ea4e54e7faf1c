//! How fast the fleet deletes expired backups, next to the fastest a client can delete the same
//! number of objects from the same SeaweedFS: raw `DeleteObjects` requests of 1000 keys, one
//! after the other (what test-infra.md measured, ≈ 2,100 keys/s on 2 cores).
//!
//! Setup (not timed): `--backups` backups spread over `--clusters` clusters, each with one data
//! object and a `metadata.json`, already marked `expiring` with their delete jobs published,
//! plus a kept newest backup and a schedule with the policy in each cluster; and as many raw
//! objects under another prefix. Timed: the raw client deletes a quarter of its objects one
//! request after the other and another quarter with as many requests in flight as the deleter
//! may have; then the deleter (in-process, as `sexton-deleter` runs it) is started and works
//! until every job is acknowledged; then the raw client deletes the last two quarters the same
//! two ways, in the opposite order (before and after bracket the drift of a shared machine).
//! Printed: the rates, the CPU each process used, and the ratios.
//!
//! ```sh
//! cargo bench -p sexton-tests --bench deletion -- --backups 100000
//! cargo bench -p sexton-tests --profile dev --bench deletion -- --backups 20000   # quicker build
//! ```

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use sexton_model::{records::BackupStatus, wire::DeleteJob};
use sexton_shared::{
    catalog::Catalog,
    object_store::{ObjectStore, DELETE_BATCH},
    topology,
};
use sexton_tests::{fault::cpu_seconds, fixtures::*, *};

struct Args {
    backups: usize,
    clusters: usize,
    batch_jobs: usize,
    concurrency: usize,
}

fn args() -> Args {
    let mut args = Args {
        backups: 100_000,
        clusters: 100,
        batch_jobs: 1000,
        concurrency: 4,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match flag.as_str() {
            "--backups" => args.backups = value("--backups"),
            "--clusters" => args.clusters = value("--clusters"),
            "--batch-jobs" => args.batch_jobs = value("--batch-jobs"),
            "--concurrency" => args.concurrency = value("--concurrency"),
            // cargo bench passes --bench.
            "--bench" => {}
            "--help" | "-h" => {
                println!(
                    "deletion [--backups N] [--clusters C] [--batch-jobs J] [--concurrency K]"
                );
                std::process::exit(0);
            }
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

/// Deletes `keys` with 1000-key requests, `in_flight` at once (1: one after the other); prints
/// and returns the time.
async fn raw_delete(store: &ObjectStore, keys: &[String], in_flight: usize) -> Duration {
    let started = Instant::now();
    futures::stream::iter(keys.chunks(DELETE_BATCH))
        .map(|chunk| async move {
            let failures = store.delete_batch(chunk).await.unwrap();
            assert!(failures.is_empty(), "{failures:?}");
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<()>>()
        .await;
    let elapsed = started.elapsed();
    let how = if in_flight == 1 {
        "sequential".to_string()
    } else {
        format!("{in_flight} in flight")
    };
    println!(
        "raw DeleteObjects, {how}: {} objects in {elapsed:.1?}: {:.0} objects/s",
        keys.len(),
        keys.len() as f64 / elapsed.as_secs_f64()
    );
    elapsed
}

/// CPU seconds used so far by this process (the raw client, or the in-process deleter),
/// `nats-server` and SeaweedFS.
#[derive(Clone, Copy)]
struct Cpu {
    bench: f64,
    nats: f64,
    s3: f64,
}

impl Cpu {
    fn now(nats: &Nats, s3: &S3) -> Cpu {
        let of = |pid: Option<u32>| pid.and_then(cpu_seconds).unwrap_or(f64::NAN);
        Cpu {
            bench: of(Some(std::process::id())),
            nats: of(nats.server.pid()),
            s3: of(s3.server.pid()),
        }
    }

    /// Prints what each process used since `before`, per 1000 objects deleted.
    fn print_since(self, before: Cpu, what: &str, objects: usize) {
        let per_k = |seconds: f64| 1000.0 * seconds / objects as f64;
        let (bench, nats, s3) = (
            self.bench - before.bench,
            self.nats - before.nats,
            self.s3 - before.s3,
        );
        println!(
            "  cpu {what}: {:.1} s ({:.2} s per 1000 objects): this process {bench:.1} s, nats-server {nats:.1} s, seaweedfs {s3:.1} s",
            bench + nats + s3,
            per_k(bench + nats + s3),
        );
    }
}

async fn put_all(store: &ObjectStore, keys: Vec<String>) {
    let started = Instant::now();
    let n = keys.len();
    futures::stream::iter(keys)
        .map(|key| {
            let store = store.clone();
            async move {
                for attempt in 0..5 {
                    match store.put(&key, bytes::Bytes::from_static(b"x")).await {
                        Ok(()) => return,
                        Err(err) if attempt == 4 => panic!("put {key}: {err}"),
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    eprintln!(
        "  uploaded {n} objects in {:.1?} ({:.0}/s)",
        started.elapsed(),
        n as f64 / started.elapsed().as_secs_f64()
    );
}

fn main() {
    // RUST_LOG=sexton_deleter=info shows each batch's phases (judged, claimed, objects).
    if std::env::var_os("RUST_LOG").is_some() {
        sexton_shared::telemetry::init_logging(sexton_shared::config::LogFormat::Text);
    }
    let args = args();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(args));
}

async fn run(args: Args) {
    let per_cluster = args.backups / args.clusters;
    let backups = per_cluster * args.clusters;
    let objects = backups * 2;
    println!(
        "deletion bench: {backups} backups ({objects} objects) in {} clusters; deleter: batches of {} jobs, {} at once",
        args.clusters, args.batch_jobs, args.concurrency
    );
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.deleter.batch_jobs = args.batch_jobs;
    config.deleter.concurrency = args.concurrency;
    config.http.listen = String::new();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;

    eprintln!("setup:");
    let raw_keys: Vec<String> = (0..objects)
        .map(|i| format!("raw/{:03}/{i:08}", i % 1000))
        .collect();
    put_all(&store, raw_keys.clone()).await;
    let mut expired = Vec::with_capacity(backups);
    let mut kept = Vec::with_capacity(args.clusters);
    for c in 0..args.clusters {
        let cluster = format!("c{c:03}");
        put_schedule(
            &topo,
            &format!("s{c:03}"),
            &cluster,
            "full",
            json!({"keep_last": 1}),
        )
        .await;
        kept.push(backup(&cluster, "full", "newest", None, 100_000, 1));
        for b in 0..per_cluster {
            let mut record = backup(&cluster, "full", &format!("b{b:06}"), None, b as i64, 1);
            record.status = BackupStatus::Expiring;
            record.expired_from = Some(BackupStatus::Completed);
            record.delete_reasons = vec!["keep_last 1".into()];
            expired.push(record);
        }
    }
    let all_keys: Vec<String> = kept
        .iter()
        .chain(&expired)
        .flat_map(|r| r.artifacts.clone())
        .collect();
    put_all(&store, all_keys).await;
    let started = Instant::now();
    let kept_writes: Vec<_> = kept.iter().map(|r| catalog.create(r)).collect();
    for write in kept_writes {
        write.await.unwrap();
    }
    // Records and jobs, cluster after cluster (as retention-workers publish them).
    let js_ref = &js;
    let catalog_ref = &catalog;
    futures::stream::iter(expired.iter())
        .map(|record| async move {
            let revision = catalog_ref.create(record).await.unwrap();
            let job = DeleteJob {
                schema_version: 1,
                cluster: record.cluster.clone(),
                backup_id: record.id.clone(),
                uid: record.uid.clone(),
                revision,
                reasons: record.delete_reasons.clone(),
                volumes: Vec::new(),
            };
            publish_job(js_ref, &job, &format!("del.{}.{revision}", record.uid)).await;
        })
        .buffered(64)
        .collect::<Vec<()>>()
        .await;
    eprintln!("  {backups} records and jobs in {:.1?}", started.elapsed());

    // Raw: 1000-key DeleteObjects one after the other, and with as many requests in flight as
    // the deleter may have, each on a quarter of the raw objects before the fleet runs and a
    // quarter after it (the machine is shared: this brackets drift).
    let quarter = raw_keys.len() / 4;
    let (seq_before, rest) = raw_keys.split_at(quarter);
    let (par_before, rest) = rest.split_at(quarter);
    let (par_after, seq_after) = rest.split_at(quarter);
    let in_flight = 2 * args.concurrency;
    let raw_before = raw_delete(&store, seq_before, 1).await;
    let cpu_before = Cpu::now(&nats, &s3);
    let par_time_before = raw_delete(&store, par_before, in_flight).await;
    Cpu::now(&nats, &s3).print_since(cpu_before, "raw, in flight", par_before.len());

    // The fleet: the deleter, from start until every job is done.
    let cpu_before = Cpu::now(&nats, &s3);
    let started = Instant::now();
    let fleet = Fleet::start(&config, DELETER_ONLY);
    let mut last_report = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let backlog = consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER)
            .await
            .unwrap_or(u64::MAX);
        if backlog == 0 {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!("  {:.0?}: {backlog} jobs left", started.elapsed());
            last_report = Instant::now();
        }
    }
    let fleet_time = started.elapsed();
    let fleet_rate = objects as f64 / fleet_time.as_secs_f64();
    println!(
        "fleet (deleter): {backups} backups, {objects} objects in {fleet_time:.1?}: {fleet_rate:.0} objects/s, {:.0} backups/s",
        backups as f64 / fleet_time.as_secs_f64()
    );
    Cpu::now(&nats, &s3).print_since(cpu_before, "fleet", objects);
    fleet.stop().await.unwrap();
    let par_time_after = raw_delete(&store, par_after, in_flight).await;
    let raw_after = raw_delete(&store, seq_after, 1).await;
    let raw_rate =
        (seq_before.len() + seq_after.len()) as f64 / (raw_before + raw_after).as_secs_f64();
    let raw_parallel_rate = (par_before.len() + par_after.len()) as f64
        / (par_time_before + par_time_after).as_secs_f64();
    println!("raw DeleteObjects, sequential, before and after: {raw_rate:.0} objects/s");
    println!(
        "raw DeleteObjects, {in_flight} in flight, before and after: {raw_parallel_rate:.0} objects/s"
    );
    println!(
        "ratio fleet/raw: {:.0}% of sequential, {:.0}% of {in_flight} in flight",
        100.0 * fleet_rate / raw_rate,
        100.0 * fleet_rate / raw_parallel_rate
    );

    // It deleted what it had to, and only that. (Listing the whole prefix would walk every
    // emptied directory, which SeaweedFS keeps: check the kept objects and a sample instead.)
    let records = catalog.list_all().await.unwrap();
    assert_eq!(records.len(), args.clusters, "only the kept records remain");
    for record in &kept {
        for key in &record.artifacts {
            assert!(store.exists(key).await.unwrap(), "kept {key} is gone");
        }
    }
    for record in expired.iter().step_by((backups / 100).max(1)) {
        for key in &record.artifacts {
            assert!(
                !store.exists(key).await.unwrap(),
                "expired {key} is still there"
            );
        }
    }
}
