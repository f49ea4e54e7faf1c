//! The binlog (or WAL) index of a cluster, `<prefix>/<cluster>/binlog/_index.json`, and the
//! pure decisions around it: parse and serialise, apply appends (executors) and removals (the
//! deleter's garbage collection), which segments and orphan objects may go, and how far back
//! the catalog still needs segments.
//!
//! The index is the source of truth for which segments exist (seed 003): executors append to
//! it, the deleter removes from it, and both write it with a conditional `PutObject` (see
//! `sexton_shared::binlog::store`), so two writers never lose each other's changes. Nothing here
//! does I/O.
//!
//! # Format (`schema_version` 1)
//!
//! ```json
//! {
//!   "schema_version": 1,
//!   "generation": 42,
//!   "segments": [
//!     {"key": "backups/db1/binlog/mysql-bin.000041",
//!      "first_event": "2026-03-01T00:00:00Z", "last_event": "2026-03-01T01:00:00Z"},
//!     {"key": "backups/db1/binlog/mysql-bin.000042", "first_event": "2026-03-01T01:00:00Z"}
//!   ]
//! }
//! ```
//!
//! - `schema_version` is required; any other version is refused (a writer must not rewrite an
//!   index it does not understand).
//! - `generation` counts the writes; every conditional write increments it. Informational.
//! - `segments`, in append order: `key` is the full object key, a direct child of
//!   `<prefix>/<cluster>/binlog/` (no further `/`, never `_index.json`); `first_event` and
//!   `last_event` are RFC 3339 times with an offset, both optional. A segment without a
//!   `last_event` (still being written, or unknown) is never deleted.
//! - Keys are unique and `first_event <= last_event`. Unknown fields, at the top and in a
//!   segment, are kept on rewrite, so a newer writer's additions survive an older deleter.

use std::collections::{BTreeSet, HashSet};

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::keys::{cluster_prefix, ObjectInfo};
use crate::names::{ClusterName, LocationName};
use crate::records::{BackupRecord, BackupStatus};

/// The one index version this build reads and writes.
pub const INDEX_SCHEMA_VERSION: u64 = 1;

/// The index object's name inside the binlog folder.
pub const INDEX_FILE: &str = "_index.json";

/// How much older than the horizon (by the object store's clock) an object missing from the
/// index must be before the garbage collector removes it: covers clock skew between the
/// executor that reported the backups and the object store, as reports do (5 minutes).
pub const ORPHAN_MARGIN: chrono::Duration = chrono::Duration::minutes(5);

/// `<prefix>/<cluster>/binlog/`
pub fn binlog_prefix(prefix: &str, cluster: &ClusterName) -> String {
    format!("{}binlog/", cluster_prefix(prefix, cluster))
}

/// `<prefix>/<cluster>/binlog/_index.json`
pub fn index_key(prefix: &str, cluster: &ClusterName) -> String {
    format!("{}{INDEX_FILE}", binlog_prefix(prefix, cluster))
}

/// Why an index could not be read. None is retryable: the same bytes give the same error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("binlog index is not valid json: {0}")]
    Json(String),
    #[error("binlog index has no schema_version")]
    MissingVersion,
    #[error("binlog index has schema_version {0}; this build reads version 1")]
    UnsupportedVersion(String),
    #[error("binlog index is malformed: {0}")]
    Invalid(String),
    #[error("binlog index segment {key:?}: {message}")]
    Segment { key: String, message: String },
}

/// The whole index.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct BinlogIndex {
    pub schema_version: u64,
    #[serde(default)]
    pub generation: u64,
    pub segments: Vec<IndexSegment>,
    /// Fields a newer writer added; written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One segment of the index.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct IndexSegment {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_event: Option<DateTime<FixedOffset>>,
    /// Unknown (absent) means the segment is kept: it might reach past the horizon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event: Option<DateTime<FixedOffset>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl IndexSegment {
    pub fn new(
        key: impl Into<String>,
        first_event: Option<DateTime<FixedOffset>>,
        last_event: Option<DateTime<FixedOffset>>,
    ) -> IndexSegment {
        IndexSegment {
            key: key.into(),
            first_event,
            last_event,
            extra: Map::new(),
        }
    }
}

impl Default for BinlogIndex {
    fn default() -> Self {
        BinlogIndex::empty()
    }
}

impl BinlogIndex {
    /// The index before anything was appended.
    pub fn empty() -> BinlogIndex {
        BinlogIndex {
            schema_version: INDEX_SCHEMA_VERSION,
            generation: 0,
            segments: Vec::new(),
            extra: Map::new(),
        }
    }

