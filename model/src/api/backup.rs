//! The requests of `backup.*`: one backup named by cluster and id, a hold, a deletion, a
//! restore test; and the answers the CLI and the executors read: a backup described, taken
//! or deleted, a restore test asked for.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::v1;
use crate::checks::check_hold_reason;
use crate::names::{BackupId, ClusterName};
use crate::records::VerifyTimeout;
use crate::records::{BackupKind, BackupRecord};
use crate::wire::Message;

/// `backup.describe` (`sexton backup describe ID --cluster C`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupRef {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: BackupId,
}

impl Message for BackupRef {
    const KIND: &'static str = "request";
}

/// `backup.hold` and `backup.release` (`sexton backup hold ID --cluster C --reason
/// restore:<id>`): a backup in use (a restore, a clone, a bootstrap) is kept with that reason
/// until the same reason is released.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupHold {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: BackupId,
    pub reason: String,
}

impl Message for BackupHold {
    const KIND: &'static str = "request";

    fn validate(&self) -> Result<(), String> {
        check_hold_reason(&self.reason)
    }
}

/// `backup.delete` (`sexton backup delete ID --cluster C [--remote] [--force]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupDelete {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: BackupId,
    /// Remove the objects too, even if neither the backup nor its schedule opted in.
    #[serde(default)]
    pub remote: bool,
    /// Delete even the newest full backup, or one a kept backup depends on, now.
    #[serde(default)]
    pub force: bool,
    /// Say what deleting would do; change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Delete only the backup's copy at this location (issue 28); absent: the backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
    /// Delete the backup and every backup that builds on it, now (pgBackRest's `expire
    /// --set`, barman's `delete`; issue 30). Refused whole if any of them is held, and if it
    /// would leave the plan without a completed full backup.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub with_dependents: bool,
}

impl Message for BackupDelete {
    const KIND: &'static str = "request";

    fn validate(&self) -> Result<(), String> {
        if self.with_dependents && (self.force || self.location.is_some()) {
            return Err(
                "with_dependents takes neither force (the backups that build on it go with it, \
                 so nothing waits) nor location (it deletes the backups themselves)"
                    .into(),
            );
        }
        Ok(())
    }
}

/// `backup.verify` request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: BackupId,
    /// How long an executor has (1m to 7d); default 1h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<VerifyTimeout>,
    /// Test the backup's copy at this location (issue 28); absent: the primary's objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
}

impl Message for VerifyRequest {
    const KIND: &'static str = "request";
}

/// `backup.drill` (`sexton recovery drill --cluster C --at T [--location L]`, issue 47): a
/// restore test to a point in time. The scheduler picks what a restore to `at` reads at the
/// place (the newest backup restorable there at `at`, or before it with a log archive that
/// reaches `at`), asks for the test of that backup with the replay, and records the verdict on
/// it with the instant. Refused, saying why, when `at` is not restorable there.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DrillRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    /// The instant to recover to.
    pub at: DateTime<Utc>,
    /// The plan whose backups to read; needed when the cluster has more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<crate::names::PlanName>,
    /// Read the copies and the log archive at this location; absent: the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
    /// How long an executor has (1m to 7d); default 1h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<VerifyTimeout>,
}

impl Message for DrillRequest {
    const KIND: &'static str = "request";
}

/// What `backup.drill` asked for: the test ([`VerifyAsked`]), the backup it restores with its
/// chain, and the replay (absent when `at` is that backup's own instant).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DrillAsked {
    #[serde(flatten)]
    pub asked: VerifyAsked,
    pub at: DateTime<Utc>,
    pub chain: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::wire::VerifyReplay>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
}

/// `backup.chain` (`sexton backup fetch ID --cluster C [--location L]`): what a restore of
/// the backup reads, its chain oldest first, each object with the size, SHA-256 and version
/// intake (or the copier) recorded: the same list a restore test gets.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChainRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: BackupId,
    /// Read the copies at this location; absent: the primary's objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
}

impl Message for ChainRequest {
    const KIND: &'static str = "request";
}

/// `backup.chain`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RestoreChain {
    pub cluster: ClusterName,
    pub id: BackupId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
    /// Oldest first, the backup last.
    pub chain: Vec<crate::wire::VerifyBackup>,
}

/// `backup.taken`'s answer: whether the catalog holds the backup, and in which state
/// (`unknown`, `in-progress`, `recorded`, or `deleted` once retention removed it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackupTaken {
    pub cluster: ClusterName,
    pub id: BackupId,
    pub state: String,
}

/// What `backup.delete` does (or, in a dry run, would do) to the backup.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteAction {
    /// The record is gone; the objects stay.
    RecordDeleted,
    /// Through the deleter: the objects, then the record.
    Deleting,
    /// Once nothing kept needs it (`reason` says what does now).
    Deferred,
    /// It is being deleted already.
    AlreadyDeleting,
}

/// `backup.delete`'s answer, and its dry run's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackupDeleted {
    pub cluster: ClusterName,
    pub id: BackupId,
    pub action: DeleteAction,
    /// Whether the objects go too.
    pub remote: bool,
    pub force: bool,
    pub reason: Option<String>,
    pub dry_run: bool,
    /// The location whose copy is deleted, for a copy's deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
    /// With `with_dependents`: the backups that build on it, which go with it (oldest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<BackupId>,
    /// With `with_dependents`: those of them on their way out already.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_deleting: Vec<BackupId>,
}

/// `backup.verify`'s answer: the restore test asked for, with its deadline; or, for a backup
/// whose chain cannot be restored, the test recorded failed at once (`recorded: failed`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerifyAsked {
    pub request_id: String,
    pub backup_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// Another replica had asked for it already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<String>,
}

/// `backup.describe`'s answer: the backup as the catalog holds it (at `revision`), what
/// retention decides about it now and why, and the fate of each of its volumes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackupDescription {
    pub backup: BackupRecord,
    pub revision: u64,
    /// At primary: `keep`, `partial`, `delete`, or `gone` once its objects there are deleted
    /// and only copies elsewhere keep the record.
    pub retention: RetentionVerdict,
    pub volumes: Vec<VolumeFate>,
    /// What each location holding a copy decides about it (issue 28), by location: the plan's
    /// verdict there, or the copy's state (`expiring`, `deleting`) with its reasons.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub copies_retention: std::collections::BTreeMap<crate::names::LocationName, RetentionVerdict>,
    /// Where a restore of this backup can read it now (issue 47): primary, then each location
    /// that holds a copy, each with why not when it cannot (the backup or a link of its chain
    /// not whole there). Absent from answers of builds before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restorable: Vec<RestorablePlace>,
}

/// Whether one place can restore a described backup, and why not.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RestorablePlace {
    pub location: crate::names::LocationName,
    pub restorable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What retention decides about one backup now: `keep`, `partial` or `delete`, with the
/// reasons' texts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RetentionVerdict {
    pub verdict: String,
    pub reasons: Vec<String>,
}

/// One volume of a described backup: `kept`, `expiring` or `deleting`, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VolumeFate {
    pub name: String,
    pub kind: BackupKind,
    pub parent: Option<String>,
    pub keys: Vec<String>,
    pub state: String,
    pub reasons: Vec<String>,
}
