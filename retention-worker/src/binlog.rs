//! The retention-worker's side of binlog garbage collection (seed 003). The cluster's index,
//! `<prefix>/<cluster>/binlog/_index.json`, is the source of truth for which segments exist;
//! the worker reads it on every run and hands its segments to the engine with the catalog
//! ([`load`]), then turns the plans of all the cluster's groups into one binlog job per cluster
//! ([`jobs`]): a segment goes only if every group's plan lets it go. It also answers
//! `binlog.status`.
//!
//! A binlog problem never stops backup retention: an unreadable index is reported (incident,
//! status) and that run simply publishes no binlog job.

use chrono::{DateTime, FixedOffset, Utc};
use serde::Serialize;
use sexton_model::{
    names::ClusterName,
    wire::{self, BinlogGcJob, MAX_BINLOG_JOB_KEYS},
};
use sexton_shared::{
    binlog::{self, cluster_binlog, store, BinlogIndex, ClusterBinlog},
    object_store::ObjectStore,
};

use crate::group_plan::GroupPlan;

/// What the worker found where the index should be.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum IndexState {
    /// No index yet: the cluster has no segments.
    Missing,
    Ok {
        etag: String,
        generation: u64,
    },
    /// The index exists and cannot be read: nothing is collected until a human fixes it.
    Malformed {
        error: String,
    },
    /// The object store did not answer; the next run tries again.
    Unavailable {
        error: String,
    },
}

/// A cluster's index as one retention run sees it.
#[derive(Debug, Clone)]
pub struct BinlogInput {
    pub key: String,
    pub state: IndexState,
    /// Empty unless `state` is `Ok`.
    pub index: BinlogIndex,
}

impl BinlogInput {
    /// The segments for the engine's catalog.
    pub fn segments(&self) -> Vec<sexton_retention::BinlogSegment> {
        self.index.to_engine()
    }

    /// Whether segments may be collected on this reading.
    pub fn collectable(&self) -> bool {
        matches!(self.state, IndexState::Ok { .. } | IndexState::Missing)
    }

    pub fn etag(&self) -> Option<&str> {
        match &self.state {
            IndexState::Ok { etag, .. } => Some(etag),
            _ => None,
        }
    }
}

/// Reads the cluster's index. Never fails: what went wrong is in the state.
pub async fn load(store: &ObjectStore, prefix: &str, cluster: &ClusterName) -> BinlogInput {
    let key = binlog::index_key(prefix, cluster);
    let folder = binlog::binlog_prefix(prefix, cluster);
    let (state, index) = match store::read(store, &key, &folder).await {
        Ok(store::Snapshot { index, etag: None }) => (IndexState::Missing, index),
        Ok(store::Snapshot {
            index,
            etag: Some(etag),
        }) => (
            IndexState::Ok {
                etag,
                generation: index.generation,
            },
            index,
        ),
        Err(store::StoreError::Malformed { error, .. }) => (
            IndexState::Malformed {
                error: error.to_string(),
            },
            BinlogIndex::empty(),
        ),
        Err(err) => (
            IndexState::Unavailable {
                error: err.to_string(),
            },
            BinlogIndex::empty(),
        ),
    };
    BinlogInput { key, state, index }
}

/// The cluster's decision from its groups' plans (see [`cluster_binlog`]).
pub fn decide(groups: &[GroupPlan]) -> Result<ClusterBinlog, binlog::NoCollection> {
    cluster_binlog(groups.iter().map(|group| {
        (
            group.plan.as_str(),
            // A held run deletes nothing, so its plan's horizon (past the backups it would
            // delete) is not the cluster's: no horizon, no collection.
            group
                .binlog()
                .filter(|_| !group.breaker.as_ref().is_some_and(|b| b.held)),
        )
    }))
}

/// The jobs that carry a decision, with their de-duplication ids: one job (several only when
/// more than [`MAX_BINLOG_JOB_KEYS`] segments go), identified by cluster, horizon, the number
/// of segments and a digest of the chunk's keys, so every replica and every re-run with the
/// same decision publishes the same messages, and a different decision (other segments, same
/// horizon and count) is never de-duplicated away. A decision that deletes nothing still makes a job: the deleter's pass also
/// removes orphans.
pub fn jobs(
    cluster: &ClusterName,
    decision: &ClusterBinlog,
    index_etag: Option<&str>,
) -> Vec<(String, BinlogGcJob)> {
    let mut chunks: Vec<&[String]> = decision.delete.chunks(MAX_BINLOG_JOB_KEYS).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    let n_delete = decision.delete.len();
    let horizon_ms = decision.horizon.timestamp_millis();
    chunks
        .into_iter()
        .enumerate()
        .map(|(chunk, keys)| {
            (
                format!(
                    "bgc.{cluster}.{horizon_ms}.{n_delete}.{chunk}.{}",
                    keys_digest(keys)
                ),
                BinlogGcJob {
                    schema_version: wire::SCHEMA_VERSION,
                    cluster: cluster.clone(),
                    horizon: decision.horizon,
                    horizon_backup: decision.horizon_backup.clone(),
                    delete: keys.to_vec(),
                    index_etag: index_etag.map(str::to_string),
                },
            )
        })
        .collect()
}