    /// Parses and validates an index. The checks that need the cluster (where the keys lie)
    /// are in [`BinlogIndex::check_keys`].
    pub fn parse(bytes: &[u8]) -> Result<BinlogIndex, IndexError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|err| IndexError::Json(err.to_string()))?;
        let Value::Object(object) = &value else {
            return Err(IndexError::Invalid("the top level is not an object".into()));
        };
        match object.get("schema_version") {
            None => return Err(IndexError::MissingVersion),
            Some(Value::Number(n)) if n.as_u64() == Some(INDEX_SCHEMA_VERSION) => {}
            Some(other) => return Err(IndexError::UnsupportedVersion(other.to_string())),
        }
        let index: BinlogIndex =
            serde_json::from_value(value).map_err(|err| IndexError::Invalid(err.to_string()))?;
        let mut seen: HashSet<&str> = HashSet::with_capacity(index.segments.len());
        for segment in &index.segments {
            let fail = |message: &str| {
                Err(IndexError::Segment {
                    key: segment.key.chars().take(200).collect(),
                    message: message.to_owned(),
                })
            };
            if segment.key.is_empty() {
                return fail("key is empty");
            }
            if !seen.insert(segment.key.as_str()) {
                return fail("duplicate key");
            }
            if let (Some(first), Some(last)) = (segment.first_event, segment.last_event) {
                if first > last {
                    return fail("first_event is after last_event");
                }
            }
            // The retention engine computes with nanosecond timestamps.
            for time in [segment.first_event, segment.last_event]
                .into_iter()
                .flatten()
            {
                if time.timestamp_nanos_opt().is_none() {
                    return fail("time is outside the supported range (years 1678 to 2261)");
                }
            }
        }
        Ok(index)
    }

    /// Parses an index and checks that every key is a segment of `binlog_prefix`.
    pub fn parse_for(bytes: &[u8], binlog_prefix: &str) -> Result<BinlogIndex, IndexError> {
        let index = BinlogIndex::parse(bytes)?;
        index.check_keys(binlog_prefix)?;
        Ok(index)
    }

    /// Every key must be a direct child of `binlog_prefix` (the cluster's binlog folder) and
    /// not the index itself: the garbage collector deletes what the index lists, so an entry
    /// elsewhere would let an index reach another cluster's objects or a backup's.
    pub fn check_keys(&self, binlog_prefix: &str) -> Result<(), IndexError> {
        for segment in &self.segments {
            if let Err(why) = check_segment_key(binlog_prefix, &segment.key) {
                return Err(IndexError::Segment {
                    key: segment.key.chars().take(200).collect(),
                    message: why.to_owned(),
                });
            }
        }
        Ok(())
    }

    /// The bytes written to the object store.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("the index serialises")
    }

    pub fn contains(&self, key: &str) -> bool {
        self.segments.iter().any(|segment| segment.key == key)
    }

    /// Appends the segments whose keys the index does not list yet, in order; a key already
    /// listed keeps its entry (a redelivered append is a no-op). Returns how many were added.
    pub fn apply_appends(&mut self, new: &[IndexSegment]) -> usize {
        let mut keys: HashSet<String> = self.segments.iter().map(|s| s.key.clone()).collect();
        let mut added = 0;
        for segment in new {
            if keys.insert(segment.key.clone()) {
                self.segments.push(segment.clone());
                added += 1;
            }
        }
        added
    }

    /// Puts `older` (an archive moved from another store, issue 54) before the segments
    /// listed: those whose keys are not listed yet, in their order. Returns how many were added.
    pub fn apply_migrated(&mut self, older: &[IndexSegment]) -> usize {
        let keys: HashSet<&str> = self.segments.iter().map(|s| s.key.as_str()).collect();
        let mut seen = HashSet::new();
        let added: Vec<IndexSegment> = older
            .iter()
            .filter(|s| !keys.contains(s.key.as_str()) && seen.insert(s.key.clone()))
            .cloned()
            .collect();
        let n = added.len();
        if n > 0 {
            let listed = std::mem::take(&mut self.segments);
            self.segments = added;
            self.segments.extend(listed);
        }
        n
    }

    /// Removes the segments whose keys are in `keys`; the others keep their order. Returns
    /// how many were removed (a repeated removal removes nothing).
    pub fn apply_removals(&mut self, keys: &BTreeSet<String>) -> usize {
        let before = self.segments.len();
        self.segments.retain(|segment| !keys.contains(&segment.key));
        before - self.segments.len()
    }

    /// The newest known `last_event`, where an executor's next segment starts.
    pub fn newest_last_event(&self) -> Option<DateTime<FixedOffset>> {
        self.segments.iter().filter_map(|s| s.last_event).max()
    }

    pub fn oldest_first_event(&self) -> Option<DateTime<FixedOffset>> {
        self.segments.iter().filter_map(|s| s.first_event).min()
    }

    /// The keys among `candidates` whose entry has a known `last_event` before `horizon`: what
    /// a garbage-collection pass may delete. Keys the index no longer lists are not returned
    /// (a redelivered job finds its work done); an unknown end is kept.
    pub fn select_expired(
        &self,
        candidates: &BTreeSet<String>,
        horizon: DateTime<FixedOffset>,
    ) -> Vec<String> {
        self.segments
            .iter()
            .filter(|segment| candidates.contains(&segment.key))
            .filter(|segment| segment.last_event.is_some_and(|last| last < horizon))
            .map(|segment| segment.key.clone())
            .collect()
    }
}

/// Checks that `key` is a segment key of the binlog folder `binlog_prefix`.
pub fn check_segment_key(binlog_prefix: &str, key: &str) -> Result<(), &'static str> {
    let Some(name) = key.strip_prefix(binlog_prefix) else {
        return Err("key is not under the cluster's binlog prefix");
    };
    if name.is_empty() || name == "." || name == ".." {
        return Err("key names no segment");
    }
    if name.contains('/') {
        return Err("key is not a direct child of the binlog prefix");
    }
    if name == INDEX_FILE {
        return Err("key names the index itself");
    }
    if name.chars().any(|c| c.is_control() || c == '\\') {
        return Err("key has a control character or a backslash");
    }
    Ok(())
}

