//! The copier (issue 28): takes copy jobs from `SEXTON_COPIES` and copies a backup from the
//! primary store to another location, objects through bounded memory, `metadata.json` last,
//! each checked against the size and SHA-256 intake recorded, ancestors first. Only once every
//! object is written does it record the copy in the catalog (a compare-and-set on the record),
//! so a copier killed at any point leaves nothing that counts; the next delivery of the job
//! copies again. It deletes nothing anywhere.
//!
//! A job is a claim: the copier copies only a backup the catalog holds, with the uid the job
//! names, completed, that a copy rule sends to the job's location, to a location of its own
//! configuration. Anything else is refused as poison (an incident, nothing copied).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::{self, consumer::PullConsumer};
use chrono::Utc;
use sexton_shared::{
    catalog::{CasError, Catalog},
    channels,
    config::Config,
    copies::{self, destination_key, CopyJob, CopyState, CopyVerdict, LocationCopy},
    names::{BackupId, ClusterName, LocationName},
    object_store::{copy::CopyError, transfer::UploadSettings, ObjectStore},
    outcome::{publish_incident, Outcome},
    records::{BackupRecord, BackupStatus, ScheduleRecord},
    telemetry, topology,
    topology::Topology,
    wire::{self, Incident},
    Shutdown,
};

mod binlog;
mod lease;
pub mod metrics;
mod transitions;

/// How deep a chain the copier follows to copy missing ancestors first.
const MAX_CHAIN: usize = 10_000;

/// A location the copier writes to: its client (its own credentials) and default class.
#[derive(Clone)]
struct Location {
    store: ObjectStore,
    storage_class: Option<String>,
    /// The location locks what it keeps (`[locations.<name>.lock]`, issue 29): a copy landing
    /// there asks for a retention run, which locks it at once.
    locked: bool,
}

/// How long a job waits at most before it comes back when another replica holds its cluster.
const BUSY_RETRY: Duration = Duration::from_secs(10);

/// A replica's turn at a cluster: the cluster's slot in this process, then its lease across
/// replicas ([`lease`]). Both go when it is dropped.
struct Turn<'a> {
    _lease: lease::Lease,
    _local: tokio::sync::MutexGuard<'a, ()>,
}

impl Copier {
    /// Waits for `cluster`'s turn in this replica, then takes its lease: `None` when another
    /// replica holds it now.
    async fn turn(&self, cluster: &ClusterName) -> anyhow::Result<Option<Turn<'_>>> {
        let local = self.clusters.lock(cluster).await;
        Ok(self.leases.try_take(cluster).await?.map(|lease| Turn {
            _lease: lease,
            _local: local,
        }))
    }
}

/// What every copy job shares.
struct Copier {
    topology: Topology,
    catalog: Catalog,
    source: ObjectStore,
    locations: BTreeMap<LocationName, Location>,
    settings: UploadSettings,
    metrics: Arc<metrics::Metrics>,
    /// One copy job of a cluster at a time: a chain's jobs copy the same ancestors, and two of
    /// them at once wrote one backup twice, the second still writing after the location's
    /// retention had deleted the first (objects left there that no copy counts). Within this
    /// replica; `leases` does the same across replicas.
    clusters: sexton_shared::service::ClusterLocks,
    leases: lease::Leases,
    /// Each cluster's records, caught up before each binlog pass (a location's horizon).
    views: sexton_shared::catalog_view::CatalogView<sexton_shared::catalog_view::Records>,
    schedules: sexton_shared::schedules_view::SchedulesView,
    /// The last problem reported per (cluster, location) binlog archive: one incident per
    /// new problem, not one per pass.
    binlog_reported: std::sync::Mutex<BTreeMap<(ClusterName, LocationName), String>>,
}

pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let started = sexton_shared::service::start("copier", &config, shutdown).await?;
    let copier = Arc::new(Copier::open(&config, &started).await?);
    // Ready with NATS: a location (or the primary) being down delays copies, it does not make
    // the copier unready, so one store's outage never restarts the service.
    let readiness = telemetry::nats_readiness(started.client.clone());
    let registry = &copier.metrics.registry;
    started
        .serve("copier", &config, registry, readiness)
        .await?;
    let consumer = channels::COPY_DURABLE
        .open(
            &started.jetstream,
            None,
            channels::Settings {
                ack_wait: config.copier.ack_wait,
                max_ack_pending: Some((4 * config.copier.concurrency) as i64),
            },
        )
        .await?;
    let (mut tasks, shutdown) = (started.tasks, started.shutdown);
    copier.metrics.consumer.spawn_poller(
        started.jetstream,
        topology::STREAM_COPIES,
        topology::CONSUMER_COPIER,
        Duration::from_secs(5),
        shutdown.clone(),
    );
    let interval = config.copier.binlog_interval;
    let passes = binlog_passes(copier.clone(), interval, shutdown.clone());
    tasks.spawn("binlog copies", passes);
    let (concurrency, ack_wait) = (config.copier.concurrency, config.copier.ack_wait);
    let jobs = consume(copier, consumer, concurrency, ack_wait, shutdown);
    tasks.spawn("copy jobs", jobs);
    tasks.join(Duration::from_secs(30)).await
}

