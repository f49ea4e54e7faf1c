//! The retention policy, parsed once at the boundary into typed values.
//!
//! The JSON shape is issue 3's: restic's rule names with a `keep_` prefix, Karbor's
//! `max_backups` and `retention_duration` (numbers or numeric strings, issue 8), barman's and
//! cloudnative-mysql's `recovery_window`, plus `failed_grace` and `chain_mode`. Unknown keys
//! are errors (a misspelt rule must not silently keep nothing). Everything after parsing works
//! on [`Policy`], never on the strings.
//!
//! `Policy` serialises to the same JSON shape and deserialises through the same validation, so
//! services can store it inside a schedule record and read it back unchanged.

use std::fmt;
use std::num::NonZeroU32;

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::calendar::CalendarDuration;

mod wire;

use wire::PolicyWire;

/// A validated retention policy. A backup is kept if any rule keeps it.
///
/// Build one with [`Policy::from_json`], [`Policy::keep_last`], or a struct literal ending in
/// `..Policy::default()` (the default has no rule, and [`crate::plan`] rejects a policy
/// without a rule).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "PolicyWire")]
pub struct Policy {
    /// Newest N completed backups (restic `--keep-last`, Karbor `max_backups`).
    pub keep_last: Option<KeepCount>,
    pub keep_hourly: Option<KeepCount>,
    pub keep_daily: Option<KeepCount>,
    /// ISO weeks, Monday start.
    pub keep_weekly: Option<KeepCount>,
    pub keep_monthly: Option<KeepCount>,
    pub keep_yearly: Option<KeepCount>,
    /// Everything completed strictly after `newest − duration` (Go date arithmetic).
    pub keep_within: Option<CalendarDuration>,
    pub keep_within_hourly: Option<CalendarDuration>,
    pub keep_within_daily: Option<CalendarDuration>,
    pub keep_within_weekly: Option<CalendarDuration>,
    pub keep_within_monthly: Option<CalendarDuration>,
    pub keep_within_yearly: Option<CalendarDuration>,
    /// Keep a backup that carries every tag of at least one list (OR of AND-lists).
    pub keep_tags: Vec<TagList>,
    /// Karbor: keep what completed at most this many days before `now`.
    pub retention_duration: Option<RetentionDays>,
    /// barman / cloudnative-mysql: keep every point of the last window recoverable.
    pub recovery_window: Option<RecoveryWindow>,
    /// The newest N backups a restore test proved restorable (issue 13), with what they need.
    /// Backups whose verification failed or that were never verified do not count.
    pub keep_verified: Option<KeepCount>,
    /// The newest N full backups, each with every backup that builds on it (pgBackRest's
    /// `repo-retention-full` of type count, barman's `REDUNDANCY`; issue 30): full chains
    /// counted, not backups.
    pub keep_full: Option<KeepCount>,
    /// Narrows `keep_full` (pgBackRest's `repo-retention-diff`; issue 30): of the chains it
    /// keeps, only the newest N differentials (fulls counting as differentials) stay, each
    /// with the incrementals built on it. Not a rule: it keeps nothing `keep_full` would not,
    /// and needs `keep_full`.
    pub keep_diff: Option<KeepCount>,
    /// barman's `minimum_redundancy`: whatever the rules say, the newest N completed backups
    /// (with what they need) stay, and no user's delete goes below N. A floor, not a rule.
    pub minimum_redundancy: Option<NonZeroU32>,
    /// Point-in-time recovery from the newest N kept full backups only (pgBackRest's
    /// `repo-retention-archive` of type full; issue 30): the archive keeps every segment from
    /// the oldest of them on, and of each older kept backup only its own range, so those are
    /// restorable to their own end. Unset: from every kept full. Not a rule: it keeps no backup.
    pub pitr_full: Option<NonZeroU32>,
    /// How long a failed backup's partial artifacts are left alone. Not a rule.
    pub failed_grace: GracePeriod,
    /// Keep ancestors as they are, or ask the executor to merge them (Trilio). Not a rule.
    pub chain_mode: ChainMode,
}

/// The largest number of tag lists a policy may have (they are tracked as a bit set).
pub const MAX_TAG_LISTS: usize = 64;

