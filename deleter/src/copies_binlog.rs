//! A location's binlog archive, collected after its copies are deleted (issue 28).
//!
//! The copier copies a cluster's binlog segments to each location the cluster's backups are
//! copied to (`<location prefix>/<cluster>/binlog/`, with the location's own `_index.json`). A
//! location's archive needs only the segments that end at or after the start of the oldest
//! full backup whose copy the location holds or awaits ([`location_horizon`], the copier's
//! answer too, so a segment collected here is never copied back). Only a copy's deletion moves
//! that horizon, so after a copy delete job at a location finishes (or finds its work done), the
//! deleter makes one pass over that location's archive of the job's cluster:
//!
//! 1. the horizon comes from the catalog view the job used, brought up to date after the copy
//!    was marked `deleted`; with no full backup held or awaited there ([`LocationHorizon::NoFull`])
//!    or one without a start time ([`LocationHorizon::Unknown`]) nothing is deleted: a catalog
//!    that lost its records must not empty the archive that survived elsewhere;
//! 2. of the location's index, every segment with a last event before the horizon goes, plus
//!    orphans (objects of the folder that the index does not list, written before the horizon
//!    less the margin); an unknown end is kept;
//! 3. objects first, the index **last** (conditional write), as the primary's collector does:
//!    it is the same deleting half of a pass ([`crate::binlog::sweep`]) with the location's store;
//! 4. a malformed index there is never rewritten: nothing is deleted and an incident recorded.
//!
//! The pass never fails the copy delete job: the copy is deleted already. A failure is logged,
//! counted (`sexton_location_binlog_gc_passes_total{outcome="failed"}`), and the next copy
//! deletion at that location tries again.
//!
//! Passes of one cluster take turns on a lock set of their own, not the primary collector's:
//! that one lives inside the binlog consumer, and guards the primary's index; a location's
//! index is another object, and a slow location must not hold up the primary's collection.
//! The conditional write keeps two passes (or a pass and the copier appending) from losing each
//! other's changes either way.

use std::collections::BTreeSet;

use chrono::{DateTime, FixedOffset, Utc};
use sexton_model::{
    names::{ClusterName, LocationName},
    wire::{self, Incident},
};
use sexton_shared::{
    binlog::{self, location_horizon, store, LocationHorizon},
    object_store::ObjectStore,
    outcome::publish_incident,
    service::ClusterLocks,
};

use crate::{
    binlog::{publish_permanent_failure, sweep, SweepError},
    context::Deleter,
};

/// How many cluster locks the location passes share (see the module documentation).
const CLUSTER_LOCKS: usize = 64;

/// Runs the passes of the copy delete jobs.
#[derive(Clone)]
pub struct LocationCollector {
    clusters: ClusterLocks,
}

impl Default for LocationCollector {
    fn default() -> Self {
        LocationCollector::new()
    }
}

/// Whether a location's archive may be collected, and up to when.
pub fn collectable(horizon: &LocationHorizon) -> Result<DateTime<FixedOffset>, String> {
    match horizon {
        LocationHorizon::Since { at, .. } => Ok(*at),
        LocationHorizon::NoFull => Err(
            "no full backup is held or awaited there: nothing is deleted (the archive may be \
             all that is left of the cluster)"
                .into(),
        ),
        LocationHorizon::Unknown { backup } => Err(format!(
            "full backup {backup} there has no start time: every segment may be needed"
        )),
    }
}

impl LocationCollector {
    pub fn new() -> LocationCollector {
        LocationCollector {
            clusters: ClusterLocks::new(CLUSTER_LOCKS),
        }
    }

    /// One pass over `cluster`'s archive at `location` (whose store is `store`); never fails:
    /// what went wrong is logged and counted, and the next copy deletion there retries.
    pub async fn collect(
        &self,
        deleter: &Deleter,
        location: &LocationName,
        store: &ObjectStore,
        cluster: &ClusterName,
    ) {
        let outcome = match self.pass(deleter, location, store, cluster).await {
            Ok(outcome) => outcome,
            Err(err) => {
                tracing::warn!(%cluster, %location, error = format!("{err:#}"), "the location's binlog archive was not collected; the next copy deletion there retries");
                "failed"
            }
        };
        deleter
            .metrics()
            .location_binlog_passes
            .with_label_values(&[location.as_str(), outcome])
            .inc();
    }

