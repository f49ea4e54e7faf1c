//! Catalogs, schedules and objects written straight into the real servers, for tests that
//! exercise the deleter without waiting for a schedule to fire: backups with their objects,
//! a schedule carrying a group's policy, and readers for what the fleet left behind.

use std::collections::{BTreeMap, BTreeSet};

use async_nats::jetstream;
use futures::StreamExt;
use serde_json::{json, Value};
use sexton_model::{
    names::ClusterName,
    records::{BackupRecord, ScheduleRecord},
    wire::Incident,
};
use sexton_shared::{
    catalog::{Catalog, Versioned},
    object_store::ObjectStore,
    topology::{self, Topology},
};

/// A completed backup of `cluster`/`plan` (`kind` full when `parent` is `None`) that finished
/// `minutes` minutes into 2026-01-01, with `n_data` data objects and a `metadata.json` under
/// `backups/<cluster>/<plan>/<id>/`.
pub fn backup(
    cluster: &str,
    plan: &str,
    id: &str,
    parent: Option<&str>,
    minutes: i64,
    n_data: usize,
) -> BackupRecord {
    let completed = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap()
        + chrono::Duration::minutes(minutes);
    let mut artifacts: Vec<String> = (0..n_data)
        .map(|i| format!("backups/{cluster}/{plan}/{id}/data-{i:04}.xbstream"))
        .collect();
    artifacts.push(format!("backups/{cluster}/{plan}/{id}/metadata.json"));
    serde_json::from_value(json!({
        "id": id, "uid": format!("uid-{id}"), "cluster": cluster, "plan": plan,
        "backup_name": plan, "kind": if parent.is_some() { "incremental" } else { "full" },
        "parent": parent, "status": "completed",
        "started_at": (completed - chrono::Duration::minutes(1)).to_rfc3339(),
        "completed_at": completed.to_rfc3339(),
        "artifacts": artifacts,
    }))
    .unwrap()
}

/// Backups of `schedule` in `cluster`, plan `base`: `(id, parent, status)` a minute apart,
/// one data object each. A failed one failed just now: inside the grace period, so a retention
/// sweep (the first of a new cluster comes at once) does not clean it up under a test.
pub fn schedule_backups(
    cluster: &str,
    schedule: &str,
    list: &[(&str, Option<&str>, &str)],
) -> Vec<BackupRecord> {
    list.iter()
        .enumerate()
        .map(|(minute, (id, parent, status))| {
            let mut record = backup(cluster, "base", id, *parent, minute as i64 + 1, 1);
            record.schedule = Some(schedule.parse().unwrap());
            record.status = serde_json::from_value(json!(status)).unwrap();
            if record.status == sexton_model::records::BackupStatus::Failed {
                let now = chrono::Utc::now().fixed_offset();
                record.started_at = Some(now);
                record.completed_at = Some(now);
            }
            record
        })
        .collect()
}

/// Writes a schedule that gives `cluster`/`plan` the retention `policy` (paused: it never
/// fires; it is only where the policy lives).
pub async fn put_schedule(
    topology: &Topology,
    name: &str,
    cluster: &str,
    plan: &str,
    policy: Value,
) {
    put_schedule_with(topology, name, cluster, plan, policy, false).await
}

