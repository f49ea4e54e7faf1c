//! Versioned messages on the wire: events, jobs, executor reports and the request/reply API.
//! Every body is JSON with a `schema_version`; this build speaks version 1. Unknown fields are
//! tolerated (a newer producer may add some), but a missing or different version is refused,
//! because guessing at the meaning of a delete job is how data is lost.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset, Utc};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::names::{BackupId, ClusterName, LocationName, PlanName, ScheduleName};
use sexton_retention::BackupKind;

pub const SCHEMA_VERSION: u32 = 1;

/// The largest body we try to decode. NATS's default max payload is 1 MiB; anything near it
/// on these subjects is abuse, not a backup report.
pub const MAX_BODY_BYTES: usize = 512 * 1024;

pub(crate) fn v1() -> u32 {
    SCHEMA_VERSION
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("body is {0} bytes, more than the 524288 allowed")]
    TooLarge(usize),
    #[error("body is not valid json: {0}")]
    Json(String),
    #[error("missing schema_version")]
    MissingVersion,
    #[error("unsupported schema_version {0}: this build reads version 1")]
    UnsupportedVersion(u64),
    #[error("invalid {kind}: {message}")]
    Invalid { kind: &'static str, message: String },
}

/// A message type that can be decoded from the wire.
pub trait Message: Serialize + DeserializeOwned {
    /// A short name for errors and logs, such as `delete job`.
    const KIND: &'static str;

    /// Checks that serde cannot express; the default accepts everything.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Decodes and validates one message body.
pub fn decode<T: Message>(body: &[u8]) -> Result<T, DecodeError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(DecodeError::TooLarge(body.len()));
    }
    #[derive(Deserialize)]
    struct Version {
        schema_version: Option<serde_json::Value>,
    }
    let version: Version =
        serde_json::from_slice(body).map_err(|err| DecodeError::Json(err.to_string()))?;
    match version.schema_version {
        None => return Err(DecodeError::MissingVersion),
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(SCHEMA_VERSION as u64) => {}
        Some(serde_json::Value::Number(n)) => {
            return Err(DecodeError::UnsupportedVersion(n.as_u64().unwrap_or(0)))
        }
        Some(_) => {
            return Err(DecodeError::Invalid {
                kind: T::KIND,
                message: "schema_version must be a number".into(),
            })
        }
    }
    let message: T = serde_json::from_slice(body).map_err(|err| DecodeError::Invalid {
        kind: T::KIND,
        message: err.to_string(),
    })?;
    message.validate().map_err(|message| DecodeError::Invalid {
        kind: T::KIND,
        message,
    })?;
    Ok(message)
}

pub fn encode<T: Message>(message: &T) -> bytes::Bytes {
    // Serialising our own plain structs cannot fail.
    serde_json::to_vec(message)
        .expect("wire types serialise")
        .into()
}

/// Scheduler → executors: take a backup now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DueBackup {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub schedule: ScheduleName,
    pub cluster: ClusterName,
    pub plan: PlanName,
    /// The nominal cron tick this run is for; with the schedule it identifies the run (the
    /// message id is keyed on it). Executors should report it back (`Report::tick`).
    pub tick: DateTime<Utc>,
    /// When the backup was asked for: the tick plus any jitter, lateness, deferral or
    /// downtime, or the moment a backfill or a manual trigger fired it.
    pub fired_at: DateTime<Utc>,
    /// The id the executor should report under: the schedule and the firing instant
    /// (`<schedule>-<fired_at as YYYYMMDDhhmmss>`, plus `-backfill-<tick>` for a backfill's
    /// and `-manual` for `backup create --from-schedule`).
    pub backup_id: BackupId,
    /// The `<backup-name>` segment of the object keys.
    pub backup_name: String,
    /// Where this backup's objects go: `<prefix>/<cluster>/<backup-name>/<backup-id>/`.
    pub object_prefix: String,
    pub kind: BackupKind,
    #[serde(default)]
    pub parent: Option<BackupId>,
    /// Why `kind` (a backup without volumes on a schedule with `full_every`): `no_artifact`,
    /// `full_every`, `last_attempt_failed`, `chain_continues`, … (see `KindReason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind_reason: Option<String>,
    /// Per volume (seed 001): the kind to take and the artifact to build on. Empty for a
    /// backup without volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<DueVolume>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The schedule's annotations: free-form instructions for executors.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Set when a backfill (`sexton schedule backfill`) fired this tick: the backfill's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<u64>,
}

