//! Per-volume chains end to end (issue 8, seed 001) on real NATS and SeaweedFS: the scheduler
//! says, per volume, full or incremental and the parent to build on; the reference executor
//! takes what it is asked (or a full when its snapshot was "lost", or fails a volume's upload,
//! as annotations on the schedule tell it); the catalog records what was taken.

use std::{collections::BTreeSet, time::Duration};

use serde_json::{json, Value};
use sexton_model::{
    names::ClusterName,
    records::{BackupKind, BackupRecord, BackupStatus},
    wire::DueBackup,
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{
    fixtures::{self, keys_under},
    setup::{Setup, World},
    *,
};

const FAIL: &str = "sexton.io/executor-fail-volumes";
const LOST: &str = "sexton.io/executor-full-volumes";

struct Run {
    client: async_nats::Client,
    js: async_nats::jetstream::Context,
    catalog: Catalog,
}

impl Run {
    /// Triggers a backup of `schedule` (in a second of its own: ids carry the second) and
    /// waits until its report is recorded. Returns what the due-backup event asked for and
    /// the record.
    async fn take(&self, schedule: &str) -> (DueBackup, BackupRecord) {
        let id = trigger_backup(&self.client, schedule).await;
        let record = wait_reported(&self.catalog, "c1", &id).await;
        let due = read_stream(&self.js, topology::STREAM_DUE, "sexton.v1.due.>")
            .await
            .iter()
            .map(|m| sexton_model::wire::decode::<DueBackup>(&m.payload).unwrap())
            .find(|due| due.backup_id.as_str() == id)
            .expect("the due-backup event of a triggered backup");
        (due, record)
    }

    async fn update(&self, body: Value) {
        let mut body = body;
        body["schema_version"] = json!(1);
        body["name"] = json!("app");
        api(&self.client, "schedule", "update", body).await.unwrap();
    }
}

/// `(volume, kind, parent step, reason)` as the due event asked, with steps numbered from 1.
type Asked<'a> = (&'a str, &'a str, Option<usize>, &'a str);

fn kind_word(kind: BackupKind) -> &'static str {
    match kind {
        BackupKind::Full => "F",
        BackupKind::Incremental => "I",
    }
}

