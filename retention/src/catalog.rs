//! The catalog the engine reads: a group's backup records and binlog segments, in the file
//! format of `sexton retention plan --catalog FILE` (issue 3).
//!
//! These are wire types: unknown fields are tolerated so that a catalog written by a newer
//! Sexton still loads. Every optional field
//! has a serde default, so adding one later is not a breaking change for readers, and
//! `BackupRecord` implements `Default` so that callers can build records with
//! `..Default::default()` and keep compiling when fields are added.

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

/// One group's backups and binlog segments.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    pub backups: Vec<BackupRecord>,
    #[serde(default)]
    pub binlog_segments: Vec<BinlogSegment>,
}

/// Why a catalog file could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog is not valid: {0}")]
    Syntax(String),
}

impl CatalogError {
    /// A bad catalog stays bad: retrying the same input gives the same error.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

impl Catalog {
    /// Parses the catalog file format. Semantic checks (duplicate ids, a completed backup
    /// without `completed_at`, parent loops) happen in [`crate::plan`], which reports them as
    /// [`crate::PlanError`].
    pub fn from_json(text: &str) -> Result<Catalog, CatalogError> {
        serde_json::from_str(text).map_err(|error| CatalogError::Syntax(error.to_string()))
    }
}

/// One backup (a checkpoint) as the catalog records it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupRecord {
    pub id: String,
    /// Required for completed backups; RFC 3339 with an offset, which the calendar rules use.
    #[serde(default)]
    pub completed_at: Option<DateTime<FixedOffset>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<FixedOffset>>,
    pub status: BackupStatus,
    #[serde(default)]
    pub kind: BackupKind,
    /// The backup an incremental was taken against. Ignored on a full backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub legal_hold: bool,
    /// In-use holds (`restore:<id>`, `clone:<id>`, …, issue 8): kept like a legal hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// Objects under a bucket lock: retention removes the record only, never the objects.
    #[serde(default, skip_serializing_if = "is_false")]
    pub immutable: bool,
    /// Until when the backup's objects are under S3 Object Lock (issue 29): until then it is
    /// kept (`expired, locked until T` when nothing else keeps it), whatever the policy says,
    /// since the store would refuse to delete it anyway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_until: Option<DateTime<Utc>>,
    /// A user asked to delete it; the delete waits while a kept backup depends on it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub delete_requested: bool,
    /// Per-volume artifacts (issue 8, seed 001). Empty: the backup is one artifact whose
    /// chain is given by `kind` and `parent`. Not empty: each volume has its own chain, and
    /// the backup's own `kind` and `parent` are ignored by retention.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeArtifact>,
    /// What the last restore test of the backup found (issue 13). Only `verified` counts for
    /// `keep_verified` and the verified floor. In a catalog file either a word
    /// (`"verification": "verified"`) or the catalog's object (`{"state": "verified", …}`).
    #[serde(
        default,
        skip_serializing_if = "VerificationState::is_unverified",
        deserialize_with = "VerificationState::deserialize_loose"
    )]
    pub verification: VerificationState,
    /// Where the backup's consistency starts and ends in the binlog (or WAL) archive: the
    /// first and last segment it needs to be restorable to its own end (issue 30). Executors
    /// know it (`log_first`/`log_last` facts of `sexton exec`). Without it, the backup's own
    /// range is taken from its start and end times; with it, both are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_range: Option<LogRange>,
    /// A differential (pgBackRest's `diff`, issue 30): an incremental taken against its
    /// chain's full, so its `kind` is `incremental` and its `parent` the full. Only
    /// `keep_diff` tells it from an incremental: it counts differentials.
    #[serde(default, skip_serializing_if = "is_false")]
    pub differential: bool,
}

/// The first and last segment of the archive a backup needs to be consistent, by file name
/// (`mysql-bin.000041`, `000000010000000000000002`): compared with a segment's name (the last
/// part of its key) where both are numbered the same way (same length, same stem before the
/// last `.`), otherwise not at all.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LogRange {
    pub first: String,
    pub last: String,
}

