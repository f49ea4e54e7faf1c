//! Pure: a group's plan as a run or a preview sees it ([`GroupPlan`]), decided from the group's
//! members, its policy (or why it has none) and `now`. Nothing here reads or writes: the
//! members, the policy and the breaker's verdict come from the worker (`worker::groups`), and
//! what a run does with the plan is in `worker::run`. It sits below both the worker and
//! [`crate::binlog`], which decides a cluster's binlog collection from the groups' plans.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sexton_model::{
    names::{ClusterName, LocationName, PlanName},
    records::Policy,
};

use crate::decisions::{self, RunDecision};
use crate::safety::{self, BreakerState};
use crate::view::Members;

/// The retention decision for one cluster/plan group.
#[derive(Debug, Serialize)]
pub struct GroupPlan {
    pub cluster: ClusterName,
    pub plan: PlanName,
    /// The location whose copies the group holds (issue 28); `None`: the backups at primary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<LocationName>,
    /// Why nothing is deleted in this group, when that is the case for a reason other than
    /// the policy (no policy, conflicting policies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_reason: Option<String>,
    /// The whole plan, every backup rendered: previews and `binlog.status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<sexton_retention::Plan>,
    /// The hash of the group's policy, as audit entries name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_hash: Option<String>,
    /// The circuit breaker tripped on the decision: held (nothing is marked) unless a
    /// person's approval covers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerState>,
    /// At a location, in previews: the copies the plan deletes before their storage class's
    /// minimum duration, each charged the rest of it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub early_deletions: Vec<sexton_model::copies::EarlyDeletion>,
    /// What the plan keeps only because an Object Lock has not expired (issue 29), when the
    /// whole plan was rendered and it keeps any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_only: Option<sexton_shared::api::LockedOnly>,
    /// In previews: what the place can restore once the plan is carried out (issue 47).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<sexton_shared::recovery::PlaceRecovery>,
    /// What a run acts on ([`crate::decisions`]): runs only, instead of `decision` (which a
    /// run renders too only when it deletes something: the breaker and the audit judge it).
    #[serde(skip)]
    pub run: Option<RunDecision>,
    /// The group's records in the engine's form, shared with the catalog view ([`Members`]):
    /// a run reads the few it acts on whole from the catalog (`Worker::record_at`).
    #[serde(skip)]
    pub members: Arc<Members>,
    #[serde(skip)]
    pub policy: Option<Policy>,
    /// Per location, the longest delay the plan's copy rules give it (at primary only): the
    /// copy lag counts from a backup's completion plus it.
    #[serde(skip)]
    pub copy_delays: std::collections::BTreeMap<String, chrono::TimeDelta>,
    /// The recovery objectives stated for the group at its place (issue 47): the schedules'
    /// own at primary, their copy rules' at a location.
    #[serde(skip)]
    pub objectives: Option<sexton_model::objectives::Objectives>,
}

impl GroupPlan {
    /// The binlog part of the group's plan, if it was planned.
    pub fn binlog(&self) -> Option<&sexton_retention::BinlogPlan> {
        match (&self.decision, &self.run) {
            (Some(plan), _) => Some(&plan.binlog),
            (None, Some(run)) => Some(&run.binlog),
            (None, None) => None,
        }
    }

    /// The plan of `plan`'s group over `members` at `now`, under `policy` (`Err`: why the
    /// group is not planned), rendered as `render` asks. A plan that deletes is rendered whole
    /// too: the breaker judges it and a run stores it in the audit first. The breaker's verdict
    /// is left for the caller to ask ([`GroupPlan::deletes`]).
    pub(crate) fn decide(
        cluster: &ClusterName,
        plan: &PlanName,
        members: Arc<Members>,
        policy: Result<&Policy, String>,
        now: DateTime<Utc>,
        render: Render,
    ) -> GroupPlan {
        let mut group = GroupPlan {
            cluster: cluster.clone(),
            plan: plan.clone(),
            location: None,
            hold_reason: None,
            decision: None,
            policy_hash: None,
            breaker: None,
            early_deletions: Vec::new(),
            locked_only: None,
            recovery: None,
            run: None,
            members,
            policy: None,
            copy_delays: Default::default(),
            objectives: None,
        };
        let policy = match policy {
            Ok(policy) => policy,
            Err(reason) => {
                group.hold_reason = Some(reason);
                return group;
            }
        };
        group.policy = Some(policy.clone());
        group.policy_hash = Some(safety::hash_of(Some(policy)));
        match sexton_retention::evaluate(&group.members.engine, policy, now) {
            Ok(evaluation) => {
                match render {
                    Render::Plan => group.decision = Some(evaluation.to_plan()),
                    Render::Run => group.run = Some(decisions::for_run(&evaluation)),
                    Render::RunWithPlan => {
                        group.run = Some(decisions::for_run(&evaluation));
                        group.decision = Some(evaluation.to_plan());
                    }
                }
                // A plan that deletes is judged by the circuit breaker, and a run that marks
                // stores every verdict in the audit first: both read the whole plan, rendered
                // only then.
                if group.deletes() {
                    group.decision.get_or_insert_with(|| evaluation.to_plan());
                }
                group.locked_only = group
                    .decision
                    .as_ref()
                    .map(|plan| locked_only(plan, &group.members))
                    .filter(|locked| locked.backups > 0);
            }
            Err(err) => {
                group.hold_reason = Some(format!(
                    "retention refused to plan: {err}; keeping everything"
                ))
            }
        }
        group
    }

    /// Whether the plan deletes anything, whole backups or volumes: what a run acts on if it
    /// was rendered for a run, else the whole plan.
    pub fn deletes(&self) -> bool {
        match (&self.run, &self.decision) {
            (Some(run), _) => !run.delete.is_empty() || !run.partial.is_empty(),
            (None, Some(owned)) => !owned.delete.is_empty() || !owned.partial.is_empty(),
            (None, None) => false,
        }
    }
}

/// What `plan` keeps only for an unexpired lock (`Reason::Locked { only: true }`), counted in
/// backups and in the bytes their records say they hold.
fn locked_only(plan: &sexton_retention::Plan, members: &Members) -> sexton_shared::api::LockedOnly {
    let ids: std::collections::HashSet<&str> = plan
        .keep
        .iter()
        .filter(|d| {
            d.reasons
                .iter()
                .any(|r| matches!(r, sexton_retention::Reason::Locked { only: true, .. }))
        })
        .map(|d| d.id.as_str())
        .collect();
    let bytes = members
        .engine
        .backups
        .iter()
        .zip(&members.entries)
        .filter(|(b, _)| ids.contains(b.id.as_str()))
        .map(|(_, entry)| entry.bytes)
        .sum();
    sexton_shared::api::LockedOnly {
        backups: ids.len() as u64,
        bytes,
    }
}

/// How much of a group's plan to render: all of it (a preview), or what a run acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Render {
    Plan,
    Run,
    /// A run that needs every kept backup's reasons too: it sets Object Locks from them.
    RunWithPlan,
}
