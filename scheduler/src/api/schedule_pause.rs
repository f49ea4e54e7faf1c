//! `schedule.pause` and `schedule.unpause`.

use serde_json::Value;
use sexton_model::records::SchedulePhase;
use sexton_shared::{
    api::{ApiError, ByName, Unpause},
    audit::Actor,
};

use super::Api;

impl Api {
    /// `schedule.pause`: the schedule stops firing until unpaused.
    pub(super) async fn schedule_pause(
        &self,
        req: ByName,
        actor: &Actor,
    ) -> Result<Value, ApiError> {
        self.change(&req.name, actor, |record, _| {
            record.paused = true;
            record.status.phase = SchedulePhase::Paused;
        })
        .await
    }

    /// `schedule.unpause`: fires again, with a fresh count of failures; the request's
    /// `skip_immediately` decides whether a run missed while paused fires now.
    pub(super) async fn schedule_unpause(
        &self,
        req: Unpause,
        actor: &Actor,
    ) -> Result<Value, ApiError> {
        self.change(&req.name, actor, move |record, _now| {
            if !record.paused {
                return;
            }
            record.paused = false;
            record.status.phase = SchedulePhase::Enabled;
            // Unpausing starts the count of consecutive failures afresh, whoever paused.
            record.status.consecutive_failures = 0;
            record.status.last_failed_backup = None;
            record.status.paused_reason = None;
            // The request's flag overrides the schedule's own; the next evaluation
            // resolves it (else the server default), consumes it and resets it.
            record.skip_immediately = req.skip_immediately.or(record.skip_immediately);
            record.status.activation_pending = true;
        })
        .await
    }
}