fn check_asked(step: usize, due: &DueBackup, ids: &[String], expected: &[Asked<'_>]) {
    let got: Vec<(String, &str, Option<String>, String)> = due
        .volumes
        .iter()
        .map(|v| {
            (
                v.name.clone(),
                kind_word(v.kind),
                v.parent.as_ref().map(|p| p.to_string()),
                v.reason.clone().unwrap_or_default(),
            )
        })
        .collect();
    let want: Vec<(String, &str, Option<String>, String)> = expected
        .iter()
        .map(|(name, kind, parent, reason)| {
            (
                name.to_string(),
                *kind,
                parent.map(|p| ids[p - 1].clone()),
                reason.to_string(),
            )
        })
        .collect();
    assert_eq!(
        got, want,
        "step {step}: what the due-backup event asked for"
    );
}

/// What the catalog recorded per volume: `(volume, kind, parent step)`.
fn check_taken(
    step: usize,
    record: &BackupRecord,
    ids: &[String],
    expected: &[(&str, &str, Option<usize>)],
) {
    let got: Vec<(String, &str, Option<String>)> = record
        .volumes
        .iter()
        .map(|v| (v.name.clone(), kind_word(v.kind), v.parent.clone()))
        .collect();
    let want: Vec<(String, &str, Option<String>)> = expected
        .iter()
        .map(|(name, kind, parent)| (name.to_string(), *kind, parent.map(|p| ids[p - 1].clone())))
        .collect();
    assert_eq!(got, want, "step {step}: what the catalog recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_every_cadence_per_volume_across_failures_and_lost_snapshots() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    // No retention: this test is about what is taken, not what is kept.
    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: true,
            executor: true,
            retention_worker: false,
            deleter: false,
        },
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let created = create_schedule(
        &client,
        json!({"name": "app", "cluster": "c1", "plan": "vols", "cron": "@daily",
               "paused": true, "full_every": 3, "volumes": ["pv1", "pv2"],
               "policy": {"keep_last": 50}}),
    )
    .await;
    assert_eq!(created["schedule"]["full_every"], json!(3));
    let run = Run {
        client: client.clone(),
        catalog: Catalog::new(js.get_key_value(topology::BUCKET_CATALOG).await.unwrap()),
        js: js.clone(),
    };
    // 1: the first backup is full, every volume.
    let mut all: Vec<(DueBackup, BackupRecord)> = vec![run.take("app").await];
    // 2, 3: incrementals on the previous backup.
    for _ in 0..2 {
        all.push(run.take("app").await);
    }
    // 4: the chains are 3 long: full again.
    all.push(run.take("app").await);
    // 5: pv2's upload fails; the backup fails.
    run.update(json!({"annotations": {FAIL: "pv2"}})).await;
    all.push(run.take("app").await);
    // 6: a third volume is attached; the failure is over.
    run.update(json!({"annotations": {}, "volumes": ["pv1", "pv2", "pv3"]}))
        .await;
    all.push(run.take("app").await);
    // 7: pv1's snapshot is lost: the executor takes a full where an incremental was asked.
    run.update(json!({"annotations": {LOST: "pv1"}})).await;
    all.push(run.take("app").await);
    // 8, 9: back to normal.
    run.update(json!({"annotations": {}})).await;
    for _ in 0..2 {
        all.push(run.take("app").await);
    }

    let asked: Vec<Vec<Asked>> = vec![
        vec![
            ("pv1", "F", None, "no_artifact"),
            ("pv2", "F", None, "no_artifact"),
        ],
        vec![
            ("pv1", "I", Some(1), "chain_continues"),
            ("pv2", "I", Some(1), "chain_continues"),
        ],
        vec![
            ("pv1", "I", Some(2), "chain_continues"),
            ("pv2", "I", Some(2), "chain_continues"),
        ],
        vec![
            ("pv1", "F", None, "full_every"),
            ("pv2", "F", None, "full_every"),
        ],
        vec![
            ("pv1", "I", Some(4), "chain_continues"),
            ("pv2", "I", Some(4), "chain_continues"),
        ],
        // The failed backup joins no chain: pv1 builds on 4; pv2's own upload failed: full.
        vec![
            ("pv1", "I", Some(4), "chain_continues"),
            ("pv2", "F", None, "last_attempt_failed"),
            ("pv3", "F", None, "no_artifact"),
        ],
        vec![
            ("pv1", "I", Some(6), "chain_continues"),
            ("pv2", "I", Some(6), "chain_continues"),
            ("pv3", "I", Some(6), "chain_continues"),
        ],
        // pv1 was taken full at 7, so its chain restarts there.
        vec![
            ("pv1", "I", Some(7), "chain_continues"),
            ("pv2", "I", Some(7), "chain_continues"),
            ("pv3", "I", Some(7), "chain_continues"),
        ],
        vec![
            ("pv1", "I", Some(8), "chain_continues"),
            ("pv2", "F", None, "full_every"),
            ("pv3", "F", None, "full_every"),
        ],
    ];
    let taken: Vec<Vec<(&str, &str, Option<usize>)>> = vec![
        vec![("pv1", "F", None), ("pv2", "F", None)],
        vec![("pv1", "I", Some(1)), ("pv2", "I", Some(1))],
        vec![("pv1", "I", Some(2)), ("pv2", "I", Some(2))],
        vec![("pv1", "F", None), ("pv2", "F", None)],
        vec![("pv1", "I", Some(4)), ("pv2", "I", Some(4))],
        vec![
            ("pv1", "I", Some(4)),
            ("pv2", "F", None),
            ("pv3", "F", None),
        ],
        vec![
            ("pv1", "F", None),
            ("pv2", "I", Some(6)),
            ("pv3", "I", Some(6)),
        ],
        vec![
            ("pv1", "I", Some(7)),
            ("pv2", "I", Some(7)),
            ("pv3", "I", Some(7)),
        ],
        vec![
            ("pv1", "I", Some(8)),
            ("pv2", "F", None),
            ("pv3", "F", None),
        ],
    ];
    let ids: Vec<String> = all
        .iter()
        .map(|(due, _)| due.backup_id.to_string())
        .collect();
    for (index, ((due, record), (asked, taken))) in
        all.iter().zip(asked.iter().zip(&taken)).enumerate()
    {
        let step = index + 1;
        check_asked(step, due, &ids, asked);
        check_taken(step, record, &ids, taken);
        let expected_status = if step == 5 {
            BackupStatus::Failed
        } else {
            BackupStatus::Completed
        };
        assert_eq!(record.status, expected_status, "step {step}");
    }
    // The failed backup says which volume failed; the next backup of pv2 was the full above.
    let failed = &all[4].1;
    assert_eq!(
        failed
            .volumes
            .iter()
            .map(|v| (v.name.as_str(), v.failed))
            .collect::<Vec<_>>(),
        [("pv1", false), ("pv2", true)]
    );
    // A backup is full when every volume is; otherwise incremental.
    let kinds: Vec<&str> = all.iter().map(|(_, r)| kind_word(r.kind)).collect();
    assert_eq!(kinds, ["F", "I", "I", "F", "I", "I", "I", "I", "I"]);

    // The objects: one image per volume taken (none for pv2's failed upload), and metadata.
    let store = object_store(&config).await;
    let keys = keys_under(&store, "backups/c1/app/").await;
    let mut expected = BTreeSet::new();
    for (index, (due, record)) in all.iter().enumerate() {
        expected.insert(format!("backups/c1/app/{}/metadata.json", due.backup_id));
        for volume in &record.volumes {
            if !(index == 4 && volume.name == "pv2") {
                expected.insert(format!(
                    "backups/c1/app/{}/vol-{}.img",
                    due.backup_id, volume.name
                ));
            }
        }
        let mut listed: Vec<&String> = record.artifacts.iter().collect();
        listed.sort();
        assert!(
            record
                .volumes
                .iter()
                .flat_map(|v| &v.keys)
                .all(|key| record.artifacts.contains(key)),
            "a record's artifacts include its volumes' keys: {listed:?}"
        );
    }
    assert_eq!(keys, expected);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_without_volumes_follows_full_every_too() {
    let nats = Nats::start();
    let s3 = S3::start();
    let mut config = config(&nats, &s3);
    // Only the scheduler serves metrics in this fleet.
    let metrics_port = free_port();
    config.http.listen = format!("127.0.0.1:{metrics_port}");
    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: true,
            executor: true,
            retention_worker: false,
            deleter: false,
        },
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    create_schedule(
        &client,
        json!({"name": "app", "cluster": "c1", "plan": "db", "cron": "@daily",
               "paused": true, "full_every": "2"}),
    )
    .await;
    let run = Run {
        client: client.clone(),
        catalog: Catalog::new(js.get_key_value(topology::BUCKET_CATALOG).await.unwrap()),
        js: js.clone(),
    };
    let mut got = Vec::new();
    let (d1, r1) = run.take("app").await;
    got.push((
        kind_word(d1.kind),
        d1.parent.clone(),
        d1.kind_reason.clone(),
        r1.status,
    ));
    let (d2, r2) = run.take("app").await;
    got.push((
        kind_word(d2.kind),
        d2.parent.clone(),
        d2.kind_reason.clone(),
        r2.status,
    ));
    run.update(json!({"annotations": {FAIL: "*"}})).await;
    let (d3, r3) = run.take("app").await;
    got.push((
        kind_word(d3.kind),
        d3.parent.clone(),
        d3.kind_reason.clone(),
        r3.status,
    ));
    run.update(json!({"annotations": {}})).await;
    let (d4, r4) = run.take("app").await;
    got.push((
        kind_word(d4.kind),
        d4.parent.clone(),
        d4.kind_reason.clone(),
        r4.status,
    ));
    let (d5, r5) = run.take("app").await;
    got.push((
        kind_word(d5.kind),
        d5.parent.clone(),
        d5.kind_reason.clone(),
        r5.status,
    ));
    let reason = |r: &str| Some(r.to_string());
    assert_eq!(
        got,
        vec![
            ("F", None, reason("no_artifact"), BackupStatus::Completed),
            (
                "I",
                Some(d1.backup_id.clone()),
                reason("chain_continues"),
                BackupStatus::Completed
            ),
            ("F", None, reason("full_every"), BackupStatus::Failed),
            // The last attempt failed: a full, whatever the count says.
            (
                "F",
                None,
                reason("last_attempt_failed"),
                BackupStatus::Completed
            ),
            (
                "I",
                Some(d4.backup_id.clone()),
                reason("chain_continues"),
                BackupStatus::Completed
            ),
        ]
    );
    assert_eq!(r2.parent, Some(d1.backup_id.clone()));
    assert_eq!(r5.kind, BackupKind::Incremental);
    // `full_every: null` turns the cadence off again: fulls only (no volumes); updates that
    // leave it out (the label updates above) kept it.
    run.update(json!({"full_every": null})).await;
    let (schedule, _) = schedule_record(&js, "app").await.unwrap();
    assert_eq!(schedule.full_every, None);
    let (d6, r6) = run.take("app").await;
    assert_eq!((d6.kind, d6.parent.clone()), (BackupKind::Full, None));
    assert_eq!(
        (r6.kind, r6.status),
        (BackupKind::Full, BackupStatus::Completed)
    );
    // The scheduler counts what it asked for, by kind and reason.
    let (_, page) = http_get(metrics_port, "/metrics").unwrap();
    for (kind, reason, n) in [
        ("full", "no_artifact", 1),
        ("incremental", "chain_continues", 2),
        ("full", "full_every", 1),
        ("full", "last_attempt_failed", 1),
    ] {
        let line =
            format!("sexton_due_artifact_kinds_total{{kind=\"{kind}\",reason=\"{reason}\"}} {n}");
        assert!(page.contains(&line), "{line} in\n{page}");
    }
    fleet.stop().await.unwrap();
}

/// `full_every` and `volumes` are checked before anything is written: each bad value gets an
/// `invalid` error naming the field, and no schedule exists afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cadence_settings_are_refused_and_nothing_is_written() {
    // A valid schedule first, so the api is up and updates have something to refuse.
    let world = Setup::new(SCHEDULER_ONLY)
        .without_s3()
        .schedule(
            json!({"name": "ok", "cluster": "c1", "plan": "p", "cron": "@daily", "paused": true}),
        )
        .start()
        .await;
    let World {
        fleet, client, js, ..
    } = world;
    let (_, revision_before) = schedule_record(&js, "ok").await.unwrap();
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"full_every": 0}),
            "full_every: expected a positive whole number",
        ),
        (
            json!({"full_every": -1}),
            "full_every: expected a positive whole number",
        ),
        (
            json!({"full_every": "three"}),
            "full_every: expected a positive whole number",
        ),
        (
            json!({"full_every": "0"}),
            "full_every: expected a positive whole number",
        ),
        (
            json!({"full_every": 1.5}),
            "full_every: expected a positive whole number",
        ),
        (
            json!({"full_every": 4294967296u64}),
            "full_every: expected a positive whole number",
        ),
        (
            json!({"volumes": ["pv1", "pv1"]}),
            "volume \"pv1\" is listed twice",
        ),
        (json!({"volumes": ["../pv"]}), "invalid volume name"),
        (json!({"volumes": [""]}), "invalid volume name"),
        (json!({"volumes": "pv1"}), "invalid type"),
    ];
    for (index, (extra, needle)) in cases.iter().enumerate() {
        let name = format!("bad-{index}");
        let mut body = json!({"schema_version": 1, "name": name, "cluster": "c1",
                              "plan": "p", "cron": "@daily", "policy": {"keep_last": 3}});
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        let err = api(&client, "schedule", "create", body).await.unwrap_err();
        assert_eq!(err.code, sexton_shared::api::ErrorCode::Invalid, "{extra}");
        assert!(err.message.contains(needle), "{extra}: {}", err.message);
        assert!(schedule_record(&js, &name).await.is_none(), "{extra}");
        let mut update = json!({"schema_version": 1, "name": "ok"});
        for (key, value) in extra.as_object().unwrap() {
            update[key] = value.clone();
        }
        let err = api(&client, "schedule", "update", update)
            .await
            .unwrap_err();
        assert_eq!(err.code, sexton_shared::api::ErrorCode::Invalid, "{extra}");
        assert!(
            err.message.contains(needle),
            "update {extra}: {}",
            err.message
        );
    }
    let (_, revision_after) = schedule_record(&js, "ok").await.unwrap();
    assert_eq!(
        revision_before, revision_after,
        "a refused update writes nothing"
    );
    fleet.stop().await.unwrap();
}