/// What to take of one volume: a full, or an incremental on the same volume's artifact in
/// `parent` (its last good artifact).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DueVolume {
    pub name: String,
    pub kind: BackupKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<BackupId>,
    /// Why this kind (`KindReason`'s words), for executors' logs and for tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Message for DueBackup {
    const KIND: &'static str = "due-backup event";

    fn validate(&self) -> Result<(), String> {
        crate::names::check_name("backup name", &self.backup_name).map_err(|e| e.to_string())?;
        check_volume_entries(
            self.volumes
                .iter()
                .map(|v| (v.name.as_str(), v.kind, v.parent.is_some(), false)),
        )
    }
}

/// Checks a list of volume entries: valid unique names, at most `MAX_VOLUMES`, and a parent on
/// every incremental that did not fail.
fn check_volume_entries<'a>(
    entries: impl Iterator<Item = (&'a str, BackupKind, bool, bool)>,
) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (n, (name, kind, has_parent, failed)) in entries.enumerate() {
        if n >= crate::checks::MAX_VOLUMES {
            return Err(format!("more than {} volumes", crate::checks::MAX_VOLUMES));
        }
        crate::names::check_name("volume name", name).map_err(|e| e.to_string())?;
        if !seen.insert(name) {
            return Err(format!("volume {name:?} is listed twice"));
        }
        if kind == BackupKind::Incremental && !has_parent && !failed {
            return Err(format!("volume {name}: an incremental needs a parent"));
        }
    }
    Ok(())
}

