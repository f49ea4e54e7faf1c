//! The deleter: trusts no job. It takes delete jobs in batches, judges each against the
//! catalog (unique id, `expiring` at the job's revision, not held, every key under the
//! cluster's prefix, and the retention plan made now still lets it go), claims it with a
//! compare-and-set to `deleting`, runs the delete plugins, deletes the data objects, then
//! `metadata.json`, then the catalog record — the objects of a whole batch in shared
//! `DeleteObjects` requests ([`batch`]). Every step is idempotent, so a job redelivered after
//! a crash finishes the work. Jobs that run out of deliveries are recorded from the
//! max-deliveries advisory ([`dead_letters`]). It also answers the plugin and orphan API
//! ([`api`]). Beside the delete jobs it garbage-collects binlog segments on a queue of its own
//! ([`binlog`]), rewriting each cluster's binlog index last with a conditional write, and
//! deletes copies at other locations that their retention let go ([`copies`]), collecting
//! each such location's binlog archive after its copies go ([`copies_binlog`]). What all of
//! these share, stores, catalog views and metrics, is the [`context`]; the batch [`worker`]s
//! take the delete jobs off the feeds of [`intake`].

pub mod api;
pub mod batch;
pub mod binlog;
pub mod context;
pub mod copies;
pub mod copies_binlog;
pub mod dead_letters;
pub mod intake;
pub mod job;
pub mod metrics;
pub mod orphans;
pub mod plugins;
pub mod trail;
pub mod view;
pub mod worker;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream;
use sexton_model::names::LocationName;
use sexton_shared::{
    channels,
    config::Config,
    object_store::ObjectStore,
    partitions,
    service::{Started, TaskGroup},
    telemetry, topology, Shutdown,
};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use crate::{context::Deleter, intake::Pulled};

/// How long the tasks have, once the deleter is stopping, to finish what they hold: the batches
/// in hand (each step is idempotent, but finishing is kinder), the binlog job under way, the
/// request being answered. One deadline for all of them, not one per task.
const DRAIN: Duration = Duration::from_secs(20);

/// Runs the deleter until `shutdown` trips, or until one of its tasks fails: the binlog
/// collector, the API, the dead letters (any failure stops every task, so an orchestrator
/// restarts the whole replica instead of keeping one that silently lost a part). `main` and
/// the tests both call this.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let started = sexton_shared::service::start("deleter", &config, shutdown).await?;
    let deleter = Arc::new(Deleter::open(&config, &started).await?);
    let readiness = readiness(started.client.clone(), deleter.store().clone());
    let registry = &deleter.metrics().registry;
    started
        .serve("deleter", &config, registry, readiness)
        .await?;
    // Each other location's client, built from that location's settings alone: copy
    // deletions (issue 28), and the binlog collector reads each location's index.
    let locations = ObjectStore::connect_locations(&config).await?;
    let collector = collector(&deleter, &locations, &config)?;
    let Started {
        mut tasks,
        shutdown,
        client,
        jetstream,
        ..
    } = started;
    let binlog = binlog::run_unpartitioned(collector.clone(), shutdown.clone());
    tasks.spawn("binlog collector", binlog);
    let api = api::serve(client.clone(), deleter.clone(), shutdown.clone());
    tasks.spawn("api", api);
    let dead_letters = dead_letters::run(deleter.clone(), shutdown.clone());
    tasks.spawn("dead letters", dead_letters);
    // Copies at other locations that their retention let go (issue 28), on a durable of
    // their own.
    let (concurrency, ack_wait) = (config.deleter.concurrency.max(1), config.deleter.ack_wait);
    let copies = copies::run(
        deleter.clone(),
        locations,
        jetstream.clone(),
        concurrency,
        ack_wait,
        shutdown.clone(),
    );
    tasks.spawn("copy deletions", copies);
    // Delete jobs reach the batch workers through one channel, fed by the partitions this
    // replica holds (or, on a stream created before issue 32, by the one durable every
    // replica reads), so a batch's `DeleteObjects` requests still span clusters.
    let (feeds, pulled) = delete_feeds(&jetstream, &config, &deleter, &mut tasks).await?;
    let partitions = partitions(&jetstream, &config, &deleter, collector, feeds, &shutdown);
    tasks.spawn("partitions", partitions.await?);
    worker::spawn(&mut tasks, pulled, &deleter, &jetstream, &config);
    let stopped = tasks.join(DRAIN).await;
    client.flush().await.ok();
    tracing::info!("deleter stopped");
    stopped
}

