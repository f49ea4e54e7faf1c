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
use sexton_model::records::BackupStatus;
use sexton_shared::{api::ErrorCode, catalog::Catalog, topology};
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
        // Without --cluster, the id finds its cluster (issue 50), and the refusal is the same.
        (vec!["backup", "delete", "b-held"], "legal hold"),
        (
            vec!["backup", "delete", "--oldest"],
            "--oldest needs --cluster",
        ),
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

/// Issue 50: a record-only `backup delete` (no `--remote`) says where the objects stay and how
/// to undo it, and `catalog import --include-removed` brings the record back; without the flag
/// the import still leaves a record removed on purpose alone, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_only_delete_says_where_its_objects_are_and_import_undoes_it() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(
        &config,
        Members {
            executor: false,
            ..Members::ALL
        },
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 5}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    let now = chrono::Utc::now();
    for (n, id) in ["f-b1", "f-b2"].iter().enumerate() {
        let completed = now - chrono::Duration::hours(2 - n as i64);
        let mut body = json!({
            "schema_version": 1, "backup_id": id, "cluster": "c1", "plan": "full",
            "schedule": "f", "backup_name": "f", "status": "completed", "kind": "full",
            "started_at": (completed - chrono::Duration::minutes(5)).to_rfc3339(),
            "completed_at": completed.to_rfc3339(),
            "artifacts": [format!("backups/c1/f/{id}/backup.xbstream"),
                          format!("backups/c1/f/{id}/metadata.json")],
        });
        upload_genuine_json(&store, &mut body).await;
        js.publish(
            "sexton.v1.report.c1",
            serde_json::to_vec(&body).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let before = eventually("two backups", Duration::from_secs(30), || async {
        let records = records_of(&catalog, "c1").await;
        (records.len() == 2
            && records
                .values()
                .all(|r| r.value.status == BackupStatus::Completed))
        .then_some(records)
    })
    .await;
    let out = sexton_cli(&config, &["backup", "delete", "f-b1", "--cluster", "c1"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("its objects stay under backups/c1/f/f-b1/")
            && said.contains("sexton catalog import --cluster c1 --include-removed"),
        "{said}"
    );
    // The result in kubectl's form, without flag cells (issue 50).
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "backup/f-b1 record removed in cluster c1\n"
    );
    assert!(!records_of(&catalog, "c1").await.contains_key("f-b1"));
    assert_eq!(keys_under(&store, "backups/c1/f/f-b1/").await.len(), 2);
    // Its objects are orphans now; a dry run of their deletion says it deleted nothing, and
    // the grace reads as people write it.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let out = sexton_cli(
        &config,
        &[
            "backup",
            "orphans",
            "--cluster",
            "c1",
            "--grace",
            "1s",
            "--delete",
            "--dry-run",
        ],
    );
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("orphans: 2 (a dry run: nothing was deleted")
            && said.contains("younger than the grace period (1s)"),
        "{said}"
    );
    let out = sexton_cli(&config, &["backup", "orphans", "--cluster", "c1"]);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        said.contains("orphans: 0;") && !said.contains("86400s"),
        "{said}"
    );
    assert_eq!(keys_under(&store, "backups/c1/f/f-b1/").await.len(), 2);

    let out = sexton_cli(
        &config,
        &["catalog", "import", "--cluster", "c1", "-o", "json"],
    );
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report.to_string().contains("on purpose")
            && report.to_string().contains("--include-removed"),
        "{report}"
    );
    assert!(!records_of(&catalog, "c1").await.contains_key("f-b1"));

    let out = sexton_cli(
        &config,
        &[
            "catalog",
            "import",
            "--cluster",
            "c1",
            "--include-removed",
            "-o",
            "json",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["imported"][0]["id"], "f-b1", "{report}");
    assert_eq!(report["imported"].as_array().unwrap().len(), 1, "{report}");
    let back = records_of(&catalog, "c1")
        .await
        .remove("f-b1")
        .unwrap()
        .value;
    let was = &before["f-b1"].value;
    assert_eq!(back.status, BackupStatus::Completed);
    assert_eq!(back.artifacts, was.artifacts);
    let digests = |r: &sexton_model::records::BackupRecord| {
        r.objects
            .iter()
            .map(|o| (o.key.clone(), o.size, o.sha256.clone()))
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(digests(&back), digests(was));
    fleet.stop().await.unwrap();
}
