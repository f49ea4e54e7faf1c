//! Object Lock (issue 29) against a real SeaweedFS bucket created with Object Lock: the
//! retention-worker locks each kept backup's exact versions until the date its rule keeps it
//! (a tier per count rule), lengthens a lock when a calendar pick's period ends (the daily
//! whose day is over) and never shortens one; a backup the policy lets go stays `expired, locked until T` and is deleted
//! after T without anyone's help, its versions gone and no delete marker left behind. A lock
//! setting on a bucket without Object Lock stops the retention-worker at start.

use std::time::Duration;

use async_nats::jetstream;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sexton_model::{names::BackupId, records::BackupStatus};
use sexton_retention::lock::{parse_lock_duration, LockMode, LockTiers};
use sexton_shared::{catalog::Catalog, config::LockConfig, object_store::ObjectStore, topology};
use sexton_tests::*;

fn report(id: &str, completed_at: DateTime<Utc>) -> Value {
    json!({
        "schema_version": 1, "backup_id": id, "cluster": "c1", "plan": "full",
        "schedule": "f", "backup_name": "f", "status": "completed", "kind": "full",
        "started_at": (completed_at - chrono::Duration::minutes(5)).to_rfc3339(),
        "completed_at": completed_at.to_rfc3339(),
        "artifacts": [
            format!("backups/c1/f/{id}/backup.xbstream"),
            format!("backups/c1/f/{id}/metadata.json"),
        ],
    })
}

async fn publish(js: &jetstream::Context, body: &Value, id: &str) {
    js.send_publish(
        "sexton.v1.report.c1".to_string(),
        jetstream::message::PublishMessage::build()
            .payload(serde_json::to_vec(body).unwrap().into())
            .message_id(id),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// The bucket `locked`, created with Object Lock on the test's SeaweedFS.
async fn locked_bucket(config: &mut sexton_shared::config::Config) -> ObjectStore {
    config.s3.bucket = "locked".into();
    let store = object_store(config).await;
    store
        .client()
        .create_bucket()
        .bucket("locked")
        .object_lock_enabled_for_bucket(true)
        .send()
        .await
        .unwrap();
    store
}

/// Waits for `id`'s record to say it is locked until at least `at_least`, and returns it.
async fn locked_until(
    catalog: &Catalog,
    id: &str,
    at_least: Option<DateTime<Utc>>,
) -> DateTime<Utc> {
    eventually(&format!("{id} locked"), Duration::from_secs(60), || async {
        let records = fixtures::records_of(catalog, "c1").await;
        let until = records.get(id)?.value.locked_until?;
        at_least.is_none_or(|at| until >= at).then_some(until)
    })
    .await
}

async fn retention_of(store: &ObjectStore, key: &str, version: Option<&str>) -> (String, i64) {
    let held = store
        .retention_of(key, version)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{key} has no lock"));
    (held.mode, held.until.timestamp())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_backup_is_locked_until_its_rule_lets_it_go_then_deleted_version_by_version() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.scheduler.retention_sweep_interval = Duration::from_secs(2);
    let store = locked_bucket(&mut config).await;
    config.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            last: Some(parse_lock_duration("1h").unwrap()),
            ..LockTiers::default()
        },
    });
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
               "policy": {"keep_last": 1}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    // Whole seconds: the store keeps its dates so.
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();

    // b1's `last` lock (1h from its time) runs out 40 s from now.
    let b1_time = now - chrono::Duration::hours(1) + chrono::Duration::seconds(40);
    let mut b1 = report("f-b1", b1_time);
    fixtures::upload_genuine_json(&store, &mut b1).await;
    publish(&js, &b1, "b1").await;
    let b1_until = locked_until(&catalog, "f-b1", None).await;
    assert_eq!(b1_until, b1_time + chrono::Duration::hours(1));
    let record = fixtures::records_of(&catalog, "c1").await["f-b1"]
        .value
        .clone();
    assert_eq!(record.objects.len(), 2);
    for object in &record.objects {
        let version = object
            .version_id
            .as_deref()
            .unwrap_or_else(|| panic!("intake recorded no version of {}", object.key));
        assert_eq!(
            retention_of(&store, &object.key, Some(version)).await,
            ("GOVERNANCE".to_string(), b1_until.timestamp()),
            "{} locked to its rule's date",
            object.key
        );
    }
    // The store enforces it: deleting the exact version is refused.
    let data = &record.objects[0];
    let refused = store
        .client()
        .delete_object()
        .bucket("locked")
        .key(&data.key)
        .version_id(data.version_id.clone().unwrap())
        .send()
        .await;
    assert!(refused.is_err(), "a locked version was deleted");

    // b2, newer: the policy now lets b1 go, but its lock keeps it.
    let b2_time = now - chrono::Duration::seconds(30);
    let mut b2 = report("f-b2", b2_time);
    fixtures::upload_genuine_json(&store, &mut b2).await;
    publish(&js, &b2, "b2").await;
    let b2_until = locked_until(&catalog, "f-b2", None).await;
    assert_eq!(b2_until, b2_time + chrono::Duration::hours(1));
    let preview = api(
        &client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    let expected = format!(
        "expired, locked until {}",
        b1_until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    assert!(preview.to_string().contains(&expected), "{preview}");
    let b1_now = &fixtures::records_of(&catalog, "c1").await["f-b1"].value;
    assert_eq!(b1_now.status, BackupStatus::Completed);
    // What the lock costs beyond the policy: b1, with the bytes intake saw.
    let b1_bytes: u64 = b1_now.objects.iter().map(|o| o.size).sum();
    assert!(b1_bytes > 0);
    assert_eq!(
        preview[0]["locked_only"],
        json!({"backups": 1, "bytes": b1_now.size_bytes.unwrap_or(b1_bytes)}),
        "{preview}"
    );

    // After its date, b1 goes without anyone's help: every version, no delete marker.
    eventually(
        "f-b1 deleted after its lock ran out",
        Duration::from_secs(90),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            (!records.contains_key("f-b1")).then_some(())
        },
    )
    .await;
    assert!(Utc::now() >= b1_until, "deleted before its lock ran out");
    let versions = store.versions_of(&record.all_keys()).await.unwrap();
    assert!(versions.is_empty(), "left behind: {versions:?}");
    // b2 kept, its lock as long as before.
    let records = fixtures::records_of(&catalog, "c1").await;
    assert_eq!(records["f-b2"].value.locked_until, Some(b2_until));
    assert_eq!(records["f-b2"].value.status, BackupStatus::Completed);
    let b2_id = BackupId::new("f-b2").unwrap();
    assert!(catalog
        .get(&"c1".parse().unwrap(), &b2_id)
        .await
        .unwrap()
        .is_some());
    fleet.stop().await.unwrap();
}