/// Objects of the binlog folder that the index does not list and that were written well
/// before `horizon` (by the store's clock, less [`ORPHAN_MARGIN`]): left by an executor that
/// died between writing a segment and appending it, or by an older writer. A segment is
/// uploaded after its last event, so an object written before the horizon holds only events
/// before it; anything newer, or without a time, is kept. Only direct children of the folder
/// count, so a backup whose `<backup-name>` happens to be `binlog` is never touched.
pub fn select_orphans(
    objects: &[ObjectInfo],
    index: &BinlogIndex,
    binlog_prefix: &str,
    horizon: DateTime<FixedOffset>,
) -> Vec<String> {
    let listed: HashSet<&str> = index.segments.iter().map(|s| s.key.as_str()).collect();
    let cutoff = horizon - ORPHAN_MARGIN;
    objects
        .iter()
        .filter(|object| check_segment_key(binlog_prefix, &object.key).is_ok())
        .filter(|object| !listed.contains(object.key.as_str()))
        .filter(|object| object.last_modified.is_some_and(|at| at < cutoff))
        .map(|object| object.key.clone())
        .collect()
}

/// What the catalog allows a garbage-collection job to delete right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafeHorizon {
    /// Segments ending before this may go; `None`: nothing may go.
    pub horizon: Option<DateTime<FixedOffset>>,
    /// Full backups older than the job's horizon that are being deleted (expiring or
    /// deleting): once they are gone the job can go as far as it asks, so it is worth retrying.
    pub waiting_for: Vec<String>,
    /// Why the horizon is earlier than the job's, for logs.
    pub reason: Option<String>,
    /// Why no segment may go at all, when an operator should hear of it: the catalog holds
    /// no completed full backup of the cluster, so no horizon can be derived from it and the
    /// job's own is not believed (a forged or stale job on a cluster without records).
    pub refused: Option<String>,
}

/// The deleter's re-check of a garbage-collection job against the current catalog: a stale
/// job (say, from before a policy change that keeps an older full backup again) must not
/// shorten the recovery window. The answer is the earlier of the job's horizon and the start of
/// the oldest full backup the catalog still holds in any state but `failed` — including ones
/// that are expiring or whose deletion failed, whose objects still exist. The retention
/// engine's horizon is the start of the oldest *kept* full, which is never earlier, so this
/// deletes at most what the current plan deletes. A full backup without any time stops all
/// deletion (the engine does the same).
pub fn safe_horizon(job_horizon: DateTime<FixedOffset>, records: &[BackupRecord]) -> SafeHorizon {
    safe_horizon_with(job_horizon, records, &BTreeSet::new())
}

/// [`safe_horizon`], where the backups of `range_only` (ids) do not pull the horizon back: a
/// plan made now keeps them restorable to their own end only (`range_only_backups` in
/// `sexton_shared::planning`), and the caller keeps their own ranges instead
/// (`kept_for_ranges`, there too).
pub fn safe_horizon_with(
    job_horizon: DateTime<FixedOffset>,
    records: &[BackupRecord],
    range_only: &BTreeSet<String>,
) -> SafeHorizon {
    let mut horizon = job_horizon;
    let mut reason = None;
    let mut waiting_for = Vec::new();
    if !records
        .iter()
        .any(|r| r.counts_as_full() && r.status == BackupStatus::Completed)
    {
        return SafeHorizon {
            horizon: None,
            waiting_for,
            reason: None,
            refused: Some(
                "the catalog holds no completed full backup of the cluster, so the binlog \
                 horizon cannot be derived from it; the job's horizon is not believed and no \
                 segment is deleted"
                    .into(),
            ),
        };
    }
    for record in records {
        // A backup whose objects at primary are gone (its copies elsewhere keep the record,
        // issue 28) needs nothing of the primary's binlog archive.
        if !record.counts_as_full()
            || record.status == BackupStatus::Failed
            || !record.held_at_primary()
            || range_only.contains(record.id.as_str())
        {
            continue;
        }
        let Some(start) = record.started_at.or(record.completed_at) else {
            return SafeHorizon {
                horizon: None,
                waiting_for: Vec::new(),
                reason: Some(format!(
                    "full backup {} has no start time; no segment is deleted",
                    record.id
                )),
                refused: None,
            };
        };
        if start < job_horizon {
            if matches!(
                record.status,
                BackupStatus::Expiring | BackupStatus::Deleting
            ) {
                waiting_for.push(record.id.to_string());
            }
            if start < horizon {
                horizon = start;
                reason = Some(format!(
                    "full backup {} ({}) started before the job's horizon",
                    record.id,
                    record.status.as_str()
                ));
            }
        }
    }
    waiting_for.sort();
    SafeHorizon {
        horizon: Some(horizon),
        waiting_for,
        reason,
        refused: None,
    }
}

/// A cluster's binlog decision, from the plans of all its groups (cluster/plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterBinlog {
    /// The earliest of the groups' horizons.
    pub horizon: DateTime<FixedOffset>,
    pub horizon_backup: Option<String>,
    /// Keys every group's plan deletes (a segment ending before the earliest horizon).
    pub delete: Vec<String>,
}

/// Why a cluster's binlog is not garbage-collected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoCollection {
    #[error("the cluster has no backup groups")]
    NoGroups,
    #[error("group {0} was not planned: binlog segments are kept")]
    GroupHeld(String),
    #[error("group {0} keeps no full backup with a start time: binlog segments are kept")]
    NoHorizon(String),
}