impl DueBackup {
    /// Checks that the event's `object_prefix` is exactly this backup's own directory under
    /// the executor's `prefix`, so a forged event cannot make an executor write into another
    /// cluster, another backup, or out of the prefix.
    pub fn check_object_prefix(&self, prefix: &str) -> Result<(), String> {
        let own = format!(
            "{}{}/{}/",
            crate::keys::cluster_prefix(prefix, &self.cluster),
            self.backup_name,
            self.backup_id
        );
        if self.object_prefix != own {
            return Err(format!(
                "object_prefix {:?} is not this backup's directory {own:?}",
                self.object_prefix.chars().take(200).collect::<String>()
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ReportStatus {
    Started,
    Completed,
    Failed,
}

/// Executor → scheduler: what happened to a backup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub backup_id: BackupId,
    pub cluster: ClusterName,
    pub plan: PlanName,
    #[serde(default)]
    pub schedule: Option<ScheduleName>,
    pub backup_name: String,
    pub status: ReportStatus,
    #[serde(default)]
    pub kind: BackupKind,
    #[serde(default)]
    pub parent: Option<BackupId>,
    #[serde(default)]
    pub started_at: Option<DateTime<FixedOffset>>,
    #[serde(default)]
    pub completed_at: Option<DateTime<FixedOffset>>,
    /// The nominal tick of the due-backup this reports (`DueBackup::tick`), for a scheduled
    /// backup; recorded on the catalog record and used to recognise the schedule's firing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick: Option<DateTime<Utc>>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// The bytes the backup's objects hold, if the executor knows; shown by `describe` and
    /// counted in `sexton_bytes_deleted_total` when the backup is deleted.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// Per volume, what was taken (which may be a full where an incremental was asked for:
    /// the catalog records what was taken). Empty for a backup without volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<ReportVolume>,
    /// In-use holds the executor registers on this backup (`<what>:<id>`, as `sexton backup
    /// hold`): a backup taken for a restore, a clone or an upgrade is kept until released.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
    /// Set on the report of a merge job done (Trilio's consolidation): the backup is now a
    /// synthetic full; `artifacts` lists all its objects (the old ones and the consolidated
    /// ones), `kind` is full and `parent` none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeDone>,
    /// Size and SHA-256 of each object the executor uploaded (any of `artifacts` and the
    /// volumes' keys but `metadata.json`). Intake compares the sizes with the bucket's and the
    /// checksums with `metadata.json`'s; verification recomputes the checksums.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<ObjectDigest>,
    /// The first and last binlog (or WAL) segment the backup needs to be consistent, by file
    /// name (issue 30): `sexton exec` takes them from the `log_first`/`log_last` facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_range: Option<sexton_retention::LogRange>,
    /// The backup is a differential: an incremental taken against its chain's full, which is
    /// its `parent` (pgBackRest's `diff`; issue 30).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub differential: bool,
}

/// One uploaded object: its key, its size in bytes and, when the uploader computed it, its
/// SHA-256 in lowercase hex.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ObjectDigest {
    pub key: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// On a versioned bucket, the version Sexton saw at intake (issue 29): the recovery point
    /// is that version, which locks, restore tests and the deleter name exactly. Only ever
    /// what Sexton listed itself; a report's claim of a version is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
}

impl ObjectDigest {
    pub fn validate(&self) -> Result<(), String> {
        if self.key.is_empty() || self.key.len() > 1024 {
            return Err("an object key holds 1 to 1024 bytes".into());
        }
        if let Some(sha) = &self.sha256 {
            if !crate::digest::is_sha256_hex(sha) {
                return Err(format!(
                    "object {}: sha256 must be 64 lowercase hex digits",
                    self.key
                ));
            }
        }
        Ok(())
    }
}

/// What a merge report says was folded into the reported backup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergeDone {
    /// The target's uid, so a re-used id is never rewritten by an old job.
    pub target_uid: String,
    /// The backups folded into it, oldest first (the chain's full first).
    pub sources: Vec<BackupId>,
    /// A volume merge (issue 8): only this volume of the backup was consolidated; the report
    /// lists that one volume, now a full with no parent, with all its keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
}

/// Retention-worker → executor (`sexton.v1.job.merge.<cluster>`): fold `sources` (oldest
/// first, the chain's full first) into `target`, which then becomes a synthetic full. Until
/// the executor reports it and the scheduler records it, the sources stay (the plan keeps
/// them, `merge into <target> pending`); after that nothing needs them and retention deletes
/// them through the deleter as usual.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergeJob {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub plan: PlanName,
    pub target: MergeBackup,
    pub sources: Vec<MergeBackup>,
    /// A volume merge (issue 8, `chain_mode: merge` on a schedule with volumes): only this
    /// volume's chain is folded, and each backup's `parent` and `artifacts` are that volume's
    /// parent and keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
}

/// One backup of a merge job, as the catalog had it when the job was planned.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergeBackup {
    pub id: BackupId,
    pub uid: String,
    pub backup_name: String,
    #[serde(default)]
    pub parent: Option<BackupId>,
    pub artifacts: Vec<String>,
}

impl Message for MergeJob {
    const KIND: &'static str = "merge job";

    fn validate(&self) -> Result<(), String> {
        if let Some(volume) = &self.volume {
            crate::names::check_name("volume name", volume).map_err(|e| e.to_string())?;
        }
        if self.sources.is_empty() {
            return Err("a merge job needs at least one source".into());
        }
        // The sources are one chain, oldest first, and the target builds on the last.
        if self.sources[0].parent.is_some() {
            return Err("the first source must be the chain's full backup".into());
        }
        for pair in self.sources.windows(2) {
            if pair[1].parent.as_ref() != Some(&pair[0].id) {
                return Err(format!(
                    "source {} does not build on {}",
                    pair[1].id, pair[0].id
                ));
            }
        }
        let last = &self.sources[self.sources.len() - 1];
        if self.target.parent.as_ref() != Some(&last.id) {
            return Err(format!(
                "target {} does not build on {}",
                self.target.id, last.id
            ));
        }
        for backup in self.sources.iter().chain([&self.target]) {
            check_uid(&backup.uid)?;
        }
        Ok(())
    }
}

