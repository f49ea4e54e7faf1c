//! Scenario 6, forged and replayed messages: with a settled catalog (backups kept by policy,
//! some under legal hold or another hold, a re-used backup id, orphan objects of an unknown
//! backup), an attacker or a confused replica publishes delete jobs for kept, held and unknown
//! backups, replays old delete jobs and old reports, and forges reports that claim other
//! backups' objects. Not one object may be deleted and not one record removed; each refusal
//! that names a backup must show up as an incident with its reason.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use async_nats::jetstream::{self, message::PublishMessage};
use serde_json::json;
use sexton_model::{
    names::{BackupId, ClusterName},
    records::{BackupRecord, BackupStatus},
    wire::{self, DeleteJob},
};
use sexton_shared::{catalog::Catalog, topology};
use sexton_tests::{fault::*, *};

async fn publish(js: &jetstream::Context, subject: &str, body: bytes::Bytes, id: &str) -> bool {
    js.send_publish(
        subject.to_string(),
        PublishMessage::build().payload(body).message_id(id),
    )
    .await
    .expect("publish")
    .await
    .expect("stored")
    .duplicate
}

fn job(cluster: &str, id: &str, uid: &str, revision: u64) -> bytes::Bytes {
    wire::encode(&DeleteJob {
        schema_version: 1,
        cluster: ClusterName::new(cluster).unwrap(),
        backup_id: BackupId::new(id).unwrap(),
        uid: uid.to_string(),
        revision,
        reasons: vec!["forged".into()],
        volumes: Vec::new(),
    })
}

async fn objects(store: &sexton_shared::object_store::ObjectStore) -> BTreeSet<String> {
    store
        .list("backups/")
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect()
}

