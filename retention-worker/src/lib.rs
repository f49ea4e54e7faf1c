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
mod events;
pub mod group_plan;
pub mod metrics;
pub mod safety;
pub mod scrub;
pub mod view;
pub mod worker;

use std::{sync::Arc, time::Duration};

use sexton_shared::{config::Config, service::Started, telemetry, Shutdown};

/// How long the API tasks have to answer the request in hand once the worker is stopping.
const DRAIN: Duration = Duration::from_secs(20);

/// Runs the retention-worker until `shutdown` trips, or until one of its API tasks fails (which
/// stops the consumer too). `main` and the tests both call this.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let started = sexton_shared::service::start("retention-worker", &config, shutdown).await?;
    let metrics = Arc::new(metrics::Metrics::new());
    let readiness = telemetry::nats_readiness(started.client.clone());
    started
        .serve("retention-worker", &config, &metrics.registry, readiness)
        .await?;
    let worker = worker::Worker::open(&config, &started, metrics.clone()).await?;
    let Started {
        mut tasks,
        mut shutdown,
        client,
        jetstream,
        ..
    } = started;
    spawn_api(&mut tasks, &worker, &client, &shutdown);
    events::consume_events(worker, &jetstream, &metrics, &config, &mut shutdown).await?;
    let stopped = tasks.join(DRAIN).await;
    client.flush().await.ok();
    tracing::info!("retention-worker stopped");
    stopped
}

/// The request/reply handlers, a task each: `retention.preview`, `catalog.scrub`,
/// `recovery.window`, `retention.approve`, `binlog.status`.
fn spawn_api(
    tasks: &mut sexton_shared::service::TaskGroup,
    worker: &worker::Worker,
    client: &async_nats::Client,
    shutdown: &Shutdown,
) {
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
}