impl Copier {
    /// The copier's state: its stores (the primary and each location), its leases' bucket,
    /// its views of the catalog and the schedules, its metrics.
    async fn open(
        config: &Config,
        started: &sexton_shared::service::Started,
    ) -> anyhow::Result<Copier> {
        let source = ObjectStore::connect(&config.s3).await?;
        let mut locations = BTreeMap::new();
        for (name, store) in ObjectStore::connect_locations(config).await? {
            let configured = config.locations.get(name.as_str());
            let storage_class = configured.and_then(|location| location.storage_class.clone());
            let locked = configured.is_some_and(|location| location.s3.lock.is_some());
            locations.insert(
                name,
                Location {
                    store,
                    storage_class,
                    locked,
                },
            );
        }
        tracing::info!(locations = ?locations.keys().collect::<Vec<_>>(), "copying to");
        let leases = topology::copy_leases_bucket(&started.jetstream, config.nats.replicas)
            .await
            .context("opening the copy leases' bucket")?;
        let topology = started.topology.clone();
        Ok(Copier {
            catalog: Catalog::new(topology.catalog.clone()),
            views: sexton_shared::catalog_view::CatalogView::new(topology.catalog.clone()),
            schedules: sexton_shared::schedules_view::SchedulesView::new(
                topology.schedules.clone(),
            ),
            binlog_reported: Default::default(),
            topology,
            source,
            locations,
            settings: UploadSettings {
                part_size: config.copier.part_size,
                concurrency: config.copier.parts_in_flight,
            },
            metrics: Arc::new(metrics::Metrics::new()),
            clusters: sexton_shared::service::ClusterLocks::new(64),
            leases: lease::Leases::new(leases),
        })
    }
}

async fn consume(
    copier: Arc<Copier>,
    consumer: PullConsumer,
    concurrency: usize,
    ack_wait: Duration,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut messages = consumer
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading copy jobs")?;
    sexton_shared::nats::handle_concurrently(
        &mut messages,
        &mut shutdown,
        "copy jobs",
        concurrency,
        |message| {
            let copier = copier.clone();
            async move {
                // The job stays this replica's while it copies, however long that takes.
                let keep = sexton_shared::nats::KeepInProgress::start(&message, ack_wait / 3);
                // A job refused before it was read counts under `unknown`, `refused`.
                let labels = std::sync::Mutex::new(("unknown".to_string(), "refused"));
                channels::deliver(
                    &channels::COPY_JOBS,
                    "copier",
                    &copier.topology.jetstream,
                    Some(&copier.metrics.consumer),
                    &message,
                    |job| async {
                        let (location, label, outcome) = handle(&copier, job, &message).await;
                        *labels.lock().expect("not poisoned") = (location, label);
                        outcome
                    },
                )
                .await;
                drop(keep);
                let (location, label) = labels.into_inner().expect("not poisoned");
                copier
                    .metrics
                    .copies
                    .with_label_values(&[&location, label])
                    .inc();
            }
        },
    )
    .await
}

/// One copy job: the location and outcome labels for the metrics, and the outcome.
/// The job is received (`channels::COPY_JOBS`): it decoded and names its subject's cluster.
async fn handle(
    copier: &Copier,
    job: CopyJob,
    message: &jetstream::Message,
) -> (String, &'static str, Outcome) {
    let label = job.location.to_string();
    let Some(location) = copier.locations.get(&job.location) else {
        return (
            "unknown".into(),
            "refused",
            Outcome::Poison(format!(
                "copy job for backup {} of {}: location {} is not configured here",
                job.backup_id, job.cluster, job.location
            )),
        );
    };
    let delivered = message.info().map(|info| info.delivered).unwrap_or(1);
    let one_at_a_time = match copier.turn(&job.cluster).await {
        Ok(Some(turn)) => turn,
        // Another replica works on the cluster: the job comes back soon, to this replica or
        // that one.
        Ok(None) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered).min(BUSY_RETRY);
            return (label, "busy", Outcome::RetryAfter(delay));
        }
        Err(err) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered);
            tracing::warn!(cluster = %job.cluster, error = format!("{err:#}"), "cannot take the cluster's copy lease");
            return (label, "retry", Outcome::RetryAfter(delay));
        }
    };
    let copied = copy_backup(copier, &job, location).await;
    if matches!(copied, Ok(Done::Copied)) {
        // The binlog archive follows each backup there, so a restore from the location can
        // reach past the backup as soon as it counts.
        binlog_pass(copier, &job.cluster, &job.location, location).await;
    }
    drop(one_at_a_time);
    let (outcome_label, outcome) = match copied {
        Ok(done) => (done.label(), Outcome::Done),
        Err(Failure::Refused(why)) => ("refused", Outcome::Poison(why)),
        Err(Failure::Wait(why)) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered);
            tracing::warn!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, delay_s = delay.as_secs(), "copy not finished: {why}");
            ("retry", Outcome::RetryAfter(delay))
        }
        Err(Failure::Bad(incident)) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered);
            tracing::error!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, "copy refused: {}", incident.reason);
            report_bad(copier, incident).await;
            ("refused", Outcome::RetryAfter(delay))
        }
    };
    (label, outcome_label, outcome)
}

