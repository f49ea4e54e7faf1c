//! The guard on changing a group's policy (docs/safety.md): what a schedule change does to the
//! group's backups right now, before it is made. `schedule update` and `schedule create`
//! answer with it, and refuse a change that deletes anything unless the request confirms it.
//!
//! The answer's types, the diff and the patch are `sexton_model::policy_change` (re-exported
//! here). Pure: the caller loads the group's schedules and records; the judgement is the
//! retention crate's, `retention::group::compare_group_policies`, which runs the engine under
//! both policies. A group the scheduler does not plan (no policy, or schedules that disagree)
//! keeps everything, so on that side it compares with a policy that keeps every completed
//! backup.

use chrono::{DateTime, Utc};
use sexton_retention::{group::compare_group_policies, PlanError};

pub use sexton_model::policy_change::{
    merge_policy, policy_diff, BreakerForecast, PolicyDiffLine, PolicyEffect,
};

use crate::records::{BackupRecord, Policy};

/// The trips of the breaker on the plan `after` makes over `records` (the group's) at `now`,
/// judged by `limits`: empty when the run may go. Pure.
pub fn breaker_trips(
    records: &[&BackupRecord],
    after: &Policy,
    limits: &sexton_retention::breaker::BreakerLimits,
    now: DateTime<Utc>,
) -> Result<Vec<String>, PlanError> {
    let catalog = crate::engine_form::catalog(records);
    let plan = sexton_retention::plan(&catalog, after, now)?;
    Ok(
        sexton_retention::breaker::judge(&catalog, &plan, limits, now)
            .trips
            .into_iter()
            .map(|trip| trip.reason)
            .collect(),
    )
}

/// What replacing the group's policy `before` (or why the group is unplanned) by `after` does
/// to `records` (the group's) at `now`.
pub fn policy_effect(
    records: &[&BackupRecord],
    before: Result<&Policy, String>,
    after: Result<&Policy, String>,
    now: DateTime<Utc>,
) -> Result<PolicyEffect, PlanError> {
    effect_over(crate::engine_form::catalog(records), before, after, now)
}

/// What replacing the policy of the group's copies at `location` (issue 28) does to the copies
/// there, `records` being the group's: the same judgement over the copies that location holds,
/// in their form there ([`BackupRecord::to_engine_at`]).
pub fn copy_policy_effect(
    records: &[&BackupRecord],
    location: &crate::names::LocationName,
    before: Result<&Policy, String>,
    after: Result<&Policy, String>,
    now: DateTime<Utc>,
) -> Result<PolicyEffect, PlanError> {
    effect_over(
        crate::engine_form::catalog_at(records, location),
        before,
        after,
        now,
    )
}

