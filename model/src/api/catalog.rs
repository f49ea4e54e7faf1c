//! The requests of `catalog.*`: `catalog.import` (the scheduler answers it) and `catalog.scrub`
//! (the retention-worker).

use serde::{Deserialize, Serialize};

use super::v1;
use crate::keys::StoreRef;
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
    /// Bring back records removed on purpose too (a record-only `backup delete` undone,
    /// issue 50); without it they are left removed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_removed: bool,
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

/// `catalog.stranded` request (issue 54): the records at primary that name another store than
/// the one the fleet is given, by cluster and store; what `sexton catalog migrate` moves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrandedRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    /// Only this cluster's; absent: every cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterName>,
    /// The copies at this location, against the store its settings name now; absent: the
    /// records at primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
}

impl Message for StrandedRequest {
    const KIND: &'static str = "request";
}

/// The answer to `catalog.stranded`: the place's store, and the records that name another.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stranded {
    /// The store the place is now (the fleet's `[s3]`, or the location's settings).
    pub here: StoreRef,
    pub groups: Vec<StrandedGroup>,
}

/// The records of one cluster that name one other store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StrandedGroup {
    pub cluster: ClusterName,
    pub store: StoreRef,
    pub backups: Vec<crate::records::BackupRecord>,
}

/// `catalog.adopt` request (issue 54): these backups' objects, recorded in `from`, are now in
/// the fleet's store at these keys (written there by `sexton catalog migrate`, or by the
/// operator's own copy). A claim: the scheduler checks each object there before the record
/// moves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdoptRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    /// The copies at this location; absent: the records at primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
    /// The store the records (or copies) name now.
    pub from: StoreRef,
    pub backups: Vec<Adopted>,
}

impl Message for AdoptRequest {
    const KIND: &'static str = "request";
}

/// One backup of an [`AdoptRequest`]: its objects in the fleet's store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Adopted {
    pub id: crate::names::BackupId,
    /// The record's uid: a record replaced since it was read is not adopted.
    pub uid: String,
    /// Each object at its key in the fleet's store, with the version written there (on a
    /// versioned bucket). Sizes and digests are the record's; the keys and versions are the
    /// claim.
    pub objects: Vec<crate::wire::ObjectDigest>,
}

/// The answer to `catalog.adopt`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AdoptReport {
    pub cluster: String,
    /// The backups whose records now name the fleet's store.
    pub adopted: Vec<String>,
    /// The backups left as they were, each with why.
    pub refused: Vec<AdoptRefusal>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AdoptRefusal {
    pub id: String,
    pub reason: String,
}