/// The binlog collector: it runs beside the delete jobs on queues of its own (each
/// partition's, and the one of jobs published before issue 32), judging with the same catalog
/// views, and reads each location's index.
fn collector(
    deleter: &Deleter,
    locations: &BTreeMap<LocationName, ObjectStore>,
    config: &Config,
) -> anyhow::Result<binlog::Collector> {
    binlog::Collector::new(
        deleter.topology().clone(),
        deleter.views(),
        deleter.store().clone(),
        Arc::new(locations.clone()),
        config,
        &deleter.metrics().registry,
    )
}

/// Ready while connected to NATS and the object store answers.
fn readiness(client: async_nats::Client, store: ObjectStore) -> telemetry::ReadinessCheck {
    Arc::new(move || {
        let client = client.clone();
        let store = store.clone();
        Box::pin(async move {
            telemetry::nats_connected(&client)?;
            store
                .check_reachable()
                .await
                .map_err(|err| format!("{err:#}"))
        })
            as std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
    })
}

/// How the delete durables are read: a batch per unit of concurrency held and one more at hand
/// (the spare worker of `Deleter::workers` shares this: the value stays what existing consumers
/// were created with). No backoff (`channels::DELETE_DURABLE`): with it a batch still running
/// after 1 s would be delivered again. Failed jobs are naked with a growing delay instead
/// (job::retry_delay), and a long batch keeps its messages with progress acks.
fn delete_settings(config: &Config) -> channels::Settings {
    let max_ack_pending = (2 * config.deleter.concurrency * config.deleter.batch_jobs) as i64;
    channels::Settings {
        ack_wait: config.deleter.ack_wait,
        max_ack_pending: Some(max_ack_pending),
    }
}

/// What the partitions' feeds of delete jobs need: where they pass the jobs on (`None`: the
/// stream has no partitions, and one shared feed reads it), and the replica's intake.
struct Feeds {
    jobs: Option<UnboundedSender<Pulled>>,
    intake: intake::Intake,
}

/// Where the delete jobs come from, and the channel's end the batch workers take them from.
/// Each partition's durables are read by the replica holding its lease, so a cluster's delete
/// and binlog jobs, and the catalog view they are judged with, stay on one replica. Binlog jobs
/// are always partitioned (their stream came with issue 32); delete jobs are when SEXTON_JOBS
/// has the transform: then the partitions' feeds pass them on. Otherwise the one durable every
/// replica reads is fed here, as the task `delete jobs`.
async fn delete_feeds(
    jetstream: &jetstream::Context,
    config: &Config,
    deleter: &Deleter,
    tasks: &mut TaskGroup,
) -> anyhow::Result<(Feeds, UnboundedReceiver<Pulled>)> {
    let intake = intake::Intake::new(config);
    let (jobs, pulled) = mpsc::unbounded_channel();
    let shutdown = tasks.shutdown();
    let stream = jetstream
        .get_stream(topology::STREAM_JOBS)
        .await
        .context("opening the jobs stream")?;
    if stream.cached_info().config.subject_transform == Some(topology::delete_transform()) {
        warn_without_advisories(jetstream).await?;
        deleter.metrics().consumer.spawn_poller_of(
            jetstream.clone(),
            topology::STREAM_JOBS,
            (0..topology::DELETE_PARTITIONS)
                .map(topology::delete_partition_durable)
                .collect(),
            Duration::from_secs(5),
            shutdown,
        );
        let jobs = Some(jobs);
        return Ok((Feeds { jobs, intake }, pulled));
    }
    tracing::warn!(
        stream = topology::STREAM_JOBS,
        "the jobs stream stores delete jobs without partitions (it was created before \
         issue 32): every replica takes any cluster's jobs; see \
         docs/semantics.md#partitions to migrate it"
    );
    let consumer = channels::DELETE_UNPARTITIONED
        .open(jetstream, None, delete_settings(config))
        .await?;
    deleter.metrics().consumer.spawn_poller(
        jetstream.clone(),
        topology::STREAM_JOBS,
        topology::CONSUMER_DELETER,
        Duration::from_secs(5),
        shutdown.clone(),
    );
    let feed = intake::feed_shared(consumer, jobs, intake.clone(), shutdown);
    tasks.spawn("delete jobs", feed);
    Ok((Feeds { jobs: None, intake }, pulled))
}

