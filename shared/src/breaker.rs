//! What surrounds the circuit breaker's pure judgement (`sexton_retention::breaker`): a
//! schedule's `breaker` block as users write it (checked at the door; the types are
//! `sexton_model::breaker`, re-exported here), a group's limits resolved from its schedules and
//! the server's defaults, and the approval a person's `sexton retention approve` stores in the
//! `sexton-breaker` bucket for the held run it lets through.
//!
//! Resolving limits needs the schedule arithmetic (how long a schedule's interval is), which the
//! retention crate must not depend on; so it lives here, and stays pure: `now` is a parameter.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_retention::breaker::{Approval, BreakerLimits, Trip};

use crate::{
    audit::Actor,
    config::BreakerConfig,
    names::{ClusterName, PlanName},
    records::ScheduleRecord,
};

pub use sexton_model::breaker::{BreakerSpec, DeleteCount, DeleteFraction, StaleAfter};

/// How many upcoming ticks [`schedule_interval`] looks at.
const INTERVAL_TICKS: usize = 16;

/// The longest gap between a schedule's next runs (so a weekday schedule's weekend is not taken
/// for an outage), or `None` when its spec has no runs or does not parse.
pub fn schedule_interval(
    schedule: &ScheduleRecord,
    now: DateTime<Utc>,
) -> Option<chrono::Duration> {
    let timing = sexton_schedule::Timing::new(&sexton_schedule::TimingSpec {
        name: schedule.name.as_str(),
        cron: &schedule.cron,
        jitter: None,
        exclude: &[],
        on_blackout: sexton_schedule::OnBlackout::Skip,
    })
    .ok()?;
    let ticks = timing.cron().upcoming(now, INTERVAL_TICKS);
    ticks.windows(2).map(|pair| pair[1] - pair[0]).max()
}

/// The limits a group is judged by: among its schedules that ask for the breaker (their own
/// `enabled`, else the server's), the strictest share and count; the shortest staleness among
/// the ones not paused (a paused schedule takes no backups on purpose, so its group's newest
/// backup ages without anything failing). No schedule asking for it: [`BreakerLimits::OFF`].
pub fn group_limits(
    schedules: &[&ScheduleRecord],
    defaults: &BreakerConfig,
    now: DateTime<Utc>,
) -> BreakerLimits {
    let mut limits = BreakerLimits::OFF;
    let mut any = false;
    for schedule in schedules {
        let spec = schedule.breaker.clone().unwrap_or_default();
        if !spec.enabled.unwrap_or(defaults.enabled) {
            continue;
        }
        any = true;
        let fraction = spec
            .max_delete_fraction
            .map_or(defaults.max_delete_fraction, DeleteFraction::get);
        limits.max_delete_fraction = Some(
            limits
                .max_delete_fraction
                .map_or(fraction, |f| f.min(fraction)),
        );
        let count = spec
            .max_delete_count
            .map_or(defaults.max_delete_count, DeleteCount::get);
        limits.max_delete_count = Some(limits.max_delete_count.map_or(count, |c| c.min(count)));
        if schedule.paused {
            continue;
        }
        let stale = match spec.stale_after {
            Some(StaleAfter::Off) => None,
            Some(StaleAfter::After(span)) => Some(span.delta()),
            None if defaults.stale_after_intervals == 0 => None,
            None => schedule_interval(schedule, now)
                .map(|interval| interval * defaults.stale_after_intervals as i32),
        };
        if let Some(stale) = stale {
            limits.stale_after = Some(limits.stale_after.map_or(stale, |s| s.min(stale)));
        }
    }
    if any {
        limits.min_backups = defaults.min_backups;
    }
    limits
}

/// `sexton retention approve`'s record in the `sexton-breaker` bucket (key
/// [`approval_key`]): one held run of one group may go, once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ApprovalRecord {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub plan: PlanName,
    #[serde(flatten)]
    pub approval: Approval,
    /// Why the run was held when it was approved.
    #[serde(default)]
    pub trips: Vec<Trip>,
    #[serde(default)]
    pub by: Actor,
}

fn v1() -> u32 {
    crate::records::RECORD_SCHEMA_VERSION
}

/// The bucket key of a group's approval.
pub fn approval_key(cluster: &ClusterName, plan: &PlanName) -> String {
    format!("{cluster}.{plan}")
}

/// The key of the approval of a held plan at `location` (issue 28: the plan of the group's
/// copies there), or at primary ([`approval_key`]) for `None`. Names hold no dots, so the
/// two never meet.
pub fn approval_key_at(
    cluster: &ClusterName,
    plan: &PlanName,
    location: Option<&crate::names::LocationName>,
) -> String {
    match location {
        None => approval_key(cluster, plan),
        Some(location) => format!("{cluster}.{plan}.at.{location}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(json: serde_json::Value) -> ScheduleRecord {
        let mut base = serde_json::json!({
            "name": "s", "cluster": "c1", "plan": "p", "cron": "@daily",
            "policy": {"keep_last": 3}, "created_at": "2026-01-01T00:00:00Z",
        });
        base.as_object_mut()
            .unwrap()
            .extend(json.as_object().unwrap().clone());
        serde_json::from_value(base).unwrap()
    }

    fn check(schedules: &[serde_json::Value], expected: BreakerLimits) {
        let now: DateTime<Utc> = "2026-03-02T12:00:00Z".parse().unwrap();
        let records: Vec<ScheduleRecord> = schedules.iter().cloned().map(schedule).collect();
        let refs: Vec<&ScheduleRecord> = records.iter().collect();
        assert_eq!(
            group_limits(&refs, &BreakerConfig::default(), now),
            expected,
            "{schedules:?}"
        );
    }

    #[test]
    fn a_group_takes_the_strictest_limits_of_its_schedules() {
        use serde_json::json;
        let hours = chrono::Duration::hours;
        let on = |fraction, count, stale| BreakerLimits {
            max_delete_fraction: Some(fraction),
            min_backups: 10,
            max_delete_count: Some(count),
            stale_after: stale,
            recovery_window: None,
        };
        check(&[json!({})], on(0.5, 1000, Some(hours(72))));
        check(
            &[json!({"cron": "@every 6h"})],
            on(0.5, 1000, Some(hours(18))),
        );
        // A weekday schedule's longest gap is the weekend.
        check(
            &[json!({"cron": "0 3 * * 1-5"})],
            on(0.5, 1000, Some(hours(216))),
        );
        check(&[json!({"paused": true})], on(0.5, 1000, None));
        check(
            &[json!({"breaker": {"max_delete_fraction": 0.2, "stale_after": "2d"}})],
            on(0.2, 1000, Some(hours(48))),
        );
        check(
            &[json!({"breaker": {"stale_after": "off", "max_delete_count": 5}})],
            on(0.5, 5, None),
        );
        check(
            &[json!({"breaker": {"enabled": false}})],
            BreakerLimits::OFF,
        );
        check(
            &[
                json!({"breaker": {"enabled": false}}),
                json!({"name": "t", "breaker": {"max_delete_fraction": 0.9}}),
            ],
            on(0.9, 1000, Some(hours(72))),
        );
        check(&[], BreakerLimits::OFF);
    }
}