/// The hold reason that makes a backup standalone (barman's `keep:standalone`, issue 30): kept
/// like any hold, but restorable to its own end only, so the archive keeps only its own range,
/// not every segment after it. `sexton backup hold ID --reason standalone:<why>`. A hold only
/// adds (issue 47): a standalone backup that something else keeps too (a rule, another hold, a
/// kept backup that builds on it) stays a point-in-time base, and the recovery window never
/// picks a standalone backup as its base.
pub const STANDALONE_HOLD: &str = "standalone";

/// Whether `holds` make a backup standalone: one of them is `standalone:<why>`. The one test,
/// for the engine's records and the catalog's alike.
pub fn holds_standalone(holds: &[String]) -> bool {
    holds.iter().any(|hold| {
        hold.split_once(':')
            .is_some_and(|(what, _)| what == STANDALONE_HOLD)
    })
}

impl BackupRecord {
    /// Held as a standalone backup: a hold `standalone:<why>`.
    pub fn is_standalone(&self) -> bool {
        holds_standalone(&self.holds)
    }
}

/// Whether a backup's range of segment names covers `key` (a segment's object key), where the
/// names compare: same length, and the same stem before the last `.` (binlogs), so that
/// `mysql-bin.000041` sorts between `mysql-bin.000040` and `mysql-bin.000042`. `None` when they
/// do not compare (a renamed binlog base, a seventh digit): the caller falls back on times.
pub fn range_covers(range: &LogRange, key: &str) -> Option<bool> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let stem = |name: &str| name.rsplit_once('.').map(|(stem, _)| stem.to_owned());
    let comparable = |other: &str| other.len() == name.len() && stem(other) == stem(name);
    if !comparable(&range.first) || !comparable(&range.last) || range.first > range.last {
        return None;
    }
    Some(range.first.as_str() <= name && name <= range.last.as_str())
}

/// Whether a restore test proved a backup restorable.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum VerificationState {
    /// Never tested, or tested only for a chain it is not the end of.
    #[default]
    Unverified,
    Verified,
    /// The last test failed: the backup no longer counts as proven.
    Failed,
}

impl VerificationState {
    pub fn is_unverified(&self) -> bool {
        *self == VerificationState::Unverified
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VerificationState::Unverified => "unverified",
            VerificationState::Verified => "verified",
            VerificationState::Failed => "failed",
        }
    }

    /// The state from a word or from an object with a `state` field (the catalog's record).
    fn deserialize_loose<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<VerificationState, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Loose {
            Word(VerificationState),
            Object { state: VerificationState },
            Null(()),
        }
        Ok(match Loose::deserialize(deserializer)? {
            Loose::Word(state) | Loose::Object { state } => state,
            Loose::Null(()) => VerificationState::Unverified,
        })
    }
}

/// One volume's artifact in a backup: Trilio's per-PV image (seed 001). Chains link artifacts
/// of the same volume: an incremental's `parent` names the earlier backup whose artifact of
/// this volume it was taken against.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeArtifact {
    /// Unique within the backup; the same name across backups is the same volume.
    pub name: String,
    #[serde(default)]
    pub kind: BackupKind,
    /// The backup holding this volume's parent artifact. Required on an incremental of a
    /// backup that did not fail; ignored on a full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The artifact's object keys: what the deleter removes when this artifact goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// This volume's own upload failed (only on a failed backup). The whole backup failed
    /// then and none of its volumes joins a chain; the flag tells the next backup to take a
    /// full of this volume.
    #[serde(default, skip_serializing_if = "is_false")]
    pub failed: bool,
    /// Retention marked this artifact for deletion while its backup stays (a partial
    /// delete); the deleter is on it. Never a parent for a new backup.
    #[serde(default, skip_serializing_if = "is_false")]
    pub expiring: bool,
    /// The bytes this artifact's objects hold, when the executor said: a partial deletion
    /// takes them off the backup's `size_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