/// Seed 001's scenario at volume level, end to end: three volumes attached at different times,
/// `full_every: 2`, keep 3. After the fifth backup the oldest is deleted whole, and the second
/// loses only the volume nothing needs: its pv2 full stays (needed by the third backup's pv2
/// incremental), with its record and `metadata.json`. Exactly those objects remain in S3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_001_three_volumes_keep_3_deletes_only_what_nothing_needs() {
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "app", "cluster": "c1", "plan": "vols", "cron": "@daily",
                   "paused": true, "full_every": 2, "volumes": ["pv1"],
                   "policy": {"keep_last": 3}}),
        )
        .start()
        .await;
    let World {
        config,
        fleet,
        client,
        js,
        ..
    } = world;
    let run = Run {
        client: client.clone(),
        catalog: Catalog::new(js.get_key_value(topology::BUCKET_CATALOG).await.unwrap()),
        js: js.clone(),
    };
    let mut ids = Vec::new();
    ids.push(run.take("app").await.0.backup_id.to_string());
    run.update(json!({"volumes": ["pv1", "pv2"]})).await;
    ids.push(run.take("app").await.0.backup_id.to_string());
    run.update(json!({"volumes": ["pv1", "pv2", "pv3"]})).await;
    for _ in 0..3 {
        ids.push(run.take("app").await.0.backup_id.to_string());
    }
    // pv1: F I F I F; pv2 (from 2): F I F I; pv3 (from 3): F I F.
    let cluster = ClusterName::new("c1").unwrap();
    let volumes_of = |record: &BackupRecord| -> Vec<(String, &'static str, Option<String>)> {
        record
            .volumes
            .iter()
            .map(|v| (v.name.clone(), kind_word(v.kind), v.parent.clone()))
            .collect()
    };
    let records = eventually(
        "backup 1 deleted and backup 2 down to pv2",
        Duration::from_secs(60),
        || {
            let (catalog, cluster, ids) = (run.catalog.clone(), cluster.clone(), ids.clone());
            async move {
                let records = catalog.list_cluster(&cluster).await.ok()?;
                let by_id: std::collections::BTreeMap<String, BackupRecord> = records
                    .into_iter()
                    .map(|r| (r.value.id.to_string(), r.value))
                    .collect();
                let second = by_id.get(&ids[1])?;
                (!by_id.contains_key(&ids[0])
                    && second.volumes.len() == 1
                    && second.volume_deletion.is_none())
                .then_some(by_id)
            }
        },
    )
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let second = &records[&ids[1]];
    assert_eq!(second.status, BackupStatus::Completed);
    assert_eq!(volumes_of(second), [("pv2".to_string(), "F", None)]);
    assert_eq!(
        second.artifacts.iter().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            format!("backups/c1/app/{}/vol-pv2.img", ids[1]),
            format!("backups/c1/app/{}/metadata.json", ids[1]),
        ]),
        "the record lists exactly the objects that remain"
    );
    for id in &ids[2..] {
        assert_eq!(records[id].volumes.len(), 3, "{id} keeps all its volumes");
    }
    assert_eq!(records.len(), 4);

    let store = object_store(&config).await;
    // Its size lost what pv1 held: it is what remains.
    let mut remaining_bytes = 0;
    for key in &second.artifacts {
        remaining_bytes += store.get(key).await.unwrap().unwrap().len() as u64;
    }
    assert_eq!(second.size_bytes, Some(remaining_bytes), "{second:?}");
    let keys = keys_under(&store, "backups/c1/app/").await;
    let mut expected = BTreeSet::new();
    expected.insert(format!("backups/c1/app/{}/vol-pv2.img", ids[1]));
    expected.insert(format!("backups/c1/app/{}/metadata.json", ids[1]));
    for id in &ids[2..] {
        expected.insert(format!("backups/c1/app/{id}/metadata.json"));
        for volume in ["pv1", "pv2", "pv3"] {
            expected.insert(format!("backups/c1/app/{id}/vol-{volume}.img"));
        }
    }
    assert_eq!(keys, expected);

    // `backup describe` says which volume remains and why.
    let described = api(
        &client,
        "backup",
        "describe",
        json!({"schema_version": 1, "cluster": "c1", "id": ids[1]}),
    )
    .await
    .unwrap();
    assert_eq!(
        described["retention"]["verdict"],
        json!("keep"),
        "{described}"
    );
    let volumes = described["volumes"].as_array().unwrap();
    assert_eq!(volumes.len(), 1, "{described}");
    assert_eq!(volumes[0]["name"], json!("pv2"));
    assert_eq!(volumes[0]["state"], json!("kept"));
    let why = volumes[0]["reasons"].to_string();
    assert!(why.contains(&format!("needed by {}", ids[2])), "{why}");

    // The BackupRetention event said so too: d1 deleted, d2 partial.
    let events: Vec<Value> =
        read_stream(&js, topology::STREAM_EVENTS, "sexton.v1.event.retention.>")
            .await
            .iter()
            .map(|m| serde_json::from_slice(&m.payload).unwrap())
            .collect();
    let partial = events
        .iter()
        .flat_map(|e| e["partial"].as_array().cloned().unwrap_or_default())
        .find(|p| p["id"] == json!(ids[1]))
        .unwrap_or_else(|| panic!("no partial decision on {} in {events:#?}", ids[1]));
    assert_eq!(partial["volumes_delete"], json!(["pv1"]));
    assert_eq!(partial["volumes_keep"][0]["id"], json!("pv2"));
    assert!(
        partial["volumes_keep"][0]["reasons"]
            .to_string()
            .contains(&format!("needed by {}", ids[2])),
        "{partial}"
    );
    assert!(events.iter().any(|e| e["delete"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["id"] == json!(ids[0]))));
    fleet.stop().await.unwrap();
}

