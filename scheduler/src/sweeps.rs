//! Throttled retention sweeps (seed 003): at most one `retention-sweep` per cluster per
//! `retention_sweep_interval`, so time-based expiry happens even when no backup completes.
//!
//! Each cluster's `last_retention_run` lives in the clusters bucket. A replica keeps the values
//! from a watch on that bucket, sleeps until the earliest cluster is due (one interval after its
//! last run; a cluster never swept is due at once), and then sweeps it the way timers fire a
//! tick: re-read the record, publish the sweep with a message id of cluster + previous run, and
//! compare-and-set `last_retention_run = now`. Replicas racing on the same record publish the
//! same id (the stream keeps one) and only one write wins, so the recorded instant may be the
//! winner's, a few microseconds off the kept event's; a replica that dies between the two
//! steps leaves a state from which the next one publishes the same id again. The set of
//! clusters to sweep (those with schedules) comes from the timers' watch, so nothing lists the
//! schedules.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use async_nats::jetstream::kv::{self, Operation};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use sexton_model::{names::ClusterName, records::ClusterRecord};
use sexton_shared::{channels, config::Config, topology::Topology, Shutdown};

use crate::metrics::Metrics;

/// When a cluster's next sweep is due: one interval after the last, at once if it never had one.
pub fn next_sweep_at(
    last_run: Option<DateTime<Utc>>,
    interval: chrono::Duration,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    match last_run {
        Some(last) => last + interval,
        None => now,
    }
}

/// Whether a sweep at `now` also asks for the cluster's scrub: one interval after the last
/// (at once for a cluster never scrubbed); never with a zero interval (scrubs off).
pub fn scrub_due(
    last_scrub: Option<DateTime<Utc>>,
    every: chrono::Duration,
    now: DateTime<Utc>,
) -> bool {
    every > chrono::Duration::zero() && last_scrub.is_none_or(|last| last + every <= now)
}

/// What one attempt to sweep a cluster found.
enum Swept {
    /// Requested (or found already requested with the same id) and recorded at this instant.
    Requested { at: DateTime<Utc>, duplicate: bool },
    /// Another replica swept it since; its last run.
    NotDue(Option<DateTime<Utc>>),
    /// Published, but another writer changed the record first; the watch brings it.
    Raced,
}