/// Every `interval`, for each (cluster, location) that a schedule's copy rule names and this
/// copier can write to: a binlog pass, then the storage-class transitions due.
async fn binlog_passes(
    copier: Arc<Copier>,
    interval: Duration,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.wait() => return Ok(()),
        }
        let schedules = match copier.schedules.all().await {
            Ok(schedules) => schedules,
            Err(err) => {
                tracing::warn!(
                    error = format!("{err:#}"),
                    "cannot read the schedules; binlog copies wait for the next pass"
                );
                continue;
            }
        };
        let pairs: std::collections::BTreeSet<(ClusterName, LocationName)> = schedules
            .iter()
            .flat_map(|schedule| {
                schedule
                    .copies
                    .iter()
                    .map(|rule| (schedule.cluster.clone(), rule.to.clone()))
            })
            .collect();
        for (cluster, name) in pairs {
            let Some(location) = copier.locations.get(&name) else {
                continue;
            };
            let one_at_a_time = match copier.turn(&cluster).await {
                Ok(Some(turn)) => turn,
                // Another replica's pass or job is on it: that replica does this pass's work.
                Ok(None) => continue,
                Err(err) => {
                    tracing::warn!(%cluster, error = format!("{err:#}"), "cannot take the cluster's copy lease; the next pass tries again");
                    continue;
                }
            };
            copy_awaited(&copier, &cluster, &name, location).await;
            binlog_pass(&copier, &cluster, &name, location).await;
            match transitions::pass(&copier, &cluster, &name, location, &schedules).await {
                Ok(moved) => {
                    for (outcome, n) in [("moved", moved.copies), ("retry", moved.failed)] {
                        copier
                            .metrics
                            .transitions
                            .with_label_values(&[name.as_str(), outcome])
                            .inc_by(n as u64);
                    }
                }
                Err(err) => {
                    tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "storage-class transitions not done; the next pass tries again")
                }
            }
            drop(one_at_a_time);
        }
    }
}

/// Makes the copies of `cluster` at `name` that no job will bring, while the source still
/// holds the backup (it keeps it for them: they are awaited):
/// - a copy a scrub of `name` found missing there (the scrub is the retention-worker's, and
///   only the scheduler publishes copy jobs);
/// - a copy whose rule's delay has passed (its job came early and was let go);
/// - any other copy awaited for longer than [`JOB_GRACE`] after it was due (a job lost).
///
/// The first copy that must wait (the location or the source not answering) ends the pass
/// for this location: the next pass tries again.
async fn copy_awaited(
    copier: &Copier,
    cluster: &ClusterName,
    name: &LocationName,
    location: &Location,
) {
    let records = match copier.views.current_records(cluster).await {
        Ok(records) => records,
        Err(err) => {
            tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "cannot read the catalog; missing copies wait for the next pass");
            return;
        }
    };
    let schedules = match copier.schedules.of_cluster(cluster).await {
        Ok(schedules) => schedules,
        Err(err) => {
            tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "cannot read the schedules; delayed copies wait for the next pass");
            return;
        }
    };
    let now = Utc::now();
    for record in records.iter().filter(|record| {
        record.held_at_primary()
            && record.stranded_from(copier.source.place()).is_none()
            && record.status == BackupStatus::Completed
            && match record.copies.get(name) {
                Some(copy) => copy.state == CopyState::Missing,
                None if record.copy_to.contains(name) => {
                    let delay = sexton_shared::records::rule_for(&schedules, record, name)
                        .and_then(|r| r.delay);
                    let due = record.completed_at.map_or(now, |completed| {
                        completed.with_timezone(&Utc)
                            + delay.map_or(JOB_GRACE, |delay| delay.delta())
                    });
                    due <= now
                }
                None => false,
            }
    }) {
        let job = CopyJob {
            schema_version: wire::SCHEMA_VERSION,
            cluster: cluster.clone(),
            backup_id: record.id.clone(),
            uid: record.uid.clone(),
            location: name.clone(),
        };
        let (label, result) = match copy_backup(copier, &job, location).await {
            Ok(done) => (done.label(), None),
            Err(Failure::Refused(why)) => ("refused", Some(why)),
            Err(Failure::Wait(why)) => ("retry", Some(why)),
            Err(Failure::Bad(incident)) => {
                let why = incident.reason.clone();
                report_bad(copier, incident).await;
                ("refused", Some(why))
            }
        };
        copier
            .metrics
            .copies
            .with_label_values(&[name.as_str(), label])
            .inc();
        match result {
            None => {
                tracing::info!(%cluster, backup = %record.id, location = %name, "awaited copy {label}")
            }
            Some(why) => {
                tracing::warn!(%cluster, backup = %record.id, location = %name, "awaited copy not made yet: {why}");
                if label == "retry" {
                    return;
                }
            }
        }
    }
}

