//! The whole loop on real servers: a schedule fires every second, the reference executor writes
//! two objects per backup to SeaweedFS and reports it, retention keeps the newest 3, and the
//! deleter removes the rest from S3 and from the catalog.

use std::{collections::BTreeSet, time::Duration};

use serde_json::json;
use sexton_model::records::BackupStatus;
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_fires_and_retention_keeps_the_newest_three() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(&config, Members::ALL);

    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let created = eventually("the scheduler api", Duration::from_secs(30), || {
        let client = client.clone();
        async move {
            api(
                &client,
                "schedule",
                "create",
                json!({"schema_version": 1, "name": "every-second", "cluster": "c1",
                       "plan": "full", "cron": "@every 1s", "policy": {"keep_last": 3}}),
            )
            .await
            .ok()
        }
    })
    .await;
    assert_eq!(created["schedule"]["name"], "every-second");

    // At least 7 backups reported.
    eventually("7 reported backups", Duration::from_secs(60), || {
        let js = js.clone();
        async move {
            let mut stream = js.get_stream(topology::STREAM_REPORTS).await.ok()?;
            let reported = stream.info().await.ok()?.state.last_sequence;
            (reported >= 7).then_some(())
        }
    })
    .await;
    api(
        &client,
        "schedule",
        "pause",
        json!({"schema_version": 1, "name": "every-second"}),
    )
    .await
    .unwrap();

    // Let the work in flight drain: no new due tick, every consumer caught up, twice in a row.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut previous = (u64::MAX, u64::MAX);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the fleet did not settle"
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        let due = js
            .get_stream(topology::STREAM_DUE)
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .state
            .last_sequence;
        let mut backlog = 0;
        for (stream, durable) in [
            (topology::STREAM_DUE, topology::CONSUMER_EXECUTOR),
            (topology::STREAM_REPORTS, topology::CONSUMER_REPORTS),
            (topology::STREAM_RETENTION, topology::CONSUMER_RETENTION),
            (topology::STREAM_JOBS, topology::CONSUMER_DELETER),
        ] {
            backlog += consumer_backlog(&js, stream, durable).await.unwrap_or(1);
        }
        if backlog == 0 && previous == (due, 0) {
            break;
        }
        previous = (due, backlog);
    }

    // Every backup ever due, newest first by tick; the executor completes each one.
    let mut due_ids: Vec<(String, String)> = read_stream(&js, topology::STREAM_DUE, ">")
        .await
        .iter()
        .map(|m| {
            let event: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
            (
                event["tick"].as_str().unwrap().to_string(),
                event["backup_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    due_ids.sort();
    due_ids.dedup();
    assert!(
        due_ids.len() >= 7,
        "only {} backups were due",
        due_ids.len()
    );
    let expected: BTreeSet<String> = due_ids
        .iter()
        .rev()
        .take(3)
        .map(|(_, id)| id.clone())
        .collect();

    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let records = catalog.list_cluster(&"c1".parse().unwrap()).await.unwrap();
    let in_catalog: BTreeSet<String> = records.iter().map(|r| r.value.id.to_string()).collect();
    assert_eq!(
        in_catalog, expected,
        "the catalog holds exactly the 3 newest backups"
    );
    assert!(records
        .iter()
        .all(|r| r.value.status == BackupStatus::Completed));

    let store = object_store(&config).await;
    // The binlog folder (one segment per backup, garbage-collected on its own queue) is
    // checked by tests/tests/binlog.rs.
    let keys: BTreeSet<String> = store
        .list("backups/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .filter(|key| !key.starts_with("backups/c1/binlog/"))
        .collect();
    let expected_keys: BTreeSet<String> = expected
        .iter()
        .flat_map(|id| {
            [
                format!("backups/c1/every-second/{id}/backup.xbstream"),
                format!("backups/c1/every-second/{id}/metadata.json"),
            ]
        })
        .collect();
    assert_eq!(
        keys, expected_keys,
        "S3 holds both objects of the 3 newest backups, nothing else"
    );

    // Every durable consumer the services created is one the channel table declares, on the
    // stream it names (issue 48: consumers are created in one module, from one table).
    let jetstream =
        async_nats::jetstream::new(async_nats::connect(config.nats.url.as_str()).await.unwrap());
    let mut created = Vec::new();
    for stream in sexton_shared::topology::stream_configs(1) {
        use futures::StreamExt as _;
        let stream = jetstream.get_stream(&stream.name).await.unwrap();
        let infos: Vec<_> = stream.consumers().collect().await;
        for info in infos {
            let info = info.unwrap();
            if let Some(name) = info.config.durable_name {
                created.push((info.stream_name, name));
            }
        }
    }
    assert!(!created.is_empty(), "the fleet created no durable");
    for (stream, name) in &created {
        assert!(
            sexton_shared::channels::DURABLES
                .iter()
                .any(|d| d.stream == stream && d.names().contains(name)),
            "durable {name} on {stream} is not in the channel table"
        );
    }

    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}
