//! The requests of `orphans.*` (`sexton backup orphans`), answered by the deleter, and their
//! answer.

use serde::{Deserialize, Serialize};

use super::v1;
use crate::duration_text;
use crate::keys::ObjectInfo;
use crate::names::ClusterName;
use crate::wire::Message;

/// The grace period when the request gives none.
pub const DEFAULT_GRACE: &str = "24h";

/// `orphans.list` and `orphans.delete`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OrphansRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    /// `90s`, `15m`, `24h`, `7d`; at least one second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<String>,
    /// With `orphans.delete`: say what would be deleted (with the same refusals); delete
    /// nothing.
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for OrphansRequest {
    const KIND: &'static str = "orphans request";

    fn validate(&self) -> Result<(), String> {
        self.grace_period().map(|_| ())
    }
}

impl OrphansRequest {
    pub fn grace_period(&self) -> Result<std::time::Duration, String> {
        let text = self.grace.as_deref().unwrap_or(DEFAULT_GRACE);
        let grace = duration_text::parse(text).map_err(|why| format!("grace {text:?}: {why}"))?;
        if grace < std::time::Duration::from_secs(1) {
            return Err(format!("grace {text:?} must be at least 1s"));
        }
        Ok(grace)
    }
}

/// The answer of `orphans.list` and `orphans.delete`: the objects under the cluster's prefix
/// that no record owns (older than the grace period), and, after a deletion, what went.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OrphansFound {
    pub cluster: ClusterName,
    pub prefix: String,
    pub grace_seconds: i64,
    pub orphans: Vec<ObjectInfo>,
    /// Objects without a record that are younger than the grace period (left alone).
    pub n_young: usize,
    pub n_in_progress: usize,
    pub n_binlog: usize,
    /// The catalog looks lost (most objects have no record): a deletion is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    pub dry_run: bool,
    /// After `orphans.delete`: the keys deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Vec<String>>,
    /// After `orphans.delete`: the keys that were not, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<Vec<FailedKey>>,
}

/// An object an orphan deletion did not delete, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailedKey {
    pub key: String,
    pub error: String,
}
