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
use sexton_retention::recovery::{restorable, Recovery};

use crate::copies::CopyState;
use crate::names::{LocationName, PlanName};
use crate::objectives::Objectives;
use crate::records::{BackupRecord, ScheduleRecord};

pub use crate::objectives::{ObjectiveCheck, PassedTest, PlaceRecovery};

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
/// everything before the oldest restorable instant and, where the place has a log archive
/// (`with_log`), every gap (or part) after `start`. Without a log nothing between two backups
/// is restorable, and no window of every instant is promised: the window then asks only that
/// the backups reach back to its start (as a retention period does). Nothing restorable at
/// all: the whole span to `now`.
pub fn window_shortfall(
    recovery: &Recovery,
    start: DateTime<Utc>,
    now: DateTime<Utc>,
    with_log: bool,
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
    for gap in recovery.gaps.iter().filter(|_| with_log) {
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

/// Checks `objectives` against a place's recovery value and its newest passed test; `with_log`:
/// the place has a log archive, so a window promises every instant ([`window_shortfall`]).
pub fn check_objectives(
    objectives: &Objectives,
    recovery: &Recovery,
    passed_test: Option<DateTime<Utc>>,
    with_log: bool,
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
        let (short, why) = window_shortfall(recovery, start, now, with_log);
        checks.push(ObjectiveCheck {
            objective: "window".into(),
            target: window.to_string(),
            met: short == 0,
            short_seconds: short,
            // Spans are whole seconds: a gap shorter than one (the log's tail a few
            // milliseconds short of the newest backup's end) misses nothing they can say.
            message: match why.filter(|_| short > 0) {
                None => format!("every instant of the last {window} is restorable, to the second"),
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
    let with_log = !catalog.binlog_segments.is_empty();
    let objectives = objectives
        .map(|o| {
            let passed = passed_test.as_ref().map(|t| t.at);
            check_objectives(o, &recovery, passed, with_log, now)
        })
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

/// The recovery objectives a policy change breaks at one place (issue 47): over the place's
/// `catalog` (its records in the engine's form there), each objective is checked on what the
/// plan of `before` leaves and on what the plan of `after` leaves (`None`: unplanned, everything
/// kept); one missed after the change by more than before is broken, said with both measures.
/// Judged over the backups alone when `catalog` holds no log segments (a place without an
/// archive): a window then narrows only as its oldest point moves.
pub fn objectives_broken(
    catalog: &sexton_retention::Catalog,
    before: Option<&crate::records::Policy>,
    after: Option<&crate::records::Policy>,
    objectives: &Objectives,
    passed_test: Option<DateTime<Utc>>,
    location: &LocationName,
    now: DateTime<Utc>,
) -> Result<Vec<String>, sexton_retention::PlanError> {
    let checks = |policy: Option<&crate::records::Policy>| {
        let left = match policy {
            Some(policy) => {
                let plan = sexton_retention::plan(catalog, policy, now)?;
                sexton_retention::recovery::after_plan(catalog, &plan)
            }
            None => catalog.clone(),
        };
        Ok::<_, sexton_retention::PlanError>(check_objectives(
            objectives,
            &restorable(&left, now),
            passed_test,
            !left.binlog_segments.is_empty(),
            now,
        ))
    };
    let before = checks(before)?;
    let after = checks(after)?;
    Ok(after
        .iter()
        .filter_map(|later| {
            let now_short = before
                .iter()
                .find(|c| c.objective == later.objective)
                .map_or(0, |c| c.short_seconds);
            (later.short_seconds > now_short).then(|| {
                format!(
                    "{} {} at {location}: {} now, missed by {} after the change ({})",
                    later.objective,
                    later.target,
                    if now_short == 0 {
                        "met".to_string()
                    } else {
                        format!("missed by {}", seconds_text(now_short))
                    },
                    seconds_text(later.short_seconds),
                    later.message
                )
            })
        })
        .collect())
}

/// Objectives a policy can never meet, whatever is taken (issue 47): a `window` longer than the
/// longest the policy can keep a backup ([`crate::copies::longest_keep_days`], counted
/// generously, with the schedule's interval between backups when known). Unbounded policies
/// (an unlimited count, tags) can meet any window. Each with why, naming the place.
pub fn unmeetable(
    objectives: &Objectives,
    policy: &crate::records::Policy,
    interval_days: Option<f64>,
    location: &LocationName,
) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(window), Some(longest)) = (
        objectives.window,
        crate::copies::longest_keep_days(policy, interval_days),
    ) {
        let wanted = window.seconds() as f64 / 86_400.0;
        if longest < wanted {
            out.push(format!(
                "window {window} at {location} cannot be met: its policy keeps a backup at \
                 most about {} day(s)",
                (longest * 10.0).round() / 10.0
            ));
        }
    }
    out
}

/// One place's records in the engine's form there (primary: those whose objects are still
/// there; a location: the copies it holds, `BackupRecord::to_engine_at`), without log
/// segments, and the newest restore test that passed there.
pub fn place_catalog(
    records: &[&BackupRecord],
    location: &LocationName,
) -> (sexton_retention::Catalog, Option<PassedTest>) {
    let at = (!location.is_primary()).then_some(location);
    let mut backups = Vec::new();
    let mut passed: Option<PassedTest> = None;
    for record in records {
        let engine = match at {
            Some(name) => record.to_engine_at(name),
            None => record.held_at_primary().then(|| record.to_engine()),
        };
        let Some(engine) = engine else {
            continue;
        };
        backups.push(engine);
        if let Some(when) = passed_test_at(record, at) {
            if passed.as_ref().is_none_or(|p| when > p.at) {
                passed = Some(PassedTest {
                    id: record.id.to_string(),
                    at: when,
                });
            }
        }
    }
    let catalog = sexton_retention::Catalog {
        backups,
        binlog_segments: Vec::new(),
    };
    (catalog, passed)
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
        for plan in &plans {
            if only_plan.is_some_and(|only| only != plan) {
                continue;
            }
            let of_plan: Vec<&BackupRecord> = records
                .iter()
                .copied()
                .filter(|r| r.plan == *plan)
                .collect();
            let (mut catalog, passed) = place_catalog(&of_plan, location);
            catalog.binlog_segments = segments.get(location).cloned().unwrap_or_default();
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
        let checks = check_objectives(&objectives, &value, None, true, now);
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
        let tested = check_objectives(
            &objectives,
            &value,
            Some(at("2026-12-01T12:00:00Z")),
            true,
            now,
        );
        assert!(
            tested
                .iter()
                .find(|c| c.objective == "tested_within")
                .unwrap()
                .met
        );
        // A window older than the oldest point is short by the difference.
        let long: Objectives = serde_json::from_value(json!({"window": "3d"})).unwrap();
        let checks = check_objectives(&long, &value, None, true, now);
        assert_eq!(checks[0].short_seconds, 24 * 3600 + 23 * 3600, "{checks:?}");
        // Without a log the gaps between backups are no promise broken: only the reach counts.
        let reach = check_objectives(&objectives, &value, None, false, now);
        assert!(
            reach.iter().find(|c| c.objective == "window").unwrap().met,
            "{reach:?}"
        );
        let checks = check_objectives(&long, &value, None, false, now);
        assert_eq!(checks[0].short_seconds, 24 * 3600, "{checks:?}");
        // Nothing restorable: every objective missed, the rpo by all of itself.
        let checks = check_objectives(&objectives, &Recovery::default(), None, true, now);
        assert!(checks.iter().all(|c| !c.met), "{checks:?}");
        assert_eq!(checks[0].short_seconds, 7200);
    }

    #[test]
    fn a_window_longer_than_the_policy_can_keep_is_unmeetable() {
        let primary = LocationName::primary();
        let window: Objectives = serde_json::from_value(json!({"window": "30d"})).unwrap();
        let policy = |text: &str| crate::records::Policy::from_json(text).unwrap();
        let short = unmeetable(&window, &policy(r#"{"keep_last": 3}"#), Some(1.0), &primary);
        assert_eq!(short.len(), 1, "{short:?}");
        assert!(
            short[0].contains("window 30d at primary cannot be met"),
            "{short:?}"
        );
        assert!(short[0].contains("about 3 day(s)"), "{short:?}");
        assert!(unmeetable(
            &window,
            &policy(r#"{"keep_daily": 31}"#),
            Some(1.0),
            &primary
        )
        .is_empty());
        assert!(unmeetable(
            &window,
            &policy(r#"{"recovery_window": "30d"}"#),
            Some(1.0),
            &primary
        )
        .is_empty());
        // keep_last without a known interval is unbounded: nothing said.
        assert!(unmeetable(&window, &policy(r#"{"keep_last": 3}"#), None, &primary).is_empty());
        let rpo_only: Objectives = serde_json::from_value(json!({"rpo": "1h"})).unwrap();
        assert!(unmeetable(
            &rpo_only,
            &policy(r#"{"keep_last": 1}"#),
            Some(1.0),
            &primary
        )
        .is_empty());
    }

    #[test]
    fn a_policy_change_that_narrows_the_window_breaks_it_and_says_by_how_much() {
        let now = at("2026-01-10T00:00:00Z");
        let catalog = sexton_retention::Catalog {
            backups: (1..=9)
                .map(|day| {
                    serde_json::from_value(json!({
                        "id": format!("b{day}"), "status": "completed", "kind": "full",
                        "completed_at": format!("2026-01-0{day}T00:00:00Z"),
                    }))
                    .unwrap()
                })
                .collect(),
            binlog_segments: Vec::new(),
        };
        let policy = |text: &str| crate::records::Policy::from_json(text).unwrap();
        let objectives: Objectives = serde_json::from_value(json!({"window": "7d"})).unwrap();
        let primary = LocationName::primary();
        let broken = objectives_broken(
            &catalog,
            Some(&policy(r#"{"keep_last": 9}"#)),
            Some(&policy(r#"{"keep_last": 2}"#)),
            &objectives,
            None,
            &primary,
            now,
        )
        .unwrap();
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert!(broken[0].starts_with("window 7d at primary:"), "{broken:?}");
        assert!(broken[0].contains("missed by"), "{broken:?}");
        // Keeping as much as before (or more) breaks nothing.
        let kept = objectives_broken(
            &catalog,
            Some(&policy(r#"{"keep_last": 2}"#)),
            Some(&policy(r#"{"keep_last": 9}"#)),
            &objectives,
            None,
            &primary,
            now,
        )
        .unwrap();
        assert!(kept.is_empty(), "{kept:?}");
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
