//! Verified recovery points (issue 13), end to end with the reference executor: restore tests
//! asked for, answered and recorded; retention keeps the newest proven backup through every
//! rule that would delete it, and lets it go once a newer one is proven; a corrupted object
//! fails its test with the key in the reason; an incremental's test proves its chain; a backup
//! under test is held.

use std::time::Duration;

use async_nats::jetstream;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sexton_model::{
    names::{BackupId, ClusterName},
    records::{BackupRecord, BackupStatus, VerificationState},
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::*;

struct World {
    client: async_nats::Client,
    js: jetstream::Context,
    catalog: Catalog,
    store: sexton_shared::object_store::ObjectStore,
}

async fn world(config: &sexton_shared::config::Config, nats: &Nats) -> World {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    let catalog = Catalog::new(topology::ensure(&js, 1).await.unwrap().catalog);
    let store = object_store(config).await;
    World {
        client,
        js,
        catalog,
        store,
    }
}

impl World {
    async fn record(&self, cluster: &str, id: &str) -> Option<BackupRecord> {
        self.catalog
            .get(
                &ClusterName::new(cluster).unwrap(),
                &BackupId::new(id).unwrap(),
            )
            .await
            .unwrap()
            .map(|r| r.value)
    }

    /// Reports completed backups `(id, parent, minutes ago)` of schedule `c` (plan `full`) in
    /// `cluster`, each genuine (its objects uploaded), and waits for each record.
    async fn report_chain(&self, cluster: &str, chain: &[(&str, Option<&str>, i64)]) {
        let now = Utc::now();
        let minutes = chrono::Duration::minutes;
        for &(id, parent, age) in chain {
            let completed = now - minutes(age);
            let mut report = json!({
                "schema_version": 1, "backup_id": id, "cluster": cluster, "plan": "full",
                "schedule": "c", "backup_name": "c", "status": "completed",
                "kind": if parent.is_some() { "incremental" } else { "full" }, "parent": parent,
                "started_at": (completed - minutes(1)).to_rfc3339(),
                "completed_at": completed.to_rfc3339(),
                "artifacts": [format!("backups/{cluster}/c/{id}/backup.xbstream")],
            });
            fixtures::upload_genuine_json(&self.store, &mut report).await;
            self.js
                .publish(
                    format!("sexton.v1.report.{cluster}"),
                    serde_json::to_vec(&report).unwrap().into(),
                )
                .await
                .unwrap()
                .await
                .unwrap();
            wait_reported(&self.catalog, cluster, id).await;
        }
    }

    async fn verify(&self, cluster: &str, id: &str) -> Value {
        api(
            &self.client,
            "backup",
            "verify",
            json!({"schema_version": 1, "cluster": cluster, "id": id}),
        )
        .await
        .unwrap_or_else(|err| panic!("backup.verify {id}: {err}"))
    }

    /// Waits for the verdict of `request` on backup `id` and returns its outcome and reason.
    async fn verdict(&self, cluster: &str, id: &str, request: &str) -> (String, String) {
        eventually(
            &format!("the verdict of {request}"),
            Duration::from_secs(30),
            || async {
                let record = self.record(cluster, id).await?;
                let entry = record
                    .verification?
                    .history
                    .into_iter()
                    .find(|e| e.request_id == request)?;
                Some((entry.outcome, entry.reason.unwrap_or_default()))
            },
        )
        .await
    }

    async fn ids(&self, cluster: &str) -> Vec<String> {
        let mut ids: Vec<String> = fixtures::records_of(&self.catalog, cluster)
            .await
            .into_keys()
            .collect();
        ids.sort();
        ids
    }
}

/// keep_last 2, keep_verified 1: the first backup is proven; every later one fails its test
/// (its data object corrupted behind Sexton's back). The proven one outlives keep_last; once
/// a newer backup is proven, it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_proven_backup_outlives_the_rules_until_a_newer_one_is_proven() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(&config, Members::ALL);
    let w = world(&config, &nats).await;
    // The cron never fires during the test: backups are taken on demand, tests asked for.
    create_schedule(
        &w.client,
        json!({"name": "v", "cluster": "cv", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 2, "keep_verified": 1}}),
    )
    .await;
    let b1 = trigger_backup(&w.client, "v").await;
    wait_reported(&w.catalog, "cv", &b1).await;
    let asked = w.verify("cv", &b1).await;
    let request = asked["request_id"].as_str().unwrap().to_string();
    let (outcome, reason) = w.verdict("cv", &b1, &request).await;
    assert_eq!(outcome, "verified", "{reason}");
    let record = w.record("cv", &b1).await.unwrap();
    assert!(
        record.holds.is_empty(),
        "the hold is released: {:?}",
        record.holds
    );
    assert_eq!(
        record.verification.as_ref().unwrap().state,
        VerificationState::Verified
    );

    // Three more backups, each corrupted before its test: same size, other bytes.
    let mut corrupted = Vec::new();
    for _ in 0..3 {
        let id = trigger_backup(&w.client, "v").await;
        let record = wait_reported(&w.catalog, "cv", &id).await;
        assert_eq!(record.status, BackupStatus::Completed);
        let data = format!("backups/cv/v/{id}/backup.xbstream");
        let original = w.store.get(&data).await.unwrap().unwrap();
        w.store
            .put(&data, vec![b'#'; original.len()].into())
            .await
            .unwrap();
        let asked = w.verify("cv", &id).await;
        let request = asked["request_id"].as_str().unwrap().to_string();
        let (outcome, reason) = w.verdict("cv", &id, &request).await;
        assert_eq!(outcome, "failed");
        assert!(reason.contains(&data), "the reason names the key: {reason}");
        corrupted.push(id);
    }
    // keep_last 2 keeps the two newest; b1 stays, proven; the oldest corrupted one goes.
    let want: Vec<String> = {
        let mut ids = vec![b1.clone(), corrupted[1].clone(), corrupted[2].clone()];
        ids.sort();
        ids
    };
    eventually(
        "retention settles on b1 and the newest two",
        Duration::from_secs(60),
        || async { (w.ids("cv").await == want).then_some(()) },
    )
    .await;
    let preview = api(
        &w.client,
        "retention",
        "preview",
        json!({"schema_version": 1, "cluster": "cv"}),
    )
    .await
    .unwrap();
    let b1_reasons = preview[0]["decision"]["keep"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == b1.as_str())
        .map(|d| d["reasons"].clone())
        .unwrap();
    assert_eq!(
        b1_reasons,
        json!(["keep_verified 1", "floor: newest verified"]),
        "{preview:#}"
    );

    // A newer backup is proven: the old proof is no longer needed.
    let b5 = trigger_backup(&w.client, "v").await;
    wait_reported(&w.catalog, "cv", &b5).await;
    let asked = w.verify("cv", &b5).await;
    let (outcome, _) = w
        .verdict("cv", &b5, asked["request_id"].as_str().unwrap())
        .await;
    assert_eq!(outcome, "verified");
    eventually("b1 goes", Duration::from_secs(60), || async {
        (w.record("cv", &b1).await.is_none()).then_some(())
    })
    .await;
    let incidents = fixtures::incidents(&w.js).await;
    assert_eq!(
        incidents
            .iter()
            .filter(|i| i.kind == "verify-failed")
            .count(),
        3,
        "{incidents:#?}"
    );
    fleet.stop().await.unwrap();
}

