//! What a schedule's status says to a health check (issue 31): Kubernetes-style conditions,
//! decided from the record and `now` alone, so `sexton get` and anything else that reads a
//! schedule say the same.
//!
//! - `Ready`: the spec is valid, the scheduler has planned this generation, and the schedule
//!   fires: not paused, and its planned run is not overdue (a run more than
//!   [`OVERDUE_AFTER`] past its time means no scheduler is firing it).
//! - `Held`: the schedule is paused, by a person or by the scheduler after
//!   `pause_after_failures`; it takes no backups until unpaused.
//! - `Failing`: its latest backup failed (and how many in a row).
//! - `Recoverable` (issue 47, only for a schedule that states recovery objectives): every
//!   objective met at every place it is stated for, as the recovery value says now
//!   ([`recoverable`]; `Unknown` when the retention-worker did not answer).
//!
//! A health check reads `Held` first (a paused schedule is suspended, not broken), then
//! `Failing` and `Ready` (docs/gitops.md).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::records::{SchedulePhase, ScheduleRecord};

/// How long past its planned time a run may still be unfired before `Ready` says so: the
/// scheduler fires within seconds; minutes late means none is running.
pub const OVERDUE_AFTER: chrono::Duration = chrono::Duration::minutes(10);

/// One condition, as Kubernetes writes them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    /// `"True"` or `"False"`, as Kubernetes spells them.
    pub status: String,
    /// A CamelCase word a program can match.
    pub reason: String,
    /// The same for a person.
    pub message: String,
}

impl Condition {
    fn new(kind: &str, holds: bool, reason: &str, message: String) -> Condition {
        Condition {
            kind: kind.into(),
            status: if holds { "True" } else { "False" }.into(),
            reason: reason.into(),
            message,
        }
    }

    pub fn holds(&self) -> bool {
        self.status == "True"
    }
}

/// The `RetentionDecided` condition (issue 54): `True` while the cluster's last retention run
/// decided it; `False` while its runs fail (`RunsFailing`: how many, since when, the error) or
/// are held (`Held`: why, and the way out); `Unknown` before its first run.
pub fn retention_decided(status: Option<&crate::records::RetentionStatus>) -> Condition {
    use crate::records::RetentionOutcome;
    let at = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let Some(status) = status else {
        return Condition {
            kind: "RetentionDecided".into(),
            status: "Unknown".into(),
            reason: "NoRunYet".into(),
            message: "no retention run of the cluster has ended yet".into(),
        };
    };
    let why = status.reason.as_deref().unwrap_or("no reason given");
    match status.outcome {
        RetentionOutcome::Decided => Condition::new(
            "RetentionDecided",
            true,
            "Decided",
            format!("the last run decided the cluster at {}", at(status.at)),
        ),
        RetentionOutcome::Failed => Condition::new(
            "RetentionDecided",
            false,
            "RunsFailing",
            format!(
                "{} run(s) failed since {}: {why}",
                status.runs,
                at(status.since)
            ),
        ),
        RetentionOutcome::Held => Condition::new(
            "RetentionDecided",
            false,
            "Held",
            format!("held since {}: {why}", at(status.since)),
        ),
    }
}

/// The `Recoverable` condition of a schedule with objectives, from the places' recovery values
/// (`None`: they could not be read, `why`): `True` when every objective checked there is met,
/// `False` naming each one missed, where and by how much.
pub fn recoverable(places: Result<&[crate::objectives::PlaceRecovery], &str>) -> Condition {
    let places = match places {
        Ok(places) => places,
        Err(why) => {
            return Condition {
                kind: "Recoverable".into(),
                status: "Unknown".into(),
                reason: "RecoveryUnknown".into(),
                message: format!("the recovery value could not be read: {why}"),
            }
        }
    };
    let checked: Vec<String> = places
        .iter()
        .flat_map(|place| place.objectives.iter().map(move |check| (place, check)))
        .filter(|(_, check)| !check.met)
        .map(|(place, check)| {
            format!(
                "{} {} at {} missed: {}",
                check.objective, check.target, place.location, check.message
            )
        })
        .collect();
    let stated = places
        .iter()
        .map(|place| place.objectives.len())
        .sum::<usize>();
    if stated == 0 {
        return Condition::new(
            "Recoverable",
            true,
            "NoObjectives",
            "no recovery objective is stated for any place".into(),
        );
    }
    if checked.is_empty() {
        return Condition::new(
            "Recoverable",
            true,
            "ObjectivesMet",
            format!("all {stated} recovery objectives are met"),
        );
    }
    Condition::new("Recoverable", false, "ObjectiveMissed", checked.join("; "))
}

