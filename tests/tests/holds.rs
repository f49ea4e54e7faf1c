//! In-use holds end to end (issue 8, seed 003's manual checklist): `backup.hold` keeps a
//! backup with its reason (`restore:<id>`) through every rule that would delete it — keep-last,
//! a user's delete, a mark retention made before the hold — and `backup.release` lets it go.
//! Bad requests are refused with a clear error and write nothing.

use std::{collections::BTreeSet, time::Duration};

use serde_json::{json, Value};
use sexton_model::names::ClusterName;
use sexton_shared::{api::ErrorCode, catalog::Catalog};
use sexton_tests::{
    fixtures::{self, keys_under},
    setup::{Setup, World},
    *,
};

async fn hold(client: &async_nats::Client, verb: &str, id: &str, reason: &str) -> Value {
    api(
        client,
        "backup",
        verb,
        json!({"schema_version": 1, "cluster": "c1", "id": id, "reason": reason}),
    )
    .await
    .unwrap_or_else(|err| panic!("backup.{verb} {id} {reason}: {err}"))
}

async fn ids_in_catalog(catalog: &Catalog) -> BTreeSet<String> {
    catalog
        .list_cluster(&ClusterName::new("c1").unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.value.id.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_backup_outlives_every_rule_and_goes_after_release() {
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "db", "cluster": "c1", "plan": "base", "cron": "@daily",
                         "paused": true, "policy": {"keep_last": 1}}),
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

    let b1 = trigger_backup(&client, "db").await;
    wait_reported(&catalog, "c1", &b1).await;
    let held = hold(&client, "hold", &b1, "restore:r-42").await;
    assert_eq!(held["action"], json!("held"));
    assert_eq!(held["holds"], json!(["restore:r-42"]));
    // Holding twice is a no-op; a second reason adds to the first.
    let again = hold(&client, "hold", &b1, "restore:r-42").await;
    assert_eq!(again["action"], json!("already-held"));
    hold(&client, "hold", &b1, "clone:db2").await;

    // keep_last 1: b2 and b3 push b1 out of every rule; b2 goes, b1 stays with its reasons.
    let b2 = trigger_backup(&client, "db").await;
    wait_reported(&catalog, "c1", &b2).await;
    let b3 = trigger_backup(&client, "db").await;
    wait_reported(&catalog, "c1", &b3).await;
    eventually("b2 deleted", Duration::from_secs(30), || {
        let (catalog, b2) = (catalog.clone(), b2.clone());
        async move { (!ids_in_catalog(&catalog).await.contains(&b2)).then_some(()) }
    })
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    assert_eq!(
        ids_in_catalog(&catalog).await,
        BTreeSet::from([b1.clone(), b3.clone()])
    );
    // The preview says why b1 stays.
    let preview = api(
        &client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    let kept = &preview[0]["decision"]["keep"];
    let b1_reasons = kept
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == json!(b1))
        .unwrap_or_else(|| panic!("b1 kept in {preview}"))["reasons"]
        .to_string();
    assert!(b1_reasons.contains("hold restore:r-42"), "{b1_reasons}");
    assert!(b1_reasons.contains("hold clone:db2"), "{b1_reasons}");
    // A user's delete is refused while it is held, with the reason, even forced.
    let refused = api(
        &client,
        "backup",
        "delete",
        json!({"schema_version": 1, "cluster": "c1", "id": b1, "remote": true, "force": true}),
    )
    .await
    .unwrap_err();
    assert!(refused.message.contains("held: restore:r-42"), "{refused}");
    // `describe` shows the holds.
    let described = api(
        &client,
        "backup",
        "describe",
        json!({"schema_version": 1, "cluster": "c1", "id": b1}),
    )
    .await
    .unwrap();
    assert_eq!(
        described["backup"]["holds"],
        json!(["restore:r-42", "clone:db2"])
    );
    assert_eq!(described["retention"]["verdict"], json!("keep"));

    // Releasing one reason is not enough.
    let released = hold(&client, "release", &b1, "restore:r-42").await;
    assert_eq!(released["holds"], json!(["clone:db2"]));
    tokio::time::sleep(Duration::from_secs(2)).await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    assert!(ids_in_catalog(&catalog).await.contains(&b1));
    // The last release asks for a retention pass, and b1 goes: record and objects.
    hold(&client, "release", &b1, "clone:db2").await;
    eventually("b1 deleted after release", Duration::from_secs(30), || {
        let (catalog, b1) = (catalog.clone(), b1.clone());
        async move { (!ids_in_catalog(&catalog).await.contains(&b1)).then_some(()) }
    })
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let keys = keys_under(&store, "backups/c1/db/").await;
    assert_eq!(
        keys,
        BTreeSet::from([
            format!("backups/c1/db/{b3}/backup.xbstream"),
            format!("backups/c1/db/{b3}/metadata.json"),
        ])
    );
    fleet.stop().await.unwrap();
}