/// Issue 54: a restore test that fails because an object is gone is evidence, not only a
/// verdict: the sweep it asks for scrubs the cluster, and the backup is `missing` (with its
/// incident) at once, not at the next hourly scrub.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_that_meets_an_object_gone_makes_the_backup_missing_at_once() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    // No scheduled scrub: only the failed test can find it.
    config.scheduler.scrub_interval = Duration::ZERO;
    let fleet = Fleet::start(&config, Members::ALL);
    let w = world(&config, &nats).await;
    create_schedule(
        &w.client,
        json!({"name": "v", "cluster": "cv", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 5}}),
    )
    .await;
    let id = trigger_backup(&w.client, "v").await;
    wait_reported(&w.catalog, "cv", &id).await;
    let data = format!("backups/cv/v/{id}/backup.xbstream");
    w.store
        .delete_batch(std::slice::from_ref(&data))
        .await
        .unwrap();
    let asked = w.verify("cv", &id).await;
    let request = asked["request_id"].as_str().unwrap().to_string();
    let (outcome, reason) = w.verdict("cv", &id, &request).await;
    assert_eq!(outcome, "failed", "{reason}");
    let record = eventually("the backup missing", Duration::from_secs(30), || async {
        let record = w.record("cv", &id).await?;
        (record.status == BackupStatus::Missing).then_some(record)
    })
    .await;
    assert!(
        record
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains(&data),
        "{record:?}"
    );
    eventually(
        "the backup-missing incident",
        Duration::from_secs(10),
        || async {
            fixtures::incidents(&w.js)
                .await
                .into_iter()
                .find(|i| i.kind == "backup-missing" && i.backup_id.as_deref() == Some(id.as_str()))
        },
    )
    .await;
    fleet.stop().await.unwrap();
}