/// A calendar pick is provisional while its period lasts (the newest backup is the pick of its
/// day, month and year until the next one comes) and locked by `min` only; once a backup of
/// the next day exists, yesterday's pick is final and its lock is lengthened to the daily tier.
/// A narrower policy then lets it go, but never shortens its lock: it stays, `expired, locked
/// until T`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pick_is_locked_longer_once_its_day_is_over_and_never_shorter() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    let store = locked_bucket(&mut config).await;
    config.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            min: Some(parse_lock_duration("2d").unwrap()),
            daily: Some(parse_lock_duration("5d").unwrap()),
            ..LockTiers::default()
        },
    });
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
               "policy": {"keep_daily": 7}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();

    // The binlog archive: a segment that ends before yesterday's backup starts (no base
    // replays through it), one after it, and the open one being written.
    let yesterday = now - chrono::Duration::days(1);
    let c1: sexton_model::names::ClusterName = "c1".parse().unwrap();
    let segment = |name: &str, first: DateTime<Utc>, last: Option<DateTime<Utc>>| {
        sexton_shared::binlog::IndexSegment::new(
            format!("backups/c1/binlog/{name}"),
            Some(first.fixed_offset()),
            last.map(|t| t.fixed_offset()),
        )
    };
    let hours = chrono::Duration::hours;
    let segments = [
        segment(
            "mysql-bin.000001",
            yesterday - hours(3),
            Some(yesterday - hours(2)),
        ),
        segment(
            "mysql-bin.000002",
            yesterday - hours(1),
            Some(yesterday + hours(1)),
        ),
        segment("mysql-bin.000003", yesterday + hours(1), None),
    ];
    for seg in &segments {
        store.put(&seg.key, "binlog events".into()).await.unwrap();
        let seg = seg.clone();
        sexton_shared::binlog::store::update(
            &store,
            &sexton_shared::binlog::index_key("backups", &c1),
            &sexton_shared::binlog::binlog_prefix("backups", &c1),
            move |index| index.apply_appends(std::slice::from_ref(&seg)) > 0,
        )
        .await
        .unwrap();
    }

    // Yesterday's backup, the newest when it comes: provisional, min only.
    let mut a = report("f-a", yesterday);
    fixtures::upload_genuine_json(&store, &mut a).await;
    publish(&js, &a, "a").await;
    let min_until = yesterday + chrono::Duration::days(2);
    assert_eq!(locked_until(&catalog, "f-a", None).await, min_until);

    // Today's: yesterday is over, f-a is its daily for good.
    let mut b = report("f-b", now);
    fixtures::upload_genuine_json(&store, &mut b).await;
    publish(&js, &b, "b").await;
    let daily_until = yesterday + chrono::Duration::days(5);
    assert_eq!(
        locked_until(&catalog, "f-a", Some(daily_until)).await,
        daily_until
    );
    let record = fixtures::records_of(&catalog, "c1").await["f-a"]
        .value
        .clone();
    for object in &record.objects {
        assert_eq!(
            retention_of(&store, &object.key, object.version_id.as_deref()).await,
            ("GOVERNANCE".to_string(), daily_until.timestamp()),
            "{} lengthened in the store",
            object.key
        );
    }

    // The segments yesterday's backup may replay through are locked as long as it is.
    for seg in &segments[1..] {
        let held = eventually(
            &format!("{} locked", seg.key),
            Duration::from_secs(30),
            || async {
                store
                    .retention_of(&seg.key, None)
                    .await
                    .ok()
                    .flatten()
                    .filter(|held| held.until >= daily_until)
            },
        )
        .await;
        assert_eq!(held.until, daily_until, "{}", seg.key);
    }
    let older = store.retention_of(&segments[0].key, None).await;
    assert!(
        !matches!(older, Ok(Some(_))),
        "a segment no locked base needs was locked: {older:?}"
    );

    // A rule that promises more than its tier locks is warned about where it is written.
    let widened = api(
        &client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "f", "policy": {"keep_daily": 14}}),
    )
    .await
    .unwrap();
    assert!(
        widened.to_string().contains(
            "keep_daily 14 keeps each pick for about 14 days, but the lock tier daily is 5d"
        ),
        "{widened}"
    );

    // Narrowed to one daily: f-a is let go by the policy, kept by its lock, lock unchanged.
    api(
        &client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "f", "policy": {"keep_daily": 1}, "confirm": true}),
    )
    .await
    .unwrap();
    let expected = format!(
        "expired, locked until {}",
        daily_until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let preview = eventually(
        "the preview says why f-a stays",
        Duration::from_secs(30),
        || async {
            let preview = api(
                &client,
                "retention",
                "preview",
                json!({"schema_version": 1, "cluster": "c1"}),
            )
            .await
            .ok()?
            .to_string();
            preview.contains(&expected).then_some(preview)
        },
    )
    .await;
    assert!(preview.contains("f-a"), "{preview}");
    let record = fixtures::records_of(&catalog, "c1").await["f-a"]
        .value
        .clone();
    assert_eq!(record.locked_until, Some(daily_until), "never shortened");
    assert_eq!(record.status, BackupStatus::Completed);
    for object in &record.objects {
        assert_eq!(
            retention_of(&store, &object.key, object.version_id.as_deref())
                .await
                .1,
            daily_until.timestamp()
        );
    }
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_setting_on_a_bucket_without_object_lock_stops_the_retention_worker_saying_so() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            min: Some(parse_lock_duration("1d").unwrap()),
            ..LockTiers::default()
        },
    });
    let (_trigger, shutdown) = sexton_shared::shutdown::Shutdown::new();
    let err = tokio::time::timeout(
        Duration::from_secs(60),
        sexton_retention_worker::run(config, shutdown),
    )
    .await
    .expect("the retention-worker stops at start")
    .expect_err("started on a bucket without Object Lock");
    let text = format!("{err:#}");
    assert!(
        text.contains("does not have Object Lock enabled") && text.contains("s3.lock"),
        "{text}"
    );
}