/// One volume of a reported backup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReportVolume {
    pub name: String,
    #[serde(default)]
    pub kind: BackupKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<BackupId>,
    /// The volume's object keys, under the backup's own directory.
    #[serde(default)]
    pub keys: Vec<String>,
    /// This volume's upload failed (only on a failed report): its next backup is a full.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// The bytes of this volume's objects (on a merge report: of the objects the merge
    /// added). Part of the backup's `size_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

impl Message for Report {
    const KIND: &'static str = "executor report";

    fn validate(&self) -> Result<(), String> {
        crate::names::check_name("backup name", &self.backup_name).map_err(|e| e.to_string())?;
        if self.status == ReportStatus::Completed && self.completed_at.is_none() {
            return Err("a completed report needs completed_at".into());
        }
        // With volumes, each volume has its own parent; the backup's own kind is a summary.
        if self.kind == BackupKind::Incremental && self.parent.is_none() && self.volumes.is_empty()
        {
            return Err("an incremental backup needs a parent".into());
        }
        check_volume_entries(
            self.volumes
                .iter()
                .map(|v| (v.name.as_str(), v.kind, v.parent.is_some(), v.failed)),
        )?;
        if self.status != ReportStatus::Failed && self.volumes.iter().any(|v| v.failed) {
            return Err("only a failed report may mark a volume failed".into());
        }
        if self.status == ReportStatus::Completed && self.volumes.iter().any(|v| v.keys.is_empty())
        {
            return Err("every volume of a completed backup must list its keys".into());
        }
        if self.holds.len() > crate::checks::MAX_HOLDS {
            return Err(format!("more than {} holds", crate::checks::MAX_HOLDS));
        }
        for hold in &self.holds {
            crate::checks::check_hold_reason(hold)?;
        }
        if let Some(range) = &self.log_range {
            crate::checks::check_log_range(range)?;
        }
        if self.differential && (self.kind != BackupKind::Incremental || self.parent.is_none()) {
            return Err(
                "a differential is an incremental with a parent (the full it was taken against)"
                    .into(),
            );
        }
        if self.volumes.iter().map(|v| v.keys.len()).sum::<usize>() > 10_000 {
            return Err("more than 10000 volume keys".into());
        }
        if self.artifacts.len() > 10_000 {
            return Err("more than 10000 artifacts".into());
        }
        let mut described = std::collections::BTreeSet::new();
        for object in &self.objects {
            object.validate()?;
            let listed = self.artifacts.contains(&object.key)
                || self.volumes.iter().any(|v| v.keys.contains(&object.key));
            if !listed {
                return Err(format!(
                    "objects describes {}, which the report does not list",
                    object.key
                ));
            }
            if !described.insert(object.key.as_str()) {
                return Err(format!("objects describes {} twice", object.key));
            }
        }
        Ok(())
    }
}

/// Scheduler → executors (`sexton.v1.verify.due.<cluster>`): prove that `backup_id` restores.
/// Restore `chain` (oldest first: the full, then each incremental, the target last) somewhere
/// harmless, check it, and answer with a [`Verdict`] before `deadline`; until then the target
/// is held (`verify:<request_id>`). Message id `verify.<request_id>`: one per request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerifyDue {
    #[serde(default = "v1")]
    pub schema_version: u32,
    /// `<schedule>-<tick as YYYYMMDDhhmmss>` for a scheduled test, `manual-…` for one asked for.
    pub request_id: String,
    pub cluster: ClusterName,
    pub plan: PlanName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleName>,
    pub backup_id: BackupId,
    /// The target's unique id: a verdict must name it.
    pub uid: String,
    pub requested_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    /// What a restore of the target reads, oldest first, the target last.
    pub chain: Vec<VerifyBackup>,
    /// The location whose copies the test reads (issue 28): the chain's keys are the copies'
    /// keys there, read with that location's client. Absent: the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<LocationName>,
    /// A restore drill to a point in time (issue 47): after restoring the chain, replay the
    /// log archive at the same place up to `until`. Absent: restore the backup as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<VerifyReplay>,
}

