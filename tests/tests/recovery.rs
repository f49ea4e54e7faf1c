//! Issue 47, through the real fleet: every point a location keeps is restorable there, and
//! Sexton can show it. Two SeaweedFS servers as two regions, `dr` with Object Lock; the
//! primary keeps 2 backups, `dr` keeps 5. One world for three failures a user met:
//!
//! 1. A backup only `dr` still keeps (primary's retention deleted it there) is fetched,
//!    tested and described at `dr`. Before: "backup … is deleting: only a completed backup
//!    can be restored".
//! 2. An object at `dr` overwritten with the storage credential is tampering, not loss: the
//!    scrub reports it (with the location, an incident and an audit entry), the copy keeps
//!    counting, and a fetch from `dr` reads the recorded version. Before: the scrub marked the
//!    copy `missing` ("holds 8 bytes, … when copied") and fetch refused it for good.
//! 3. Every object of the cluster gone from primary's bucket: after the scrub finds them
//!    gone (`missing` at primary), each backup is still fetched from `dr`. Before: "backup … is
//!    missing: only a completed backup can be restored".

use std::time::Duration;

use async_nats::jetstream;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sexton_model::{
    copies::CopyState,
    names::LocationName,
    records::{BackupRecord, BackupStatus},
};
use sexton_retention::lock::{parse_lock_duration, LockTiers};
use sexton_shared::{catalog::Catalog, config::Config, topology};
use sexton_tests::*;

const DR_KEY: &str = "dr-only-key";
const DR_SECRET: &str = "dr-only-secret";
const IDS: [&str; 4] = ["f-b1", "f-b2", "f-b3", "f-b4"];

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

async fn record(catalog: &Catalog, id: &str) -> Option<BackupRecord> {
    fixtures::records_of(catalog, "c1")
        .await
        .get(id)
        .map(|r| r.value.clone())
}

/// `sexton backup fetch ID --cluster c1 [--location L] --to DIR -o json`, as a person runs it.
fn fetch(config: &Config, id: &str, location: Option<&str>, into: &std::path::Path) -> CliRun {
    let mut args = vec!["backup", "fetch", id, "--cluster", "c1"];
    if let Some(location) = location {
        args.extend(["--location", location]);
    }
    args.extend(["--to", into.to_str().unwrap(), "-o", "json"]);
    let output = sexton_cli(config, &args);
    CliRun {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).to_string(),
    }
}

