//! What a report changes on its schedule's status: the backup in flight (and a backfill's
//! wait for it), the volumes whose latest upload failed, the run of failures and the pause at
//! its limit, the latest completion.

use anyhow::Context as _;
use chrono::Utc;
use sexton_model::{
    records::{InFlight, ScheduleRecord},
    wire::{self, Report, ReportStatus},
};
use sexton_shared::{
    nats::publish_once,
    topology::{self, Topology},
};

/// Records on the schedule which of its backups is in progress, for the overlap policy: set on
/// `started`, cleared on `completed` or `failed` of that same backup (which also ends a
/// backfill's wait for it). Also which volumes' latest upload failed (their next backup is a
/// full, even after the failed record is cleaned up): set by a failed report, cleared by a
/// completed one that took the volume. And the run of consecutive failures: at the schedule's
/// `pause_after_failures` it is paused, with an incident.
pub(crate) async fn track_in_flight(topology: &Topology, report: &Report) -> anyhow::Result<()> {
    let Some(name) = &report.schedule else {
        return Ok(());
    };
    for _ in 0..5 {
        let Some(entry) =
            sexton_shared::leader_read::latest(&topology.schedules, name.as_str()).await?
        else {
            return Ok(());
        };
        let mut schedule: ScheduleRecord =
            serde_json::from_slice(&entry.value).context("decoding the report's schedule")?;
        let before = schedule.status.clone();
        let paused_before = schedule.paused;
        let current = schedule.status.in_flight.as_ref().map(|f| &f.backup_id);
        match report.status {
            ReportStatus::Started if current != Some(&report.backup_id) => {
                schedule.status.in_flight = Some(InFlight {
                    backup_id: report.backup_id.clone(),
                    since: report
                        .started_at
                        .map(|t| t.with_timezone(&Utc))
                        .unwrap_or_else(Utc::now),
                    tick: report.tick,
                });
            }
            ReportStatus::Completed | ReportStatus::Failed
                if current == Some(&report.backup_id) =>
            {
                schedule.status.in_flight = None;
            }
            _ => {}
        }
        if report.status != ReportStatus::Started {
            // A backfill waiting for this backup goes on. The report may also come before the
            // step that fired it has recorded what it waits for: remembered, so that step does
            // not wait (both write this record by compare-and-set, so one sees the other).
            if let Some(backfill) = schedule
                .status
                .backfill
                .as_mut()
                .filter(|b| b.finished_at.is_none())
            {
                if backfill.waiting_for.as_ref() == Some(&report.backup_id) {
                    backfill.waiting_for = None;
                    backfill.waiting_since = None;
                }
                backfill.last_reported = Some(report.backup_id.clone());
            }
        }
        remember_failures(&mut schedule.status, report);
        remember_completion(&mut schedule.status, &before, report, Utc::now());
        let pause = pause_after_failures(&schedule);
        if let Some(reason) = &pause {
            schedule.paused = true;
            schedule.status.phase = sexton_model::records::SchedulePhase::Paused;
            schedule.status.paused_reason = Some(reason.clone());
        }
        if schedule.status == before && schedule.paused == paused_before {
            return Ok(());
        }
        if let Some(reason) = &pause {
            // Published before the pause is recorded, under an id of the failure that paused
            // it: a crash in between publishes it again as a duplicate, never loses it.
            announce_pause(topology, &schedule, report, reason).await?;
        }
        let body = serde_json::to_vec(&schedule)?;
        match topology
            .schedules
            .update(name.as_str(), body.into(), entry.revision)
            .await
        {
            Ok(_) => {
                if pause.is_some() {
                    tracing::warn!(schedule = %name, failures = schedule.status.consecutive_failures, "schedule paused after consecutive failed backups");
                }
                return Ok(());
            }
            Err(err)
                if err.kind() == async_nats::jetstream::kv::UpdateErrorKind::WrongLastRevision =>
            {
                continue
            }
            Err(err) => return Err(err.into()),
        }
    }
    anyhow::bail!("schedule {name} kept changing while recording an in-flight backup")
}

