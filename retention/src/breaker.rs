//! The circuit breaker: a judgement on a plan before anything of it is carried out.
//!
//! A policy that was narrowed by mistake, a clock that jumped, a grouping gone wrong, or backups
//! that have been failing for days while time-based rules keep expiring the good old ones
//! (Longhorn 1164) all look the same from the engine's side: a valid plan. What gives them away
//! is its shape: it deletes an unusual share of the group, an unusual number of backups, or it
//! deletes while the group has no fresh backup. [`judge`] looks at that shape and says whether
//! the run must be held for a person's approval, and why. It reads no clock and does no I/O, like
//! the engine: `now` and the limits are parameters.
//!
//! What counts: completed backups the plan deletes whole by its rules in this run. Backups a
//! user asked to delete are that user's word, not the policy's; failed backups cleaned up after
//! their grace period are no recovery points; a backup already marked `expiring` was judged by
//! an earlier run; volumes trimmed off a backup that stays leave that backup restorable. None of
//! those counts, and a plan that deletes none of what counts never trips.

use chrono::{DateTime, Duration, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

use crate::catalog::{BackupStatus, Catalog};
use crate::plan::Plan;

/// The limits one group is judged by (the group's schedules and the server's defaults, resolved
/// by the caller). `None` turns a check off.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerLimits {
    /// A run that deletes more than this share of the group's completed backups trips.
    pub max_delete_fraction: Option<f64>,
    /// The share is judged only in groups holding at least this many completed backups: in a
    /// small group one ordinary run deletes half (`keep_last 1` and two backups).
    pub min_backups: usize,
    /// A run that deletes more than this many backups trips.
    pub max_delete_count: Option<u32>,
    /// A run that deletes anything while the group's newest completed backup is older than
    /// this trips: backups are failing, so the good old ones must not expire.
    pub stale_after: Option<Duration>,
    /// The recovery window promised (issue 47: the place's `objectives.window`): a run after
    /// which an instant of the last `recovery_window` that is restorable now no longer is
    /// trips. The engine never does that within its own `recovery_window` (the property
    /// tests); this catches what they cannot (a policy that cannot meet the objective, a
    /// grouping or a catalog read wrong), and holds the run rather than lose the instant.
    pub recovery_window: Option<Duration>,
}

impl BreakerLimits {
    /// No check at all: every plan passes.
    pub const OFF: BreakerLimits = BreakerLimits {
        max_delete_fraction: None,
        min_backups: 0,
        max_delete_count: None,
        stale_after: None,
        recovery_window: None,
    };
}

/// Which check tripped; a small fixed set, used as a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TripKind {
    Fraction,
    Count,
    Stale,
    Recovery,
}

impl TripKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TripKind::Fraction => "fraction",
            TripKind::Count => "count",
            TripKind::Stale => "stale",
            TripKind::Recovery => "recovery",
        }
    }
}

/// One reason to hold a run, with the figures behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trip {
    pub kind: TripKind,
    /// The sentence an operator reads in the preview, the incident and the audit.
    pub reason: String,
}

/// The breaker's answer on one plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BreakerVerdict {
    /// The completed backups the plan deletes whole by its rules (what the checks count, and
    /// what an approval names), newest first as the plan lists them.
    pub deleting: Vec<String>,
    /// The group's completed backups.
    pub completed: usize,
    /// Empty: the run may go. Otherwise it is held, for each of these reasons.
    pub trips: Vec<Trip>,
}

impl BreakerVerdict {
    pub fn holds(&self) -> bool {
        !self.trips.is_empty()
    }
}

