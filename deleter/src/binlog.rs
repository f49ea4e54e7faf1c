//! Binlog garbage collection (seed 003): one job per cluster names the segments the retention
//! plan lets go and the horizon (the start of the oldest kept full backup). The deleter trusts
//! none of it blindly:
//!
//! 1. every key of the job must be a segment of the cluster's binlog folder (else: refused);
//! 2. the horizon is pulled back to the start of the oldest full backup the catalog still
//!    holds ([`safe_horizon`]), so a stale job cannot shorten the recovery window; with no
//!    completed full backup in the catalog there is no horizon to believe, and the job is
//!    refused with an incident (a forged job on a cluster without records deletes nothing);
//! 3. of the job's keys, only those the index lists with a last event before that horizon go
//!    (an unknown end is kept), plus orphans: objects of the folder that the index does not list
//!    and that were written before the horizon ([`select_orphans`]);
//! 4. the objects are deleted first (`DeleteObjects`, per-key errors checked), and the index is
//!    rewritten **last**, with `If-Match` on the ETag read; on 412 it is re-read and the
//!    removals applied again ([`store::update`]).
//!
//! A crash at any point leaves an index that parses and still lists every segment a kept
//! backup needs (it only ever loses entries whose objects are already gone and which end before
//! the horizon); the redelivered job, or the next one, finishes the work. A malformed index is
//! never rewritten: the job is refused, recorded as an incident, and deletes nothing.

use crate::view::CatalogViews;
use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use async_nats::jetstream::{self};
use chrono::{DateTime, FixedOffset, Utc};
use prometheus::{IntCounter, IntCounterVec, Opts, Registry};
use sexton_model::{
    names::{ClusterName, LocationName},
    records::BackupRecord,
    wire::{self, BinlogGcJob, Incident},
};
use sexton_shared::{
    binlog::{self, check_segment_key, safe_horizon_with, select_orphans, store},
    channels::{self, Channel},
    config::Config,
    object_store::{ObjectError, ObjectStore},
    outcome::{publish_incident, Outcome},
    planning,
    schedules_view::SchedulesView,
    topology::Topology,
    Shutdown,
};

/// After this many deliveries spent waiting for older full backups to be deleted, a job stops
/// waiting (acknowledged): the next retention pass publishes a new one.
const MAX_WAITING_DELIVERIES: i64 = 10;

/// The binlog collector's metrics, registered in the deleter's registry.
pub struct BinlogMetrics {
    pub jobs: IntCounterVec,
    pub segments_deleted: IntCounter,
    pub orphans_deleted: IntCounter,
    pub index_conflicts: IntCounter,
}

impl BinlogMetrics {
    pub fn register(registry: &Registry) -> anyhow::Result<BinlogMetrics> {
        let jobs = IntCounterVec::new(
            Opts::new(
                "sexton_binlog_gc_jobs_total",
                "binlog garbage-collection jobs handled, by outcome",
            ),
            &["outcome"],
        )?;
        let segments_deleted = IntCounter::new(
            "sexton_binlog_segments_deleted_total",
            "expired binlog segments removed from the object store and the index",
        )?;
        let orphans_deleted = IntCounter::new(
            "sexton_binlog_orphans_deleted_total",
            "binlog objects no index listed, removed once older than the horizon",
        )?;
        let index_conflicts = IntCounter::new(
            "sexton_binlog_index_conflicts_total",
            "conditional writes of a binlog index lost to another writer (then retried)",
        )?;
        registry.register(Box::new(jobs.clone()))?;
        registry.register(Box::new(segments_deleted.clone()))?;
        registry.register(Box::new(orphans_deleted.clone()))?;
        registry.register(Box::new(index_conflicts.clone()))?;
        Ok(BinlogMetrics {
            jobs,
            segments_deleted,
            orphans_deleted,
            index_conflicts,
        })
    }
}

/// How many cluster locks the collector keeps (see [`Collector`]).
const CLUSTER_LOCKS: usize = 64;

