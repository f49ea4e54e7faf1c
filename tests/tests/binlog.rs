//! Binlog garbage collection on real servers (seed 003, issue 5):
//! - appenders (the reference executor's code and a test writer) and two deleters rewrite the
//!   same `_index.json` at once, many rounds: no appended entry is ever lost, no removed entry
//!   comes back, and in the end exactly the expired segments are gone;
//! - the deleter trusts no binlog job: forged keys, a stale horizon, a redelivery, a pass that
//!   crashed between deleting objects and rewriting the index, orphans, and a malformed index
//!   (refused, recorded, nothing deleted — the retention-worker reports it too);
//! - end to end: a keep-last policy over fulls and incrementals with segments spanning the
//!   whole time; afterwards exactly the segments whose last event is before the horizon are gone
//!   from S3 and the index, unknown-end ones stay, and `sexton binlog status` says so;
//! - the whole loop: the reference executor archives a segment per backup and retention keeps
//!   exactly the segments of the backups it keeps.
//!
//! `SEXTON_SOAK=1` runs the concurrent test for many more rounds.

mod support;

use std::{
    collections::{BTreeSet, HashSet},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use async_nats::jetstream;
use chrono::{DateTime, FixedOffset, Utc};
use serde_json::json;
use sexton_model::{
    names::ClusterName,
    records::{BackupKind, BackupRecord, BackupStatus},
    wire::{BinlogGcJob, DueBackup, RetentionSweep},
};
use sexton_shared::{
    binlog::{self, store, IndexSegment},
    catalog::Catalog,
    topology,
};
use sexton_tests::{
    setup::{Setup, World},
    *,
};
use support::*;

const NONE: Members = Members {
    scheduler: false,
    retention_worker: false,
    deleter: false,
    executor: false,
};

fn soak() -> bool {
    std::env::var("SEXTON_SOAK").is_ok_and(|v| v == "1")
}

fn full_record(id: &str, started: DateTime<FixedOffset>, status: BackupStatus) -> BackupRecord {
    serde_json::from_value(json!({
        "id": id, "uid": format!("uid-{id}"), "cluster": "c1", "plan": "p",
        "backup_name": "nightly", "kind": "full", "status": status,
        "started_at": started, "completed_at": started + chrono::Duration::minutes(5),
        "artifacts": [
            format!("backups/c1/nightly/{id}/backup.xbstream"),
            format!("backups/c1/nightly/{id}/metadata.json"),
        ],
    }))
    .unwrap()
}

fn job(horizon: DateTime<FixedOffset>, delete: &[String]) -> BinlogGcJob {
    BinlogGcJob {
        schema_version: 1,
        cluster: cluster("c1"),
        horizon,
        horizon_backup: None,
        delete: delete.to_vec(),
        index_etag: None,
    }
}

async fn wait_for_consumer(js: &jetstream::Context) {
    eventually(
        "the deleter's binlog consumer",
        Duration::from_secs(30),
        || {
            let js = js.clone();
            async move { binlog_backlog(&js).await }
        },
    )
    .await;
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// Ends before the horizon: the collectors may remove it.
    Old,
    /// Ends after the horizon, or has no end: must stay.
    Needed,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appenders_and_collectors_racing_on_the_index_lose_nothing() {
    let rounds: usize = if soak() { 300 } else { 30 };
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    let c1 = cluster("c1");
    let folder = binlog::binlog_prefix(PREFIX, &c1);
    let index_key = binlog::index_key(PREFIX, &c1);

    // The only full backup started a day ago: segments ending before that may go.
    let horizon = (Utc::now() - chrono::Duration::days(1)).fixed_offset();
    catalog
        .create(&full_record("f1", horizon, BackupStatus::Completed))
        .await
        .unwrap();
    // Two deleters: the collectors race each other as well as the appenders.
    let deleters = [
        Fleet::start(
            &config,
            Members {
                deleter: true,
                ..NONE
            },
        ),
        Fleet::start(
            &config,
            Members {
                deleter: true,
                ..NONE
            },
        ),
    ];
    wait_for_consumer(&js).await;

    let confirmed: Arc<Mutex<Vec<(String, Kind)>>> = Arc::default();
    let mut appenders = Vec::new();
    // Two appenders run the reference executor's own code: one segment up to now per backup.
    for writer in 0..2 {
        let (store, confirmed, c1) = (store.clone(), confirmed.clone(), c1.clone());
        appenders.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for round in 0..rounds {
                let backup_id = format!("e{writer}-{round:04}");
                let due = DueBackup {
                    schema_version: 1,
                    schedule: "s".parse().unwrap(),
                    cluster: c1.clone(),
                    plan: "p".parse().unwrap(),
                    tick: Utc::now(),
                    fired_at: Utc::now(),
                    backup_id: backup_id.parse().unwrap(),
                    backup_name: "s".into(),
                    object_prefix: format!("{PREFIX}/c1/s/{backup_id}/"),
                    kind: BackupKind::Full,
                    parent: None,
                    kind_reason: None,
                    volumes: Vec::new(),
                    labels: Default::default(),
                    annotations: Default::default(),
                    backfill: None,
                };
                let updated = sexton_executor::reference::append_segment(
                    &store,
                    PREFIX,
                    &due,
                    Utc::now().fixed_offset(),
                )
                .await
                .unwrap();
                assert!(updated.written);
                conflicts += updated.conflicts;
                confirmed.lock().unwrap().push((
                    segment_key("c1", &format!("{backup_id}.binlog")),
                    Kind::Needed,
                ));
            }
            conflicts
        }));
    }
    // A third writes old segments (expired) and open ones (no end: kept).
    {
        let (store, confirmed, folder, index_key) = (
            store.clone(),
            confirmed.clone(),
            folder.clone(),
            index_key.clone(),
        );
        appenders.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for round in 0..rounds {
                let start =
                    horizon - chrono::Duration::days(10) + chrono::Duration::minutes(round as i64);
                let (name, segment, kind) = if round % 2 == 0 {
                    let name = format!("old-{round:04}");
                    let last = start + chrono::Duration::minutes(1);
                    (name.clone(), (Some(start), Some(last)), Kind::Old)
                } else {
                    (
                        format!("open-{round:04}"),
                        (Some(start), None),
                        Kind::Needed,
                    )
                };
                let key = format!("{folder}{name}");
                store.put(&key, "events".into()).await.unwrap();
                let entry = IndexSegment::new(key.clone(), segment.0, segment.1);
                let updated = store::update(&store, &index_key, &folder, |index| {
                    index.apply_appends(std::slice::from_ref(&entry)) > 0
                })
                .await
                .unwrap();
                conflicts += updated.conflicts;
                confirmed.lock().unwrap().push((key, kind));
            }
            conflicts
        }));
    }

    // The collectors get a job every 100 ms naming every segment appended so far, needed ones
    // too: the deleter must pick the expired ones itself.
    let done = Arc::new(AtomicBool::new(false));
    let publisher = {
        let (js, confirmed, done) = (js.clone(), confirmed.clone(), done.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !done.load(Ordering::SeqCst) {
                let keys: Vec<String> = confirmed
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(k, _)| k.clone())
                    .collect();
                for chunk in keys.chunks(sexton_model::wire::MAX_BINLOG_JOB_KEYS) {
                    publish_binlog_job(&js, &job(horizon, chunk), &format!("race-{n}")).await;
                    n += 1;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            n
        })
    };
    // An observer reads the index all along and checks both promises on every reading.
    let observer = {
        let (store, confirmed, done, folder, index_key) = (
            store.clone(),
            confirmed.clone(),
            done.clone(),
            folder.clone(),
            index_key.clone(),
        );
        tokio::spawn(async move {
            let mut removed: HashSet<String> = HashSet::new();
            let mut violations = BTreeSet::new();
            let mut readings = 0;
            while !done.load(Ordering::SeqCst) {
                let before = confirmed.lock().unwrap().clone();
                let snapshot = match store::read(&store, &index_key, &folder).await {
                    Ok(snapshot) => snapshot,
                    Err(err) => {
                        violations.insert(format!("the index did not parse: {err}"));
                        continue;
                    }
                };
                readings += 1;
                let listed: HashSet<&str> = snapshot
                    .index
                    .segments
                    .iter()
                    .map(|s| s.key.as_str())
                    .collect();
                for (key, kind) in &before {
                    match kind {
                        Kind::Needed if !listed.contains(key.as_str()) => {
                            violations.insert(format!("appended entry {key} was lost"));
                        }
                        Kind::Old if !listed.contains(key.as_str()) => {
                            removed.insert(key.clone());
                        }
                        _ => {}
                    }
                }
                for key in &removed {
                    if listed.contains(key.as_str()) {
                        violations.insert(format!("removed entry {key} came back"));
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (violations, readings, removed.len())
        })
    };

    let mut conflicts = 0;
    for appender in appenders {
        conflicts += appender.await.unwrap();
    }
    // Let the collectors catch up with the last appends, then stop the race.
    tokio::time::sleep(Duration::from_millis(500)).await;
    done.store(true, Ordering::SeqCst);
    let n_jobs = publisher.await.unwrap();
    let (violations, readings, n_removed_during_race) = observer.await.unwrap();
    let all = confirmed.lock().unwrap().clone();
    publish_binlog_job(
        &js,
        &job(
            horizon,
            &all.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        ),
        "final",
    )
    .await;

    assert!(violations.is_empty(), "{violations:#?}");
    let needed: BTreeSet<String> = all
        .iter()
        .filter(|(_, kind)| *kind == Kind::Needed)
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(all.len(), 3 * rounds);
    settles_to("the index", Duration::from_secs(60), &needed, || async {
        index_keys(&store, "c1").await
    })
    .await;
    let mut objects = needed.clone();
    objects.insert(index_key.clone());
    settles_to(
        "the binlog folder",
        Duration::from_secs(30),
        &objects,
        || async { object_keys(&store, &folder).await },
    )
    .await;
    eprintln!(
        "{} appends, {conflicts} lost races among appenders, {n_jobs} gc jobs, \
         {readings} readings, {n_removed_during_race} removals seen during the race",
        all.len()
    );
    // The test is only worth something if the writers did collide and removals did happen
    // while appends went on.
    assert!(conflicts > 0, "the appenders never collided");
    assert!(
        n_removed_during_race > 0,
        "no removal happened during the race"
    );
    for fleet in deleters {
        assert!(fleet.all_running());
        fleet.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_trusts_no_job_and_refuses_a_malformed_index() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    let c1 = cluster("c1");
    let folder = binlog::binlog_prefix(PREFIX, &c1);
    let index_key = binlog::index_key(PREFIX, &c1);
    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: true,
            retention_worker: true,
            deleter: true,
            executor: false,
        },
    );
    wait_for_consumer(&js).await;

    let now = Utc::now().fixed_offset();
    let days = chrono::Duration::days;
    // The newest full backup "starts" 10 minutes from now, so the objects this test writes now
    // are as far before the horizon (by the object store's clock) as an orphan left long ago.
    let horizon = now + chrono::Duration::minutes(10);
    catalog
        .create(&full_record("f-new", horizon, BackupStatus::Completed))
        .await
        .unwrap();
    let old_revision = catalog
        .create(&full_record(
            "f-old",
            now - days(2),
            BackupStatus::Completed,
        ))
        .await
        .unwrap();
    let s_before = segment_key("c1", "s-before");
    let s_between = segment_key("c1", "s-between");
    let s_open = segment_key("c1", "s-open");
    for segment in [
        IndexSegment::new(s_before.clone(), Some(now - days(4)), Some(now - days(3))),
        IndexSegment::new(s_between.clone(), Some(now - days(3)), Some(now - days(1))),
        IndexSegment::new(s_open.clone(), Some(now - days(4)), None),
    ] {
        append_segment(&store, "c1", &segment).await;
    }
    let elsewhere = [
        "backups/c2/binlog/x".to_string(),
        "backups/c1/nightly/b1/backup.xbstream".to_string(),
        // A backup whose <backup-name> is "binlog": not a segment, never touched.
        "backups/c1/binlog/b9/backup.xbstream".to_string(),
    ];
    for key in &elsewhere {
        store.put(key, "data".into()).await.unwrap();
    }

    // Forged jobs and a malformed one: refused, nothing deleted.
    let forged = [
        (
            "backups/c2/binlog/x",
            "not under the cluster's binlog prefix",
        ),
        (
            "backups/c1/binlog/../c2/binlog/x",
            "not a direct child of the binlog prefix",
        ),
        (
            "backups/c1/nightly/b1/backup.xbstream",
            "not under the cluster's binlog prefix",
        ),
        ("backups/c1/binlog/_index.json", "names the index itself"),
    ];
    for (n, (key, _)) in forged.iter().enumerate() {
        publish_binlog_job(
            &js,
            &job(horizon, &[key.to_string()]),
            &format!("forged-{n}"),
        )
        .await;
    }
    js.publish("sexton.v1.job.binlog.c1", "not json".into())
        .await
        .unwrap()
        .await
        .unwrap();
    // A stale job: its horizon is the new full's start, but the catalog still holds an older
    // full (kept again, say, after a policy change). Only what ends before that one goes.
    publish_binlog_job(
        &js,
        &job(
            horizon,
            &[s_before.clone(), s_between.clone(), s_open.clone()],
        ),
        "stale",
    )
    .await;
    binlog_drained(&js).await;
    let mut expected_objects: BTreeSet<String> = [&s_between, &s_open, &index_key]
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(object_keys(&store, &folder).await, {
        let mut e = expected_objects.clone();
        e.insert("backups/c1/binlog/b9/backup.xbstream".into());
        e
    });
    for key in &elsewhere {
        assert!(store.get(key).await.unwrap().is_some(), "{key} was deleted");
    }
    assert_eq!(
        index_keys(&store, "c1").await,
        [s_between.clone(), s_open.clone()].into_iter().collect()
    );
    let recorded = incidents(&js).await;
    for (_, reason) in forged {
        assert!(
            recorded.iter().any(|i| i.contains(reason)),
            "no incident says {reason:?}: {recorded:#?}"
        );
    }
    assert!(recorded.iter().any(|i| i.contains("not valid json")));

    // A pass that deleted s-between's object and died before rewriting the index; an orphan an
    // executor left; the older full is gone now. The next pass finishes both.
    catalog
        .remove(&c1, &"f-old".parse().unwrap(), old_revision)
        .await
        .unwrap();
    let failures = store
        .delete_batch(std::slice::from_ref(&s_between))
        .await
        .unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    let orphan = segment_key("c1", "orphan-1");
    store.put(&orphan, "events".into()).await.unwrap();
    publish_binlog_job(
        &js,
        &job(horizon, std::slice::from_ref(&s_between)),
        "resume",
    )
    .await;
    binlog_drained(&js).await;
    expected_objects.remove(&s_between);
    expected_objects.insert("backups/c1/binlog/b9/backup.xbstream".into());
    assert_eq!(object_keys(&store, &folder).await, expected_objects);
    assert_eq!(
        index_keys(&store, "c1").await,
        [s_open.clone()].into_iter().collect()
    );
    // The same job again changes nothing: not even the index's ETag.
    let etag = store.get_tagged(&index_key).await.unwrap().unwrap().etag;
    publish_binlog_job(
        &js,
        &job(horizon, std::slice::from_ref(&s_between)),
        "again",
    )
    .await;
    binlog_drained(&js).await;
    assert_eq!(
        store.get_tagged(&index_key).await.unwrap().unwrap().etag,
        etag
    );
    assert_eq!(object_keys(&store, &folder).await, expected_objects);

    // A malformed index: the collector refuses, records it, deletes nothing (not even an
    // orphan), and never rewrites the index.
    let garbage = br#"{"schema_version":1,"segments":[{"key":"backups/c1/binlog/s-open""#;
    store
        .put(&index_key, garbage.to_vec().into())
        .await
        .unwrap();
    let s_x = segment_key("c1", "s-x");
    let orphan_2 = segment_key("c1", "orphan-2");
    for key in [&s_x, &orphan_2] {
        store.put(key, "events".into()).await.unwrap();
    }
    publish_binlog_job(&js, &job(horizon, std::slice::from_ref(&s_x)), "malformed").await;
    binlog_drained(&js).await;
    expected_objects.insert(s_x.clone());
    expected_objects.insert(orphan_2.clone());
    assert_eq!(object_keys(&store, &folder).await, expected_objects);
    assert_eq!(
        store.get(&index_key).await.unwrap().unwrap().as_ref(),
        garbage
    );
    let recorded = incidents(&js).await;
    assert!(
        recorded
            .iter()
            .any(|i| i.contains("refusing binlog gc for c1") && i.contains("not valid json")),
        "{recorded:#?}"
    );

    // The retention-worker reads the same index: it reports it and publishes no binlog job.
    create_policy_schedule(&client, "nightly", "c1", "p", json!({"keep_last": 1})).await;
    js.publish(
        sexton_shared::channels::SWEEPS.subject(&c1),
        serde_json::to_vec(&RetentionSweep {
            schema_version: 1,
            cluster: c1.clone(),
            requested_at: Utc::now(),
            scrub: false,
        })
        .unwrap()
        .into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    drained(
        &js,
        topology::STREAM_RETENTION,
        topology::CONSUMER_RETENTION,
    )
    .await;
    let recorded = incidents(&js).await;
    assert!(
        recorded
            .iter()
            .any(|i| i.contains("binlog-index-malformed") && i.contains("not valid json")),
        "{recorded:#?}"
    );
    let status = api(
        &client,
        "binlog",
        "status",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(status["index"]["state"], "malformed", "{status:#}");
    assert_eq!(status["segments"]["expired"], 0, "{status:#}");
    binlog_drained(&js).await;
    assert_eq!(object_keys(&store, &folder).await, expected_objects);

    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_removes_exactly_the_segments_before_the_horizon() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    let c1: ClusterName = cluster("c1");
    let index_key = binlog::index_key(PREFIX, &c1);

    // From ten days ago, in a zone two hours east.
    let offset = FixedOffset::east_opt(2 * 3600).unwrap();
    let start = (Utc::now() - chrono::Duration::days(10)).with_timezone(&offset);
    let at =
        |day: i64, hour: i64| start + chrono::Duration::days(day) + chrono::Duration::hours(hour);
    let backups = [
        Backup::full("f1", at(0, 1), 30),
        Backup::incremental("i1", "f1", at(1, 1), 10),
        Backup::full("f2", at(2, 1), 30),
        Backup::incremental("i2", "f2", at(3, 1), 10),
        Backup::full("f3", at(4, 1), 30),
        Backup::incremental("i3a", "f3", at(5, 1), 10),
        Backup::incremental("i3b", "i3a", at(6, 1), 10),
    ];
    // keep_last 4 keeps i3b, i3a, f3 and i2; i2 needs f2. So f1 and i1 go, and the horizon is
    // f2's start: every segment that ends before it goes with them.
    let kept = ["f2", "i2", "f3", "i3a", "i3b"];
    let horizon = backups[2].started;

    // Segments every 12 hours from day -1 to day 7, one ending exactly at the horizon (kept:
    // the horizon is strict), and one older than everything with no known end (kept).
    let mut segments: Vec<IndexSegment> = (0..16)
        .map(|k| {
            let first = at(-1, 12 * k);
            IndexSegment::new(
                segment_key("c1", &format!("mysql-bin.{k:06}")),
                Some(first),
                Some(first + chrono::Duration::hours(12)),
            )
        })
        .collect();
    segments.push(IndexSegment::new(
        segment_key("c1", "edge"),
        Some(horizon - chrono::Duration::hours(1)),
        Some(horizon),
    ));
    segments.push(IndexSegment::new(
        segment_key("c1", "open"),
        Some(at(-2, 0)),
        None,
    ));
    for segment in &segments {
        append_segment(&store, "c1", segment).await;
    }
    let expired: BTreeSet<String> = segments
        .iter()
        .filter(|s| s.last_event.is_some_and(|last| last < horizon))
        .map(|s| s.key.clone())
        .collect();
    assert_eq!(expired.len(), 6, "the scenario: six segments end before f2");
    // A segment object an executor is writing right now, not indexed yet: it must survive.
    let in_flight = segment_key("c1", "in-flight");
    store.put(&in_flight, "events".into()).await.unwrap();

    // Reports first, retention after, so every run sees the whole catalog.
    let scheduler = Fleet::start(
        &config,
        Members {
            scheduler: true,
            ..NONE
        },
    );
    create_policy_schedule(&client, "nightly", "c1", "db", json!({"keep_last": 4})).await;
    for backup in &backups {
        report_backup(&js, &store, "c1", "db", "nightly", backup).await;
    }
    wait_for_completed(&catalog, "c1", backups.len()).await;

    // Retention alone first: it marks and publishes, nothing is deleted yet.
    let retention = Fleet::start(
        &config,
        Members {
            retention_worker: true,
            ..NONE
        },
    );
    drained(
        &js,
        topology::STREAM_RETENTION,
        topology::CONSUMER_RETENTION,
    )
    .await;
    let status = api(
        &client,
        "binlog",
        "status",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    let etag_before = store.get_tagged(&index_key).await.unwrap().unwrap().etag;
    assert_eq!(status["index"]["state"], "ok", "{status:#}");
    assert_eq!(status["index"]["etag"], etag_before.as_str(), "{status:#}");
    assert_eq!(
        status["horizon"]
            .as_str()
            .map(|h| DateTime::parse_from_rfc3339(h).unwrap()),
        Some(horizon),
        "{status:#}"
    );
    assert_eq!(status["horizon_backup"], "f2", "{status:#}");
    assert_eq!(status["segments"]["total"], segments.len(), "{status:#}");
    assert_eq!(status["segments"]["expired"], expired.len(), "{status:#}");
    assert_eq!(status["segments"]["unknown_end"], 1, "{status:#}");

    let deleter = Fleet::start(
        &config,
        Members {
            deleter: true,
            ..NONE
        },
    );
    let kept_segments: BTreeSet<String> = segments
        .iter()
        .map(|s| s.key.clone())
        .filter(|k| !expired.contains(k))
        .collect();
    settles_to(
        "the index",
        Duration::from_secs(90),
        &kept_segments,
        || async { index_keys(&store, "c1").await },
    )
    .await;
    let mut expected_objects: BTreeSet<String> = kept
        .iter()
        .flat_map(|id| {
            backups
                .iter()
                .find(|b| b.id == *id)
                .unwrap()
                .artifacts("c1", "nightly")
        })
        .collect();
    expected_objects.extend(kept_segments.iter().cloned());
    expected_objects.insert(index_key.clone());
    expected_objects.insert(in_flight.clone());
    settles_to("S3", Duration::from_secs(60), &expected_objects, || async {
        object_keys(&store, "backups/").await
    })
    .await;
    let in_catalog: BTreeSet<String> = catalog
        .list_cluster(&c1)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.value.id.to_string())
        .collect();
    assert_eq!(in_catalog, kept.iter().map(|s| s.to_string()).collect());

    // `sexton binlog status`, the real binary: nothing left to expire, the index's new ETag
    // (in JSON).
    let etag_after = store.get_tagged(&index_key).await.unwrap().unwrap().etag;
    assert_ne!(etag_after, etag_before);
    let output = std::process::Command::new(service_binary("sexton"))
        .args(["binlog", "status", "--cluster", "c1", "-o", "json"])
        .args(["--nats-url", &nats.url()])
        .env_remove("SEXTON_CONFIG")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(status["index"]["etag"], etag_after.as_str(), "{status:#}");
    assert_eq!(
        status["segments"]["total"],
        kept_segments.len(),
        "{status:#}"
    );
    assert_eq!(status["segments"]["expired"], 0, "{status:#}");
    assert_eq!(status["horizon_backup"], "f2", "{status:#}");
    let table = std::process::Command::new(service_binary("sexton"))
        .args(["binlog", "status", "--cluster", "c1"])
        .args(["--nats-url", &nats.url()])
        .env_remove("SEXTON_CONFIG")
        .output()
        .unwrap();
    // The table is for people: the index's state, not its ETag (`-o json` has that; the
    // table conventions of docs/migrating.md#output, issue 26).
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("HORIZON BACKUP") && !table.contains("ETAG") && !table.contains(&etag_after),
        "{table}"
    );

    for fleet in [scheduler, retention, deleter] {
        assert!(fleet.all_running());
        fleet.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_loop_archives_a_segment_per_backup_and_collects_the_expired_ones() {
    let world = Setup::new(Members::ALL).start().await;
    let World {
        config,
        fleet,
        client,
        catalog,
        ..
    } = world;
    let store = object_store(&config).await;
    let c1 = cluster("c1");

    eventually("the scheduler api", Duration::from_secs(30), || {
        let client = client.clone();
        async move {
            api(
                &client,
                "schedule",
                "create",
                json!({"schema_version": 1, "name": "every-second", "cluster": "c1",
                       "plan": "full", "cron": "@every 1s", "policy": {"keep_last": 2}}),
            )
            .await
            .ok()
        }
    })
    .await;
    eventually("6 archived segments", Duration::from_secs(60), || {
        let store = store.clone();
        async move {
            let snapshot = store::read(
                &store,
                &binlog::index_key(PREFIX, &cluster("c1")),
                &binlog::binlog_prefix(PREFIX, &cluster("c1")),
            )
            .await
            .ok()?;
            (snapshot.index.generation >= 6).then_some(())
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

    // The catalog settles at the newest two; their segments are what the index keeps: each
    // segment ends while its backup runs, after it started, and the one before ends before it.
    let mut previous = BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let kept = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the catalog did not settle at two backups: {previous:?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        let ids: BTreeSet<String> = catalog
            .list_cluster(&c1)
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.value.status == BackupStatus::Completed)
            .map(|r| r.value.id.to_string())
            .collect();
        if ids.len() == 2 && ids == previous {
            break ids;
        }
        previous = ids;
    };
    let expected: BTreeSet<String> = kept
        .iter()
        .map(|id| segment_key("c1", &format!("{id}.binlog")))
        .collect();
    settles_to("the index", Duration::from_secs(60), &expected, || async {
        index_keys(&store, "c1").await
    })
    .await;
    let mut objects = expected.clone();
    objects.insert(binlog::index_key(PREFIX, &c1));
    settles_to(
        "the binlog folder",
        Duration::from_secs(30),
        &objects,
        || async { object_keys(&store, &binlog::binlog_prefix(PREFIX, &c1)).await },
    )
    .await;
    assert!(fleet.all_running());
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_killed_at_any_point_leaves_a_valid_index() {
    let kills: usize = if soak() { 100 } else { 8 };
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;
    let c1 = cluster("c1");
    let folder = binlog::binlog_prefix(PREFIX, &c1);
    let index_key = binlog::index_key(PREFIX, &c1);
    let horizon = (Utc::now() - chrono::Duration::days(1)).fixed_offset();
    catalog
        .create(&full_record("f1", horizon, BackupStatus::Completed))
        .await
        .unwrap();
    let logs = tempfile::tempdir().unwrap();
    let mut deleter = ServiceProcess::start("sexton-deleter", &[], &config, logs.path());

    let mut needed: BTreeSet<String> = BTreeSet::new();
    let mut expired: BTreeSet<String> = BTreeSet::new();
    let mut gone: BTreeSet<String> = BTreeSet::new();
    let mut phases: std::collections::BTreeMap<&str, usize> = Default::default();
    for round in 0..kills {
        // 200 expired segments and 2 needed ones (one open, one ending after the horizon).
        let mut batch = Vec::new();
        for n in 0..200 {
            let first = horizon - chrono::Duration::days(5) + chrono::Duration::seconds(n);
            batch.push(IndexSegment::new(
                segment_key("c1", &format!("old-{round:03}-{n:03}")),
                Some(first),
                Some(first + chrono::Duration::seconds(1)),
            ));
        }
        batch.push(IndexSegment::new(
            segment_key("c1", &format!("open-{round:03}")),
            Some(horizon - chrono::Duration::days(5)),
            None,
        ));
        batch.push(IndexSegment::new(
            segment_key("c1", &format!("new-{round:03}")),
            Some(horizon),
            Some(horizon + chrono::Duration::hours(1)),
        ));
        for segment in &batch {
            store.put(&segment.key, "events".into()).await.unwrap();
        }
        store::update(&store, &index_key, &folder, |index| {
            index.apply_appends(&batch) > 0
        })
        .await
        .unwrap();
        for segment in &batch {
            if segment.last_event.is_some_and(|last| last < horizon) {
                expired.insert(segment.key.clone());
            } else {
                needed.insert(segment.key.clone());
            }
        }
        // A job naming everything (the collector must pick the expired ones), then SIGKILL at
        // a point that moves around: before start-up, while listing, deleting, rewriting.
        let everything: Vec<String> = expired.iter().chain(&needed).cloned().collect();
        for (chunk_number, chunk) in everything
            .chunks(sexton_model::wire::MAX_BINLOG_JOB_KEYS)
            .enumerate()
        {
            publish_binlog_job(
                &js,
                &job(horizon, chunk),
                &format!("kill-{round}-{chunk_number}"),
            )
            .await;
        }
        let pause = (round as u64 * 397) % 1500;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        deleter.kill();

        let snapshot = store::read(&store, &index_key, &folder)
            .await
            .unwrap_or_else(|err| panic!("round {round}: the index does not parse: {err}"));
        let listed: BTreeSet<String> = snapshot.index.segments.into_iter().map(|s| s.key).collect();
        let missing: Vec<&String> = needed.difference(&listed).collect();
        assert!(
            missing.is_empty(),
            "round {round}: needed segments left the index: {missing:?}"
        );
        let objects = object_keys(&store, &folder).await;
        let lost: Vec<&String> = needed.difference(&objects).collect();
        assert!(
            lost.is_empty(),
            "round {round}: needed objects deleted: {lost:?}"
        );
        // Where the kill landed, as far as the store shows it.
        let listed_expired: Vec<&String> = expired.intersection(&listed).collect();
        let phase = if listed_expired.is_empty() {
            "after the index rewrite"
        } else if listed_expired.iter().any(|key| !objects.contains(*key)) {
            "between the deletes and the index rewrite"
        } else {
            "before any delete"
        };
        *phases.entry(phase).or_insert(0) += 1;
        let back: Vec<&String> = gone.intersection(&listed).collect();
        assert!(
            back.is_empty(),
            "round {round}: removed entries came back: {back:?}"
        );
        gone.extend(expired.difference(&listed).cloned());
        deleter.restart();
    }
    let everything: Vec<String> = expired.iter().cloned().collect();
    for (chunk_number, chunk) in everything
        .chunks(sexton_model::wire::MAX_BINLOG_JOB_KEYS)
        .enumerate()
    {
        publish_binlog_job(&js, &job(horizon, chunk), &format!("final-{chunk_number}")).await;
    }
    settles_to("the index", Duration::from_secs(90), &needed, || async {
        index_keys(&store, "c1").await
    })
    .await;
    let mut objects = needed.clone();
    objects.insert(index_key.clone());
    settles_to(
        "the binlog folder",
        Duration::from_secs(30),
        &objects,
        || async { object_keys(&store, &folder).await },
    )
    .await;
    eprintln!(
        "{kills} kills ({phases:?}); {} of {} expired entries had left the index before the \
         last pass",
        gone.len(),
        expired.len()
    );
    assert!(deleter.is_running(), "{}", deleter.logs());
    deleter.terminate(Duration::from_secs(20));
}

/// The object store must enforce the conditions the index relies on; a store that ignores them
/// (Garage does) would let two writers lose each other's changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_writes_are_enforced_by_the_object_store() {
    use sexton_shared::object_store::{Precondition, PutError};
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let store = object_store(&config).await;
    let key = "backups/c1/binlog/_index.json";
    let conflict =
        |result: Result<String, PutError>| matches!(result, Err(PutError::Conflict { .. }));

    assert!(store.get_tagged(key).await.unwrap().is_none());
    assert!(
        conflict(
            store
                .put_conditional(key, "a".into(), &Precondition::IfMatch("\"nope\"".into()))
                .await
        ),
        "If-Match on a missing object"
    );
    let first = store
        .put_conditional(key, "a".into(), &Precondition::IfAbsent)
        .await
        .unwrap();
    assert!(
        conflict(
            store
                .put_conditional(key, "b".into(), &Precondition::IfAbsent)
                .await
        ),
        "If-None-Match: * on an existing object"
    );
    let read = store.get_tagged(key).await.unwrap().unwrap();
    assert_eq!(read.body.as_ref(), b"a");
    assert_eq!(read.etag, first);
    let second = store
        .put_conditional(key, "b".into(), &Precondition::IfMatch(read.etag.clone()))
        .await
        .unwrap();
    assert_ne!(second, first);
    assert!(
        conflict(
            store
                .put_conditional(key, "c".into(), &Precondition::IfMatch(read.etag))
                .await
        ),
        "If-Match on a stale ETag"
    );
    assert_eq!(store.get(key).await.unwrap().unwrap().as_ref(), b"b");
}

/// A forged binlog job on a cluster whose catalog holds no backup (issue 12 item 3): the
/// deleter cannot derive a horizon from the catalog, so it believes none and deletes nothing,
/// and says so in an incident. Before, it trusted the job's horizon (the year 2200) and
/// deleted every segment with a last event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_job_on_a_cluster_without_records_deletes_nothing() {
    let world = Setup::new(Members {
        deleter: true,
        ..NONE
    })
    .start()
    .await;
    let World {
        config, fleet, js, ..
    } = world;
    let store = object_store(&config).await;
    wait_for_consumer(&js).await;
    let now = Utc::now().fixed_offset();
    let days = chrono::Duration::days;
    let segments = [segment_key("c4", "s1"), segment_key("c4", "s2")];
    for (n, key) in segments.iter().enumerate() {
        let start = now - days(10 - n as i64);
        append_segment(
            &store,
            "c4",
            &IndexSegment::new(key.clone(), Some(start), Some(start + days(1))),
        )
        .await;
    }
    let folder = binlog::binlog_prefix(PREFIX, &cluster("c4"));
    let before = object_keys(&store, &folder).await;
    assert_eq!(before.len(), 3, "two segments and the index: {before:?}");
    let mut forged = job(
        DateTime::parse_from_rfc3339("2200-01-01T00:00:00Z").unwrap(),
        &segments,
    );
    forged.cluster = cluster("c4");
    js.publish(
        "sexton.v1.job.binlog.c4",
        serde_json::to_vec(&forged).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    binlog_drained(&js).await;
    assert_eq!(
        object_keys(&store, &folder).await,
        before,
        "segments deleted"
    );
    assert_eq!(
        index_keys(&store, "c4").await,
        segments.iter().cloned().collect()
    );
    let recorded = incidents(&js).await;
    assert!(
        recorded
            .iter()
            .any(|i| i.contains("holds no completed full backup of the cluster")),
        "{recorded:#?}"
    );
    fleet.stop().await.unwrap();
}

/// Issue 30: a standalone backup and the fulls past `pitr_full` keep only their own ranges of
/// the archive, on a real fleet, and the deleter keeps those ranges whatever a job says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_and_pitr_full_backups_keep_only_their_own_ranges() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let store = object_store(&config).await;

    let offset = FixedOffset::east_opt(0).unwrap();
    let start = (Utc::now() - chrono::Duration::days(10)).with_timezone(&offset);
    let at =
        |day: i64, hour: i64| start + chrono::Duration::days(day) + chrono::Duration::hours(hour);
    // Segment k holds 12 hours of events from day -1: f0 is in 0, f1 in 2, i1 in 4, f2 in 6,
    // f3 (the horizon) in 10, i3 in 12.
    let segments: Vec<IndexSegment> = (0..16)
        .map(|k| {
            let first = at(-1, 12 * k);
            IndexSegment::new(
                segment_key("c1", &format!("mysql-bin.{k:06}")),
                Some(first),
                Some(first + chrono::Duration::hours(12)),
            )
        })
        .collect();
    for segment in &segments {
        append_segment(&store, "c1", segment).await;
    }
    let backups = [
        Backup::full("f0", at(-1, 1), 30),
        Backup::full("f1", at(0, 1), 30),
        Backup::incremental("i1", "f1", at(1, 1), 10),
        Backup::full("f2", at(2, 1), 30),
        Backup::full("f3", at(4, 1), 30),
        Backup::incremental("i3", "f3", at(5, 1), 10),
    ];

    let scheduler = Fleet::start(
        &config,
        Members {
            scheduler: true,
            ..NONE
        },
    );
    // keep_full 3 keeps f3, f2 and f1 with their chains; f0, the fourth full, is held
    // standalone. Point-in-time recovery only from the newest full.
    create_policy_schedule(
        &client,
        "nightly",
        "c1",
        "db",
        json!({"keep_full": 3, "pitr_full": 1}),
    )
    .await;
    for backup in &backups {
        let mut report = completed_report("c1", "db", "nightly", backup);
        if backup.id == "f0" {
            report.holds = vec!["standalone:audit-2026".into()];
        }
        if backup.id == "f2" {
            // Its executor names segment 7 as where its consistency ends (its times say 6).
            report.log_range = Some(sexton_model::records::LogRange {
                first: "mysql-bin.000006".into(),
                last: "mysql-bin.000007".into(),
            });
        }
        publish_report(&js, &store, report).await;
    }
    wait_for_completed(&catalog, "c1", backups.len()).await;
    let f2 = catalog
        .list_cluster(&cluster("c1"))
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.value.id.as_str() == "f2")
        .unwrap();
    assert_eq!(
        f2.value.log_range.as_ref().map(|r| r.last.as_str()),
        Some("mysql-bin.000007")
    );

    let retention = Fleet::start(
        &config,
        Members {
            retention_worker: true,
            deleter: true,
            ..NONE
        },
    );
    // Everything ends before f3's start but the own ranges: f0's 0, f1's 2, i1's 4, f2's 6
    // and 7 (by name).
    let kept: BTreeSet<String> = [0, 2, 4, 6, 7, 10, 11, 12, 13, 14, 15]
        .iter()
        .map(|k| segment_key("c1", &format!("mysql-bin.{k:06}")))
        .collect();
    settles_to("the index", Duration::from_secs(90), &kept, || async {
        index_keys(&store, "c1").await
    })
    .await;
    let status = api(
        &client,
        "binlog",
        "status",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    assert_eq!(status["horizon_backup"], "f3", "{status:#}");
    // Every backup stays: the policy keeps them, only the archive between them goes.
    let in_catalog: BTreeSet<String> = catalog
        .list_cluster(&cluster("c1"))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.value.id.to_string())
        .collect();
    assert_eq!(in_catalog.len(), backups.len(), "{in_catalog:?}");

    // A job that names f1's own segment, with the true horizon: the deleter judges the catalog
    // and the policy itself, and keeps it.
    let f1_segment = segment_key("c1", "mysql-bin.000002");
    publish_binlog_job(
        &js,
        &job(at(4, 1), std::slice::from_ref(&f1_segment)),
        "forged-range",
    )
    .await;
    binlog_drained(&js).await;
    assert_eq!(index_keys(&store, "c1").await, kept);
    assert!(store.get(&f1_segment).await.unwrap().is_some());

    for fleet in [scheduler, retention] {
        assert!(fleet.all_running());
        fleet.stop().await.unwrap();
    }
}
