//! Issue 32, goal 2: what one catch-up of a cluster's catalog view costs when the catalog holds
//! 20 clusters and when it holds 2,000, at the same total write rate, against a real
//! nats-server (the fleet's `sexton-catalog` bucket, history 5).
//!
//! Per cluster count, on a fresh server: every cluster gets `--keys` records, then for
//! `--seconds` the bench touches clusters at random at `--rate` touches a second. A touch writes
//! what a completion writes to one cluster (a new record, and two rewrites of older ones) and
//! then catches up that cluster's view the way `catalog_view` does (`stream_read::read_changes`
//! from the first sequence the view has not applied). With more clusters, a cluster's view is
//! further behind the stream's end when it is next used: 2,000 clusters at 100 touches a second
//! leave 20 s and some 6,000 other writes between two uses of one cluster.
//!
//! Printed per row: catch-up latency p50 / p99, nats-server CPU-ms per catch-up, and the same
//! for the baseline read in the same run: `next` from a view one write behind (the newest
//! sequence before the touch), which reads the same entries but starts next to them.
//!
//! ```sh
//! cargo bench -p sexton-tests --bench catalog_reads -- [--clusters 20,2000] [--rate 100] [--seconds 30]
//! ```

use std::time::{Duration, Instant};

use sexton_shared::{stream_read, topology};
use sexton_tests::{fault::cpu_seconds, Nats};

struct Args {
    clusters: Vec<usize>,
    keys: usize,
    rate: f64,
    seconds: u64,
}

fn args() -> Args {
    let mut args = Args {
        clusters: vec![20, 2000],
        keys: 10,
        rate: 100.0,
        seconds: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--clusters" => {
                args.clusters = value()
                    .split(',')
                    .map(|n| n.parse().expect("--clusters: numbers"))
                    .collect()
            }
            "--keys" => args.keys = value().parse().expect("--keys: a number"),
            "--rate" => args.rate = value().parse().expect("--rate: a number"),
            "--seconds" => args.seconds = value().parse().expect("--seconds: a number"),
            "--bench" => {}
            other => panic!("unknown flag {other}; see the header of benches/catalog_reads.rs"),
        }
    }
    args
}

/// A record's size in the catalog: a few hundred bytes of JSON.
fn payload(cluster: usize, key: usize, round: usize) -> bytes::Bytes {
    let filler = "x".repeat(600);
    format!(r#"{{"cluster":"c{cluster}","id":"b{key}","round":{round},"filler":"{filler}"}}"#)
        .into()
}

#[derive(Default)]
struct Row {
    lag_ms: Vec<f64>,
    near_ms: Vec<f64>,
    lag_cpu: f64,
    near_cpu: f64,
    probe_ms: Vec<f64>,
    probe_cpu: f64,
    entries: u64,
    distance: u64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn run(clusters: usize, args: &Args) -> Row {
    let nats = Nats::start();
    let pid = nats.server.pid().expect("nats-server runs");
    let client = async_nats::connect(nats.url()).await.unwrap();
    let topology = topology::ensure(&async_nats::jetstream::new(client), 1)
        .await
        .unwrap();
    let store = topology.catalog.clone();
    let mut next_key = vec![args.keys; clusters];
    let mut last = 0;
    for c in 0..clusters {
        for k in 0..args.keys {
            last = store
                .put(format!("c{c}.b{k}"), payload(c, k, 0))
                .await
                .unwrap();
        }
    }
    let mut applied = vec![last + 1; clusters];

    let mut row = Row::default();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let interval = Duration::from_secs_f64(1.0 / args.rate);
    let started = Instant::now();
    let mut due = started;
    let mut round = 0;
    while started.elapsed() < Duration::from_secs(args.seconds) {
        tokio::time::sleep_until(due.into()).await;
        due += interval;
        round += 1;
        let c = (random() % clusters as u64) as usize;
        let k = next_key[c];
        next_key[c] += 1;
        let before = store
            .put(format!("c{c}.b{k}"), payload(c, k, round))
            .await
            .unwrap()
            - 1;
        for back in [k - 1, k.saturating_sub(5)] {
            store
                .put(format!("c{c}.b{back}"), payload(c, back, round))
                .await
                .unwrap();
        }
        let filter = format!("$KV.{}.c{c}.*", topology::BUCKET_CATALOG);

        // The baseline: a view that applied everything up to just before this touch.
        let cpu = cpu_seconds(pid).unwrap();
        let at = Instant::now();
        let near = stream_read::read_changes(&store, &filter, before + 1, "near", |_| Ok(()))
            .await
            .unwrap();
        row.near_ms.push(at.elapsed().as_secs_f64() * 1e3);
        row.near_cpu += cpu_seconds(pid).unwrap() - cpu;
        assert_eq!(near.count, 3, "the touch's three writes");

        // The cluster's newest entry, asked of the leader by the wildcard subject: what a view
        // fed by a consumer would ask to know whether it holds everything.
        let cpu = cpu_seconds(pid).unwrap();
        let at = Instant::now();
        let newest = store
            .stream
            .raw_message_builder()
            .last_by_subject(filter.clone())
            .send()
            .await
            .unwrap();
        row.probe_ms.push(at.elapsed().as_secs_f64() * 1e3);
        row.probe_cpu += cpu_seconds(pid).unwrap() - cpu;
        assert_eq!(newest.sequence, before + 3, "the touch's last write");

        // The view as it is: behind by everything since this cluster's last touch.
        let cpu = cpu_seconds(pid).unwrap();
        let at = Instant::now();
        let lag = stream_read::read_changes(&store, &filter, applied[c], "lag", |_| Ok(()))
            .await
            .unwrap();
        row.lag_ms.push(at.elapsed().as_secs_f64() * 1e3);
        row.lag_cpu += cpu_seconds(pid).unwrap() - cpu;
        row.distance += before + 1 - applied[c];
        row.entries += lag.count;
        applied[c] = lag.next_sequence;
    }
    row
}

fn main() {
    let args = args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| clusters | catch-ups | stream entries behind (mean) | catch-up p50 / p99 ms | \
         nats-server CPU-ms per catch-up | baseline from one write behind: p50 / p99 ms, CPU-ms | \
         the cluster's newest entry by wildcard: p50 / p99 ms, CPU-ms |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for &clusters in &args.clusters {
        let mut row = runtime.block_on(run(clusters, &args));
        let n = row.lag_ms.len().max(1) as f64;
        row.lag_ms.sort_by(f64::total_cmp);
        row.near_ms.sort_by(f64::total_cmp);
        row.probe_ms.sort_by(f64::total_cmp);
        println!(
            "| {clusters} | {} | {:.0} | {:.2} / {:.2} | {:.3} | {:.2} / {:.2}, {:.3} | {:.2} / {:.2}, {:.3} |",
            row.lag_ms.len(),
            row.distance as f64 / n,
            percentile(&row.lag_ms, 0.5),
            percentile(&row.lag_ms, 0.99),
            row.lag_cpu * 1e3 / n,
            percentile(&row.near_ms, 0.5),
            percentile(&row.near_ms, 0.99),
            row.near_cpu * 1e3 / n,
            percentile(&row.probe_ms, 0.5),
            percentile(&row.probe_ms, 0.99),
            row.probe_cpu * 1e3 / n,
        );
        let _ = row.entries;
    }
}