/// One binlog pass, its metrics, and an incident when a new problem stops it.
async fn binlog_pass(
    copier: &Copier,
    cluster: &ClusterName,
    name: &LocationName,
    location: &Location,
) {
    let result = binlog::sync(copier, cluster, name, location).await;
    let outcome = match &result {
        Ok(synced) if synced.segments > 0 => "copied",
        Ok(_) => "current",
        Err(binlog::SyncError::Retry(_)) => "retry",
        Err(binlog::SyncError::Bad { .. }) => "refused",
    };
    copier
        .metrics
        .binlog_passes
        .with_label_values(&[name.as_str(), outcome])
        .inc();
    let key = (cluster.clone(), name.clone());
    match result {
        Ok(synced) => {
            copier
                .metrics
                .binlog_segments
                .with_label_values(&[name.as_str()])
                .inc_by(synced.segments as u64);
            copier
                .metrics
                .bytes
                .with_label_values(&[name.as_str()])
                .inc_by(synced.bytes);
            copier
                .binlog_reported
                .lock()
                .expect("not poisoned")
                .remove(&key);
            // Segments that landed where copies are locked are locked by the next run there.
            if synced.segments > 0 && location.locked {
                let message_id = format!(
                    "binlog-copied-{cluster}-{name}-{}",
                    Utc::now().timestamp_micros()
                );
                ask_retention_run(copier, cluster, name, &message_id).await;
            }
        }
        Err(binlog::SyncError::Retry(err)) => {
            tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "binlog archive not copied; the next pass tries again");
        }
        Err(binlog::SyncError::Bad { kind, reason }) => {
            tracing::error!(%cluster, location = %name, "{reason}");
            let new = copier
                .binlog_reported
                .lock()
                .expect("not poisoned")
                .insert(key, reason.clone())
                .as_ref()
                != Some(&reason);
            if new {
                publish_incident(
                    &copier.topology.jetstream,
                    Incident {
                        schema_version: wire::SCHEMA_VERSION,
                        service: "copier".into(),
                        kind: kind.into(),
                        cluster: Some(cluster.to_string()),
                        backup_id: None,
                        subject: channels::COPY_JOBS.subject(cluster),
                        reason,
                        at: Utc::now(),
                    },
                )
                .await;
            }
        }
    }
}

/// Why a copy did not finish.
enum Failure {
    /// The job can never succeed (forged, stale, not asked for): refused, nothing copied.
    Refused(String),
    /// Try again later (a store that did not answer, a record that changed).
    Wait(String),
    /// The data is not what intake recorded (corrupt, missing): an incident, then retried
    /// slowly, since someone may mend the source.
    Bad(Incident),
}

impl From<anyhow::Error> for Failure {
    fn from(err: anyhow::Error) -> Failure {
        Failure::Wait(format!("{err:#}"))
    }
}

/// How long after a copy was due (its backup completed, plus its rule's delay) the periodic
/// pass makes it itself when it is still awaited: its job is lost, or failing.
const JOB_GRACE: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// What a copy job came to, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Done {
    /// Whole at the location and recorded (or already there).
    Copied,
    /// Its rule's delay has not passed: the job is let go, and the periodic pass copies the
    /// backup once it has (the source holds it meanwhile).
    Deferred,
    /// Its `select: kept` rule's policy would delete the copy at once: recorded `skipped`.
    Skipped,
}

impl Done {
    fn label(self) -> &'static str {
        match self {
            Done::Copied => "copied",
            Done::Deferred => "deferred",
            Done::Skipped => "skipped",
        }
    }
}