/// A hold placed after retention marked the backup (its delete job still queued) takes the
/// mark off: the deleter refuses the job and nothing is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_on_a_marked_backup_stops_its_deletion() {
    // The scheduler only: the job waits in the stream until the deleter starts.
    let world = Setup::new(SCHEDULER_ONLY)
        .schedule(
            json!({"name": "db", "cluster": "c1", "plan": "base", "cron": "@daily",
                         "paused": true, "policy": {"keep_last": 1}}),
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
    let records = [
        fixtures::backup("c1", "base", "b1", None, 1, 1),
        fixtures::backup("c1", "base", "b2", None, 2, 1),
    ];
    fixtures::put_backups(&catalog, &store, &records).await;
    let current = catalog
        .get(&ClusterName::new("c1").unwrap(), &"b1".parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    fixtures::expire(&js, &catalog, &current, "del.test.b1").await;
    hold(&client, "hold", "b1", "restore:r-1").await;
    let marked = catalog
        .get(&ClusterName::new("c1").unwrap(), &"b1".parse().unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(
        marked.status,
        sexton_model::records::BackupStatus::Completed,
        "the hold took the mark off"
    );
    let deleter = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: false,
            deleter: true,
            executor: false,
        },
    );
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    assert_eq!(
        ids_in_catalog(&catalog).await,
        BTreeSet::from(["b1".to_string(), "b2".to_string()])
    );
    assert_eq!(keys_under(&store, "backups/c1/base/b1/").await.len(), 2);
    deleter.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

/// Malformed hold and release requests get a clear `invalid` (or `not-found`) error and change
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_hold_requests_are_refused_and_nothing_is_written() {
    let world = Setup::new(SCHEDULER_ONLY)
        .without_s3()
        .schedule(
            json!({"name": "db", "cluster": "c1", "plan": "base", "cron": "@daily", "paused": true}),
        )
        .start()
        .await;
    let World {
        fleet,
        client,
        catalog,
        ..
    } = world;
    catalog
        .create(&fixtures::backup("c1", "db", "b1", None, 1, 1))
        .await
        .unwrap();
    let revision = || async {
        catalog
            .get(&ClusterName::new("c1").unwrap(), &"b1".parse().unwrap())
            .await
            .unwrap()
            .unwrap()
            .revision
    };
    let before = revision().await;
    let body =
        |reason: Value| json!({"schema_version": 1, "cluster": "c1", "id": "b1", "reason": reason});
    let long = format!("restore:{}", "x".repeat(200));
    let cases: Vec<(&str, Value, ErrorCode, &str)> = vec![
        ("hold", body(json!("")), ErrorCode::Invalid, "no ':'"),
        ("hold", body(json!("restore")), ErrorCode::Invalid, "no ':'"),
        (
            "hold",
            body(json!("restore:")),
            ErrorCode::Invalid,
            "the id after ':'",
        ),
        (
            "hold",
            body(json!(":r1")),
            ErrorCode::Invalid,
            "lowercase word",
        ),
        (
            "hold",
            body(json!("Restore:r1")),
            ErrorCode::Invalid,
            "lowercase word",
        ),
        (
            "hold",
            body(json!("restore:a/b")),
            ErrorCode::Invalid,
            "the id after ':'",
        ),
        (
            "hold",
            body(json!("restore:a\u{0}")),
            ErrorCode::Invalid,
            "the id after ':'",
        ),
        (
            "hold",
            body(json!(long)),
            ErrorCode::Invalid,
            "longer than 160",
        ),
        ("hold", body(json!(42)), ErrorCode::Invalid, "invalid type"),
        (
            "hold",
            json!({"schema_version": 1, "cluster": "c1", "id": "b1"}),
            ErrorCode::Invalid,
            "missing field `reason`",
        ),
        (
            "hold",
            json!({"schema_version": 1, "cluster": "c1", "id": "b1", "reason": "restore:r1", "until": "x"}),
            ErrorCode::Invalid,
            "unknown field `until`",
        ),
        (
            "hold",
            json!({"schema_version": 1, "cluster": "../c1", "id": "b1", "reason": "restore:r1"}),
            ErrorCode::Invalid,
            "invalid cluster name",
        ),
        (
            "hold",
            json!({"schema_version": 1, "cluster": "c1", "id": "nope", "reason": "restore:r1"}),
            ErrorCode::NotFound,
            "backup nope of cluster c1 not found",
        ),
        (
            "describe",
            json!({"schema_version": 1, "cluster": "c1", "id": "nope"}),
            ErrorCode::NotFound,
            "backup nope of cluster c1 not found",
        ),
        (
            "release",
            body(json!("restore:r1")),
            ErrorCode::NotFound,
            "has no hold \"restore:r1\" (holds: none)",
        ),
        (
            "release",
            body(json!("restore")),
            ErrorCode::Invalid,
            "no ':'",
        ),
        (
            "describe",
            json!({"schema_version": 1, "cluster": "c1"}),
            ErrorCode::Invalid,
            "missing field `id`",
        ),
    ];
    for (verb, request, code, needle) in cases {
        let err = api(&client, "backup", verb, request.clone())
            .await
            .unwrap_err();
        assert_eq!(err.code, code, "{verb} {request}: {err}");
        assert!(
            err.message.contains(needle),
            "{verb} {request}: {}",
            err.message
        );
    }
    assert_eq!(revision().await, before, "nothing was written");
    fleet.stop().await.unwrap();
}

/// An executor registers a hold with its report (here the reference executor, told by a
/// label, as an operator taking a pre-upgrade backup would): the backup is recorded held,
/// outlives keep-last, and goes after `backup release`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_registered_by_the_executors_report_keeps_the_backup() {
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "db", "cluster": "c1", "plan": "base", "cron": "@daily",
                         "paused": true, "policy": {"keep_last": 1},
                         "annotations": {"sexton.io/executor-holds": "upgrade:pg16, not a hold"}}),
        )
        .start()
        .await;
    let World {
        fleet,
        client,
        catalog,
        ..
    } = world;
    let b1 = trigger_backup(&client, "db").await;
    let recorded = wait_reported(&catalog, "c1", &b1).await;
    assert_eq!(
        recorded.holds,
        ["upgrade:pg16"],
        "the bad annotation is left out"
    );
    api(
        &client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "db", "annotations": {}}),
    )
    .await
    .unwrap();
    let b2 = trigger_backup(&client, "db").await;
    wait_reported(&catalog, "c1", &b2).await;
    let b3 = trigger_backup(&client, "db").await;
    wait_reported(&catalog, "c1", &b3).await;
    eventually("b2 deleted", Duration::from_secs(30), || {
        let (catalog, b2) = (catalog.clone(), b2.clone());
        async move { (!ids_in_catalog(&catalog).await.contains(&b2)).then_some(()) }
    })
    .await;
    assert!(ids_in_catalog(&catalog).await.contains(&b1));
    hold(&client, "release", &b1, "upgrade:pg16").await;
    eventually("b1 deleted after release", Duration::from_secs(30), || {
        let (catalog, b1) = (catalog.clone(), b1.clone());
        async move { (!ids_in_catalog(&catalog).await.contains(&b1)).then_some(()) }
    })
    .await;
    fleet.stop().await.unwrap();
}