pub async fn run(
    topology: Topology,
    clusters_bucket: kv::Store,
    config: Config,
    metrics: Arc<Metrics>,
    mut clusters_seen: tokio::sync::watch::Receiver<BTreeSet<ClusterName>>,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let interval = chrono::Duration::from_std(config.scheduler.retention_sweep_interval)
        .context("retention_sweep_interval is out of range")?;
    let scrub_every = chrono::Duration::from_std(config.scheduler.scrub_interval)
        .context("scrub_interval is out of range")?;
    let mut last_runs: HashMap<ClusterName, Option<DateTime<Utc>>> = HashMap::new();
    let mut watch = clusters_bucket
        .watch_with_history(">")
        .await
        .context("watching the clusters bucket")?;
    let mut last_revision = 0;
    loop {
        let now = Utc::now();
        let next = clusters_seen
            .borrow()
            .iter()
            .map(|cluster| next_sweep_at(last_runs.get(cluster).copied().flatten(), interval, now))
            .min();
        let sleep_for = match next {
            Some(at) => (at - now).to_std().unwrap_or(Duration::ZERO),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            changed = clusters_seen.changed() => {
                if changed.is_err() {
                    // The timers task ended; the scheduler is stopping.
                    return Ok(());
                }
            }
            update = watch.next() => match update {
                Some(Ok(entry)) => {
                    last_revision = entry.revision;
                    let Ok(cluster) = entry.key.parse::<ClusterName>() else {
                        continue;
                    };
                    if entry.operation != Operation::Put {
                        last_runs.remove(&cluster);
                        continue;
                    }
                    match serde_json::from_slice::<ClusterRecord>(&entry.value) {
                        Ok(record) => {
                            last_runs.insert(cluster, record.last_retention_run);
                        }
                        Err(err) => {
                            tracing::warn!(%cluster, error = %err, "unreadable cluster record");
                        }
                    }
                }
                other => {
                    if let Some(Err(err)) = other {
                        tracing::warn!(error = %err, "clusters watch failed; resuming");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    watch = clusters_bucket
                        .watch_all_from_revision(last_revision + 1)
                        .await
                        .context("re-watching the clusters bucket")?;
                }
            },
            _ = tokio::time::sleep(sleep_for) => {
                let now = Utc::now();
                let due: Vec<ClusterName> = clusters_seen
                    .borrow()
                    .iter()
                    .filter(|c| next_sweep_at(last_runs.get(*c).copied().flatten(), interval, now) <= now)
                    .cloned()
                    .collect();
                let mut failed = false;
                for cluster in due {
                    match sweep(&topology, &clusters_bucket, &cluster, interval, scrub_every, now).await {
                        Ok(Swept::Requested { at, duplicate }) => {
                            if !duplicate {
                                metrics.sweeps_published.inc();
                            }
                            last_runs.insert(cluster, Some(at));
                        }
                        Ok(Swept::NotDue(last)) => {
                            last_runs.insert(cluster, last);
                        }
                        Ok(Swept::Raced) => {
                            // Someone swept it just now; the watch brings the exact instant.
                            last_runs.insert(cluster, Some(now));
                        }
                        Err(err) => {
                            tracing::warn!(%cluster, error = format!("{err:#}"), "retention sweep not requested");
                            failed = true;
                        }
                    }
                }
                if failed {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

/// Re-reads the cluster's record and, if a sweep is due, publishes it and records the run.
#[tracing::instrument(skip_all, fields(%cluster))]
async fn sweep(
    topology: &Topology,
    clusters_bucket: &kv::Store,
    cluster: &ClusterName,
    interval: chrono::Duration,
    scrub_every: chrono::Duration,
    now: DateTime<Utc>,
) -> anyhow::Result<Swept> {
    let entry = sexton_shared::leader_read::latest(clusters_bucket, cluster.as_str())
        .await
        .context("reading the cluster record")?;
    let (record, revision) = match entry {
        Some(entry) if entry.operation == Operation::Put => (
            serde_json::from_slice::<ClusterRecord>(&entry.value)
                .context("decoding the cluster record")?,
            Some(entry.revision),
        ),
        _ => (ClusterRecord::new(cluster.clone(), now), None),
    };
    if next_sweep_at(record.last_retention_run, interval, now) > now {
        return Ok(Swept::NotDue(record.last_retention_run));
    }
    let previous = record
        .last_retention_run
        .map_or(0, |t| t.timestamp_millis());
    let scrub = scrub_due(record.last_scrub, scrub_every, now);
    let duplicate = channels::request_sweep(
        &topology.jetstream,
        cluster,
        now,
        scrub,
        &channels::SweepCause::Scheduled { previous },
    )
    .await?;
    let mut updated = record;
    updated.last_retention_run = Some(now);
    if scrub {
        updated.last_scrub = Some(now);
    }
    let body: bytes::Bytes = serde_json::to_vec(&updated)?.into();
    let written = match revision {
        Some(revision) => clusters_bucket
            .update(cluster.as_str(), body, revision)
            .await
            .is_ok(),
        None => clusters_bucket.create(cluster.as_str(), body).await.is_ok(),
    };
    if written {
        tracing::info!(duplicate, "retention sweep requested");
        Ok(Swept::Requested { at: now, duplicate })
    } else {
        Ok(Swept::Raced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_asks_for_a_scrub_once_per_scrub_interval() {
        let now: DateTime<Utc> = "2026-03-01T12:00:00Z".parse().unwrap();
        let hour = chrono::Duration::hours(1);
        assert!(scrub_due(None, hour, now));
        assert!(scrub_due(Some(now - hour), hour, now));
        assert!(!scrub_due(
            Some(now - chrono::Duration::minutes(59)),
            hour,
            now
        ));
        assert!(
            !scrub_due(None, chrono::Duration::zero(), now),
            "0s turns it off"
        );
    }

    #[test]
    fn a_sweep_is_due_one_interval_after_the_last_or_at_once() {
        let now: DateTime<Utc> = "2026-03-01T12:00:00Z".parse().unwrap();
        let hour = chrono::Duration::hours(1);
        let cases = [
            (None, now),
            (Some(now - hour), now),
            (
                Some(now - chrono::Duration::minutes(10)),
                now + chrono::Duration::minutes(50),
            ),
            // A clock that stepped back: not due until the interval has passed.
            (Some(now + hour), now + hour + hour),
        ];
        for (last, expected) in cases {
            assert_eq!(next_sweep_at(last, hour, now), expected, "{last:?}");
        }
    }
}