/// Seed 001's errored backup, end to end: pv2's upload fails in the second backup. That backup
/// joins no chain (the third builds pv1 on the first and takes pv2 full), its partial objects
/// are cleaned up once past `failed_grace`, and the first backup then loses only pv2, which
/// nothing needs any more; its pv1 stays for the third backup's incremental.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_volume_joins_no_chain_and_its_objects_are_cleaned_up() {
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "app", "cluster": "c1", "plan": "vols", "cron": "@daily",
                   "paused": true, "volumes": ["pv1", "pv2"],
                   "policy": {"keep_last": 2, "failed_grace": "1s"}}),
        )
        .start()
        .await;
    let World {
        config,
        fleet,
        client,
        js,
        ..
    } = world;
    let run = Run {
        client: client.clone(),
        catalog: Catalog::new(js.get_key_value(topology::BUCKET_CATALOG).await.unwrap()),
        js: js.clone(),
    };
    let b1 = run.take("app").await.0.backup_id.to_string();
    run.update(json!({"annotations": {FAIL: "pv2"}})).await;
    let (_, failed) = run.take("app").await;
    let b2 = failed.id.to_string();
    assert_eq!(failed.status, BackupStatus::Failed);
    run.update(json!({"annotations": {}})).await;
    let (due3, _) = run.take("app").await;
    let b3 = due3.backup_id.to_string();
    let parents: Vec<(String, Option<String>)> = due3
        .volumes
        .iter()
        .map(|v| (v.name.clone(), v.parent.as_ref().map(|p| p.to_string())))
        .collect();
    assert_eq!(
        parents,
        [
            ("pv1".to_string(), Some(b1.clone())),
            ("pv2".to_string(), None)
        ],
        "the failed backup is passed over"
    );
    let b4 = run.take("app").await.0.backup_id.to_string();

    let cluster = ClusterName::new("c1").unwrap();
    eventually(
        "the failed backup gone and the first down to pv1",
        Duration::from_secs(60),
        || {
            let (catalog, cluster, b1, b2) =
                (run.catalog.clone(), cluster.clone(), b1.clone(), b2.clone());
            async move {
                let records = catalog.list_cluster(&cluster).await.ok()?;
                let first = records.iter().find(|r| r.value.id.as_str() == b1)?;
                let names: Vec<&str> = first
                    .value
                    .volumes
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect();
                (names == ["pv1"]
                    && first.value.volume_deletion.is_none()
                    && !records.iter().any(|r| r.value.id.as_str() == b2))
                .then_some(())
            }
        },
    )
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let store = object_store(&config).await;
    let mut expected = BTreeSet::from([
        format!("backups/c1/app/{b1}/vol-pv1.img"),
        format!("backups/c1/app/{b1}/metadata.json"),
    ]);
    for id in [&b3, &b4] {
        for name in ["vol-pv1.img", "vol-pv2.img", "metadata.json"] {
            expected.insert(format!("backups/c1/app/{id}/{name}"));
        }
    }
    assert_eq!(keys_under(&store, "backups/c1/app/").await, expected);
    fleet.stop().await.unwrap();
}

