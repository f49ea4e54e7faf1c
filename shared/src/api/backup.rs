//! The requests of `backup.*`: one backup named by cluster and id, a hold, a deletion.

use serde::{Deserialize, Serialize};

use super::v1;
use crate::names::{BackupId, ClusterName};
use crate::records::VerifyTimeout;
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
}

impl Message for BackupDelete {
    const KIND: &'static str = "request";
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
}

impl Message for VerifyRequest {
    const KIND: &'static str = "request";
}