/// The binlog index is one per cluster, the retention plans are per group (cluster/plan): a
/// segment goes only when every group's plan lets it go, and a group that was not planned
/// (no policy, conflicting policies, an engine refusal) or has no horizon stops all binlog
/// deletion for the cluster. `groups` are (group name, its binlog plan if it was planned).
pub fn cluster_binlog<'a>(
    groups: impl IntoIterator<Item = (&'a str, Option<&'a sexton_retention::BinlogPlan>)>,
) -> Result<ClusterBinlog, NoCollection> {
    let mut decision: Option<ClusterBinlog> = None;
    for (name, plan) in groups {
        let plan = plan.ok_or_else(|| NoCollection::GroupHeld(name.to_owned()))?;
        let horizon = plan
            .horizon
            .ok_or_else(|| NoCollection::NoHorizon(name.to_owned()))?;
        decision = Some(match decision {
            None => ClusterBinlog {
                horizon,
                horizon_backup: plan.horizon_backup.clone(),
                delete: plan.delete.clone(),
            },
            Some(mut so_far) => {
                let theirs: HashSet<&str> = plan.delete.iter().map(String::as_str).collect();
                so_far.delete.retain(|key| theirs.contains(key.as_str()));
                if horizon < so_far.horizon {
                    so_far.horizon = horizon;
                    so_far.horizon_backup = plan.horizon_backup.clone();
                }
                so_far
            }
        });
    }
    decision.ok_or(NoCollection::NoGroups)
}

/// How far back a location's copy of the binlog archive must reach (issue 28): the start of the
/// oldest full backup whose copy the location holds or awaits. The copier copies the segments
/// that end at or after it; the deleter removes, at that location, those that end before it.
/// One function for both, so a segment the location collected is never copied back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocationHorizon {
    /// No full backup is held or awaited there: no segment is needed there now. Nothing is
    /// copied, and nothing is deleted either: a catalog that lost its records must not empty
    /// the archive that survived elsewhere.
    NoFull,
    /// A full backup there has no start time: every segment may be needed. Everything is
    /// copied, nothing deleted.
    Unknown { backup: String },
    /// Segments ending before this serve no copy there.
    Since {
        at: DateTime<FixedOffset>,
        backup: String,
    },
}

/// The [`LocationHorizon`] of `location` over a cluster's records.
pub fn location_horizon(records: &[BackupRecord], location: &LocationName) -> LocationHorizon {
    let mut oldest: Option<(DateTime<FixedOffset>, &BackupRecord)> = None;
    for record in records {
        if !record.counts_as_full() || record.status == BackupStatus::Failed {
            continue;
        }
        let there = match record.copies.get(location) {
            Some(copy) => copy.is_held(),
            None => record.copy_to.contains(location),
        };
        if !there {
            continue;
        }
        let Some(start) = record.started_at.or(record.completed_at) else {
            return LocationHorizon::Unknown {
                backup: record.id.to_string(),
            };
        };
        if oldest.is_none_or(|(at, _)| start < at) {
            oldest = Some((start, record));
        }
    }
    match oldest {
        None => LocationHorizon::NoFull,
        Some((at, record)) => LocationHorizon::Since {
            at,
            backup: record.id.to_string(),
        },
    }
}

/// The segments of the source's index that the location's archive lacks and needs, each as
/// its entry will read there (`key` below the location's prefix; times, size and SHA-256 as
/// at the source), in the source's order. Only closed segments (with a `last_event`) are
/// copied: one still being written would be copied short. A source key outside the source's
/// prefix is left out (the index was checked against it when read).
pub fn segments_to_copy(
    source: &BinlogIndex,
    destination: &BinlogIndex,
    source_prefix: &str,
    destination_prefix: &str,
    horizon: &LocationHorizon,
) -> Vec<(IndexSegment, IndexSegment)> {
    let needed = |segment: &IndexSegment| match (horizon, segment.last_event) {
        (_, None) | (LocationHorizon::NoFull, _) => false,
        (LocationHorizon::Unknown { .. }, Some(_)) => true,
        (LocationHorizon::Since { at, .. }, Some(last)) => last >= *at,
    };
    source
        .segments
        .iter()
        .filter(|segment| needed(segment))
        .filter_map(|segment| {
            let key =
                crate::copies::destination_key(source_prefix, destination_prefix, &segment.key)?;
            if destination.contains(&key) {
                return None;
            }
            let mut there = segment.clone();
            there.key = key;
            Some((segment.clone(), there))
        })
        .collect()
}

/// The keys among `expired` (segments of `source` that the source's collection would delete)
/// that a location still needs and does not hold yet (issue 28): the source keeps them until
/// the copier copied them, as it keeps a backup that awaits its copy. `there` is the
/// location's index, `None` when it could not be read (down, unreadable, not configured
/// here): then every segment the location's horizon needs is kept.
pub fn awaiting_copy(
    source: &BinlogIndex,
    expired: &[String],
    horizon: &LocationHorizon,
    there: Option<&BinlogIndex>,
    source_prefix: &str,
    destination_prefix: &str,
) -> BTreeSet<String> {
    let empty = BinlogIndex::empty();
    let needed: HashSet<String> = segments_to_copy(
        source,
        there.unwrap_or(&empty),
        source_prefix,
        destination_prefix,
        horizon,
    )
    .into_iter()
    .map(|(from, _)| from.key)
    .collect();
    expired
        .iter()
        .filter(|key| needed.contains(*key))
        .cloned()
        .collect()
}

