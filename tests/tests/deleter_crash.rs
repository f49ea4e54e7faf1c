//! The deleter under SIGKILL, and two deleters at once, on real servers.
//!
//! - Crash loop: a deleter process works through a cluster of full backups and incrementals
//!   that the retention-worker expires wave after wave, and is killed with SIGKILL at random
//!   moments (50 times; `SEXTON_CRASH_KILLS=200` for more), then restarted. After every kill:
//!   no kept backup lost an object and the catalog matches S3 (every record not `deleting` has
//!   all its objects; every object belongs to a record). At the end every expired object is
//!   gone and only the kept backups remain.
//! - Two deleter processes on the same cluster, with duplicate jobs: every backup deleted
//!   exactly once (the sum of both `sexton_backups_deleted_total`), nothing extra deleted.

use std::{
    collections::{BTreeSet, HashMap},
    time::{Duration, Instant},
};

use async_nats::jetstream;
use serde_json::json;
use sexton_model::{
    records::{BackupRecord, BackupStatus},
    wire::{self, RetentionSweep},
};
use sexton_shared::{
    catalog::{Catalog, Versioned},
    nats::publish_once,
    object_store::ObjectStore,
    topology,
};
use sexton_tests::{fixtures::*, *};

const CLUSTER: &str = "c1";
/// Full backups per wave; each has three incrementals after it.
const CHAINS_PER_WAVE: usize = 10;
const DATA_OBJECTS: usize = 8;
/// keep_last 4: the newest chain (a full and its three incrementals) stays.
const KEEP: usize = 4;

/// A small deterministic generator (xorshift), seeded from the clock; the seed is printed.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Adds wave `wave` of chains (later than every earlier wave) and asks retention to run.
async fn add_wave(
    js: &jetstream::Context,
    catalog: &Catalog,
    store: &ObjectStore,
    wave: usize,
) -> Vec<BackupRecord> {
    let mut records = Vec::new();
    for chain in 0..CHAINS_PER_WAVE {
        let minutes = ((wave * CHAINS_PER_WAVE + chain) * 10) as i64;
        let full = format!("w{wave}-f{chain}");
        records.push(backup(CLUSTER, "full", &full, None, minutes, DATA_OBJECTS));
        let mut parent = full;
        for i in 1..=3 {
            let id = format!("w{wave}-f{chain}-i{i}");
            records.push(backup(
                CLUSTER,
                "full",
                &id,
                Some(&parent),
                minutes + i,
                DATA_OBJECTS,
            ));
            parent = id;
        }
    }
    put_backups(catalog, store, &records).await;
    sweep(js, &format!("wave-{wave}")).await;
    records
}

async fn deleting(catalog: &Catalog) -> Vec<BackupRecord> {
    records_of(catalog, CLUSTER)
        .await
        .into_values()
        .map(|r| r.value)
        .filter(|r| r.status == BackupStatus::Deleting)
        .collect()
}

async fn sweep(js: &jetstream::Context, id: &str) {
    let cluster = sexton_model::names::ClusterName::new(CLUSTER).unwrap();
    publish_once(
        js,
        sexton_shared::channels::SWEEPS.subject(&cluster),
        &format!("test-sweep.{id}"),
        wire::encode(&RetentionSweep {
            schema_version: 1,
            cluster,
            requested_at: chrono::Utc::now(),
            scrub: false,
        }),
    )
    .await
    .unwrap();
}

