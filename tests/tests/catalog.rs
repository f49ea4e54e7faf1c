//! The catalog against the bucket (issue 12): the scrub finds backups whose objects vanished
//! or changed behind Sexton's back and stops counting them; a lost catalog is rebuilt from the
//! bucket's `metadata.json` documents, and retention then decides exactly what it decided
//! before, while orphan deletion refuses to run over the lost catalog.

use std::{collections::BTreeMap, time::Duration};

use async_nats::jetstream;
use chrono::Utc;
use serde_json::{json, Value};
use sexton_model::records::BackupStatus;
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

const SERVICES: Members = Members {
    scheduler: true,
    retention_worker: true,
    deleter: true,
    executor: false,
};

fn report(id: &str, parent: Option<&str>, completed_at: chrono::DateTime<Utc>) -> Value {
    json!({
        "schema_version": 1, "backup_id": id, "cluster": "c1", "plan": "full",
        "schedule": "f", "backup_name": "f", "status": "completed",
        "kind": if parent.is_some() { "incremental" } else { "full" }, "parent": parent,
        "started_at": (completed_at - chrono::Duration::minutes(5)).to_rfc3339(),
        "completed_at": completed_at.to_rfc3339(),
        "artifacts": [format!("backups/c1/f/{id}/backup.xbstream")],
    })
}