/// The size and SHA-256 `sexton binlog append` recorded for a segment, if it did.
pub fn segment_digest(segment: &IndexSegment) -> (Option<u64>, Option<String>) {
    let size = segment.extra.get("size").and_then(Value::as_u64);
    let sha256 = segment
        .extra
        .get("sha256")
        .and_then(Value::as_str)
        .filter(|sha| sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_ascii_lowercase);
    (size, sha256)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(text).unwrap()
    }

    const PREFIX: &str = "backups/c1/binlog/";

    fn key(name: &str) -> String {
        format!("{PREFIX}{name}")
    }

    fn index(segments: &[(&str, Option<&str>, Option<&str>)]) -> BinlogIndex {
        BinlogIndex {
            segments: segments
                .iter()
                .map(|(name, first, last)| IndexSegment::new(key(name), first.map(t), last.map(t)))
                .collect(),
            ..BinlogIndex::empty()
        }
    }

    #[test]
    fn round_trips_and_keeps_unknown_fields() {
        let text = r#"{"schema_version":1,"generation":7,"writer":"future",
            "segments":[{"key":"backups/c1/binlog/a","first_event":"2026-01-01T00:00:00+02:00",
            "last_event":"2026-01-01T01:00:00+02:00","gtid":"x:1-5"},
            {"key":"backups/c1/binlog/b"}]}"#;
        let parsed = BinlogIndex::parse_for(text.as_bytes(), PREFIX).unwrap();
        assert_eq!(parsed.generation, 7);
        assert_eq!(parsed.segments.len(), 2);
        assert_eq!(parsed.segments[1].last_event, None);
        let written = parsed.to_json();
        let again = BinlogIndex::parse(&written).unwrap();
        assert_eq!(again, parsed);
        let value: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(value["writer"], "future");
        assert_eq!(value["segments"][0]["gtid"], "x:1-5");
        assert_eq!(
            value["segments"][0]["first_event"],
            "2026-01-01T00:00:00+02:00"
        );
        assert!(value["segments"][1].get("last_event").is_none());
    }

    #[test]
    fn malformed_indexes_get_clear_errors() {
        let seg = |body: &str| format!(r#"{{"schema_version":1,"segments":[{body}]}}"#);
        let cases: Vec<(String, &str)> = vec![
            ("".into(), "not valid json"),
            ("{".into(), "not valid json"),
            ("\u{feff}garbage".into(), "not valid json"),
            ("[]".into(), "top level is not an object"),
            ("null".into(), "top level is not an object"),
            (r#"{"segments":[]}"#.into(), "no schema_version"),
            (
                r#"{"schema_version":2,"segments":[]}"#.into(),
                "schema_version 2",
            ),
            (
                r#"{"schema_version":"1","segments":[]}"#.into(),
                "schema_version \"1\"",
            ),
            (r#"{"schema_version":1}"#.into(), "missing field `segments`"),
            (
                r#"{"schema_version":1,"segments":{}}"#.into(),
                "invalid type",
            ),
            (
                seg(r#"{"first_event":"2026-01-01T00:00:00Z"}"#),
                "missing field `key`",
            ),
            (seg(r#"{"key":""}"#), "key is empty"),
            (seg(r#"{"key":5}"#), "invalid type"),
            (
                seg(r#"{"key":"backups/c1/binlog/a","last_event":"yesterday"}"#),
                "input contains invalid characters",
            ),
            (
                seg(r#"{"key":"backups/c1/binlog/a","last_event":"2026-01-01T00:00:00"}"#),
                "premature end of input",
            ),
            (
                seg(r#"{"key":"backups/c1/binlog/a"},{"key":"backups/c1/binlog/a"}"#),
                "duplicate key",
            ),
            (
                seg(
                    r#"{"key":"backups/c1/binlog/a","first_event":"2026-01-02T00:00:00Z","last_event":"2026-01-01T00:00:00Z"}"#,
                ),
                "first_event is after last_event",
            ),
            (
                seg(r#"{"key":"backups/c1/binlog/a","last_event":"2999-01-01T00:00:00Z"}"#),
                "outside the supported range",
            ),
        ];
        for (text, expect) in cases {
            let err = BinlogIndex::parse(text.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(expect), "{text}: {err}");
            assert!(err.starts_with("binlog index"), "{err}");
        }
    }

    #[test]
    fn keys_must_be_segments_of_the_cluster() {
        for bad in [
            "backups/c2/binlog/a",
            "backups/c1/binlog/",
            "backups/c1/binlog/_index.json",
            "backups/c1/binlog/../x",
            "backups/c1/binlog/sub/a",
            "backups/c1/nightly/b1/backup.xbstream",
            "backups/c1/binlog/a\u{0}",
            "/backups/c1/binlog/a",
        ] {
            let text =
                serde_json::json!({"schema_version": 1, "segments": [{"key": bad}]}).to_string();
            let err = BinlogIndex::parse_for(text.as_bytes(), PREFIX).unwrap_err();
            assert!(matches!(err, IndexError::Segment { .. }), "{bad}: {err}");
        }
        BinlogIndex::parse_for(
            br#"{"schema_version":1,"segments":[{"key":"backups/c1/binlog/mysql-bin.000001"}]}"#,
            PREFIX,
        )
        .unwrap();
    }

    #[test]
    fn appends_are_idempotent_and_keep_order() {
        let mut idx = index(&[("a", None, Some("2026-01-01T00:00:00Z"))]);
        let new = vec![
            IndexSegment::new(key("b"), None, None),
            IndexSegment::new(key("a"), None, Some(t("2026-05-01T00:00:00Z"))),
            IndexSegment::new(key("c"), None, None),
        ];
        assert_eq!(idx.apply_appends(&new), 2);
        assert_eq!(idx.apply_appends(&new), 0);
        let keys: Vec<&str> = idx.segments.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, [key("a"), key("b"), key("c")]);
        // The existing entry of `a` was not replaced.
        assert_eq!(idx.segments[0].last_event, Some(t("2026-01-01T00:00:00Z")));
    }

    #[test]
    fn a_migrated_archive_goes_before_what_is_listed_once_and_in_its_order() {
        // Appended at the new store since the move: c.
        let mut idx = index(&[("c", None, Some("2026-01-03T00:00:00Z"))]);
        let older = vec![
            IndexSegment::new(key("a"), None, Some(t("2026-01-01T00:00:00Z"))),
            IndexSegment::new(key("b"), None, Some(t("2026-01-02T00:00:00Z"))),
            IndexSegment::new(key("c"), None, Some(t("2026-05-01T00:00:00Z"))),
            IndexSegment::new(key("a"), None, None),
        ];
        assert_eq!(idx.apply_migrated(&older), 2);
        assert_eq!(idx.apply_migrated(&older), 0, "a second move adds nothing");
        let keys: Vec<&str> = idx.segments.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, [key("a"), key("b"), key("c")]);
        // The listed entry of `c` was not replaced, nor the first `a` by the repeated one.
        assert_eq!(idx.segments[2].last_event, Some(t("2026-01-03T00:00:00Z")));
        assert_eq!(idx.segments[0].last_event, Some(t("2026-01-01T00:00:00Z")));
    }

    #[test]
    fn removals_are_idempotent() {
        let mut idx = index(&[("a", None, None), ("b", None, None), ("c", None, None)]);
        let gone: BTreeSet<String> = [key("a"), key("c"), key("zz")].into_iter().collect();
        assert_eq!(idx.apply_removals(&gone), 2);
        assert_eq!(idx.apply_removals(&gone), 0);
        assert_eq!(idx.segments.len(), 1);
        assert_eq!(idx.segments[0].key, key("b"));
    }

    #[test]
    fn only_known_ends_before_the_horizon_expire() {
        let idx = index(&[
            (
                "old",
                Some("2026-01-01T00:00:00Z"),
                Some("2026-01-01T01:00:00Z"),
            ),
            (
                "at",
                Some("2026-01-01T01:00:00Z"),
                Some("2026-01-02T00:00:00Z"),
            ),
            ("open", Some("2026-01-01T00:00:00Z"), None),
            ("other", None, Some("2026-01-01T00:30:00+01:00")),
        ]);
        let all: BTreeSet<String> = idx.segments.iter().map(|s| s.key.clone()).collect();
        let horizon = t("2026-01-02T00:00:00Z");
        assert_eq!(
            idx.select_expired(&all, horizon),
            [key("old"), key("other")]
        );
        let some: BTreeSet<String> = [key("other"), key("gone")].into_iter().collect();
        assert_eq!(idx.select_expired(&some, horizon), [key("other")]);
    }

    #[test]
    fn orphans_are_old_unlisted_direct_children() {
        let idx = index(&[("listed", None, Some("2026-01-01T00:00:00Z"))]);
        let horizon = t("2026-01-02T00:00:00Z");
        let object = |name: &str, at: Option<&str>| ObjectInfo {
            key: format!("{PREFIX}{name}"),
            size: 1,
            last_modified: at.map(|a| t(a).with_timezone(&chrono::Utc)),
        };
        let objects = [
            object("listed", Some("2026-01-01T00:00:00Z")),
            object("orphan", Some("2026-01-01T00:00:00Z")),
            object("recent", Some("2026-01-01T23:58:00Z")),
            object("undated", None),
            object(INDEX_FILE, Some("2026-01-01T00:00:00Z")),
            object("b1/backup.xbstream", Some("2026-01-01T00:00:00Z")),
        ];
        assert_eq!(
            select_orphans(&objects, &idx, PREFIX, horizon),
            [key("orphan")]
        );
    }

    fn full(id: &str, status: BackupStatus, started: Option<&str>) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": "u", "cluster": "c1", "plan": "p", "backup_name": "s",
            "kind": "full", "status": status, "started_at": started,
            "completed_at": started,
        }))
        .unwrap()
    }

    #[test]
    fn the_catalog_can_only_pull_the_horizon_back() {
        let job = t("2026-01-10T00:00:00Z");
        let kept = full("new", BackupStatus::Completed, Some("2026-01-10T00:00:00Z"));
        assert_eq!(
            safe_horizon(job, std::slice::from_ref(&kept)),
            SafeHorizon {
                horizon: Some(job),
                waiting_for: vec![],
                reason: None,
                refused: None,
            }
        );
        // An older full still completed (a stale job): the horizon moves back to it.
        let older = full("old", BackupStatus::Completed, Some("2026-01-05T00:00:00Z"));
        let safe = safe_horizon(job, &[kept.clone(), older]);
        assert_eq!(safe.horizon, Some(t("2026-01-05T00:00:00Z")));
        assert!(safe.waiting_for.is_empty());
        // One being deleted: the same, and the job is worth retrying once it is gone.
        let expiring = full("exp", BackupStatus::Expiring, Some("2026-01-03T00:00:00Z"));
        let failed = full("bad", BackupStatus::Failed, Some("2026-01-01T00:00:00Z"));
        let safe = safe_horizon(job, &[kept.clone(), expiring, failed]);
        assert_eq!(safe.horizon, Some(t("2026-01-03T00:00:00Z")));
        assert_eq!(safe.waiting_for, ["exp"]);
        // A newer catalog never pushes it forward; a full without a time stops everything.
        let safe = safe_horizon(t("2026-01-01T00:00:00Z"), std::slice::from_ref(&kept));
        assert_eq!(safe.horizon, Some(t("2026-01-01T00:00:00Z")));
        // Gone from primary, kept for its copies elsewhere (issue 28): nothing here waits
        // for it, and it needs nothing of this archive.
        let mut copies_only = full("away", BackupStatus::Deleting, Some("2026-01-02T00:00:00Z"));
        copies_only.primary_deleted_at = Some("2026-01-09T00:00:00Z".parse().unwrap());
        let safe = safe_horizon(job, &[kept.clone(), copies_only]);
        assert_eq!(safe.horizon, Some(job));
        assert!(safe.waiting_for.is_empty());
        let undated = full("undated", BackupStatus::DeleteFailed, None);
        assert_eq!(safe_horizon(job, &[kept, undated]).horizon, None);
    }

    #[test]
    fn without_a_completed_full_in_the_catalog_nothing_may_go() {
        let job = t("2200-01-01T00:00:00Z");
        for records in [
            vec![],
            vec![full(
                "bad",
                BackupStatus::Failed,
                Some("2026-01-01T00:00:00Z"),
            )],
            vec![full(
                "run",
                BackupStatus::InProgress,
                Some("2026-01-01T00:00:00Z"),
            )],
            vec![full(
                "exp",
                BackupStatus::Expiring,
                Some("2026-01-01T00:00:00Z"),
            )],
        ] {
            let safe = safe_horizon(job, &records);
            assert_eq!(safe.horizon, None, "{records:?}");
            assert!(safe.refused.is_some(), "{records:?}");
        }
    }

    fn plan(horizon: Option<&str>, delete: &[&str]) -> sexton_retention::BinlogPlan {
        sexton_retention::BinlogPlan {
            horizon: horizon.map(t),
            horizon_backup: horizon.map(|h| format!("b-{h}")),
            keep: vec![],
            delete: delete.iter().map(|k| key(k)).collect(),
            range_only: vec![],
        }
    }

    #[test]
    fn every_group_must_agree() {
        let a = plan(Some("2026-01-05T00:00:00Z"), &["s1", "s2", "s3"]);
        let b = plan(Some("2026-01-03T00:00:00Z"), &["s1", "s2"]);
        let both = cluster_binlog([("a", Some(&a)), ("b", Some(&b))]).unwrap();
        assert_eq!(both.horizon, t("2026-01-03T00:00:00Z"));
        assert_eq!(
            both.horizon_backup.as_deref(),
            Some("b-2026-01-03T00:00:00Z")
        );
        assert_eq!(both.delete, [key("s1"), key("s2")]);
        assert_eq!(
            cluster_binlog([("a", Some(&a)), ("held", None)]),
            Err(NoCollection::GroupHeld("held".into()))
        );
        let none = plan(None, &[]);
        assert_eq!(
            cluster_binlog([("a", Some(&a)), ("n", Some(&none))]),
            Err(NoCollection::NoHorizon("n".into()))
        );
        assert_eq!(
            cluster_binlog(std::iter::empty()),
            Err(NoCollection::NoGroups)
        );
    }

    fn copied(mut record: BackupRecord, location: &str, state: &str) -> BackupRecord {
        record.copies.insert(
            LocationName::new(location).unwrap(),
            serde_json::from_value(serde_json::json!({
                "state": state, "copied_at": "2026-01-11T00:00:00Z"
            }))
            .unwrap(),
        );
        record
    }

    #[test]
    fn a_locations_horizon_is_its_oldest_full_held_or_awaited() {
        let dr = LocationName::new("dr").unwrap();
        let at = |text: &str| LocationHorizon::Since {
            at: t(text),
            backup: String::new(),
        };
        let strip = |h: LocationHorizon| match h {
            LocationHorizon::Since { at, .. } => LocationHorizon::Since {
                at,
                backup: String::new(),
            },
            other => other,
        };
        assert_eq!(location_horizon(&[], &dr), LocationHorizon::NoFull);
        let old = full("old", BackupStatus::Completed, Some("2026-01-01T00:00:00Z"));
        let new = full("new", BackupStatus::Completed, Some("2026-01-05T00:00:00Z"));
        // Only at primary: nothing needed at dr.
        assert_eq!(
            location_horizon(&[old.clone(), new.clone()], &dr),
            LocationHorizon::NoFull
        );
        // The newer one copied, the older one's copy deleted there.
        let records = [
            copied(old.clone(), "dr", "deleted"),
            copied(new.clone(), "dr", "copied"),
        ];
        assert_eq!(
            strip(location_horizon(&records, &dr)),
            at("2026-01-05T00:00:00Z")
        );
        // Expiring and deleting copies still hold their objects there.
        for state in ["expiring", "deleting", "copied"] {
            let records = [copied(old.clone(), "dr", state), new.clone()];
            assert_eq!(
                location_horizon(&records, &dr),
                LocationHorizon::Since {
                    at: t("2026-01-01T00:00:00Z"),
                    backup: "old".into()
                }
            );
        }
        // Awaited counts (its copy will need the segments); a failed one never will.
        let mut awaited = old.clone();
        awaited.copy_to = vec![dr.clone()];
        assert_eq!(
            strip(location_horizon(&[awaited.clone(), new.clone()], &dr)),
            at("2026-01-01T00:00:00Z")
        );
        let mut failed = awaited.clone();
        failed.status = BackupStatus::Failed;
        assert_eq!(location_horizon(&[failed], &dr), LocationHorizon::NoFull);
        // Another location's copies do not count here.
        let elsewhere = copied(old.clone(), "vault", "copied");
        assert_eq!(location_horizon(&[elsewhere], &dr), LocationHorizon::NoFull);
        // A full there without a time: everything may be needed.
        let undated = copied(
            full("undated", BackupStatus::Completed, None),
            "dr",
            "copied",
        );
        assert_eq!(
            location_horizon(&[undated, copied(new, "dr", "copied")], &dr),
            LocationHorizon::Unknown {
                backup: "undated".into()
            }
        );
    }

    #[test]
    fn segments_are_copied_closed_needed_and_once() {
        let mut source = index(&[
            (
                "a",
                Some("2026-01-01T00:00:00Z"),
                Some("2026-01-01T23:00:00Z"),
            ),
            (
                "b",
                Some("2026-01-02T00:00:00Z"),
                Some("2026-01-02T23:00:00Z"),
            ),
            (
                "c",
                Some("2026-01-03T00:00:00Z"),
                Some("2026-01-03T23:00:00Z"),
            ),
            ("open", Some("2026-01-04T00:00:00Z"), None),
        ]);
        source.segments[2]
            .extra
            .insert("sha256".into(), Value::String("ab".repeat(32)));
        source.segments[2]
            .extra
            .insert("size".into(), Value::from(42u64));
        let mut destination = BinlogIndex::empty();
        destination
            .segments
            .push(IndexSegment::new("dr/c1/binlog/c", None, None));
        let since = LocationHorizon::Since {
            at: t("2026-01-02T12:00:00Z"),
            backup: "f".into(),
        };
        let copies = segments_to_copy(&source, &destination, "backups", "dr/", &since);
        // a ends before the horizon, c is there already, open is still being written.
        assert_eq!(
            copies
                .iter()
                .map(|(from, to)| (from.key.as_str(), to.key.as_str()))
                .collect::<Vec<_>>(),
            [("backups/c1/binlog/b", "dr/c1/binlog/b")]
        );
        assert_eq!(copies[0].1.last_event, source.segments[1].last_event);
        // Without c at dr it comes with its digest.
        let all = segments_to_copy(
            &source,
            &BinlogIndex::empty(),
            "backups",
            "dr",
            &LocationHorizon::Unknown { backup: "u".into() },
        );
        assert_eq!(all.len(), 3);
        assert_eq!(segment_digest(&all[2].1), (Some(42), Some("ab".repeat(32))));
        assert_eq!(segment_digest(&all[0].1), (None, None));
        assert!(segments_to_copy(
            &source,
            &BinlogIndex::empty(),
            "backups",
            "dr",
            &LocationHorizon::NoFull
        )
        .is_empty());
        // A key outside the source's prefix is never mapped anywhere.
        let stray = index(&[("x", None, Some("2026-01-03T00:00:00Z"))]);
        assert!(segments_to_copy(&stray, &BinlogIndex::empty(), "other", "dr", &since).is_empty());
    }

    #[test]
    fn the_source_keeps_what_a_location_still_lacks() {
        let source = index(&[
            (
                "a",
                Some("2026-01-01T00:00:00Z"),
                Some("2026-01-01T23:00:00Z"),
            ),
            (
                "b",
                Some("2026-01-02T00:00:00Z"),
                Some("2026-01-02T23:00:00Z"),
            ),
            (
                "c",
                Some("2026-01-03T00:00:00Z"),
                Some("2026-01-03T23:00:00Z"),
            ),
        ]);
        let expired = vec![key("a"), key("b")];
        let since = LocationHorizon::Since {
            at: t("2026-01-02T12:00:00Z"),
            backup: "f".into(),
        };
        // dr needs b (it ends after dr's oldest full starts) and does not have it.
        assert_eq!(
            awaiting_copy(
                &source,
                &expired,
                &since,
                Some(&BinlogIndex::empty()),
                "backups",
                "dr"
            ),
            BTreeSet::from([key("b")])
        );
        // Once dr lists it, nothing waits.
        let mut there = BinlogIndex::empty();
        there
            .segments
            .push(IndexSegment::new("dr/c1/binlog/b", None, None));
        assert!(awaiting_copy(&source, &expired, &since, Some(&there), "backups", "dr").is_empty());
        // dr unreadable: everything its horizon needs stays; with no full there, nothing.
        assert_eq!(
            awaiting_copy(&source, &expired, &since, None, "backups", "dr"),
            BTreeSet::from([key("b")])
        );
        let unknown = LocationHorizon::Unknown { backup: "u".into() };
        assert_eq!(
            awaiting_copy(&source, &expired, &unknown, None, "backups", "dr"),
            BTreeSet::from([key("a"), key("b")])
        );
        assert!(awaiting_copy(
            &source,
            &expired,
            &LocationHorizon::NoFull,
            None,
            "backups",
            "dr"
        )
        .is_empty());
    }
}
