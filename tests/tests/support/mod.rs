//! Helpers the binlog and retention end-to-end tests share: backups driven through executor
//! reports with chosen times, segments written to a cluster's binlog folder and index, and
//! waiting for a queue to drain. Each test binary uses part of it.
#![allow(dead_code)]

use std::{collections::BTreeSet, time::Duration};

use async_nats::jetstream::{self, message::PublishMessage};
use chrono::{DateTime, FixedOffset};
use serde_json::{json, Value};
use sexton_model::{
    names::ClusterName,
    records::BackupStatus,
    wire::{self, BinlogGcJob, Report, ReportStatus},
};
use sexton_shared::{
    binlog::{self, store, IndexSegment},
    catalog::Catalog,
    object_store::ObjectStore,
    topology,
};
use sexton_tests::*;

pub const PREFIX: &str = "backups";

pub fn cluster(name: &str) -> ClusterName {
    ClusterName::new(name).unwrap()
}

/// A backup the test reports as an executor would.
#[derive(Debug, Clone)]
pub struct Backup {
    pub id: String,
    pub full: bool,
    pub parent: Option<String>,
    pub started: DateTime<FixedOffset>,
    pub completed: DateTime<FixedOffset>,
}

impl Backup {
    pub fn full(id: &str, started: DateTime<FixedOffset>, minutes: i64) -> Backup {
        Backup {
            id: id.into(),
            full: true,
            parent: None,
            started,
            completed: started + chrono::Duration::minutes(minutes),
        }
    }

    pub fn incremental(
        id: &str,
        parent: &str,
        started: DateTime<FixedOffset>,
        minutes: i64,
    ) -> Backup {
        Backup {
            parent: Some(parent.into()),
            full: false,
            ..Backup::full(id, started, minutes)
        }
    }

    /// The backup's objects: `<prefix>/<cluster>/<schedule>/<id>/{backup.xbstream,metadata.json}`.
    pub fn artifacts(&self, cluster: &str, schedule: &str) -> [String; 2] {
        [
            format!("{PREFIX}/{cluster}/{schedule}/{}/backup.xbstream", self.id),
            format!("{PREFIX}/{cluster}/{schedule}/{}/metadata.json", self.id),
        ]
    }

    /// The entry of `retention plan --catalog FILE` for this backup.
    pub fn catalog_entry(&self) -> Value {
        let mut entry = json!({
            "id": self.id,
            "started_at": self.started.to_rfc3339(),
            "completed_at": self.completed.to_rfc3339(),
            "status": "completed",
            "kind": if self.full { "full" } else { "incremental" },
        });
        if let Some(parent) = &self.parent {
            entry["parent"] = json!(parent);
        }
        entry
    }
}

/// Creates a paused schedule that gives `cluster`/`plan` its retention policy.
pub async fn create_policy_schedule(
    client: &async_nats::Client,
    name: &str,
    cluster: &str,
    plan: &str,
    policy: Value,
) {
    eventually("the scheduler api", Duration::from_secs(30), || {
        let client = client.clone();
        let policy = policy.clone();
        async move {
            api(
                &client,
                "schedule",
                "create",
                json!({"schema_version": 1, "name": name, "cluster": cluster, "plan": plan,
                       "cron": "0 3 1 1 *", "paused": true, "policy": policy}),
            )
            .await
            .ok()
        }
    })
    .await;
}

/// The completed report of `backup` of `schedule`, its objects not written yet.
pub fn completed_report(cluster: &str, plan: &str, schedule: &str, backup: &Backup) -> Report {
    let artifacts = backup.artifacts(cluster, schedule);
    Report {
        schema_version: 1,
        backup_id: backup.id.parse().unwrap(),
        cluster: cluster.parse().unwrap(),
        plan: plan.parse().unwrap(),
        schedule: Some(schedule.parse().unwrap()),
        backup_name: schedule.into(),
        status: ReportStatus::Completed,
        kind: if backup.full {
            sexton_model::records::BackupKind::Full
        } else {
            sexton_model::records::BackupKind::Incremental
        },
        parent: backup.parent.as_ref().map(|p| p.parse().unwrap()),
        started_at: Some(backup.started),
        completed_at: Some(backup.completed),
        tick: None,
        artifacts: artifacts.to_vec(),
        size_bytes: Some(4 * artifacts.len() as u64),
        labels: Default::default(),
        tags: vec![],
        error: None,
        volumes: Vec::new(),
        holds: Vec::new(),
        merge: None,
        objects: Vec::new(),
        log_range: None,
        differential: false,
    }
}

/// Writes the backup's objects and publishes its completed report.
pub async fn report_backup(
    js: &jetstream::Context,
    store: &ObjectStore,
    cluster: &str,
    plan: &str,
    schedule: &str,
    backup: &Backup,
) {
    publish_report(js, store, completed_report(cluster, plan, schedule, backup)).await;
}

