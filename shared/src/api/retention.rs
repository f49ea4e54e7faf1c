//! The requests of `retention.*`, answered by the retention-worker: `retention.preview` and
//! `retention.approve`.

use serde::{Deserialize, Serialize};

use super::v1;
use crate::names::{ClusterName, PlanName};
use crate::wire::Message;

/// `retention.preview` request: what the policy would keep and delete now, for one group or
/// every group of a cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanName>,
}

impl Message for PreviewRequest {
    const KIND: &'static str = "request";
}

/// `retention.approve` request (`sexton retention approve --cluster C --plan P`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub plan: PlanName,
}

impl Message for ApproveRequest {
    const KIND: &'static str = "request";
}
