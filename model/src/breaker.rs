//! A schedule's `breaker` block as users write it, checked at the door: the circuit breaker's
//! settings for the schedule's group (docs/safety.md). Resolving a group's limits from these
//! and the server's defaults is `sexton_shared::breaker`; the judgement is
//! `sexton_retention::breaker`.

use serde::{Deserialize, Serialize};

/// A schedule's breaker settings; each one given overrides the server's default for the
/// schedule's group (`"breaker": {"max_delete_fraction": 0.3, "stale_after": "2d"}`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BreakerSpec {
    /// `false`: this schedule asks for no breaker (a load test that deletes most of a group on
    /// purpose). In a group of several schedules the strictest setting wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delete_fraction: Option<DeleteFraction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delete_count: Option<DeleteCount>,
    /// A span (`72h`, `3d`) or `off`; unset: the server's number of schedule intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_after: Option<StaleAfter>,
}

/// A share of a group's completed backups, from 0 to 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct DeleteFraction(f64);

impl DeleteFraction {
    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for DeleteFraction {
    type Error = String;

    fn try_from(share: f64) -> Result<DeleteFraction, String> {
        if !(0.0..=1.0).contains(&share) {
            return Err(format!(
                "max_delete_fraction {share}: expected a share from 0 to 1 (0.5 = half)"
            ));
        }
        Ok(DeleteFraction(share))
    }
}

impl From<DeleteFraction> for f64 {
    fn from(share: DeleteFraction) -> f64 {
        share.0
    }
}

/// A number of backups, at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "u32")]
pub struct DeleteCount(u32);

impl DeleteCount {
    pub fn get(self) -> u32 {
        self.0
    }
}

impl TryFrom<i64> for DeleteCount {
    type Error = String;

    fn try_from(n: i64) -> Result<DeleteCount, String> {
        match u32::try_from(n) {
            Ok(n) if n >= 1 => Ok(DeleteCount(n)),
            _ => Err(format!(
                "max_delete_count {n}: expected a number of backups of at least 1 (\"enabled\": \
                 false turns the breaker off)"
            )),
        }
    }
}

impl From<DeleteCount> for u32 {
    fn from(n: DeleteCount) -> u32 {
        n.0
    }
}

/// How old a group's newest completed backup may be before a run that deletes is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Value", into = "String")]
pub enum StaleAfter {
    Off,
    After(sexton_schedule::Span),
}

impl TryFrom<serde_json::Value> for StaleAfter {
    type Error = String;

    fn try_from(value: serde_json::Value) -> Result<StaleAfter, String> {
        let bad = |why: String| {
            format!("stale_after {value}: {why} (expected a span such as 72h or 3d, or off)")
        };
        match &value {
            serde_json::Value::String(text) if text == "off" => Ok(StaleAfter::Off),
            serde_json::Value::String(text) => sexton_schedule::Span::parse(text)
                .map(StaleAfter::After)
                .map_err(|err| bad(err.to_string())),
            _ => Err(bad("not a string".into())),
        }
    }
}

impl From<StaleAfter> for String {
    fn from(stale: StaleAfter) -> String {
        match stale {
            StaleAfter::Off => "off".into(),
            StaleAfter::After(span) => span.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_with_the_field_named() {
        for (json, expected) in [
            (
                r#"{"max_delete_fraction": -0.1}"#,
                "max_delete_fraction -0.1",
            ),
            (
                r#"{"max_delete_fraction": 1.5}"#,
                "expected a share from 0 to 1",
            ),
            (r#"{"max_delete_fraction": "half"}"#, "invalid type"),
            (r#"{"max_delete_count": 0}"#, "max_delete_count 0"),
            (r#"{"max_delete_count": -2}"#, "at least 1"),
            (r#"{"stale_after": "soon"}"#, "stale_after \"soon\""),
            (r#"{"stale_after": "0s"}"#, "is zero"),
            (r#"{"stale_after": 72}"#, "not a string"),
            (r#"{"stale": "3d"}"#, "unknown field"),
        ] {
            let err = serde_json::from_str::<BreakerSpec>(json)
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{json}: {err}");
        }
        let ok: BreakerSpec =
            serde_json::from_str(r#"{"max_delete_fraction": 0, "stale_after": "1d12h"}"#).unwrap();
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            serde_json::json!({"max_delete_fraction": 0.0, "stale_after": "1d12h"})
        );
    }
}
