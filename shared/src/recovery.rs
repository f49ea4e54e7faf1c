//! The recovery value of each place (issue 47): for one cluster and plan at one place
//! (primary, or a location holding copies), what can be restored there
//! ([`sexton_retention::recovery::restorable`] over the place's records and log), how old the
//! newest restorable instant is, what the policy there promises, the newest restore test that
//! passed there, and each recovery objective checked. The retention-worker's metrics, the
//! `recovery.window` API (`sexton recovery window`) and the schedule's `Recoverable` condition
//! read this one judgement.
//!
//! Pure: records, segments and `now` in, values out.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_retention::recovery::{restorable, Recovery};

use crate::copies::CopyState;
use crate::names::{LocationName, PlanName};
use crate::objectives::Objectives;
use crate::records::{BackupRecord, ScheduleRecord};

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

/// The newest restore test that passed for `record` at `location` (`None`: primary): at
/// primary, its history's newest `verified` entry without a location; at a location, the
/// copy's own last test there when it passed.
pub fn passed_test_at(
    record: &BackupRecord,
    location: Option<&LocationName>,
) -> Option<DateTime<Utc>> {
    match location.filter(|name| !name.is_primary()) {
        Some(name) => record
            .copies
            .get(name)
            .and_then(|copy| copy.verification.as_ref())
            .filter(|test| test.outcome == "verified")
            .map(|test| test.at),
        None => record.verification.as_ref().and_then(|verification| {
            verification
                .history
                .iter()
                .filter(|entry| entry.location.is_none() && entry.outcome == "verified")
                .map(|entry| entry.at)
                .max()
        }),
    }
}

/// The seconds of `[start, newest]` that `recovery` cannot restore to, and the first reason:
/// everything before the oldest restorable instant, and every gap (or part) after `start`.
/// Nothing restorable at all: the whole span to `now`.
pub fn window_shortfall(
    recovery: &Recovery,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (i64, Option<String>) {
    let Some(oldest) = recovery.oldest() else {
        return (
            (now - start).num_seconds().max(0),
            Some("nothing is restorable here".into()),
        );
    };
    let mut short = 0;
    let mut why = None;
    if oldest > start {
        short += (oldest - start).num_seconds();
        why = Some(format!(
            "the oldest restorable instant is {}",
            oldest.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ));
    }
    for gap in &recovery.gaps {
        let from = gap.from.max(start);
        if gap.to > from {
            short += (gap.to - from).num_seconds();
            why.get_or_insert_with(|| {
                format!(
                    "nothing restores to {} .. {}: {}",
                    from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    gap.to.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    gap.reason
                )
            });
        }
    }
    (short, why)
}

/// Checks `objectives` against a place's recovery value and its newest passed test.
pub fn check_objectives(
    objectives: &Objectives,
    recovery: &Recovery,
    passed_test: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<ObjectiveCheck> {
    let mut checks = Vec::new();
    let age = recovery.newest().map(|newest| (now - newest).num_seconds());
    if let Some(rpo) = objectives.rpo {
        let limit = rpo.seconds() as i64;
        let (met, short, message) = match age {
            Some(age) => (
                age <= limit,
                (age - limit).max(0),
                format!("the newest restorable instant is {} old", seconds_text(age)),
            ),
            None => (false, limit, "nothing is restorable here".to_string()),
        };
        checks.push(ObjectiveCheck {
            objective: "rpo".into(),
            target: rpo.to_string(),
            met,
            short_seconds: short,
            message,
        });
    }
    if let Some(window) = objectives.window {
        let start = now - window.delta();
        let (short, why) = window_shortfall(recovery, start, now);
        checks.push(ObjectiveCheck {
            objective: "window".into(),
            target: window.to_string(),
            met: short == 0,
            short_seconds: short,
            message: match why {
                None => format!("every instant of the last {window} is restorable"),
                Some(why) => format!(
                    "{} of the last {window} cannot be restored: {why}",
                    seconds_text(short)
                ),
            },
        });
    }
    if let Some(within) = objectives.tested_within {
        let limit = within.seconds() as i64;
        let (met, short, message) = match passed_test {
            Some(at) => {
                let age = (now - at).num_seconds();
                (
                    age <= limit,
                    (age - limit).max(0),
                    format!(
                        "the newest passed restore test is {} old",
                        seconds_text(age)
                    ),
                )
            }
            None => (false, limit, "no restore test has passed here".to_string()),
        };
        checks.push(ObjectiveCheck {
            objective: "tested_within".into(),
            target: within.to_string(),
            met,
            short_seconds: short,
            message,
        });
    }
    checks
}

/// A number of seconds as a person reads it: `45s`, `12m`, `3h`, `2d 4h`.
pub fn seconds_text(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7_200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3_600),
        s => format!("{}d {}h", s / 86_400, (s % 86_400) / 3_600),
    }
}

