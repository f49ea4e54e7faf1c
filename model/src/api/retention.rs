//! The requests of `retention.*`, answered by the retention-worker: `retention.preview` and
//! `retention.approve`; and what a preview says of one group: its plan, and whether the circuit
//! breaker holds it ([`BreakerState`], which the retention-worker's runs judge with too).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_retention::breaker::Trip;

use super::v1;
use crate::actor::Actor;
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
    /// The plans of the group's copies at this location (issue 28) instead of primary's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
}

impl Message for PreviewRequest {
    const KIND: &'static str = "request";
}

/// `recovery.window` request (`sexton recovery window --cluster C [--plan P] [--location L]`,
/// issue 47): what each place can restore now, by plan, with the objectives checked. The
/// retention-worker answers with a list of `sexton_shared::recovery::PlaceRecovery`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveryRequest {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanName>,
    /// One place only (`primary`, or a location); absent: every place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
}

impl Message for RecoveryRequest {
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
    /// Approve the held plan of the group's copies at this location (issue 28) instead of
    /// the plan at primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
}

impl Message for ApproveRequest {
    const KIND: &'static str = "request";
}

/// One group of `retention.preview`'s answer: the retention-worker's `GroupPlan` as it goes on
/// the wire (the plan, why nothing is deleted when that is so, and the breaker's state).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PreviewGroup {
    pub cluster: ClusterName,
    pub plan: PlanName,
    /// The location whose copies the plan is of (issue 28); none: primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<crate::names::LocationName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<sexton_retention::Plan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerState>,
    /// At a location: the copies the plan deletes before their class's minimum duration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub early_deletions: Vec<crate::copies::EarlyDeletion>,
    /// What the group keeps only because an Object Lock has not expired (issue 29).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_only: Option<LockedOnly>,
    /// What the place can restore once the plan is carried out (issue 47), with the group's
    /// objectives there checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<crate::objectives::PlaceRecovery>,
}

/// The backups a group's policy lets go that an unexpired Object Lock keeps (`expired, locked
/// until T`), and the bytes they hold: what the locks cost beyond the policy. Bytes count
/// what the executors reported (`size_bytes`, else the objects intake saw).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LockedOnly {
    pub backups: u64,
    pub bytes: u64,
}

/// The breaker's state of one group's run, as the run and the preview see it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BreakerState {
    /// Tripped, and no approval lets it through: nothing of the plan is marked.
    pub held: bool,
    pub trips: Vec<Trip>,
    /// The completed backups the plan deletes by its rules: what an approval names.
    pub deleting: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalView>,
    /// The command that lets a held run through, once.
    pub approve_with: String,
}

/// A stored approval, as the run and the preview judge it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApprovalView {
    pub approved_at: DateTime<Utc>,
    pub by: Actor,
    /// Whether it lets this run through.
    pub covers: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
    /// The approval's revision in its bucket, for the run that uses it up; not sent.
    #[serde(skip)]
    pub revision: u64,
}