/// The replay of a drill: the archive's segments that may hold events of `since..=until`
/// (`since`: where the target's replay begins), applied from the restored backup's own log
/// position and stopped at `until`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct VerifyReplay {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// One backup of a chain to restore, with its objects as intake saw them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerifyBackup {
    pub id: BackupId,
    pub uid: String,
    pub backup_name: String,
    pub kind: BackupKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<BackupId>,
    /// Every object, with the size and SHA-256 recorded when the backup was taken (no
    /// checksum for a backup recorded before intake verified objects: then its size or its
    /// existence is what can be checked).
    pub objects: Vec<VerifyObject>,
}

/// An object to read back: its key and, when recorded, its size and SHA-256.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VerifyObject {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The version intake saw, on a versioned bucket (issue 29): the test reads that very
    /// version, so an object overwritten behind Sexton's back does not fail it while the
    /// recorded (locked) version is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
}

impl Message for VerifyDue {
    const KIND: &'static str = "verify-due event";

    fn validate(&self) -> Result<(), String> {
        check_request_id(&self.request_id)?;
        let Some(target) = self.chain.last() else {
            return Err("a verify-due event names the chain to restore".into());
        };
        if target.id != self.backup_id || target.uid != self.uid {
            return Err("the chain must end with the backup to verify".into());
        }
        if self.chain.len() > 10_000 {
            return Err("a chain of more than 10000 backups".into());
        }
        if let Some(replay) = &self.replay {
            if replay.since > replay.until {
                return Err(format!(
                    "a replay from {} to {}: it ends before it starts",
                    replay.since.to_rfc3339(),
                    replay.until.to_rfc3339()
                ));
            }
        }
        Ok(())
    }
}

/// Whether a restore test passed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictOutcome {
    Verified,
    VerifyFailed,
}

/// Executor → scheduler (`sexton.v1.verify.verdict.<cluster>`): what a restore test found.
/// Message id `verdict.<request_id>`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub request_id: String,
    pub cluster: ClusterName,
    pub backup_id: BackupId,
    pub uid: String,
    pub outcome: VerdictOutcome,
    /// Why it failed (naming the object or step), or what was proven.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub duration_ms: u64,
    /// The backups whose objects the restore read (the chain, oldest first).
    #[serde(default)]
    pub chain: Vec<BackupId>,
    /// The object keys read back and checked.
    #[serde(default)]
    pub checked: Vec<String>,
    /// Bytes read back.
    #[serde(default)]
    pub bytes_read: u64,
}

impl Message for Verdict {
    const KIND: &'static str = "verdict";

    fn validate(&self) -> Result<(), String> {
        check_request_id(&self.request_id)?;
        check_uid(&self.uid)?;
        if self.reason.as_ref().is_some_and(|r| r.len() > 4096) {
            return Err("reason longer than 4096 bytes".into());
        }
        if self.chain.len() > 10_000 || self.checked.len() > 100_000 {
            return Err("chain or checked too long".into());
        }
        if self
            .chain
            .last()
            .is_some_and(|last| *last != self.backup_id)
        {
            return Err("the chain must end with the verified backup".into());
        }
        Ok(())
    }
}

/// A verification request id: a backup-id-like name (it becomes part of a hold reason and a
/// message id).
pub fn check_request_id(id: &str) -> Result<(), String> {
    crate::names::check_name("request id", id).map_err(|e| e.to_string())?;
    crate::checks::check_hold_reason(&format!("verify:{id}"))
}

