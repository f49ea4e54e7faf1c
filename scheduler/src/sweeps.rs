//! Throttled retention sweeps (seed 003): at most one `retention-sweep` per cluster per
//! interval, so time-based expiry happens even when no backup completes. Every replica wakes at
//! the same interval boundary and publishes with a message id of cluster + interval number, so
//! the stream keeps one of them.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use chrono::Utc;
use sexton_shared::{
    config::Config,
    names::ClusterName,
    nats::publish_once,
    topology::{self, Topology},
    wire::{self, RetentionSweep},
    Shutdown,
};

use crate::metrics::Metrics;

pub async fn run(
    topology: Topology,
    config: Config,
    metrics: Arc<Metrics>,
    clusters_seen: tokio::sync::watch::Receiver<BTreeSet<ClusterName>>,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let interval = config.scheduler.retention_sweep_interval;
    let interval_ms = interval.as_millis().max(1) as i64;
    loop {
        let now_ms = Utc::now().timestamp_millis();
        let next_boundary = (now_ms / interval_ms + 1) * interval_ms;
        let wait = Duration::from_millis((next_boundary - now_ms) as u64);
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
        let window = next_boundary / interval_ms;
        let clusters = clusters_seen.borrow().clone();
        {
            {
                for cluster in clusters {
                    let event = RetentionSweep {
                        schema_version: wire::SCHEMA_VERSION,
                        cluster: cluster.clone(),
                        requested_at: Utc::now(),
                    };
                    let published = publish_once(
                        &topology.jetstream,
                        topology::sweep_subject(&cluster),
                        &format!("sweep.{cluster}.{window}"),
                        wire::encode(&event),
                    )
                    .await;
                    match published {
                        Ok(false) => metrics.sweeps_published.inc(),
                        Ok(true) => {}
                        Err(err) => {
                            tracing::warn!(%cluster, error = %err, "retention sweep not published")
                        }
                    }
                }
            }
        }
    }
}
