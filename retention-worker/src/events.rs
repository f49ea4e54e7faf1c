//! The consumer side of the retention-worker: where its retention events come from. On a
//! partitioned stream each partition's durable is read by the replica holding its lease
//! (`shared::partitions`); on a stream created before issue 32 every replica reads the one
//! durable. Either way each event is handed to [`Worker::handle`] in turn.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use sexton_shared::{channels, config::Config, partitions, topology, Shutdown};

use crate::{metrics::Metrics, worker::Worker};

/// How long a retention event stays with the replica that took it before it is delivered
/// again. A killed replica's partitions are taken over within it (`TTL + TICK` of
/// `shared::partitions` is shorter).
const ACK_WAIT: Duration = Duration::from_secs(60);

/// How many events one pull of a partition asks for, and how long it waits for them
/// (`partitions::PartitionReader` reads each pull to its end).
const PARTITION_BATCH: usize = 16;
const PARTITION_PULL: Duration = Duration::from_secs(2);

/// Handles the retention stream's events until `shutdown` trips: by partition where the
/// stream stores them so, from the one durable otherwise.
pub(crate) async fn consume_events(
    worker: Worker,
    jetstream: &async_nats::jetstream::Context,
    metrics: &Arc<Metrics>,
    config: &Config,
    shutdown: &mut Shutdown,
) -> anyhow::Result<()> {
    let stream = jetstream
        .get_stream(topology::STREAM_RETENTION)
        .await
        .context("opening the retention stream")?;
    let partitioned =
        stream.cached_info().config.subject_transform == Some(topology::retention_transform());
    if partitioned {
        consume_partitions(worker, jetstream, metrics, config, shutdown).await
    } else {
        consume_unpartitioned(&worker, jetstream, metrics, shutdown).await
    }
}

/// Each partition's durable is read by the replica holding its lease (`shared::partitions`).
/// There is no durable over the whole stream: nats-server (2.15) counts a durable filtered on
/// the stream's own subjects as unfiltered, so on this work queue it would keep every message
/// the partitions' durables acknowledged.
async fn consume_partitions(
    worker: Worker,
    jetstream: &async_nats::jetstream::Context,
    metrics: &Arc<Metrics>,
    config: &Config,
    shutdown: &Shutdown,
) -> anyhow::Result<()> {
    let leases = topology::partitions_bucket(jetstream, config.nats.replicas)
        .await
        .context("opening the partitions' bucket")?;
    let me = format!("retention-worker-{}", uuid::Uuid::new_v4());
    let partitioner = {
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
    partitioner.run(shutdown.clone()).await
}

/// A stream created before issue 32 stores events without a partition: every replica reads the
/// one durable and takes any cluster's events, as before, until an administrator migrates the
/// stream (docs/semantics.md#partitions).
async fn consume_unpartitioned(
    worker: &Worker,
    jetstream: &async_nats::jetstream::Context,
    metrics: &Metrics,
    shutdown: &mut Shutdown,
) -> anyhow::Result<()> {
    tracing::warn!(
        stream = topology::STREAM_RETENTION,
        "the retention stream stores events without partitions (it was created before \
         issue 32): every replica takes any cluster's events; see \
         docs/semantics.md#partitions to migrate it"
    );
    let consumer = channels::RETENTION_UNPARTITIONED
        .open(jetstream, None, channels::Settings::ack_wait(ACK_WAIT))
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
        worker,
        jetstream,
        metrics,
        messages,
        shutdown,
        "retention events",
    )
    .await
}

/// Handles a consumer's events one at a time until `shutdown` trips: a cluster's runs never
/// overlap within a consumer, and a partition's consumer is read by one replica at a time.
async fn consume(
    worker: &Worker,
    jetstream: &async_nats::jetstream::Context,
    metrics: &Metrics,
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
    worker: &Worker,
    jetstream: &async_nats::jetstream::Context,
    metrics: &Metrics,
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

/// Works on one partition's events while this replica holds it (`stop` trips when it lets go
/// of it or loses it, and at shutdown): pull after pull, each event handled in turn.
async fn consume_partition(
    worker: Worker,
    jetstream: async_nats::jetstream::Context,
    metrics: Arc<Metrics>,
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
