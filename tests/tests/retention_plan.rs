//! Issue 3's end-to-end check: a policy combining `keep_last`, `keep_daily` and a
//! `recovery_window` over chains of fulls and incrementals (recorded in several UTC offsets),
//! with binlog segments spanning the whole time. The fleet (scheduler, retention-worker,
//! deleter) runs on real servers; afterwards what remains in the catalog, in S3 and in the
//! binlog index is exactly what the offline `sexton retention plan` prints for the same catalog
//! and policy.
//!
//! The fleet decides at its own `now`, a little after the `--now` given to the offline plan;
//! every backup and segment lies at least 30 minutes away from any boundary a rule draws
//! relative to `now`, so the two answers cannot differ by those seconds.

mod support;

use std::{collections::BTreeSet, time::Duration};

use async_nats::jetstream;
use chrono::{FixedOffset, Utc};
use serde_json::{json, Value};
use sexton_shared::{
    binlog::{self, IndexSegment},
    catalog::Catalog,
    topology,
};
use sexton_tests::*;
use support::*;

fn ids(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|entry| entry["id"].as_str().expect("an id").to_string())
        .collect()
}

fn keys(list: &Value) -> BTreeSet<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|key| key.as_str().expect("a key").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_leaves_exactly_what_the_offline_plan_keeps() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    let c1 = cluster("c1");

    let now = Utc::now();
    let zone = |hours_east: i32, minutes: i32| {
        FixedOffset::east_opt(hours_east * 3600 + minutes * 60).unwrap()
    };
    // Completed `hours` hours and 30 minutes before `now`, started 20 minutes earlier.
    let ago = |hours: i64, offset: FixedOffset| {
        (now - chrono::Duration::hours(hours) - chrono::Duration::minutes(50))
            .with_timezone(&offset)
    };
    let (east, west, india, utc) = (zone(2, 0), zone(-5, 0), zone(5, 30), zone(0, 0));
    let backups = [
        Backup::full("f1", ago(216, east), 20),
        Backup::incremental("i1a", "f1", ago(204, east), 20),
        Backup::incremental("i1b", "i1a", ago(192, east), 20),
        Backup::full("f2", ago(168, west), 20),
        Backup::incremental("i2a", "f2", ago(156, west), 20),
        Backup::incremental("i2b", "i2a", ago(144, west), 20),
        Backup::full("f3", ago(120, india), 20),
        Backup::incremental("i3a", "f3", ago(108, india), 20),
        Backup::incremental("i3b", "i3a", ago(96, india), 20),
        Backup::full("f4", ago(72, utc), 20),
        Backup::incremental("i4a", "f4", ago(60, utc), 20),
        // 48 h 30 min ago: the newest backup before a 2-day window, by 30 minutes.
        Backup::incremental("i4b", "i4a", ago(48, utc), 20),
        Backup::incremental("i4c", "i4b", ago(36, utc), 20),
        Backup::full("f5", ago(24, east), 20),
        Backup::incremental("i5a", "f5", ago(12, east), 20),
        Backup::incremental("i5b", "i5a", ago(2, east), 20),
    ];
    let policy = json!({"keep_last": 2, "keep_daily": 6, "recovery_window": "2d"});

    // Segments of 12 hours from 10 days ago up to now, and one still open.
    let mut segments: Vec<IndexSegment> = (0..20)
        .map(|k| {
            let first = (now - chrono::Duration::hours(240 - 12 * k)).fixed_offset();
            IndexSegment::new(
                segment_key("c1", &format!("mysql-bin.{k:06}")),
                Some(first),
                Some(first + chrono::Duration::hours(12)),
            )
        })
        .collect();
    segments.push(IndexSegment::new(
        segment_key("c1", "mysql-bin.000020"),
        Some(now.fixed_offset()),
        None,
    ));
    for segment in &segments {
        append_segment(&store, "c1", segment).await;
    }

    // The catalog through executor reports; retention starts only once all are recorded, so
    // every run sees the whole catalog.
    let scheduler = Fleet::start(
        &config,
        Members {
            scheduler: true,
            retention_worker: false,
            deleter: false,
            executor: false,
        },
    );
    create_policy_schedule(&client, "nightly", "c1", "db", policy.clone()).await;
    for backup in &backups {
        report_backup(&js, &store, "c1", "db", "nightly", backup).await;
    }
    wait_for_completed(&catalog, "c1", backups.len()).await;

    // The offline answer, from the real binary.
    let dir = tempfile::tempdir().unwrap();
    let catalog_file = dir.path().join("catalog.json");
    let policy_file = dir.path().join("policy.json");
    let catalog_json = json!({
        "backups": backups.iter().map(Backup::catalog_entry).collect::<Vec<_>>(),
        "binlog_segments": segments.iter().map(|s| s.to_engine()).collect::<Vec<_>>(),
    });
    std::fs::write(&catalog_file, catalog_json.to_string()).unwrap();
    std::fs::write(&policy_file, policy.to_string()).unwrap();
    let output = std::process::Command::new(service_binary("sexton"))
        .args([
            "retention",
            "plan",
            "-o",
            "json",
            "--now",
            &now.to_rfc3339(),
        ])
        .arg("--catalog")
        .arg(&catalog_file)
        .arg("--policy")
        .arg(&policy_file)
        .env_remove("SEXTON_CONFIG")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let plan: Value = serde_json::from_slice(&output.stdout).unwrap();
    let keep = ids(&plan["keep"]);
    let delete = ids(&plan["delete"]);
    let binlog_keep = keys(&plan["binlog"]["keep"]);
    let binlog_delete = keys(&plan["binlog"]["delete"]);
    eprintln!(
        "offline plan: keep {keep:?}, delete {delete:?}, binlog horizon {} ({} segments go)",
        plan["binlog"]["horizon"],
        binlog_delete.len()
    );
    // The scenario is worth running: every rule keeps something, chains are kept whole, and
    // backups and segments are deleted.
    let reasons = plan["keep"].to_string();
    for rule in [
        "last snapshot",
        "daily snapshot",
        "recovery_window 2d",
        "newest before the window",
        "needed by",
        "floor",
    ] {
        assert!(
            reasons.contains(rule),
            "no backup kept by {rule:?}: {plan:#}"
        );
    }
    let kept_only_daily = plan["keep"].as_array().unwrap().iter().any(|entry| {
        let reasons = entry["reasons"].to_string();
        reasons.contains("daily snapshot")
            && !reasons.contains("recovery_window")
            && !reasons.contains("last snapshot")
    });
    assert!(
        kept_only_daily,
        "keep_daily reaches past the window: {plan:#}"
    );
    assert!(delete.len() >= 3, "{plan:#}");
    assert!(binlog_delete.len() >= 3, "{plan:#}");
    assert!(binlog_keep.contains(&segment_key("c1", "mysql-bin.000020")));

    let rest = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: true,
            deleter: true,
            executor: false,
        },
    );
    settles_to("the catalog", Duration::from_secs(90), &keep, || async {
        catalog
            .list_cluster(&c1)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.value.id.to_string())
            .collect::<BTreeSet<String>>()
    })
    .await;
    settles_to(
        "the binlog index",
        Duration::from_secs(60),
        &binlog_keep,
        || async { index_keys(&store, "c1").await },
    )
    .await;
    let mut objects: BTreeSet<String> = backups
        .iter()
        .filter(|b| keep.contains(&b.id))
        .flat_map(|b| b.artifacts("c1", "nightly"))
        .collect();
    objects.extend(binlog_keep.iter().cloned());
    objects.insert(binlog::index_key(PREFIX, &c1));
    settles_to("S3", Duration::from_secs(60), &objects, || async {
        object_keys(&store, "backups/").await
    })
    .await;
    // And the live fleet's own preview agrees with the offline plan.
    let preview = api(
        &client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(ids(&preview[0]["decision"]["keep"]), keep, "{preview:#}");
    assert_eq!(
        keys(&preview[0]["decision"]["binlog"]["keep"]),
        binlog_keep,
        "{preview:#}"
    );

    for fleet in [scheduler, rest] {
        assert!(fleet.all_running());
        fleet.stop().await.unwrap();
    }
}
