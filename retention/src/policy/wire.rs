//! A policy's JSON form: the wire struct that keeps each value as JSON until it is checked,
//! so that a wrong value gets a message naming its field and what to write, and the parsing
//! of each field into [`Policy`]'s types (and back, for serialising).

use std::fmt;
use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    field_error, ChainMode, GracePeriod, KeepCount, Policy, PolicyError, RecoveryWindow,
    RetentionDays, TagList, MAX_TAG_LISTS,
};
use crate::calendar::CalendarDuration;

/// The JSON shape. Values stay `serde_json::Value` until validation so that a wrong type gets
/// a message naming the field and what to write, not serde's generic one.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_last: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_backups: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_hourly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_daily: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_weekly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_monthly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_yearly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_within: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_within_hourly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_within_daily: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_within_weekly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_within_monthly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_within_yearly: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_tags: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retention_duration: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recovery_window: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_verified: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_full: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_diff: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    minimum_redundancy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pitr_full: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed_grace: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chain_mode: Option<Value>,
}

impl TryFrom<Value> for Policy {
    type Error = PolicyError;

    /// Only a JSON object is a policy (serde would also read a struct from an array).
    fn try_from(value: Value) -> Result<Policy, PolicyError> {
        if !value.is_object() {
            return Err(PolicyError::Syntax(format!(
                "expected a json object of rules, got {value}"
            )));
        }
        let wire: PolicyWire = serde_json::from_value(value)
            .map_err(|error| PolicyError::Syntax(error.to_string()))?;
        Policy::try_from(wire)
    }
}

impl TryFrom<PolicyWire> for Policy {
    type Error = PolicyError;

    fn try_from(wire: PolicyWire) -> Result<Policy, PolicyError> {
        let keep_last = parse_count("keep_last", wire.keep_last)?;
        let max_backups = parse_positive_number("max_backups", "backups", wire.max_backups)?;
        if keep_last.is_some() && max_backups.is_some() {
            return Err(field_error(
                "max_backups",
                "max_backups and keep_last are the same rule; give only one",
            ));
        }
        let policy = Policy {
            keep_last: keep_last.or(max_backups.map(KeepCount::Limited)),
            keep_hourly: parse_count("keep_hourly", wire.keep_hourly)?,
            keep_daily: parse_count("keep_daily", wire.keep_daily)?,
            keep_weekly: parse_count("keep_weekly", wire.keep_weekly)?,
            keep_monthly: parse_count("keep_monthly", wire.keep_monthly)?,
            keep_yearly: parse_count("keep_yearly", wire.keep_yearly)?,
            keep_within: parse_duration("keep_within", wire.keep_within)?,
            keep_within_hourly: parse_duration("keep_within_hourly", wire.keep_within_hourly)?,
            keep_within_daily: parse_duration("keep_within_daily", wire.keep_within_daily)?,
            keep_within_weekly: parse_duration("keep_within_weekly", wire.keep_within_weekly)?,
            keep_within_monthly: parse_duration("keep_within_monthly", wire.keep_within_monthly)?,
            keep_within_yearly: parse_duration("keep_within_yearly", wire.keep_within_yearly)?,
            keep_tags: parse_tags(wire.keep_tags)?,
            retention_duration: parse_positive_number(
                "retention_duration",
                "days",
                wire.retention_duration,
            )?
            .map(RetentionDays),
            recovery_window: match wire.recovery_window {
                None => None,
                Some(Value::String(text)) => Some(RecoveryWindow::parse(&text)?),
                Some(other) => {
                    return Err(field_error(
                        "recovery_window",
                        format!("expected a string like \"30d\", \"4w\" or \"1m\", got {other}"),
                    ))
                }
            },
            keep_verified: parse_count("keep_verified", wire.keep_verified)?,
            keep_full: parse_count("keep_full", wire.keep_full)?,
            keep_diff: parse_count("keep_diff", wire.keep_diff)?,
            minimum_redundancy: parse_positive_number(
                "minimum_redundancy",
                "backups",
                wire.minimum_redundancy,
            )?,
            pitr_full: parse_positive_number("pitr_full", "full backups", wire.pitr_full)?,
            failed_grace: match wire.failed_grace {
                None => GracePeriod::default(),
                Some(Value::String(text)) => GracePeriod::parse(&text)?,
                Some(other) => {
                    return Err(field_error(
                        "failed_grace",
                        format!("expected a string like \"1h\" or \"30min\", got {other}"),
                    ))
                }
            },
            chain_mode: match wire.chain_mode {
                None => ChainMode::Keep,
                Some(Value::String(text)) if text == "keep" => ChainMode::Keep,
                Some(Value::String(text)) if text == "merge" => ChainMode::Merge,
                Some(other) => {
                    return Err(field_error(
                        "chain_mode",
                        format!("expected \"keep\" or \"merge\", got {other}"),
                    ))
                }
            },
        };
        if policy.has_no_rule() {
            if policy.pitr_full.is_some() {
                return Err(field_error(
                    "pitr_full",
                    "counts the full backups the policy keeps, and no rule keeps any: give \
                     keep_full, keep_last or another rule with it",
                ));
            }
            return Err(PolicyError::NoRule);
        }
        if policy.keep_diff.is_some() && policy.keep_full.is_none() {
            return Err(field_error(
                "keep_diff",
                "narrows keep_full's chains (pgBackRest's repo-retention-diff, which counts \
                 differentials within repo-retention-full): give keep_full with it",
            ));
        }
        if let (Some(floor), Some(KeepCount::Limited(last))) =
            (policy.minimum_redundancy, policy.keep_last)
        {
            if floor > last {
                return Err(field_error(
                    "minimum_redundancy",
                    format!(
                        "{floor} is above keep_last {last}: the floor would always keep more \
                         than keep_last says; raise keep_last or lower the floor"
                    ),
                ));
            }
        }
        Ok(policy)
    }
}