impl Policy {
    /// What each duration written with `m` means, one sentence per field: in a policy `m` is
    /// months (restic's and the seeds' unit), while a flag such as `--jitter 15m` reads it as
    /// minutes. A value a reader can take two ways is never taken one way in silence (issue
    /// 26): the scheduler returns these as warnings on create and update, `describe` shows
    /// them. Empty when no duration uses months.
    pub fn month_readings(&self) -> Vec<String> {
        let mut readings = Vec::new();
        let within = [
            ("keep_within", &self.keep_within),
            ("keep_within_hourly", &self.keep_within_hourly),
            ("keep_within_daily", &self.keep_within_daily),
            ("keep_within_weekly", &self.keep_within_weekly),
            ("keep_within_monthly", &self.keep_within_monthly),
            ("keep_within_yearly", &self.keep_within_yearly),
        ];
        for (field, duration) in within {
            if let Some(duration) = duration.as_ref().filter(|d| d.months > 0) {
                readings.push(format!(
                    "{field} \"{duration}\" counts {} calendar month{} (in a policy m and mo are \
                     months; keep_within has no minutes)",
                    duration.months,
                    if duration.months == 1 { "" } else { "s" }
                ));
            }
        }
        if let Some(window) = self
            .recovery_window
            .as_ref()
            .filter(|w| w.unit == WindowUnit::Months)
        {
            let months = window.amount.get();
            readings.push(format!(
                "recovery_window \"{window}\" is {months} month{} of 30 days ({} days; in a policy \
                 m and mo are months, minutes are written \"{months}min\")",
                if months == 1 { "" } else { "s" },
                window.seconds() / 86_400
            ));
        }
        readings
    }

    /// Parses and validates the policy JSON of issue 3.
    pub fn from_json(text: &str) -> Result<Policy, PolicyError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| PolicyError::Syntax(error.to_string()))?;
        Policy::try_from(value)
    }

    /// Keep the newest `n` completed backups. `n = 0` gives a policy without a rule.
    pub fn keep_last(n: u32) -> Policy {
        Policy {
            keep_last: NonZeroU32::new(n).map(KeepCount::Limited),
            ..Policy::default()
        }
    }

    /// True when no rule is set: such a policy would delete everything, so it is refused.
    pub fn has_no_rule(&self) -> bool {
        self.counts().iter().all(Option::is_none)
            && self.keep_within.is_none()
            && self.within_buckets().iter().all(Option::is_none)
            && self.keep_tags.is_empty()
            && self.retention_duration.is_none()
            && self.recovery_window.is_none()
            && self.keep_verified.is_none()
            && self.keep_full.is_none()
    }

    /// The count rules in restic's order: last, hourly, daily, weekly, monthly, yearly.
    pub fn counts(&self) -> [Option<KeepCount>; 6] {
        [
            self.keep_last,
            self.keep_hourly,
            self.keep_daily,
            self.keep_weekly,
            self.keep_monthly,
            self.keep_yearly,
        ]
    }

    /// The within-bucket rules in restic's order: hourly, daily, weekly, monthly, yearly.
    pub fn within_buckets(&self) -> [Option<CalendarDuration>; 5] {
        [
            self.keep_within_hourly,
            self.keep_within_daily,
            self.keep_within_weekly,
            self.keep_within_monthly,
            self.keep_within_yearly,
        ]
    }
}

/// A count rule: the newest N periods, or all of them (`-1`, restic's `unlimited`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeepCount {
    Limited(NonZeroU32),
    Unlimited,
}

impl KeepCount {
    /// restic's integer form: N, or -1 for unlimited.
    pub fn as_restic(self) -> i64 {
        match self {
            KeepCount::Limited(n) => i64::from(n.get()),
            KeepCount::Unlimited => -1,
        }
    }

    /// How many it keeps: N, or every one.
    pub fn limit(self) -> usize {
        match self {
            KeepCount::Limited(n) => n.get() as usize,
            KeepCount::Unlimited => usize::MAX,
        }
    }
}

/// One AND-list of `keep_tags`. Never empty (an empty list would match every backup).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TagList(Vec<String>);

impl TagList {
    pub fn new(tags: Vec<String>) -> Result<TagList, PolicyError> {
        if tags.is_empty() {
            return Err(field_error(
                "keep_tags",
                "a tag list is empty and would match every backup; use [\"\"] for untagged backups",
            ));
        }
        Ok(TagList(tags))
    }

    pub fn tags(&self) -> &[String] {
        &self.0
    }

    /// restic's `HasTags`: every tag present, where the tag `""` matches a backup with no tags.
    pub fn matches(&self, backup_tags: &[String]) -> bool {
        for tag in &self.0 {
            if tag.is_empty() && backup_tags.is_empty() {
                return true;
            }
            if !backup_tags.iter().any(|backup_tag| backup_tag == tag) {
                return false;
            }
        }
        true
    }
}