fn effect_over(
    catalog: sexton_retention::Catalog,
    before: Result<&Policy, String>,
    after: Result<&Policy, String>,
    now: DateTime<Utc>,
) -> Result<PolicyEffect, PlanError> {
    let change = compare_group_policies(
        &catalog,
        before.as_ref().ok().copied(),
        after.as_ref().ok().copied(),
        now,
    )?;
    Ok(PolicyEffect {
        diff: match (&before, &after) {
            (Ok(before), Ok(after)) => policy_diff(before, after),
            _ => Vec::new(),
        },
        before_unplanned: before.as_ref().err().cloned(),
        after_unplanned: after.as_ref().err().cloned(),
        before: before.ok().cloned(),
        after: after.ok().cloned(),
        deleted: change.deleted,
        volumes_deleted: change.volumes_deleted,
        n_keep_before: change.n_keep_current,
        n_keep_after: change.n_keep_proposed,
        breaker_holds: None,
        objectives_broken: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: &str) -> Policy {
        Policy::from_json(json).unwrap()
    }

    fn records(n: usize) -> Vec<BackupRecord> {
        (0..n)
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "id": format!("b{i:02}"), "uid": format!("u{i}"), "cluster": "c1",
                    "plan": "p", "backup_name": "p", "kind": "full", "status": "completed",
                    "completed_at": format!("2026-03-{:02}T03:00:00Z", 28 - i),
                }))
                .unwrap()
            })
            .collect()
    }

    /// Checks which backups a change deletes at once.
    fn check(
        n: usize,
        before: Result<&str, &str>,
        after: Result<&str, &str>,
        expected_deleted: &[&str],
    ) {
        let records = records(n);
        let refs: Vec<&BackupRecord> = records.iter().collect();
        let before = before.map(policy).map_err(str::to_string);
        let after = after.map(policy).map_err(str::to_string);
        let now: DateTime<Utc> = "2026-03-29T00:00:00Z".parse().unwrap();
        let effect = policy_effect(
            &refs,
            before.as_ref().map_err(Clone::clone),
            after.as_ref().map_err(Clone::clone),
            now,
        )
        .unwrap();
        let deleted: Vec<&str> = effect.deleted.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(deleted, expected_deleted, "{before:?} -> {after:?}");
        assert_eq!(effect.deletes(), !expected_deleted.is_empty());
    }

    #[test]
    fn a_copy_rule_change_is_judged_over_the_copies_its_location_holds() {
        let dr = crate::names::LocationName::new("dr").unwrap();
        let mut records = records(4);
        // b00 (newest) and b02 are copied to dr, b01 awaits its copy, b03 was never copied.
        for (record, state) in records
            .iter_mut()
            .zip([Some("copied"), None, Some("copied")])
        {
            record.copy_to = vec![dr.clone()];
            if let Some(state) = state {
                record.copies.insert(
                    dr.clone(),
                    serde_json::from_value(serde_json::json!({
                        "state": state, "copied_at": "2026-03-28T04:00:00Z"
                    }))
                    .unwrap(),
                );
            }
        }
        let refs: Vec<&BackupRecord> = records.iter().collect();
        let now: DateTime<Utc> = "2026-03-29T00:00:00Z".parse().unwrap();
        let effect = |before: Result<&str, &str>, after: Result<&str, &str>| {
            let before = before.map(policy).map_err(str::to_string);
            let after = after.map(policy).map_err(str::to_string);
            let effect = copy_policy_effect(
                &refs,
                &dr,
                before.as_ref().map_err(Clone::clone),
                after.as_ref().map_err(Clone::clone),
                now,
            )
            .unwrap();
            effect
                .deleted
                .iter()
                .map(|b| b.id.clone())
                .collect::<Vec<_>>()
        };
        // keep_last 1 at dr: of its two copies the older goes; the awaited one is never
        // deleted there, nor is b03, which dr does not hold.
        assert_eq!(
            effect(Ok(r#"{"keep_last": 5}"#), Ok(r#"{"keep_last": 1}"#)),
            ["b02"]
        );
        // Removing the rule keeps every copy there.
        assert!(effect(Ok(r#"{"keep_last": 5}"#), Err("no rule")).is_empty());
        assert_eq!(effect(Err("no rule"), Ok(r#"{"keep_last": 1}"#)), ["b02"]);
    }

    #[test]
    fn a_change_deletes_what_only_the_old_policy_keeps() {
        check(
            5,
            Ok(r#"{"keep_last": 5}"#),
            Ok(r#"{"keep_last": 3}"#),
            &["b03", "b04"],
        );
        check(5, Ok(r#"{"keep_last": 3}"#), Ok(r#"{"keep_last": 5}"#), &[]);
        check(5, Ok(r#"{"keep_last": 3}"#), Ok(r#"{"keep_last": 3}"#), &[]);
        // An unplanned group keeps everything: a first policy deletes at once.
        check(
            4,
            Err("no policy"),
            Ok(r#"{"keep_last": 2}"#),
            &["b02", "b03"],
        );
        // A change that leaves the group unplanned deletes nothing.
        check(4, Ok(r#"{"keep_last": 2}"#), Err("schedules disagree"), &[]);
        check(0, Err("no policy"), Ok(r#"{"keep_last": 1}"#), &[]);
    }
}
