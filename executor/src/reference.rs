//! The reference executor: what a database operator or snapshotter does, in its smallest
//! honest form. On `due-backup` it writes a small `backup.xbstream` (or, for a schedule with
//! volumes, one `vol-<name>.img` per volume, of the kind the event asks for) and
//! `metadata.json` under the event's object prefix, then reports the backup completed.
//! Annotations on the schedule ([`labels`]; labels with the same keys still work, but their
//! values must be Kubernetes label values now) make it fail volumes or take a full where an
//! incremental was asked for, as real executors do. It lets a user (and the end-to-end
//! tests) watch the whole loop run without a database.
//!
//! Like a database's log archiver, it also ships one binlog segment per backup to
//! `<prefix>/<cluster>/binlog/` (events from the end of the previous segment up to now) and
//! appends it to the cluster's `_index.json` with a conditional write ([`append_segment`]):
//! the object first, the index entry after, so the index never lists a missing object.
//!
//! A due-backup can reach it more than once (JetStream delivers at least once: an
//! acknowledgement lost while the node leading the consumer dies, a message that waited in the
//! prefetch buffer past its ack wait). A backup it has already taken and reported is not taken
//! again ([`Reported`]): by then retention may have deleted it, a second take would write its
//! objects anew, and the second report would be dropped by the report stream's de-duplication
//! (same message id), leaving objects that no catalog record owns.

mod merge;

pub use merge::{
    check_merge_keys, merge_report, rewrite_metadata, synthetic_volume, SYNTHETIC_FULL,
};
use merge::{merge_chain, MissingObject};

