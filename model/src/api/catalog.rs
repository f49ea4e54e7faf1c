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
    /// Import from this location's copies (issue 28) instead of the primary bucket: records
    /// the catalog lacks come back as held there only (`copies-only`), and records it holds get
    /// back a copy there that their record lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<crate::names::LocationName>,
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