/// Which volumes' (or, without volumes, whether the backup's) latest upload failed, and how
/// many backups in a row failed. A failed backup is counted once however often its report is
/// delivered; a completed one ends the run.
fn remember_failures(status: &mut sexton_model::records::ScheduleStatus, report: &Report) {
    match report.status {
        ReportStatus::Started => {}
        ReportStatus::Failed => {
            if report.volumes.is_empty() {
                status.last_backup_failed = true;
            }
            for volume in report.volumes.iter().filter(|v| v.failed) {
                if !status.failed_volumes.contains(&volume.name) {
                    status.failed_volumes.push(volume.name.clone());
                }
            }
            if status.last_failed_backup.as_ref() != Some(&report.backup_id) {
                status.consecutive_failures = status.consecutive_failures.saturating_add(1);
                status.last_failed_backup = Some(report.backup_id.clone());
            }
        }
        ReportStatus::Completed => {
            if report.volumes.is_empty() {
                status.last_backup_failed = false;
            }
            status
                .failed_volumes
                .retain(|name| !report.volumes.iter().any(|v| v.name == *name));
            status.consecutive_failures = 0;
            status.last_failed_backup = None;
        }
    }
}

/// When the schedule's latest backup completed (its status's `last_completed`, for health
/// checks). Never moved back by a report delivered again or late. Exact when the report
/// changes the status anyway (it ends the backup in flight, or a run of failures); otherwise
/// kept to the minute, so a schedule completing many backups a minute does not cost a write of
/// its record each. A completion claimed later than `now` cannot be true: it is taken as `now`,
/// so a forged future time cannot pin the status and hide every later completion.
fn remember_completion(
    status: &mut sexton_model::records::ScheduleStatus,
    before: &sexton_model::records::ScheduleStatus,
    report: &Report,
    now: chrono::DateTime<Utc>,
) {
    let Some(completed) = report
        .completed_at
        .filter(|_| report.status == ReportStatus::Completed)
        .map(|t| t.with_timezone(&chrono::Utc).min(now))
    else {
        return;
    };
    let newer = match status.last_completed {
        None => true,
        Some(last) if completed <= last => false,
        Some(_) if status != before => true,
        Some(last) => completed - last >= chrono::Duration::minutes(1),
    };
    if newer {
        status.last_completed = Some(completed);
    }
}

/// Why the schedule is to be paused now, if its run of failures reached its
/// `pause_after_failures` and it is not paused yet.
fn pause_after_failures(schedule: &ScheduleRecord) -> Option<String> {
    let limit = schedule.pause_after_failures?;
    let failures = schedule.status.consecutive_failures;
    if schedule.paused || failures < limit {
        return None;
    }
    Some(format!(
        "paused after {failures} consecutive failed backups (pause_after_failures {limit}); the \
         last, {}: unpause to resume",
        schedule
            .status
            .last_failed_backup
            .as_ref()
            .map_or_else(String::new, ToString::to_string)
    ))
}