/// A test of an incremental restores its chain, so its ancestors are proven with it; a backup
/// under test is held until its verdict, whatever the rules say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incrementals_test_proves_its_chain_and_holds_the_backup_until_answered() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    // No executor yet: the test waits, and its backup is held.
    let fleet = Fleet::start(
        &config,
        Members {
            executor: false,
            ..Members::ALL
        },
    );
    let w = world(&config, &nats).await;
    create_schedule(
        &w.client,
        json!({"name": "c", "cluster": "cc", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 1}}),
    )
    .await;
    let minutes = chrono::Duration::minutes;
    w.report_chain(
        "cc",
        &[
            ("f", None, 30),
            ("i1", Some("f"), 20),
            ("i2", Some("i1"), 10),
        ],
    )
    .await;
    let asked = w.verify("cc", "i2").await;
    let request = asked["request_id"].as_str().unwrap().to_string();
    let held = w.record("cc", "i2").await.unwrap();
    assert_eq!(held.holds, [format!("verify:{request}")]);
    // A newer full: keep_last 1 would let i2 (and its chain) go, but i2 is held.
    let completed = Utc::now();
    let mut newer = json!({
        "schema_version": 1, "backup_id": "f2", "cluster": "cc", "plan": "full",
        "schedule": "c", "backup_name": "c", "status": "completed", "kind": "full",
        "started_at": (completed - minutes(1)).to_rfc3339(), "completed_at": completed.to_rfc3339(),
        "artifacts": ["backups/cc/c/f2/backup.xbstream"],
    });
    fixtures::upload_genuine_json(&w.store, &mut newer).await;
    w.js.publish(
        "sexton.v1.report.cc",
        serde_json::to_vec(&newer).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    wait_reported(&w.catalog, "cc", "f2").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    fixtures::deleter_drained(&w.js, Duration::from_secs(30)).await;
    assert_eq!(
        w.ids("cc").await,
        ["f", "f2", "i1", "i2"],
        "the held chain stays"
    );

    // An executor comes and answers: the chain is proven, the hold released.
    let executor = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: false,
            deleter: false,
            executor: true,
        },
    );
    let (outcome, reason) = w.verdict("cc", "i2", &request).await;
    assert_eq!(outcome, "verified", "{reason}");
    assert!(reason.contains("3 backups"), "{reason}");
    // The ancestors are recorded right after the target.
    for id in ["f", "i1"] {
        let verification = eventually(&format!("{id} proven"), Duration::from_secs(10), || async {
            let verification = w.record("cc", id).await?.verification?;
            (verification.state == VerificationState::Verified).then_some(verification)
        })
        .await;
        assert_eq!(verification.via.as_ref().map(|v| v.as_str()), Some("i2"));
    }
    assert!(w.record("cc", "i2").await.unwrap().holds.is_empty());
    // Proven, i2 is the verified floor: it (and its chain) stays after the hold is gone.
    tokio::time::sleep(Duration::from_secs(2)).await;
    fixtures::deleter_drained(&w.js, Duration::from_secs(30)).await;
    assert_eq!(w.ids("cc").await, ["f", "f2", "i1", "i2"]);
    executor.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

