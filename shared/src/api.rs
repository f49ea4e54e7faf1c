//! The request/reply API behind the `sexton` CLI: versioned subjects
//! (`sexton.v1.api.<resource>.<verb>`), JSON bodies with a schema version, and one reply shape
//! carrying either a result or an error with a stable code.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::names::{ClusterName, PlanName, ScheduleName};
use crate::records::{BackupOwner, OverlapPolicy, Policy};
use crate::wire::{Message, SCHEMA_VERSION};
use sexton_retention::FullEvery;

fn v1() -> u32 {
    SCHEMA_VERSION
}

/// Error codes a client can branch on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// The request is malformed or names invalid values; retrying will not help.
    Invalid,
    NotFound,
    AlreadyExists,
    /// Something changed underneath; retrying may help.
    Conflict,
    /// A dependency failed; retrying later may help.
    Unavailable,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Reply {
    #[serde(default = "v1")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

impl Message for Reply {
    const KIND: &'static str = "api reply";
}

impl Reply {
    pub fn from_result(result: Result<serde_json::Value, ApiError>) -> Reply {
        match result {
            Ok(value) => Reply {
                schema_version: SCHEMA_VERSION,
                result: Some(value),
                error: None,
            },
            Err(error) => Reply {
                schema_version: SCHEMA_VERSION,
                result: None,
                error: Some(error),
            },
        }
    }

    pub fn into_result(self) -> Result<serde_json::Value, ApiError> {
        match (self.error, self.result) {
            (Some(error), _) => Err(error),
            (None, Some(value)) => Ok(value),
            (None, None) => Ok(serde_json::Value::Null),
        }
    }
}

/// `schedule.create`: a new schedule as the user writes it. Unknown fields are refused, so a
/// misspelt option is an error rather than a silently ignored setting.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    pub cluster: ClusterName,
    pub plan: PlanName,
    pub cron: String,
    #[serde(default)]
    pub paused: bool,
    #[serde(default)]
    pub skip_immediately: Option<bool>,
    pub policy: Policy,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub remote_cleanup: bool,
    #[serde(default)]
    pub overlap_policy: OverlapPolicy,
    #[serde(default)]
    pub starting_deadline_seconds: Option<u64>,
    /// A full backup, then N − 1 incrementals (a positive whole number, or a numeric string).
    #[serde(default)]
    pub full_every: Option<FullEvery>,
    /// The application's volumes, each with its own chain (seed 001).
    #[serde(default)]
    pub volumes: Vec<String>,
    /// What deleting the schedule does to its backup records (default `none`: they stay).
    #[serde(default)]
    pub backup_owner: BackupOwner,
    /// Scheduled restore tests (issue 13).
    #[serde(default)]
    pub verify: Option<crate::records::VerifySpec>,
}

impl Message for ScheduleSpec {
    const KIND: &'static str = "schedule";

    fn validate(&self) -> Result<(), String> {
        // A backup id is `<schedule>-<14 digits>`, and ids stay within 128 characters.
        if self.name.as_str().len() > 63 {
            return Err("schedule name is longer than 63 characters".into());
        }
        validate_deadline(self.starting_deadline_seconds)?;
        validate_volumes(&self.volumes)?;
        if let Some(verify) = &self.verify {
            verify.validate()?;
        }
        validate_labels(&self.labels)
    }
}

/// `schedule.get`, `schedule.describe`, `schedule.delete`, `schedule.pause`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ByName {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
}

impl Message for ByName {
    const KIND: &'static str = "request";
}

/// `schedule.update`: the fields to change; absent fields stay as they are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleUpdate {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    #[serde(default)]
    pub cron: Option<String>,
    #[serde(default)]
    pub policy: Option<Policy>,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub remote_cleanup: Option<bool>,
    #[serde(default)]
    pub overlap_policy: Option<OverlapPolicy>,
    #[serde(default)]
    pub starting_deadline_seconds: Option<u64>,
    /// Absent: unchanged; `null`: off again (fulls only without volumes, forever incremental
    /// with them); a number: the new cadence.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub full_every: Option<Option<FullEvery>>,
    /// Replaces the volume list: a volume added starts with a full at the next backup.
    #[serde(default)]
    pub volumes: Option<Vec<String>>,
    #[serde(default)]
    pub backup_owner: Option<BackupOwner>,
    /// Absent: unchanged; `null`: no restore tests any more; an object: the new tests.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub verify: Option<Option<crate::records::VerifySpec>>,
}

/// `schedule.delete`. With `dry_run` the reply says what deleting would do to the schedule's
/// backup records, and nothing is written.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDelete {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for ScheduleDelete {
    const KIND: &'static str = "request";
}