use std::{
    collections::{HashSet, VecDeque},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use async_nats::jetstream::{self};
use chrono::Utc;
use futures::StreamExt;
use sexton_model::{
    metadata::{self, BackupMetadata},
    records::BackupKind,
    wire::{
        self, DueBackup, ObjectDigest, Report, ReportStatus, ReportVolume, Verdict, VerdictOutcome,
        VerifyDue,
    },
};
use sexton_shared::{
    binlog::{self, store, IndexSegment},
    channels,
    config::Config,
    object_store::ObjectStore,
    outcome::{settle, Outcome},
    topology, Shutdown,
};

/// Runs the reference executor until `shutdown` trips.
pub async fn run(config: Config, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let client = sexton_shared::nats::connect(&config.nats, "sexton-reference-executor").await?;
    let js = jetstream::new(client.clone());
    topology::await_created(&js).await?;
    let mut executor = Reference {
        store: ObjectStore::connect(&config.s3).await?,
        prefix: config.s3.prefix.clone(),
        locations: ObjectStore::connect_locations(&config).await?,
        reported: Reported::new(REMEMBER_FOR, REMEMBER_AT_MOST),
        client: client.clone(),
        js: js.clone(),
    };
    let mut messages = pull(&js, &channels::EXECUTOR_DUE_DURABLE).await?;
    let mut merges = pull(&js, &channels::EXECUTOR_MERGE_DURABLE).await?;
    let mut verifications = pull(&js, &channels::EXECUTOR_VERIFY_DURABLE).await?;
    sexton_shared::build::answer_version_requests(&client, "reference-executor", shutdown.clone())
        .await?;
    tracing::info!("reference executor started");
    loop {
        tokio::select! {
            _ = shutdown.wait() => break,
            message = messages.next() => {
                let (reading, ended) = ("reading due backups", "the executor consumer ended");
                if let Some(message) = received(message, reading, ended).await? {
                    executor.due_backup(&message).await;
                }
            }
            due = verifications.next() => {
                let (reading, ended) =
                    ("reading verify-due events", "the executor's verify consumer ended");
                if let Some(message) = received(due, reading, ended).await? {
                    executor.verify_due(&message).await;
                }
            }
            merge = merges.next() => {
                let (reading, ended) = ("reading merge jobs", "the executor's merge consumer ended");
                if let Some(message) = received(merge, reading, ended).await? {
                    executor.merge_job(&message).await;
                }
            }
        }
    }
    Ok(())
}

/// Opens `durable` and pulls from it, with the ack wait every reference-executor job gets.
async fn pull(
    js: &jetstream::Context,
    durable: &channels::Durable,
) -> anyhow::Result<jetstream::consumer::pull::Stream> {
    let ack_wait = channels::Settings::ack_wait(Duration::from_secs(60));
    Ok(durable
        .open(js, None, ack_wait)
        .await?
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await?)
}

/// The message a consumer handed over; `None` after a read error (logged as `reading`, then a
/// short pause); an error once the consumer has ended (`ended`), which stops the executor.
async fn received<E: std::fmt::Display>(
    next: Option<Result<jetstream::Message, E>>,
    reading: &'static str,
    ended: &'static str,
) -> anyhow::Result<Option<jetstream::Message>> {
    match next {
        Some(Ok(message)) => Ok(Some(message)),
        Some(Err(err)) => {
            tracing::warn!(error = %err, "{reading}");
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(None)
        }
        None => anyhow::bail!("{ended}"),
    }
}

/// What the reference executor holds while it runs: its clients and the backups it reported.
struct Reference {
    client: async_nats::Client,
    js: jetstream::Context,
    store: ObjectStore,
    prefix: String,
    locations: std::collections::BTreeMap<sexton_model::names::LocationName, ObjectStore>,
    reported: Reported,
}

impl Reference {
    /// Takes a due backup, unless it was taken and reported before.
    async fn due_backup(&mut self, message: &jetstream::Message) {
        let outcome = match channels::DUES
            .receive(message)
            .and_then(|due| due.check_object_prefix(&self.prefix).map(|()| due))
        {
            Err(why) => Outcome::Poison(why),
            Ok(due) if self.reported.contains(&due, Instant::now()) => {
                tracing::info!(cluster = %due.cluster, backup = %due.backup_id, "due backup delivered again; already taken and reported, not taken twice");
                Outcome::Done
            }
            Ok(due) => match taken_before(&self.client, &due).await {
                Some(state) => {
                    tracing::info!(cluster = %due.cluster, backup = %due.backup_id, state, "due backup delivered again; the catalog says it was taken, not taken twice");
                    self.reported.insert(&due, Instant::now());
                    Outcome::Done
                }
                None => match take_backup(&self.js, &self.store, &self.prefix, &due).await {
                    Ok(()) => {
                        self.reported.insert(&due, Instant::now());
                        Outcome::Done
                    }
                    Err(err) => {
                        tracing::warn!(backup = %due.backup_id, error = format!("{err:#}"), "backup failed; will retry");
                        Outcome::RetryAfter(Duration::from_secs(2))
                    }
                },
            },
        };
        settle(&self.js, "reference-executor", message, &outcome).await;
    }

    /// Answers a restore test. A test at a location reads the copies there, with that
    /// location's own client (issue 28).
    async fn verify_due(&self, message: &jetstream::Message) {
        let outcome = match channels::VERIFY_DUES.receive(message).and_then(|due| {
            let store = match &due.location {
                None => &self.store,
                Some(name) => self.locations.get(name).ok_or_else(|| {
                    format!("location {name} is not configured for this executor")
                })?,
            };
            check_verify_keys(store.prefix(), &due).map(|()| (due, store))
        }) {
            Err(why) => Outcome::Poison(why),
            Ok((due, store)) => match verify(&self.js, store, &due).await {
                Ok(()) => Outcome::Done,
                Err(err) => {
                    tracing::warn!(backup = %due.backup_id, error = format!("{err:#}"), "restore test not answered; will retry");
                    Outcome::RetryAfter(Duration::from_secs(2))
                }
            },
        };
        settle(&self.js, "reference-executor", message, &outcome).await;
    }

    /// Does a merge job; one whose source objects are missing is poison.
    async fn merge_job(&self, message: &jetstream::Message) {
        let outcome = match channels::MERGE_JOBS
            .receive(message)
            .and_then(|job| check_merge_keys(&self.prefix, &job).map(|()| job))
        {
            Err(why) => Outcome::Poison(why),
            Ok(job) => match merge_chain(&self.js, &self.store, &job).await {
                Ok(()) => Outcome::Done,
                Err(err) if err.downcast_ref::<MissingObject>().is_some() => {
                    Outcome::Poison(err.to_string())
                }
                Err(err) => {
                    tracing::warn!(target = %job.target.id, error = format!("{err:#}"), "merge failed; will retry");
                    Outcome::RetryAfter(Duration::from_secs(2))
                }
            },
        };
        settle(&self.js, "reference-executor", message, &outcome).await;
    }
}

/// Annotations a test (or a user trying Sexton out) puts on a schedule to make the reference
/// executor misbehave the way real ones do. Each is a comma-separated list of volume names.
/// They are annotations because their values (`*`, `pv1,pv2`, `upgrade:pg16`) are not
/// Kubernetes label values; a schedule stored with them as labels before labels were checked
/// still works.
pub mod labels {
    /// These volumes' uploads fail: the backup is reported failed, those volumes marked failed
    /// (`*` fails a backup without volumes).
    pub const FAIL_VOLUMES: &str = "sexton.io/executor-fail-volumes";
    /// These volumes' snapshots are "lost": a full is taken where an incremental was asked for.
    pub const FULL_VOLUMES: &str = "sexton.io/executor-full-volumes";
    /// Holds (`<what>:<id>`) the executor registers on the backups it reports, as an operator
    /// taking a backup for an upgrade or a clone would.
    pub const HOLDS: &str = "sexton.io/executor-holds";
}

fn label_list<'a>(due: &'a DueBackup, label: &str) -> Vec<&'a str> {
    due.annotations
        .get(label)
        .or_else(|| due.labels.get(label))
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Asks the scheduler (`backup.taken`) whether the catalog knows this backup as taken:
/// `Some("recorded")` or `Some("deleted")` (retention already removed it) mean a delivery of a
/// due-backup that an executor handled before (this replica before a restart, or another one
/// that died before acknowledging). `None` (unknown, in progress, or no answer) means take it:
/// a backup taken twice costs an orphan `sexton backup orphans` finds; one not taken is a lost
/// recovery point.
pub async fn taken_before(client: &async_nats::Client, due: &DueBackup) -> Option<&'static str> {
    let request = sexton_shared::api::BackupRef {
        schema_version: wire::SCHEMA_VERSION,
        cluster: due.cluster.clone(),
        id: due.backup_id.clone(),
    };
    let body = serde_json::to_vec(&request).ok()?;
    let answer = tokio::time::timeout(
        Duration::from_secs(2),
        client.request(topology::api_subject("backup", "taken"), body.into()),
    )
    .await;
    let reply: sexton_shared::api::Reply = match answer {
        Ok(Ok(message)) => serde_json::from_slice(&message.payload).ok()?,
        Ok(Err(err)) => {
            tracing::warn!(backup = %due.backup_id, error = %err, "cannot ask whether the backup was taken; taking it");
            return None;
        }
        Err(_) => {
            tracing::warn!(backup = %due.backup_id, "no answer on whether the backup was taken; taking it");
            return None;
        }
    };
    let taken: sexton_shared::api::BackupTaken =
        serde_json::from_value(reply.into_result().ok()?).ok()?;
    match taken.state.as_str() {
        "recorded" => Some("recorded"),
        "deleted" => Some("deleted"),
        _ => None,
    }
}

