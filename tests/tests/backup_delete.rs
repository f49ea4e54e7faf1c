//! A user's `sexton backup delete` and `sexton backup orphans`, on real servers with the
//! scheduler (API), the retention-worker and the deleter running:
//!
//! - remote cleanup is opt-in: without `--remote` (or `remote_cleanup` on the schedules) only
//!   the record goes; with it the objects go too, through the deleter;
//! - refused with the reason: the newest full backup (unless `--force`), a backup on legal hold
//!   or in progress (even with `--force`); deferred: one a kept backup depends on, carried out
//!   once nothing needs it;
//! - orphans: unowned objects older than the grace period, never the binlog archive;
//! - the CLI: exit codes and messages for refused and malformed requests.

use std::{collections::BTreeSet, process::Command, time::Duration};

use async_nats::jetstream;
use serde_json::{json, Value};
use sexton_shared::{api::ErrorCode, catalog::Catalog, records::BackupStatus, topology};
use sexton_tests::{fixtures::*, *};

async fn delete(
    client: &async_nats::Client,
    body: Value,
) -> Result<Value, sexton_shared::api::ApiError> {
    let mut body = body;
    body["schema_version"] = json!(1);
    api(client, "backup", "delete", body).await
}

async fn gone(catalog: &Catalog, store: &sexton_shared::object_store::ObjectStore, id: &str) {
    let prefix = format!("backups/c1/full/{id}/");
    eventually(&format!("{id} deleted"), Duration::from_secs(60), || {
        let (catalog, store, prefix) = (catalog.clone(), store.clone(), prefix.clone());
        async move {
            let records = records_of(&catalog, "c1").await;
            (!records.contains_key(id) && keys_under(&store, &prefix).await.is_empty())
                .then_some(())
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_deletes_are_opt_in_refused_deferred_or_carried_out_and_orphans_are_found() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;

    // Retention keeps everything here (keep_last 50): only users delete.
    put_schedule(&topo, "nightly", "c1", "full", json!({"keep_last": 50})).await;
    put_schedule_with(
        &topo,
        "opted-in",
        "c1",
        "p2",
        json!({"keep_last": 50}),
        true,
    )
    .await;
    let mut held = backup("c1", "full", "b-held", None, 5, 1);
    held.legal_hold = true;
    let mut running = backup("c1", "full", "b-running", None, 40, 1);
    running.status = BackupStatus::InProgress;
    let records = vec![
        backup("c1", "full", "b0", None, 0, 1),
        backup("c1", "full", "b1", None, 10, 1),
        backup("c1", "full", "i2", Some("b1"), 20, 1),
        backup("c1", "full", "b3", None, 30, 1),
        held,
        running,
        backup("c1", "p2", "p2-old", None, 0, 1),
        backup("c1", "p2", "p2-new", None, 10, 1),
    ];
    put_backups(&catalog, &store, &records).await;
    let stray = "backups/c1/full/lost/backup.xbstream".to_string();
    let binlog = "backups/c1/binlog/mysql-bin.000001".to_string();
    put_objects(&store, &[stray.clone(), binlog.clone()]).await;

    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: true,
            retention_worker: true,
            deleter: true,
            executor: false,
        },
    );
    let first = eventually("the backup api", Duration::from_secs(30), || {
        let client = client.clone();
        async move {
            delete(&client, json!({"cluster": "c1", "id": "b3"}))
                .await
                .err()
                .filter(|e| e.code != ErrorCode::Unavailable)
        }
    })
    .await;

    // Refused, with the reason.
    assert_eq!(first.code, ErrorCode::Invalid);
    assert!(first.message.contains("newest full backup"), "{first:?}");
    for (body, needle) in [
        (
            json!({"cluster": "c1", "id": "b-held", "force": true, "remote": true}),
            "legal hold",
        ),
        (
            json!({"cluster": "c1", "id": "b-running", "force": true}),
            "in progress",
        ),
    ] {
        let err = delete(&client, body).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Invalid);
        assert!(err.message.contains(needle), "{err:?}");
    }
    let err = delete(&client, json!({"cluster": "c1", "id": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    for body in [
        json!({"cluster": "c1", "id": "../b0"}),
        json!({"cluster": "c1", "id": "b0", "remote": "yes"}),
        json!({"cluster": "c1", "id": "b0", "recursive": true}),
        json!({"id": "b0"}),
    ] {
        let err = delete(&client, body.clone()).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Invalid, "{body}");
    }

    // Record only (the default): the objects stay.
    let reply = delete(&client, json!({"cluster": "c1", "id": "b0"}))
        .await
        .unwrap();
    assert_eq!(reply["action"], "record-deleted");
    assert!(!records_of(&catalog, "c1").await.contains_key("b0"));
    let b0_objects = keys_under(&store, "backups/c1/full/b0/").await;
    assert_eq!(b0_objects.len(), 2);

    // b1 is needed by i2: deferred, nothing deleted yet.
    let reply = delete(
        &client,
        json!({"cluster": "c1", "id": "b1", "remote": true}),
    )
    .await
    .unwrap();
    assert_eq!(reply["action"], "deferred", "{reply}");
    assert!(
        reply["reason"].as_str().unwrap().contains("needed by i2"),
        "{reply}"
    );
    let b1 = records_of(&catalog, "c1").await["b1"].value.clone();
    assert!(b1.delete_requested && b1.delete_request.as_ref().unwrap().remote);
    assert_eq!(b1.status, BackupStatus::Completed);

    // i2 goes now, objects and all, through the deleter, and so does b1, which only i2 needed.
    let reply = delete(
        &client,
        json!({"cluster": "c1", "id": "i2", "remote": true}),
    )
    .await
    .unwrap();
    assert_eq!(reply["action"], "deleting", "{reply}");
    gone(&catalog, &store, "i2").await;
    // Nothing kept needs b1 any more: its deferred delete is carried out in the same pass.
    gone(&catalog, &store, "b1").await;

    // Plan p2's schedule opted into remote cleanup: no --remote needed.
    let reply = delete(&client, json!({"cluster": "c1", "id": "p2-old"}))
        .await
        .unwrap();
    assert_eq!(reply["action"], "deleting", "{reply}");
    eventually("p2-old deleted", Duration::from_secs(60), || {
        let (catalog, store) = (catalog.clone(), store.clone());
        async move {
            (!records_of(&catalog, "c1").await.contains_key("p2-old")
                && keys_under(&store, "backups/c1/p2/p2-old/").await.is_empty())
            .then_some(())
        }
    })
    .await;

    // The newest full backup goes with --force.
    let reply = delete(
        &client,
        json!({"cluster": "c1", "id": "b3", "remote": true, "force": true}),
    )
    .await
    .unwrap();
    assert_eq!(reply["action"], "deleting", "{reply}");
    gone(&catalog, &store, "b3").await;

    // Orphans: b0's objects (record-only delete) and the stray object; not the binlog archive,
    // not the running backup's prefix, not what records own.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let scan = api(
        &client,
        "orphans",
        "list",
        json!({"schema_version": 1, "cluster": "c1", "grace": "1s"}),
    )
    .await
    .unwrap();
    let listed: BTreeSet<String> = scan["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["key"].as_str().unwrap().to_string())
        .collect();
    let mut expected = b0_objects.clone();
    expected.insert(stray.clone());
    assert_eq!(listed, expected, "{scan}");
    assert_eq!(scan["n_binlog"], 1);
    // With the default grace (24h) nothing is old enough.
    let young = api(
        &client,
        "orphans",
        "list",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(young["orphans"], json!([]));
    let before = keys_under(&store, "backups/c1/").await;
    let deleted = api(
        &client,
        "orphans",
        "delete",
        json!({"schema_version": 1, "cluster": "c1", "grace": "1s"}),
    )
    .await
    .unwrap();
    assert_eq!(deleted["failed"], json!([]), "{deleted}");
    let after = keys_under(&store, "backups/c1/").await;
    let removed: BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(removed, expected);
    assert!(after.contains(&binlog));
    for (body, needle) in [
        (
            json!({"schema_version": 1, "cluster": "c1", "grace": "0s"}),
            "at least 1s",
        ),
        (
            json!({"schema_version": 1, "cluster": "c1", "grace": "soon"}),
            "grace",
        ),
        (
            json!({"schema_version": 1, "cluster": "../c1"}),
            "invalid cluster",
        ),
    ] {
        let err = api(&client, "orphans", "list", body).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Invalid);
        assert!(err.message.contains(needle), "{err:?}");
    }

    // The CLI: refusals and bad input exit 2 with the reason; success exits 0.
    let sexton = |args: &[&str]| {
        Command::new(service_binary("sexton"))
            .args(args)
            .env("SEXTON_NATS_URL", nats.url())
            .output()
            .unwrap()
    };
    for (args, needle) in [
        (
            vec!["backup", "delete", "b-held", "--cluster", "c1", "--force"],
            "legal hold",
        ),
        (vec!["backup", "delete", "b-held"], "--cluster"),
        (
            vec![
                "backup",
                "delete",
                "b-held",
                "--cluster",
                "c1",
                "--remote=maybe",
            ],
            "unexpected value",
        ),
        (
            vec!["backup", "orphans", "--cluster", "c1", "--grace", "soon"],
            "grace",
        ),
        (vec!["backup", "orphans"], "--cluster"),
        (
            vec![
                "plugin",
                "register",
                "x",
                "--subject",
                "sexton.v1.plugin.x",
                "--selector",
                "novalue",
            ],
            "key=value",
        ),
        (
            vec!["plugin", "register", "x", "--subject", "other.x"],
            "must start with",
        ),
    ] {
        let out = sexton(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
    let out = sexton(&["backup", "orphans", "--cluster", "c1", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let scan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(scan["cluster"], "c1");

    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}