/// What the backup's copy rule asks for it now ([`sexton_shared::planning::judge_copy`]): the rule is its
/// schedule's now; the group (for `select: kept`) the records of its plan as the catalog view
/// holds them, with `record` as just read.
async fn judge(
    copier: &Copier,
    record: &BackupRecord,
    location: &LocationName,
) -> Result<CopyVerdict, Failure> {
    let schedules = copier.schedules.of_cluster(&record.cluster).await?;
    let rule = sexton_shared::records::rule_for(&schedules, record, location);
    let group = match rule {
        Some(rule) if rule.select == copies::CopySelect::Kept => copier
            .views
            .current_records(&record.cluster)
            .await?
            .into_iter()
            .filter(|other| other.plan == record.plan && other.id != record.id)
            .collect(),
        _ => Vec::new(),
    };
    let mut members: Vec<&BackupRecord> = group.iter().collect();
    members.push(record);
    Ok(sexton_shared::planning::judge_copy(
        &members,
        record,
        location,
        rule,
        Utc::now(),
    ))
}

async fn copy_backup(copier: &Copier, job: &CopyJob, location: &Location) -> Result<Done, Failure> {
    let Some(entry) = copier.catalog.get(&job.cluster, &job.backup_id).await? else {
        return Err(Failure::Refused(format!(
            "backup {} of {} is not in the catalog",
            job.backup_id, job.cluster
        )));
    };
    let record = entry.value;
    if record.uid != job.uid {
        return Err(Failure::Refused(format!(
            "backup {} of {} has uid {}, not the job's {}: the job is for another backup of that id",
            record.id, record.cluster, record.uid, job.uid
        )));
    }
    if !record.copy_to.contains(&job.location) {
        return Err(Failure::Refused(format!(
            "no copy rule sends backup {} of {} to {}",
            record.id, record.cluster, job.location
        )));
    }
    // Copied (or being deleted, or deleted) there already: nothing to do. A copy a scrub
    // found missing there is copied again.
    if record
        .copies
        .get(&job.location)
        .is_some_and(|copy| copy.state != CopyState::Missing)
    {
        return Ok(Done::Copied);
    }
    if record.status != BackupStatus::Completed {
        return Err(Failure::Refused(format!(
            "backup {} of {} is {:?}, not completed: it is not copied",
            record.id, record.cluster, record.status
        )));
    }
    match judge(copier, &record, &job.location).await? {
        CopyVerdict::Copy => {}
        CopyVerdict::NotBefore(due) => {
            tracing::info!(cluster = %record.cluster, backup = %record.id, location = %job.location, due = %due, "copy delayed by its rule; the periodic pass makes it then");
            return Ok(Done::Deferred);
        }
        CopyVerdict::Skip(reasons) => {
            record_skip(copier, &record, &job.location, reasons).await?;
            return Ok(Done::Skipped);
        }
    }
    // The chain first: an incremental counts at a location only with its ancestors there.
    let chain = ancestors_missing(copier, &record, &job.location).await?;
    // Objects in another store than the one this copier reads (issue 54) are not missing:
    // the copy waits until they are moved (`sexton catalog migrate`).
    let here = copier.source.place();
    if let Some((stranded, there)) = std::iter::once(&record)
        .chain(chain.iter())
        .find_map(|r| Some((r, r.stranded_from(here)?)))
    {
        return Err(Failure::Refused(format!(
            "backup {} of {} is recorded in {there}, not in {here} where this copier reads: not \
             copied until it is moved (sexton catalog migrate)",
            stranded.id, stranded.cluster
        )));
    }
    let class = storage_class(copier, &record, &job.location, location).await?;
    for ancestor in chain.iter().rev() {
        copy_record(copier, ancestor, &job.location, location, class.as_deref()).await?;
    }
    copy_record(copier, &record, &job.location, location, class.as_deref()).await?;
    Ok(Done::Copied)
}

/// Records that `judged`'s copy at `name` is never made (compare-and-set, over the record as
/// judged): its rule's policy there would delete it at once, for `reasons`. The source then
/// holds it no longer for that location.
async fn record_skip(
    copier: &Copier,
    judged: &BackupRecord,
    name: &LocationName,
    reasons: Vec<String>,
) -> Result<(), Failure> {
    let Some(entry) = copier.catalog.get(&judged.cluster, &judged.id).await? else {
        return Err(Failure::Refused(format!(
            "backup {} of {} left the catalog while its copy to {name} was judged",
            judged.id, judged.cluster
        )));
    };
    let mut record = entry.value;
    if record.uid != judged.uid || record.copies.get(name) != judged.copies.get(name) {
        return Err(Failure::Wait(format!(
            "backup {} changed while its copy to {name} was judged; judging again",
            judged.id
        )));
    }
    record.keep_mark(entry.revision);
    let mut skipped = LocationCopy::new(CopyState::Skipped, Utc::now());
    skipped.delete_reasons = reasons;
    tracing::info!(cluster = %record.cluster, backup = %record.id, location = %name, reasons = ?skipped.delete_reasons, "copy skipped: the policy there would not keep it");
    record.copies.insert(name.clone(), skipped);
    match copier.catalog.update(&record, entry.revision).await {
        Ok(_) => Ok(()),
        Err(CasError::Conflict) => Err(Failure::Wait(format!(
            "backup {} changed while its copy to {name} was judged; judging again",
            judged.id
        ))),
        Err(CasError::Other(err)) => Err(err.into()),
    }
}