/// The catalog matches S3: every record not being deleted has all its objects, and every
/// object belongs to a record. Returns the records by status.
async fn check_consistent(
    catalog: &Catalog,
    store: &ObjectStore,
    when: &str,
) -> HashMap<BackupStatus, usize> {
    let records: Vec<Versioned<BackupRecord>> =
        records_of(catalog, CLUSTER).await.into_values().collect();
    let objects = keys_under(store, &format!("backups/{CLUSTER}/")).await;
    let mut by_status: HashMap<BackupStatus, usize> = HashMap::new();
    let mut owned = BTreeSet::new();
    for record in &records {
        let record = &record.value;
        *by_status.entry(record.status).or_default() += 1;
        owned.extend(record.artifacts.iter().cloned());
        if record.status == BackupStatus::Deleting {
            continue;
        }
        assert_ne!(
            record.status,
            BackupStatus::DeleteFailed,
            "{when}: {} failed: {:?}",
            record.id,
            record.last_error
        );
        for key in &record.artifacts {
            assert!(
                objects.contains(key),
                "{when}: backup {} ({}) lost {key}",
                record.id,
                record.status.as_str()
            );
        }
    }
    for key in &objects {
        assert!(owned.contains(key), "{when}: {key} belongs to no record");
    }
    by_status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_points_never_loses_a_kept_object_and_finishes_the_work() {
    let kills: usize = std::env::var("SEXTON_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash loop: {kills} kills, seed {seed}");
    let mut random = Random(seed);

    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    // Small batches, so that a kill often lands between a batch's steps.
    config.deleter.batch_jobs = 2;
    config.deleter.concurrency = 1;
    // A killed deleter's jobs come back after 2 s rather than a minute.
    config.deleter.ack_wait = Duration::from_secs(2);
    // Each wave expires the whole previous one on purpose, which the retention circuit
    // breaker (docs/safety.md) would hold: this test of the deleter runs without it.
    config.breaker.enabled = false;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    put_schedule(
        &topo,
        "nightly",
        CLUSTER,
        "full",
        json!({"keep_last": KEEP}),
    )
    .await;
    // The retention-worker (in-process) marks and publishes; only the deleter is killed.
    let worker = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: true,
            deleter: false,
            executor: false,
        },
    );
    let logs = tempfile::tempdir().unwrap();
    let mut deleter = ServiceProcess::start("sexton-deleter", &[], &config, logs.path());
    deleter.kill();

    let started = Instant::now();
    let mut wave = 0;
    let mut newest = add_wave(&js, &catalog, &store, wave).await;
    // Kills that caught a backup the killed process had claimed and not finished, and those
    // that caught one with some of its objects already gone.
    let (mut mid_deletion, mut part_deleted) = (0, 0);
    let leases = topology::partitions_bucket(&js, 1).await.unwrap();
    for kill in 0..kills {
        let deleting_before = deleting(&catalog).await;
        lapse_leases(&leases).await;
        deleter.restart();
        // Startup takes a few hundred milliseconds: some kills land during it, most during work.
        let delay = 100 + random.below(1_100);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        deleter.kill();
        let by_status = check_consistent(&catalog, &store, &format!("after kill {kill}")).await;
        let caught: Vec<BackupRecord> = deleting(&catalog)
            .await
            .into_iter()
            .filter(|r| !deleting_before.iter().any(|b| b.id == r.id))
            .collect();
        mid_deletion += usize::from(!caught.is_empty());
        let objects = keys_under(&store, &format!("backups/{CLUSTER}/")).await;
        part_deleted += usize::from(
            caught
                .iter()
                .any(|r| r.artifacts.iter().any(|k| !objects.contains(k))),
        );
        let pending = by_status.get(&BackupStatus::Deleting).copied().unwrap_or(0)
            + by_status.get(&BackupStatus::Expiring).copied().unwrap_or(0);
        // Keep work queued: a new wave expires the whole previous one.
        if pending < 20 {
            wave += 1;
            newest = add_wave(&js, &catalog, &store, wave).await;
        }
    }
    eprintln!(
        "crash loop: {kills} kills in {:?}: {mid_deletion} caught a backup mid-deletion, \
         {part_deleted} with some of its objects gone; {} waves",
        started.elapsed(),
        wave + 1
    );
    assert!(
        mid_deletion > 0,
        "no kill landed while a backup was being deleted"
    );

    // Let it finish.
    lapse_leases(&leases).await;
    deleter.restart();
    sweep(&js, "final").await;
    eventually(
        "every expired backup deleted",
        Duration::from_secs(120),
        || {
            let catalog = catalog.clone();
            async move {
                let records = records_of(&catalog, CLUSTER).await;
                (records.len() == KEEP
                    && records
                        .values()
                        .all(|r| r.value.status == BackupStatus::Completed))
                .then_some(())
            }
        },
    )
    .await;
    check_consistent(&catalog, &store, "at the end").await;
    let kept: BTreeSet<String> = records_of(&catalog, CLUSTER).await.into_keys().collect();
    let expected: BTreeSet<String> = newest
        .iter()
        .rev()
        .take(KEEP)
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(kept, expected, "the newest chain is kept");
    let objects = keys_under(&store, &format!("backups/{CLUSTER}/")).await;
    assert_eq!(
        objects.len(),
        KEEP * (DATA_OBJECTS + 1),
        "only the kept objects remain"
    );
    // The deleter and the retention-worker agreed on every job: none was refused.
    let refused: Vec<String> = incidents(&js)
        .await
        .into_iter()
        .map(|i| format!("{}: {}", i.kind, i.reason))
        .collect();
    assert!(refused.is_empty(), "{refused:#?}");
    deleter.kill();
    worker.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deleters_delete_each_backup_exactly_once() {
    const N: usize = 120;
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.deleter.batch_jobs = 8;
    config.deleter.concurrency = 2;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    put_schedule(&topo, "nightly", CLUSTER, "full", json!({"keep_last": 2})).await;
    let records: Vec<BackupRecord> = (0..N)
        .map(|i| backup(CLUSTER, "full", &format!("b{i:03}"), None, i as i64, 1))
        .collect();
    put_backups(&catalog, &store, &records).await;
    let current = records_of(&catalog, CLUSTER).await;
    // Expire all but the newest two; some jobs are published twice.
    for record in &records[..N - 2] {
        let id = record.id.as_str();
        let job = expire(&js, &catalog, &current[id], id).await;
        if id.ends_with(['0', '4', '8']) {
            publish_job(&js, &job, &format!("{id}-again")).await;
        }
    }
    let ports = [free_port(), free_port()];
    // A log directory each: the processes share a name.
    let logs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut deleters: Vec<ServiceProcess> = ports
        .iter()
        .zip(&logs)
        .map(|(port, logs)| {
            let mut config = config.clone();
            config.http.listen = format!("127.0.0.1:{port}");
            ServiceProcess::start("sexton-deleter", &[], &config, logs.path())
        })
        .collect();
    deleter_drained(&js, Duration::from_secs(90)).await;

    let left = records_of(&catalog, CLUSTER).await;
    let kept: BTreeSet<&str> = left.keys().map(String::as_str).collect();
    assert_eq!(kept, BTreeSet::from(["b118", "b119"]));
    let objects = keys_under(&store, &format!("backups/{CLUSTER}/")).await;
    let expected: BTreeSet<String> = records[N - 2..]
        .iter()
        .flat_map(|r| r.artifacts.clone())
        .collect();
    assert_eq!(objects, expected);
    let mut deleted = 0.0;
    for port in ports {
        let (_, text) = http_get(port, "/metrics").expect("metrics");
        deleted += text
            .lines()
            .find_map(|l| {
                l.strip_prefix("sexton_backups_deleted_total ")?
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0);
    }
    assert_eq!(deleted, (N - 2) as f64, "each backup deleted exactly once");
    let refused: Vec<String> = incidents(&js).await.into_iter().map(|i| i.reason).collect();
    assert!(refused.is_empty(), "{refused:#?}");
    for deleter in &mut deleters {
        assert!(deleter.is_running(), "{}", deleter.logs());
        deleter.kill();
    }
}

/// SIGTERM while a deletion is under way: the deleter finishes the batch in hand (no backup is
/// left half-deleted in `deleting`), hands back what it had not started, exits cleanly within
/// the deadline, and a successor finishes the rest. A slow delete plugin counts its calls per
/// backup: a batch abandoned and redone would call it twice for some backup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_deletion_finishes_the_batch_in_hand_and_nothing_is_done_twice() {
    use futures::StreamExt as _;
    use std::sync::{Arc, Mutex};
    const N: usize = 24;
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.deleter.batch_jobs = 4;
    config.deleter.concurrency = 1;
    // Jobs that were neither finished nor handed back come back after this.
    config.deleter.ack_wait = Duration::from_secs(6);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    put_schedule(&topo, "nightly", CLUSTER, "full", json!({"keep_last": 2})).await;
    let records: Vec<BackupRecord> = (0..N)
        .map(|i| backup(CLUSTER, "full", &format!("b{i:03}"), None, i as i64, 2))
        .collect();
    put_backups(&catalog, &store, &records).await;

    // A plugin that takes a quarter of a second per backup and counts its calls.
    let calls: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let subject = "sexton.v1.plugin.audit";
    let mut requests = client.subscribe(subject).await.unwrap();
    {
        let (responder, calls) = (client.clone(), calls.clone());
        tokio::spawn(async move {
            while let Some(request) = requests.next().await {
                let call: serde_json::Value = serde_json::from_slice(&request.payload).unwrap();
                let backup = call["backup_id"].as_str().unwrap().to_string();
                *calls.lock().unwrap().entry(backup).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
                if let Some(reply) = request.reply {
                    responder.publish(reply, "{}".into()).await.unwrap();
                }
            }
        });
    }
    client.flush().await.unwrap();
    let logs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut first = ServiceProcess::start("sexton-deleter", &[], &config, logs[0].path());
    let spec = json!({"schema_version": 1, "name": "audit", "subject": subject});
    eventually("plugin registration", Duration::from_secs(30), || {
        let (client, spec) = (client.clone(), spec.clone());
        async move { api(&client, "plugin", "register", spec).await.ok() }
    })
    .await;

    let current = records_of(&catalog, CLUSTER).await;
    for record in &records[..N - 2] {
        let id = record.id.as_str();
        expire(&js, &catalog, &current[id], id).await;
    }
    // Terminate while a backup is claimed and its plugin call is under way.
    eventually("a deletion under way", Duration::from_secs(60), || {
        let (catalog, calls) = (catalog.clone(), calls.clone());
        async move {
            let started = calls.lock().unwrap().len();
            (started >= 3 && !deleting(&catalog).await.is_empty()).then_some(())
        }
    })
    .await;
    let status = first.terminate(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "the deleter did not exit cleanly within 30 s of SIGTERM: {status:?}\n{}",
        first.logs()
    );
    let left_deleting: Vec<String> = deleting(&catalog)
        .await
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert!(
        left_deleting.is_empty(),
        "the batch in hand was abandoned: {left_deleting:?}\n{}",
        first.logs()
    );
    check_consistent(&catalog, &store, "after SIGTERM").await;
    let done_by_first = N - records_of(&catalog, CLUSTER).await.len();
    assert!(
        done_by_first < N - 2,
        "SIGTERM came after all the work was done"
    );

    let mut second = ServiceProcess::start("sexton-deleter", &[], &config, logs[1].path());
    deleter_drained(&js, Duration::from_secs(90)).await;
    let left: BTreeSet<String> = records_of(&catalog, CLUSTER).await.into_keys().collect();
    assert_eq!(
        left,
        BTreeSet::from(["b022".to_string(), "b023".to_string()])
    );
    check_consistent(&catalog, &store, "at the end").await;
    let objects = keys_under(&store, &format!("backups/{CLUSTER}/")).await;
    assert_eq!(
        objects.len(),
        2 * 3,
        "only the kept backups' objects remain"
    );
    let calls = calls.lock().unwrap().clone();
    let expired: BTreeSet<String> = records[..N - 2].iter().map(|r| r.id.to_string()).collect();
    let called: BTreeSet<String> = calls.keys().cloned().collect();
    assert_eq!(
        called, expired,
        "every expired backup's plugin called, no kept one's"
    );
    let twice: Vec<(&String, &usize)> = calls.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "plugin called more than once: {twice:?}");
    let refused: Vec<String> = incidents(&js).await.into_iter().map(|i| i.reason).collect();
    assert!(refused.is_empty(), "{refused:#?}");
    eprintln!(
        "SIGTERM: the first deleter deleted {done_by_first} of {} and exited cleanly",
        N - 2
    );
    assert!(second.is_running(), "{}", second.logs());
    second.kill();
}

/// Lets the killed deleter's partition leases and its members' line lapse at once. They would
/// stand for their TTL (15 s) and keep the next process idle until then: the one cluster's
/// partition was then held by a dead process for most of the loop, and in one CI run none of
/// the 50 kills landed during a deletion. This test is about what a kill leaves behind, not
/// about takeover (`fault_partition_takeover`); the deleter is the only one of its service
/// here, and it is dead when this runs.
async fn lapse_leases(leases: &async_nats::jetstream::kv::Store) {
    let mut keys = vec!["deleter.members".to_string()];
    keys.extend((0..topology::DELETE_PARTITIONS).map(|k| format!("deleter.p{k}")));
    for key in keys {
        leases.purge(&key).await.unwrap();
    }
}