/// A verdict's chain is the executor's claim: a backup the target does not build on, named in
/// it, is not proven by the target's restore (issue 26's review of what messages claim).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verdict_proves_only_the_chain_the_target_builds_on() {
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
    let w = world(&config, &nats).await;
    create_schedule(
        &w.client,
        json!({"name": "c", "cluster": "cq", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 5}}),
    )
    .await;
    w.report_chain(
        "cq",
        &[("other", None, 40), ("f", None, 30), ("i1", Some("f"), 20)],
    )
    .await;
    let asked = w.verify("cq", "i1").await;
    let request = asked["request_id"].as_str().unwrap().to_string();
    let target = w.record("cq", "i1").await.unwrap();
    // The answer to the real request, with a backup the target does not build on in its chain.
    let verdict = json!({
        "schema_version": 1, "request_id": request, "cluster": "cq", "backup_id": "i1",
        "uid": target.uid, "outcome": "verified", "reason": "read back", "duration_ms": 1,
        "chain": ["other", "f", "i1"],
    });
    w.js.publish(
        "sexton.v1.verify.verdict.cq",
        serde_json::to_vec(&verdict).unwrap().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let (outcome, _) = w.verdict("cq", "i1", &request).await;
    assert_eq!(outcome, "verified");
    let proven = eventually("f proven via i1", Duration::from_secs(10), || async {
        let verification = w.record("cq", "f").await?.verification?;
        (verification.state == VerificationState::Verified).then_some(verification)
    })
    .await;
    assert_eq!(proven.via.as_ref().map(|v| v.as_str()), Some("i1"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let other = w.record("cq", "other").await.unwrap();
    assert!(
        other
            .verification
            .as_ref()
            .is_none_or(|v| v.state != VerificationState::Verified),
        "a backup outside the chain was proven: {:?}",
        other.verification
    );
    fleet.stop().await.unwrap();
}

/// A schedule's `verify` block fires tests on its own cron: each tick once, the backup picked
/// by `pick`, the verdict recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_tests_its_backups_on_its_own_cron() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(&config, Members::ALL);
    let w = world(&config, &nats).await;
    create_schedule(
        &w.client,
        json!({"name": "s", "cluster": "cs", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 5},
               "verify": {"cron": "@every 1s", "pick": "each", "timeout": "5m"}}),
    )
    .await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let id = trigger_backup(&w.client, "s").await;
        wait_reported(&w.catalog, "cs", &id).await;
        ids.push(id);
    }
    for id in &ids {
        eventually(&format!("{id} proven"), Duration::from_secs(30), || async {
            let state = w.record("cs", id).await?.verification?.state;
            (state == VerificationState::Verified).then_some(())
        })
        .await;
    }
    // One verify-due event per request, each request a tick of the schedule.
    let events = read_stream(&w.js, topology::STREAM_VERIFY, "sexton.v1.verify.due.>").await;
    let mut requests: Vec<String> = events
        .iter()
        .map(|m| {
            let event: Value = serde_json::from_slice(&m.payload).unwrap();
            event["request_id"].as_str().unwrap().to_string()
        })
        .collect();
    let n = requests.len();
    requests.sort();
    requests.dedup();
    assert_eq!(requests.len(), n, "a request published twice: {requests:?}");
    assert!(requests.iter().all(|r| r.starts_with("s-")), "{requests:?}");
    let schedule = schedule_record(&w.js, "s").await.unwrap().0;
    assert!(schedule.status.last_verify_tick.is_some());
    fleet.stop().await.unwrap();
}