/// How long a taken backup is remembered: longer than the redeliveries of one message last
/// (20 deliveries over about 17 minutes, see `channels::consumer_config`).
const REMEMBER_FOR: Duration = Duration::from_secs(30 * 60);
/// At most this many are remembered (about 100 bytes each); the oldest are forgotten first.
const REMEMBER_AT_MOST: usize = 100_000;

/// The backups this executor took and reported (the report stored by the stream), so a
/// due-backup delivered again is acknowledged without taking the backup a second time. Kept in
/// memory: a redelivery after this process died is taken again by another replica (its objects
/// are then found by `sexton backup orphans` if the backup was deleted meanwhile).
pub struct Reported {
    keys: HashSet<String>,
    order: VecDeque<(Instant, String)>,
    keep_for: Duration,
    at_most: usize,
}

impl Reported {
    pub fn new(keep_for: Duration, at_most: usize) -> Reported {
        Reported {
            keys: HashSet::new(),
            order: VecDeque::new(),
            keep_for,
            at_most,
        }
    }

    fn key(due: &DueBackup) -> String {
        format!("{}.{}", due.cluster, due.backup_id)
    }

    pub fn contains(&mut self, due: &DueBackup, now: Instant) -> bool {
        self.forget_old(now);
        self.keys.contains(&Self::key(due))
    }

    pub fn insert(&mut self, due: &DueBackup, now: Instant) {
        self.forget_old(now);
        let key = Self::key(due);
        if self.keys.insert(key.clone()) {
            self.order.push_back((now, key));
        }
        while self.order.len() > self.at_most {
            if let Some((_, key)) = self.order.pop_front() {
                self.keys.remove(&key);
            }
        }
    }

