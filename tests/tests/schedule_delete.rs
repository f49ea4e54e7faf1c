//! Deleting a schedule and its backup records (issue 8, seed 003's `backupOwnerReference`), on
//! real NATS and SeaweedFS: `backup_owner: schedule` removes the records with the schedule —
//! through the deleter, objects first, when remote cleanup is on; the records only, objects
//! kept, when it is off — and `cluster` / `none` keep them. Held, in-progress and still-needed
//! backups are never removed. A dry run says what would happen and writes nothing.

use std::{collections::BTreeSet, time::Duration};

use chrono::Timelike as _;

use serde_json::{json, Value};
use sexton_model::{names::ClusterName, records::BackupStatus};
use sexton_shared::{api::ErrorCode, catalog::Catalog, topology};
use sexton_tests::{
    fixtures::{self, keys_under},
    setup::{self, World},
    *,
};

struct Setup {
    client: async_nats::Client,
    catalog: Catalog,
    store: sexton_shared::object_store::ObjectStore,
}

impl Setup {
    async fn schedule(&self, name: &str, cluster: &str, extra: Value) {
        let mut body = json!({"name": name, "cluster": cluster, "plan": "base",
                              "cron": "@daily", "paused": true, "policy": {"keep_last": 10}});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        create_schedule(&self.client, body).await;
    }

    /// Backups of `schedule` in `cluster`: `(id, parent, status)`, with their objects.
    async fn backups(&self, cluster: &str, schedule: &str, list: &[(&str, Option<&str>, &str)]) {
        let records = fixtures::schedule_backups(cluster, schedule, list);
        fixtures::put_backups(&self.catalog, &self.store, &records).await;
    }