#[derive(Clone)]
pub struct Collector {
    topology: Topology,
    /// Each cluster's catalog, shared with the delete jobs: brought up to date per job.
    views: Arc<CatalogViews>,
    store: ObjectStore,
    prefix: String,
    metrics: Arc<BinlogMetrics>,
    /// One job of a cluster at a time: a fixed set of locks, a cluster's chosen by the hash of
    /// its name and taken for the whole pass. Fixed, so that jobs naming ever new clusters (a
    /// job's cluster is a claim) cannot grow it; two clusters sharing a lock only take turns.
    clusters: sexton_shared::service::ClusterLocks,
    /// The other locations, read for their binlog indexes: a segment a location needs and
    /// lacks stays here until the copier copied it (issue 28).
    locations: Arc<BTreeMap<LocationName, ObjectStore>>,
    /// The schedules, for the policies a binlog job is judged with (issue 30).
    schedules: Arc<SchedulesView>,
    /// Jobs at once, all consumers together (`deleter.concurrency`). One at a time fell behind
    /// a steady load (every retention run that moves a cluster's horizon publishes a job, and
    /// a pass lists the cluster's folder): at 60 completions/s on 2 cores, 1,271 jobs were
    /// still queued when the deletions were done (issue 32). Jobs of different clusters touch
    /// different folders and indexes; the index is rewritten with `If-Match` either way.
    in_flight: Arc<tokio::sync::Semaphore>,
    /// The permits `in_flight` started with.
    limit: usize,
}

impl Collector {
    /// The collector, its metrics registered in `registry`. At most `deleter.concurrency`
    /// jobs run at once, all consumers together.
    pub fn new(
        topology: Topology,
        views: Arc<CatalogViews>,
        store: ObjectStore,
        locations: Arc<BTreeMap<LocationName, ObjectStore>>,
        config: &Config,
        registry: &Registry,
    ) -> anyhow::Result<Collector> {
        Ok(Collector {
            views,
            schedules: Arc::new(SchedulesView::new(topology.schedules.clone())),
            topology,
            store,
            prefix: config.s3.prefix.clone(),
            metrics: Arc::new(BinlogMetrics::register(registry)?),
            clusters: sexton_shared::service::ClusterLocks::new(CLUSTER_LOCKS),
            locations,
            in_flight: Arc::new(tokio::sync::Semaphore::new(
                config.deleter.concurrency.max(1),
            )),
            limit: config.deleter.concurrency.max(1),
        })
    }

    /// One job: handled within the collector's bound on jobs at once, settled, in its span.
    async fn handle_one(&self, channel: &Channel<BinlogGcJob>, message: &jetstream::Message) {
        let _turn = self
            .in_flight
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let outcome = channels::deliver(
            channel,
            "deleter",
            &self.topology.jetstream,
            None,
            message,
            |job| self.handle(job, message),
        )
        .await;
        self.metrics
            .jobs
            .with_label_values(&[outcome.label()])
            .inc();
    }
}

/// Consumes the binlog jobs published before issue 32 (`SEXTON_JOBS`, durable
/// `deleter-binlog`) until `shutdown` trips: up to `deleter.concurrency` at once, one of each
/// cluster at a time. Every replica reads it; once it is empty it costs an idle pull.
pub async fn run_unpartitioned(collector: Collector, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let jetstream = collector.topology.jetstream.clone();
    let consumer = channels::LEGACY_BINLOG_DURABLE
        .open(
            &jetstream,
            None,
            channels::Settings {
                ack_wait: ACK_WAIT,
                // A crashed replica's job waits out ack_wait without holding up the others.
                max_ack_pending: Some(64),
            },
        )
        .await?;
    let in_flight = collector.limit;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(in_flight)
        .messages()
        .await
        .context("reading binlog jobs")?;
    // Each job is finished even during shutdown: each step is short and idempotent.
    sexton_shared::nats::handle_concurrently(
        &mut messages,
        &mut shutdown,
        "binlog jobs",
        in_flight,
        |message| {
            let collector = collector.clone();
            async move {
                collector
                    .handle_one(&channels::LEGACY_BINLOG_JOBS, &message)
                    .await
            }
        },
    )
    .await
}

/// How long a binlog job stays with the replica that took it before it is delivered again.
const ACK_WAIT: Duration = Duration::from_secs(60);

/// How many jobs one pull of a partition asks for, and how long it waits for them.
const PARTITION_BATCH: usize = 8;
const PARTITION_PULL: Duration = Duration::from_secs(2);

