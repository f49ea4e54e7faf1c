//! The guard on changing a group's policy (docs/safety.md): what a schedule change does to the
//! group's backups right now, before it is made. `schedule update` and `schedule create`
//! answer with it, and refuse a change that deletes anything unless the request confirms it.
//!
//! Pure: the caller loads the group's schedules and records; `retention::compare_policies` runs
//! the engine under both policies. A group the scheduler does not plan (no policy, or schedules
//! that disagree) keeps everything, so on that side the guard compares with a policy that keeps
//! every completed backup.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sexton_retention::{compare_policies, ChangedBackup, ChangedVolume, PlanError};

use crate::records::{BackupRecord, Policy};

/// One key of a policy that a change sets, changes or removes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PolicyDiffLine {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

/// The keys whose values differ between two policies, in key order.
pub fn policy_diff(before: &Policy, after: &Policy) -> Vec<PolicyDiffLine> {
    let object = |policy: &Policy| match serde_json::to_value(policy) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let (before, after) = (object(before), object(after));
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|key| before.get(*key) != after.get(*key))
        .map(|key| PolicyDiffLine {
            key: key.clone(),
            before: before.get(key).cloned(),
            after: after.get(key).cloned(),
        })
        .collect()
}

/// `policy` with the keys of `patch` set (a `null` removes the key), validated as a policy.
pub fn merge_policy(policy: &Policy, patch: &Map<String, Value>) -> Result<Policy, String> {
    let Value::Object(mut merged) =
        serde_json::to_value(policy).map_err(|err| format!("the stored policy: {err}"))?
    else {
        return Err("the stored policy is not an object".into());
    };
    for (key, value) in patch {
        if value.is_null() {
            merged.remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
        }
    }
    serde_json::from_value(Value::Object(merged)).map_err(|err| format!("invalid policy: {err}"))
}

/// What a change does to one group's backups now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PolicyEffect {
    /// The group's policy before and after (`None`: the group is not planned; everything is
    /// kept), and the diff of the two when both exist.
    pub before: Option<Policy>,
    pub after: Option<Policy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<PolicyDiffLine>,
    /// Why a side keeps everything, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_unplanned: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_unplanned: Option<String>,
    /// Backups kept now that the change deletes at once, newest first, with both sides'
    /// reasons.
    pub deleted: Vec<ChangedBackup>,
    /// Volumes of backups that stay which the change deletes at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes_deleted: Vec<ChangedVolume>,
    /// How many backups each side keeps whole.
    pub n_keep_before: usize,
    pub n_keep_after: usize,
    /// The circuit breaker's word on the retention run that carries the change out, when it
    /// will hold that run: said at the first prompt, with the way to let it through, so one
    /// change does not need a second confirmation nobody announced (issue 26).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_holds: Option<BreakerForecast>,
}

/// Why the breaker will hold the run after a policy change, and the command that lets it go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakerForecast {
    /// The trips' sentences (`sexton_retention::breaker::Trip::reason`).
    pub reasons: Vec<String>,
    /// The command that approves the held run (after a look with `--dry-run`).
    pub approve: String,
}

/// The trips of the breaker on the plan `after` makes over `records` (the group's) at `now`,
/// judged by `limits`: empty when the run may go. Pure.
pub fn breaker_trips(
    records: &[&BackupRecord],
    after: &Policy,
    limits: &sexton_retention::breaker::BreakerLimits,
    now: DateTime<Utc>,
) -> Result<Vec<String>, PlanError> {
    let catalog = sexton_retention::Catalog {
        backups: records.iter().map(|r| r.to_engine()).collect(),
        binlog_segments: Vec::new(),
    };
    let plan = sexton_retention::plan(&catalog, after, now)?;
    Ok(
        sexton_retention::breaker::judge(&catalog, &plan, limits, now)
            .trips
            .into_iter()
            .map(|trip| trip.reason)
            .collect(),
    )
}