impl VolumeArtifact {
    /// A full artifact of volume `name`.
    pub fn full(name: impl Into<String>, keys: Vec<String>) -> Self {
        VolumeArtifact {
            name: name.into(),
            kind: BackupKind::Full,
            keys,
            ..VolumeArtifact::default()
        }
    }

    /// An incremental artifact of volume `name` taken against the same volume in `parent`.
    pub fn incremental(
        name: impl Into<String>,
        parent: impl Into<String>,
        keys: Vec<String>,
    ) -> Self {
        VolumeArtifact {
            name: name.into(),
            kind: BackupKind::Incremental,
            parent: Some(parent.into()),
            keys,
            ..VolumeArtifact::default()
        }
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl BackupRecord {
    /// A completed full backup, the common case in tests and previews.
    pub fn completed_full(id: impl Into<String>, completed_at: DateTime<FixedOffset>) -> Self {
        BackupRecord {
            id: id.into(),
            completed_at: Some(completed_at),
            status: BackupStatus::Completed,
            kind: BackupKind::Full,
            ..BackupRecord::default()
        }
    }

    /// A completed incremental taken against `parent`.
    pub fn completed_incremental(
        id: impl Into<String>,
        completed_at: DateTime<FixedOffset>,
        parent: impl Into<String>,
    ) -> Self {
        BackupRecord {
            id: id.into(),
            completed_at: Some(completed_at),
            status: BackupStatus::Completed,
            kind: BackupKind::Incremental,
            parent: Some(parent.into()),
            ..BackupRecord::default()
        }
    }
}

/// Where a backup is in its life. Serialised kebab-case (`in-progress`, `delete-failed`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum BackupStatus {
    /// Being taken. Never counted, never deleted; its ancestors are kept.
    #[default]
    InProgress,
    /// Restorable. The only status the retention rules count.
    Completed,
    /// Never restorable; its partial artifacts go once older than the grace period.
    Failed,
    /// A plan chose to delete it and the retention worker marked it; the deleter is on it.
    Expiring,
    /// The deleter has started removing its objects.
    Deleting,
    /// The deleter gave up for now; the next pass retries.
    DeleteFailed,
    /// Its objects are gone from the bucket or changed there (the scrub found it so): not a
    /// recovery point. Never counted, never a parent, never deleted by a rule; kept until a
    /// user deletes it, or the scrub finds its objects as recorded again.
    Missing,
}

impl BackupStatus {
    /// The status word as it appears in the catalog.
    pub fn as_str(self) -> &'static str {
        match self {
            BackupStatus::InProgress => "in-progress",
            BackupStatus::Completed => "completed",
            BackupStatus::Failed => "failed",
            BackupStatus::Expiring => "expiring",
            BackupStatus::Deleting => "deleting",
            BackupStatus::DeleteFailed => "delete-failed",
            BackupStatus::Missing => "missing",
        }
    }

    /// Expiring, deleting or delete-failed: a plan already chose to delete it.
    pub fn is_being_deleted(self) -> bool {
        matches!(
            self,
            BackupStatus::Expiring | BackupStatus::Deleting | BackupStatus::DeleteFailed
        )
    }
}

/// Full or incremental. A missing `kind` means full.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "kebab-case")]
pub enum BackupKind {
    #[default]
    Full,
    Incremental,
}

impl BackupKind {
    /// The kind word as it appears in the catalog.
    pub fn as_str(self) -> &'static str {
        match self {
            BackupKind::Full => "full",
            BackupKind::Incremental => "incremental",
        }
    }
}

/// One binlog (or WAL) segment of the group's PITR archive.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct BinlogSegment {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_event: Option<DateTime<FixedOffset>>,
    /// Unknown (absent) means the segment is kept: it might reach past the horizon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event: Option<DateTime<FixedOffset>>,
}