/// Judges `plan`, made over `catalog` at `now`, against `limits`.
pub fn judge(
    catalog: &Catalog,
    plan: &Plan,
    limits: &BreakerLimits,
    now: DateTime<Utc>,
) -> BreakerVerdict {
    let requested: std::collections::HashSet<&str> = catalog
        .backups
        .iter()
        .filter(|b| b.delete_requested)
        .map(|b| b.id.as_str())
        .collect();
    let deleting: Vec<String> = plan
        .delete
        .iter()
        .filter(|d| d.status == BackupStatus::Completed && !requested.contains(d.id.as_str()))
        .map(|d| d.id.clone())
        .collect();
    let completed_times: Vec<DateTime<FixedOffset>> = catalog
        .backups
        .iter()
        .filter(|b| b.status == BackupStatus::Completed)
        .filter_map(|b| b.completed_at)
        .collect();
    let completed = completed_times.len();
    let mut verdict = BreakerVerdict {
        deleting,
        completed,
        trips: Vec::new(),
    };
    // Before the count: a run that deletes only log segments can lose instants too.
    if let Some(window) = limits.recovery_window {
        if let Some((first, last)) =
            crate::recovery::lost_instants(catalog, plan, now, now - window)
        {
            verdict.trips.push(Trip {
                kind: TripKind::Recovery,
                reason: format!(
                    "would make instants of the promised recovery window ({}) unrestorable \
                     that are restorable now: from {} to {}",
                    span_text(window),
                    first.to_rfc3339(),
                    last.to_rfc3339()
                ),
            });
        }
    }
    let n = verdict.deleting.len();
    if n == 0 {
        return verdict;
    }
    if let Some(limit) = limits.max_delete_fraction {
        if completed >= limits.min_backups && n as f64 > limit * completed as f64 {
            verdict.trips.push(Trip {
                kind: TripKind::Fraction,
                reason: format!(
                    "would delete {n} of the group's {completed} completed backups ({:.0}%), \
                     more than max_delete_fraction {limit}",
                    100.0 * n as f64 / completed as f64
                ),
            });
        }
    }
    if let Some(limit) = limits.max_delete_count {
        if n > limit as usize {
            verdict.trips.push(Trip {
                kind: TripKind::Count,
                reason: format!(
                    "would delete {n} backups in one run, more than max_delete_count {limit}"
                ),
            });
        }
    }
    if let Some(limit) = limits.stale_after {
        let newest = completed_times.iter().max().map(|t| t.with_timezone(&Utc));
        if let Some(newest) = newest.filter(|newest| now - *newest > limit) {
            verdict.trips.push(Trip {
                kind: TripKind::Stale,
                reason: format!(
                    "the newest completed backup is {} old (completed {}), older than \
                     stale_after {}: backups may be failing, so none is deleted",
                    span_text(now - newest),
                    newest.to_rfc3339(),
                    span_text(limit)
                ),
            });
        }
    }
    verdict
}

/// How long a person's approval waits for the run it lets through.
pub const APPROVAL_LIFETIME: Duration = Duration::hours(24);

/// A person's word that one held run may go: the backups it deleted when they looked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub approved_at: DateTime<Utc>,
    /// The held run's `deleting`, as the approver saw it in the preview.
    pub deleting: Vec<String>,
}

