//! The retention-worker: on `checkpoint-complete` or `retention-sweep` it loads the cluster's
//! catalog and policies, runs the pure retention engine (`sexton-retention`), marks what the
//! plan lets go as `expiring` (compare-and-set) and publishes one delete job per backup, then
//! one binlog job per cluster ([`binlog`]: the segments of the cluster's binlog index that end
//! before the oldest kept full backup). It decides and marks; it never deletes (the deleter
//! does, after checking again).
//!
//! The same code answers `retention.preview` requests, without marking anything.

pub mod binlog;
pub mod decisions;
pub mod group_plan;
pub mod metrics;
pub mod safety;
pub mod scrub;
pub mod view;
pub mod worker;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use sexton_shared::{
    channels,
    config::Config,
    partitions,
    service::TaskGroup,
    telemetry,
    topology::{self},
    Shutdown,
};

/// How long the API tasks have to answer the request in hand once the worker is stopping.
const DRAIN: Duration = Duration::from_secs(20);

/// Runs the retention-worker until `shutdown` trips, or until one of its API tasks fails (which
/// stops the consumer too). `main` and the tests both call this.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut tasks = TaskGroup::new("retention-worker", shutdown);
    let mut shutdown = tasks.shutdown();
    let client = sexton_shared::nats::connect(&config.nats, "sexton-retention-worker").await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure_for(&jetstream, &config)
        .await
        .context("creating the nats topology")?;
    let metrics = Arc::new(metrics::Metrics::new());
    let addr = telemetry::serve(
        &config.http.listen,
        metrics.registry.clone(),
        telemetry::nats_readiness(client.clone()),
        shutdown.clone(),
    )
    .await?;
    sexton_shared::build::start(
        &client,
        "retention-worker",
        &metrics.registry,
        shutdown.clone(),
    )
    .await?;
    tracing::info!(metrics = %telemetry::listen_text(addr), "retention-worker started");

    let store = sexton_shared::object_store::ObjectStore::connect(&config.s3).await?;
    if config.s3.lock.is_some() {
        check_lockable(&store, &config.s3.bucket, "s3.lock").await?;
    }
    let locations = sexton_shared::object_store::ObjectStore::connect_locations(&config).await?;
    for (name, location) in &config.locations {
        if location.s3.lock.is_none() {
            continue;
        }
        let store = sexton_shared::names::LocationName::new(name.as_str())
            .ok()
            .and_then(|name| locations.get(&name))
            .with_context(|| format!("location {name} has no client"))?;
        check_lockable(
            store,
            &format!("{} (location {name})", location.s3.bucket),
            &format!("locations.{name}.lock"),
        )
        .await?;
    }
    let retention_status = topology::retention_status_bucket(&jetstream, config.nats.replicas)
        .await
        .context("opening the retention status bucket")?;
    let worker = worker::Worker::new(
        topology.clone(),
        config.clone(),
        metrics.clone(),
        store,
        locations,
        retention_status,
    );
    let previews = worker
        .clone()
        .serve_previews(client.clone(), shutdown.clone());
    tasks.spawn("previews", previews);
    let scrubs = worker
        .clone()
        .serve_scrubs(client.clone(), shutdown.clone());
    tasks.spawn("scrubs", scrubs);
    let recovery = worker
        .clone()
        .serve_recovery(client.clone(), shutdown.clone());
    tasks.spawn("recovery", recovery);
    let approvals = worker
        .clone()
        .serve_approvals(client.clone(), shutdown.clone());
    tasks.spawn("approvals", approvals);
    let status = worker
        .clone()
        .serve_binlog_status(client.clone(), shutdown.clone());
    tasks.spawn("binlog status", status);

    let stream = jetstream
        .get_stream(topology::STREAM_RETENTION)
        .await
        .context("opening the retention stream")?;
    let partitioned =
        stream.cached_info().config.subject_transform == Some(topology::retention_transform());
    if partitioned {
        // Each partition's durable is read by the replica holding its lease
        // (`shared::partitions`). There is no durable over the whole stream: nats-server
        // (2.15) counts a durable filtered on the stream's own subjects as unfiltered, so on
        // this work queue it would keep every message the partitions' durables acknowledged.
        let leases = topology::partitions_bucket(&jetstream, config.nats.replicas)
            .await
            .context("opening the partitions' bucket")?;
        let me = format!("retention-worker-{}", uuid::Uuid::new_v4());
        let partitioner = {
            let worker = worker.clone();
            let jetstream = jetstream.clone();
            let metrics = metrics.clone();
            partitions::Partitioner::new(
                leases,
                "retention-worker",
                &me,
                topology::RETENTION_PARTITIONS,
                move |partition, stop| {
                    consume_partition(
                        worker.clone(),
                        jetstream.clone(),
                        metrics.clone(),
                        partition,
                        stop,
                    )
                },
            )
        };
        metrics.partitions_held(partitioner.held());
        metrics.consumer.spawn_poller_of(
            jetstream.clone(),
            topology::STREAM_RETENTION,
            (0..topology::RETENTION_PARTITIONS)
                .map(topology::retention_partition_durable)
                .collect(),
            Duration::from_secs(5),
            shutdown.clone(),
        );
        partitioner.run(shutdown.clone()).await?;
    } else {
        // A stream created before issue 32 stores events without a partition: every replica
        // reads the one durable and takes any cluster's events, as before, until an
        // administrator migrates the stream (docs/semantics.md#partitions).
        tracing::warn!(
            stream = topology::STREAM_RETENTION,
            "the retention stream stores events without partitions (it was created before \
             issue 32): every replica takes any cluster's events; see \
             docs/semantics.md#partitions to migrate it"
        );
        let consumer = channels::RETENTION_UNPARTITIONED
            .open(&jetstream, None, channels::Settings::ack_wait(ACK_WAIT))
            .await?;
        metrics.consumer.spawn_poller(
            jetstream.clone(),
            topology::STREAM_RETENTION,
            topology::CONSUMER_RETENTION,
            Duration::from_secs(5),
            shutdown.clone(),
        );
        let messages = consumer
            .stream()
            .expires(topology::PULL_EXPIRES)
            .messages()
            .await
            .context("reading retention events")?;
        consume(
            &worker,
            &jetstream,
            &metrics,
            messages,
            &mut shutdown,
            "retention events",
        )
        .await?;
    }
    let stopped = tasks.join(DRAIN).await;
    client.flush().await.ok();
    tracing::info!("retention-worker stopped");
    stopped
}