/// Issue 47: a schedule's drills (`pick: point`) draw an instant of what is restorable, and
/// the executor restores the backup a recovery to it reads and reads the log archive up to it;
/// the verdict is recorded on that backup with the instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_schedule_drills_to_instants_between_its_backups() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let fleet = Fleet::start(&config, Members::ALL);
    let w = world(&config, &nats).await;
    create_schedule(
        &w.client,
        json!({"name": "d", "cluster": "cd", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 5}}),
    )
    .await;
    // Three backups over a few seconds: the reference executor ships a segment with each,
    // so replays reach from one backup to the start of the next.
    for _ in 0..3 {
        let id = trigger_backup(&w.client, "d").await;
        wait_reported(&w.catalog, "cd", &id).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let updated = sexton_cli(
        &config,
        &[
            "schedule",
            "update",
            "d",
            "--verify-cron",
            "@every 1s",
            "--verify-pick",
            "point",
            "--verify-timeout",
            "5m",
        ],
    );
    assert!(
        updated.status.success(),
        "{}",
        String::from_utf8_lossy(&updated.stderr)
    );
    let drilled = eventually(
        "a drill verified with its instant",
        Duration::from_secs(60),
        || async {
            let records = fixtures::records_of(&w.catalog, "cd").await;
            records.values().find_map(|r| {
                let entry = r
                    .value
                    .verification
                    .as_ref()?
                    .history
                    .iter()
                    .find(|e| e.until.is_some() && e.via.is_none())?
                    .clone();
                Some((r.value.clone(), entry))
            })
        },
    )
    .await;
    let (base, entry) = drilled;
    assert_eq!(entry.outcome, "verified", "{entry:?}");
    let until = entry.until.unwrap();
    assert!(
        base.completed_at.unwrap().to_utc() < until,
        "{until} is after the base it restores"
    );
    assert!(
        entry
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("log segments up to")),
        "{entry:?}"
    );
    let events = read_stream(&w.js, topology::STREAM_VERIFY, "sexton.v1.verify.due.>").await;
    let event: Value = events
        .iter()
        .map(|m| serde_json::from_slice::<Value>(&m.payload).unwrap())
        .find(|e| e["request_id"] == entry.request_id.as_str())
        .expect("the drill's event");
    assert_eq!(
        event["replay"]["until"]
            .as_str()
            .map(|t| t.parse::<DateTime<Utc>>().unwrap()),
        Some(until),
        "{event}"
    );
    fleet.stop().await.unwrap();
}

