//! The requests of `binlog.*`, answered by the retention-worker.

use serde::{Deserialize, Serialize};

use super::v1;
use crate::names::ClusterName;
use crate::wire::Message;

/// `binlog.status` request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
}

impl Message for StatusRequest {
    const KIND: &'static str = "request";
}
