//! `schedule.backfill` (`sexton schedule backfill NAME --from T --to T`): the schedule's past
//! ticks in an interval, fired once each, now.

use chrono::Utc;
use serde_json::{json, Value};
use sexton_model::records::{Backfill, MAX_BACKFILL_TICKS};
use sexton_schedule::Timing;
use sexton_shared::{
    api::{ApiError, ErrorCode, ScheduleBackfill},
    audit::Actor,
};

use super::{invalid, Api};
use crate::timers;

impl Api {
    /// `schedule.backfill`: the ticks of `[from, to)` (nominal cron times; jitter and blackout
    /// windows are about when runs start, and a backfill starts now), stored on the schedule
    /// as a cursor that the timer queues of all replicas advance, one tick at a time. Runs
    /// whether the schedule is paused or not (a backfill is an explicit request); one at a
    /// time per schedule.
    pub(super) async fn schedule_backfill(
        &self,
        req: ScheduleBackfill,
        actor: &Actor,
    ) -> Result<Value, ApiError> {
        let now = Utc::now();
        if req.to > now {
            return Err(invalid(format!(
                "backfill to {} is in the future; a backfill fires past ticks (the schedule \
                 fires the coming ones)",
                req.to.to_rfc3339()
            )));
        }
        let (current, _) = self.read(req.name.as_str()).await?;
        if let Some(running) = current
            .status
            .backfill
            .as_ref()
            .filter(|b| b.next_tick().is_some())
        {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "schedule {} is still backfilling {} to {} ({} of {} ticks done); wait for it",
                    req.name,
                    running.from.to_rfc3339(),
                    running.to.to_rfc3339(),
                    running.done,
                    running.ticks.len()
                ),
            ));
        }
        let timing = Timing::new(&timers::timing_spec(&current))
            .map_err(|err| invalid(format!("schedule {}: {err}", req.name)))?;
        let ticks = timing
            .ticks_between(req.from, req.to, MAX_BACKFILL_TICKS)
            .map_err(|_| {
                invalid(format!(
                    "{} to {} holds more than {MAX_BACKFILL_TICKS} ticks of {:?}; backfill a \
                     shorter interval at a time",
                    req.from.to_rfc3339(),
                    req.to.to_rfc3339(),
                    current.cron
                ))
            })?;
        if ticks.is_empty() {
            return Err(invalid(format!(
                "{:?} has no tick from {} to {}: nothing to backfill",
                current.cron,
                req.from.to_rfc3339(),
                req.to.to_rfc3339()
            )));
        }
        let overlap = req.overlap.unwrap_or(current.overlap_policy);
        let backfill = Backfill {
            id: u64::try_from(now.timestamp_millis()).unwrap_or_default(),
            from: req.from,
            to: req.to,
            overlap,
            requested_at: now,
            ticks,
            done: 0,
            fired: 0,
            waiting_for: None,
            waiting_since: None,
            last_reported: None,
            finished_at: None,
        };
        let n_ticks = backfill.ticks.len();
        let started = std::sync::Mutex::new(false);
        let mut reply = self
            .change(&req.name, actor, |record, _now| {
                // Another backfill may have started since the read: it stays.
                if record
                    .status
                    .backfill
                    .as_ref()
                    .is_none_or(|b| b.next_tick().is_none())
                {
                    record.status.backfill = Some(backfill.clone());
                    *started.lock().expect("not poisoned") = true;
                }
            })
            .await?;
        if !started.into_inner().expect("not poisoned") {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("schedule {} started another backfill meanwhile", req.name),
            ));
        }
        tracing::info!(schedule = %req.name, ticks = n_ticks, overlap = ?overlap, "backfill requested");
        reply["backfill"] = json!({
            "id": backfill.id,
            "ticks": n_ticks,
            "first": backfill.ticks.first(),
            "last": backfill.ticks.last(),
            "overlap": overlap,
        });
        Ok(reply)
    }
}
