//! Scenario: a retention-worker replica and a deleter replica killed while they hold
//! partitions (issue 32).
//!
//! Three retention-worker replicas and three deleter replicas as processes (with one
//! scheduler) share the retention stream's partitions and the delete jobs' partitions, one
//! replica per partition, each at most its share. One of each is killed with SIGKILL; then
//! every cluster gets a new backup, so every partition has work, including the dead replicas'.
//! The survivors must take their partitions over within the consumers' ack wait, and every
//! expired backup must be deleted once: one delete job handled per deletion, no
//! compare-and-set conflict. Started again, the replicas get their share back from the others.
//!
//! The figures (time to take over, partitions per replica at each step) print at the end.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use serde_json::json;
use sexton_shared::topology;
use sexton_tests::fault::create_schedule;
use sexton_tests::{fault::*, *};

/// The retention consumer's ack wait (retention-worker/src/lib.rs), and the deleter's
/// (`deleter.ack_wait`'s default): a killed replica's partitions must be taken over within it.
const ACK_WAIT: Duration = Duration::from_secs(60);

/// The partitioned services.
const ROLES: [Role; 2] = [Role::RetentionWorker, Role::Deleter];

/// Delete jobs each deleter replica counted, by index (`None`: not answering).
fn jobs_handled(workers: &mut ProcessFleet) -> Vec<Option<f64>> {
    workers
        .of(Role::Deleter)
        .map(|r| metric(r.http_port, "sexton_delete_jobs_total", ""))
        .collect()
}

/// Waits until the partitions of both services are settled among their answering replicas.
async fn settled(workers: &mut ProcessFleet, timeout: Duration) -> serde_json::Value {
    let mut held = serde_json::Map::new();
    for role in ROLES {
        let of_role = wait_partitions_settled(workers, role, timeout).await;
        held.insert(format!("{role:?}"), json!(of_role));
    }
    held.into()
}

/// Gives every cluster backup `n` (its objects, then its report), and waits up to `timeout`
/// until each cluster's backup `n - 1` is gone from the catalog (`keep_last: 1`).
async fn round(
    js: &jetstream::Context,
    store: &sexton_shared::object_store::ObjectStore,
    catalog: &jetstream::kv::Store,
    loads: &[ReportLoad],
    n: usize,
    what: &str,
    timeout: Duration,
) {
    for load in loads {
        load.write_objects(store, "backups", n..n + 1).await;
        load.publish_reports(js, "backups", n..n + 1).await;
    }
    let expired: Vec<String> = loads
        .iter()
        .map(|l| format!("{}.{}", l.schedule.cluster, l.backup_id(n - 1)))
        .collect();
    eventually(what, timeout, || async {
        (gone(catalog, &expired).await == expired.len()).then_some(())
    })
    .await;
}