/// The ancestors of `record` not yet copied to `location`, nearest first.
async fn ancestors_missing(
    copier: &Copier,
    record: &BackupRecord,
    location: &LocationName,
) -> Result<Vec<BackupRecord>, Failure> {
    let mut missing = Vec::new();
    let mut queue: Vec<BackupId> = parents(record);
    let mut seen = std::collections::BTreeSet::new();
    while let Some(id) = queue.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        if seen.len() > MAX_CHAIN {
            return Err(Failure::Refused(format!(
                "the chain of backup {} is longer than {MAX_CHAIN}",
                record.id
            )));
        }
        let Some(parent) = copier.catalog.get(&record.cluster, &id).await? else {
            return Err(Failure::Bad(incident(
                &record.cluster,
                &record.id,
                "copy-chain-broken",
                format!(
                    "backup {} needs {id}, which the catalog does not hold: its chain cannot \
                     be copied to {location} whole",
                    record.id
                ),
            )));
        };
        let parent = parent.value;
        match parent.copies.get(location) {
            Some(copy) if copy.state == CopyState::Copied => continue,
            // Deleted there before this backup needed it, or found missing there by a scrub:
            // copied again.
            Some(copy)
                if matches!(
                    copy.state,
                    CopyState::Deleted | CopyState::Missing | CopyState::Skipped
                ) => {}
            // Its copy there is being deleted (the location's retention let it go before
            // this backup was there to need it): once it is gone, it is copied again.
            Some(copy) => {
                return Err(Failure::Wait(format!(
                    "the copy of {} at {location}, which backup {} needs, is {}; it is copied \
                     again once its deletion finished",
                    parent.id,
                    record.id,
                    copy.state.as_str()
                )))
            }
            None => {}
        }
        if parent.status != BackupStatus::Completed && parent.status != BackupStatus::Expiring {
            // A completed backup's ancestor that is not completed never will be: the chain
            // cannot be whole anywhere, which is news, not lag.
            return Err(Failure::Bad(incident(
                &record.cluster,
                &record.id,
                "copy-chain-broken",
                format!(
                    "backup {} needs {}, which is {:?}: its chain cannot be copied to \
                     {location} whole",
                    record.id, parent.id, parent.status
                ),
            )));
        }
        queue.extend(parents(&parent));
        missing.push(parent);
    }
    Ok(missing)
}

fn parents(record: &BackupRecord) -> Vec<BackupId> {
    let mut parents: Vec<BackupId> = record.parent.iter().cloned().collect();
    for volume in &record.volumes {
        if let Some(parent) = volume.parent.as_deref().and_then(|p| BackupId::new(p).ok()) {
            if !parents.contains(&parent) {
                parents.push(parent);
            }
        }
    }
    parents
}

/// The class the copy is written in: its rule's, else the location's default.
async fn storage_class(
    copier: &Copier,
    record: &BackupRecord,
    name: &LocationName,
    location: &Location,
) -> Result<Option<String>, Failure> {
    let Some(schedule) = &record.schedule else {
        return Ok(location.storage_class.clone());
    };
    let rule_class =
        match sexton_shared::leader_read::value(&copier.topology.schedules, schedule.as_str())
            .await?
        {
            Some(body) => serde_json::from_slice::<ScheduleRecord>(&body)
                .ok()
                .and_then(|s| s.copies.into_iter().find(|rule| &rule.to == name))
                .and_then(|rule| rule.storage_class),
            None => None,
        };
    Ok(rule_class.or_else(|| location.storage_class.clone()))
}

