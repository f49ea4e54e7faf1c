//! The requests of `catalog.*`: `catalog.import` (the scheduler answers it) and `catalog.scrub`
//! (the retention-worker).

use serde::{Deserialize, Serialize};

use super::v1;
use crate::names::ClusterName;
use crate::wire::Message;

/// `catalog.import` request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    /// Say what would be imported, write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for ImportRequest {
    const KIND: &'static str = "request";
}

/// `catalog.scrub` request: compare a cluster's catalog with its bucket now.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrubRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    /// Say what would change, change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for ScrubRequest {
    const KIND: &'static str = "request";
}
