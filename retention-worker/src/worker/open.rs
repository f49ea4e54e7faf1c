//! Opening the worker's state at start-up: its stores (the primary and each location), each
//! checked to enforce Object Lock where a lock is configured, and the retention status bucket.

use std::sync::Arc;

use anyhow::Context as _;
use sexton_model::names::LocationName;
use sexton_shared::{config::Config, object_store::ObjectStore, service::Started, topology};

use super::Worker;
use crate::metrics::Metrics;

impl Worker {
    /// The worker of a started service: connects its stores, refuses to start where a lock
    /// setting names a bucket without Object Lock, opens the retention status bucket.
    pub async fn open(
        config: &Config,
        started: &Started,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Worker> {
        let store = ObjectStore::connect(&config.s3).await?;
        if config.s3.lock.is_some() {
            check_lockable(&store, &config.s3.bucket, "s3.lock").await?;
        }
        let locations = ObjectStore::connect_locations(config).await?;
        for (name, location) in &config.locations {
            if location.s3.lock.is_none() {
                continue;
            }
            let store = LocationName::new(name.as_str())
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
        let retention_status =
            topology::retention_status_bucket(&started.jetstream, config.nats.replicas)
                .await
                .context("opening the retention status bucket")?;
        Ok(Worker::new(
            started.topology.clone(),
            config.clone(),
            metrics,
            store,
            locations,
            retention_status,
        ))
    }
}

/// With `[s3.lock]` set, the bucket must enforce Object Lock: a lock setting that silently
/// locked nothing would be worse than none. Refuses to start, saying so.
async fn check_lockable(store: &ObjectStore, bucket: &str, setting: &str) -> anyhow::Result<()> {
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