async fn records(catalog: &Catalog) -> BTreeMap<String, (String, BackupStatus)> {
    catalog
        .list_all()
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                format!("{}.{}", r.value.cluster, r.value.id),
                (r.value.uid, r.value.status),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_replayed_messages_delete_nothing() {
    let nats = Nats::start();
    let s3 = S3::start();
    let config = config(&nats, &s3);
    let mut fleet = ProcessFleet::start_roles(
        &config,
        1,
        &[Role::Scheduler, Role::RetentionWorker, Role::Deleter],
    );
    fleet.wait_ready(Duration::from_secs(120));
    let client = client(&nats.url()).await;
    let js = jetstream::new(client.clone());
    let store = object_store(&config).await;
    let topo = topology::ensure(&js, 1).await.unwrap();
    let catalog = Catalog::new(topo.catalog.clone());

    // Two clusters, each with a paused schedule keeping the newest three.
    let mut loads = Vec::new();
    for (name, cluster) in [("forge", "forge-c"), ("forge-other", "forge-o")] {
        let schedule = LoadSchedule {
            name: name.into(),
            cluster: cluster.into(),
            interval: Duration::from_secs(3600),
            keep_last: 3,
        };
        api(
            &client,
            "schedule",
            "create",
            json!({"schema_version": 1, "name": name, "cluster": cluster, "plan": "full",
                   "cron": "@every 1h", "paused": true, "policy": {"keep_last": 3}}),
        )
        .await
        .unwrap();
        loads.push(ReportLoad::new(schedule));
    }
    let (forge, other) = (&loads[0], &loads[1]);
    forge.write_objects(&store, "backups", 0..6).await;
    forge.publish_reports(&js, "backups", 0..6).await;
    other.write_objects(&store, "backups", 0..3).await;
    other.publish_reports(&js, "backups", 0..3).await;
    let forge_c = ClusterName::new("forge-c").unwrap();
    eventually("retention to keep three", Duration::from_secs(60), || {
        let catalog = catalog.clone();
        let cluster = forge_c.clone();
        async move { (catalog.list_cluster(&cluster).await.ok()?.len() == 3).then_some(()) }
    })
    .await;
    wait_settled(&js, Duration::from_secs(60))
        .await
        .expect("settled");

    // The original delete jobs of backups 0, 1 and 2, rebuilt from the catalog's history.
    let history = read_stream(
        &js,
        &format!("KV_{}", topology::BUCKET_CATALOG),
        &format!("$KV.{}.forge-c.>", topology::BUCKET_CATALOG),
    )
    .await;
    let mut old_jobs = BTreeMap::new();
    for message in &history {
        if let Ok(record) = serde_json::from_slice::<BackupRecord>(&message.payload) {
            if record.status == BackupStatus::Expiring {
                let revision = message.info().unwrap().stream_sequence;
                old_jobs.insert(record.id.to_string(), (record.uid.clone(), revision));
            }
        }
    }
    assert_eq!(old_jobs.len(), 3, "{old_jobs:?}");

    // Backup 0's id is used again by a new backup (new unique id), newest of all.
    let mut reused_report: serde_json::Value =
        serde_json::from_slice(&forge.report("backups", 0, chrono::Utc::now())).unwrap();
    sexton_tests::fixtures::upload_genuine_json(&store, &mut reused_report).await;
    publish(
        &js,
        "sexton.v1.report.forge-c",
        serde_json::to_vec(&reused_report).unwrap().into(),
        "re-used-id",
    )
    .await;
    // Backup 3 goes under legal hold and backup 4 under a restore hold after being marked.
    for (n, legal, hold) in [(3, true, None), (4, false, Some("restore:ticket-7"))] {
        let id = BackupId::new(forge.backup_id(n)).unwrap();
        let current = catalog.get(&forge_c, &id).await.unwrap().unwrap();
        let mut record = current.value.clone();
        record.status = BackupStatus::Expiring;
        record.legal_hold = legal;
        record.holds = hold.into_iter().map(String::from).collect();
        catalog.update(&record, current.revision).await.unwrap();
    }
    // Objects of a backup the catalog never heard of.
    for key in [
        "backups/forge-c/forge/ghost/backup.xbstream",
        "backups/forge-c/forge/ghost/metadata.json",
    ] {
        store.put(key, "orphan".into()).await.unwrap();
    }
    eventually("the re-used id recorded", Duration::from_secs(30), || {
        let catalog = catalog.clone();
        let cluster = forge_c.clone();
        let id = BackupId::new(forge.backup_id(0)).unwrap();
        async move { catalog.get(&cluster, &id).await.ok()?.map(|_| ()) }
    })
    .await;
    wait_settled(&js, Duration::from_secs(60))
        .await
        .expect("settled");

    let objects_before = objects(&store).await;
    let records_before = records(&catalog).await;
    let current = |cluster: &str, n: usize, load: &ReportLoad| {
        let catalog = catalog.clone();
        let cluster = ClusterName::new(cluster).unwrap();
        let id = BackupId::new(load.backup_id(n)).unwrap();
        async move { catalog.get(&cluster, &id).await.unwrap().unwrap() }
    };
    let kept = current("forge-c", 5, forge).await;
    let held = current("forge-c", 3, forge).await;
    let restoring = current("forge-c", 4, forge).await;
    let other_kept = current("forge-o", 0, other).await;
    let reused = current("forge-c", 0, forge).await;
    assert_ne!(reused.value.uid, old_jobs[&forge.backup_id(0)].0);

    let jobs = "sexton.v1.job.delete.forge-c";
    let reports = "sexton.v1.report.forge-c";
    let old = |n: usize| old_jobs[&forge.backup_id(n)].clone();
    let long_ago = chrono::Utc::now() - chrono::Duration::days(400);
    let mut evil =
        serde_json::from_slice::<serde_json::Value>(&forge.report("backups", 5, long_ago)).unwrap();
    evil["backup_id"] = json!("evil");
    let mut evil_other =
        serde_json::from_slice::<serde_json::Value>(&other.report("backups", 0, long_ago)).unwrap();
    evil_other["backup_id"] = json!("evil-other");
    let mut claim_other = serde_json::from_slice::<serde_json::Value>(&forge.report(
        "backups",
        5,
        chrono::Utc::now(),
    ))
    .unwrap();
    claim_other["artifacts"] = json!(forge.artifacts("backups", 4));
    let mut failed = serde_json::from_slice::<serde_json::Value>(&forge.report(
        "backups",
        5,
        chrono::Utc::now(),
    ))
    .unwrap();
    failed["status"] = json!("failed");
    let mut unknown_schedule =
        serde_json::from_slice::<serde_json::Value>(&forge.report("backups", 9, long_ago)).unwrap();
    unknown_schedule["schedule"] = json!("nobody");
    let body = |v: &serde_json::Value| bytes::Bytes::from(serde_json::to_vec(v).unwrap());
    // Revisions the catalog never stored: a claim to check, never lag to wait for (issue 26).
    let beyond = kept.revision + 1000;
    let beyond_reason = format!("claims catalog revision {beyond}");
    let max_reason = format!("claims catalog revision {}", u64::MAX);

    // (subject, body, what the incident must say; None: refused without an incident)
    let forged: Vec<(&str, bytes::Bytes, Option<&str>)> = vec![
        // An old job replayed after its backup id was re-used.
        (
            jobs,
            job("forge-c", &forge.backup_id(0), &old(0).0, old(0).1),
            Some("unique id"),
        ),
        // Old jobs replayed after their backups were deleted: nothing left to do.
        (
            jobs,
            job("forge-c", &forge.backup_id(1), &old(1).0, old(1).1),
            None,
        ),
        (
            jobs,
            job("forge-c", &forge.backup_id(2), &old(2).0, old(2).1),
            None,
        ),
        // Jobs for a kept backup, with its true unique id and revision.
        (
            jobs,
            job(
                "forge-c",
                &forge.backup_id(5),
                &kept.value.uid,
                kept.revision,
            ),
            Some("not expiring"),
        ),
        (
            jobs,
            job(
                "forge-o",
                &other.backup_id(0),
                &other_kept.value.uid,
                other_kept.revision,
            ),
            Some("not expiring"),
        ),
        // Held backups, marked expiring, with their true unique ids and revisions.
        (
            jobs,
            job(
                "forge-c",
                &forge.backup_id(3),
                &held.value.uid,
                held.revision,
            ),
            Some("legal hold"),
        ),
        (
            jobs,
            job(
                "forge-c",
                &forge.backup_id(4),
                &restoring.value.uid,
                restoring.revision,
            ),
            Some("is held"),
        ),
        (
            jobs,
            job(
                "forge-c",
                &forge.backup_id(3),
                &held.value.uid,
                held.revision - 1,
            ),
            Some("legal hold"),
        ),
        // A kept backup with its true unique id and a revision never stored.
        (
            jobs,
            job("forge-c", &forge.backup_id(5), &kept.value.uid, beyond),
            Some(beyond_reason.as_str()),
        ),
        (
            jobs,
            job("forge-c", &forge.backup_id(3), &held.value.uid, u64::MAX),
            Some(max_reason.as_str()),
        ),
        // A backup the catalog does not know (its orphan objects must stay).
        (jobs, job("forge-c", "ghost", "0123456789abcdef", 1), None),
        // Reports: unknown schedule, a backup claiming another's objects (in this cluster and
        // in another), a kept backup re-reported with another's objects or as failed.
        (reports, body(&unknown_schedule), Some("unknown schedule")),
        (reports, body(&evil), Some("evil")),
        (
            "sexton.v1.report.forge-o",
            body(&evil_other),
            Some("evil-other"),
        ),
        (reports, body(&claim_other), None),
        (reports, body(&failed), Some("changes nothing")),
        // An old report replayed after its backup was deleted: it may come back as a record,
        // but nothing it names exists any more.
        (reports, forge.report("backups", 1, long_ago), None),
        // Retention runs on demand: the held backups' jobs are refused again.
        (
            "sexton.v1.retention.checkpoint.forge-c",
            body(
                &json!({"schema_version": 1, "cluster": "forge-c", "plan": "full",
                         "backup_id": forge.backup_id(5)}),
            ),
            None,
        ),
        (
            "sexton.v1.retention.sweep.forge-c",
            body(&json!({"schema_version": 1, "cluster": "forge-c",
                         "requested_at": chrono::Utc::now()})),
            None,
        ),
    ];
    for (n, (subject, body, _)) in forged.iter().enumerate() {
        let duplicate = publish(&js, subject, body.clone(), &format!("forged-{n}")).await;
        assert!(!duplicate);
    }
    // A replay with the original message id is dropped by the stream itself.
    let replay_id = format!("del.{}.{}", old(1).0, old(1).1);
    let deduplicated = publish(
        &js,
        jobs,
        job("forge-c", &forge.backup_id(1), &old(1).0, old(1).1),
        &replay_id,
    )
    .await;

    tokio::time::sleep(Duration::from_secs(3)).await;
    let settled = wait_settled(&js, Duration::from_secs(60)).await;
    let objects_after = objects(&store).await;
    let records_after = records(&catalog).await;
    let incidents: Vec<String> =
        read_stream(&js, topology::STREAM_EVENTS, "sexton.v1.event.incident.>")
            .await
            .iter()
            .map(|m| String::from_utf8_lossy(&m.payload).to_string())
            .collect();
    let deleted_objects: Vec<&String> = objects_before.difference(&objects_after).collect();
    let removed_records: Vec<&String> = records_before
        .iter()
        .filter(|(key, (uid, _))| records_after.get(*key).map(|(u, _)| u) != Some(uid))
        .map(|(key, _)| key)
        .collect();
    let missing_incidents: Vec<&str> = forged
        .iter()
        .filter_map(|(_, _, reason)| *reason)
        .filter(|reason| !incidents.iter().any(|i| i.contains(reason)))
        .collect();
    let exited = fleet.exited();
    record_figures(
        "forged",
        json!({
            "forged_messages": forged.len() + 1,
            "deduplicated_replay": deduplicated,
            "objects_before": objects_before.len(),
            "objects_deleted": deleted_objects.len(),
            "records_removed": removed_records.len(),
            "incidents": incidents.len(),
            "missing_incidents": missing_incidents,
            "settled": settled.is_some(),
            "services_exited": exited.len(),
        }),
    );
    assert!(
        deleted_objects.is_empty(),
        "forged messages deleted objects: {deleted_objects:#?}"
    );
    assert!(
        removed_records.is_empty(),
        "forged messages removed records: {removed_records:#?}"
    );
    assert!(
        missing_incidents.is_empty(),
        "refusals without an incident: {missing_incidents:?}\n{incidents:#?}"
    );
    assert!(
        deduplicated,
        "a replay with the original message id was stored again"
    );
    assert!(exited.is_empty(), "services exited: {exited:#?}");
    assert!(settled.is_some(), "the fleet did not settle");
}