/// The attack of issue 29: with the store's admin credentials, an attacker writes over every
/// object of the cluster and puts a delete marker on each. The locked versions cannot be
/// deleted; the scrub sees the current versions and the markers differ from the recorded
/// versions and says so (a `backup-tampered` incident), counts nothing lost, and a restore test
/// reads the recorded versions and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attacker_with_the_stores_keys_cannot_take_a_locked_recovery_point() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    let store = locked_bucket(&mut config).await;
    config.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            min: Some(parse_lock_duration("1d").unwrap()),
            ..LockTiers::default()
        },
    });
    let fleet = Fleet::start(&config, Members::ALL);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 3}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let mut body = report("f-b1", Utc::now() - chrono::Duration::minutes(1));
    fixtures::upload_genuine_json(&store, &mut body).await;
    publish(&js, &body, "b1").await;
    locked_until(&catalog, "f-b1", None).await;
    let record = fixtures::records_of(&catalog, "c1").await["f-b1"]
        .value
        .clone();
    // A binlog segment shipped the way an executor ships it, so the archive is attacked too.
    let dir = tempfile::tempdir().unwrap();
    let segment_file = dir.path().join("wal.000001");
    let segment_bytes = b"the only copy of an hour of changes".repeat(100);
    std::fs::write(&segment_file, &segment_bytes).unwrap();
    let shipped = sexton_cli(
        &config,
        &[
            "binlog",
            "append",
            "--cluster",
            "c1",
            "--format",
            "file",
            segment_file.to_str().unwrap(),
        ],
    );
    assert!(
        shipped.status.success(),
        "{}",
        String::from_utf8_lossy(&shipped.stderr)
    );
    let archive = [
        "backups/c1/binlog/wal.000001".to_string(),
        "backups/c1/binlog/_index.json".to_string(),
    ];

    // The attack: every object written over, then marked deleted; the recorded versions
    // deleted by id, which the lock refuses.
    for key in &archive {
        for step in 0..2 {
            let request = store.client();
            if step == 0 {
                request
                    .put_object()
                    .bucket("locked")
                    .key(key)
                    .body(aws_sdk_s3::primitives::ByteStream::from_static(b"ransom"))
                    .send()
                    .await
                    .unwrap();
            } else {
                request
                    .delete_object()
                    .bucket("locked")
                    .key(key)
                    .send()
                    .await
                    .unwrap();
            }
        }
    }
    for object in &record.objects {
        store
            .client()
            .put_object()
            .bucket("locked")
            .key(&object.key)
            .body(aws_sdk_s3::primitives::ByteStream::from_static(b"ransom"))
            .send()
            .await
            .unwrap();
        store
            .client()
            .delete_object()
            .bucket("locked")
            .key(&object.key)
            .send()
            .await
            .unwrap();
        let refused = store
            .client()
            .delete_object()
            .bucket("locked")
            .key(&object.key)
            .version_id(object.version_id.clone().unwrap())
            .send()
            .await;
        assert!(
            refused.is_err(),
            "the locked version of {} was deleted",
            object.key
        );
    }
    assert!(
        fixtures::keys_under(&store, "backups/c1/").await.is_empty(),
        "a plain listing shows nothing any more"
    );

    let scrub = api(
        &client,
        "catalog",
        "scrub",
        json!({"schema_version": 1, "cluster": "c1"}),
    )
    .await
    .unwrap();
    let text = scrub.to_string();
    assert!(
        scrub["findings"].as_array().is_none_or(|f| f.is_empty()),
        "nothing is counted lost: {text}"
    );
    assert_eq!(scrub["tampered"][0]["id"], "f-b1", "{text}");
    assert!(text.contains("delete marker over it"), "{text}");
    let record_now = &fixtures::records_of(&catalog, "c1").await["f-b1"].value;
    assert_eq!(record_now.status, BackupStatus::Completed);
    let incidents = eventually(
        "the tampering incident",
        Duration::from_secs(30),
        || async {
            let incidents = fixtures::incidents(&js).await;
            incidents
                .iter()
                .any(|i| i.kind == "backup-tampered" && i.backup_id.as_deref() == Some("f-b1"))
                .then_some(incidents)
        },
    )
    .await;
    assert!(
        !incidents.iter().any(|i| i.kind == "backup-missing"),
        "{incidents:?}"
    );

    // A restore test reads the recorded versions, not the ransom note.
    let asked = api(
        &client,
        "backup",
        "verify",
        json!({"schema_version": 1, "cluster": "c1", "id": "f-b1"}),
    )
    .await
    .unwrap();
    let request = asked["request_id"].as_str().unwrap().to_string();
    let (outcome, reason) = eventually(
        "the restore test's verdict",
        Duration::from_secs(60),
        || async {
            let record = fixtures::records_of(&catalog, "c1")
                .await
                .get("f-b1")?
                .value
                .clone();
            let entry = record
                .verification?
                .history
                .into_iter()
                .find(|e| e.request_id == request)?;
            Some((entry.outcome, entry.reason.unwrap_or_default()))
        },
    )
    .await;
    assert_eq!(outcome, "verified", "{reason}");

    // A person's restore reads the same: `sexton backup fetch` writes the recorded versions,
    // checked, and `sexton binlog fetch` finds the recorded segment under the ransom note
    // (the index too, its newest version that reads).
    let into = dir.path().join("restore");
    let fetched = sexton_cli(
        &config,
        &[
            "backup",
            "fetch",
            "f-b1",
            "--cluster",
            "c1",
            "--to",
            into.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    let stderr = String::from_utf8_lossy(&fetched.stderr).to_string();
    assert!(fetched.status.success(), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&fetched.stdout).unwrap();
    assert_eq!(rows.len(), record.objects.len(), "{rows:?}");
    for object in &record.objects {
        let name = object.key.rsplit('/').next().unwrap();
        let bytes = std::fs::read(into.join("f-b1").join(name)).unwrap();
        assert_eq!(
            Some(sexton_model::digest::sha256_hex(&bytes)),
            object.sha256,
            "{} fetched is not the recorded version",
            object.key
        );
    }
    let binlog_into = into.join("binlog");
    let fetched = sexton_cli(
        &config,
        &[
            "binlog",
            "fetch",
            "--cluster",
            "c1",
            "--to",
            binlog_into.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    let stderr = String::from_utf8_lossy(&fetched.stderr).to_string();
    assert!(fetched.status.success(), "{stderr}");
    assert!(stderr.contains("current index is unreadable"), "{stderr}");
    assert!(stderr.contains("written over or deleted"), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&fetched.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0]["version_id"].is_string(), "{rows:?}");
    assert_eq!(
        std::fs::read(binlog_into.join("wal.000001")).unwrap(),
        segment_bytes,
        "the segment fetched is the one shipped"
    );
    fleet.stop().await.unwrap();
}

/// Locks are a property of a location: with `[locations.dr.lock]` (and none at primary), each
/// copy the copier lands at dr is locked there, the exact version it wrote, until the date
/// dr's own policy keeps it; primary's objects stay unlocked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_location_with_a_lock_setting_locks_the_copies_it_keeps() {
    const DR_KEY: &str = "dr-only-key";
    const DR_SECRET: &str = "dr-only-secret";
    let nats = Nats::start();
    let primary = S3::start();
    let dr_server = S3::start_as(DR_KEY, DR_SECRET);
    let mut config = config(&nats, &primary);
    let dr = add_locking_location(
        &mut config,
        "dr",
        &dr_server,
        (DR_KEY, DR_SECRET),
        "dr-locked",
        LockTiers {
            last: Some(parse_lock_duration("2d").unwrap()),
            ..LockTiers::default()
        },
    )
    .await;
    let fleet = Fleet::start(
        &config,
        Members {
            executor: false,
            ..Members::ALL
        },
    );
    let (copier_stop, copier) = start_copier(&config);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 5},
               "copies": [{"to": "dr", "policy": {"keep_last": 3}}]}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let source = object_store(&config).await;
    let completed = DateTime::from_timestamp(Utc::now().timestamp() - 60, 0).unwrap();
    let mut body = report("f-b1", completed);
    fixtures::upload_genuine_json(&source, &mut body).await;
    publish(&js, &body, "b1").await;

    let dr_name: sexton_model::names::LocationName = "dr".parse().unwrap();
    let copy = eventually("the copy at dr locked", Duration::from_secs(90), || async {
        let records = fixtures::records_of(&catalog, "c1").await;
        let record = records.get("f-b1")?.value.clone();
        let copy = record.copies.get(&dr_name)?.clone();
        copy.locked_until.is_some().then_some(copy)
    })
    .await;
    let until = completed + chrono::Duration::days(2);
    assert_eq!(copy.locked_until, Some(until));

    assert_eq!(copy.objects.len(), 2);
    for object in &copy.objects {
        let version = object
            .version_id
            .as_deref()
            .unwrap_or_else(|| panic!("the copier recorded no version of {}", object.key));
        assert_eq!(
            retention_of(&dr, &object.key, Some(version)).await,
            ("GOVERNANCE".to_string(), until.timestamp())
        );
    }
    let record = &fixtures::records_of(&catalog, "c1").await["f-b1"].value;
    assert_eq!(record.locked_until, None, "primary has no lock setting");
    // What a person reads (issue 50): the lock at dr, and the copy rule in the schedule.
    let out = sexton_cli(&config, &["backup", "describe", "f-b1", "--cluster", "c1"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let locked = text
        .lines()
        .find(|l| l.starts_with("locked:"))
        .unwrap_or_default();
    assert!(
        locked.contains(&format!(
            "dr until {} (S3 Object Lock)",
            until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )) && !locked.contains("primary"),
        "{text}"
    );
    assert!(!text.contains("()"), "{text}");
    let out = sexton_cli(&config, &["schedule", "describe", "f"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("copy:         to dr: keep_last=3; selects all; in the location's class"),
        "{text}"
    );
    copier_stop.trigger();
    copier.await.unwrap().unwrap();
    fleet.stop().await.unwrap();
}

/// Issue 54: an object lost before its backup's first lock (the lock turned on under kept
/// backups) is evidence, not a transient error. The run that meets it scrubs the cluster:
/// that backup is `missing` (with an incident) within one sweep, the others are locked and
/// decided, and no run is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_lost_before_its_first_lock_is_found_missing_and_the_others_are_locked() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.scheduler.retention_sweep_interval = Duration::from_secs(2);
    // No scheduled scrub: the hour before it is when a lost object meets the first lock.
    config.scheduler.scrub_interval = Duration::ZERO;
    let store = locked_bucket(&mut config).await;
    // Three backups taken while the fleet did not lock.
    let fleet = Fleet::start(
        &config,
        Members {
            executor: false,
            retention_worker: false,
            ..Members::ALL
        },
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 2}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
    for (n, id) in ["f-b1", "f-b2", "f-b3"].iter().enumerate() {
        let mut body = report(id, now - chrono::Duration::hours(3 - n as i64));
        fixtures::upload_genuine_json(&store, &mut body).await;
        publish(&js, &body, id).await;
    }
    let b2 = eventually(
        "three backups recorded",
        Duration::from_secs(60),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            let done = ["f-b1", "f-b2", "f-b3"].iter().all(|id| {
                records
                    .get(*id)
                    .is_some_and(|r| r.value.status == BackupStatus::Completed)
            });
            done.then(|| records["f-b2"].value.clone())
        },
    )
    .await;
    // f-b2's data is lost: its recorded version deleted outright (nothing locked it yet).
    let data = b2
        .objects
        .iter()
        .find(|o| o.key.ends_with("backup.xbstream"))
        .unwrap();
    store
        .client()
        .delete_object()
        .bucket("locked")
        .key(&data.key)
        .version_id(data.version_id.clone().unwrap())
        .send()
        .await
        .unwrap();

    // Then the lock is turned on, and the retention-worker starts.
    config.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            last: Some(parse_lock_duration("1d").unwrap()),
            ..LockTiers::default()
        },
    });
    let metrics_port = free_port();
    let mut worker_config = config.clone();
    worker_config.http.listen = format!("127.0.0.1:{metrics_port}");
    let worker = Fleet::start(&worker_config, RETENTION_WORKER_ONLY);
    eventually(
        "f-b2 missing, f-b1 and f-b3 locked",
        Duration::from_secs(30),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            let missing = records["f-b2"].value.status == BackupStatus::Missing;
            let locked = ["f-b1", "f-b3"]
                .iter()
                .all(|id| records[*id].value.locked_until.is_some());
            (missing && locked).then_some(())
        },
    )
    .await;
    let incident = eventually("the incident", Duration::from_secs(10), || async {
        fixtures::incidents(&js)
            .await
            .into_iter()
            .find(|i| i.kind == "backup-missing" && i.backup_id.as_deref() == Some("f-b2"))
    })
    .await;
    assert!(incident.reason.contains(&data.key), "{incident:?}");
    // f-b1 is kept in f-b2's place (keep_last 2 counts what is there), and locked for it.
    let records = fixtures::records_of(&catalog, "c1").await;
    assert_eq!(records["f-b1"].value.status, BackupStatus::Completed);
    let counter = |name: &str, labels: &str| {
        sexton_tests::fault::metric(metrics_port, name, labels).unwrap_or(0.0)
    };
    assert!(
        counter("sexton_retention_missing_object_runs_total", "") >= 1.0,
        "no run met the missing object"
    );
    assert_eq!(
        counter("sexton_retention_runs_total", "outcome=\"retry\""),
        0.0,
        "a run was retried"
    );
    worker.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

