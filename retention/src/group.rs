//! Which policy a group is planned by. A group (a cluster and a plan) takes its policy from its
//! schedules: they must agree on one. A group without one, or whose schedules disagree, is not
//! planned at all: everything is kept, and a comparison treats that side as a policy that keeps
//! every completed backup.
//!
//! Pure, like the engine: the caller loads the schedules and hands over their policies.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::catalog::Catalog;
use crate::compare::{compare_policies, PolicyChange};
use crate::error::PlanError;
use crate::policy::Policy;

/// Why a group with no policy is not planned.
pub const NO_POLICY: &str = "no schedule gives this plan a retention policy: keeping everything";

/// Why a group whose schedules disagree is not planned.
pub const POLICIES_DISAGREE: &str =
    "schedules disagree on this plan's retention policy: keeping everything";

/// The distinct policies each group's schedules give it, in the order first given: `schedules`
/// is each schedule's group key and policy.
pub fn group_policies<'a, K: Ord>(
    schedules: impl IntoIterator<Item = (K, &'a Policy)>,
) -> BTreeMap<K, Vec<Policy>> {
    let mut policies: BTreeMap<K, Vec<Policy>> = BTreeMap::new();
    for (group, policy) in schedules {
        let list = policies.entry(group).or_default();
        if !list.contains(policy) {
            list.push(policy.clone());
        }
    }
    policies
}

/// The one policy of a group whose schedules give it `policies` (distinct), or why the group is
/// not planned (everything kept).
pub fn group_policy(policies: &[Policy]) -> Result<&Policy, String> {
    match policies {
        [] => Err(NO_POLICY.into()),
        [policy] => Ok(policy),
        _ => Err(POLICIES_DISAGREE.into()),
    }
}

/// A policy that keeps every completed backup: what a group that is not planned does.
pub fn keep_everything() -> Policy {
    Policy::from_json(r#"{"keep_last": -1}"#).expect("keep_last -1 is valid")
}

/// What replacing a group's policy `current` by `proposed` deletes at `now`
/// ([`compare_policies`]), where a side that is not planned (`None`) keeps everything: a first
/// policy deletes at once, a change that leaves the group unplanned deletes nothing.
pub fn compare_group_policies(
    catalog: &Catalog,
    current: Option<&Policy>,
    proposed: Option<&Policy>,
    now: DateTime<Utc>,
) -> Result<PolicyChange, PlanError> {
    let everything = keep_everything();
    compare_policies(
        catalog,
        current.unwrap_or(&everything),
        proposed.unwrap_or(&everything),
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_planned_only_by_one_policy() {
        let a = Policy::keep_last(3);
        let b = Policy::keep_last(5);
        let policies = group_policies([("p", &a), ("p", &a), ("q", &a), ("q", &b)]);
        assert_eq!(policies["p"], vec![a.clone()]);
        assert_eq!(policies["q"], vec![a.clone(), b.clone()]);
        assert_eq!(group_policy(&policies["p"]), Ok(&a));
        assert_eq!(group_policy(&policies["q"]), Err(POLICIES_DISAGREE.into()));
        assert_eq!(group_policy(&[]), Err(NO_POLICY.into()));
    }

    #[test]
    fn an_unplanned_side_keeps_everything() {
        let catalog: Catalog = serde_json::from_value(serde_json::json!({"backups": [
            {"id": "b1", "status": "completed", "completed_at": "2026-03-02T03:00:00Z"},
            {"id": "b0", "status": "completed", "completed_at": "2026-03-01T03:00:00Z"},
        ]}))
        .unwrap();
        let now: DateTime<Utc> = "2026-03-03T00:00:00Z".parse().unwrap();
        let one = Policy::keep_last(1);
        let first = compare_group_policies(&catalog, None, Some(&one), now).unwrap();
        let ids: Vec<&str> = first.deleted.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["b0"]);
        let unplanned = compare_group_policies(&catalog, Some(&one), None, now).unwrap();
        assert!(unplanned.deleted.is_empty());
        assert_eq!(unplanned.n_keep_proposed, 2);
    }
}
