//! Executor reports end to end: each report the scheduler must refuse is terminated with an
//! incident that says why and writes nothing; a repeated report is an idempotent no-op.

use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{
    setup::{Setup, World},
    *,
};

fn report(backup_id: &str, cluster: &str, schedule: Option<&str>) -> Value {
    let mut report = json!({
        "schema_version": 1, "backup_id": backup_id, "cluster": cluster, "plan": "full",
        "backup_name": "s1", "status": "completed",
        "started_at": (Utc::now() - chrono::Duration::minutes(10)).to_rfc3339(),
        "completed_at": (Utc::now() - chrono::Duration::minutes(1)).to_rfc3339(),
        "artifacts": [
            format!("backups/{cluster}/s1/{backup_id}/backup.xbstream"),
            format!("backups/{cluster}/s1/{backup_id}/metadata.json"),
        ],
    });
    if let Some(schedule) = schedule {
        report["schedule"] = json!(schedule);
    }
    report
}

async fn publish(js: &async_nats::jetstream::Context, report: &Value) {
    let cluster = report["cluster"].as_str().unwrap();
    js.publish(
        format!("sexton.v1.report.{cluster}"),
        serde_json::to_vec(report).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

async fn incidents(js: &async_nats::jetstream::Context) -> Vec<Value> {
    read_stream(js, topology::STREAM_EVENTS, "sexton.v1.event.incident.>")
        .await
        .iter()
        .map(|m| serde_json::from_slice(&m.payload).unwrap())
        .collect()
}

async fn settled(js: &async_nats::jetstream::Context) {
    eventually(
        "the reports consumer drained",
        Duration::from_secs(20),
        || {
            let js = js.clone();
            async move {
                let backlog =
                    consumer_backlog(&js, topology::STREAM_REPORTS, topology::CONSUMER_REPORTS)
                        .await?;
                (backlog == 0).then_some(())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reports_are_refused_with_a_reason_and_repeats_change_nothing() {
    let world = Setup::new(SCHEDULER_ONLY)
        .schedule(
            json!({"name": "s1", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true}),
        )
        .start()
        .await;
    let World {
        config, fleet, js, ..
    } = world;
    let store = object_store(&config).await;
    let (schedule_before, schedule_revision) = schedule_record(&js, "s1").await.unwrap();
    eventually("the reports consumer", Duration::from_secs(20), || {
        let js = js.clone();
        async move {
            consumer_backlog(&js, topology::STREAM_REPORTS, topology::CONSUMER_REPORTS).await
        }
    })
    .await;

    let future = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let mut cases: Vec<(Value, &str)> = vec![
        (
            report("b-ghost", "c1", Some("ghost")),
            "unknown schedule ghost",
        ),
        (
            report("b-unknown-cluster", "c9", None),
            "unknown cluster c9: no schedule has named it",
        ),
        (
            report("b-other-cluster", "c2", Some("s1")),
            "schedule s1 backs up c1/full, not c2/full",
        ),
        (
            {
                let mut r = report("b-future", "c1", Some("s1"));
                r["completed_at"] = json!(future);
                r
            },
            "is in the future",
        ),
        (
            {
                let mut r = report("b-started-future", "c1", Some("s1"));
                r["status"] = json!("started");
                r["started_at"] = json!(future);
                r.as_object_mut().unwrap().remove("completed_at");
                r
            },
            "is in the future",
        ),
        (
            {
                let mut r = report("b-elsewhere", "c1", Some("s1"));
                r["artifacts"] = json!(["backups/c2/s1/b-elsewhere/backup.xbstream"]);
                r
            },
            "is not under the cluster's prefix",
        ),
        (
            {
                let mut r = report("b-climbs", "c1", Some("s1"));
                r["artifacts"] = json!(["backups/c1/../c2/s1/backup.xbstream"]);
                r
            },
            "'..' segment",
        ),
        (
            {
                let mut r = report("b-absolute", "c1", Some("s1"));
                r["artifacts"] = json!(["/etc/passwd"]);
                r
            },
            "is not under the cluster's prefix",
        ),
        (
            {
                let mut r = report("b-backwards", "c1", Some("s1"));
                r["started_at"] = json!(Utc::now().to_rfc3339());
                r
            },
            "completed_at is before started_at",
        ),
        (
            {
                let mut r = report("b-empty", "c1", Some("s1"));
                r["artifacts"] = json!([]);
                r
            },
            "a completed backup must list its artifacts",
        ),
        (
            {
                let mut r = report("b-ancient", "c1", Some("s1"));
                r["started_at"] = json!("1960-01-01T00:00:00Z");
                r
            },
            "before 1970",
        ),
        (
            {
                let mut r = report("b-vol-elsewhere", "c1", Some("s1"));
                r["volumes"] = json!([{"name": "pv1",
                    "keys": ["backups/c1/s1/b-other/vol-pv1.img"]}]);
                r
            },
            "is not under the backup's own <backup-name>/<backup-id>/ directory",
        ),
        (
            {
                let mut r = report("b-vol-metadata", "c1", Some("s1"));
                r["volumes"] = json!([{"name": "pv1",
                    "keys": ["backups/c1/s1/b-vol-metadata/metadata.json"]}]);
                r
            },
            "volume pv1 lists the backup's metadata.json as its own",
        ),
        (
            {
                let mut r = report("b-vol-shared", "c1", Some("s1"));
                r["volumes"] = json!([
                    {"name": "pv1", "keys": ["backups/c1/s1/b-vol-shared/disk.img"]},
                    {"name": "pv2", "keys": ["backups/c1/s1/b-vol-shared/disk.img"]},
                ]);
                r
            },
            "is listed by two volumes",
        ),
        (
            {
                let mut r = report("b-bad-hold", "c1", Some("s1"));
                r["holds"] = json!(["restore"]);
                r
            },
            "invalid hold reason \"restore\"",
        ),
        (
            {
                let mut r = report("b-bad-digest", "c1", Some("s1"));
                r["objects"] = json!([{"key": "backups/c1/s1/b-bad-digest/backup.xbstream",
                    "size": 1, "sha256": "not hex"}]);
                r
            },
            "sha256 must be 64 lowercase hex digits",
        ),
        (
            {
                let mut r = report("b-undescribed", "c1", Some("s1"));
                r["objects"] = json!([{"key": "backups/c1/s1/b-undescribed/other.xb", "size": 1}]);
                r
            },
            "which the report does not list",
        ),
    ];
    for (n, (report, reason)) in cases.iter().enumerate() {
        publish(&js, report).await;
        let all = eventually(
            "an incident for the report",
            Duration::from_secs(20),
            || {
                let js = js.clone();
                async move {
                    let all = incidents(&js).await;
                    (all.len() > n).then_some(all)
                }
            },
        )
        .await;
        assert_eq!(
            all.len(),
            n + 1,
            "one incident per refused report: {all:#?}"
        );
        let incident = &all[n];
        assert!(
            incident["reason"].as_str().unwrap().contains(reason),
            "{} was refused for {incident}, not for {reason:?}",
            report["backup_id"]
        );
        assert_eq!(incident["service"], "scheduler");
        assert_eq!(
            incident["subject"],
            format!("sexton.v1.report.{}", report["cluster"].as_str().unwrap())
        );
    }
    settled(&js).await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    assert!(
        catalog.list_all().await.unwrap().is_empty(),
        "a refused report wrote to the catalog"
    );
    assert_eq!(
        schedule_record(&js, "s1").await.unwrap(),
        (schedule_before, schedule_revision),
        "a refused report changed the schedule"
    );
    assert!(
        read_work_queue(
            &js,
            topology::STREAM_RETENTION,
            "sexton.v1.retention.checkpoint."
        )
        .await
        .is_empty(),
        "a refused report triggered retention"
    );

    // Accepted: a report of the schedule, and one without a schedule for the known cluster,
    // their objects uploaded as reported.
    let mut good = report("s1-20260101000000", "c1", Some("s1"));
    let mut manual = report("manual-1", "c1", None);
    fixtures::upload_genuine_json(&store, &mut good).await;
    fixtures::upload_genuine_json(&store, &mut manual).await;
    publish(&js, &good).await;
    publish(&js, &manual).await;
    settled(&js).await;
    let c1 = "c1".parse().unwrap();
    let records = catalog.list_cluster(&c1).await.unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    let revisions: Vec<u64> = records.iter().map(|r| r.revision).collect();

    // The same reports again, and a late "started" for the completed one: nothing changes,
    // nothing is refused, retention hears of each backup once.
    let mut started = good.clone();
    started["status"] = json!("started");
    started.as_object_mut().unwrap().remove("completed_at");
    for repeat in [&good, &manual, &good, &started] {
        publish(&js, repeat).await;
    }
    settled(&js).await;
    let after = catalog.list_cluster(&c1).await.unwrap();
    assert_eq!(
        after.iter().map(|r| r.revision).collect::<Vec<_>>(),
        revisions,
        "a repeated report changed a record"
    );
    assert_eq!(after.len(), 2);
    assert_eq!(
        incidents(&js).await.len(),
        cases.len(),
        "a repeated report was refused"
    );
    let checkpoints = read_work_queue(
        &js,
        topology::STREAM_RETENTION,
        "sexton.v1.retention.checkpoint.",
    )
    .await;
    assert_eq!(
        checkpoints.len(),
        2,
        "one checkpoint per backup: {checkpoints:?}"
    );

    // A report that contradicts the catalog (failed, for a completed backup) is refused.
    let mut failed = good.clone();
    failed["status"] = json!("failed");
    cases.push((failed.clone(), "is already Completed"));
    publish(&js, &failed).await;
    let all = eventually(
        "an incident for the contradiction",
        Duration::from_secs(20),
        || {
            let js = js.clone();
            let want = cases.len();
            async move {
                let all = incidents(&js).await;
                (all.len() >= want).then_some(all)
            }
        },
    )
    .await;
    assert!(
        all.last().unwrap()["reason"]
            .as_str()
            .unwrap()
            .contains("already Completed"),
        "{all:#?}"
    );
    assert_eq!(
        catalog
            .list_cluster(&c1)
            .await
            .unwrap()
            .iter()
            .map(|r| r.revision)
            .collect::<Vec<_>>(),
        revisions
    );
    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}