/// A volume marked `expiring` by an earlier run that the plan now keeps (here: a backup was
/// added that builds on it) loses its mark at the next retention run, and nothing is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_volume_mark_is_taken_off_when_the_plan_keeps_the_volume() {
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "app", "cluster": "c1", "plan": "vols", "cron": "@daily",
                   "paused": true, "volumes": ["pv1"], "policy": {"keep_last": 1}}),
        )
        .start()
        .await;
    let World {
        config, fleet, js, ..
    } = world;
    let topology = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
    let store = object_store(&config).await;
    let key = |id: &str| format!("backups/c1/vols/{id}/vol-pv1.img");
    let mut d1 = fixtures::backup("c1", "vols", "d1", None, 1, 0);
    d1.volumes = vec![sexton_retention::VolumeArtifact {
        expiring: true,
        ..sexton_retention::VolumeArtifact::full("pv1", vec![key("d1")])
    }];
    d1.artifacts.push(key("d1"));
    let mut d2 = fixtures::backup("c1", "vols", "d2", None, 2, 0);
    d2.volumes = vec![sexton_retention::VolumeArtifact::incremental(
        "pv1",
        "d1",
        vec![key("d2")],
    )];
    d2.artifacts.push(key("d2"));
    fixtures::put_backups(&catalog, &store, &[d1, d2]).await;
    let objects = keys_under(&store, "backups/c1/").await;
    let sweep = sexton_model::wire::RetentionSweep {
        schema_version: 1,
        cluster: "c1".parse().unwrap(),
        requested_at: chrono::Utc::now(),
        scrub: false,
    };
    js.publish(
        sexton_shared::channels::SWEEPS.subject(&"c1".parse().unwrap()),
        sexton_model::wire::encode(&sweep),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let cluster = ClusterName::new("c1").unwrap();
    eventually("the mark taken off", Duration::from_secs(30), || {
        let (catalog, cluster) = (catalog.clone(), cluster.clone());
        async move {
            let d1 = catalog
                .get(&cluster, &"d1".parse().unwrap())
                .await
                .ok()??
                .value;
            (!d1.volumes[0].expiring).then_some(())
        }
    })
    .await;
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    assert_eq!(keys_under(&store, "backups/c1/").await, objects);
    fleet.stop().await.unwrap();
}