/// Issue 54: Object Lock turned on in place under a fleet that holds backups, as AWS S3 (since
/// November 2023), Ceph RGW and SeaweedFS allow: versioning on, then the lock configuration on
/// the existing bucket, then the lock setting and a restart of the retention-worker. One sweep
/// locks every kept backup, objects written before versioning included (their `null`
/// version), and the store then refuses to delete them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_lock_turned_on_in_place_locks_the_backups_already_there() {
    use aws_sdk_s3::types::{
        BucketVersioningStatus, ObjectLockConfiguration, ObjectLockEnabled, VersioningConfiguration,
    };
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.scheduler.retention_sweep_interval = Duration::from_secs(2);
    let store = object_store(&config).await;
    let bucket = config.s3.bucket.clone();
    let fleet = Fleet::start(
        &config,
        Members {
            executor: false,
            retention_worker: false,
            ..Members::ALL
        },
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 3}}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
    let ids = ["f-b1", "f-b2", "f-b3"];
    for (n, id) in ids.iter().enumerate() {
        let mut body = report(id, now - chrono::Duration::hours(3 - n as i64));
        fixtures::upload_genuine_json(&store, &mut body).await;
        publish(&js, &body, id).await;
    }
    eventually(
        "three backups recorded",
        Duration::from_secs(60),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            ids.iter()
                .all(|id| {
                    records
                        .get(*id)
                        .is_some_and(|r| r.value.status == BackupStatus::Completed)
                })
                .then_some(())
        },
    )
    .await;
    assert!(!store.object_lock_enabled().await.unwrap());

    // The documented steps (docs/immutability.md), with the storage's own API.
    store
        .client()
        .put_bucket_versioning()
        .bucket(&bucket)
        .versioning_configuration(
            VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    store
        .client()
        .put_object_lock_configuration()
        .bucket(&bucket)
        .object_lock_configuration(
            ObjectLockConfiguration::builder()
                .object_lock_enabled(ObjectLockEnabled::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert!(store.object_lock_enabled().await.unwrap());
    config.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            min: Some(parse_lock_duration("1d").unwrap()),
            ..LockTiers::default()
        },
    });
    let worker = Fleet::start(&config, RETENTION_WORKER_ONLY);
    let records = eventually(
        "every kept backup locked",
        Duration::from_secs(30),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            ids.iter()
                .all(|id| records[*id].value.locked_until.is_some())
                .then_some(records)
        },
    )
    .await;
    for id in ids {
        let record = &records[id].value;
        assert_eq!(record.status, BackupStatus::Completed);
        for object in &record.objects {
            let (mode, until) = retention_of(&store, &object.key, None).await;
            assert_eq!(mode, "GOVERNANCE", "{}", object.key);
            assert_eq!(until, record.locked_until.unwrap().timestamp());
            // The pre-versioning object is its `null` version: deleting it is refused.
            let refused = store
                .client()
                .delete_object()
                .bucket(&bucket)
                .key(&object.key)
                .version_id("null")
                .send()
                .await;
            assert!(refused.is_err(), "{} deleted under its lock", object.key);
        }
    }
    worker.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

