//! The due-backups this fleet issued (issue 29), remembered so that intake can judge a report
//! against the very due it answers: a compromised executor's key can publish reports with any
//! times, but it cannot make Sexton have asked for a backup earlier than it did.
//!
//! Every due-backup is remembered (`sexton-dues`, key `<cluster>.<backup id>`) before it is
//! published; an entry expires after [`sexton_shared::topology::DUES_REMEMBERED`]. [`judge`]
//! is the decision, pure.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_model::{
    names::{BackupId, ClusterName, PlanName, ScheduleName},
    wire::Report,
};

/// How far an executor's clock may be behind the scheduler's: a backup may claim to have
/// started this long before it was asked for.
pub const CLOCK_SKEW: chrono::Duration = chrono::Duration::minutes(5);

/// One due-backup as it was issued.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IssuedDue {
    pub schedule: ScheduleName,
    pub plan: PlanName,
    pub tick: DateTime<Utc>,
    pub fired_at: DateTime<Utc>,
}

pub fn key(cluster: &ClusterName, backup_id: &BackupId) -> String {
    format!("{cluster}.{backup_id}")
}

/// Remembers `due` as issued for `backup_id` of `cluster`. Called before the due-backup is
/// published: a due nobody remembers is never sent.
pub async fn remember(
    bucket: &async_nats::jetstream::kv::Store,
    cluster: &ClusterName,
    backup_id: &BackupId,
    due: &IssuedDue,
) -> anyhow::Result<()> {
    let body = serde_json::to_vec(due)?;
    bucket
        .put(key(cluster, backup_id), body.into())
        .await
        .map_err(|err| anyhow::anyhow!("remembering the due-backup {backup_id}: {err}"))?;
    Ok(())
}

/// The due-backup `backup_id` of `cluster` answers, if this fleet issued one (and remembers
/// it). `Err` only when the bucket cannot be read (the report waits for it). An entry that
/// does not decode (only the scheduler writes there) is logged and judged as none: a report
/// never waits on a value that will not change.
pub async fn recall(
    bucket: &async_nats::jetstream::kv::Store,
    cluster: &ClusterName,
    backup_id: &BackupId,
) -> anyhow::Result<Option<IssuedDue>> {
    let Some(body) = bucket
        .get(key(cluster, backup_id))
        .await
        .map_err(|err| anyhow::anyhow!("reading the due-backup {backup_id}: {err}"))?
    else {
        return Ok(None);
    };
    match serde_json::from_slice(&body) {
        Ok(due) => Ok(Some(due)),
        Err(err) => {
            tracing::warn!(%cluster, backup = %backup_id, error = %err, "the remembered due-backup is malformed; the report is judged as answering none");
            Ok(None)
        }
    }
}