/// What became of the schedule's latest backup, as far as its reports said.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BackupOutcome {
    /// Its executor said it started and has not said more.
    Running,
    Failed,
    Completed,
    /// Fired, and no report has come yet.
    Unreported,
}

/// The latest backup's outcome; `None` when the schedule has fired none.
pub fn last_backup_outcome(record: &ScheduleRecord) -> Option<BackupOutcome> {
    let status = &record.status;
    if status.in_flight.is_some() {
        return Some(BackupOutcome::Running);
    }
    if status.last_backup_failed || status.consecutive_failures > 0 {
        return Some(BackupOutcome::Failed);
    }
    match (status.last_backup, status.last_completed) {
        (None, None) => None,
        (Some(fired), Some(completed)) if completed < fired => Some(BackupOutcome::Unreported),
        (_, Some(_)) => Some(BackupOutcome::Completed),
        (Some(_), None) => Some(BackupOutcome::Unreported),
    }
}

/// The schedule's conditions at `now`: `Ready`, `Held`, `Failing`, in that order.
pub fn schedule_conditions(record: &ScheduleRecord, now: DateTime<Utc>) -> Vec<Condition> {
    let status = &record.status;
    let generation = record.generation;
    let ready = if status.phase == SchedulePhase::FailedValidation {
        Condition::new(
            "Ready",
            false,
            "FailedValidation",
            status.validation_errors.join("; "),
        )
    } else if status.observed_generation != generation {
        Condition::new(
            "Ready",
            false,
            "NotObserved",
            format!(
                "generation {generation} is not planned yet (status is of generation {})",
                status.observed_generation
            ),
        )
    } else if record.paused {
        Condition::new(
            "Ready",
            false,
            "Paused",
            "paused: takes no backups until unpaused".into(),
        )
    } else {
        match status.next_run_time {
            Some(next) if next + OVERDUE_AFTER < now => Condition::new(
                "Ready",
                false,
                "Overdue",
                format!(
                    "the run due at {} has not fired: is a scheduler running?",
                    next.to_rfc3339_opts(SecondsFormat::Secs, true)
                ),
            ),
            Some(next) => Condition::new(
                "Ready",
                true,
                "Scheduled",
                format!(
                    "next run at {}",
                    next.to_rfc3339_opts(SecondsFormat::Secs, true)
                ),
            ),
            None => Condition::new(
                "Ready",
                true,
                "NoNextRun",
                "valid, with no run to come (its cron names no future time)".into(),
            ),
        }
    };
    let held = match (&status.paused_reason, record.paused) {
        (Some(reason), true) => Condition::new("Held", true, "PausedAfterFailures", reason.clone()),
        (None, true) => Condition::new(
            "Held",
            true,
            "Paused",
            "paused by a person (sexton schedule unpause resumes it)".into(),
        ),
        (_, false) => Condition::new("Held", false, "NotPaused", "not paused".into()),
    };
    let failing = if status.consecutive_failures > 0 || status.last_backup_failed {
        let last = status
            .last_failed_backup
            .as_ref()
            .map_or_else(String::new, |id| format!("; the last was {id}"));
        Condition::new(
            "Failing",
            true,
            "BackupFailed",
            format!(
                "{} failed backup(s) in a row{last}",
                status.consecutive_failures.max(1)
            ),
        )
    } else if let Some(completed) = status.last_completed {
        Condition::new(
            "Failing",
            false,
            "LastBackupCompleted",
            format!(
                "the latest backup completed at {}",
                completed.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
        )
    } else {
        Condition::new(
            "Failing",
            false,
            "NoFailedBackup",
            "no backup of this schedule has failed".into(),
        )
    };
    vec![ready, held, failing]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_decided_says_how_the_clusters_runs_go() {
        use crate::records::{RetentionOutcome, RetentionStatus};
        let cluster = crate::names::ClusterName::new("c1").unwrap();
        let t = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let unknown = retention_decided(None);
        assert_eq!(
            (unknown.status.as_str(), unknown.reason.as_str()),
            ("Unknown", "NoRunYet")
        );
        let decided = RetentionStatus::after(None, &cluster, RetentionOutcome::Decided, None, t);
        let c = retention_decided(Some(&decided));
        assert!(c.holds());
        assert_eq!(c.reason, "Decided");
        let failed = RetentionStatus::after(
            Some(&decided),
            &cluster,
            RetentionOutcome::Failed,
            Some("AccessDenied".into()),
            t,
        );
        let failed = RetentionStatus::after(
            Some(&failed),
            &cluster,
            RetentionOutcome::Failed,
            Some("AccessDenied".into()),
            t + chrono::Duration::seconds(5),
        );
        let c = retention_decided(Some(&failed));
        assert!(!c.holds());
        assert_eq!(c.reason, "RunsFailing");
        assert!(
            c.message
                .starts_with("2 run(s) failed since 2027-01-15T08:00:00Z: AccessDenied"),
            "{}",
            c.message
        );
        let held = RetentionStatus::after(
            None,
            &cluster,
            RetentionOutcome::Held,
            Some("moved".into()),
            t,
        );
        let c = retention_decided(Some(&held));
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "Held"));
        assert!(c.message.ends_with(": moved"));
    }

    #[test]
    fn recoverable_says_which_objective_is_missed_where_and_unknown_without_an_answer() {
        let place = |location: &str, met: bool| -> crate::objectives::PlaceRecovery {
            serde_json::from_value(serde_json::json!({
                "location": location, "plan": "p",
                "recovery": {"points": [], "intervals": [], "gaps": []},
                "objectives": [{"objective": "window", "target": "2h", "met": met,
                                "short_seconds": if met { 0 } else { 600 },
                                "message": "10m of the last 2h cannot be restored"}],
            }))
            .unwrap()
        };
        let all_met = recoverable(Ok(&[place("primary", true), place("dr", true)]));
        assert_eq!(
            (all_met.status.as_str(), all_met.reason.as_str()),
            ("True", "ObjectivesMet")
        );
        let missed = recoverable(Ok(&[place("primary", true), place("dr", false)]));
        assert_eq!(
            (missed.status.as_str(), missed.reason.as_str()),
            ("False", "ObjectiveMissed")
        );
        assert_eq!(
            missed.message,
            "window 2h at dr missed: 10m of the last 2h cannot be restored"
        );
        let unknown = recoverable(Err("no answer within 15s"));
        assert_eq!(unknown.status, "Unknown");
        assert!(unknown.message.contains("no answer within 15s"));
        let none = recoverable(Ok(&[]));
        assert_eq!(none.reason, "NoObjectives");
    }

    fn record(extra: serde_json::Value) -> ScheduleRecord {
        let mut base = serde_json::json!({
            "name": "s", "cluster": "c", "plan": "p", "cron": "@daily",
            "policy": {"keep_last": 3}, "created_at": "2026-01-01T00:00:00Z",
            "generation": 2,
            "status": {"phase": "enabled", "observed_generation": 2,
                       "next_run_time": "2026-01-02T00:00:00Z"},
        });
        merge(&mut base, extra);
        serde_json::from_value(base).unwrap()
    }

    fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
        match (into, from) {
            (serde_json::Value::Object(into), serde_json::Value::Object(from)) => {
                for (key, value) in from {
                    merge(into.entry(key).or_insert(serde_json::Value::Null), value);
                }
            }
            (into, from) => *into = from,
        }
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn said(record: &ScheduleRecord, now: &str) -> Vec<(String, bool, String)> {
        schedule_conditions(record, at(now))
            .into_iter()
            .map(|c| (c.kind.clone(), c.holds(), c.reason))
            .collect()
    }

    fn row(kind: &str, holds: bool, reason: &str) -> (String, bool, String) {
        (kind.into(), holds, reason.into())
    }

    #[test]
    fn a_healthy_schedule_is_ready_not_held_not_failing() {
        let r = record(serde_json::json!({}));
        assert_eq!(
            said(&r, "2026-01-01T12:00:00Z"),
            [
                row("Ready", true, "Scheduled"),
                row("Held", false, "NotPaused"),
                row("Failing", false, "NoFailedBackup")
            ]
        );
    }

    #[test]
    fn an_overdue_run_means_no_scheduler_fires_it() {
        let r = record(serde_json::json!({}));
        // Within the grace: still ready.
        assert_eq!(
            said(&r, "2026-01-02T00:09:00Z")[0],
            row("Ready", true, "Scheduled")
        );
        assert_eq!(
            said(&r, "2026-01-02T00:11:00Z")[0],
            row("Ready", false, "Overdue")
        );
    }

    #[test]
    fn paused_is_held_and_not_ready_and_says_who_paused() {
        let by_hand = record(serde_json::json!({"paused": true, "status": {"phase": "paused"}}));
        let said_hand = said(&by_hand, "2026-01-03T00:00:00Z");
        // Overdue does not apply to a paused schedule.
        assert_eq!(said_hand[0], row("Ready", false, "Paused"));
        assert_eq!(said_hand[1], row("Held", true, "Paused"));
        let by_failures = record(serde_json::json!({
            "paused": true,
            "status": {"phase": "paused", "paused_reason": "3 failed backups in a row",
                       "consecutive_failures": 3, "last_failed_backup": "b9"}
        }));
        let conditions = schedule_conditions(&by_failures, at("2026-01-01T12:00:00Z"));
        assert_eq!(conditions[1].reason, "PausedAfterFailures");
        assert_eq!(conditions[2].reason, "BackupFailed");
        assert!(conditions[2].message.contains("3 failed") && conditions[2].message.contains("b9"));
    }

    #[test]
    fn invalid_and_unplanned_generations_are_not_ready() {
        let invalid = record(serde_json::json!({
            "status": {"phase": "failed-validation", "validation_errors": ["bad zone"]}
        }));
        let ready = &schedule_conditions(&invalid, at("2026-01-01T12:00:00Z"))[0];
        assert_eq!(
            (ready.holds(), ready.reason.as_str()),
            (false, "FailedValidation")
        );
        assert_eq!(ready.message, "bad zone");
        let unplanned = record(serde_json::json!({"generation": 3}));
        assert_eq!(
            said(&unplanned, "2026-01-01T12:00:00Z")[0],
            row("Ready", false, "NotObserved")
        );
    }

    #[test]
    fn the_latest_backup_outcome_follows_the_reports() {
        let none = record(serde_json::json!({}));
        assert_eq!(last_backup_outcome(&none), None);
        let fired = record(serde_json::json!({"status": {"last_backup": "2026-01-01T00:00:00Z"}}));
        assert_eq!(last_backup_outcome(&fired), Some(BackupOutcome::Unreported));
        let completed = record(serde_json::json!({"status": {
            "last_backup": "2026-01-01T00:00:00Z", "last_completed": "2026-01-01T00:05:00Z"}}));
        assert_eq!(
            last_backup_outcome(&completed),
            Some(BackupOutcome::Completed)
        );
        // Fired again after the last completion, no report yet.
        let again = record(serde_json::json!({"status": {
            "last_backup": "2026-01-02T00:00:00Z", "last_completed": "2026-01-01T00:05:00Z"}}));
        assert_eq!(last_backup_outcome(&again), Some(BackupOutcome::Unreported));
        let running = record(serde_json::json!({"status": {
            "last_backup": "2026-01-02T00:00:00Z",
            "in_flight": {"backup_id": "b2", "since": "2026-01-02T00:00:01Z"}}}));
        assert_eq!(last_backup_outcome(&running), Some(BackupOutcome::Running));
        let failed = record(serde_json::json!({"status": {
            "last_backup": "2026-01-02T00:00:00Z", "last_backup_failed": true}}));
        assert_eq!(last_backup_outcome(&failed), Some(BackupOutcome::Failed));
    }
}