/// Copies one backup's objects (`metadata.json` last), then records the copy.
async fn copy_record(
    copier: &Copier,
    record: &BackupRecord,
    name: &LocationName,
    location: &Location,
    class: Option<&str>,
) -> Result<(), Failure> {
    if record.objects.is_empty() {
        return Err(Failure::Bad(incident(
            &record.cluster,
            &record.id,
            "copy-unprovable",
            format!(
                "backup {} has no sizes and checksums recorded (it predates intake): a copy of \
                 it to {name} could not be proven whole, so none is made",
                record.id
            ),
        )));
    }
    let started = std::time::Instant::now();
    let mut objects = record.objects.clone();
    // metadata.json last: a copy without it is not a backup to anyone who lists the location.
    objects.sort_by_key(|object| BackupRecord::is_metadata_key(&object.key));
    let mut written = Vec::with_capacity(objects.len());
    for object in &objects {
        if copier
            .source
            .check_key(&record.cluster, &object.key)
            .is_err()
        {
            return Err(Failure::Refused(format!(
                "backup {} lists {:?}, outside its cluster's prefix",
                record.id, object.key
            )));
        }
        let Some(target) =
            destination_key(copier.source.prefix(), location.store.prefix(), &object.key)
        else {
            return Err(Failure::Refused(format!(
                "backup {} lists {:?}, outside the source's prefix",
                record.id, object.key
            )));
        };
        match copier
            .source
            .copy_object_to(object, &location.store, &target, copier.settings, class)
            .await
        {
            Ok(digest) => {
                copier
                    .metrics
                    .bytes
                    .with_label_values(&[name.as_str()])
                    .inc_by(digest.size);
                copier
                    .metrics
                    .objects
                    .with_label_values(&[name.as_str()])
                    .inc();
                written.push(digest);
            }
            Err(err @ (CopyError::Corrupt { .. } | CopyError::Missing { .. })) => {
                return Err(Failure::Bad(incident(
                    &record.cluster,
                    &record.id,
                    "copy-refused",
                    format!(
                        "backup {} not copied to {name}: {err}; nothing of it counts there",
                        record.id
                    ),
                )))
            }
            Err(err) => return Err(Failure::Wait(err.to_string())),
        }
    }
    seen_at(&location.store, record, name, &written).await?;
    record_copy(copier, record, (name, location), written, class).await?;
    copier
        .metrics
        .seconds
        .with_label_values(&[name.as_str()])
        .observe(started.elapsed().as_secs_f64());
    tracing::info!(cluster = %record.cluster, backup = %record.id, location = %name, objects = objects.len(), "backup copied");
    Ok(())
}

/// Every object written is listed at the location with the size written: a copy counts only
/// once Sexton has seen it there, not on the strength of the store's answers to the writes.
/// One listing of the objects' common directory.
async fn seen_at(
    store: &ObjectStore,
    record: &BackupRecord,
    name: &LocationName,
    written: &[sexton_shared::wire::ObjectDigest],
) -> Result<(), Failure> {
    let directory = common_directory(written.iter().map(|o| o.key.as_str()));
    let listed: BTreeMap<String, i64> = store
        .list(&directory)
        .await
        .map_err(|err| Failure::Wait(err.to_string()))?
        .into_iter()
        .map(|info| (info.key, info.size))
        .collect();
    for object in written {
        if listed.get(&object.key) != Some(&(object.size as i64)) {
            return Err(Failure::Bad(incident(
                &record.cluster,
                &record.id,
                "copy-not-seen",
                format!(
                    "backup {} at {name}: {} was written ({} bytes) but is not listed there with \
                     that size; the copy does not count",
                    record.id, object.key, object.size
                ),
            )));
        }
    }
    Ok(())
}

/// The longest directory (ending in `/`, or empty) that holds every key.
fn common_directory<'a>(mut keys: impl Iterator<Item = &'a str>) -> String {
    let Some(first) = keys.next() else {
        return String::new();
    };
    let mut common = first;
    for key in keys {
        let mut shared = common
            .bytes()
            .zip(key.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !common.is_char_boundary(shared) {
            shared -= 1;
        }
        common = &common[..shared];
    }
    match common.rfind('/') {
        Some(end) => common[..=end].to_string(),
        None => String::new(),
    }
}

/// Records the copy on the backup's record (compare-and-set), unless the record is gone or is
/// another backup now: then the objects written stay at the location uncounted, and say so.
async fn record_copy(
    copier: &Copier,
    copied: &BackupRecord,
    (name, location): (&LocationName, &Location),
    objects: Vec<sexton_shared::wire::ObjectDigest>,
    class: Option<&str>,
) -> Result<(), Failure> {
    for _ in 0..16 {
        let Some(entry) = copier.catalog.get(&copied.cluster, &copied.id).await? else {
            return Err(Failure::Refused(format!(
                "backup {} of {} left the catalog while it was copied to {name}; its objects \
                 there are not counted",
                copied.id, copied.cluster
            )));
        };
        let mut record = entry.value;
        if record.uid != copied.uid {
            return Err(Failure::Refused(format!(
                "backup {} of {} was replaced while it was copied to {name}",
                copied.id, copied.cluster
            )));
        }
        if record
            .copies
            .get(name)
            .is_some_and(|copy| copy.is_held() && copy.state != CopyState::Missing)
        {
            return Ok(());
        }
        // A copy deleted at the location since this one began (another copier's, deleted by
        // the location's retention) may have taken objects this one wrote: nothing is
        // counted that was not seen after that, so the copy is made again.
        if record.copies.get(name) != copied.copies.get(name) {
            return Err(Failure::Wait(format!(
                "the copy of backup {} at {name} changed while it was copied; copying again",
                copied.id
            )));
        }
        record.keep_mark(entry.revision);
        let mut copy = LocationCopy::new(CopyState::Copied, Utc::now());
        copy.store = Some(location.store.place().clone());
        copy.objects = objects.clone();
        copy.storage_class = class.map(str::to_string);
        record.copies.insert(name.clone(), copy);
        match copier.catalog.update(&record, entry.revision).await {
            Ok(revision) => {
                if copier.locations.get(name).is_some_and(|l| l.locked) {
                    let message_id =
                        format!("copied-{}-{}-{name}-{revision}", copied.cluster, copied.id);
                    ask_retention_run(copier, &copied.cluster, name, &message_id).await;
                }
                return Ok(());
            }
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err.into()),
        }
    }
    Err(Failure::Wait("the record kept changing".into()))
}