/// A short digest of a job's keys.
fn keys_digest(keys: &[String]) -> String {
    sexton_model::digest::short_digest(keys.iter().map(String::as_str))
}

pub use sexton_shared::api::StatusRequest;

/// `binlog.status` answer: where the PITR horizon is and what the index holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub cluster: ClusterName,
    pub index_key: String,
    pub index: IndexState,
    /// Where garbage collection would cut now; absent when it would not run (see `collection`).
    pub horizon: Option<DateTime<FixedOffset>>,
    pub horizon_backup: Option<String>,
    /// `ok`, or why segments are kept.
    pub collection: String,
    pub segments: SegmentCounts,
    pub oldest_first_event: Option<DateTime<FixedOffset>>,
    pub newest_last_event: Option<DateTime<FixedOffset>>,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentCounts {
    pub total: usize,
    /// Listed with a last event before the horizon: the next pass deletes them.
    pub expired: usize,
    pub kept: usize,
    pub unknown_end: usize,
}

/// The status of a cluster's binlog from a run's inputs and plans.
pub fn status(
    cluster: &ClusterName,
    input: &BinlogInput,
    groups: &[GroupPlan],
    at: DateTime<Utc>,
) -> Status {
    let decision = decide(groups);
    let (horizon, horizon_backup, expired, collection) = match (&decision, input.collectable()) {
        (Ok(decision), true) => (
            Some(decision.horizon),
            decision.horizon_backup.clone(),
            decision.delete.len(),
            "ok".to_string(),
        ),
        (Ok(decision), false) => (
            Some(decision.horizon),
            decision.horizon_backup.clone(),
            0,
            "the index cannot be read: segments are kept".to_string(),
        ),
        (Err(why), _) => (None, None, 0, why.to_string()),
    };
    let total = input.index.segments.len();
    Status {
        cluster: cluster.clone(),
        index_key: input.key.clone(),
        index: input.state.clone(),
        horizon,
        horizon_backup,
        collection,
        segments: SegmentCounts {
            total,
            expired,
            kept: total - expired,
            unknown_end: input
                .index
                .segments
                .iter()
                .filter(|s| s.last_event.is_none())
                .count(),
        },
        oldest_first_event: input.index.oldest_first_event(),
        newest_last_event: input.index.newest_last_event(),
        at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(text).unwrap()
    }

    #[test]
    fn one_job_per_cluster_and_decision_split_only_when_large() {
        let cluster = ClusterName::new("c1").unwrap();
        let mut decision = ClusterBinlog {
            horizon: t("2026-01-01T00:00:00Z"),
            horizon_backup: Some("b1".into()),
            delete: vec![],
        };
        let empty = jobs(&cluster, &decision, Some("\"e\""));
        assert_eq!(empty.len(), 1);
        assert!(empty[0].0.starts_with("bgc.c1.1767225600000.0.0."));
        assert!(empty[0].1.delete.is_empty());
        decision.delete = (0..2500)
            .map(|n| format!("backups/c1/binlog/{n}"))
            .collect();
        let split = jobs(&cluster, &decision, None);
        assert_eq!(
            split
                .iter()
                .map(|(_, job)| job.delete.len())
                .collect::<Vec<_>>(),
            [1000, 1000, 500]
        );
        assert!(split[2].0.starts_with("bgc.c1.1767225600000.2500.2."));
        // Another decision with the same horizon and count is another message.
        let mut other = decision.clone();
        other.delete[0] = "backups/c1/binlog/other".into();
        let other = jobs(&cluster, &other, None);
        assert_ne!(other[0].0, split[0].0);
        assert_eq!(other[1].0, split[1].0, "an unchanged chunk keeps its id");
        for (_, job) in &split {
            // Every job fits the wire limits.
            wire::decode::<BinlogGcJob>(&wire::encode(job)).unwrap();
        }
        assert_eq!(jobs(&cluster, &decision, None), split, "deterministic");
    }
}