/// Collects one partition's binlog jobs (SEXTON_BINLOG) while this replica holds it (`stop`
/// trips when it lets go of it, loses it, or shuts down): pull after pull, a job at a time (a
/// partition's clusters one after another; the partitions at once, within the collector's
/// bound).
pub async fn consume_partition(collector: Collector, partition: u16, mut stop: Shutdown) {
    let mut reader = sexton_shared::partitions::PartitionReader::new(
        collector.topology.jetstream.clone(),
        &channels::BINLOG_DURABLE,
        partition,
        channels::Settings::ack_wait(ACK_WAIT),
        PARTITION_PULL,
    );
    while let Some(mut pull) = reader.pull(PARTITION_BATCH, &mut stop).await {
        while let Some(message) = pull.next(&stop).await {
            collector.handle_one(&channels::BINLOG_JOBS, &message).await;
        }
        pull.finish().await;
    }
}

impl Collector {
    /// The segments of `expired` that some location holding or awaiting a full copy of the
    /// cluster still needs and lacks ([`binlog::awaiting_copy`]). A location this deleter
    /// cannot read (down, an unreadable index, not configured here) keeps everything its
    /// horizon needs.
    async fn awaiting_copies(
        &self,
        cluster: &ClusterName,
        records: &[BackupRecord],
        index: &binlog::BinlogIndex,
        expired: &[String],
    ) -> BTreeSet<String> {
        let mut awaited = BTreeSet::new();
        if expired.is_empty() {
            return awaited;
        }
        let named: BTreeSet<&LocationName> = records
            .iter()
            .flat_map(|record| record.copy_to.iter().chain(record.copies.keys()))
            .collect();
        for name in named {
            let horizon = binlog::location_horizon(records, name);
            if horizon == binlog::LocationHorizon::NoFull {
                continue;
            }
            let there = match self.locations.get(name) {
                None => {
                    tracing::warn!(%cluster, location = %name, "location not configured here: its binlog needs are unknown, the segments it may need are kept");
                    None
                }
                Some(store_there) => {
                    let folder = binlog::binlog_prefix(store_there.prefix(), cluster);
                    let key = binlog::index_key(store_there.prefix(), cluster);
                    match store::read(store_there, &key, &folder).await {
                        Ok(snapshot) => Some((snapshot.index, store_there.prefix())),
                        Err(err) => {
                            tracing::warn!(%cluster, location = %name, error = %err, "cannot read the location's binlog index; the segments it may need are kept");
                            None
                        }
                    }
                }
            };
            awaited.extend(match &there {
                Some((there, prefix)) => binlog::awaiting_copy(
                    index,
                    expired,
                    &horizon,
                    Some(there),
                    &self.prefix,
                    prefix,
                ),
                None => binlog::awaiting_copy(index, expired, &horizon, None, &self.prefix, ""),
            });
        }
        awaited
    }

    /// One job, received from `message` (`channels::BINLOG_JOBS`: the body names the cluster
    /// its subject names, so the job is of a cluster of the partition this replica holds).
    pub async fn handle(&self, job: BinlogGcJob, message: &jetstream::Message) -> Outcome {
        let delivered = message.info().map(|info| info.delivered).unwrap_or(1);
        match self.collect(&job, delivered).await {
            Ok(outcome) => outcome,
            Err(err) => {
                tracing::warn!(cluster = %job.cluster, error = format!("{err:#}"), "binlog gc failed; will retry");
                Outcome::RetryAfter(Duration::from_secs(5))
            }
        }
    }

