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
pub mod metrics;
pub mod scrub;
pub mod view;
pub mod worker;

use std::{sync::Arc, time::Duration};
use tracing::Instrument as _;

use anyhow::Context as _;
use async_nats::jetstream::consumer::PullConsumer;
use sexton_shared::{
    config::Config,
    outcome::settle,
    telemetry,
    topology::{self},
    Shutdown,
};

/// Runs the retention-worker until `shutdown` trips. `main` and the tests both call this.
pub async fn run(config: Config, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let client = sexton_shared::nats::connect(&config.nats, "sexton-retention-worker").await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure(&jetstream, config.nats.replicas)
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
    tracing::info!(metrics = ?addr, "retention-worker started");

    let store = sexton_shared::object_store::ObjectStore::connect(&config.s3).await?;
    let worker = worker::Worker::new(topology.clone(), config.clone(), metrics.clone(), store);
    let preview = tokio::spawn(
        worker
            .clone()
            .serve_previews(client.clone(), shutdown.clone()),
    );
    let scrubs = tokio::spawn(
        worker
            .clone()
            .serve_scrubs(client.clone(), shutdown.clone()),
    );
    let binlog_status = tokio::spawn(binlog::serve_status(
        worker.clone(),
        client.clone(),
        shutdown.clone(),
    ));

    let stream = jetstream
        .get_stream(topology::STREAM_RETENTION)
        .await
        .context("opening the retention stream")?;
    let consumer: PullConsumer = stream
        .get_or_create_consumer(
            topology::CONSUMER_RETENTION,
            topology::consumer_config(topology::CONSUMER_RETENTION, None, Duration::from_secs(60)),
        )
        .await
        .context("creating the retention consumer")?;
    metrics.consumer.spawn_poller(
        jetstream.clone(),
        topology::STREAM_RETENTION,
        topology::CONSUMER_RETENTION,
        Duration::from_secs(5),
        shutdown.clone(),
    );
    let mut messages = consumer
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading retention events")?;
    loop {
        let Some(message) =
            sexton_shared::nats::next_message(&mut messages, &mut shutdown, "retention events")
                .await?
        else {
            break;
        };
        let outcome = async {
            let outcome = worker.handle(&message).await;
            settle(&jetstream, "retention-worker", &message, &outcome).await;
            outcome
        }
        .instrument(telemetry::message_span(&message))
        .await;
        metrics.consumer.observe(&outcome);
    }
    preview.abort();
    scrubs.abort();
    binlog_status.abort();
    client.flush().await.ok();
    tracing::info!("retention-worker stopped");
    Ok(())
}