/// `cluster.forget` (`sexton cluster forget --cluster C [--remote] [--dry-run]`): removes every
/// backup record of a cluster that has no schedule left (the records `backup_owner: cluster`
/// leaves behind). The records only; with `remote` their objects too, through the deleter.
/// With `dry_run` the reply says what would happen and nothing is written.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterForget {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    #[serde(default)]
    pub remote: bool,
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for ClusterForget {
    const KIND: &'static str = "request";
}

/// A field given (its value, `null` included) as `Some`; an absent one is `None` by
/// `#[serde(default)]`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

impl Message for ScheduleUpdate {
    const KIND: &'static str = "schedule update";

    fn validate(&self) -> Result<(), String> {
        validate_labels(self.labels.iter().flatten())?;
        validate_volumes(self.volumes.iter().flatten())?;
        if let Some(Some(verify)) = &self.verify {
            verify.validate()?;
        }
        validate_deadline(self.starting_deadline_seconds)
    }
}

fn validate_labels<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<(), String> {
    for (n, (key, value)) in labels.into_iter().enumerate() {
        if n >= 64 {
            return Err("more than 64 labels".into());
        }
        if key.is_empty() || key.len() > 63 || value.len() > 253 {
            return Err(format!("label {key:?} is empty or too long"));
        }
        if key.chars().chain(value.chars()).any(char::is_control) {
            return Err(format!("label {key:?} holds a control character"));
        }
    }
    Ok(())
}

/// The most volumes a schedule lists; a due-backup event carries one entry per volume.
pub const MAX_VOLUMES: usize = 256;

/// Volume names end up in object keys (`vol-<name>.img`): the same rules as other names,
/// no repeats, at most [`MAX_VOLUMES`].
pub fn validate_volumes<'a>(volumes: impl IntoIterator<Item = &'a String>) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (n, volume) in volumes.into_iter().enumerate() {
        if n >= MAX_VOLUMES {
            return Err(format!("more than {MAX_VOLUMES} volumes"));
        }
        crate::names::check_name("volume name", volume).map_err(|e| e.to_string())?;
        if !seen.insert(volume.as_str()) {
            return Err(format!("volume {volume:?} is listed twice"));
        }
    }
    Ok(())
}

fn validate_deadline(seconds: Option<u64>) -> Result<(), String> {
    if seconds.is_some_and(|s| s == 0 || s > 366 * 86_400) {
        return Err("starting_deadline_seconds must be between 1 and 31622400".into());
    }
    Ok(())
}

/// `schedule.unpause`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Unpause {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    /// Overrides the schedule's own value and the server default for this unpause.
    #[serde(default)]
    pub skip_immediately: Option<bool>,
}

impl Message for Unpause {
    const KIND: &'static str = "request";
}

/// `schedule.list`, `backup.list`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ListFilter {
    #[serde(default = "v1")]
    pub schema_version: u32,
    #[serde(default)]
    pub cluster: Option<ClusterName>,
    #[serde(default)]
    pub plan: Option<PlanName>,
}

impl Message for ListFilter {
    const KIND: &'static str = "request";
}

/// `backup.describe` (`sexton backup describe ID --cluster C`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupRef {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: crate::names::BackupId,
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
    pub id: crate::names::BackupId,
    pub reason: String,
}

/// The most holds one backup carries.
pub const MAX_HOLDS: usize = 32;

impl Message for BackupHold {
    const KIND: &'static str = "request";

    fn validate(&self) -> Result<(), String> {
        check_hold_reason(&self.reason)
    }
}

/// A hold reason is `<what>:<id>`, such as `restore:r-42` or `clone:db2`: a lowercase word,
/// a colon, and an id of letters, digits, `.`, `-` and `_`; at most 160 characters.
pub fn check_hold_reason(reason: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "invalid hold reason {:?}: {why} (expected <what>:<id>, such as restore:r-42)",
            reason.chars().take(160).collect::<String>()
        ))
    };
    if reason.len() > 160 {
        return bad("longer than 160 characters");
    }
    let Some((what, id)) = reason.split_once(':') else {
        return bad("no ':'");
    };
    if what.is_empty()
        || !what.as_bytes()[0].is_ascii_lowercase()
        || !what
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return bad("what comes before ':' must be a lowercase word");
    }
    if id.is_empty()
        || !id.as_bytes()[0].is_ascii_alphanumeric()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return bad("the id after ':' may hold only letters, digits, '.', '-' and '_'");
    }
    Ok(())
}

/// `backup.delete` (`sexton backup delete ID --cluster C [--remote] [--force]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackupDelete {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub id: crate::names::BackupId,
    /// Remove the objects too, even if neither the backup nor its schedule opted in.
    #[serde(default)]
    pub remote: bool,
    /// Delete even the newest full backup, or one a kept backup depends on, now.
    #[serde(default)]
    pub force: bool,
}

impl Message for BackupDelete {
    const KIND: &'static str = "request";
}