/// A report of backup `id` of `cluster`, schedule `f` (its objects to be uploaded).
fn report_of(cluster: &str, id: &str, completed_at: DateTime<Utc>) -> Value {
    let mut body = report(id, completed_at);
    body["cluster"] = json!(cluster);
    body["schedule"] = json!(format!("{cluster}-f"));
    body["artifacts"] = json!([
        format!("backups/{cluster}/f/{id}/backup.xbstream"),
        format!("backups/{cluster}/f/{id}/metadata.json"),
    ]);
    body
}

/// Issue 54: a cluster whose runs keep failing does not hold up a healthy cluster in the same
/// retention partition, and says so. The failing cluster's data object was locked by hand in
/// COMPLIANCE mode for a day; the fleet's GOVERNANCE lock for five days is refused by the
/// store, every run of it fails and is retried. A checkpoint of the healthy cluster is
/// decided within 10 s meanwhile, and `schedule describe` shows the failing cluster's last
/// error with how long it has been failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_cluster_does_not_hold_up_a_healthy_one_in_its_partition() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    let store = locked_bucket(&mut config).await;
    config.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            last: Some(parse_lock_duration("5d").unwrap()),
            ..LockTiers::default()
        },
    });
    let fleet = Fleet::start(
        &config,
        Members {
            executor: false,
            retention_worker: false,
            ..Members::ALL
        },
    );
    // The retention-worker beside it, with a metrics port of its own to read.
    let metrics_port = free_port();
    let mut worker_config = config.clone();
    worker_config.http.listen = format!("127.0.0.1:{metrics_port}");
    let worker = Fleet::start(&worker_config, RETENTION_WORKER_ONLY);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    // Two clusters of one partition: the failing one, and the first healthy name beside it.
    let failing = "failing";
    let partition = topology::partition_of(failing, topology::RETENTION_PARTITIONS);
    let healthy = (0..)
        .map(|n| format!("healthy{n}"))
        .find(|name| topology::partition_of(name, topology::RETENTION_PARTITIONS) == partition)
        .unwrap();
    for cluster in [failing, healthy.as_str()] {
        create_schedule(
            &client,
            json!({"name": format!("{cluster}-f"), "cluster": cluster, "plan": "full",
                   "cron": "@daily", "paused": true, "policy": {"keep_last": 1}}),
        )
        .await;
    }
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());

    // The failing cluster's backup, its data locked by hand before the fleet saw it.
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
    let mut body = report_of(failing, "f-b1", now - chrono::Duration::hours(1));
    fixtures::upload_genuine_json(&store, &mut body).await;
    let data = format!("backups/{failing}/f/f-b1/backup.xbstream");
    let by_hand = now + chrono::Duration::days(1);
    store
        .client()
        .put_object_retention()
        .bucket("locked")
        .key(&data)
        .retention(
            aws_sdk_s3::types::ObjectLockRetention::builder()
                .mode(aws_sdk_s3::types::ObjectLockRetentionMode::Compliance)
                .retain_until_date(aws_sdk_s3::primitives::DateTime::from_secs(
                    by_hand.timestamp(),
                ))
                .build(),
        )
        .send()
        .await
        .expect("a compliance lock set by hand");
    js.publish(
        format!("sexton.v1.report.{failing}"),
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let failed = eventually(
        "the failing cluster's runs failing, twice",
        Duration::from_secs(60),
        || async {
            let status = fixtures::retention_status(&js, failing).await?;
            (status.outcome == sexton_model::records::RetentionOutcome::Failed && status.runs >= 2)
                .then_some(status)
        },
    )
    .await;
    let reason = failed.reason.clone().unwrap_or_default();
    assert!(reason.contains(&data), "{failed:?}");

    // The healthy cluster: its checkpoint is decided within 10 s while the other fails.
    let mut body = report_of(&healthy, "f-b1", now - chrono::Duration::minutes(30));
    fixtures::upload_genuine_json(&store, &mut body).await;
    let published = Utc::now();
    js.publish(
        format!("sexton.v1.report.{healthy}"),
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let decided = eventually(
        "the healthy cluster decided and locked",
        Duration::from_secs(30),
        || async {
            let record = fixtures::records_of(&catalog, &healthy)
                .await
                .remove("f-b1")?
                .value;
            record.locked_until?;
            let status = fixtures::retention_status(&js, &healthy).await?;
            (status.outcome == sexton_model::records::RetentionOutcome::Decided
                && status.at >= published)
                .then_some(status)
        },
    )
    .await;
    let took = decided.at - published;
    assert!(
        took < chrono::Duration::seconds(10),
        "the healthy cluster was decided {took} after its report"
    );
    let still = fixtures::retention_status(&js, failing).await.unwrap();
    assert_eq!(
        still.outcome,
        sexton_model::records::RetentionOutcome::Failed,
        "{still:?}"
    );
    assert!(
        sexton_tests::fault::metric(
            metrics_port,
            "sexton_retention_cluster_runs_total",
            &format!("cluster=\"{failing}\",outcome=\"failed\"")
        )
        .unwrap_or(0.0)
            >= 2.0
    );
    eprintln!(
        "the healthy cluster was decided {} ms after its report; the failing one had failed {} runs",
        took.num_milliseconds(),
        still.runs
    );

    // What a person reads: the failing schedule's describe names the error and since when.
    let out = sexton_cli(&config, &["schedule", "describe", "failing-f"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text
        .lines()
        .find(|line| line.starts_with("retention:"))
        .unwrap_or_else(|| panic!("no retention line in\n{text}"));
    assert!(
        line.contains("FAILING since") && line.contains(&data) && line.contains("last decided"),
        "{line}"
    );
    let out = sexton_cli(&config, &["schedule", "get", "failing-f", "-o", "wide"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("RETENTION") && text.contains("failed"),
        "{text}"
    );
    // What a health check reads: the manifest's condition.
    let out = sexton_cli(&config, &["get", "schedule", "failing-f", "-o", "json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let condition = list["items"][0]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "RetentionDecided")
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(
        (&condition["status"], &condition["reason"]),
        (&json!("False"), &json!("RunsFailing")),
        "{condition}"
    );
    assert!(
        condition["message"].as_str().unwrap().contains(&data),
        "{condition}"
    );
    worker.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

/// A closed binlog segment of c1 shipped as `sexton binlog append` ships it: the object, then
/// its entry (size and SHA-256) in the index.
async fn ship_c1_segment(
    store: &ObjectStore,
    name: &str,
    first: DateTime<Utc>,
    last: DateTime<Utc>,
) {
    let c1: sexton_model::names::ClusterName = "c1".parse().unwrap();
    let key = format!("backups/c1/binlog/{name}");
    let body = format!("binlog events of {name}").into_bytes();
    store.put(&key, body.clone().into()).await.unwrap();
    let mut segment = sexton_shared::binlog::IndexSegment::new(
        key,
        Some(first.fixed_offset()),
        Some(last.fixed_offset()),
    );
    segment.extra.insert(
        "sha256".into(),
        json!(sexton_model::digest::sha256_hex(&body)),
    );
    segment.extra.insert("size".into(), json!(body.len()));
    sexton_shared::binlog::store::update(
        store,
        &sexton_shared::binlog::index_key("backups", &c1),
        &sexton_shared::binlog::binlog_prefix("backups", &c1),
        move |index| index.apply_appends(std::slice::from_ref(&segment)) > 0,
    )
    .await
    .unwrap();
}

/// Issue 54: the documented way to Object Lock used to be a new bucket, and a new bucket
/// stranded every backup: records did not say which bucket held them. Now they do. With the
/// fleet pointed at a new bucket (locked), the cluster whose backups are in the old one is held
/// (an incident and a status naming both buckets and the command; nothing marked missing,
/// locked or deleted, a scrub included) while a new cluster in the new bucket is decided as
/// usual. `sexton catalog migrate --from-bucket` then copies every backup and the binlog
/// archive, the records move, the next run locks them, each is byte-identical and fetched
/// through the fleet, and the queues drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_bucket_holds_its_clusters_until_migrated_then_every_backup_is_locked_there() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    config.scheduler.retention_sweep_interval = Duration::from_secs(3600);
    let old = object_store(&config).await;
    // The fleet as it was: the old bucket, no lock.
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
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
    let ids = ["f-b1", "f-b2", "f-b3"];
    for (n, id) in ids.iter().enumerate() {
        let mut body = report(id, now - chrono::Duration::hours(3 - n as i64));
        fixtures::upload_genuine_json(&old, &mut body).await;
        publish(&js, &body, id).await;
    }
    ship_c1_segment(
        &old,
        "mysql-bin.000001",
        now - chrono::Duration::hours(4),
        now - chrono::Duration::hours(2),
    )
    .await;
    ship_c1_segment(
        &old,
        "mysql-bin.000002",
        now - chrono::Duration::hours(2),
        now - chrono::Duration::minutes(30),
    )
    .await;
    let before = eventually(
        "three backups recorded",
        Duration::from_secs(60),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            ids.iter()
                .all(|id| {
                    records
                        .get(*id)
                        .is_some_and(|r| r.value.status == BackupStatus::Completed)
                })
                .then_some(records)
        },
    )
    .await;
    for id in ids {
        let store = before[id]
            .value
            .store
            .clone()
            .expect("intake names the store");
        assert_eq!(store.bucket, BUCKET, "{id}");
    }
    fleet.stop().await.unwrap();

    // Object Lock the documented old way: a new bucket with the lock, the fleet pointed at it.
    let mut moved = config.clone();
    let new = locked_bucket(&mut moved).await;
    moved.s3.lock = Some(LockConfig {
        mode: LockMode::Governance,
        tiers: LockTiers {
            last: Some(parse_lock_duration("1d").unwrap()),
            ..LockTiers::default()
        },
    });
    let fleet = Fleet::start(
        &moved,
        Members {
            executor: false,
            ..Members::ALL
        },
    );
    // A sweep with a scrub: c1 is held, and its backups are not called missing.
    fixtures::sweep_with_scrub(&js, "c1").await;
    let held = eventually("c1's retention held", Duration::from_secs(30), || async {
        let status = fixtures::retention_status(&js, "c1").await?;
        (status.outcome == sexton_model::records::RetentionOutcome::Held).then_some(status)
    })
    .await;
    let reason = held.reason.clone().unwrap();
    for says in [
        "bucket sexton",
        "bucket locked",
        "sexton catalog migrate --cluster c1 --from-bucket sexton",
    ] {
        assert!(reason.contains(says), "{says:?} not in {reason}");
    }
    let incident = eventually(
        "the store-moved incident",
        Duration::from_secs(10),
        || async {
            fixtures::incidents(&js)
                .await
                .into_iter()
                .find(|i| i.kind == "store-moved" && i.cluster.as_deref() == Some("c1"))
        },
    )
    .await;
    assert_eq!(incident.reason, reason);
    let out = sexton_cli(&moved, &["schedule", "describe", "f"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("retention:    HELD since"), "{text}");
    // A restore from the fleet is refused with the way out, not attempted and failed.
    let dir = tempfile::tempdir().unwrap();
    let out = sexton_cli(
        &moved,
        &[
            "backup",
            "fetch",
            "f-b3",
            "--cluster",
            "c1",
            "--to",
            dir.path().to_str().unwrap(),
        ],
    );
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success() && said.contains("catalog migrate"),
        "{said}"
    );

    // A new cluster in the new bucket is decided as usual meanwhile.
    create_schedule(
        &client,
        json!({"name": "c2-f", "cluster": "c2", "plan": "full", "cron": "@daily",
               "paused": true, "policy": {"keep_last": 1}}),
    )
    .await;
    let mut body = report_of("c2", "f-n1", now - chrono::Duration::minutes(10));
    fixtures::upload_genuine_json(&new, &mut body).await;
    js.publish(
        "sexton.v1.report.c2",
        serde_json::to_vec(&body).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    eventually("c2 decided and locked", Duration::from_secs(30), || async {
        let record = fixtures::records_of(&catalog, "c2")
            .await
            .remove("f-n1")?
            .value;
        record.locked_until?;
        let status = fixtures::retention_status(&js, "c2").await?;
        (status.outcome == sexton_model::records::RetentionOutcome::Decided).then_some(())
    })
    .await;
    // Nothing of c1 changed: none missing, locked or deleted.
    let during = fixtures::records_of(&catalog, "c1").await;
    for id in ids {
        let record = &during[id].value;
        assert_eq!(record.status, BackupStatus::Completed, "{id}");
        assert_eq!(record.locked_until, None, "{id}");
    }

    // The dry run says what it would do and does nothing.
    let out = sexton_cli(
        &moved,
        &[
            "catalog",
            "migrate",
            "--from-bucket",
            BUCKET,
            "--dry-run",
            "-o",
            "json",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let dry: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(dry[0]["copied"], 6, "{dry}");
    assert_eq!(dry[0]["segments"], 2, "{dry}");
    assert_eq!(dry[0]["moved"], 0, "{dry}");
    assert!(new
        .head_at(&before["f-b1"].value.artifacts[0], None)
        .await
        .unwrap()
        .is_none());

    // The migration.
    let out = sexton_cli(
        &moved,
        &["catalog", "migrate", "--from-bucket", BUCKET, "-o", "json"],
    );
    assert!(out.status.success(), "{out:?}");
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&done[0]["moved"], &done[0]["copied"], &done[0]["segments"]),
        (&json!(3), &json!(6), &json!(2)),
        "{done}"
    );
    eprintln!("migrated: {done}");
    let after = eventually(
        "every moved backup locked",
        Duration::from_secs(30),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            ids.iter()
                .all(|id| records[*id].value.locked_until.is_some())
                .then_some(records)
        },
    )
    .await;
    for id in ids {
        let (was, now_) = (&before[id].value, &after[id].value);
        assert_eq!(now_.status, BackupStatus::Completed, "{id}");
        assert_eq!(now_.store.as_ref().unwrap().bucket, "locked", "{id}");
        assert_eq!(now_.objects.len(), was.objects.len());
        for (a, b) in was.objects.iter().zip(&now_.objects) {
            assert_eq!((&a.key, a.size, &a.sha256), (&b.key, b.size, &b.sha256));
            // Byte-identical in the new bucket, at the version recorded, and locked there.
            let (size, sha) = new
                .digest_at(&b.key, b.version_id.as_deref())
                .await
                .unwrap()
                .unwrap();
            assert_eq!((size, Some(sha)), (a.size, a.sha256.clone()), "{}", b.key);
            let (mode, _) = retention_of(&new, &b.key, b.version_id.as_deref()).await;
            assert_eq!(mode, "GOVERNANCE");
        }
    }
    let status = eventually("c1 decided again", Duration::from_secs(30), || async {
        let status = fixtures::retention_status(&js, "c1").await?;
        (status.outcome == sexton_model::records::RetentionOutcome::Decided).then_some(status)
    })
    .await;
    assert!(status.last_decided.is_some());
    // The archive moved with them, listed in the new bucket's index.
    let index = sexton_shared::binlog::store::read(
        &new,
        "backups/c1/binlog/_index.json",
        "backups/c1/binlog/",
    )
    .await
    .unwrap()
    .index;
    let names: Vec<&str> = index
        .segments
        .iter()
        .map(|s| s.key.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(names, ["mysql-bin.000001", "mysql-bin.000002"]);
    // Restorable through the fleet: fetched and checked against intake's digests.
    let out = sexton_cli(
        &moved,
        &[
            "backup",
            "fetch",
            "f-b3",
            "--cluster",
            "c1",
            "--to",
            dir.path().to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The queues drained.
    eventually("the queues drained", Duration::from_secs(60), || async {
        (sexton_tests::fault::total_backlog(&js).await? == 0).then_some(())
    })
    .await;
    // A second run finds nothing left to move.
    let out = sexton_cli(&moved, &["catalog", "migrate", "--from-bucket", BUCKET]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to move"));
    fleet.stop().await.unwrap();
}

/// Issue 54, item 5: a copy location's prefix changed under its copies. Each copy names the
/// store the copier wrote it to; with the location's settings naming another prefix, the
/// cluster is held and the scrub leaves the copies alone (none `missing`), restores from there
/// are refused with the way out, and `sexton catalog migrate --location dr` moves them: each
/// byte-identical at its new key, restorable from dr, and the cluster decided again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locations_prefix_moved_under_its_copies_holds_until_migrated() {
    const DR_KEY: &str = "dr-only-key";
    const DR_SECRET: &str = "dr-only-secret";
    let nats = Nats::start();
    let primary = S3::start();
    let dr_server = S3::start_as(DR_KEY, DR_SECRET);
    let mut config = config(&nats, &primary);
    add_location(&mut config, "dr", &dr_server, DR_KEY, DR_SECRET);
    let members = Members {
        executor: false,
        ..Members::ALL
    };
    let fleet = Fleet::start(&config, members);
    let (copier_stop, copier) = start_copier(&config);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 5},
               "copies": [{"to": "dr", "policy": {"keep_last": 5}}]}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let source = object_store(&config).await;
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
    let ids = ["f-b1", "f-b2"];
    for (n, id) in ids.iter().enumerate() {
        let mut body = report(id, now - chrono::Duration::hours(2 - n as i64));
        fixtures::upload_genuine_json(&source, &mut body).await;
        publish(&js, &body, id).await;
    }
    let dr: sexton_model::names::LocationName = "dr".parse().unwrap();
    let before = eventually("both copied to dr", Duration::from_secs(90), || async {
        let records = fixtures::records_of(&catalog, "c1").await;
        ids.iter()
            .all(|id| {
                records.get(*id).is_some_and(|r| {
                    r.value
                        .copies
                        .get(&dr)
                        .is_some_and(|c| c.state == sexton_model::copies::CopyState::Copied)
                })
            })
            .then_some(records)
    })
    .await;
    for id in ids {
        let copy = &before[id].value.copies[&dr];
        assert_eq!(copy.store.as_ref().unwrap().prefix, "dr-copies", "{id}");
    }
    copier_stop.trigger();
    copier.await.unwrap().unwrap();
    fleet.stop().await.unwrap();

    // The location's prefix changed in the settings, the copies left where they were.
    let mut moved = config.clone();
    moved.locations.get_mut("dr").unwrap().s3.prefix = "dr-v2".into();
    let fleet = Fleet::start(&moved, members);
    let (copier_stop, copier) = start_copier(&moved);
    fixtures::sweep_with_scrub(&js, "c1").await;
    let held = eventually("c1 held for dr", Duration::from_secs(30), || async {
        let status = fixtures::retention_status(&js, "c1").await?;
        (status.outcome == sexton_model::records::RetentionOutcome::Held).then_some(status)
    })
    .await;
    let reason = held.reason.unwrap();
    assert!(
        reason.contains("at dr")
            && reason.contains("--location dr --from-bucket sexton --from-prefix 'dr-copies'"),
        "{reason}"
    );
    // The location's scrub, asked directly, leaves those copies alone.
    let out = sexton_cli(&moved, &["catalog", "scrub", "--cluster", "c1"]);
    assert!(out.status.success(), "{out:?}");
    let during = fixtures::records_of(&catalog, "c1").await;
    for id in ids {
        assert_eq!(
            during[id].value.copies[&dr].state,
            sexton_model::copies::CopyState::Copied,
            "{id}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let fetch = |dir: &std::path::Path| {
        sexton_cli(
            &moved,
            &[
                "backup",
                "fetch",
                "f-b2",
                "--cluster",
                "c1",
                "--location",
                "dr",
                "--to",
                dir.to_str().unwrap(),
            ],
        )
    };
    let out = fetch(dir.path());
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success() && said.contains("--location dr"),
        "{said}"
    );

    let out = sexton_cli(
        &moved,
        &[
            "catalog",
            "migrate",
            "--location",
            "dr",
            "--from-bucket",
            BUCKET,
            "--from-prefix",
            "dr-copies",
            "-o",
            "json",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&done[0]["moved"], &done[0]["copied"]),
        (&json!(2), &json!(4)),
        "{done}"
    );
    let dr_store = object_store(&{
        let mut c = moved.clone();
        c.s3 = moved.locations["dr"].s3.clone();
        c
    })
    .await;
    let after = fixtures::records_of(&catalog, "c1").await;
    for id in ids {
        let (was, now_) = (&before[id].value.copies[&dr], &after[id].value.copies[&dr]);
        assert_eq!(now_.store.as_ref().unwrap().prefix, "dr-v2");
        for (a, b) in was.objects.iter().zip(&now_.objects) {
            assert_eq!(b.key, a.key.replacen("dr-copies/", "dr-v2/", 1));
            let (size, sha) = dr_store.digest(&b.key).await.unwrap().unwrap();
            assert_eq!((size, Some(sha)), (a.size, a.sha256.clone()), "{}", b.key);
        }
    }
    eventually("c1 decided again", Duration::from_secs(30), || async {
        let status = fixtures::retention_status(&js, "c1").await?;
        (status.outcome == sexton_model::records::RetentionOutcome::Decided).then_some(())
    })
    .await;
    let out = fetch(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    copier_stop.trigger();
    copier.await.unwrap().unwrap();
    fleet.stop().await.unwrap();
}