/// One place's recovery value over its engine catalog (its records in the engine's form there,
/// and the log segments of its own archive).
pub fn judge_place(
    location: &LocationName,
    plan: &PlanName,
    catalog: &sexton_retention::Catalog,
    promised_window: Option<String>,
    objectives: Option<&Objectives>,
    passed_test: Option<PassedTest>,
    now: DateTime<Utc>,
) -> PlaceRecovery {
    let recovery = restorable(catalog, now);
    let objectives = objectives
        .map(|o| check_objectives(o, &recovery, passed_test.as_ref().map(|t| t.at), now))
        .unwrap_or_default();
    PlaceRecovery {
        location: location.clone(),
        plan: plan.clone(),
        point_age_seconds: recovery.newest().map(|newest| (now - newest).num_seconds()),
        recovery,
        promised_window,
        passed_test,
        objectives,
    }
}

/// The objectives stated for `plan` at `location`: the schedules' own at primary, their copy
/// rules' to that location elsewhere; the strictest when several schedules share the plan.
pub fn objectives_for(
    schedules: &[ScheduleRecord],
    plan: &PlanName,
    location: &LocationName,
) -> Option<Objectives> {
    let of_plan = schedules.iter().filter(|s| s.plan == *plan);
    if location.is_primary() {
        Objectives::strictest(of_plan.filter_map(|s| s.objectives.as_ref()))
    } else {
        Objectives::strictest(
            of_plan
                .flat_map(|s| s.copies.iter())
                .filter(|rule| rule.to == *location)
                .filter_map(|rule| rule.objectives.as_ref()),
        )
    }
}

/// The `recovery_window` the policy of `plan` promises at `location`, as written; `None` when
/// it has none, or the plan's schedules do not agree on one policy there.
pub fn promised_window(
    schedules: &[ScheduleRecord],
    plan: &PlanName,
    location: &LocationName,
) -> Option<String> {
    let policy = if location.is_primary() {
        let policies = crate::planning::group_policies(schedules);
        crate::planning::policy_for(&policies, plan).ok().cloned()
    } else {
        crate::copies::copy_policy(
            schedules
                .iter()
                .filter(|s| s.plan == *plan)
                .flat_map(|s| s.copies.iter()),
            location,
        )
        .ok()
        .cloned()
    };
    policy.and_then(|p| p.recovery_window.map(|w| w.to_string()))
}

