//! `sexton retention preview` asks the live fleet what it would delete now and why, and deletes
//! nothing: the records stay `completed` and their objects stay in S3.

use std::{collections::BTreeSet, process::Command, time::Duration};

use serde_json::json;
use sexton_model::{names::ClusterName, records::BackupStatus};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preview_explains_and_deletes_nothing() {
    // A paused schedule gives the plan its policy and never fires.
    let world = Setup::new(Members {
        scheduler: true,
        retention_worker: true,
        deleter: true,
        executor: false,
    })
    .schedule(json!({"name": "nightly", "cluster": "c1", "plan": "full",
                     "cron": "0 3 * * *", "paused": true, "policy": {"keep_last": 2}}))
    .start()
    .await;
    let World {
        nats,
        config,
        fleet,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    for day in 1..=4 {
        let id = format!("b{day}");
        let keys = [
            format!("backups/c1/nightly/{id}/backup.xbstream"),
            format!("backups/c1/nightly/{id}/metadata.json"),
        ];
        for key in &keys {
            store.put(key, "x".into()).await.unwrap();
        }
        let record = serde_json::from_value(json!({
            "id": id, "uid": format!("u{day}"), "cluster": "c1", "plan": "full",
            "schedule": "nightly", "backup_name": "nightly", "kind": "full",
            "status": "completed", "completed_at": format!("2026-11-0{day}T03:00:00Z"),
            "started_at": format!("2026-11-0{day}T02:50:00Z"), "artifacts": keys,
        }))
        .unwrap();
        catalog.create(&record).await.unwrap();
    }

    let out = Command::new(service_binary("sexton"))
        .args(["retention", "preview", "--cluster", "c1", "-o", "json"])
        .env("SEXTON_NATS_URL", nats.url())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let groups: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let decision = &groups[0]["decision"];
    let ids = |key: &str| -> Vec<String> {
        decision[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("keep"), ["b4", "b3"], "{groups:#}");
    assert_eq!(ids("delete"), ["b2", "b1"], "{groups:#}");
    for kept in decision["keep"].as_array().unwrap() {
        let reasons = kept["reasons"].to_string();
        assert!(
            reasons.contains("last"),
            "a keep without its rule: {reasons}"
        );
    }

    // Unknown cluster names are refused with exit code 2.
    let bad = Command::new(service_binary("sexton"))
        .args(["retention", "preview", "--cluster", "../c1"])
        .env("SEXTON_NATS_URL", nats.url())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid cluster name"));

    // Nothing was marked or deleted.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let records = catalog
        .list_cluster(&ClusterName::new("c1").unwrap())
        .await
        .unwrap();
    assert_eq!(records.len(), 4);
    assert!(records
        .iter()
        .all(|r| r.value.status == BackupStatus::Completed));
    let keys: BTreeSet<String> = store
        .list("backups/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(keys.len(), 8);
    fleet.stop().await.unwrap();
}