async fn gone(catalog: &jetstream::kv::Store, keys: &[String]) -> usize {
    let mut gone = 0;
    for key in keys {
        if matches!(catalog.get(key).await, Ok(None)) {
            gone += 1;
        }
    }
    gone
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_partitions_are_taken_over_within_the_ack_wait() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let mut fleet = ProcessFleet::start_roles(&config, 1, &[Role::Scheduler]);
    fleet.wait_ready(Duration::from_secs(120));
    let mut workers = ProcessFleet::start_roles(&config, 3, &ROLES);
    workers.wait_ready(Duration::from_secs(120));
    let client = client(&nats.url()).await;
    let js = jetstream::new(client.clone());
    let store = object_store(&config).await;
    let catalog = js.get_key_value(topology::BUCKET_CATALOG).await.unwrap();

    // The stream stores each event under its cluster's partition.
    let mut stream = js.get_stream(topology::STREAM_RETENTION).await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(
        info.config.subject_transform,
        Some(topology::retention_transform())
    );
    // And each delete job under its cluster's partition.
    let mut jobs_stream = js.get_stream(topology::STREAM_JOBS).await.unwrap();
    assert_eq!(
        jobs_stream.info().await.unwrap().config.subject_transform,
        Some(topology::delete_transform())
    );

    let started = Instant::now();
    let balanced_at_start = settled(&mut workers, Duration::from_secs(90)).await;
    let balanced_after = started.elapsed();

    // Clusters enough that every partition has some: these 40 names fall 2 or 3 to each of
    // the 16 (nats-server's FNV-1a of the name, modulo 16), so every replica has work.
    let clusters = 40;
    let mut loads = Vec::new();
    for c in 0..clusters {
        let schedule = LoadSchedule {
            name: format!("take-{c}"),
            cluster: format!("take-c{c}"),
            interval: Duration::from_secs(86_400),
            keep_last: 1,
        };
        create_schedule(&client, &schedule).await;
        loads.push(ReportLoad::new(schedule));
    }
    for load in &loads {
        load.write_objects(&store, "backups", 0..1).await;
        load.publish_reports(&js, "backups", 0..1).await;
    }
    round(
        &js,
        &store,
        &catalog,
        &loads,
        1,
        "each cluster's first backup deleted with three replicas",
        Duration::from_secs(120),
    )
    .await;
    let runs_per_replica: Vec<Option<f64>> = workers
        .of(Role::RetentionWorker)
        .map(|r| {
            metric(
                r.http_port,
                "sexton_retention_runs_total",
                "outcome=\"done\"",
            )
        })
        .collect();
    assert!(
        runs_per_replica.iter().all(|n| n.unwrap_or(0.0) > 0.0),
        "every replica ran some clusters' retention: {runs_per_replica:?}"
    );
    // The deleter counts a job once its batch is settled, a moment after the record went.
    let jobs_before_the_kill = eventually(
        "the deleters counting the first round's jobs",
        Duration::from_secs(10),
        || {
            let jobs = jobs_handled(&mut workers);
            async move { (jobs.iter().flatten().sum::<f64>() >= clusters as f64).then_some(jobs) }
        },
    )
    .await;
    assert!(
        jobs_before_the_kill.iter().all(|n| n.unwrap_or(0.0) > 0.0),
        "every deleter replica handled some clusters' jobs: {jobs_before_the_kill:?}"
    );

    // Kill one replica of each, then give every cluster work.
    for role in ROLES {
        let victim = workers.of(role).find(|r| r.index == 1).unwrap();
        victim.process.kill();
    }
    let killed = Instant::now();
    round(
        &js,
        &store,
        &catalog,
        &loads,
        2,
        "each cluster's second backup deleted by the two survivors",
        ACK_WAIT + Duration::from_secs(30),
    )
    .await;
    let taken_over_after = killed.elapsed();
    // The gauge is read once a second: it may lag the work it counts by that.
    let survivors = eventually(
        "the survivors holding every partition",
        Duration::from_secs(10),
        || {
            let held = ROLES.map(|role| partitions_held(&mut workers, role));
            async move { held.iter().all(|h| partitions_settled(h)).then_some(held) }
        },
    )
    .await;
    assert!(
        taken_over_after < ACK_WAIT,
        "the dead replica's partitions were taken over after {taken_over_after:?}, beyond the ack \
         wait"
    );

    // Started again, each gets its share back. The dead deleter's count went with it.
    let dead_deleters_jobs = jobs_before_the_kill[1].unwrap_or(0.0);
    for role in ROLES {
        workers
            .of(role)
            .find(|r| r.index == 1)
            .unwrap()
            .process
            .restart();
    }
    let restarted = Instant::now();
    workers.wait_ready(Duration::from_secs(60));
    let balanced_again = settled(&mut workers, Duration::from_secs(90)).await;
    let rebalanced_after = restarted.elapsed();
    round(
        &js,
        &store,
        &catalog,
        &loads,
        3,
        "each cluster's third backup deleted after the rebalance",
        ACK_WAIT + Duration::from_secs(30),
    )
    .await;

    // Once each: a delete job handled per deletion, and no run met a changed record.
    let deletions = 3 * clusters;
    let jobs = eventually(
        "the deleters counting their jobs",
        Duration::from_secs(10),
        || {
            let jobs = jobs_handled(&mut workers);
            async move {
                let jobs = dead_deleters_jobs + jobs.iter().flatten().sum::<f64>();
                (jobs >= deletions as f64).then_some(jobs)
            }
        },
    )
    .await;
    let conflicts: f64 = workers
        .of(Role::RetentionWorker)
        .filter_map(|r| metric(r.http_port, "sexton_retention_conflicts_total", ""))
        .sum();
    let newest: Vec<String> = loads
        .iter()
        .map(|l| format!("{}.{}", l.schedule.cluster, l.backup_id(3)))
        .collect();
    assert_eq!(gone(&catalog, &newest).await, 0, "the newest backups stay");
    // Every event acknowledged is gone from the work queue: nothing waits for a partition
    // nobody reads.
    eventually(
        "the retention stream empty",
        Duration::from_secs(30),
        || {
            let js = js.clone();
            async move {
                let mut stream = js.get_stream(topology::STREAM_RETENTION).await.ok()?;
                (stream.info().await.ok()?.state.messages == 0).then_some(())
            }
        },
    )
    .await;
    assert_eq!(
        consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER).await,
        Some(0),
        "no delete job waits for a partition nobody reads"
    );
    record_figures(
        "partition_takeover",
        json!({
            "clusters": clusters,
            "partitions": topology::RETENTION_PARTITIONS,
            "balanced_after_start_s": balanced_after.as_secs_f64(),
            "held_at_start": balanced_at_start,
            "runs_per_replica_before_the_kill": runs_per_replica,
            "work_done_after_the_kill_s": taken_over_after.as_secs_f64(),
            "held_by_survivors": survivors,
            "rebalanced_after_restart_s": rebalanced_after.as_secs_f64(),
            "held_after_restart": balanced_again,
            "delete_jobs_per_deleter_before_the_kill": jobs_before_the_kill,
            "delete_jobs_handled_per_deletion": jobs / deletions as f64,
            "conflicts": conflicts,
        }),
    );
    assert_eq!(
        jobs, deletions as f64,
        "each delete job handled once ({jobs} jobs for {deletions} deletions)"
    );
    assert_eq!(conflicts, 0.0, "runs met changed records");
    assert!(workers.exited().is_empty() && fleet.exited().is_empty());
}