/// A deleter that died after claiming a partial deletion (and deleting part of it) leaves the
/// claim on the record; the redelivered job resumes and finishes: the claimed volume's objects
/// go, the record stays with its other volume, and the claim is cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_partial_deletion_is_resumed_by_the_redelivered_job() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topology.catalog.clone());
    let store = object_store(&config).await;
    fixtures::put_schedule(&topology, "app", "c1", "vols", json!({"keep_last": 1})).await;
    let key =
        |id: &str, volume: &str, n: usize| format!("backups/c1/vols/{id}/vol-{volume}-{n}.img");
    // d1: pv1 (nothing needs it) and pv2 (d2's pv2 builds on it). d2: pv1 full, pv2 on d1.
    let mut d1 = fixtures::backup("c1", "vols", "d1", None, 1, 0);
    d1.volumes = vec![
        sexton_retention::VolumeArtifact {
            expiring: true,
            ..sexton_retention::VolumeArtifact::full(
                "pv1",
                vec![key("d1", "pv1", 0), key("d1", "pv1", 1)],
            )
        },
        sexton_retention::VolumeArtifact::full("pv2", vec![key("d1", "pv2", 0)]),
    ];
    d1.artifacts.extend(
        d1.volumes
            .iter()
            .flat_map(|v| v.keys.clone())
            .collect::<Vec<_>>(),
    );
    let mut d2 = fixtures::backup("c1", "vols", "d2", None, 2, 0);
    d2.volumes = vec![
        sexton_retention::VolumeArtifact::full("pv1", vec![key("d2", "pv1", 0)]),
        sexton_retention::VolumeArtifact::incremental("pv2", "d1", vec![key("d2", "pv2", 0)]),
    ];
    d2.artifacts.extend(
        d2.volumes
            .iter()
            .flat_map(|v| v.keys.clone())
            .collect::<Vec<_>>(),
    );
    fixtures::put_backups(&catalog, &store, &[d1, d2]).await;
    // The job as the retention-worker published it, and the claim a deleter wrote before it
    // died, having deleted one of pv1's two objects.
    let cluster = ClusterName::new("c1").unwrap();
    let marked = catalog
        .get(&cluster, &"d1".parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let job = sexton_model::wire::DeleteJob {
        schema_version: 1,
        cluster: cluster.clone(),
        backup_id: "d1".parse().unwrap(),
        uid: marked.value.uid.clone(),
        revision: marked.revision,
        reasons: vec!["no rule keeps it".into()],
        volumes: vec!["pv1".into()],
    };
    let mut claimed = marked.value.clone();
    claimed.volume_deletion = Some(sexton_model::records::VolumeDeletion {
        revision: marked.revision,
        volumes: vec!["pv1".into()],
    });
    catalog.update(&claimed, marked.revision).await.unwrap();
    let failures = store.delete_batch(&[key("d1", "pv1", 0)]).await.unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    fixtures::publish_job(&js, &job, "del.test.d1").await;
    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: false,
            deleter: true,
            executor: false,
        },
    );
    fixtures::deleter_drained(&js, Duration::from_secs(30)).await;
    let d1 = catalog
        .get(&cluster, &"d1".parse().unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(d1.status, BackupStatus::Completed);
    assert_eq!(d1.volume_deletion, None);
    assert_eq!(
        d1.volumes
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>(),
        ["pv2"]
    );
    assert!(
        !d1.artifacts.iter().any(|k| k.contains("vol-pv1")),
        "{:?}",
        d1.artifacts
    );
    assert_eq!(
        keys_under(&store, "backups/c1/vols/d1/").await,
        BTreeSet::from([
            "backups/c1/vols/d1/metadata.json".to_string(),
            key("d1", "pv2", 0),
        ])
    );
    assert_eq!(keys_under(&store, "backups/c1/vols/d2/").await.len(), 3);
    fleet.stop().await.unwrap();
}