impl From<Policy> for PolicyWire {
    fn from(policy: Policy) -> PolicyWire {
        let count = |count: Option<KeepCount>| count.map(|c| Value::from(c.as_restic()));
        let duration = |d: Option<CalendarDuration>| d.map(|d| Value::from(d.to_string()));
        let default_grace = GracePeriod::default();
        PolicyWire {
            keep_last: count(policy.keep_last),
            max_backups: None,
            keep_hourly: count(policy.keep_hourly),
            keep_daily: count(policy.keep_daily),
            keep_weekly: count(policy.keep_weekly),
            keep_monthly: count(policy.keep_monthly),
            keep_yearly: count(policy.keep_yearly),
            keep_within: duration(policy.keep_within),
            keep_within_hourly: duration(policy.keep_within_hourly),
            keep_within_daily: duration(policy.keep_within_daily),
            keep_within_weekly: duration(policy.keep_within_weekly),
            keep_within_monthly: duration(policy.keep_within_monthly),
            keep_within_yearly: duration(policy.keep_within_yearly),
            keep_tags: (!policy.keep_tags.is_empty()).then(|| {
                Value::from(
                    policy
                        .keep_tags
                        .iter()
                        .map(|list| Value::from(list.tags().to_vec()))
                        .collect::<Vec<_>>(),
                )
            }),
            retention_duration: policy.retention_duration.map(|d| Value::from(d.0.get())),
            recovery_window: policy.recovery_window.map(|w| Value::from(w.to_string())),
            keep_verified: count(policy.keep_verified),
            keep_full: count(policy.keep_full),
            keep_diff: count(policy.keep_diff),
            minimum_redundancy: policy.minimum_redundancy.map(|n| Value::from(n.get())),
            pitr_full: policy.pitr_full.map(|n| Value::from(n.get())),
            failed_grace: (policy.failed_grace != default_grace)
                .then(|| Value::from(policy.failed_grace.to_string())),
            chain_mode: (policy.chain_mode == ChainMode::Merge).then(|| Value::from("merge")),
        }
    }
}