/// How long a retention event stays with the replica that took it before it is delivered
/// again. A killed replica's partitions are taken over within it (`TTL + TICK` of
/// `shared::partitions` is shorter).
const ACK_WAIT: Duration = Duration::from_secs(60);

/// Handles a consumer's events one at a time until `shutdown` trips: a cluster's runs never
/// overlap within a consumer, and a partition's consumer is read by one replica at a time.
async fn consume(
    worker: &worker::Worker,
    jetstream: &async_nats::jetstream::Context,
    metrics: &metrics::Metrics,
    mut messages: async_nats::jetstream::consumer::pull::Stream,
    shutdown: &mut Shutdown,
    what: &str,
) -> anyhow::Result<()> {
    while let Some(message) =
        sexton_shared::nats::next_message(&mut messages, shutdown, what).await?
    {
        handle_one(worker, jetstream, metrics, &message).await;
    }
    Ok(())
}

/// One event: its run, settled and counted, in the event's span.
async fn handle_one(
    worker: &worker::Worker,
    jetstream: &async_nats::jetstream::Context,
    metrics: &metrics::Metrics,
    message: &async_nats::jetstream::Message,
) {
    channels::deliver(
        &channels::RETENTION_EVENTS,
        "retention-worker",
        jetstream,
        Some(&metrics.consumer),
        message,
        |event| worker.handle(event, message),
    )
    .await;
}

/// How many events one pull of a partition asks for, and how long it waits for them
/// (`partitions::PartitionReader` reads each pull to its end).
const PARTITION_BATCH: usize = 16;
const PARTITION_PULL: Duration = Duration::from_secs(2);

/// Works on one partition's events while this replica holds it (`stop` trips when it lets go
/// of it or loses it, and at shutdown): pull after pull, each event handled in turn.
async fn consume_partition(
    worker: worker::Worker,
    jetstream: async_nats::jetstream::Context,
    metrics: Arc<metrics::Metrics>,
    partition: u16,
    mut stop: Shutdown,
) {
    let mut reader = partitions::PartitionReader::new(
        jetstream.clone(),
        &channels::RETENTION_DURABLE,
        partition,
        channels::Settings::ack_wait(ACK_WAIT),
        PARTITION_PULL,
    );
    while let Some(mut pull) = reader.pull(PARTITION_BATCH, &mut stop).await {
        while let Some(message) = pull.next(&stop).await {
            handle_one(&worker, &jetstream, &metrics, &message).await;
        }
        pull.finish().await;
    }
}

/// With `[s3.lock]` set, the bucket must enforce Object Lock: a lock setting that silently
/// locked nothing would be worse than none. Refuses to start, saying so.
async fn check_lockable(
    store: &sexton_shared::object_store::ObjectStore,
    bucket: &str,
    setting: &str,
) -> anyhow::Result<()> {
    let enabled = store
        .object_lock_enabled()
        .await
        .with_context(|| format!("reading the Object Lock configuration of bucket {bucket}"))?;
    if !enabled {
        anyhow::bail!(
            "{setting} is set, but bucket {bucket} does not have Object Lock enabled, so no \
             lock could be set: turn Object Lock on for the bucket in place (versioning on, then \
             put-object-lock-configuration), or remove {setting} (docs/immutability.md)"
        );
    }
    Ok(())
}