    /// The pass; the outcome label.
    async fn pass(
        &self,
        deleter: &Deleter,
        location: &LocationName,
        store: &ObjectStore,
        cluster: &ClusterName,
    ) -> anyhow::Result<&'static str> {
        let _one_at_a_time = self.clusters.lock(cluster).await;
        // The view the job judged with, brought up to date: it holds the copy as deleted.
        let records = deleter.views().current_records(cluster).await?;
        let horizon = match collectable(&location_horizon(&records, location)) {
            Ok(horizon) => horizon,
            Err(why) => {
                tracing::debug!(%cluster, %location, "location binlog archive not collected: {why}");
                return Ok("nothing");
            }
        };
        let folder = binlog::binlog_prefix(store.prefix(), cluster);
        let index_key = binlog::index_key(store.prefix(), cluster);
        let snapshot = match store::read(store, &index_key, &folder).await {
            Ok(snapshot) => Some(snapshot),
            Err(err @ store::StoreError::Malformed { .. }) => {
                self.malformed(deleter, location, cluster, err).await;
                None
            }
            Err(err) => return Err(err.into()),
        };
        let Some(snapshot) = snapshot else {
            return Ok("refused");
        };
        // Every segment the location's index lists is a candidate: its horizon is the
        // catalog's own, not a job's.
        let listed: BTreeSet<String> = snapshot
            .index
            .segments
            .iter()
            .map(|segment| segment.key.clone())
            .collect();
        let expired = snapshot.index.select_expired(&listed, horizon);
        let swept = match sweep(
            store,
            &index_key,
            &folder,
            &snapshot.index,
            expired,
            horizon,
        )
        .await
        {
            Ok(swept) => swept,
            Err(SweepError::MalformedAfter(err)) => {
                self.malformed(deleter, location, cluster, err).await;
                return Ok("refused");
            }
            Err(SweepError::Failed(err)) => return Err(err),
        };
        let metrics = deleter.metrics();
        metrics
            .location_binlog_segments_deleted
            .with_label_values(&[location.as_str()])
            .inc_by(swept.segments as u64);
        metrics
            .location_binlog_orphans_deleted
            .with_label_values(&[location.as_str()])
            .inc_by(swept.orphans as u64);
        if swept.segments > 0 || swept.orphans > 0 {
            tracing::info!(
                %cluster,
                %location,
                %horizon,
                segments = swept.segments,
                orphans = swept.orphans,
                conflicts = swept.conflicts,
                generation = ?swept.generation,
                "binlog segments deleted at the location and its index rewritten"
            );
        }
        if publish_permanent_failure(
            &deleter.topology().jetstream,
            "location-binlog-delete-failed",
            cluster,
            sexton_shared::channels::COPY_DELETE_JOBS.subject(cluster),
            &format!("binlog objects at {location}"),
            &swept.failed,
        )
        .await
        {
            return Ok("failed");
        }
        if let Some(failure) = swept.failed.first() {
            anyhow::bail!(
                "{} binlog objects at {location} could not be deleted (kept in the index): {failure}",
                swept.failed.len()
            );
        }
        Ok(if swept.segments > 0 || swept.orphans > 0 {
            "collected"
        } else {
            "nothing"
        })
    }
}

impl LocationCollector {
    /// The location's index cannot be read: nothing is deleted, it is never rewritten, and an
    /// operator hears of it.
    async fn malformed(
        &self,
        deleter: &Deleter,
        location: &LocationName,
        cluster: &ClusterName,
        err: store::StoreError,
    ) {
        publish_incident(
            &deleter.topology().jetstream,
            Incident {
                schema_version: wire::SCHEMA_VERSION,
                service: "deleter".into(),
                kind: "location-binlog-index-malformed".into(),
                cluster: Some(cluster.to_string()),
                backup_id: None,
                subject: sexton_shared::channels::COPY_DELETE_JOBS.subject(cluster),
                reason: format!(
                    "refusing to collect the binlog archive of {cluster} at {location}: {err}; \
                     the index is not rewritten"
                ),
                at: Utc::now(),
            },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_known_horizon_is_collected() {
        let at = DateTime::parse_from_rfc3339("2026-03-03T00:00:00Z").unwrap();
        assert_eq!(
            collectable(&LocationHorizon::Since {
                at,
                backup: "b3".into()
            }),
            Ok(at)
        );
        let no_full = collectable(&LocationHorizon::NoFull).unwrap_err();
        assert!(no_full.contains("no full backup"), "{no_full}");
        let unknown = collectable(&LocationHorizon::Unknown {
            backup: "b1".into(),
        })
        .unwrap_err();
        assert!(unknown.contains("b1"), "{unknown}");
    }
}