/// Exactly once across scheduler replicas: three scheduler processes fire one schedule's tests
/// every second while a random replica is killed and restarted. Every tick is published once
/// (ticks strictly one or more seconds apart, one event per request), every event is answered
/// once, and no hold outlives its verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_test_tick_is_published_once_while_scheduler_replicas_are_killed() {
    let mut rng = Rng::from_env();
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let logs = tempfile::tempdir().unwrap();
    let mut replicas: Vec<ServiceProcess> = (0..3)
        .map(|_| ServiceProcess::start("sexton-scheduler", &[], &config, logs.path()))
        .collect();
    let executor = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: false,
            deleter: false,
            executor: true,
        },
    );
    let w = world(&config, &nats).await;
    create_schedule(
        &w.client,
        json!({"name": "x", "cluster": "cx", "plan": "full", "cron": "0 0 1 1 *",
               "policy": {"keep_last": 10}}),
    )
    .await;
    let now = Utc::now();
    for n in 0..3 {
        let completed = now - chrono::Duration::minutes(10 - n);
        let mut report = json!({
            "schema_version": 1, "backup_id": format!("x-{n}"), "cluster": "cx",
            "plan": "full", "schedule": "x", "backup_name": "x", "status": "completed",
            "kind": "full", "completed_at": completed.to_rfc3339(),
            "artifacts": [format!("backups/cx/x/x-{n}/backup.xbstream")],
        });
        fixtures::upload_genuine_json(&w.store, &mut report).await;
        w.js.publish(
            "sexton.v1.report.cx",
            serde_json::to_vec(&report).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
        wait_reported(&w.catalog, "cx", &format!("x-{n}")).await;
    }
    api(
        &w.client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "x",
               "verify": {"cron": "@every 1s", "pick": "random", "timeout": "5m"}}),
    )
    .await
    .unwrap();
    // 15 s of chaos: a random replica killed every 1 to 3 s, back 0.2 to 1.5 s later.
    let chaos = std::time::Instant::now();
    let mut kills = 0;
    while chaos.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(rng.millis(1_000, 3_000)).await;
        let replica = rng.below(3) as usize;
        replicas[replica].kill();
        kills += 1;
        tokio::time::sleep(rng.millis(200, 1_500)).await;
        replicas[replica].restart();
    }
    // Stop testing, then let every answer land.
    api(
        &w.client,
        "schedule",
        "update",
        json!({"schema_version": 1, "name": "x", "verify": null}),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    eventually(
        "every verdict recorded",
        Duration::from_secs(60),
        || async {
            let records = fixtures::records_of(&w.catalog, "cx").await;
            records
                .values()
                .all(|r| r.value.holds.is_empty())
                .then_some(())
        },
    )
    .await;

    let events = read_stream(&w.js, topology::STREAM_VERIFY, "sexton.v1.verify.due.>").await;
    let mut ticks = Vec::new();
    let mut targets = std::collections::BTreeMap::new();
    for message in &events {
        let event: sexton_model::wire::VerifyDue =
            serde_json::from_slice(&message.payload).unwrap();
        let tick = chrono::NaiveDateTime::parse_from_str(
            event.request_id.trim_start_matches("x-"),
            "%Y%m%d%H%M%S",
        )
        .unwrap();
        ticks.push(tick);
        targets.insert(event.request_id.clone(), event.backup_id.to_string());
    }
    assert!(ticks.len() >= 8, "too few tests: {}", ticks.len());
    let mut sorted = ticks.clone();
    sorted.sort();
    for pair in sorted.windows(2) {
        assert!(
            pair[1] - pair[0] >= chrono::Duration::seconds(1),
            "two tests for ticks {} and {}",
            pair[0],
            pair[1]
        );
    }
    // Each request answered once, on the backup the stored event named: every backup keeps its
    // last five verdicts, all of them verdicts of this test's requests, none a timeout.
    let records = fixtures::records_of(&w.catalog, "cx").await;
    let mut answered = 0;
    for (backup, record) in &records {
        let asked = targets.values().filter(|b| *b == backup).count();
        let history = record
            .value
            .verification
            .as_ref()
            .map(|v| v.history.clone())
            .unwrap_or_default();
        for entry in &history {
            assert_eq!(targets.get(&entry.request_id), Some(backup), "{entry:?}");
            assert_eq!(entry.outcome, "verified", "{entry:?}");
        }
        let mut requests: Vec<&str> = history.iter().map(|e| e.request_id.as_str()).collect();
        requests.sort();
        requests.dedup();
        assert_eq!(
            requests.len(),
            history.len(),
            "a request answered twice on {backup}"
        );
        assert_eq!(
            history.len(),
            asked.min(5),
            "{backup}: {asked} asked, {history:?}"
        );
        answered += history.len();
    }
    eprintln!(
        "verify ticks {} with {kills} replica kills; {answered} verdicts still in the histories",
        ticks.len()
    );
    executor.stop().await.unwrap();
}