impl fmt::Display for TagList {
    /// restic's rendering: `[a, b]`, and `[]` for `[""]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

/// Karbor's `retention_duration`: whole days, at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetentionDays(pub NonZeroU32);

impl RetentionDays {
    pub fn as_delta(self) -> TimeDelta {
        TimeDelta::days(i64::from(self.0.get()))
    }
}

impl fmt::Display for RetentionDays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}d", self.0)
    }
}

/// `<n>d`, `<n>w` or `<n>m`, a month being 30 days (cloudnative-mysql); also `<n>h`, `<n>min`
/// and `<n>s` (as `failed_grace` writes them), for clusters whose point-in-time promise is
/// shorter than a day and for tests that must see a window end within minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecoveryWindow {
    pub amount: NonZeroU32,
    pub unit: WindowUnit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowUnit {
    Seconds,
    Minutes,
    Hours,
    Days,
    Weeks,
    Months,
}

impl RecoveryWindow {
    pub fn parse(text: &str) -> Result<RecoveryWindow, PolicyError> {
        let bad = || {
            field_error(
                "recovery_window",
                format!(
                    "expected <n>d, <n>w or <n>mo (also <n>m; a month is 30 days), or <n>h, <n>min \
                     or <n>s, got {text:?}"
                ),
            )
        };
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let unit = match unit {
            "s" => WindowUnit::Seconds,
            "min" => WindowUnit::Minutes,
            "h" => WindowUnit::Hours,
            "d" => WindowUnit::Days,
            "w" => WindowUnit::Weeks,
            "m" | "mo" => WindowUnit::Months,
            _ => return Err(bad()),
        };
        if digits.is_empty() {
            return Err(bad());
        }
        let amount: u32 = digits
            .parse()
            .map_err(|_| field_error("recovery_window", format!("number too large in {text:?}")))?;
        let amount = NonZeroU32::new(amount).ok_or_else(|| {
            field_error(
                "recovery_window",
                format!("window {text:?} is zero; leave the rule out instead"),
            )
        })?;
        Ok(RecoveryWindow { amount, unit })
    }

    /// The window in seconds.
    pub fn seconds(self) -> i64 {
        let per_unit = match self.unit {
            WindowUnit::Seconds => 1,
            WindowUnit::Minutes => 60,
            WindowUnit::Hours => 3_600,
            WindowUnit::Days => 86_400,
            WindowUnit::Weeks => 7 * 86_400,
            WindowUnit::Months => 30 * 86_400,
        };
        i64::from(self.amount.get()) * per_unit
    }

    pub fn as_delta(self) -> TimeDelta {
        TimeDelta::seconds(self.seconds())
    }
}

impl fmt::Display for RecoveryWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            WindowUnit::Seconds => "s",
            WindowUnit::Minutes => "min",
            WindowUnit::Hours => "h",
            WindowUnit::Days => "d",
            WindowUnit::Weeks => "w",
            WindowUnit::Months => "m",
        };
        write!(f, "{}{unit}", self.amount)
    }
}

/// How long a failed backup is left alone: `<n>s`, `<n>min`, `<n>h` or `<n>d` (default `1h`),
/// or `never` (barman never deletes a FAILED backup; issue 30). `m` is refused because the
/// other durations of a policy read it as months.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GracePeriod {
    pub amount: u32,
    pub unit: GraceUnit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GraceUnit {
    Seconds,
    Minutes,
    Hours,
    Days,
    /// A failed backup is never deleted by retention (`never`; the amount is 0).
    Never,
}

impl Default for GracePeriod {
    fn default() -> Self {
        GracePeriod {
            amount: 1,
            unit: GraceUnit::Hours,
        }
    }
}

impl GracePeriod {
    /// Retention never deletes a failed backup.
    pub const NEVER: GracePeriod = GracePeriod {
        amount: 0,
        unit: GraceUnit::Never,
    };

    pub fn parse(text: &str) -> Result<GracePeriod, PolicyError> {
        let bad = || {
            field_error(
                "failed_grace",
                format!("expected <n>s, <n>min, <n>h, <n>d or never, got {text:?}"),
            )
        };
        if text == "never" {
            return Ok(GracePeriod::NEVER);
        }
        let n_digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let (digits, unit) = text.split_at(n_digits);
        let unit = match unit {
            "s" => GraceUnit::Seconds,
            "min" => GraceUnit::Minutes,
            "h" => GraceUnit::Hours,
            "d" => GraceUnit::Days,
            "m" => {
                return Err(field_error(
                    "failed_grace",
                    format!("unit \"m\" in {text:?} is ambiguous; write min for minutes"),
                ))
            }
            _ => return Err(bad()),
        };
        if digits.is_empty() {
            return Err(bad());
        }
        let amount = digits
            .parse()
            .map_err(|_| field_error("failed_grace", format!("number too large in {text:?}")))?;
        Ok(GracePeriod { amount, unit })
    }