/// Every place's recovery value for a cluster's `records` (or those of `only_plan`; one
/// `only_location`): primary over the records whose objects are still there, each location over
/// the copies it holds, by plan. `segments` holds each place's log archive (absent: none).
pub fn places(
    records: &[&BackupRecord],
    schedules: &[ScheduleRecord],
    segments: &BTreeMap<LocationName, Vec<sexton_retention::BinlogSegment>>,
    only_plan: Option<&PlanName>,
    only_location: Option<&LocationName>,
    now: DateTime<Utc>,
) -> Vec<PlaceRecovery> {
    let mut locations: Vec<LocationName> = vec![LocationName::primary()];
    for record in records {
        for (name, copy) in &record.copies {
            if copy.state != CopyState::Skipped && !locations.contains(name) {
                locations.push(name.clone());
            }
        }
    }
    for rule in schedules.iter().flat_map(|s| s.copies.iter()) {
        if !locations.contains(&rule.to) {
            locations.push(rule.to.clone());
        }
    }
    locations.sort_by_key(|name| (!name.is_primary(), name.to_string()));
    let mut plans: Vec<PlanName> = records.iter().map(|r| r.plan.clone()).collect();
    plans.extend(schedules.iter().map(|s| s.plan.clone()));
    plans.sort();
    plans.dedup();
    let mut out = Vec::new();
    for location in &locations {
        if only_location.is_some_and(|only| only != location) {
            continue;
        }
        let at = (!location.is_primary()).then_some(location);
        for plan in &plans {
            if only_plan.is_some_and(|only| only != plan) {
                continue;
            }
            let of_plan = records.iter().filter(|r| r.plan == *plan);
            let mut catalog = sexton_retention::Catalog {
                backups: Vec::new(),
                binlog_segments: segments.get(location).cloned().unwrap_or_default(),
            };
            let mut passed: Option<PassedTest> = None;
            for record in of_plan {
                let engine = match at {
                    Some(name) => record.to_engine_at(name),
                    None => record.held_at_primary().then(|| record.to_engine()),
                };
                let Some(engine) = engine else {
                    continue;
                };
                catalog.backups.push(engine);
                if let Some(when) = passed_test_at(record, at) {
                    if passed.as_ref().is_none_or(|p| when > p.at) {
                        passed = Some(PassedTest {
                            id: record.id.to_string(),
                            at: when,
                        });
                    }
                }
            }
            let objectives = objectives_for(schedules, plan, location);
            let rule_here = location.is_primary()
                || schedules
                    .iter()
                    .filter(|s| s.plan == *plan)
                    .flat_map(|s| s.copies.iter())
                    .any(|rule| rule.to == *location);
            if catalog.backups.is_empty() && !rule_here {
                continue;
            }
            out.push(judge_place(
                location,
                plan,
                &catalog,
                promised_window(schedules, plan, location),
                objectives.as_ref(),
                passed,
                now,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn recovery(points: &[&str], gaps: &[(&str, &str)]) -> Recovery {
        serde_json::from_value(json!({
            "points": points.iter().map(|t| json!({"id": t, "at": t, "chain": [t]})).collect::<Vec<_>>(),
            "intervals": [],
            "gaps": gaps.iter().map(|(f, t)| json!({"from": f, "to": t, "reason": "no segment"})).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn objectives_are_measured_against_the_recovery_value() {
        let now = at("2026-12-07T12:00:00Z");
        let value = recovery(
            &[
                "2026-12-05T12:00:00Z",
                "2026-12-06T12:00:00Z",
                "2026-12-07T11:00:00Z",
            ],
            &[("2026-12-06T12:00:00Z", "2026-12-07T11:00:00Z")],
        );
        let objectives: Objectives =
            serde_json::from_value(json!({"rpo": "2h", "window": "1d", "tested_within": "7d"}))
                .unwrap();
        let checks = check_objectives(&objectives, &value, None, now);
        let by: BTreeMap<&str, &ObjectiveCheck> =
            checks.iter().map(|c| (c.objective.as_str(), c)).collect();
        assert!(by["rpo"].met, "{checks:?}");
        assert!(!by["window"].met);
        // The last day: from 12:00 yesterday the gap runs to 11:00 today.
        assert_eq!(by["window"].short_seconds, 23 * 3600);
        assert!(by["window"].message.contains("no segment"), "{checks:?}");
        assert!(!by["tested_within"].met);
        assert!(by["tested_within"]
            .message
            .contains("no restore test has passed"));
        let tested = check_objectives(&objectives, &value, Some(at("2026-12-01T12:00:00Z")), now);
        assert!(
            tested
                .iter()
                .find(|c| c.objective == "tested_within")
                .unwrap()
                .met
        );
        // A window older than the oldest point is short by the difference.
        let long: Objectives = serde_json::from_value(json!({"window": "3d"})).unwrap();
        let checks = check_objectives(&long, &value, None, now);
        assert_eq!(checks[0].short_seconds, 24 * 3600 + 23 * 3600, "{checks:?}");
        // Nothing restorable: every objective missed, the rpo by all of itself.
        let checks = check_objectives(&objectives, &Recovery::default(), None, now);
        assert!(checks.iter().all(|c| !c.met), "{checks:?}");
        assert_eq!(checks[0].short_seconds, 7200);
    }

    #[test]
    fn each_place_is_judged_over_what_it_holds() {
        let now = at("2026-01-01T12:00:00Z");
        let record = |id: &str, hour: u32| -> BackupRecord {
            serde_json::from_value(json!({
                "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
                "backup_name": "s", "kind": "full", "status": "completed",
                "completed_at": format!("2026-01-01T{hour:02}:00:00Z"),
                "started_at": format!("2026-01-01T{hour:02}:00:00Z"),
                "artifacts": [format!("b/c1/s/{id}/data")],
            }))
            .unwrap()
        };
        let mut old = record("old", 1);
        old.status = crate::records::BackupStatus::Deleting;
        old.primary_deleted_at = Some(at("2026-01-01T06:00:00Z"));
        old.copies.insert(
            LocationName::new("dr").unwrap(),
            serde_json::from_value(json!({
                "state": "copied", "copied_at": "2026-01-01T02:00:00Z",
                "verification": {"request_id": "r", "outcome": "verified",
                                 "at": "2026-01-01T03:00:00Z"},
            }))
            .unwrap(),
        );
        let new = record("new", 10);
        let schedule: ScheduleRecord = serde_json::from_value(json!({
            "name": "s", "cluster": "c1", "plan": "p", "cron": "@daily",
            "policy": {"keep_last": 1}, "created_at": "2026-01-01T00:00:00Z",
            "objectives": {"rpo": "1h"},
            "copies": [{"to": "dr", "policy": {"keep_last": 5},
                        "objectives": {"tested_within": "1d"}}],
        }))
        .unwrap();
        let places = places(
            &[&old, &new],
            std::slice::from_ref(&schedule),
            &BTreeMap::new(),
            None,
            None,
            now,
        );
        let names: Vec<(&str, Vec<&str>)> = places
            .iter()
            .map(|p| {
                (
                    p.location.as_str(),
                    p.recovery.points.iter().map(|pt| pt.id.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(names, [("primary", vec!["new"]), ("dr", vec!["old"])]);
        assert_eq!(places[0].point_age_seconds, Some(2 * 3600));
        assert!(!places[0].objectives_met(), "rpo 1h, the newest 2h old");
        assert!(places[1].objectives_met(), "{:?}", places[1].objectives);
        assert_eq!(places[1].passed_test.as_ref().unwrap().id, "old");
    }
}
