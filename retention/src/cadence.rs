//! Full or incremental: what the scheduler asks the executor to take next, per volume
//! (issue 8, seed 001). Pure: it reads the catalog's backups of the schedule and returns, for
//! each known volume, the kind to take and the artifact to build on, with the reason.
//!
//! The rules, for one volume (a schedule without volumes is one artifact per backup, by the
//! same rules):
//! - the volume's latest attempt decides first. Backups are read newest first; running ones
//!   are skipped (they are not good yet). A failed backup is the volume's failed attempt when
//!   the volume's own upload failed (`failed` on its entry) or when the backup names no volume
//!   at all (the executor could not say): then a **full**. A failed backup in which this
//!   volume's upload went through is passed over, as seed 001 asks: the next backup builds on
//!   the last known good one;
//! - the last good artifact is the volume's artifact in the newest backup that did not fail.
//!   None (a new volume, the first backup): a **full**;
//! - it must be usable as a parent: neither it nor any artifact it builds on is marked
//!   expiring or in a backup being deleted or delete-requested (building on it would keep it
//!   alive), and its chain is intact back to its full in the catalog (every parent present,
//!   not failed, holding the volume). Otherwise a **full**;
//! - `full_every: N`: a full, then N − 1 incrementals (F←I←I F←I←I for N = 3). The chain's
//!   length is counted along the parent links, so a merge that made a synthetic full restarts
//!   the count. Without `full_every`, forever incremental (Trilio's default);
//! - otherwise an **incremental** on the last good artifact.
//!
//! A full is always a safe answer: when the catalog given is incomplete (a parent missing),
//! the answer is a full, never an incremental on something unknown. Executors may still take
//! a full when they cannot take an incremental (a CSI snapshot was lost); the catalog records
//! what was taken.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::{BackupKind, BackupRecord, BackupStatus};

/// `full_every: N`: a full backup, then N − 1 incrementals. `1` means always full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "u32")]
pub struct FullEvery(NonZeroU32);

impl FullEvery {
    pub fn new(n: u32) -> Result<FullEvery, FullEveryError> {
        NonZeroU32::new(n)
            .map(FullEvery)
            .ok_or_else(|| FullEveryError(format!("must be a positive whole number, got {n}")))
    }

    pub fn get(self) -> u32 {
        self.0.get()
    }
}

impl From<FullEvery> for u32 {
    fn from(full_every: FullEvery) -> u32 {
        full_every.get()
    }
}

impl fmt::Display for FullEvery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A `full_every` value that is not a positive whole number.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("full_every: {0}")]
pub struct FullEveryError(String);

impl FullEveryError {
    pub fn is_retryable(&self) -> bool {
        false
    }
}

impl TryFrom<Value> for FullEvery {
    type Error = FullEveryError;

    /// A JSON number or a numeric string (`3` or `"3"`, like Karbor's parameters).
    fn try_from(value: Value) -> Result<FullEvery, FullEveryError> {
        let bad = || {
            FullEveryError(format!(
                "expected a positive whole number of backups, got {value}"
            ))
        };
        let number = match &value {
            Value::Number(number) => number.as_u64().ok_or_else(bad)?,
            Value::String(text) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
                text.parse().map_err(|_| bad())?
            }
            _ => return Err(bad()),
        };
        let number = u32::try_from(number).map_err(|_| bad())?;
        FullEvery::new(number).map_err(|_| bad())
    }
}

/// Why a volume gets the kind it gets: a small fixed set, fit for a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KindReason {
    /// Incremental on the volume's last good artifact.
    ChainContinues,
    /// The volume has never been backed up (a new volume, the first backup).
    NoArtifact,
    /// The volume only appears in failed backups.
    NoGoodArtifact,
    /// The volume's latest attempt failed.
    LastAttemptFailed,
    /// The chain has reached `full_every` artifacts.
    FullEvery,
    /// The last good artifact, or one it builds on, is being deleted, or a user asked to
    /// delete its backup: building on it would keep it alive.
    ChainBeingDeleted,
    /// The last good artifact's chain is not intact in the catalog.
    ChainBroken,
}