/// Warns when the dead letters stream does not keep the max-deliveries advisories of the
/// delete jobs' partitions: a job that runs out of deliveries would not be recorded.
async fn warn_without_advisories(jetstream: &jetstream::Context) -> anyhow::Result<()> {
    let advisories = jetstream
        .get_stream(topology::STREAM_DEAD_LETTERS)
        .await
        .context("opening the dead letters stream")?
        .cached_info()
        .config
        .subjects
        .clone();
    if let Some(missing) = topology::deleter_max_deliveries_advisories()
        .into_iter()
        .find(|subject| !advisories.contains(subject))
    {
        tracing::warn!(
            stream = topology::STREAM_DEAD_LETTERS,
            missing,
            "the dead letters stream does not keep the max-deliveries advisories of the \
             delete jobs' partitions (it was created before issue 32): a job that runs out \
             of deliveries would not be recorded; see docs/semantics.md#partitions to \
             migrate it"
        );
    }
    Ok(())
}

/// The partitions this replica holds, run until shutdown: while it holds one, it reads the
/// partition's binlog jobs and, where the delete jobs have partitions, its delete jobs.
async fn partitions(
    jetstream: &jetstream::Context,
    config: &Config,
    deleter: &Deleter,
    collector: binlog::Collector,
    feeds: Feeds,
    shutdown: &Shutdown,
) -> anyhow::Result<impl std::future::Future<Output = anyhow::Result<()>>> {
    let Feeds { jobs, intake } = feeds;
    let leases = topology::partitions_bucket(jetstream, config.nats.replicas)
        .await
        .context("opening the partitions' bucket")?;
    let me = format!("deleter-{}", uuid::Uuid::new_v4());
    let settings = delete_settings(config);
    let jetstream_of_feeds = jetstream.clone();
    let partitioner = partitions::Partitioner::new(
        leases,
        "deleter",
        &me,
        topology::DELETE_PARTITIONS,
        move |partition, stop: Shutdown| {
            let binlog = binlog::consume_partition(collector.clone(), partition, stop.clone());
            let delete = jobs.clone().map(|jobs| {
                let jetstream = jetstream_of_feeds.clone();
                intake::feed_partition(jetstream, partition, settings, jobs, intake.clone(), stop)
            });
            async move {
                match delete {
                    Some(delete) => {
                        futures::join!(binlog, delete);
                    }
                    None => binlog.await,
                }
            }
        },
    );
    let metrics = deleter.metrics();
    partitioner.held().keep_gauge(metrics.partitions.clone());
    metrics.consumer.spawn_poller_of(
        jetstream.clone(),
        topology::STREAM_BINLOG,
        (0..topology::DELETE_PARTITIONS)
            .map(topology::binlog_partition_durable)
            .collect(),
        Duration::from_secs(5),
        shutdown.clone(),
    );
    Ok(partitioner.run(shutdown.clone()))
}
