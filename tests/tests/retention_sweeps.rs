//! Throttled retention sweeps (seed 003): per cluster at most one `retention-sweep` per
//! `retention_sweep_interval`, however many scheduler replicas run, recorded as the cluster's
//! `last_retention_run`; and the point of it, time-based expiry with no new backup.

use std::{collections::BTreeMap, time::Duration};

use chrono::{DateTime, Utc};
use serde_json::json;
use sexton_model::{
    records::{BackupStatus, ClusterRecord},
    wire::RetentionSweep,
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

/// Every sweep request in the retention stream, by cluster, in order.
async fn sweeps(js: &async_nats::jetstream::Context) -> BTreeMap<String, Vec<DateTime<Utc>>> {
    let mut out: BTreeMap<String, Vec<DateTime<Utc>>> = BTreeMap::new();
    for (_, payload) in
        read_work_queue(js, topology::STREAM_RETENTION, "sexton.v1.retention.sweep.").await
    {
        let sweep: RetentionSweep = sexton_model::wire::decode(&payload).unwrap();
        out.entry(sweep.cluster.to_string())
            .or_default()
            .push(sweep.requested_at);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_sweep_each_cluster_once_per_interval_and_record_it() {
    let nats = Nats::start();
    let mut config = nats_config(&nats);
    config.scheduler.retention_sweep_interval = Duration::from_secs(2);
    let replicas: Vec<Fleet> = (0..3)
        .map(|_| Fleet::start(&config, SCHEDULER_ONLY))
        .collect();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    // Paused schedules still belong to their cluster; nothing needs to fire.
    for (name, cluster) in [("a1", "c1"), ("a2", "c1"), ("b1", "c2")] {
        create_schedule(
            &client,
            json!({"name": name, "cluster": cluster, "plan": "full", "cron": "@daily",
                   "paused": true}),
        )
        .await;
    }
    let started = Utc::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    // c2 loses its only schedule: its sweeps stop.
    api(
        &client,
        "schedule",
        "delete",
        json!({"schema_version": 1, "name": "b1"}),
    )
    .await
    .unwrap();
    let c2_deleted = Utc::now();
    tokio::time::sleep(Duration::from_secs(7)).await;
    let observed = (Utc::now() - started).num_milliseconds() as f64 / 1000.0;

    let sweeps = sweeps(&js).await;
    let c1 = &sweeps["c1"];
    // About one per interval over the whole run (the first at once), not one per replica.
    let expected = observed / 2.0;
    assert!(
        (c1.len() as f64) >= expected - 1.5 && (c1.len() as f64) <= expected + 1.5,
        "c1 swept {} times in {observed:.1} s with a 2 s interval: {c1:?}",
        c1.len()
    );
    for pair in c1.windows(2) {
        assert!(
            // Sweeps are published at interval boundaries by whichever replica wakes first,
            // so two in a row are an interval apart give or take scheduling jitter; two in one
            // interval would be about 0 s apart.
            pair[1] - pair[0] >= chrono::Duration::milliseconds(1500),
            "two sweeps of c1 within one interval: {c1:?}"
        );
    }
    let c2 = &sweeps["c2"];
    assert!(
        c2.iter()
            .filter(|at| **at > c2_deleted + chrono::Duration::seconds(1))
            .count()
            == 0,
        "c2 swept after its last schedule was deleted: {c2:?} (deleted at {c2_deleted})"
    );
    assert!(!c2.is_empty());

    // Recorded per cluster: the last sweep's instant.
    let store = js.get_key_value(topology::BUCKET_CLUSTERS).await.unwrap();
    let record: ClusterRecord =
        serde_json::from_slice(&store.get("c1").await.unwrap().unwrap()).unwrap();
    let last = sweeps["c1"].last().copied();
    // The replicas still run: one more sweep may have happened since the stream was read. Two
    // replicas racing on one record publish the same message id: the stream keeps the first
    // one's event while the other's compare-and-set may win, so the two instants can differ by
    // the width of that race (microseconds), never by an interval.
    let last = last.expect("c1 was swept");
    let recorded = record.last_retention_run.expect("c1's sweep is recorded");
    assert!(
        recorded >= last - chrono::Duration::milliseconds(500),
        "{record:?} vs {last:?}"
    );
    // `describe` shows it.
    let described = api(
        &client,
        "schedule",
        "describe",
        json!({"schema_version": 1, "name": "a1"}),
    )
    .await
    .unwrap();
    assert!(
        described["cluster"]["last_retention_run"].is_string(),
        "{described}"
    );

    for fleet in replicas {
        fleet.stop().await.unwrap();
    }
}

/// A backup passes its retention duration while nothing completes: the next sweep expires it,
/// and the deleter removes its objects and its record. The newest backup stays (the floor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_based_expiry_happens_with_no_new_backup() {
    // Paused: no backup is taken during the test.
    let world = Setup::new(Members {
        executor: false,
        ..Members::ALL
    })
    .configure(|config| config.scheduler.retention_sweep_interval = Duration::from_secs(2))
    .schedule(
        json!({"name": "nightly", "cluster": "c1", "plan": "full", "cron": "@daily",
               "paused": true, "policy": {"retention_duration": 1}}),
    )
    .start()
    .await;
    let World {
        config, fleet, js, ..
    } = world;

    let store = object_store(&config).await;
    let now = Utc::now();
    // `old` leaves its one-day retention 6 s from now; `new` is an hour old.
    let old_completed = now - chrono::Duration::days(1) + chrono::Duration::seconds(6);
    let backups = [
        ("nightly-new", now - chrono::Duration::hours(1)),
        ("nightly-old", old_completed),
    ];
    for (id, completed_at) in backups {
        let mut report = json!({
            "schema_version": 1, "backup_id": id, "cluster": "c1", "plan": "full",
            "schedule": "nightly", "backup_name": "nightly", "status": "completed",
            "started_at": (completed_at - chrono::Duration::minutes(5)).to_rfc3339(),
            "completed_at": completed_at.to_rfc3339(),
            "artifacts": [format!("backups/c1/nightly/{id}/backup.xbstream")],
        });
        fixtures::upload_genuine_json(&store, &mut report).await;
        js.publish(
            sexton_shared::channels::REPORTS.subject(&"c1".parse().unwrap()),
            serde_json::to_vec(&report).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let c1: sexton_model::names::ClusterName = "c1".parse().unwrap();
    // Both recorded, and both kept by the retention pass their reports triggered.
    eventually("both backups recorded", Duration::from_secs(20), || {
        let catalog = catalog.clone();
        let c1 = c1.clone();
        async move {
            let records = catalog.list_cluster(&c1).await.ok()?;
            (records.len() == 2
                && records
                    .iter()
                    .all(|r| r.value.status == BackupStatus::Completed))
            .then_some(())
        }
    })
    .await;
    assert!(
        Utc::now() < old_completed + chrono::Duration::days(1),
        "the test was too slow to see the old backup within its retention"
    );

    // Then, with no new backup, a sweep expires `old`: record and objects gone.
    eventually(
        "the old backup expired and deleted",
        Duration::from_secs(40),
        || {
            let catalog = catalog.clone();
            let c1 = c1.clone();
            let store = &store;
            async move {
                let records = catalog.list_cluster(&c1).await.ok()?;
                let objects = store.list("backups/c1/nightly/nightly-old/").await.ok()?;
                (records.len() == 1 && objects.is_empty()).then_some(())
            }
        },
    )
    .await;
    let deleted_at = Utc::now();
    assert!(deleted_at > old_completed + chrono::Duration::days(1));
    let left = catalog.list_cluster(&c1).await.unwrap();
    assert_eq!(left[0].value.id.as_str(), "nightly-new");
    assert_eq!(
        store
            .list("backups/c1/nightly/nightly-new/")
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(
        due_events(&js).await.is_empty(),
        "no backup was due during the test"
    );
    // The retention event names the reason.
    let events: Vec<String> =
        read_stream(&js, topology::STREAM_EVENTS, "sexton.v1.event.retention.>")
            .await
            .iter()
            .map(|m| String::from_utf8_lossy(&m.payload).to_string())
            .collect();
    assert!(
        events.iter().any(|e| e.contains("nightly-old")),
        "{events:#?}"
    );
    fleet.stop().await.unwrap();
}