impl KindReason {
    pub fn as_str(self) -> &'static str {
        match self {
            KindReason::ChainContinues => "chain_continues",
            KindReason::NoArtifact => "no_artifact",
            KindReason::NoGoodArtifact => "no_good_artifact",
            KindReason::LastAttemptFailed => "last_attempt_failed",
            KindReason::FullEvery => "full_every",
            KindReason::ChainBeingDeleted => "chain_being_deleted",
            KindReason::ChainBroken => "chain_broken",
        }
    }
}

impl fmt::Display for KindReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to take of one volume (or, from [`next_backup_kind`], of the whole backup).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindChoice {
    pub kind: BackupKind,
    /// The backup whose artifact to build on; only on an incremental.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub reason: KindReason,
    /// The backup that decided it: the parent, the failed attempt, the end of a broken chain
    /// or the artifact being deleted. `None` for a volume never backed up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because_of: Option<String>,
    /// Artifacts in the chain once this one is added (1 for a full).
    pub chain_length: u32,
}

/// [`KindChoice`] for one volume: what the `due-backup` event carries per volume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeChoice {
    pub name: String,
    #[serde(flatten)]
    pub choice: KindChoice,
}

/// For each of `known_volumes` (in that order), the kind to take next and the parent to
/// build on. `backups` are the catalog's records of the schedule, in any order; give them
/// all (a chain reaching past the records given is taken as broken: a full). Volumes found in
/// the catalog but not known are left out (detached volumes are not backed up).
pub fn next_volume_kinds(
    full_every: Option<FullEvery>,
    backups: &[BackupRecord],
    known_volumes: &[String],
) -> Vec<VolumeChoice> {
    let history = History::new(backups);
    known_volumes
        .iter()
        .map(|name| VolumeChoice {
            name: name.clone(),
            choice: history.choose(full_every, |backup| {
                backup
                    .volumes
                    .iter()
                    .find(|volume| volume.name == *name)
                    .map(|volume| Artifact {
                        kind: volume.kind,
                        parent: volume.parent.as_deref(),
                        failed: volume.failed,
                        expiring: volume.expiring,
                    })
            }),
        })
        .collect()
}

/// The kind and parent of the next backup of a schedule without volumes (a database base
/// backup chain), by the same rules; backups with volumes are ignored.
pub fn next_backup_kind(full_every: Option<FullEvery>, backups: &[BackupRecord]) -> KindChoice {
    History::new(backups).choose(full_every, |backup| {
        backup.volumes.is_empty().then_some(Artifact {
            kind: backup.kind,
            parent: backup.parent.as_deref(),
            failed: backup.status == BackupStatus::Failed,
            expiring: false,
        })
    })
}

/// The backup-level kind of a backup whose volumes take `choices`: full when every volume is
/// a full (a backup with no volume is full).
pub fn backup_kind(choices: &[VolumeChoice]) -> BackupKind {
    if choices
        .iter()
        .all(|volume| volume.choice.kind == BackupKind::Full)
    {
        BackupKind::Full
    } else {
        BackupKind::Incremental
    }
}

/// One artifact of the volume being decided, as a backup holds it.
struct Artifact<'b> {
    kind: BackupKind,
    parent: Option<&'b str>,
    failed: bool,
    expiring: bool,
}

/// The schedule's backups, newest first, and an index by id for chain walks.
struct History<'b> {
    newest_first: Vec<&'b BackupRecord>,
    by_id: HashMap<&'b str, &'b BackupRecord>,
}