/// Uploads the backup's objects and reports it; waits until it is recorded completed.
async fn take(
    js: &jetstream::Context,
    store: &sexton_shared::object_store::ObjectStore,
    catalog: &Catalog,
    body: Value,
) {
    let mut body = body;
    fixtures::upload_genuine_json(store, &mut body).await;
    let id = body["backup_id"].as_str().unwrap().to_string();
    js.publish(
        "sexton.v1.report.c1",
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let record = wait_reported(catalog, "c1", &id).await;
    assert_eq!(record.status, BackupStatus::Completed, "{record:?}");
}

async fn policy_schedule(client: &async_nats::Client, policy: Value) {
    create_schedule(
        client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": policy}),
    )
    .await;
}

/// Waits until retention and the deleter have nothing left to do.
async fn quiet(js: &jetstream::Context) {
    for (stream, durable) in [
        (topology::STREAM_REPORTS, topology::CONSUMER_REPORTS),
        (topology::STREAM_RETENTION, topology::CONSUMER_RETENTION),
        (topology::STREAM_JOBS, topology::CONSUMER_DELETER),
    ] {
        eventually(
            &format!("{durable} drained"),
            Duration::from_secs(30),
            || {
                let js = js.clone();
                async move { (consumer_backlog(&js, stream, durable).await? == 0).then_some(()) }
            },
        )
        .await;
    }
}

async fn ids(catalog: &Catalog) -> BTreeMap<String, BackupStatus> {
    fixtures::records_of(catalog, "c1")
        .await
        .into_iter()
        .map(|(id, r)| (id, r.value.status))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrub_stops_counting_a_backup_whose_objects_went_behind_our_back() {
    use BackupStatus::*;
    let world = Setup::new(SERVICES)
        .schedule(
            json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily",
                         "paused": true, "policy": {"keep_last": 2}}),
        )
        .start()
        .await;
    let World {
        config,
        fleet,
        client,
        js,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let now = Utc::now();
    take(
        &js,
        &store,
        &catalog,
        report("b1", None, now - chrono::Duration::hours(3)),
    )
    .await;
    take(
        &js,
        &store,
        &catalog,
        report("b2", None, now - chrono::Duration::hours(2)),
    )
    .await;
    quiet(&js).await;

    // b2's data object is deleted behind Sexton's back (another tool, a lifecycle rule).
    let b2_data = "backups/c1/f/b2/backup.xbstream".to_string();
    let failures = store
        .delete_batch(std::slice::from_ref(&b2_data))
        .await
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    let dry = api(
        &client,
        "catalog",
        "scrub",
        json!({"schema_version": 1, "cluster": "c1", "dry_run": true}),
    )
    .await
    .unwrap();
    assert_eq!(dry["findings"][0]["id"], "b2", "{dry:#}");
    assert_eq!(dry["findings"][0]["becomes"], "missing");
    assert_eq!(
        ids(&catalog).await["b2"],
        Completed,
        "a dry run changes nothing"
    );
    let scrub = api(
        &client,
        "catalog",
        "scrub",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(scrub["missing_after"], 1, "{scrub:#}");
    let b2 = fixtures::records_of(&catalog, "c1").await["b2"]
        .value
        .clone();
    assert_eq!(b2.status, Missing);
    assert!(
        b2.last_error
            .as_deref()
            .unwrap_or_default()
            .contains(&format!("object {b2_data} is gone")),
        "{b2:?}"
    );
    let incidents = fixtures::incidents(&js).await;
    assert!(
        incidents
            .iter()
            .any(|i| i.kind == "backup-missing" && i.backup_id.as_deref() == Some("b2")),
        "{incidents:#?}"
    );

    // A new backup: retention counts b1 and b3 (keep_last 2), not the missing b2, so b1 stays;
    // b2 is kept, not counted, and says why.
    take(
        &js,
        &store,
        &catalog,
        report("b3", None, now - chrono::Duration::hours(1)),
    )
    .await;
    quiet(&js).await;
    assert_eq!(
        ids(&catalog).await,
        BTreeMap::from([
            ("b1".into(), Completed),
            ("b2".into(), Missing),
            ("b3".into(), Completed)
        ])
    );
    let preview = api(
        &client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    let kept = &preview[0]["decision"]["keep"];
    let b2_reasons = kept
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "b2")
        .map(|d| d["reasons"].to_string())
        .unwrap_or_default();
    assert!(b2_reasons.contains("missing"), "{preview:#}");

    // b3's data object is overwritten with other bytes: missing too. Put back, found again.
    let b3_data = "backups/c1/f/b3/backup.xbstream";
    let original = store.get(b3_data).await.unwrap().unwrap();
    store.put(b3_data, "tampered".into()).await.unwrap();
    api(
        &client,
        "catalog",
        "scrub",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    let b3 = fixtures::records_of(&catalog, "c1").await["b3"]
        .value
        .clone();
    assert_eq!(b3.status, Missing);
    assert!(
        b3.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("holds 8 bytes"),
        "{b3:?}"
    );
    store.put(b3_data, original).await.unwrap();
    let scrub = api(
        &client,
        "catalog",
        "scrub",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(scrub["findings"][0]["becomes"], "completed", "{scrub:#}");
    assert_eq!(ids(&catalog).await["b3"], Completed);
    quiet(&js).await;
    assert_eq!(
        ids(&catalog).await["b1"],
        Completed,
        "nothing real was deleted"
    );
    fleet.stop().await.unwrap();
}

/// The decisions of a preview, by id: keep or delete, with the reasons.
fn decisions(preview: &Value) -> BTreeMap<String, (String, Value)> {
    let mut out = BTreeMap::new();
    for group in preview.as_array().unwrap() {
        for verdict in ["keep", "delete"] {
            for decision in group["decision"][verdict].as_array().unwrap() {
                out.insert(
                    decision["id"].as_str().unwrap().to_string(),
                    (verdict.to_string(), decision["reasons"].clone()),
                );
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_catalog_is_imported_from_the_bucket_and_decides_as_before() {
    let s3 = S3::start();
    let nats = Nats::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(&config, SERVICES);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let store = object_store(&config).await;
    let catalog = Catalog::new(topology::ensure(&js, 1).await.unwrap().catalog);
    let policy = json!({"keep_last": 2, "keep_daily": 2});
    policy_schedule(&client, policy.clone()).await;
    let now = Utc::now();
    let hours = chrono::Duration::hours;
    for (id, parent, age) in [
        ("b1", None, 60),
        ("b2", Some("b1"), 50),
        ("b3", None, 30),
        ("b4", Some("b3"), 20),
        ("b5", Some("b4"), 10),
    ] {
        take(&js, &store, &catalog, report(id, parent, now - hours(age))).await;
    }
    quiet(&js).await;
    let before_ids = ids(&catalog).await;
    let before = decisions(
        &api(
            &client,
            "retention",
            "preview",
            json!({"schema_version": 1, "cluster": "c1"}),
        )
        .await
        .unwrap(),
    );
    assert!(before_ids.len() >= 3, "{before_ids:?}");
    fleet.stop().await.unwrap();
    drop(nats);

    // The catalog is lost: a new NATS, the same bucket. The schedule comes back (from Git, say).
    let nats = Nats::start();
    let config = sexton_tests::config(&nats, &s3);
    let fleet = Fleet::start(&config, SERVICES);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let catalog = Catalog::new(topology::ensure(&js, 1).await.unwrap().catalog);
    policy_schedule(&client, policy).await;
    quiet(&js).await;
    assert!(ids(&catalog).await.is_empty());

    // Orphan deletion refuses: every backup in the bucket looks orphaned.
    let refused = api(
        &client,
        "orphans",
        "delete",
        json!({"schema_version": 1, "cluster": "c1", "grace": "1s"}),
    )
    .await
    .unwrap_err();
    assert!(
        refused.message.contains("catalog import --cluster c1"),
        "{refused}"
    );
    let objects = fixtures::keys_under(&store, "backups/c1/").await;
    assert!(
        objects.len() >= 2 * before_ids.len(),
        "nothing deleted: {objects:?}"
    );

    let dry = api(
        &client,
        "catalog",
        "import",
        json!({"schema_version": 1, "cluster": "c1", "dry_run": true}),
    )
    .await
    .unwrap();
    assert_eq!(
        dry["imported"].as_array().unwrap().len(),
        before_ids.len(),
        "{dry:#}"
    );
    assert!(ids(&catalog).await.is_empty(), "a dry run writes nothing");
    let imported = api(
        &client,
        "catalog",
        "import",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(imported["skipped"], json!([]), "{imported:#}");
    assert_eq!(ids(&catalog).await, before_ids);
    quiet(&js).await;
    let after = decisions(
        &api(
            &client,
            "retention",
            "preview",
            json!({"schema_version": 1, "cluster": "c1"}),
        )
        .await
        .unwrap(),
    );
    assert_eq!(
        after, before,
        "the imported catalog decides as the lost one did"
    );
    // A second import finds everything known.
    let again = api(
        &client,
        "catalog",
        "import",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(again["known"], before_ids.len());
    assert_eq!(again["imported"], json!([]));
    fleet.stop().await.unwrap();
}