/// Scheduler → retention-worker: a backup of this cluster/plan completed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckpointComplete {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub plan: PlanName,
    pub backup_id: BackupId,
    #[serde(default)]
    pub schedule: Option<ScheduleName>,
}

impl Message for CheckpointComplete {
    const KIND: &'static str = "checkpoint-complete event";
}

/// Scheduler → retention-worker: re-run retention for a cluster even though nothing completed,
/// so time-based expiry happens (seed 003's throttled pass).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RetentionSweep {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub requested_at: DateTime<Utc>,
    /// Compare the cluster's catalog with its bucket before the run (at most once per
    /// `scheduler.scrub_interval`; see the retention-worker's scrub).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scrub: bool,
}

impl Message for RetentionSweep {
    const KIND: &'static str = "retention-sweep event";
}

/// Retention-worker → deleter: delete this backup.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeleteJob {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub backup_id: BackupId,
    pub uid: String,
    /// The catalog revision at which the backup was marked expiring.
    pub revision: u64,
    #[serde(default)]
    pub reasons: Vec<String>,
    /// Empty: delete the whole backup. Otherwise a partial deletion (issue 8): delete only
    /// these volumes' artifacts and keep the record with its other volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
}

impl Message for DeleteJob {
    const KIND: &'static str = "delete job";

    fn validate(&self) -> Result<(), String> {
        check_volume_entries(
            self.volumes
                .iter()
                .map(|v| (v.as_str(), BackupKind::Full, false, false)),
        )?;
        check_uid(&self.uid)?;
        if self.revision == 0 {
            return Err("revision must be positive".into());
        }
        Ok(())
    }
}

/// The most segment keys one binlog garbage-collection job carries; more go in further jobs
/// (a job body stays well under [`MAX_BODY_BYTES`]).
pub const MAX_BINLOG_JOB_KEYS: usize = 1000;

/// Retention-worker → deleter: garbage-collect a cluster's binlog segments that end before
/// `horizon` (the start of the oldest full backup the cluster's plans keep). The deleter
/// re-checks everything against the current catalog and index: it deletes only keys listed
/// here **and** in the index with a last event before the earlier of `horizon` and the oldest
/// full backup still in the catalog, then rewrites the index.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BinlogGcJob {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub horizon: DateTime<FixedOffset>,
    /// The backup the horizon comes from.
    #[serde(default)]
    pub horizon_backup: Option<String>,
    /// Segment keys the plan deletes.
    #[serde(default)]
    pub delete: Vec<String>,
    /// The index's ETag when the plan was made (for logs; the deleter reads it again).
    #[serde(default)]
    pub index_etag: Option<String>,
}

impl Message for BinlogGcJob {
    const KIND: &'static str = "binlog gc job";

    fn validate(&self) -> Result<(), String> {
        if self.delete.len() > MAX_BINLOG_JOB_KEYS {
            return Err(format!("more than {MAX_BINLOG_JOB_KEYS} segment keys"));
        }
        if self
            .delete
            .iter()
            .any(|key| key.is_empty() || key.len() > 1024)
        {
            return Err("a segment key is empty or longer than 1024 bytes".into());
        }
        if self.horizon.timestamp_nanos_opt().is_none() {
            return Err("horizon is outside the supported range".into());
        }
        Ok(())
    }
}

/// A retention decision about one backup, for events and previews.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DecisionSummary {
    pub id: String,
    pub reasons: Vec<String>,
}

/// Retention-worker → anyone: what a retention run decided (seed 003's BackupRetention event).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackupRetention {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub plan: PlanName,
    pub at: DateTime<Utc>,
    /// The newest kept backups (at most 100), with their reasons; `n_keep` counts them all.
    pub keep: Vec<DecisionSummary>,
    /// How many backups the plan keeps (issue 17: `keep` names only the newest of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_keep: Option<usize>,
    pub delete: Vec<DecisionSummary>,
    /// Backups that lose some volumes and keep their record (issue 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partial: Vec<PartialSummary>,
}

