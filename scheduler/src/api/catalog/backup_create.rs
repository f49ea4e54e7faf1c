//! `backup.create` (`sexton backup create --from-schedule NAME`): a backup now.

use chrono::Utc;
use serde_json::{json, Value};
use sexton_shared::api::{ApiError, ByName};

use crate::api::{unavailable, Api};
use crate::timers;

impl Api {
    /// `backup create --from-schedule`: a backup now, with the schedule's settings. The
    /// schedule's own timing is untouched (as `velero backup create --from-schedule`).
    pub(in crate::api) async fn backup_create(&self, req: ByName) -> Result<Value, ApiError> {
        let (record, _) = self.read(req.name.as_str()).await?;
        // Whole seconds: the backup id carries the instant to the second, and a second
        // request within the same second is the same request (its message id).
        let now = Utc::now();
        let tick = chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now);
        let backup_id = timers::backup_id_for(&record.name, timers::Asking::Manual, tick, tick);
        let request = timers::DueRequest {
            tick,
            fired_at: now,
            backup_id: backup_id.clone(),
            message_id: sexton_shared::channels::ids::due_manual(record.name.as_str(), tick),
            backfill: None,
        };
        let duplicate = timers::publish_due(
            &self.topology,
            &self.dues,
            &self.config,
            &(&record).into(),
            &request,
            Some(&self.metrics),
        )
        .await
        .map_err(|err| unavailable(format!("{err:#}")))?
        .duplicate;
        tracing::info!(schedule = %record.name, tick = %tick, duplicate, "manual backup requested");
        Ok(json!({
            "backup_id": backup_id,
            "schedule": record.name,
            "tick": tick,
            "duplicate": duplicate,
        }))
    }
}