/// A partial deletion that runs out of deliveries (the object store is down) leaves the record
/// `completed` with both volumes, takes its claim off and says why on the record, so the next
/// retention run can publish a fresh job for the volume still marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_deletion_out_of_deliveries_releases_its_claim() {
    let nats = Nats::start();
    let mut s3 = S3::start();
    let config = config(&nats, &s3);
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure(&js, 1).await.unwrap();
    // Two deliveries instead of twenty (the deleter opens the existing durable as it is).
    sexton_tests::delete_durable_with(&js, "c1", 2, Duration::from_secs(60)).await;
    let catalog = Catalog::new(topology.catalog.clone());
    let store = object_store(&config).await;
    fixtures::put_schedule(&topology, "app", "c1", "vols", json!({"keep_last": 1})).await;
    let key = |id: &str, volume: &str| format!("backups/c1/vols/{id}/vol-{volume}.img");
    let mut d1 = fixtures::backup("c1", "vols", "d1", None, 1, 0);
    d1.volumes = vec![
        sexton_retention::VolumeArtifact {
            expiring: true,
            ..sexton_retention::VolumeArtifact::full("pv1", vec![key("d1", "pv1")])
        },
        sexton_retention::VolumeArtifact::full("pv2", vec![key("d1", "pv2")]),
    ];
    d1.artifacts.extend([key("d1", "pv1"), key("d1", "pv2")]);
    let mut d2 = fixtures::backup("c1", "vols", "d2", None, 2, 0);
    d2.volumes = vec![
        sexton_retention::VolumeArtifact::full("pv1", vec![key("d2", "pv1")]),
        sexton_retention::VolumeArtifact::incremental("pv2", "d1", vec![key("d2", "pv2")]),
    ];
    d2.artifacts.extend([key("d2", "pv1"), key("d2", "pv2")]);
    fixtures::put_backups(&catalog, &store, &[d1, d2]).await;
    let cluster = ClusterName::new("c1").unwrap();
    let marked = catalog
        .get(&cluster, &"d1".parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let job = sexton_model::wire::DeleteJob {
        schema_version: 1,
        cluster: cluster.clone(),
        backup_id: "d1".parse().unwrap(),
        uid: marked.value.uid.clone(),
        revision: marked.revision,
        reasons: vec!["no rule keeps it".into()],
        volumes: vec!["pv1".into()],
    };
    // The object store goes away: every attempt fails, transiently.
    s3.server.kill();
    fixtures::publish_job(&js, &job, "del.test.d1").await;
    let fleet = Fleet::start(
        &config,
        Members {
            scheduler: false,
            retention_worker: false,
            deleter: true,
            executor: false,
        },
    );
    let record = eventually("the claim released", Duration::from_secs(90), || {
        let (catalog, cluster) = (catalog.clone(), cluster.clone());
        async move {
            let record = catalog
                .get(&cluster, &"d1".parse().unwrap())
                .await
                .ok()??
                .value;
            (record.volume_deletion.is_none()
                && record
                    .last_error
                    .as_deref()
                    .is_some_and(|e| e.contains("deleting volumes pv1")))
            .then_some(record)
        }
    })
    .await;
    assert_eq!(record.status, BackupStatus::Completed);
    assert!(
        record
            .last_error
            .as_deref()
            .unwrap()
            .contains("gave up after 2 deliveries"),
        "{:?}",
        record.last_error
    );
    let volumes: Vec<(&str, bool)> = record
        .volumes
        .iter()
        .map(|v| (v.name.as_str(), v.expiring))
        .collect();
    assert_eq!(volumes, [("pv1", true), ("pv2", false)]);
    let incidents = fixtures::incidents(&js).await;
    assert!(
        incidents
            .iter()
            .any(|i| i.kind == "delete-failed" && i.reason.contains("deleting volumes pv1")),
        "{incidents:?}"
    );
    fleet.stop().await.unwrap();
}