/// Fetches `id` from dr and checks every file against the SHA-256 intake recorded.
fn fetched_whole_from_dr(config: &Config, record: &BackupRecord, into: &std::path::Path) {
    let run = fetch(config, record.id.as_str(), Some("dr"), into);
    run.expect(0, &format!("fetching {} from dr", record.id));
    for object in &record.objects {
        let name = object.key.rsplit('/').next().unwrap();
        let bytes = std::fs::read(into.join(record.id.as_str()).join(name)).unwrap();
        assert_eq!(
            Some(sexton_model::digest::sha256_hex(&bytes)),
            object.sha256,
            "{} fetched from dr is not the version intake recorded",
            object.key
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_point_a_location_keeps_is_restorable_there_whatever_primary_did() {
    let dir = tempfile::tempdir().unwrap();
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
            retention_worker: false,
            ..Members::ALL
        },
    );
    // The retention-worker on a metrics port of its own: its recovery gauges are read below.
    let metrics_port = free_port();
    let mut worker_config = config.clone();
    worker_config.http.listen = format!("127.0.0.1:{metrics_port}");
    let worker = Fleet::start(&worker_config, RETENTION_WORKER_ONLY);
    let (copier_stop, copier) = start_copier(&config);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "f", "cluster": "c1", "plan": "full", "cron": "@daily", "paused": true,
               "policy": {"keep_last": 2}, "objectives": {"rpo": "2h", "window": "90m"},
               "copies": [{"to": "dr", "policy": {"keep_last": 5},
                           "objectives": {"window": "5h", "tested_within": "1d"}}]}),
    )
    .await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());
    let source = object_store(&config).await;
    let dr_name = LocationName::new("dr").unwrap();

    // Four fulls an hour apart, each reported once its objects are up.
    let now = DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap();
    for (n, id) in IDS.iter().enumerate() {
        let mut body = report(id, now - chrono::Duration::hours(4 - n as i64));
        fixtures::upload_genuine_json(&source, &mut body).await;
        js.send_publish(
            "sexton.v1.report.c1".to_string(),
            jetstream::message::PublishMessage::build()
                .payload(serde_json::to_vec(&body).unwrap().into())
                .message_id(*id),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    // Each copied to dr and locked there; primary's retention then takes the two oldest at
    // primary (keep_last 2) while dr keeps them (keep_last 5).
    eventually(
        "every backup copied and locked at dr, the two oldest gone from primary",
        Duration::from_secs(120),
        || async {
            let records = fixtures::records_of(&catalog, "c1").await;
            let all_locked = IDS.iter().all(|id| {
                records.get(*id).is_some_and(|r| {
                    r.value
                        .copies
                        .get(&dr_name)
                        .is_some_and(|c| c.state == CopyState::Copied && c.locked_until.is_some())
                })
            });
            let gone = ["f-b1", "f-b2"]
                .iter()
                .all(|id| records.get(*id).is_some_and(|r| !r.value.held_at_primary()));
            (all_locked && gone).then_some(())
        },
    )
    .await;
    let b1 = record(&catalog, "f-b1").await.unwrap();
    assert_ne!(b1.status, BackupStatus::Completed, "{b1:?}");

    // 1. Only dr keeps f-b1: fetched, described and tested there; primary says where it is.
    fetched_whole_from_dr(&config, &b1, &dir.path().join("one"));
    let refused = fetch(&config, "f-b1", None, &dir.path().join("refused"));
    assert_ne!(
        refused.code, 0,
        "f-b1 fetched from primary, which deleted it"
    );
    assert!(
        refused
            .stderr
            .contains("f-b1 is no longer at primary; it is held at dr"),
        "{}",
        refused.stderr
    );
    let described = sexton_cli(
        &config,
        &[
            "backup",
            "describe",
            "f-b1",
            "--cluster",
            "c1",
            "-o",
            "json",
        ],
    );
    assert!(described.status.success());
    let described: Value = serde_json::from_slice(&described.stdout).unwrap();
    let places: Vec<(String, bool)> = described["restorable"]
        .as_array()
        .unwrap_or_else(|| panic!("no restorable places: {described}"))
        .iter()
        .map(|p| {
            (
                p["location"].as_str().unwrap().to_string(),
                p["restorable"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        places,
        [("primary".to_string(), false), ("dr".to_string(), true)]
    );
    let asked = api(
        &client,
        "backup",
        "verify",
        json!({"schema_version": 1, "cluster": "c1", "id": "f-b1", "location": "dr",
               "timeout": "1m"}),
    )
    .await
    .unwrap_or_else(|err| panic!("a restore test of f-b1 at dr refused: {err}"));
    assert!(asked["request_id"].is_string(), "{asked}");
    assert!(
        asked["recorded"].is_null(),
        "the test failed at once: {asked}"
    );

    // A drill to an instant (issue 47, item 7): at f-b2's own instant dr restores f-b2 as it
    // is; between two backups, with no log archive, nothing reaches, and the refusal says why.
    let b2_at = now - chrono::Duration::hours(3);
    let drill = |at: DateTime<Utc>, location: &'static str| {
        let client = client.clone();
        async move {
            api(
                &client,
                "backup",
                "drill",
                json!({"schema_version": 1, "cluster": "c1", "at": at, "location": location,
                       "timeout": "1m"}),
            )
            .await
        }
    };
    let drilled = drill(b2_at, "dr").await.expect("a drill at f-b2's instant");
    assert_eq!(drilled["backup_id"], "f-b2", "{drilled}");
    assert_eq!(drilled["chain"], json!(["f-b2"]), "{drilled}");
    assert!(drilled["replay"].is_null(), "{drilled}");
    let pending = record(&catalog, "f-b2")
        .await
        .unwrap()
        .verification
        .and_then(|v| v.pending)
        .expect("f-b2 under test");
    // At a backup's own instant nothing is replayed: the test is a restore test of it.
    assert_eq!(pending.until, None);
    assert_eq!(pending.location.as_ref(), Some(&dr_name));
    for (at, location, words) in [
        (
            b2_at + chrono::Duration::minutes(30),
            "dr",
            "falls in a gap from",
        ),
        (b2_at, "primary", "before the oldest restorable instant"),
        (now + chrono::Duration::hours(1), "dr", "is in the future"),
    ] {
        let err = drill(at, location).await.expect_err("refused").to_string();
        assert!(err.contains(words), "{at} at {location}: {err}");
    }
    let err = api(
        &client,
        "backup",
        "drill",
        json!({"schema_version": 1, "cluster": "c1", "at": "yesterday"}),
    )
    .await
    .expect_err("a malformed instant")
    .to_string();
    assert!(err.contains("at"), "{err}");

    // What each place can restore, as `sexton recovery window` shows it: primary the two it
    // keeps, dr all four; the objectives checked there (primary's rpo met; dr's 5h window
    // missed, its oldest backup being 4h old; no restore test passed there yet).
    let window = sexton_cli(
        &config,
        &["recovery", "window", "--cluster", "c1", "-o", "json"],
    );
    assert!(
        window.status.success(),
        "{}",
        String::from_utf8_lossy(&window.stderr)
    );
    let places: Vec<Value> = serde_json::from_slice(&window.stdout).unwrap();
    let points = |place: &Value| -> Vec<String> {
        place["recovery"]["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(places.len(), 2, "{places:?}");
    assert_eq!(places[0]["location"], "primary");
    assert_eq!(points(&places[0]), ["f-b3", "f-b4"]);
    assert_eq!(places[1]["location"], "dr");
    assert_eq!(points(&places[1]), IDS);
    let met = |place: &Value, objective: &str| -> bool {
        place["objectives"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["objective"] == objective)
            .unwrap_or_else(|| panic!("no {objective} checked: {place}"))["met"]
            .as_bool()
            .unwrap()
    };
    assert!(met(&places[0], "rpo"), "{}", places[0]);
    assert!(met(&places[0], "window"), "{}", places[0]);
    assert!(!met(&places[1], "window"), "{}", places[1]);
    assert!(!met(&places[1], "tested_within"), "{}", places[1]);
    let table = sexton_cli(&config, &["recovery", "window", "--cluster", "c1"]);
    let table = String::from_utf8_lossy(&table.stdout).to_string();
    assert!(table.contains("dr / full:"), "{table}");
    assert!(table.contains("objective window 5h: MISSED"), "{table}");
    // The preview says what primary can restore once its plan is carried out.
    let preview = sexton_cli(
        &config,
        &["retention", "preview", "--cluster", "c1", "-o", "json"],
    );
    assert!(preview.status.success());
    let preview: Vec<Value> = serde_json::from_slice(&preview.stdout).unwrap();
    assert_eq!(
        points(&preview[0]["recovery"]),
        ["f-b3", "f-b4"],
        "{preview:?}"
    );
    let preview = sexton_cli(&config, &["retention", "preview", "--cluster", "c1"]);
    let preview = String::from_utf8_lossy(&preview.stdout).to_string();
    assert!(
        preview.contains("c1/full at primary after this plan: restorable"),
        "{preview}"
    );
    // And `get schedule` adds the condition a health check reads.
    let got = sexton_cli(&config, &["get", "schedule", "f", "-o", "json"]);
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let got: Value = serde_json::from_slice(&got.stdout).unwrap();
    let recoverable = got["items"][0]["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Recoverable")
        .unwrap_or_else(|| panic!("no Recoverable condition: {got}"))
        .clone();
    assert_eq!(recoverable["status"], "False", "{recoverable}");
    assert_eq!(recoverable["reason"], "ObjectiveMissed", "{recoverable}");
    assert!(
        recoverable["message"]
            .as_str()
            .unwrap()
            .contains("window 5h at dr missed"),
        "{recoverable}"
    );
    // The retention-worker's runs say the same on /metrics.
    let gauge = |location: &str, objective: &str| {
        http_get(metrics_port, "/metrics").and_then(|(_, page)| {
            page.lines()
                .filter(|line| line.starts_with("sexton_recovery_objective_met{"))
                .find(|line| {
                    line.contains("cluster=\"c1\"")
                        && line.contains(&format!("location=\"{location}\""))
                        && line.contains(&format!("objective=\"{objective}\""))
                })
                .and_then(|line| line.rsplit(' ').next()?.parse::<i64>().ok())
        })
    };
    eventually("the objective gauges", Duration::from_secs(60), || async {
        (gauge("primary", "rpo") == Some(1) && gauge("dr", "window") == Some(0)).then_some(())
    })
    .await;

    // A policy change that narrows what primary keeps is refused without --yes, naming the
    // objective it breaks there and by how much; nothing changes.
    let narrowed = sexton_cli(&config, &["schedule", "update", "f", "--keep-last", "1"]);
    let stderr = String::from_utf8_lossy(&narrowed.stderr).to_string();
    assert!(!narrowed.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("breaks the recovery objective window 1h30m at primary: met now, missed by"),
        "{stderr}"
    );
    let b3 = record(&catalog, "f-b3").await.unwrap();
    assert!(
        b3.held_at_primary() && b3.status == BackupStatus::Completed,
        "{b3:?}"
    );

    // 2. f-b1's data at dr written over with the storage credential: tampering, not loss.
    let data = b1.copies[&dr_name]
        .objects
        .iter()
        .find(|o| o.key.ends_with("backup.xbstream"))
        .unwrap()
        .clone();
    dr.put(&data.key, bytes::Bytes::from_static(b"ransom!!"))
        .await
        .unwrap();
    let scrub = sexton_cli(
        &config,
        &["catalog", "scrub", "--cluster", "c1", "-o", "json"],
    );
    let stderr = String::from_utf8_lossy(&scrub.stderr).to_string();
    assert!(scrub.status.success(), "{stderr}");
    let scrub: Value = serde_json::from_slice(&scrub.stdout).unwrap();
    let tampered = scrub["tampered"].as_array().cloned().unwrap_or_default();
    assert_eq!(tampered.len(), 1, "{scrub}");
    assert_eq!(tampered[0]["id"], "f-b1", "{scrub}");
    assert_eq!(tampered[0]["location"], "dr", "{scrub}");
    assert!(
        scrub["copies"].as_array().is_none_or(|c| c.is_empty()),
        "a copy judged lost: {scrub}"
    );
    let b1 = record(&catalog, "f-b1").await.unwrap();
    assert_eq!(b1.copies[&dr_name].state, CopyState::Copied, "{b1:?}");
    fetched_whole_from_dr(&config, &b1, &dir.path().join("two"));
    let incidents = fixtures::incidents(&js).await;
    assert!(
        incidents
            .iter()
            .any(|i| i.kind == "copy-tampered" && i.backup_id.as_deref() == Some("f-b1")),
        "{incidents:?}"
    );
    let audit = sexton_cli(
        &config,
        &["audit", "--cluster", "c1", "--backup", "f-b1", "-o", "json"],
    );
    assert!(audit.status.success());
    let audit = String::from_utf8_lossy(&audit.stdout).to_string();
    assert!(audit.contains("tampering-found"), "{audit}");

    // 3. Every object of the cluster gone from primary: the scrub finds f-b3 and f-b4 missing
    //    there, and each is fetched from dr all the same.
    let keys: Vec<String> = fixtures::keys_under(&source, "backups/c1/")
        .await
        .into_iter()
        .collect();
    assert!(!keys.is_empty());
    let failures = source.delete_batch(&keys).await.unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    let scrub = sexton_cli(
        &config,
        &["catalog", "scrub", "--cluster", "c1", "-o", "json"],
    );
    assert!(scrub.status.success());
    for id in ["f-b3", "f-b4"] {
        let gone = record(&catalog, id).await.unwrap();
        assert_eq!(gone.status, BackupStatus::Missing, "{gone:?}");
        fetched_whole_from_dr(&config, &gone, &dir.path().join(id));
        let refused = fetch(&config, id, None, &dir.path().join("refused"));
        assert_ne!(refused.code, 0);
        assert!(
            refused.stderr.contains("is missing at primary"),
            "{}",
            refused.stderr
        );
    }

    // Bad input gets a clear error, and changes nothing.
    for (resource, verb, body, reason) in [
        (
            "recovery",
            "window",
            json!({"schema_version": 1}),
            "missing field",
        ),
        (
            "recovery",
            "window",
            json!({"schema_version": 1, "cluster": "../x"}),
            "invalid cluster name",
        ),
        (
            "recovery",
            "window",
            json!({"schema_version": 1, "cluster": "c1", "bogus": 1}),
            "unknown field",
        ),
        (
            "recovery",
            "window",
            json!({"schema_version": 1, "cluster": "c1", "location": "nowhere"}),
            "no such location nowhere; this fleet has primary, dr",
        ),
        (
            "schedule",
            "update",
            json!({"schema_version": 1, "name": "f", "objectives": {}}),
            "give at least one of rpo, window, tested_within",
        ),
        (
            "schedule",
            "update",
            json!({"schema_version": 1, "name": "f", "objectives": {"rpo": "soon"}}),
            "not a duration",
        ),
        (
            "schedule",
            "update",
            json!({"schema_version": 1, "name": "f", "objectives": {"rpo": "1h", "rto": "1h"}}),
            "unknown field",
        ),
    ] {
        let err = api(&client, resource, verb, body.clone())
            .await
            .expect_err("a malformed request answered");
        assert_eq!(err.code, sexton_shared::api::ErrorCode::Invalid, "{body}");
        assert!(err.message.contains(reason), "{body}: {}", err.message);
    }
    let typo = sexton_cli(&config, &["recovery", "window", "--cluster", "c2"]);
    let stderr = String::from_utf8_lossy(&typo.stderr).to_string();
    assert!(
        !typo.status.success(),
        "an unknown cluster answered: {stderr}"
    );
    assert!(
        stderr.contains("no schedule and no backup names it"),
        "{stderr}"
    );
    let refused = sexton_cli(
        &config,
        &[
            "schedule",
            "update",
            "f",
            "--objectives",
            r#"{"window": "1y"}"#,
        ],
    );
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid objectives"), "{stderr}");
    let (kept, _) = schedule_record(&js, "f").await.expect("schedule f");
    assert_eq!(
        serde_json::to_value(&kept.objectives).unwrap(),
        json!({"rpo": "2h", "window": "1h30m"}),
    );

    copier_stop.trigger();
    copier.await.unwrap().unwrap();
    worker.stop().await.unwrap();
    fleet.stop().await.unwrap();
}