/// Asks for a retention run of `cluster` once a copy counts (or binlog segments landed) at a
/// location that locks: the location's run locks it now (issue 29), not at the next sweep.
/// Best effort: the periodic sweep comes anyway, and until a copy is locked no run there
/// counts it.
async fn ask_retention_run(
    copier: &Copier,
    cluster: &ClusterName,
    location: &LocationName,
    message_id: &str,
) {
    if let Err(err) = channels::request_sweep(
        &copier.topology.jetstream,
        cluster,
        Utc::now(),
        false,
        &channels::SweepCause::Copied {
            id: message_id.to_string(),
        },
    )
    .await
    {
        tracing::warn!(%cluster, %location, error = %err, "cannot ask for a retention run; the next sweep does it");
    }
}

/// Publishes a copy's bad news; where the source's data is not what intake recorded (an object
/// gone or changed), it is evidence about the backup (issue 54): the retention-worker is asked
/// for a scrub of the cluster, which marks a backup whose objects are gone `missing` (then no
/// copy of it is attempted again) and leaves one whose objects are all there as it is.
async fn report_bad(copier: &Copier, incident: Incident) {
    let scrub = (incident.kind == "copy-refused")
        .then(|| incident.cluster.as_deref().map(ClusterName::new))
        .flatten()
        .and_then(Result::ok);
    let backup = incident.backup_id.clone().unwrap_or_default();
    publish_incident(&copier.topology.jetstream, incident).await;
    let Some(cluster) = scrub else {
        return;
    };
    // Once per backup within the stream's de-duplication window, however often the job is
    // retried.
    if let Err(err) = channels::request_sweep(
        &copier.topology.jetstream,
        &cluster,
        Utc::now(),
        true,
        &channels::SweepCause::CopyRefused {
            backup: backup.clone(),
        },
    )
    .await
    {
        tracing::warn!(%cluster, backup, error = format!("{err:#}"), "could not ask for a scrub after a refused copy; the scheduled scrub finds it");
    }
}

fn incident(cluster: &ClusterName, backup: &BackupId, kind: &str, reason: String) -> Incident {
    Incident {
        schema_version: wire::SCHEMA_VERSION,
        service: "copier".into(),
        kind: kind.into(),
        cluster: Some(cluster.to_string()),
        backup_id: Some(backup.to_string()),
        subject: channels::COPY_JOBS.subject(cluster),
        reason,
        at: Utc::now(),
    }
}

#[cfg(test)]
mod tests {
    use super::common_directory;

    #[test]
    fn the_common_directory_ends_at_a_slash() {
        let keys = ["dr/c1/db/b1/backup.xbstream", "dr/c1/db/b1/metadata.json"];
        assert_eq!(common_directory(keys.into_iter()), "dr/c1/db/b1/");
        let keys = ["dr/c1/db/b1/vol-a/x", "dr/c1/db/b1/vol-b/y"];
        assert_eq!(common_directory(keys.into_iter()), "dr/c1/db/b1/");
        assert_eq!(common_directory(["dr/c1/db/b1"].into_iter()), "dr/c1/db/");
        assert_eq!(common_directory(["a", "b"].into_iter()), "");
        // Keys that part inside a character part before it.
        assert_eq!(common_directory(["d/\u{e9}", "d/\u{e8}"].into_iter()), "d/");
        assert_eq!(common_directory(std::iter::empty()), "");
    }
}