/// restic counts: a whole number, `0` = off, `-1` (or `"unlimited"`) = every period.
fn parse_count(
    field: &'static str,
    value: Option<Value>,
) -> Result<Option<KeepCount>, PolicyError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let bad = |got: &Value| {
        field_error(
            field,
            format!("expected a whole number (0 = off, -1 = unlimited), got {got}"),
        )
    };
    match &value {
        Value::String(text) if text == "unlimited" => Ok(Some(KeepCount::Unlimited)),
        Value::Number(number) => match number.as_i64() {
            Some(-1) => Ok(Some(KeepCount::Unlimited)),
            Some(0) => Ok(None),
            Some(n) if n > 0 => u32::try_from(n)
                .ok()
                .and_then(NonZeroU32::new)
                .map(|n| Some(KeepCount::Limited(n)))
                .ok_or_else(|| field_error(field, format!("{n} is too large"))),
            Some(n) => Err(field_error(
                field,
                format!("{n} is negative; use -1 for unlimited"),
            )),
            None => Err(bad(&value)),
        },
        _ => Err(bad(&value)),
    }
}

/// Karbor's numbers: a positive whole number, given as a JSON number or a numeric string
/// (`3` or `"3"`). `"three"`, `"-1"` and `"0"` are errors.
fn parse_positive_number(
    field: &'static str,
    unit: &str,
    value: Option<Value>,
) -> Result<Option<NonZeroU32>, PolicyError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let not_positive = |got: &dyn fmt::Display| {
        field_error(
            field,
            format!("must be a positive whole number of {unit}, got {got}"),
        )
    };
    let number: u64 = match &value {
        Value::Number(number) => match (number.as_u64(), number.as_i64()) {
            (Some(n), _) => n,
            (None, Some(_)) => return Err(not_positive(&value)),
            (None, None) => return Err(not_positive(&value)),
        },
        Value::String(text) => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(field_error(
                    field,
                    format!("expected a number of {unit}, got {value}"),
                ));
            }
            if text.starts_with('-') {
                return Err(not_positive(&value));
            }
            text.parse()
                .map_err(|_| field_error(field, format!("{text:?} is too large")))?
        }
        _ => {
            return Err(field_error(
                field,
                format!("expected a number of {unit}, got {value}"),
            ))
        }
    };
    let number =
        u32::try_from(number).map_err(|_| field_error(field, format!("{number} is too large")))?;
    NonZeroU32::new(number)
        .map(Some)
        .ok_or_else(|| not_positive(&value))
}

fn parse_duration(
    field: &'static str,
    value: Option<Value>,
) -> Result<Option<CalendarDuration>, PolicyError> {
    match value {
        None => Ok(None),
        Some(Value::String(text)) => CalendarDuration::parse(&text)
            .map(Some)
            .map_err(|error| field_error(field, error.to_string())),
        Some(other) => Err(field_error(
            field,
            format!("expected a duration string like \"7d\" or \"1y2m3d4h\", got {other}"),
        )),
    }
}

fn parse_tags(value: Option<Value>) -> Result<Vec<TagList>, PolicyError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let bad = || {
        field_error(
            "keep_tags",
            format!("expected a list of tag lists like [[\"a\", \"b\"], [\"c\"]], got {value}"),
        )
    };
    let Value::Array(lists) = &value else {
        return Err(bad());
    };
    if lists.len() > MAX_TAG_LISTS {
        return Err(field_error(
            "keep_tags",
            format!("at most {MAX_TAG_LISTS} tag lists, got {}", lists.len()),
        ));
    }
    let mut tag_lists = Vec::with_capacity(lists.len());
    for list in lists {
        let Value::Array(tags) = list else {
            return Err(bad());
        };
        let tags = tags
            .iter()
            .map(|tag| tag.as_str().map(str::to_owned).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()?;
        tag_lists.push(TagList::new(tags)?);
    }
    Ok(tag_lists)
}
