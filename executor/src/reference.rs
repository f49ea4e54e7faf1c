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

use std::{
    collections::{HashSet, VecDeque},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use async_nats::jetstream::{self};
use chrono::Utc;
use futures::StreamExt;
use sexton_shared::{
    binlog::{self, store, IndexSegment},
    channels,
    config::Config,
    metadata::{self, BackupMetadata},
    object_store::ObjectStore,
    outcome::{settle, Outcome},
    records::BackupKind,
    topology,
    wire::{
        self, DueBackup, MergeDone, MergeJob, ObjectDigest, Report, ReportStatus, ReportVolume,
        Verdict, VerdictOutcome, VerifyDue,
    },
    Shutdown,
};

/// Runs the reference executor until `shutdown` trips.
pub async fn run(config: Config, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let client = sexton_shared::nats::connect(&config.nats, "sexton-reference-executor").await?;
    let js = jetstream::new(client.clone());
    topology::await_created(&js).await?;
    let store = ObjectStore::connect(&config.s3).await?;
    let prefix = config.s3.prefix.clone();
    let locations = ObjectStore::connect_locations(&config).await?;
    let ack_wait = channels::Settings::ack_wait(Duration::from_secs(60));
    let mut messages = channels::EXECUTOR_DUE_DURABLE
        .open(&js, None, ack_wait)
        .await?
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await?;
    let mut merges = channels::EXECUTOR_MERGE_DURABLE
        .open(&js, None, ack_wait)
        .await?
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await?;
    let mut verifications = channels::EXECUTOR_VERIFY_DURABLE
        .open(&js, None, ack_wait)
        .await?
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await?;
    sexton_shared::build::answer_version_requests(&client, "reference-executor", shutdown.clone())
        .await?;
    tracing::info!("reference executor started");
    let mut reported = Reported::new(REMEMBER_FOR, REMEMBER_AT_MOST);
    loop {
        let message = tokio::select! {
            _ = shutdown.wait() => break,
            message = messages.next() => message,
            due = verifications.next() => {
                match due {
                    Some(Ok(message)) => {
                        // A test at a location reads the copies there, with that location's
                        // own client (issue 28).
                        let outcome = match channels::VERIFY_DUES
                            .receive(&message)
                            .and_then(|due| {
                                let store = match &due.location {
                                    None => &store,
                                    Some(name) => locations.get(name).ok_or_else(|| {
                                        format!("location {name} is not configured for this executor")
                                    })?,
                                };
                                check_verify_keys(store.prefix(), &due).map(|()| (due, store))
                            })
                        {
                            Err(why) => Outcome::Poison(why),
                            Ok((due, store)) => match verify(&js, store, &due).await {
                                Ok(()) => Outcome::Done,
                                Err(err) => {
                                    tracing::warn!(backup = %due.backup_id, error = format!("{err:#}"), "restore test not answered; will retry");
                                    Outcome::RetryAfter(Duration::from_secs(2))
                                }
                            },
                        };
                        settle(&js, "reference-executor", &message, &outcome).await;
                    }
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "reading verify-due events");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    None => anyhow::bail!("the executor's verify consumer ended"),
                }
                continue;
            }
            merge = merges.next() => {
                match merge {
                    Some(Ok(message)) => {
                        let outcome = match channels::MERGE_JOBS
                            .receive(&message)
                            .and_then(|job| check_merge_keys(&prefix, &job).map(|()| job))
                        {
                            Err(why) => Outcome::Poison(why),
                            Ok(job) => match merge_chain(&js, &store, &job).await {
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
                        settle(&js, "reference-executor", &message, &outcome).await;
                    }
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "reading merge jobs");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    None => anyhow::bail!("the executor's merge consumer ended"),
                }
                continue;
            }
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(err)) => {
                tracing::warn!(error = %err, "reading due backups");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            None => anyhow::bail!("the executor consumer ended"),
        };
        let outcome = match channels::DUES
            .receive(&message)
            .and_then(|due| due.check_object_prefix(&config.s3.prefix).map(|()| due))
        {
            Err(why) => Outcome::Poison(why),
            Ok(due) if reported.contains(&due, Instant::now()) => {
                tracing::info!(cluster = %due.cluster, backup = %due.backup_id, "due backup delivered again; already taken and reported, not taken twice");
                Outcome::Done
            }
            Ok(due) => match taken_before(&client, &due).await {
                Some(state) => {
                    tracing::info!(cluster = %due.cluster, backup = %due.backup_id, state, "due backup delivered again; the catalog says it was taken, not taken twice");
                    reported.insert(&due, Instant::now());
                    Outcome::Done
                }
                None => match take_backup(&js, &store, &prefix, &due).await {
                    Ok(()) => {
                        reported.insert(&due, Instant::now());
                        Outcome::Done
                    }
                    Err(err) => {
                        tracing::warn!(backup = %due.backup_id, error = format!("{err:#}"), "backup failed; will retry");
                        Outcome::RetryAfter(Duration::from_secs(2))
                    }
                },
            },
        };
        settle(&js, "reference-executor", &message, &outcome).await;
    }
    Ok(())
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
        sha256: Some(sexton_shared::digest::sha256_hex(&body)),
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

/// The object a merge writes in the target's directory: the whole chain's data.
pub const SYNTHETIC_FULL: &str = "synthetic-full.xbstream";

/// The object a volume merge writes in the target's directory: that volume's chain, whole.
pub fn synthetic_volume(volume: &str) -> String {
    format!("vol-{volume}.synthetic-full.img")
}

/// Every key of a merge job lies in its own backup's directory of the job's cluster: a forged
/// job must not consolidate another cluster's (or another backup's) objects into this one.
pub fn check_merge_keys(prefix: &str, job: &MergeJob) -> Result<(), String> {
    for backup in job.sources.iter().chain([&job.target]) {
        for key in &backup.artifacts {
            sexton_shared::object_store::check_backup_key(
                prefix,
                &job.cluster,
                &backup.backup_name,
                backup.id.as_str(),
                key,
            )
            .map_err(|err| format!("backup {}: {err}", backup.id))?;
        }
    }
    Ok(())
}

/// Performs a merge job (Trilio's consolidation) in its smallest honest form: writes a
/// synthetic full in the target's own directory ([`SYNTHETIC_FULL`], or
/// [`synthetic_volume`] for a volume merge) holding the data objects of the sources (oldest
/// first) and of the target, so the target no longer needs its ancestors; then reports the
/// A merge job names an object of its chain that is not in the bucket: no retry brings it.
#[derive(Debug)]
struct MissingObject(String);

impl std::fmt::Display for MissingObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MissingObject {}

/// target (or its volume) as a full with no parent, listing its old objects and the new one.
/// The sources are not touched: retention deletes them once the scheduler has recorded the
/// merge. Idempotent: a redelivered job rewrites the same object and reports the same thing.
async fn merge_chain(
    js: &jetstream::Context,
    store: &ObjectStore,
    job: &MergeJob,
) -> anyhow::Result<()> {
    let started_at = Utc::now();
    let target = &job.target;
    let directory = store.backup_prefix(&job.cluster, &target.backup_name, target.id.as_str());
    let object_name = match &job.volume {
        None => SYNTHETIC_FULL.to_owned(),
        Some(volume) => synthetic_volume(volume),
    };
    let synthetic_key = format!("{directory}{object_name}");
    let mut body: Vec<u8> = Vec::new();
    for backup in job.sources.iter().chain([target]) {
        // A source that is itself a synthetic full (an earlier merge) holds its whole chain.
        let own_synthetic = backup
            .artifacts
            .iter()
            .find(|k| k.ends_with(&format!("/{}/{object_name}", backup.id)));
        let keys: Vec<&String> = match own_synthetic {
            Some(key) => vec![key],
            None => backup
                .artifacts
                .iter()
                .filter(|k| !sexton_shared::records::BackupRecord::is_metadata_key(k))
                .collect(),
        };
        for key in keys {
            if *key == synthetic_key {
                continue;
            }
            // A missing object of the chain means the chain cannot be consolidated: refuse the
            // job (as `sexton exec` does) rather than report a synthetic full that lacks data,
            // or wait for an object the job named but nothing will write (issue 26).
            let data = store.get(key).await?.ok_or_else(|| {
                MissingObject(format!(
                    "object {key} of backup {} is missing; the chain cannot be merged",
                    backup.id
                ))
            })?;
            body.extend_from_slice(&data);
        }
    }
    let synthetic = put_digested(store, &synthetic_key, body).await?;
    // metadata.json is rewritten to describe the target as it now is, so a catalog rebuilt
    // from the bucket sees the merge too.
    let metadata_key = format!("{directory}{}", metadata::FILE_NAME);
    let rewritten = rewrite_metadata(
        store,
        &metadata_key,
        job,
        std::slice::from_ref(&synthetic),
        None,
    )
    .await?;
    let report = merge_report(
        job,
        &metadata_key,
        vec![synthetic],
        rewritten,
        started_at.fixed_offset(),
    );
    let volume = job.volume.as_deref().unwrap_or("");
    channels::REPORTS
        .publish_once(js, &report, &channels::ids::merge_report(job))
        .await?;
    tracing::info!(cluster = %job.cluster, target = %target.id, volume, sources = job.sources.len(), "merge done and reported");
    Ok(())
}

/// The report of a merge job done: the target (or its volume) is a full without parent, with
/// its old objects and `new` (the objects the merge wrote into its directory). `rewritten`:
/// the target's `metadata.json` (at `metadata_key`) was rewritten to say so.
pub fn merge_report(
    job: &MergeJob,
    metadata_key: &str,
    new: Vec<ObjectDigest>,
    rewritten: bool,
    started_at: chrono::DateTime<chrono::FixedOffset>,
) -> Report {
    let target = &job.target;
    let mut keys = target.artifacts.clone();
    for object in &new {
        if !keys.contains(&object.key) {
            keys.push(object.key.clone());
        }
    }
    let size: u64 = new.iter().map(|o| o.size).sum();
    let (artifacts, volumes) = match &job.volume {
        None => (keys, Vec::new()),
        // A completed report lists its objects; a volume merge's are the volume's (and the
        // backup's metadata.json, rewritten).
        Some(volume) => {
            let mut artifacts = keys.clone();
            if rewritten {
                artifacts.push(metadata_key.to_string());
            }
            (
                artifacts,
                vec![ReportVolume {
                    name: volume.clone(),
                    kind: BackupKind::Full,
                    parent: None,
                    keys,
                    failed: false,
                    size_bytes: Some(size),
                }],
            )
        }
    };
    Report {
        schema_version: wire::SCHEMA_VERSION,
        backup_id: target.id.clone(),
        cluster: job.cluster.clone(),
        plan: job.plan.clone(),
        schedule: None,
        backup_name: target.backup_name.clone(),
        status: ReportStatus::Completed,
        kind: BackupKind::Full,
        parent: None,
        // When the merge ran; the catalog keeps the backup's own times (its recovery point).
        started_at: Some(started_at),
        completed_at: Some(Utc::now().fixed_offset()),
        tick: None,
        artifacts,
        size_bytes: Some(size),
        labels: Default::default(),
        tags: Vec::new(),
        error: None,
        volumes,
        holds: Vec::new(),
        merge: Some(MergeDone {
            target_uid: target.uid.clone(),
            sources: job.sources.iter().map(|b| b.id.clone()).collect(),
            volume: job.volume.clone(),
        }),
        objects: new,
        log_range: None,
        differential: false,
    }
}

/// Rewrites the target's `metadata.json` after a merge: the backup (or the merged volume) is a
/// full without parent now, and holds the `merged` objects. `executor` facts, if any, are
/// added to the document's own (a merge's tool may record what it did). `false` when the
/// target has no metadata document of ours (written by an older executor): it is left as it is.
pub async fn rewrite_metadata(
    store: &ObjectStore,
    key: &str,
    job: &MergeJob,
    merged: &[ObjectDigest],
    executor: Option<&serde_json::Map<String, serde_json::Value>>,
) -> anyhow::Result<bool> {
    let Some(body) = store.get(key).await? else {
        return Ok(false);
    };
    let Ok(mut document) = BackupMetadata::decode(&body) else {
        tracing::warn!(
            key,
            "the merge target's metadata.json is not a sexton document; left as is"
        );
        return Ok(false);
    };
    for object in merged {
        document.objects.retain(|o| o.key != object.key);
        document.objects.push(object.clone());
    }
    let tag = match &job.volume {
        None => {
            document.kind = BackupKind::Full;
            document.parent = None;
            "synthetic-full".to_string()
        }
        Some(name) => {
            if let Some(volume) = document.volumes.iter_mut().find(|v| &v.name == name) {
                volume.kind = BackupKind::Full;
                volume.parent = None;
                for object in merged {
                    if !volume.keys.contains(&object.key) {
                        volume.keys.push(object.key.clone());
                    }
                }
            }
            if document.volumes.iter().all(|v| v.kind == BackupKind::Full) {
                document.kind = BackupKind::Full;
            }
            format!("synthetic-full:{name}")
        }
    };
    if !document.tags.contains(&tag) {
        document.tags.push(tag);
    }
    if let Some(facts) = executor.filter(|facts| !facts.is_empty()) {
        let mut own = match document.executor.take() {
            Some(serde_json::Value::Object(own)) => own,
            _ => serde_json::Map::new(),
        };
        own.extend(facts.clone());
        document.executor = Some(serde_json::Value::Object(own));
    }
    store.put(key, document.encode().into()).await?;
    Ok(true)
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