    fn forget_old(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.duration_since(*at) < self.keep_for {
                break;
            }
            if let Some((_, key)) = self.order.pop_front() {
                self.keys.remove(&key);
            }
        }
    }
}

async fn take_backup(
    js: &jetstream::Context,
    store: &ObjectStore,
    prefix: &str,
    due: &DueBackup,
) -> anyhow::Result<()> {
    let started_at = Utc::now();
    let fail = label_list(due, labels::FAIL_VOLUMES);
    let lost = label_list(due, labels::FULL_VOLUMES);
    let metadata_key = format!("{}{}", due.object_prefix, metadata::FILE_NAME);
    let mut artifacts = Vec::new();
    let mut objects = Vec::new();
    let mut volumes = Vec::new();
    let mut size_bytes: u64 = 0;
    let mut failed = due.volumes.is_empty() && fail.contains(&"*");
    if due.volumes.is_empty() {
        if !failed {
            let data_key = format!("{}backup.xbstream", due.object_prefix);
            let data = format!(
                "sexton reference backup of {}/{} for tick {} ({:?} on {:?})\n",
                due.cluster, due.plan, due.tick, due.kind, due.parent
            );
            size_bytes += data.len() as u64;
            objects.push(put_digested(store, &data_key, data.into_bytes()).await?);
            artifacts.push(data_key);
        }
    } else {
        // One image per volume: a full, or an overlay on the same volume in `parent`.
        for asked in &due.volumes {
            let (kind, parent) = if lost.contains(&asked.name.as_str()) {
                (BackupKind::Full, None)
            } else {
                (asked.kind, asked.parent.clone())
            };
            let volume_failed = fail.contains(&asked.name.as_str());
            let key = format!("{}vol-{}.img", due.object_prefix, asked.name);
            let mut volume_bytes = None;
            if !volume_failed {
                let data = format!(
                    "sexton reference image of volume {} ({kind:?} on {parent:?})\n",
                    asked.name
                );
                size_bytes += data.len() as u64;
                volume_bytes = Some(data.len() as u64);
                objects.push(put_digested(store, &key, data.into_bytes()).await?);
            }
            failed |= volume_failed;
            volumes.push(ReportVolume {
                name: asked.name.clone(),
                kind,
                parent,
                keys: if volume_failed { Vec::new() } else { vec![key] },
                failed: volume_failed,
                size_bytes: volume_bytes,
            });
        }
    }
    let kind = if volumes.is_empty() {
        due.kind
    } else if volumes.iter().all(|v| v.kind == BackupKind::Full) {
        BackupKind::Full
    } else {
        BackupKind::Incremental
    };
    if !failed {
        match append_segment(store, prefix, due, started_at.fixed_offset()).await {
            Ok(_) => {}
            // The base backup is good without its log: report it, and let the operator see why
            // the log is not archived (`sexton binlog status`, the retention-worker's incident).
            Err(err @ store::StoreError::Malformed { .. }) => {
                tracing::error!(cluster = %due.cluster, error = %err, "binlog segment not indexed")
            }
            Err(err) => return Err(err).context("appending a binlog segment"),
        }
    }
    let completed_at = Utc::now();
    let status = if failed {
        ReportStatus::Failed
    } else {
        ReportStatus::Completed
    };
    let mut report = Report {
        schema_version: wire::SCHEMA_VERSION,
        backup_id: due.backup_id.clone(),
        cluster: due.cluster.clone(),
        plan: due.plan.clone(),
        schedule: Some(due.schedule.clone()),
        backup_name: due.backup_name.clone(),
        status,
        kind,
        parent: if volumes.is_empty() {
            due.parent.clone()
        } else {
            None
        },
        started_at: Some(started_at.fixed_offset()),
        completed_at: Some(completed_at.fixed_offset()),
        tick: Some(due.tick),
        artifacts,
        size_bytes: None,
        labels: due.labels.clone(),
        tags: Vec::new(),
        error: failed.then(|| format!("upload failed (annotation {})", labels::FAIL_VOLUMES)),
        volumes,
        holds: label_list(due, labels::HOLDS)
            .into_iter()
            .filter(|hold| match sexton_shared::api::check_hold_reason(hold) {
                Ok(()) => true,
                // A bad label must not cost the backup: the hold is left out and said so.
                Err(why) => {
                    tracing::warn!(backup = %due.backup_id, %why, "hold label ignored");
                    false
                }
            })
            .map(str::to_string)
            .collect(),
        merge: None,
        objects,
        log_range: None,
        differential: false,
    };
    // metadata.json last: it describes every object written before it (seed 003's layout).
    let metadata = BackupMetadata::describe(&report, Utc::now()).encode();
    size_bytes += metadata.len() as u64;
    store.put(&metadata_key, metadata.into()).await?;
    report.artifacts.push(metadata_key);
    report.size_bytes = Some(size_bytes);
    let status_word = if failed { "failed" } else { "completed" };
    channels::REPORTS
        .publish_once(js, &report, &channels::ids::report(&report))
        .await?;
    tracing::info!(cluster = %due.cluster, backup = %due.backup_id, status = status_word, "backup taken and reported");
    Ok(())
}

