//! The deleter: trusts no job. For each delete job it re-reads the catalog, checks the backup is
//! the one the job names (unique id), that it is `expiring` at the job's revision and not held,
//! and that every key lies under the cluster's prefix; claims it with a compare-and-set to
//! `deleting`; deletes the data objects, then `metadata.json`, then the catalog record. Every
//! step is idempotent, so a job redelivered after a crash finishes the work.

pub mod job;
pub mod metrics;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::consumer::PullConsumer;
use futures::StreamExt;
use sexton_shared::{
    config::Config, object_store::ObjectStore, outcome::settle, telemetry, topology, Shutdown,
};

/// Runs the deleter until `shutdown` trips. `main` and the tests both call this.
pub async fn run(config: Config, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let client = sexton_shared::nats::connect(&config.nats, "sexton-deleter").await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure(&jetstream, config.nats.replicas)
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
    tracing::info!(metrics = ?addr, "deleter started");

    let deleter = job::Deleter::new(topology.clone(), store, config.clone(), metrics.clone());
    let stream = jetstream
        .get_stream(topology::STREAM_JOBS)
        .await
        .context("opening the jobs stream")?;
    let consumer: PullConsumer = stream
        .get_or_create_consumer(
            topology::CONSUMER_DELETER,
            async_nats::jetstream::consumer::pull::Config {
                max_ack_pending: (config.deleter.concurrency * 4) as i64,
                ..topology::consumer_config(
                    topology::CONSUMER_DELETER,
                    Some(format!("{}.job.delete.*", topology::SUBJECT_ROOT)),
                    Duration::from_secs(60),
                )
            },
        )
        .await
        .context("creating the deleter consumer")?;
    // Take a few at a time: deletions are long next to the prefetch the client would do.
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(config.deleter.concurrency)
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading delete jobs")?;
    metrics.consumer.spawn_poller(
        jetstream.clone(),
        topology::STREAM_JOBS,
        topology::CONSUMER_DELETER,
        Duration::from_secs(5),
        shutdown.clone(),
    );
    let semaphore = Arc::new(tokio::sync::Semaphore::new(config.deleter.concurrency));
    loop {
        let message = tokio::select! {
            _ = shutdown.wait() => break,
            message = messages.next() => message,
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(err)) => {
                tracing::warn!(error = %err, "reading delete jobs");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            None => anyhow::bail!("the deleter consumer ended"),
        };
        let permit = semaphore.clone().acquire_owned().await?;
        let deleter = deleter.clone();
        let jetstream = jetstream.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let outcome = deleter.handle(&message).await;
            settle(&jetstream, "deleter", &message, &outcome).await;
            metrics.consumer.observe(&outcome);
            drop(permit);
        });
    }
    // Let the jobs in hand finish before returning: each is short and idempotent.
    let _ = tokio::time::timeout(
        Duration::from_secs(20),
        semaphore.acquire_many(config.deleter.concurrency as u32),
    )
    .await;
    client.flush().await.ok();
    tracing::info!("deleter stopped");
    Ok(())
}
