//! The deleter trusts no job: a duplicate delivery deletes nothing extra, a job for a backup
//! that is not expiring (or names another unique id or an old revision) deletes nothing, and
//! the deleter keeps running through all of it.

use std::{collections::BTreeSet, time::Duration};

use async_nats::jetstream::{self, message::PublishMessage};
use sexton_shared::{
    catalog::Catalog,
    names::{BackupId, ClusterName},
    records::{BackupRecord, BackupStatus},
    topology,
    wire::{self, DeleteJob},
};
use sexton_tests::*;

fn record(id: &str, status: BackupStatus) -> BackupRecord {
    serde_json::from_value(serde_json::json!({
        "id": id, "uid": format!("uid-{id}"), "cluster": "c1", "plan": "full",
        "backup_name": "nightly", "kind": "full", "status": status,
        "completed_at": "2026-01-01T00:00:00Z",
        "artifacts": [
            format!("backups/c1/nightly/{id}/backup.xbstream"),
            format!("backups/c1/nightly/{id}/metadata.json"),
        ],
    }))
    .unwrap()
}

async fn publish_job(js: &jetstream::Context, job: &DeleteJob, message_id: &str) {
    js.send_publish(
        topology::delete_job_subject(&job.cluster),
        PublishMessage::build()
            .payload(wire::encode(job))
            .message_id(message_id),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_and_unwarranted_jobs_delete_nothing_extra() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;

    // b-expiring may go; b-completed, b-other-uid and b-stale must stay.
    let mut revisions = std::collections::BTreeMap::new();
    for (id, status) in [
        ("b-expiring", BackupStatus::Expiring),
        ("b-completed", BackupStatus::Completed),
        ("b-other-uid", BackupStatus::Expiring),
        ("b-stale", BackupStatus::Expiring),
    ] {
        let record = record(id, status);
        for key in &record.artifacts {
            store.put(key, "data".into()).await.unwrap();
        }
        revisions.insert(id, catalog.create(&record).await.unwrap());
    }
    let job = |id: &str, uid: String, revision: u64| DeleteJob {
        schema_version: 1,
        cluster: ClusterName::new("c1").unwrap(),
        backup_id: BackupId::new(id).unwrap(),
        uid,
        revision,
        reasons: vec!["test".into()],
    };
    let good = job(
        "b-expiring",
        "uid-b-expiring".into(),
        revisions["b-expiring"],
    );
    // The same job twice, as two distinct messages, so both are delivered.
    publish_job(&js, &good, "first").await;
    publish_job(&js, &good, "second").await;
    publish_job(
        &js,
        &job(
            "b-completed",
            "uid-b-completed".into(),
            revisions["b-completed"],
        ),
        "c",
    )
    .await;
    publish_job(
        &js,
        &job(
            "b-other-uid",
            "someone-else".into(),
            revisions["b-other-uid"],
        ),
        "u",
    )
    .await;
    publish_job(
        &js,
        &job("b-stale", "uid-b-stale".into(), revisions["b-stale"] - 1),
        "s",
    )
    .await;
    publish_job(&js, &job("b-unknown", "uid-b-unknown".into(), 1), "x").await;

    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: false,
            deleter: true,
            executor: false,
        },
    );
    eventually(
        "the deleter to drain its jobs",
        Duration::from_secs(60),
        || {
            let js = js.clone();
            async move {
                let backlog =
                    consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER)
                        .await?;
                (backlog == 0).then_some(())
            }
        },
    )
    .await;

    let keys: BTreeSet<String> = store
        .list("backups/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    let expected: BTreeSet<String> = ["b-completed", "b-other-uid", "b-stale"]
        .iter()
        .flat_map(|id| {
            [
                format!("backups/c1/nightly/{id}/backup.xbstream"),
                format!("backups/c1/nightly/{id}/metadata.json"),
            ]
        })
        .collect();
    assert_eq!(keys, expected);
    let remaining: BTreeSet<String> = catalog
        .list_cluster(&ClusterName::new("c1").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            assert_ne!(
                r.value.status,
                BackupStatus::Deleting,
                "{} left half-claimed",
                r.value.id
            );
            r.value.id.to_string()
        })
        .collect();
    assert_eq!(
        remaining,
        ["b-completed", "b-other-uid", "b-stale"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );

    // The refused jobs were recorded as incidents, with their reasons.
    let incidents: Vec<String> =
        read_stream(&js, topology::STREAM_EVENTS, "sexton.v1.event.incident.>")
            .await
            .iter()
            .map(|m| String::from_utf8_lossy(&m.payload).to_string())
            .collect();
    for needle in ["not expiring", "unique id", "stale job"] {
        assert!(
            incidents.iter().any(|i| i.contains(needle)),
            "no incident says {needle:?}: {incidents:?}"
        );
    }
    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}
