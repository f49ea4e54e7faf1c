//! The requests of `cluster.*`.

use serde::{Deserialize, Serialize};

use super::v1;
use crate::names::ClusterName;
use crate::wire::Message;

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