    pub fn as_delta(self) -> TimeDelta {
        let amount = i64::from(self.amount);
        match self.unit {
            GraceUnit::Seconds => TimeDelta::seconds(amount),
            GraceUnit::Minutes => TimeDelta::minutes(amount),
            GraceUnit::Hours => TimeDelta::hours(amount),
            GraceUnit::Days => TimeDelta::days(amount),
            GraceUnit::Never => TimeDelta::MAX,
        }
    }

    pub fn is_never(self) -> bool {
        self.unit == GraceUnit::Never
    }
}

impl fmt::Display for GracePeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            GraceUnit::Seconds => "s",
            GraceUnit::Minutes => "min",
            GraceUnit::Hours => "h",
            GraceUnit::Days => "d",
            GraceUnit::Never => return f.write_str("never"),
        };
        write!(f, "{}{unit}", self.amount)
    }
}

/// What happens to the ancestors of a kept incremental that no rule keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChainMode {
    /// Keep them, with the reason `needed by <id>`.
    #[default]
    Keep,
    /// Ask the executor to merge them into the oldest kept backup of the chain (Trilio's
    /// synthetic full); they stay until the merge is reported.
    Merge,
}

/// Why a policy was refused. Messages are lowercase and start with the field they are about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Not JSON, not an object, or an unknown key (serde names the key).
    #[error("policy is not valid: {0}")]
    Syntax(String),
    #[error("{field}: {message}")]
    Field {
        field: &'static str,
        message: String,
    },
    #[error("policy has no retention rule; a policy without rules would delete every backup")]
    NoRule,
}

impl PolicyError {
    /// A bad policy stays bad: retrying the same input gives the same error.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

fn field_error(field: &'static str, message: impl Into<String>) -> PolicyError {
    PolicyError::Field {
        field,
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_said_wherever_m_is_written() {
        let policy =
            Policy::from_json(r#"{"recovery_window": "15m", "keep_within": "1y2m"}"#).unwrap();
        let readings = policy.month_readings();
        assert_eq!(readings.len(), 2, "{readings:?}");
        assert!(readings[0].contains("keep_within \"1y2m\" counts 2 calendar months"));
        assert!(
            readings[1].contains("15 months of 30 days (450 days"),
            "{readings:?}"
        );
        assert!(readings[1].contains("\"15min\""), "{readings:?}");
        let plain = Policy::from_json(r#"{"recovery_window": "15min", "keep_within": "7d"}"#);
        assert!(plain.unwrap().month_readings().is_empty());
    }

    #[test]
    fn round_trips_through_its_own_json() {
        let text = r#"{"keep_last": 3, "keep_daily": -1, "keep_within": "1y1d1m",
            "keep_tags": [["a", "b"], [""]], "retention_duration": "10",
            "recovery_window": "4w", "failed_grace": "30min", "chain_mode": "merge"}"#;
        let policy = Policy::from_json(text).unwrap();
        let json = serde_json::to_string(&policy).unwrap();
        let again: Policy = serde_json::from_str(&json).unwrap();
        assert_eq!(policy, again);
        assert!(json.contains("\"keep_within\":\"1y1m1d\""), "{json}");
    }

    #[test]
    fn max_backups_is_keep_last() {
        let policy = Policy::from_json(r#"{"max_backups": "3"}"#).unwrap();
        assert_eq!(policy, Policy::keep_last(3));
    }

    #[test]
    fn recovery_windows_in_every_unit() {
        for (text, seconds) in [
            ("90s", 90),
            ("15min", 900),
            ("48h", 172_800),
            ("30d", 2_592_000),
            ("4w", 2_419_200),
            ("1m", 2_592_000),
        ] {
            let window = RecoveryWindow::parse(text).unwrap();
            assert_eq!(window.seconds(), seconds, "{text}");
            assert_eq!(window.to_string(), text);
        }
        for bad in [
            "", "d", "10", "10 s", "10mins", "10sec", "1y", "+1d", "-1h", "1.5h",
        ] {
            let err = RecoveryWindow::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains("expected <n>d, <n>w or <n>m"),
                "{bad:?}: {err}"
            );
        }
    }
}