/// Randomised days of the whole fleet (seeded; `SEXTON_CHAOS_SEED` replays one): volumes are
/// attached, uploads fail, snapshots are lost, `full_every: 2` and keep 3 expire backups whole
/// or in part. After the fleet settles, every volume of a completed backup can be restored: its
/// chain back to its full is in the catalog, completed, and every object of every artifact on
/// it is in S3; and every object left under the schedule's prefix belongs to a record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_days_never_lose_an_object_a_kept_volume_needs() {
    let world = Setup::new(Members::ALL)
        .schedule(
            json!({"name": "app", "cluster": "c1", "plan": "vols", "cron": "@daily",
                   "paused": true, "full_every": 2, "volumes": ["pv1"],
                   "policy": {"keep_last": 3, "failed_grace": "1s"}}),
        )
        .start()
        .await;
    let World {
        config,
        fleet,
        client,
        js,
        ..
    } = world;
    let run = Run {
        client: client.clone(),
        catalog: Catalog::new(js.get_key_value(topology::BUCKET_CATALOG).await.unwrap()),
        js: js.clone(),
    };
    let mut rng = Rng::from_env();
    let mut volumes = vec!["pv1".to_string()];
    for day in 0..9 {
        let mut annotations = serde_json::Map::new();
        if day > 0 && volumes.len() < 3 && rng.below(3) == 0 {
            volumes.push(format!("pv{}", volumes.len() + 1));
        }
        if rng.below(4) == 0 {
            let victim = &volumes[rng.below(volumes.len() as u64) as usize];
            annotations.insert(FAIL.into(), json!(victim));
        } else if rng.below(4) == 0 {
            let victim = &volumes[rng.below(volumes.len() as u64) as usize];
            annotations.insert(LOST.into(), json!(victim));
        }
        run.update(json!({"annotations": annotations, "volumes": volumes}))
            .await;
        run.take("app").await;
    }
    // Settle: no job pending, then nothing changes for a while.
    let cluster = ClusterName::new("c1").unwrap();
    let mut previous = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let records: Vec<BackupRecord> = loop {
        let listed: Vec<BackupRecord> = run
            .catalog
            .list_cluster(&cluster)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.value)
            .collect();
        let backlog = consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER)
            .await
            .unwrap_or(1)
            + consumer_backlog(
                &js,
                topology::STREAM_RETENTION,
                topology::CONSUMER_RETENTION,
            )
            .await
            .unwrap_or(1);
        let text = serde_json::to_string(&listed).unwrap();
        let done = backlog == 0
            && previous.as_deref() == Some(text.as_str())
            // Failed backups wait for the next retention run after their grace; a backup
            // on its way out must have finished.
            && listed.iter().all(|r| {
                matches!(r.status, BackupStatus::Completed | BackupStatus::Failed)
                    && r.volume_deletion.is_none()
            });
        if done {
            break listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the fleet did not settle: {text}"
        );
        previous = Some(text);
        tokio::time::sleep(Duration::from_millis(1500)).await;
    };
    let store = object_store(&config).await;
    let objects = keys_under(&store, "backups/c1/app/").await;
    let by_id: std::collections::HashMap<&str, &BackupRecord> =
        records.iter().map(|r| (r.id.as_str(), r)).collect();
    for record in records
        .iter()
        .filter(|r| r.status == BackupStatus::Completed)
    {
        for volume in &record.volumes {
            // Walk the chain to its full.
            let mut at = (record, volume);
            loop {
                for key in &at.1.keys {
                    assert!(
                        objects.contains(key),
                        "{}'s {} needs {key}, which is gone",
                        record.id,
                        volume.name
                    );
                }
                let Some(parent) = &at.1.parent else { break };
                let parent_record = by_id.get(parent.as_str()).unwrap_or_else(|| {
                    panic!(
                        "{}'s {} needs {parent}, which is gone",
                        record.id, volume.name
                    )
                });
                assert_eq!(
                    parent_record.status,
                    BackupStatus::Completed,
                    "{}'s {} builds on {parent}, which is not completed",
                    record.id,
                    volume.name
                );
                let parent_volume = parent_record
                    .volumes
                    .iter()
                    .find(|v| v.name == volume.name)
                    .unwrap_or_else(|| {
                        panic!(
                            "{}'s {} needs {parent}'s {}, which is gone",
                            record.id, volume.name, volume.name
                        )
                    });
                at = (parent_record, parent_volume);
            }
        }
    }
    let owned: BTreeSet<String> = records.iter().flat_map(|r| r.all_keys()).collect();
    assert_eq!(
        objects, owned,
        "objects left are exactly those of the records"
    );
    eprintln!(
        "records left: {:?}",
        records
            .iter()
            .map(|r| (
                r.id.to_string(),
                r.volumes.iter().map(|v| v.name.clone()).collect::<Vec<_>>()
            ))
            .collect::<Vec<_>>()
    );
    fleet.stop().await.unwrap();
}
