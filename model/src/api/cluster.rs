//! The requests of `cluster.*`, and the answer of `cluster.forget`.

use serde::{Deserialize, Serialize};

use super::{v1, KeptRecord};
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

/// `cluster.forget`'s answer, and its dry run's: what becomes of the cluster's backup records,
/// counted, and in words (`summary`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClusterForgotten {
    pub cluster: ClusterName,
    pub dry_run: bool,
    pub forgotten: bool,
    pub remote: bool,
    /// How many records the cluster has.
    pub records: usize,
    /// Records removed from the catalog, their objects kept.
    pub remove_records: usize,
    /// Records deleted with their objects, through the deleter.
    pub delete_with_objects: usize,
    pub already_deleting: usize,
    pub keep: Vec<KeptRecord>,
    pub summary: String,
}