/// Writes the objects of `report` and publishes it (a report built by hand: holds, a log
/// range).
pub async fn publish_report(js: &jetstream::Context, store: &ObjectStore, mut report: Report) {
    sexton_tests::fixtures::upload_genuine(store, &mut report).await;
    js.send_publish(
        format!("sexton.v1.report.{}", report.cluster),
        PublishMessage::build()
            .payload(wire::encode(&report))
            .message_id(format!("test-report.{}", report.backup_id)),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// Waits until the catalog holds `n` completed records of `cluster`.
pub async fn wait_for_completed(catalog: &Catalog, cluster_name: &str, n: usize) {
    eventually(
        "the reports in the catalog",
        Duration::from_secs(60),
        || {
            let catalog = catalog.clone();
            async move {
                let records = catalog.list_cluster(&cluster(cluster_name)).await.ok()?;
                let done = records
                    .iter()
                    .filter(|r| r.value.status == BackupStatus::Completed)
                    .count();
                (done == n).then_some(())
            }
        },
    )
    .await;
}

/// Writes a segment object and appends it to the cluster's index (the way executors do).
pub async fn append_segment(store: &ObjectStore, cluster_name: &str, segment: &IndexSegment) {
    let c = cluster(cluster_name);
    store
        .put(&segment.key, "binlog events".into())
        .await
        .unwrap();
    let segment = segment.clone();
    store::update(
        store,
        &binlog::index_key(PREFIX, &c),
        &binlog::binlog_prefix(PREFIX, &c),
        move |index| index.apply_appends(std::slice::from_ref(&segment)) > 0,
    )
    .await
    .unwrap();
}

pub fn segment_key(cluster_name: &str, name: &str) -> String {
    format!("{PREFIX}/{cluster_name}/binlog/{name}")
}

/// The keys the cluster's index lists (the index must parse).
pub async fn index_keys(store: &ObjectStore, cluster_name: &str) -> BTreeSet<String> {
    index_keys_at(store, PREFIX, cluster_name).await
}

/// The keys the cluster's index under `prefix` lists (the index must parse): the primary's
/// (`PREFIX`) or a location's.
pub async fn index_keys_at(
    store: &ObjectStore,
    prefix: &str,
    cluster_name: &str,
) -> BTreeSet<String> {
    let c = cluster(cluster_name);
    store::read(
        store,
        &binlog::index_key(prefix, &c),
        &binlog::binlog_prefix(prefix, &c),
    )
    .await
    .expect("the index parses")
    .index
    .segments
    .into_iter()
    .map(|s| s.key)
    .collect()
}

/// Every object key under `prefix`.
pub async fn object_keys(store: &ObjectStore, prefix: &str) -> BTreeSet<String> {
    store
        .list(prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect()
}

/// Publishes a binlog job as the retention-worker would (with its own message id).
pub async fn publish_binlog_job(js: &jetstream::Context, job: &BinlogGcJob, message_id: &str) {
    js.send_publish(
        sexton_shared::channels::BINLOG_JOBS.subject(&job.cluster),
        PublishMessage::build()
            .payload(wire::encode(job))
            .message_id(message_id),
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// Waits until `durable` on `stream` has nothing pending or unacknowledged.
pub async fn drained(js: &jetstream::Context, stream: &str, durable: &str) {
    eventually(
        &format!("{durable} to drain"),
        Duration::from_secs(60),
        || {
            let js = js.clone();
            async move { (consumer_backlog(&js, stream, durable).await? == 0).then_some(()) }
        },
    )
    .await;
}

/// Waits until the binlog jobs are all handled: those of SEXTON_BINLOG's partitions and any
/// published to SEXTON_JOBS before issue 32.
pub async fn binlog_drained(js: &jetstream::Context) {
    eventually("the binlog jobs to drain", Duration::from_secs(60), || {
        let js = js.clone();
        async move { (binlog_backlog(&js).await? == 0).then_some(()) }
    })
    .await;
}

/// Polls `observe` until it equals `expected` or `timeout` passes, then asserts equality (so a
/// failure shows the difference).
pub async fn settles_to<T, F, Fut>(what: &str, timeout: Duration, expected: &T, mut observe: F)
where
    T: PartialEq + std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let seen = observe().await;
        if &seen == expected {
            return;
        }
        if std::time::Instant::now() > deadline {
            assert_eq!(&seen, expected, "{what} did not settle within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Incident events recorded so far, as text.
pub async fn incidents(js: &jetstream::Context) -> Vec<String> {
    read_stream(js, topology::STREAM_EVENTS, "sexton.v1.event.incident.>")
        .await
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload).to_string())
        .collect()
}

/// Midnight UTC of a day of March 2026: the backups of the user-delete tests.
pub fn march(day: u32) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(&format!("2026-03-{day:02}T00:00:00Z")).unwrap()
}