/// Whether `approval` lets a run that would delete `deleting` through at `now`: only within
/// [`APPROVAL_LIFETIME`], and only if the run deletes nothing the approver did not see (fewer is
/// fine: some may have gone meanwhile, or been kept by a new rule). `Err` says why not.
pub fn approval_covers(
    approval: &Approval,
    deleting: &[String],
    now: DateTime<Utc>,
) -> Result<(), String> {
    if now - approval.approved_at > APPROVAL_LIFETIME {
        return Err(format!(
            "the approval of {} expired after {}",
            approval.approved_at.to_rfc3339(),
            span_text(APPROVAL_LIFETIME)
        ));
    }
    let approved: std::collections::HashSet<&str> =
        approval.deleting.iter().map(String::as_str).collect();
    let unseen: Vec<&str> = deleting
        .iter()
        .map(String::as_str)
        .filter(|id| !approved.contains(id))
        .collect();
    if !unseen.is_empty() {
        return Err(format!(
            "the run would also delete {} backup(s) the approval did not name ({}); approve again",
            unseen.len(),
            unseen
                .iter()
                .take(5)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
}

/// A span in the largest whole units that fit: `3d`, `5h`, `90s` becomes `1m30s`.
fn span_text(span: Duration) -> String {
    let mut seconds = span.num_seconds().max(0);
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds >= size {
            out.push_str(&format!("{}{unit}", seconds / size));
            seconds %= size;
        }
    }
    if seconds > 0 || out.is_empty() {
        out.push_str(&format!("{seconds}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::BackupRecord;
    use crate::policy::Policy;

    fn backups(n: usize, newest: &str, status: BackupStatus) -> Vec<BackupRecord> {
        let newest: DateTime<FixedOffset> = newest.parse().unwrap();
        (0..n)
            .map(|i| BackupRecord {
                id: format!("b{i:02}"),
                completed_at: Some(newest - Duration::hours(i as i64)),
                status,
                ..Default::default()
            })
            .collect()
    }

    const NOW: &str = "2026-03-01T12:00:00Z";

    fn limits() -> BreakerLimits {
        BreakerLimits {
            max_delete_fraction: Some(0.5),
            min_backups: 10,
            max_delete_count: Some(100),
            stale_after: Some(Duration::hours(72)),
            recovery_window: None,
        }
    }

    /// Plans `catalog` under `policy` at [`NOW`] and checks the breaker's trips (their kinds)
    /// and how many completed backups it counted as deleted.
    fn check(
        catalog: Vec<BackupRecord>,
        policy: &str,
        limits: BreakerLimits,
        expected: (&[TripKind], usize),
    ) {
        let catalog = Catalog {
            backups: catalog,
            binlog_segments: Vec::new(),
        };
        let now: DateTime<Utc> = NOW.parse().unwrap();
        let policy = Policy::from_json(policy).unwrap();
        let plan = crate::plan(&catalog, &policy, now).unwrap();
        let verdict = judge(&catalog, &plan, &limits, now);
        let kinds: Vec<TripKind> = verdict.trips.iter().map(|t| t.kind).collect();
        assert_eq!(
            (kinds.as_slice(), verdict.deleting.len()),
            expected,
            "{:#?}",
            verdict.trips
        );
    }

    /// Issue 47: a run that takes a restorable instant out of the promised window trips; one
    /// that takes only what lies before it passes.
    #[test]
    fn a_run_that_loses_an_instant_of_the_promised_window_trips() {
        let fresh = "2026-03-01T11:00:00Z";
        let with_window = |window| BreakerLimits {
            recovery_window: Some(window),
            ..limits()
        };
        check(
            backups(8, fresh, BackupStatus::Completed),
            r#"{"keep_last": 7}"#,
            with_window(Duration::days(30)),
            (&[TripKind::Recovery], 1),
        );
        check(
            backups(8, fresh, BackupStatus::Completed),
            r#"{"keep_last": 7}"#,
            with_window(Duration::minutes(90)),
            (&[], 1),
        );
        // The engine's own window is kept whole: no trip, whatever it deletes before it.
        check(
            backups(8, fresh, BackupStatus::Completed),
            r#"{"keep_last": 1, "recovery_window": "30d"}"#,
            with_window(Duration::days(30)),
            (&[], 0),
        );
    }

    #[test]
    fn each_trigger_trips_alone_and_ordinary_runs_pass() {
        let fresh = "2026-03-01T11:00:00Z";
        // An ordinary run: keep 7 of 8.
        check(
            backups(8, fresh, BackupStatus::Completed),
            r#"{"keep_last": 7}"#,
            limits(),
            (&[], 1),
        );
        // A narrowed policy: 15 of 20 go.
        check(
            backups(20, fresh, BackupStatus::Completed),
            r#"{"keep_last": 5}"#,
            limits(),
            (&[TripKind::Fraction], 15),
        );
        // Exactly half is not more than half.
        check(
            backups(20, fresh, BackupStatus::Completed),
            r#"{"keep_last": 10}"#,
            limits(),
            (&[], 10),
        );
        // A small group deletes most of itself in an ordinary run (keep_last 1, a burst).
        check(
            backups(9, fresh, BackupStatus::Completed),
            r#"{"keep_last": 1}"#,
            limits(),
            (&[], 8),
        );
        // More than the count, whatever the share.
        check(
            backups(300, fresh, BackupStatus::Completed),
            r#"{"keep_last": 190}"#,
            limits(),
            (&[TripKind::Count], 110),
        );
        // Stale: the newest backup is four days old and the run deletes.
        check(
            backups(8, "2026-02-25T12:00:00Z", BackupStatus::Completed),
            r#"{"keep_last": 7}"#,
            limits(),
            (&[TripKind::Stale], 1),
        );
        // Stale but deleting nothing: nothing to hold.
        check(
            backups(3, "2026-02-25T12:00:00Z", BackupStatus::Completed),
            r#"{"keep_last": 7}"#,
            limits(),
            (&[], 0),
        );
        // All three at once.
        check(
            backups(300, "2026-02-01T12:00:00Z", BackupStatus::Completed),
            r#"{"keep_last": 2}"#,
            limits(),
            (&[TripKind::Fraction, TripKind::Count, TripKind::Stale], 298),
        );
        // Off.
        check(
            backups(300, "2026-02-01T12:00:00Z", BackupStatus::Completed),
            r#"{"keep_last": 2}"#,
            BreakerLimits::OFF,
            (&[], 298),
        );
    }

    #[test]
    fn only_completed_backups_deleted_by_the_rules_count() {
        let fresh = "2026-03-01T11:00:00Z";
        // Failed backups past their grace period go without counting.
        let mut catalog = backups(12, fresh, BackupStatus::Completed);
        for record in backups(30, "2026-02-20T00:00:00Z", BackupStatus::Failed) {
            catalog.push(BackupRecord {
                id: format!("f-{}", record.id),
                ..record
            });
        }
        check(catalog, r#"{"keep_last": 12}"#, limits(), (&[], 0));
        // A user's delete requests are the user's word.
        let mut catalog = backups(12, fresh, BackupStatus::Completed);
        for record in catalog.iter_mut().skip(2) {
            record.delete_requested = true;
        }
        check(catalog, r#"{"keep_last": 2}"#, limits(), (&[], 0));
        // Backups an earlier run marked were judged then.
        let mut catalog = backups(12, fresh, BackupStatus::Completed);
        for record in catalog.iter_mut().skip(2) {
            record.status = BackupStatus::Expiring;
        }
        check(catalog, r#"{"keep_last": 2}"#, limits(), (&[], 0));
    }

    #[test]
    fn an_approval_covers_what_it_named_for_a_day() {
        let now: DateTime<Utc> = NOW.parse().unwrap();
        let approval = Approval {
            approved_at: now - Duration::hours(1),
            deleting: vec!["b1".into(), "b2".into(), "b3".into()],
        };
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            approval_covers(&approval, &ids(&["b1", "b2", "b3"]), now),
            Ok(())
        );
        assert_eq!(approval_covers(&approval, &ids(&["b2"]), now), Ok(()));
        let err = approval_covers(&approval, &ids(&["b1", "b4"]), now).unwrap_err();
        assert!(err.contains("did not name (b4)"), "{err}");
        let err = approval_covers(&approval, &ids(&["b1"]), now + Duration::hours(24)).unwrap_err();
        assert!(err.contains("expired after 1d"), "{err}");
    }

    #[test]
    fn spans_read_as_people_write_them() {
        assert_eq!(span_text(Duration::hours(72)), "3d");
        assert_eq!(span_text(Duration::seconds(90)), "1m30s");
        assert_eq!(span_text(Duration::seconds(0)), "0s");
        assert_eq!(span_text(Duration::minutes(25 * 60 + 1)), "1d1h1m");
    }
}
