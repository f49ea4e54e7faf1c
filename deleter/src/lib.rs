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
//! each such location's binlog archive after its copies go ([`copies_binlog`]).

pub mod api;
pub mod batch;
pub mod binlog;
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

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use sexton_shared::{
    channels, config::Config, object_store::ObjectStore, outcome::settle, partitions,
    service::TaskGroup, telemetry, topology, Shutdown,
};

/// How long the tasks have, once the deleter is stopping, to finish what they hold: the batches
/// in hand (each step is idempotent, but finishing is kinder), the binlog job under way, the
/// request being answered. One deadline for all of them, not one per task.
const DRAIN: Duration = Duration::from_secs(20);

/// Runs the deleter until `shutdown` trips, or until one of its tasks fails: the binlog
/// collector, the API, the dead letters (any failure stops every task, so an orchestrator
/// restarts the whole replica instead of keeping one that silently lost a part). `main` and
/// the tests both call this.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut tasks = TaskGroup::new("deleter", shutdown);
    let shutdown = tasks.shutdown();
    let client = sexton_shared::nats::connect(&config.nats, "sexton-deleter").await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure_for(&jetstream, &config)
        .await
        .context("creating the nats topology")?;
    let store = ObjectStore::connect(&config.s3).await?;
    let metrics = Arc::new(metrics::Metrics::new());
    let readiness = {
        let client = client.clone();
        let store = store.clone();
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
    };
    let addr = telemetry::serve(
        &config.http.listen,
        metrics.registry.clone(),
        readiness,
        shutdown.clone(),
    )
    .await?;
    sexton_shared::build::start(&client, "deleter", &metrics.registry, shutdown.clone()).await?;
    tracing::info!(metrics = %telemetry::listen_text(addr), "deleter started");

    let deleter = Arc::new(batch::Deleter::new(
        topology.clone(),
        store.clone(),
        client.clone(),
        &config,
        metrics.clone(),
    ));
    // Each other location's client, built from that location's settings alone: copy
    // deletions (issue 28), and the binlog collector reads each location's index.
    let locations = ObjectStore::connect_locations(&config).await?;
    // The binlog collector runs beside the delete jobs on queues of its own (each partition's,
    // and the one of jobs published before issue 32), judging with the same catalog views.
    let collector = binlog::Collector::new(
        topology.clone(),
        deleter.views(),
        store,
        Arc::new(locations.clone()),
        &config,
        &metrics.registry,
    )?;
    tasks.spawn(
        "binlog collector",
        binlog::run_unpartitioned(collector.clone(), shutdown.clone()),
    );
    tasks.spawn(
        "api",
        api::serve(client.clone(), deleter.clone(), shutdown.clone()),
    );
    tasks.spawn(
        "dead letters",
        dead_letters::run(deleter.clone(), shutdown.clone()),
    );
    // Copies at other locations that their retention let go (issue 28), on a durable of
    // their own.
    tasks.spawn(
        "copy deletions",
        copies::run(
            deleter.clone(),
            locations,
            jetstream.clone(),
            config.deleter.concurrency.max(1),
            config.deleter.ack_wait,
            shutdown.clone(),
        ),
    );

    // Delete jobs reach the batch workers through one channel, fed by the partitions this
    // replica holds (or, on a stream created before issue 32, by the one durable every
    // replica reads), so a batch's `DeleteObjects` requests still span clusters.
    let stream = jetstream
        .get_stream(topology::STREAM_JOBS)
        .await
        .context("opening the jobs stream")?;
    let intake = intake::Intake::new(&config);
    let (jobs, pulled) = tokio::sync::mpsc::unbounded_channel();
    let batch_jobs = config.deleter.batch_jobs;
    // A batch per unit of concurrency held and one more at hand (the spare worker of
    // `Deleter::workers` shares this: the value stays what existing consumers were created
    // with).
    let max_ack_pending = (2 * config.deleter.concurrency * batch_jobs) as i64;
    // No backoff (`channels::DELETE_DURABLE`): with it a batch still running after 1 s would
    // be delivered again. Failed jobs are naked with a growing delay instead
    // (job::retry_delay), and a long batch keeps its messages with progress acks.
    let settings = channels::Settings {
        ack_wait: config.deleter.ack_wait,
        max_ack_pending: Some(max_ack_pending),
    };
    // Each partition's durables are read by the replica holding its lease, so a cluster's
    // delete and binlog jobs, and the catalog view they are judged with, stay on one replica.
    // Binlog jobs are always partitioned (their stream came with issue 32); delete jobs are
    // when SEXTON_JOBS has the transform.
    let partitioned =
        stream.cached_info().config.subject_transform == Some(topology::delete_transform());
    let feeds = if partitioned {
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
        metrics.consumer.spawn_poller_of(
            jetstream.clone(),
            topology::STREAM_JOBS,
            (0..topology::DELETE_PARTITIONS)
                .map(topology::delete_partition_durable)
                .collect(),
            Duration::from_secs(5),
            shutdown.clone(),
        );
        Some(jobs)
    } else {
        tracing::warn!(
            stream = topology::STREAM_JOBS,
            "the jobs stream stores delete jobs without partitions (it was created before \
             issue 32): every replica takes any cluster's jobs; see \
             docs/semantics.md#partitions to migrate it"
        );
        let consumer = channels::DELETE_UNPARTITIONED
            .open(&jetstream, None, settings)
            .await?;
        metrics.consumer.spawn_poller(
            jetstream.clone(),
            topology::STREAM_JOBS,
            topology::CONSUMER_DELETER,
            Duration::from_secs(5),
            shutdown.clone(),
        );
        tasks.spawn(
            "delete jobs",
            intake::feed_shared(consumer, jobs, intake.clone(), shutdown.clone()),
        );
        None
    };
    let leases = topology::partitions_bucket(&jetstream, config.nats.replicas)
        .await
        .context("opening the partitions' bucket")?;
    let me = format!("deleter-{}", uuid::Uuid::new_v4());
    let partitioner = {
        let jetstream = jetstream.clone();
        let intake = intake.clone();
        partitions::Partitioner::new(
            leases,
            "deleter",
            &me,
            topology::DELETE_PARTITIONS,
            move |partition, stop: Shutdown| {
                let binlog = binlog::consume_partition(collector.clone(), partition, stop.clone());
                let delete = feeds.clone().map(|jobs| {
                    intake::feed_partition(
                        jetstream.clone(),
                        partition,
                        settings,
                        jobs,
                        intake.clone(),
                        stop,
                    )
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
        )
    };
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
    tasks.spawn("partitions", partitioner.run(shutdown.clone()));
    let pulled = Arc::new(tokio::sync::Mutex::new(pulled));
    for _ in 0..batch::Deleter::workers(&config) {
        let batches = work(
            pulled.clone(),
            deleter.clone(),
            jetstream.clone(),
            metrics.clone(),
            batch_jobs,
            config.deleter.ack_wait / 3,
            shutdown.clone(),
        );
        tasks.spawn("batches", async move {
            batches.await;
            Ok(())
        });
    }
    let stopped = tasks.join(DRAIN).await;
    client.flush().await.ok();
    tracing::info!("deleter stopped");
    stopped
}

/// How long a batch waits for more jobs in all, and for the next one.
const BATCH_LINGER: Duration = Duration::from_millis(250);
const BATCH_GAP: Duration = Duration::from_millis(20);

/// One batch worker: waits for a delete job, takes whatever else has already arrived (up to
/// `batch_jobs`), works through them, settles each, and goes again until shutdown. Once the
/// replica is stopping it starts no batch: it hands back (naks) the jobs still waiting, so that
/// another deleter takes them at once rather than after the ack wait, until every feed has
/// stopped.
async fn work(
    pulled: Arc<tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<intake::Pulled>>>,
    deleter: Arc<batch::Deleter>,
    jetstream: async_nats::jetstream::Context,
    metrics: Arc<metrics::Metrics>,
    batch_jobs: usize,
    progress_every: Duration,
    mut shutdown: sexton_shared::Shutdown,
) {
    loop {
        let mut batch = Vec::new();
        {
            // Biased: once the replica is stopping, a job already waiting must not start
            // another batch (an unbiased select picks a ready branch at random, so a stopping
            // replica went on working through its backlog until the drain deadline cut a batch
            // short).
            let first = tokio::select! {
                biased;
                _ = shutdown.wait() => None,
                mut receiver = pulled.lock() => tokio::select! {
                    biased;
                    _ = shutdown.wait() => None,
                    first = receiver.recv() => Some((first, receiver)),
                },
            };
            let Some((first, mut receiver)) = first else {
                intake::hand_back(&pulled).await;
                return;
            };
            let Some(first) = first else {
                // Every feed has stopped: nothing more will come.
                return;
            };
            batch.push(first);
            // Fill the batch while jobs keep coming: full batches make full DeleteObjects
            // requests. A lone job waits at most a few milliseconds for company.
            let linger_until = tokio::time::Instant::now() + BATCH_LINGER;
            while batch.len() < batch_jobs {
                let until = linger_until.min(tokio::time::Instant::now() + BATCH_GAP);
                match tokio::time::timeout_at(until, receiver.recv()).await {
                    Ok(Some(job)) => batch.push(job),
                    _ => break,
                }
            }
        }
        let (messages, places): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|job| (job.message, job.place))
            .unzip();
        // A batch can outlast the ack wait (slow plugins, a slow store): keep it ours.
        let messages = Arc::new(messages);
        let progress = {
            let messages = messages.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(progress_every).await;
                    for message in messages.iter() {
                        let _ = message
                            .ack_with(async_nats::jetstream::AckKind::Progress)
                            .await;
                    }
                }
            })
        };
        let outcomes = deleter.run_batch(&messages).await;
        progress.abort();
        for (message, outcome) in messages.iter().zip(&outcomes) {
            settle(&jetstream, "deleter", message, outcome).await;
        }
        // Settled: the feed that pulled them may let go of their partition.
        drop(places);
        for outcome in &outcomes {
            metrics.consumer.observe(outcome);
            metrics.jobs.with_label_values(&[outcome.label()]).inc();
        }
    }
}