    /// One pass over a cluster's binlog folder; see the module documentation for the order.
    pub async fn collect(&self, job: &BinlogGcJob, delivered: i64) -> anyhow::Result<Outcome> {
        let cluster = &job.cluster;
        let _one_at_a_time = self.clusters.lock(cluster).await;
        let folder = binlog::binlog_prefix(&self.prefix, cluster);
        let index_key = binlog::index_key(&self.prefix, cluster);
        for key in &job.delete {
            if let Err(why) = check_segment_key(&folder, key) {
                return Ok(Outcome::Poison(format!(
                    "binlog gc job for {cluster} names {:?}: {why}",
                    key.chars().take(200).collect::<String>()
                )));
            }
        }

        // The view, brought up to date from the catalog's leader, not a listing per job (issue
        // 32): as fresh as a listing made now, without a consumer.
        let records = self.views.current_records(cluster).await?;
        // Backups a plan made now keeps restorable to their own end only (standalone, past
        // pitr_full; issue 30) do not hold the horizon back; their own ranges are kept below.
        // Judged with the schedules' policies as they are now, as every delete job is.
        let schedules = self.schedules.of_cluster(cluster).await?;
        let range_only = planning::range_only_backups(
            &records,
            &planning::group_policies(&schedules),
            Utc::now(),
        );
        let safe = safe_horizon_with(job.horizon, &records, &range_only);
        if let Some(reason) = &safe.reason {
            tracing::info!(
                %cluster,
                reason,
                horizon = %safe.horizon.map_or_else(|| "none".to_string(), |h| h.to_rfc3339()),
                "binlog horizon pulled back by the catalog"
            );
        }
        if let Some(why) = safe.refused {
            return Ok(Outcome::Poison(format!("binlog gc for {cluster}: {why}")));
        }
        let Some(horizon) = safe.horizon else {
            return Ok(Outcome::Done);
        };

        let snapshot = match store::read(&self.store, &index_key, &folder).await {
            Ok(snapshot) => snapshot,
            Err(err @ store::StoreError::Malformed { .. }) => {
                return Ok(Outcome::Poison(format!(
                    "refusing binlog gc for {cluster}: {err}; nothing deleted"
                )))
            }
            Err(err) => return Err(err.into()),
        };
        let candidates: BTreeSet<String> = job.delete.iter().cloned().collect();
        let mut expired = snapshot.index.select_expired(&candidates, horizon);
        let ranges = planning::kept_for_ranges(&snapshot.index, &expired, &records, &range_only);
        if !ranges.is_empty() {
            tracing::info!(%cluster, segments = ranges.len(), "binlog segments kept: a backup restorable to its own end needs them");
            expired.retain(|key| !ranges.contains(key));
        }
        let awaited = self
            .awaiting_copies(cluster, &records, &snapshot.index, &expired)
            .await;
        if !awaited.is_empty() {
            tracing::info!(%cluster, segments = awaited.len(), "binlog segments kept: a location still needs them and has no copy yet");
            expired.retain(|key| !awaited.contains(key));
        }
        let swept = match sweep(&self.store, &index_key, &folder, &snapshot.index, expired, horizon)
            .await
        {
            Ok(swept) => swept,
            Err(SweepError::MalformedAfter(err)) => {
                return Ok(Outcome::Poison(format!(
                    "binlog index of {cluster} became unreadable after its segments were deleted: {err}"
                )))
            }
            Err(SweepError::Failed(err)) => return Err(err),
        };
        self.metrics.orphans_deleted.inc_by(swept.orphans as u64);
        self.metrics
            .index_conflicts
            .inc_by(u64::from(swept.conflicts));
        self.metrics.segments_deleted.inc_by(swept.segments as u64);
        if let Some(generation) = swept.generation {
            tracing::info!(
                %cluster,
                %horizon,
                segments = swept.segments,
                orphans = swept.orphans,
                conflicts = swept.conflicts,
                generation,
                "binlog segments deleted and index rewritten"
            );
        } else if swept.orphans > 0 {
            tracing::info!(%cluster, orphans = swept.orphans, "binlog orphans deleted");
        }
        if publish_permanent_failure(
            &self.topology.jetstream,
            "binlog-delete-failed",
            cluster,
            sexton_shared::channels::BINLOG_JOBS.subject(cluster),
            "binlog objects",
            &swept.failed,
        )
        .await
        {
            return Ok(Outcome::Done);
        }
        if let Some(failure) = swept.failed.first() {
            tracing::warn!(%cluster, error = %failure, "transient binlog delete failure; will retry");
            return Ok(Outcome::RetryAfter(Duration::from_secs(5)));
        }
        if !awaited.is_empty() && delivered < MAX_WAITING_DELIVERIES {
            // A location's copy of them is on its way (the copier's next pass): once it is
            // there they go. The same decision is published again only after the duplicate
            // window, so the job itself waits, with growing delays (2 s to a minute).
            let delay = Duration::from_secs((1u64 << delivered.clamp(1, 6) as u32).min(60));
            return Ok(Outcome::RetryAfter(delay));
        }
        if !safe.waiting_for.is_empty() && delivered < MAX_WAITING_DELIVERIES {
            // Older full backups are being deleted right now: once they are gone this job can
            // go as far as it asks.
            tracing::info!(%cluster, waiting_for = ?safe.waiting_for, "binlog gc waits for older full backups to be deleted");
            return Ok(Outcome::RetryAfter(Duration::from_secs(2)));
        }
        Ok(Outcome::Done)
    }
}