    async fn ids(&self, cluster: &str) -> BTreeSet<String> {
        self.catalog
            .list_cluster(&ClusterName::new(cluster).unwrap())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.value.id.to_string())
            .collect()
    }

    async fn delete(&self, name: &str, dry_run: bool) -> Value {
        api(
            &self.client,
            "schedule",
            "delete",
            json!({"schema_version": 1, "name": name, "dry_run": dry_run}),
        )
        .await
        .unwrap_or_else(|err| panic!("schedule.delete {name}: {err}"))
    }

    /// The objects of `ids` in `cluster` (one data object and metadata.json each).
    fn objects(cluster: &str, ids: &[&str]) -> BTreeSet<String> {
        ids.iter()
            .flat_map(|id| {
                [
                    format!("backups/{cluster}/base/{id}/data-0000.xbstream"),
                    format!("backups/{cluster}/base/{id}/metadata.json"),
                ]
            })
            .collect()
    }
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_owner_modes_with_and_without_remote_cleanup() {
    let world = setup::Setup::new(Members {
        scheduler: true,
        retention_worker: true,
        deleter: true,
        executor: false,
    })
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
    let setup = Setup {
        client: client.clone(),
        catalog,
        store: object_store(&config).await,
    };

    // (a) owner schedule, remote cleanup on. b1 ← b2 go with their objects; b3 is held, b4 in
    // progress, b5 needed by o1 (another schedule's incremental): they stay, with reasons.
    setup
        .schedule(
            "sa",
            "ca",
            json!({"backup_owner": "schedule", "remote_cleanup": true}),
        )
        .await;
    setup
        .schedule("keeper", "ca", json!({"remote_cleanup": true}))
        .await;
    setup
        .backups(
            "ca",
            "sa",
            &[
                ("b1", None, "completed"),
                ("b2", Some("b1"), "completed"),
                ("b3", None, "completed"),
                ("b4", None, "in-progress"),
                ("b5", None, "completed"),
            ],
        )
        .await;
    setup
        .backups("ca", "keeper", &[("o1", Some("b5"), "completed")])
        .await;
    api(
        &client,
        "backup",
        "hold",
        json!({"schema_version": 1, "cluster": "ca", "id": "b3", "reason": "restore:r-7"}),
    )
    .await
    .unwrap();
    let objects_before = keys_under(&setup.store, "backups/ca/").await;

    let plan = setup.delete("sa", true).await;
    assert_eq!(plan["dry_run"], json!(true));
    assert_eq!(plan["deleted"], json!(false));
    assert_eq!(plan["records"], json!(5));
    assert_eq!(plan["delete_with_objects"], json!(2));
    assert_eq!(plan["remove_records"], json!(0));
    let mut kept: Vec<(String, String)> = plan["keep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["id"].as_str().unwrap().into(),
                k["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    kept.sort();
    assert_eq!(kept.len(), 3, "{plan}");
    assert!(
        kept[0].0 == "b3" && kept[0].1.contains("held: restore:r-7"),
        "{kept:?}"
    );
    assert!(
        kept[1].0 == "b4" && kept[1].1.contains("in progress"),
        "{kept:?}"
    );
    assert!(
        kept[2].0 == "b5" && kept[2].1.contains("needed by o1"),
        "{kept:?}"
    );
    assert!(
        plan["summary"]
            .as_str()
            .unwrap()
            .contains("deletes 2 backup(s) with their objects"),
        "{plan}"
    );
    // The dry run wrote nothing.
    assert!(schedule_record(&js, "sa").await.is_some());
    assert_eq!(
        setup.ids("ca").await,
        set(&["b1", "b2", "b3", "b4", "b5", "o1"])
    );

    let done = setup.delete("sa", false).await;
    assert_eq!(done["deleted"], json!(true));
    assert_eq!(done["delete_with_objects"], json!(2));
    assert!(schedule_record(&js, "sa").await.is_none());
    eventually("b1 and b2 deleted", Duration::from_secs(30), || async {
        (setup.ids("ca").await == set(&["b3", "b4", "b5", "o1"])).then_some(())
    })
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let gone = Setup::objects("ca", &["b1", "b2"]);
    assert_eq!(
        keys_under(&setup.store, "backups/ca/").await,
        objects_before
            .difference(&gone)
            .cloned()
            .collect::<BTreeSet<_>>()
    );

    // b4 was in progress when its schedule went: its report still settles the record, which
    // stays (kept, as the delete said). A report of a backup the catalog does not hold under
    // that deleted schedule is refused as before.
    let report = |id: &str| sexton_model::wire::Report {
        schema_version: 1,
        backup_id: id.parse().unwrap(),
        cluster: "ca".parse().unwrap(),
        plan: "base".parse().unwrap(),
        schedule: Some("sa".parse().unwrap()),
        backup_name: "base".into(),
        status: sexton_model::wire::ReportStatus::Completed,
        kind: sexton_model::records::BackupKind::Full,
        parent: None,
        started_at: Some(chrono::Utc::now().fixed_offset()),
        completed_at: Some(chrono::Utc::now().fixed_offset()),
        tick: None,
        artifacts: Setup::objects("ca", &[id]).into_iter().collect(),
        size_bytes: Some(2),
        labels: Default::default(),
        tags: Vec::new(),
        error: None,
        volumes: Vec::new(),
        holds: Vec::new(),
        merge: None,
        objects: Vec::new(),
        log_range: None,
        differential: false,
    };
    for id in ["b4", "x9"] {
        let mut report = report(id);
        if id == "b4" {
            fixtures::upload_genuine(&setup.store, &mut report).await;
        }
        js.publish(
            sexton_shared::channels::REPORTS.subject(&"ca".parse().unwrap()),
            sexton_model::wire::encode(&report),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let cluster_a = ClusterName::new("ca").unwrap();
    eventually("b4 settled", Duration::from_secs(30), || async {
        let b4 = setup
            .catalog
            .get(&cluster_a, &"b4".parse().unwrap())
            .await
            .ok()??;
        (b4.value.status == BackupStatus::Completed).then_some(())
    })
    .await;
    eventually("x9 refused", Duration::from_secs(30), || async {
        fixtures::incidents(&js)
            .await
            .iter()
            .any(|i| i.cluster.as_deref() == Some("ca") && i.reason.contains("unknown schedule sa"))
            .then_some(())
    })
    .await;
    assert_eq!(setup.ids("ca").await, set(&["b3", "b4", "b5", "o1"]));

    // (b) owner schedule, no remote cleanup: the records go at once, every object stays.
    setup
        .schedule("sb", "cb", json!({"backup_owner": "schedule"}))
        .await;
    setup
        .backups(
            "cb",
            "sb",
            &[
                ("b1", None, "completed"),
                ("b2", Some("b1"), "completed"),
                ("f3", None, "failed"),
            ],
        )
        .await;
    let plan = setup.delete("sb", true).await;
    assert_eq!(plan["remove_records"], json!(3), "{plan}");
    assert!(
        plan["summary"]
            .as_str()
            .unwrap()
            .contains("removes 3 backup record(s) from the catalog, keeping their objects"),
        "{plan}"
    );
    setup.delete("sb", false).await;
    assert_eq!(setup.ids("cb").await, BTreeSet::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    assert_eq!(
        keys_under(&setup.store, "backups/cb/").await,
        Setup::objects("cb", &["b1", "b2", "f3"])
    );

    // (c) owner cluster and (d) none (the default), remote cleanup on: everything stays.
    setup
        .schedule(
            "sc",
            "cc",
            json!({"backup_owner": "cluster", "remote_cleanup": true}),
        )
        .await;
    setup
        .schedule("sd", "cd", json!({"remote_cleanup": true}))
        .await;
    let (_, _) = schedule_record(&js, "sd").await.unwrap();
    assert_eq!(
        schedule_record(&js, "sd").await.unwrap().0.backup_owner,
        sexton_model::records::BackupOwner::Standalone,
        "the default owner is none"
    );
    for (name, cluster, why) in [
        ("sc", "cc", "backup_owner cluster: the records stay"),
        ("sd", "cd", "backup_owner none: the records stay"),
    ] {
        setup
            .backups(
                cluster,
                name,
                &[("b1", None, "completed"), ("b2", Some("b1"), "completed")],
            )
            .await;
        let done = setup.delete(name, false).await;
        assert_eq!(done["records"], json!(2));
        assert_eq!(done["keep"].as_array().unwrap().len(), 2, "{done}");
        assert!(
            done["keep"][0]["reason"].as_str().unwrap().contains(why),
            "{done}"
        );
        assert!(schedule_record(&js, name).await.is_none());
        tokio::time::sleep(Duration::from_secs(1)).await;
        fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
        assert_eq!(setup.ids(cluster).await, set(&["b1", "b2"]));
        assert_eq!(
            keys_under(&setup.store, &format!("backups/{cluster}/")).await,
            Setup::objects(cluster, &["b1", "b2"])
        );
        let statuses: Vec<BackupStatus> = setup
            .catalog
            .list_cluster(&ClusterName::new(cluster).unwrap())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.value.status)
            .collect();
        assert!(statuses.iter().all(|s| *s == BackupStatus::Completed));
    }
    fleet.stop().await.unwrap();
}

/// Bad owner values and delete flags are refused with a clear error and write nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_owner_settings_and_delete_requests_are_refused() {
    let world = setup::Setup::new(SCHEDULER_ONLY)
        .without_s3()
        .schedule(
            json!({"name": "ok", "cluster": "c1", "plan": "p", "cron": "@daily", "paused": true}),
        )
        .start()
        .await;
    let World {
        fleet, client, js, ..
    } = world;
    let (_, before) = schedule_record(&js, "ok").await.unwrap();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "create",
            json!({"schema_version": 1, "name": "bad", "cluster": "c1", "plan": "p",
                   "cron": "@daily", "policy": {"keep_last": 1}, "backup_owner": "self"}),
            "backup_owner: expected schedule, cluster or none, got \"self\"",
        ),
        (
            "update",
            json!({"schema_version": 1, "name": "ok", "backup_owner": "Schedule"}),
            "backup_owner: expected schedule, cluster or none, got \"Schedule\"",
        ),
        (
            "update",
            json!({"schema_version": 1, "name": "ok", "backup_owner": 1}),
            "backup_owner: expected schedule, cluster or none, got 1",
        ),
        (
            "delete",
            json!({"schema_version": 1, "name": "ok", "dry_run": "yes"}),
            "invalid type",
        ),
        (
            "delete",
            json!({"schema_version": 1, "name": "ok", "force": true}),
            "unknown field `force`",
        ),
    ];
    for (verb, body, needle) in cases {
        let err = api(&client, "schedule", verb, body.clone())
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::Invalid, "{verb} {body}: {err}");
        assert!(
            err.message.contains(needle),
            "{verb} {body}: {}",
            err.message
        );
    }
    assert!(schedule_record(&js, "bad").await.is_none());
    let (_, after) = schedule_record(&js, "ok").await.unwrap();
    assert_eq!(before, after, "nothing was written");
    let err = api(
        &client,
        "schedule",
        "delete",
        json!({"schema_version": 1, "name": "ghost"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    fleet.stop().await.unwrap();
}

/// A schedule deleted and created again with the same name (a GitOps prune and re-apply, a Helm
/// upgrade that recreates it; velero#4093) keeps its status: its last backup, skip and tick, so
/// it neither fires at once nor waits a whole period. Only a replacement of the same cluster
/// and plan keeps it, and a name never used starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_schedule_keeps_its_status() {
    let world = setup::Setup::new(SCHEDULER_ONLY).without_s3().start().await;
    let World {
        fleet, client, js, ..
    } = world;
    // A daily schedule whose hour is twelve hours from now, and its last run the latest of
    // those hours: its next run is about twelve hours away whatever the time the test runs.
    // (A fixed 03:00 made the missed run of today fire at once when the test ran between 03:00
    // and 04:00 UTC, and the status under test changed.)
    let now = chrono::Utc::now();
    let hour = (now + chrono::Duration::hours(12)).hour();
    let cron = format!("0 {hour} * * *");
    let body = |name: &str, cluster: &str| {
        json!({"schema_version": 1, "name": name, "cluster": cluster, "plan": "p",
               "cron": cron, "policy": {"keep_last": 3}})
    };
    for name in ["db", "other"] {
        create_schedule(&client, body(name, "c1")).await;
    }
    // As the scheduler would have recorded them after its last run.
    let last_backup: chrono::DateTime<chrono::Utc> = {
        let today = now.date_naive().and_hms_opt(hour, 0, 0).unwrap().and_utc();
        if today <= now {
            today
        } else {
            today - chrono::Duration::days(1)
        }
    };
    let schedules = js.get_key_value(topology::BUCKET_SCHEDULES).await.unwrap();
    for name in ["db", "other"] {
        let (mut record, revision) = schedule_record(&js, name).await.unwrap();
        record.status.last_backup = Some(last_backup);
        record.status.last_fired_tick = Some(last_backup);
        record.status.activation_pending = false;
        record.status.last_backup_failed = true;
        schedules
            .update(name, serde_json::to_vec(&record).unwrap().into(), revision)
            .await
            .unwrap();
    }
    for name in ["db", "other"] {
        api(
            &client,
            "schedule",
            "delete",
            json!({"schema_version": 1, "name": name}),
        )
        .await
        .unwrap();
    }
    let replaced = api(&client, "schedule", "create", body("db", "c1"))
        .await
        .unwrap();
    assert!(
        replaced["warnings"]
            .to_string()
            .contains("replaces the one of that name deleted earlier"),
        "{replaced:#}"
    );
    let (record, _) = schedule_record(&js, "db").await.unwrap();
    assert_eq!(record.status.last_backup, Some(last_backup));
    assert_eq!(record.status.last_fired_tick, Some(last_backup));
    assert!(
        record.status.last_backup_failed,
        "the next backup is still a full"
    );
    assert!(
        !record.status.activation_pending,
        "a replacement is not an activation"
    );
    // Its next run is the next run after its last backup, not a period from now.
    let next = record.status.next_run_time.expect("a next run");
    assert!(next <= last_backup + chrono::Duration::days(1), "{next}");

    // Created again for another cluster: not the same schedule, nothing kept.
    create_schedule(&client, body("other", "c2")).await;
    let (other, _) = schedule_record(&js, "other").await.unwrap();
    assert_eq!(other.status.last_backup, None);
    assert!(!other.status.last_backup_failed);
    // A name never used starts afresh.
    create_schedule(&client, body("fresh", "c1")).await;
    let (fresh, _) = schedule_record(&js, "fresh").await.unwrap();
    assert_eq!(fresh.status.last_backup, None);
    fleet.stop().await.unwrap();
}