impl<'b> History<'b> {
    fn new(backups: &'b [BackupRecord]) -> History<'b> {
        let mut newest_first: Vec<&BackupRecord> = backups.iter().collect();
        // The engine's order: newest first by instant (to the nanosecond: two backups of a
        // busy schedule often complete within the same second), equal instants in input
        // order, a backup without any time newest of all.
        newest_first.sort_by_key(|backup| {
            std::cmp::Reverse(
                backup
                    .completed_at
                    .or(backup.started_at)
                    .map_or(i64::MAX, |time| {
                        time.timestamp_nanos_opt().unwrap_or(i64::MAX)
                    }),
            )
        });
        let by_id = backups
            .iter()
            .map(|backup| (backup.id.as_str(), backup))
            .collect();
        History {
            newest_first,
            by_id,
        }
    }

    fn choose(
        &self,
        full_every: Option<FullEvery>,
        artifact_of: impl Fn(&'b BackupRecord) -> Option<Artifact<'b>>,
    ) -> KindChoice {
        let full = |reason, because_of: Option<&str>| KindChoice {
            kind: BackupKind::Full,
            parent: None,
            reason,
            because_of: because_of.map(str::to_owned),
            chain_length: 1,
        };
        let mut seen_in_failed = false;
        for &backup in &self.newest_first {
            match backup.status {
                BackupStatus::InProgress => continue,
                // The newest artifact is gone from the bucket: nothing can build on it.
                BackupStatus::Missing if artifact_of(backup).is_some() => {
                    return full(KindReason::ChainBroken, Some(&backup.id))
                }
                BackupStatus::Missing => continue,
                BackupStatus::Failed => match artifact_of(backup) {
                    Some(artifact) if artifact.failed => {
                        return full(KindReason::LastAttemptFailed, Some(&backup.id))
                    }
                    Some(_) => seen_in_failed = true,
                    // A failed backup that names no volume could not say which one failed.
                    None if backup.volumes.is_empty() => {
                        return full(KindReason::LastAttemptFailed, Some(&backup.id))
                    }
                    None => {}
                },
                BackupStatus::Completed
                | BackupStatus::Expiring
                | BackupStatus::Deleting
                | BackupStatus::DeleteFailed => {
                    let Some(artifact) = artifact_of(backup) else {
                        continue;
                    };
                    if artifact.expiring
                        || backup.delete_requested
                        || backup.status.is_being_deleted()
                    {
                        return full(KindReason::ChainBeingDeleted, Some(&backup.id));
                    }
                    return self.continue_chain(full_every, backup, artifact, &artifact_of);
                }
            }
        }
        if seen_in_failed {
            full(KindReason::NoGoodArtifact, None)
        } else {
            full(KindReason::NoArtifact, None)
        }
    }

    /// The last good artifact is in `last_good`: walk its chain to its full (or until the
    /// chain is `full_every` long) and decide.
    fn continue_chain(
        &self,
        full_every: Option<FullEvery>,
        last_good: &'b BackupRecord,
        artifact: Artifact<'b>,
        artifact_of: &impl Fn(&'b BackupRecord) -> Option<Artifact<'b>>,
    ) -> KindChoice {
        let limit = full_every.map_or(u32::MAX, FullEvery::get);
        let mut length: u32 = 1;
        let mut node = artifact;
        let mut node_backup = last_good;
        let broken = |at: &BackupRecord| KindChoice {
            kind: BackupKind::Full,
            parent: None,
            reason: KindReason::ChainBroken,
            because_of: Some(at.id.clone()),
            chain_length: 1,
        };
        while node.kind == BackupKind::Incremental && length < limit {
            let Some(parent) = node.parent.and_then(|id| self.by_id.get(id).copied()) else {
                return broken(node_backup);
            };
            if matches!(
                parent.status,
                BackupStatus::Failed | BackupStatus::InProgress | BackupStatus::Missing
            ) {
                return broken(node_backup);
            }
            let Some(parent_artifact) = artifact_of(parent) else {
                return broken(node_backup);
            };
            if parent_artifact.expiring
                || parent.delete_requested
                || parent.status.is_being_deleted()
            {
                return KindChoice {
                    reason: KindReason::ChainBeingDeleted,
                    ..broken(parent)
                };
            }
            length += 1;
            // A chain longer than the catalog loops.
            if length as usize > self.newest_first.len() {
                return broken(node_backup);
            }
            node = parent_artifact;
            node_backup = parent;
        }
        if length >= limit {
            return KindChoice {
                kind: BackupKind::Full,
                parent: None,
                reason: KindReason::FullEvery,
                because_of: Some(last_good.id.clone()),
                chain_length: 1,
            };
        }
        KindChoice {
            kind: BackupKind::Incremental,
            parent: Some(last_good.id.clone()),
            reason: KindReason::ChainContinues,
            because_of: Some(last_good.id.clone()),
            chain_length: length + 1,
        }
    }
}