/// What one [`sweep`] did.
#[derive(Debug, Default)]
pub struct Swept {
    /// Segments whose objects went and that left the index.
    pub segments: usize,
    /// Objects no index listed, deleted.
    pub orphans: usize,
    /// Objects that could not be deleted (kept in the index).
    pub failed: Vec<ObjectError>,
    /// Conditional writes of the index lost to other writers on the way.
    pub conflicts: u32,
    /// The index's generation once rewritten; `None` when it was not rewritten.
    pub generation: Option<u64>,
}

#[derive(Debug)]
pub enum SweepError {
    /// The index became unreadable after objects were deleted: it is not rewritten.
    MalformedAfter(store::StoreError),
    /// The store failed (retry later).
    Failed(anyhow::Error),
}

/// The deleting half of a pass over a binlog folder, the primary's or a location's, in the
/// order the module documentation gives. The caller took the cluster's lock, read `index`
/// (refusing a malformed one), decided the horizon and chose `expired` among the segments it
/// lists (each with a last event before `horizon`). Here the orphans older than the horizon are
/// added, those objects deleted (per-key errors in [`Swept::failed`]), and the index rewritten
/// **last**, conditionally, without the entries whose objects are gone.
pub async fn sweep(
    store: &ObjectStore,
    index_key: &str,
    folder: &str,
    index: &binlog::BinlogIndex,
    expired: Vec<String>,
    horizon: DateTime<FixedOffset>,
) -> Result<Swept, SweepError> {
    let objects = store
        .list(folder)
        .await
        .context("listing the binlog folder")
        .map_err(SweepError::Failed)?;
    let orphans = select_orphans(&objects, index, folder, horizon);

    let mut doomed = expired.clone();
    doomed.extend(orphans.iter().cloned());
    let report = store
        .delete_keys_each(&doomed)
        .await
        .context("deleting binlog segments")
        .map_err(SweepError::Failed)?;
    // A request that failed as a whole fails the pass (retried later), as a listing that
    // failed does; per-key refusals are the pass's `failed`.
    if let Some(err) = report.request_failed {
        return Err(SweepError::Failed(
            anyhow::Error::new(err).context("deleting binlog segments"),
        ));
    }
    let deleted: BTreeSet<String> = report.deleted.iter().cloned().collect();
    let removals: BTreeSet<String> = expired
        .iter()
        .filter(|key| deleted.contains(*key))
        .cloned()
        .collect();
    let mut swept = Swept {
        orphans: orphans.iter().filter(|key| deleted.contains(*key)).count(),
        failed: report.failed,
        ..Swept::default()
    };

    // The index last: only entries whose objects are gone leave it.
    if !removals.is_empty() {
        let updated = store::update(store, index_key, folder, |index| {
            index.apply_removals(&removals) > 0
        })
        .await;
        match updated {
            Ok(updated) => {
                swept.segments = removals.len();
                swept.conflicts = updated.conflicts;
                swept.generation = Some(updated.generation);
            }
            Err(err @ store::StoreError::Malformed { .. }) => {
                return Err(SweepError::MalformedAfter(err))
            }
            Err(err) => return Err(SweepError::Failed(err.into())),
        }
    }
    Ok(swept)
}

/// Records an incident when one of `failed` is permanent (retrying cannot help: Object Lock, a
/// legal hold): an operator must look. Says whether it did.
pub async fn publish_permanent_failure(
    jetstream: &jetstream::Context,
    kind: &str,
    cluster: &ClusterName,
    subject: String,
    what: &str,
    failed: &[ObjectError],
) -> bool {
    let Some(failure) = failed.iter().find(|f| f.permanent) else {
        return false;
    };
    publish_incident(
        jetstream,
        Incident {
            schema_version: wire::SCHEMA_VERSION,
            service: "deleter".into(),
            kind: kind.into(),
            cluster: Some(cluster.to_string()),
            backup_id: None,
            subject,
            reason: format!(
                "{} {what} could not be deleted (kept in the index): {failure}",
                failed.len()
            ),
            at: Utc::now(),
        },
    )
    .await;
    true
}