impl PolicyEffect {
    /// Whether the change deletes a backup or a volume that is kept now.
    pub fn deletes(&self) -> bool {
        !self.deleted.is_empty() || !self.volumes_deleted.is_empty()
    }

    /// The sentence of a refusal: how many backups go, and how to go ahead.
    pub fn refusal(&self, what: &str) -> String {
        let ids: Vec<&str> = self
            .deleted
            .iter()
            .map(|b| b.id.as_str())
            .take(10)
            .collect();
        let more = self.deleted.len().saturating_sub(ids.len());
        let mut text = format!(
            "{what} would delete {} backup(s) kept now ({}{})",
            self.deleted.len(),
            ids.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
        if !self.volumes_deleted.is_empty() {
            text.push_str(&format!(
                " and {} volume(s) of backups that stay",
                self.volumes_deleted.len()
            ));
        }
        text.push_str("; confirm it (sexton: --yes, API: \"confirm\": true) or change nothing");
        text
    }
}

/// A policy that keeps every completed backup: what the scheduler does for an unplanned group.
fn keep_everything() -> Policy {
    serde_json::from_value(serde_json::json!({"keep_last": -1})).expect("keep_last -1 is valid")
}

/// What replacing the group's policy `before` (or why the group is unplanned) by `after` does
/// to `records` (the group's) at `now`.
pub fn policy_effect(
    records: &[&BackupRecord],
    before: Result<&Policy, String>,
    after: Result<&Policy, String>,
    now: DateTime<Utc>,
) -> Result<PolicyEffect, PlanError> {
    let catalog = sexton_retention::Catalog {
        backups: records.iter().map(|r| r.to_engine()).collect(),
        binlog_segments: Vec::new(),
    };
    let everything = keep_everything();
    let (before_policy, before_unplanned) = match &before {
        Ok(policy) => (*policy, None),
        Err(why) => (&everything, Some(why.clone())),
    };
    let (after_policy, after_unplanned) = match &after {
        Ok(policy) => (*policy, None),
        Err(why) => (&everything, Some(why.clone())),
    };
    let change = compare_policies(&catalog, before_policy, after_policy, now)?;
    Ok(PolicyEffect {
        diff: match (&before, &after) {
            (Ok(before), Ok(after)) => policy_diff(before, after),
            _ => Vec::new(),
        },
        before: before.ok().cloned(),
        after: after.ok().cloned(),
        before_unplanned,
        after_unplanned,
        deleted: change.deleted,
        volumes_deleted: change.volumes_deleted,
        n_keep_before: change.n_keep_current,
        n_keep_after: change.n_keep_proposed,
        breaker_holds: None,
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

    #[test]
    fn a_patch_changes_only_its_keys() {
        let stored = policy(r#"{"keep_last": 7, "keep_weekly": 4, "keep_monthly": 6}"#);
        let patch = |json: &str| -> Map<String, Value> { serde_json::from_str(json).unwrap() };
        let merged = merge_policy(&stored, &patch(r#"{"keep_last": 5}"#)).unwrap();
        assert_eq!(
            merged,
            policy(r#"{"keep_last": 5, "keep_weekly": 4, "keep_monthly": 6}"#)
        );
        assert_eq!(
            policy_diff(&stored, &merged),
            vec![PolicyDiffLine {
                key: "keep_last".into(),
                before: Some(serde_json::json!(7)),
                after: Some(serde_json::json!(5)),
            }]
        );
        let removed = merge_policy(&stored, &patch(r#"{"keep_monthly": null}"#)).unwrap();
        assert_eq!(removed, policy(r#"{"keep_last": 7, "keep_weekly": 4}"#));
        let err = merge_policy(&stored, &patch(r#"{"keep_last": "many"}"#)).unwrap_err();
        assert!(err.starts_with("invalid policy"), "{err}");
        let err = merge_policy(&stored, &patch(r#"{"keep_lats": 3}"#)).unwrap_err();
        assert!(err.contains("keep_lats"), "{err}");
    }
}