/// Uploads `body` to `key` and returns its size and SHA-256, as a report and `metadata.json`
/// describe it.
async fn put_digested(
    store: &ObjectStore,
    key: &str,
    body: Vec<u8>,
) -> anyhow::Result<ObjectDigest> {
    let digest = ObjectDigest {
        key: key.to_string(),
        size: body.len() as u64,
        sha256: Some(sexton_model::digest::sha256_hex(&body)),
        version_id: None,
    };
    store.put(key, body.into()).await?;
    Ok(digest)
}

/// Every key of a verify-due event lies in its own backup's directory of the event's cluster:
/// a forged event must not make the executor read another cluster's objects.
pub fn check_verify_keys(prefix: &str, due: &VerifyDue) -> Result<(), String> {
    for backup in &due.chain {
        for object in &backup.objects {
            sexton_shared::object_store::check_backup_key(
                prefix,
                &due.cluster,
                &backup.backup_name,
                backup.id.as_str(),
                &object.key,
            )
            .map_err(|err| format!("backup {}: {err}", backup.id))?;
        }
    }
    Ok(())
}

/// The reference executor's restore test, in its smallest honest form: the chain must be
/// whole (a full first, each next building on the one before, the target last) and every
/// object of it must read back whole, with the size and SHA-256 recorded when it was taken.
/// A real executor restores the database instead (deploy/executors/mariadb). Pure.
pub fn judge_chain(due: &VerifyDue) -> Result<(), String> {
    let Some(first) = due.chain.first() else {
        return Err("the event names no chain".into());
    };
    if first.kind != BackupKind::Full && first.parent.is_some() {
        return Err(format!(
            "the chain starts with {}, which builds on {:?}",
            first.id, first.parent
        ));
    }
    Ok(())
}