/// The incident of a schedule paused after failures, de-duplicated by schedule and the failed
/// backup that paused it.
async fn announce_pause(
    topology: &Topology,
    schedule: &ScheduleRecord,
    report: &Report,
    reason: &str,
) -> anyhow::Result<()> {
    let incident = sexton_model::wire::Incident {
        schema_version: wire::SCHEMA_VERSION,
        service: "scheduler".into(),
        kind: "schedule-paused-after-failures".into(),
        cluster: Some(schedule.cluster.to_string()),
        backup_id: Some(report.backup_id.to_string()),
        subject: sexton_shared::channels::REPORTS.subject(&report.cluster),
        reason: format!(
            "schedule {}: {reason}{}",
            schedule.name,
            report
                .error
                .as_deref()
                .map(|e| format!(" (its error: {e})"))
                .unwrap_or_default()
        ),
        at: Utc::now(),
    };
    publish_once(
        &topology.jetstream,
        topology::event_subject("incident", schedule.cluster.as_str()),
        &format!("paused.{}.{}", schedule.name, report.backup_id),
        wire::encode(&incident),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;

    fn report(id: &str, status: ReportStatus) -> Report {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "backup_id": id, "cluster": "c1", "plan": "full",
            "schedule": "s", "backup_name": "s", "status": status,
        }))
        .unwrap()
    }

    /// Replays reports (`id:status`, status `f` failed, `c` completed, `s` started) on a
    /// schedule pausing after `limit` failures; expects the count and whether it paused.
    fn check(limit: u32, reports: &[&str], expected: (u32, bool)) {
        let mut schedule: ScheduleRecord = serde_json::from_value(serde_json::json!({
            "name": "s", "cluster": "c1", "plan": "full", "cron": "@daily",
            "policy": {"keep_last": 1}, "created_at": "2026-01-01T00:00:00Z",
            "pause_after_failures": limit,
        }))
        .unwrap();
        for text in reports {
            let (id, status) = text.split_once(':').unwrap();
            let status = match status {
                "f" => ReportStatus::Failed,
                "c" => ReportStatus::Completed,
                _ => ReportStatus::Started,
            };
            remember_failures(&mut schedule.status, &report(id, status));
            if let Some(reason) = pause_after_failures(&schedule) {
                schedule.paused = true;
                schedule.status.paused_reason = Some(reason);
            }
        }
        assert_eq!(
            (schedule.status.consecutive_failures, schedule.paused),
            expected,
            "{reports:?}"
        );
    }

    #[test]
    fn consecutive_failures_are_counted_once_per_backup_and_pause_at_the_limit() {
        check(3, &["a:f", "b:f"], (2, false));
        check(3, &["a:f", "b:f", "c:f"], (3, true));
        // A report delivered again counts once.
        check(3, &["a:f", "a:f", "b:f", "b:f"], (2, false));
        // A completed backup ends the run; a started one changes nothing.
        check(3, &["a:f", "b:f", "c:c", "d:s", "d:f"], (1, false));
        check(1, &["a:f"], (1, true));
        // Counting goes on while paused; the reason names the limit it reached.
        check(2, &["a:f", "b:f", "c:f"], (3, true));
    }

    #[test]
    fn the_latest_completion_is_kept_to_the_minute_and_never_moves_back() {
        let completed = |id: &str, at: &str| {
            let mut r = report(id, ReportStatus::Completed);
            r.completed_at = Some(at.parse().unwrap());
            r
        };
        let now: DateTime<Utc> = "2026-06-01T00:00:00Z".parse().unwrap();
        let replay = |reports: &[Report]| {
            let mut status = sexton_model::records::ScheduleStatus::default();
            for r in reports {
                let before = status.clone();
                remember_failures(&mut status, r);
                remember_completion(&mut status, &before, r, now);
            }
            status.last_completed.map(|t| t.to_rfc3339())
        };
        let first = completed("a", "2026-01-01T00:00:00Z");
        assert_eq!(
            replay(std::slice::from_ref(&first)).as_deref(),
            Some("2026-01-01T00:00:00+00:00")
        );
        // 30 s later and nothing else changes: no write for it.
        let soon = completed("b", "2026-01-01T00:00:30Z");
        assert_eq!(
            replay(&[first.clone(), soon]).as_deref(),
            Some("2026-01-01T00:00:00+00:00")
        );
        let later = completed("c", "2026-01-01T00:05:00Z");
        assert_eq!(
            replay(&[first.clone(), later.clone(), first.clone()]).as_deref(),
            Some("2026-01-01T00:05:00+00:00"),
            "a report delivered again does not move it back"
        );
        // After a failure, the completion ending the run is recorded exactly.
        let failed = report("d", ReportStatus::Failed);
        let right_after = completed("e", "2026-01-01T00:00:10Z");
        assert_eq!(
            replay(&[first, failed, right_after]).as_deref(),
            Some("2026-01-01T00:00:10+00:00")
        );
        // A completion claimed in the future is taken as now: it cannot pin the status.
        let forged = completed("g", "2099-01-01T00:00:00Z");
        assert_eq!(
            replay(&[forged, later.clone()]).as_deref(),
            Some("2026-06-01T00:00:00+00:00")
        );
        // A failed report carries no completion.
        assert_eq!(replay(&[report("f", ReportStatus::Failed)]), None);
    }
}
