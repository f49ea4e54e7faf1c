//! Recovery objectives (issue 47): what a schedule promises a restore can reach, stated on the
//! schedule (checked at primary) and on each copy rule (checked at its location):
//!
//! ```yaml
//! objectives: {rpo: 1h, window: 30d, tested_within: 7d}
//! copies: [{to: dr, policy: {keep_daily: 14}, objectives: {window: 14d}}]
//! ```
//!
//! - `rpo`: the newest restorable instant there (a backup's end, or the log's tail replayed
//!   from one) is at most this old;
//! - `window`: every instant of the last `window` is restorable there (no gap, and the oldest
//!   restorable instant at or before its start);
//! - `tested_within`: a restore test of a copy there (of a backup at primary) passed within
//!   this long.
//!
//! Spans are written as every schedule setting is (`90s`, `15m`, `1h`, `30d`: `m` is minutes
//! here, as everywhere outside a retention policy). The checks are the recovery value's
//! (`sexton_shared::recovery`); these are the values only.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_retention::recovery::Recovery;
use sexton_schedule::Span;

use crate::names::{LocationName, PlanName};

/// A schedule's (or a copy rule's) recovery objectives. Each is optional; an empty block is
/// refused (say nothing instead).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Objectives {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpo: Option<Span>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Span>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tested_within: Option<Span>,
}

impl Objectives {
    /// `Err` for a block that states nothing.
    pub fn validate(&self) -> Result<(), String> {
        if self.rpo.is_none() && self.window.is_none() && self.tested_within.is_none() {
            return Err(
                "objectives: give at least one of rpo, window, tested_within (or leave the \
                 block out)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The strictest of several blocks, objective by objective (the schedules of one plan
    /// share its backups: each one's promise must hold, so the shortest span of each counts).
    /// `None` when none states anything.
    pub fn strictest<'a>(blocks: impl IntoIterator<Item = &'a Objectives>) -> Option<Objectives> {
        let mut out: Option<Objectives> = None;
        for block in blocks {
            let merged = out.get_or_insert_with(Objectives::default);
            merged.rpo = min(merged.rpo, block.rpo);
            merged.window = min(merged.window, block.window);
            merged.tested_within = min(merged.tested_within, block.tested_within);
        }
        out.filter(|o| o.validate().is_ok())
    }
}

fn min(a: Option<Span>, b: Option<Span>) -> Option<Span> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What one place can restore of one plan's backups, and how that measures up.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlaceRecovery {
    pub location: LocationName,
    pub plan: PlanName,
    pub recovery: Recovery,
    /// The `recovery_window` the policy there promises, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promised_window: Option<String>,
    /// `now` minus the newest restorable instant (the log's tail included), in seconds:
    /// the recovery point age. `None`: nothing is restorable there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_age_seconds: Option<i64>,
    /// The newest restore test that passed there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed_test: Option<PassedTest>,
    /// Each objective stated for the place, checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objectives: Vec<ObjectiveCheck>,
}

/// A restore test that passed at a place.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PassedTest {
    pub id: String,
    pub at: DateTime<Utc>,
}

/// One objective, checked at `now`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ObjectiveCheck {
    /// `rpo`, `window` or `tested_within`.
    pub objective: String,
    /// The objective as written (`1h`).
    pub target: String,
    pub met: bool,
    /// By how many seconds it is missed (0 when met): the recovery point's age beyond the
    /// rpo, the window's unrestorable seconds, the last passed test's age beyond its span.
    pub short_seconds: i64,
    /// What was measured, for a person.
    pub message: String,
}

impl PlaceRecovery {
    /// Whether every objective stated is met (true when none is stated).
    pub fn objectives_met(&self) -> bool {
        self.objectives.iter().all(|check| check.met)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_read_spans_refuse_unknown_fields_and_empty_blocks() {
        let read = |text: &str| serde_json::from_str::<Objectives>(text);
        let o = read(r#"{"rpo": "1h", "window": "30d", "tested_within": "7d"}"#).unwrap();
        assert_eq!(o.rpo, Some(Span::parse("1h").unwrap()));
        assert_eq!(o.window, Some(Span::parse("30d").unwrap()));
        assert!(o.validate().is_ok());
        for bad in [
            r#"{"rpo": "1y"}"#,
            r#"{"rpo": "0s"}"#,
            r#"{"rpo": "soon"}"#,
            r#"{"rpo": 1.5}"#,
            r#"{"rpo": "1h", "rto": "1h"}"#,
            r#"{"window": ["30d"]}"#,
            r#""1h""#,
        ] {
            assert!(read(bad).is_err(), "{bad} read");
        }
        // serde reads a struct from a list too; an empty one says nothing and is refused.
        assert!(read("[]").is_ok_and(|o| o.validate().is_err()));
        let empty = read("{}").unwrap();
        assert!(empty
            .validate()
            .unwrap_err()
            .contains("at least one of rpo, window, tested_within"));
    }

    #[test]
    fn the_strictest_of_several_blocks_is_the_shortest_span_of_each() {
        let a: Objectives = serde_json::from_str(r#"{"rpo": "1h", "window": "7d"}"#).unwrap();
        let b: Objectives =
            serde_json::from_str(r#"{"rpo": "4h", "tested_within": "7d"}"#).unwrap();
        let both = Objectives::strictest([&a, &b]).unwrap();
        assert_eq!(both.rpo, Some(Span::parse("1h").unwrap()));
        assert_eq!(both.window, Some(Span::parse("7d").unwrap()));
        assert_eq!(both.tested_within, Some(Span::parse("7d").unwrap()));
        assert_eq!(Objectives::strictest([]), None);
    }
}