/// Reads back every object of the event's chain and answers with a verdict.
async fn verify(
    js: &jetstream::Context,
    store: &ObjectStore,
    due: &VerifyDue,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut problems: Vec<String> = Vec::new();
    if let Err(why) = judge_chain(due) {
        problems.push(why);
    }
    let mut checked = Vec::new();
    let mut bytes_read = 0u64;
    for backup in &due.chain {
        for object in &backup.objects {
            match store
                .digest_at(&object.key, object.version_id.as_deref())
                .await?
            {
                None => problems.push(format!("object {} is missing", object.key)),
                Some((size, sha256)) => {
                    bytes_read += size;
                    if object.size.is_some_and(|recorded| recorded != size) {
                        problems.push(format!(
                            "object {} holds {size} bytes, {} when taken",
                            object.key,
                            object.size.unwrap_or_default()
                        ));
                    } else if object
                        .sha256
                        .as_ref()
                        .is_some_and(|recorded| *recorded != sha256)
                    {
                        problems.push(format!(
                            "object {} has sha256 {sha256}, {} when taken",
                            object.key,
                            object.sha256.as_deref().unwrap_or_default()
                        ));
                    }
                }
            }
            checked.push(object.key.clone());
        }
    }
    // A drill: the archive's segments that reach the instant read back too, each as its index
    // recorded it (the reference executor has no database to replay them into).
    let mut segments = 0usize;
    if let Some(replay) = &due.replay {
        let into = std::env::temp_dir().join(format!(
            "sexton-reference-drill-{}-{}",
            std::process::id(),
            due.request_id
        ));
        let fetched = crate::fetch::fetch_binlog(
            store,
            store.prefix(),
            &due.cluster,
            Some(replay.since.fixed_offset()),
            Some(replay.until.fixed_offset()),
            &into,
        )
        .await;
        let _ = std::fs::remove_dir_all(&into);
        match fetched {
            Ok(fetched) if fetched.segments.is_empty() => problems.push(format!(
                "the log archive has no segment between {} and {}",
                replay.since, replay.until
            )),
            Ok(fetched) => {
                for segment in fetched.segments {
                    bytes_read += segment.size;
                    checked.push(segment.key);
                    segments += 1;
                }
            }
            Err(err) => problems.push(format!(
                "reading the log archive up to {}: {err:#}",
                replay.until
            )),
        }
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    let (outcome, reason) = if problems.is_empty() {
        let read = format!(
            "{} of {}",
            crate::count(checked.len() - segments, "object"),
            crate::count(due.chain.len(), "backup")
        );
        (
            VerdictOutcome::Verified,
            Some(match &due.replay {
                None => format!("{read} read back, {bytes_read} bytes, checksums as taken"),
                Some(replay) => format!(
                    "{read} and {} up to {} read back, {bytes_read} bytes, checksums as taken",
                    crate::count(segments, "log segment"),
                    replay.until.to_rfc3339()
                ),
            }),
        )
    } else {
        (VerdictOutcome::VerifyFailed, Some(problems.join("; ")))
    };
    let verdict = Verdict {
        schema_version: wire::SCHEMA_VERSION,
        request_id: due.request_id.clone(),
        cluster: due.cluster.clone(),
        backup_id: due.backup_id.clone(),
        uid: due.uid.clone(),
        outcome,
        reason,
        duration_ms,
        chain: due.chain.iter().map(|b| b.id.clone()).collect(),
        checked,
        bytes_read,
    };
    channels::VERDICTS
        .publish_once(js, &verdict, &channels::ids::verdict(&due.request_id))
        .await?;
    tracing::info!(cluster = %due.cluster, backup = %due.backup_id, request = %due.request_id, ?outcome, duration_ms, bytes_read, "restore test answered");
    Ok(())
}

/// Ships the binlog segment of this backup and appends it to the cluster's index. The segment
/// holds the events since the end of the newest indexed segment (or since this backup started,
/// for the first one) up to now. Idempotent: a redelivered due-backup rewrites the same object
/// and finds its entry already in the index.
pub async fn append_segment(
    store: &ObjectStore,
    prefix: &str,
    due: &DueBackup,
    started_at: chrono::DateTime<chrono::FixedOffset>,
) -> Result<store::Updated, store::StoreError> {
    let folder = binlog::binlog_prefix(prefix, &due.cluster);
    let key = format!("{folder}{}.binlog", due.backup_id);
    // A segment ends before it is uploaded.
    let last_event = Utc::now().fixed_offset();
    let body = format!(
        "sexton reference binlog of {} up to {last_event}\n",
        due.cluster
    );
    store.put(&key, body.into_bytes().into()).await?;
    store::update(
        store,
        &binlog::index_key(prefix, &due.cluster),
        &folder,
        |index| {
            if index.contains(&key) {
                return false;
            }
            let first_event = index
                .newest_last_event()
                .filter(|newest| *newest <= last_event)
                .unwrap_or(started_at.min(last_event));
            index.apply_appends(&[IndexSegment::new(
                key.clone(),
                Some(first_event),
                Some(last_event),
            )]) > 0
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(id: &str) -> DueBackup {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "schedule": "s", "cluster": "c1", "plan": "p",
            "tick": "2026-01-01T00:00:00Z", "fired_at": "2026-01-01T00:00:00Z",
            "backup_id": id, "backup_name": "s", "object_prefix": format!("b/c1/s/{id}/"),
            "kind": "full",
        }))
        .expect("a due-backup")
    }

    #[test]
    fn reported_backups_are_remembered_for_a_while_and_at_most_so_many() {
        let start = Instant::now();
        let mut reported = Reported::new(Duration::from_secs(60), 2);
        reported.insert(&due("b1"), start);
        assert!(reported.contains(&due("b1"), start + Duration::from_secs(59)));
        assert!(!reported.contains(&due("b2"), start));
        // Forgotten after keep_for.
        assert!(!reported.contains(&due("b1"), start + Duration::from_secs(60)));
        // The oldest goes first beyond at_most.
        let t = start + Duration::from_secs(100);
        for id in ["b1", "b2", "b3"] {
            reported.insert(&due(id), t);
        }
        assert!(!reported.contains(&due("b1"), t));
        assert!(reported.contains(&due("b2"), t) && reported.contains(&due("b3"), t));
        assert_eq!(reported.order.len(), 2);
    }
}