/// A partial decision in a `BackupRetention` event: the volumes that go, and the ones that
/// stay with their reasons (`needed by <id>`), each as a [`DecisionSummary`] named by volume.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartialSummary {
    pub id: String,
    pub reasons: Vec<String>,
    pub volumes_delete: Vec<String>,
    pub volumes_keep: Vec<DecisionSummary>,
}

impl Message for BackupRetention {
    const KIND: &'static str = "backup-retention event";
}

/// Any service → operators: a backup could not be deleted, or a message was refused.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Incident {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub service: String,
    pub kind: String,
    #[serde(default)]
    pub cluster: Option<String>,
    #[serde(default)]
    pub backup_id: Option<String>,
    pub subject: String,
    pub reason: String,
    pub at: DateTime<Utc>,
}

impl Message for Incident {
    const KIND: &'static str = "incident event";
}

/// A backup's unique id as a message names it: 1 to 64 characters. Every job and report that
/// names a backup by uid checks it here.
pub fn check_uid(uid: &str) -> Result<(), String> {
    if uid.is_empty() || uid.len() > 64 {
        return Err("uid must hold 1 to 64 characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_merge_job_names_one_chain_ending_at_the_target() {
        let backup = |id: &str, parent: Option<&str>| MergeBackup {
            id: id.parse().unwrap(),
            uid: format!("u-{id}"),
            backup_name: "base".into(),
            parent: parent.map(|p| p.parse().unwrap()),
            artifacts: vec![],
        };
        let job = |sources: Vec<MergeBackup>, target: MergeBackup| MergeJob {
            schema_version: 1,
            cluster: "c".parse().unwrap(),
            plan: "p".parse().unwrap(),
            target,
            sources,
            volume: None,
        };
        let good = job(
            vec![backup("F", None), backup("I1", Some("F"))],
            backup("I2", Some("I1")),
        );
        assert_eq!(good.validate(), Ok(()));
        let cases = [
            (job(vec![], backup("I2", Some("I1"))), "at least one source"),
            (
                job(vec![backup("I1", Some("F"))], backup("I2", Some("I1"))),
                "the chain's full",
            ),
            (
                job(
                    vec![backup("F", None), backup("I1", Some("X"))],
                    backup("I2", Some("I1")),
                ),
                "does not build on F",
            ),
            (
                job(
                    vec![backup("F", None), backup("I1", Some("F"))],
                    backup("I2", Some("F")),
                ),
                "target I2 does not build on I1",
            ),
        ];
        for (job, needle) in cases {
            let err = job.validate().unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
        // A volume merge names a valid volume.
        let volume = |name: &str| MergeJob {
            volume: Some(name.into()),
            ..good.clone()
        };
        assert_eq!(volume("pv1").validate(), Ok(()));
        for bad in ["", "../pv1", "pv 1", &"v".repeat(300)] {
            let err = volume(bad).validate().unwrap_err();
            assert!(err.contains("volume name"), "{bad:?}: {err}");
        }
        // And decodes from JSON with or without it.
        let json = String::from_utf8(encode(&volume("pv1")).to_vec()).unwrap();
        assert!(json.contains(r#""volume":"pv1""#), "{json}");
        assert_eq!(decode::<MergeJob>(json.as_bytes()).unwrap(), volume("pv1"));
        let err = decode::<MergeJob>(json.replace(r#""pv1""#, r#""a/b""#).as_bytes()).unwrap_err();
        assert!(err.to_string().contains("volume name"), "{err}");
    }

    use super::*;

    fn job_json(extra: &str) -> String {
        format!(
            r#"{{"schema_version":1,"cluster":"c1","backup_id":"b1","uid":"u","revision":3{extra}}}"#
        )
    }

    #[test]
    fn decodes_a_valid_job_and_tolerates_unknown_fields() {
        let job: DeleteJob = decode(job_json(r#","future_field":{"x":1}"#).as_bytes()).unwrap();
        assert_eq!(job.revision, 3);
        assert_eq!(decode::<DeleteJob>(&encode(&job)).unwrap(), job);
    }

    #[test]
    fn malformed_bodies_get_clear_errors() {
        let huge = format!(
            r#"{{"schema_version":1,"pad":"{}"}}"#,
            "x".repeat(MAX_BODY_BYTES)
        );
        let cases: Vec<(String, &str)> = vec![
            ("".into(), "not valid json"),
            ("{".into(), "not valid json"),
            ("[1,2]".into(), "not valid json"),
            ("null".into(), "not valid json"),
            (r#"{"cluster":"c1"}"#.into(), "missing schema_version"),
            (
                job_json("").replace("\"schema_version\":1", "\"schema_version\":2"),
                "unsupported schema_version 2",
            ),
            (
                job_json("").replace("\"schema_version\":1", "\"schema_version\":\"1\""),
                "must be a number",
            ),
            (
                job_json("").replace("\"revision\":3", "\"revision\":-3"),
                "invalid delete job",
            ),
            (
                job_json("").replace("\"revision\":3", "\"revision\":0"),
                "revision must be positive",
            ),
            (
                job_json("").replace("\"revision\":3", "\"revision\":\"3\""),
                "invalid type",
            ),
            (
                job_json("").replace(",\"uid\":\"u\"", ""),
                "missing field `uid`",
            ),
            (
                job_json("").replace("\"c1\"", "\"../other\""),
                "invalid cluster name",
            ),
            (
                job_json("").replace("\"b1\"", "\"b\\u0000\""),
                "invalid backup id",
            ),
            (huge, "more than the 524288 allowed"),
        ];
        for (body, expect) in cases {
            let err = decode::<DeleteJob>(body.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expect), "{body:.80}: {err}");
        }
    }

    #[test]
    fn report_validation() {
        let base = r#"{"schema_version":1,"backup_id":"b1","cluster":"c1","plan":"p","backup_name":"s1","status":"completed","completed_at":"2026-01-01T00:00:00Z"}"#;
        decode::<Report>(base.as_bytes()).unwrap();
        let cases = [
            (
                base.replace(",\"completed_at\":\"2026-01-01T00:00:00Z\"", ""),
                "needs completed_at",
            ),
            (base.replace("\"s1\"", "\"../s1\""), "invalid backup name"),
            (base.replace("\"completed\"", "\"done\""), "unknown variant"),
            (base.replace("2026-01-01T00:00:00Z", "yesterday"), "invalid"),
            (
                base.replace("\"status\"", "\"kind\":\"incremental\",\"status\""),
                "needs a parent",
            ),
            (
                base.replace(
                    "\"status\"",
                    r#""volumes":[{"name":"pv1","kind":"incremental","keys":["k"]}],"status""#,
                ),
                "volume pv1: an incremental needs a parent",
            ),
            (
                base.replace(
                    "\"status\"",
                    r#""volumes":[{"name":"pv1","keys":["k"]},{"name":"pv1","keys":["k"]}],"status""#,
                ),
                "volume \"pv1\" is listed twice",
            ),
            (
                base.replace("\"status\"", r#""volumes":[{"name":"a/b","keys":["k"]}],"status""#),
                "invalid volume name",
            ),
            (
                base.replace("\"status\"", r#""volumes":[{"name":"pv1"}],"status""#),
                "must list its keys",
            ),
            (
                base.replace(
                    "\"status\"",
                    r#""volumes":[{"name":"pv1","keys":["k"],"failed":true}],"status""#,
                ),
                "only a failed report",
            ),
        ];
        for (body, expect) in cases {
            let err = decode::<Report>(body.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(expect), "{body}: {err}");
        }
    }
}
