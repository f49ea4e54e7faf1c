//! What a change of a group's policy is, as the API answers it (docs/safety.md): the diff of
//! the two policies, a patch merged into the stored one, and what the change does to the
//! group's backups now. `schedule update` and `schedule create` answer with a
//! [`PolicyEffect`] and refuse a change that deletes anything unless the request confirms it;
//! computing the effect is `sexton_shared::guard` over `sexton_retention::compare_policies`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sexton_retention::{ChangedBackup, ChangedVolume};

use crate::records::Policy;

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
    /// Recovery objectives (issue 47) the change would break at the place: each met now and
    /// missed after it, or missed by more, with by how much. A change that breaks one needs
    /// confirming as one that deletes does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objectives_broken: Vec<String>,
}

/// Why the breaker will hold the run after a policy change, and the command that lets it go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakerForecast {
    /// The trips' sentences (`sexton_retention::breaker::Trip::reason`).
    pub reasons: Vec<String>,
    /// The command that approves the held run (after a look with `--dry-run`).
    pub approve: String,
}

impl PolicyEffect {
    /// Whether the change deletes a backup or a volume that is kept now.
    pub fn deletes(&self) -> bool {
        !self.deleted.is_empty() || !self.volumes_deleted.is_empty()
    }

    /// Whether the change needs a person's confirmation: it deletes something kept now, or
    /// breaks a recovery objective.
    pub fn needs_confirmation(&self) -> bool {
        self.deletes() || !self.objectives_broken.is_empty()
    }

    /// The sentence of a refusal: how many backups go, which objectives break, and how to go
    /// ahead.
    pub fn refusal(&self, what: &str) -> String {
        if !self.deletes() {
            return format!(
                "{what} would break recovery objective(s): {}; confirm it (sexton: --yes, API: \
                 \"confirm\": true) or change nothing",
                self.objectives_broken.join("; ")
            );
        }
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
        if !self.objectives_broken.is_empty() {
            text.push_str(&format!(
                ", and break recovery objective(s): {}",
                self.objectives_broken.join("; ")
            ));
        }
        text.push_str("; confirm it (sexton: --yes, API: \"confirm\": true) or change nothing");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(json: &str) -> Policy {
        Policy::from_json(json).unwrap()
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