pub async fn put_schedule_with(
    topology: &Topology,
    name: &str,
    cluster: &str,
    plan: &str,
    policy: Value,
    remote_cleanup: bool,
) {
    let schedule: ScheduleRecord = serde_json::from_value(json!({
        "name": name, "cluster": cluster, "plan": plan, "cron": "@daily", "paused": true,
        "policy": policy, "remote_cleanup": remote_cleanup,
        "created_at": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    topology
        .schedules
        .put(name, serde_json::to_vec(&schedule).unwrap().into())
        .await
        .unwrap();
}

/// Creates the records and uploads their objects, 16 at a time.
pub async fn put_backups(catalog: &Catalog, store: &ObjectStore, records: &[BackupRecord]) {
    let keys: Vec<String> = records.iter().flat_map(|r| r.artifacts.clone()).collect();
    put_objects(store, &keys).await;
    for record in records {
        catalog.create(record).await.unwrap();
    }
}

pub async fn put_objects(store: &ObjectStore, keys: &[String]) {
    futures::stream::iter(keys.iter().cloned())
        .map(|key| {
            let store = store.clone();
            async move {
                store
                    .put(&key, bytes::Bytes::from_static(b"x"))
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// Every object key under `prefix`.
pub async fn keys_under(store: &ObjectStore, prefix: &str) -> BTreeSet<String> {
    store
        .list(prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect()
}

/// The cluster's records by id.
pub async fn records_of(
    catalog: &Catalog,
    cluster: &str,
) -> BTreeMap<String, Versioned<BackupRecord>> {
    catalog
        .list_cluster(&ClusterName::new(cluster).unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.value.id.to_string(), r))
        .collect()
}

/// Every incident event published so far.
pub async fn incidents(js: &jetstream::Context) -> Vec<Incident> {
    crate::read_stream(js, topology::STREAM_EVENTS, "sexton.v1.event.incident.>")
        .await
        .iter()
        .map(|m| serde_json::from_slice(&m.payload).unwrap())
        .collect()
}

/// How `cluster`'s retention runs are going, as the retention-worker last wrote it (issue 54);
/// `None` before its first run.
pub async fn retention_status(
    js: &jetstream::Context,
    cluster: &str,
) -> Option<sexton_model::records::RetentionStatus> {
    let statuses = topology::retention_status_bucket(js, 1).await.ok()?;
    let entry = statuses.get(cluster).await.ok().flatten()?;
    Some(serde_json::from_slice(&entry).expect("a retention status as the worker writes it"))
}

/// Asks for a retention run of `cluster` that scrubs it first, as the scheduler's sweep does
/// once per scrub interval.
pub async fn sweep_with_scrub(js: &jetstream::Context, cluster: &str) {
    let sweep = sexton_model::wire::RetentionSweep {
        schema_version: sexton_model::wire::SCHEMA_VERSION,
        cluster: cluster.parse().expect("a cluster name"),
        requested_at: chrono::Utc::now(),
        scrub: true,
    };
    js.publish(
        sexton_shared::channels::SWEEPS.subject(&sweep.cluster),
        sexton_model::wire::encode(&sweep),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// Waits until the deleter's consumer has nothing pending or unacknowledged.
pub async fn deleter_drained(js: &jetstream::Context, timeout: std::time::Duration) {
    crate::eventually("the deleter to drain its jobs", timeout, || {
        let js = js.clone();
        async move {
            let backlog =
                crate::consumer_backlog(&js, topology::STREAM_JOBS, topology::CONSUMER_DELETER)
                    .await?;
            (backlog == 0).then_some(())
        }
    })
    .await
}

/// Marks `record` expiring as the retention-worker does and publishes its delete job; returns
/// the job.
pub async fn expire(
    js: &jetstream::Context,
    catalog: &Catalog,
    current: &Versioned<BackupRecord>,
    message_id: &str,
) -> sexton_model::wire::DeleteJob {
    let job = mark_expiring(catalog, current).await;
    publish_job(js, &job, message_id).await;
    job
}

/// Marks `record` expiring as the retention-worker does; returns the job it would publish.
pub async fn mark_expiring(
    catalog: &Catalog,
    current: &Versioned<BackupRecord>,
) -> sexton_model::wire::DeleteJob {
    let mut marked = current.value.clone();
    marked.expired_from = Some(marked.status);
    marked.status = sexton_model::records::BackupStatus::Expiring;
    marked.delete_reasons = vec!["test".into()];
    let revision = catalog.update(&marked, current.revision).await.unwrap();
    sexton_model::wire::DeleteJob {
        schema_version: 1,
        cluster: marked.cluster.clone(),
        backup_id: marked.id.clone(),
        uid: marked.uid.clone(),
        revision,
        reasons: vec!["test".into()],
        volumes: Vec::new(),
    }
}

pub async fn publish_job(
    js: &jetstream::Context,
    job: &sexton_model::wire::DeleteJob,
    message_id: &str,
) {
    js.send_publish(
        sexton_shared::channels::DELETE_JOBS.subject(&job.cluster),
        jetstream::message::PublishMessage::build()
            .payload(sexton_model::wire::encode(job))
            .message_id(message_id),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// The members of a fleet that runs only the deleter.
pub const DELETER_ONLY: crate::Members = crate::Members {
    scheduler: false,
    retention_worker: false,
    deleter: true,
    executor: false,
};

/// Makes `report` genuine, as intake requires of a completed report: uploads a few bytes for
/// each object it lists (but `metadata.json`), describes them in its `objects`, and writes the
/// `metadata.json` an executor writes last (adding its key to the artifacts if missing).
pub async fn upload_genuine(store: &ObjectStore, report: &mut sexton_model::wire::Report) {
    use sexton_model::{digest, metadata, wire::ObjectDigest};
    let mut keys = report.artifacts.clone();
    for key in report.volumes.iter().flat_map(|v| &v.keys) {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    // The backup's directory, as its keys give it.
    let directory = keys
        .first()
        .and_then(|key| key.rfind('/').map(|i| key[..=i].to_string()))
        .expect("a completed report lists its objects");
    let metadata_key = format!("{directory}{}", metadata::FILE_NAME);
    report.objects.clear();
    for key in keys.iter().filter(|k| !metadata::is_metadata_key(k)) {
        let body = format!("data of {key}\n").into_bytes();
        report.objects.push(ObjectDigest {
            key: key.clone(),
            size: body.len() as u64,
            sha256: Some(digest::sha256_hex(&body)),
            version_id: None,
        });
        store.put(key, body.into()).await.unwrap();
    }
    if report.completed_at.is_none() {
        report.completed_at = Some(chrono::Utc::now().fixed_offset());
    }
    let document = metadata::BackupMetadata::describe(report, chrono::Utc::now()).encode();
    store.put(&metadata_key, document.into()).await.unwrap();
    if !report.artifacts.contains(&metadata_key) {
        report.artifacts.push(metadata_key);
    }
}

/// [`upload_genuine`] for a report written as JSON.
pub async fn upload_genuine_json(store: &ObjectStore, report: &mut Value) {
    let mut typed: sexton_model::wire::Report =
        serde_json::from_value(report.clone()).expect("a report");
    upload_genuine(store, &mut typed).await;
    *report = serde_json::to_value(&typed).unwrap();
}