/// Why a completed report is refused against the due-backup it answers (`due`, `None` when
/// this fleet issued none under its id), if it is:
///
/// - it claims another schedule, plan or tick than the due asked for;
/// - it claims to have started or completed before the due was issued (beyond
///   [`CLOCK_SKEW`]): a backdated backup could become the pick of a past day, week or month
///   and push a real one out (restic#22057);
/// - it answers no due at all while `require_due` is set.
///
/// A merge keeps its backup's old times and is not judged here.
pub fn judge(report: &Report, due: Option<&IssuedDue>, require_due: bool) -> Option<String> {
    if report.merge.is_some() {
        return None;
    }
    let Some(due) = due else {
        return require_due.then(|| {
            format!(
                "backup {} answers no due-backup this fleet issued (or one older than it \
                 remembers), and scheduler.require_due is set",
                report.backup_id
            )
        });
    };
    let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    if report.schedule.as_ref().is_some_and(|s| *s != due.schedule) || report.plan != due.plan {
        return Some(format!(
            "backup {} answers the due-backup of schedule {} (plan {}), but claims schedule {} \
             (plan {})",
            report.backup_id,
            due.schedule,
            due.plan,
            report.schedule.as_ref().map_or("none", |s| s.as_str()),
            report.plan
        ));
    }
    if let Some(tick) = report.tick.filter(|tick| *tick != due.tick) {
        return Some(format!(
            "backup {} claims tick {}, but its due-backup was for {}",
            report.backup_id,
            at(tick),
            at(due.tick)
        ));
    }
    let earliest = due.fired_at - CLOCK_SKEW;
    for (what, claimed) in [
        ("started_at", report.started_at),
        ("completed_at", report.completed_at),
    ] {
        let Some(claimed) = claimed.map(|t| t.with_timezone(&Utc)) else {
            continue;
        };
        if claimed < earliest {
            return Some(format!(
                "{what} {} is before Sexton asked for backup {} ({}): a backdated report is \
                 not counted",
                at(claimed),
                report.backup_id,
                at(due.fired_at)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due() -> IssuedDue {
        IssuedDue {
            schedule: "nightly".parse().unwrap(),
            plan: "base".parse().unwrap(),
            tick: "2026-11-28T03:00:00Z".parse().unwrap(),
            fired_at: "2026-11-28T03:00:07Z".parse().unwrap(),
        }
    }

    fn report(started: &str, completed: &str) -> Report {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "backup_id": "nightly-20261128030007", "cluster": "db1",
            "plan": "base", "schedule": "nightly", "backup_name": "nightly",
            "status": "completed", "kind": "full",
            "started_at": started, "completed_at": completed,
            "tick": "2026-11-28T03:00:00Z",
            "artifacts": ["backups/db1/nightly/nightly-20261128030007/metadata.json"],
        }))
        .unwrap()
    }

    #[test]
    fn a_report_in_time_for_its_due_passes() {
        let honest = report("2026-11-28T03:00:08Z", "2026-11-28T03:40:00Z");
        assert_eq!(judge(&honest, Some(&due()), true), None);
        // An executor's clock a few minutes behind is not an attack.
        let behind = report("2026-11-28T02:57:00Z", "2026-11-28T03:37:00Z");
        assert_eq!(judge(&behind, Some(&due()), false), None);
    }

    #[test]
    fn a_backdated_report_is_refused_against_its_due() {
        let backdated = report("2026-11-27T23:50:00Z", "2026-11-27T23:59:59Z");
        let why = judge(&backdated, Some(&due()), false).unwrap();
        assert!(
            why.contains("started_at 2026-11-27T23:50:00Z is before Sexton asked")
                && why.contains("2026-11-28T03:00:07Z"),
            "{why}"
        );
        let completed_only = report("2026-11-28T03:00:08Z", "2026-11-28T02:00:00Z");
        assert!(judge(&completed_only, Some(&due()), false)
            .unwrap()
            .contains("completed_at"));
    }

    #[test]
    fn a_report_claiming_another_schedule_plan_or_tick_is_refused() {
        let mut other = report("2026-11-28T03:00:08Z", "2026-11-28T03:40:00Z");
        other.plan = "other".parse().unwrap();
        assert!(judge(&other, Some(&due()), false)
            .unwrap()
            .contains("claims schedule nightly (plan other)"));
        let mut tick = report("2026-11-28T03:00:08Z", "2026-11-28T03:40:00Z");
        tick.tick = Some("2026-11-27T03:00:00Z".parse().unwrap());
        assert!(judge(&tick, Some(&due()), false)
            .unwrap()
            .contains("claims tick 2026-11-27T03:00:00Z"));
    }

    #[test]
    fn a_report_answering_no_due_is_refused_only_when_dues_are_required() {
        let unsolicited = report("2020-01-01T00:00:00Z", "2020-01-01T01:00:00Z");
        assert_eq!(judge(&unsolicited, None, false), None);
        assert!(judge(&unsolicited, None, true)
            .unwrap()
            .contains("scheduler.require_due"));
    }
}
