//! The scheduler's audit entries (docs/safety.md): every API request that could change
//! something (with who asked, the verb, the arguments and how it ended), every schedule created,
//! changed or deleted (its settings before and after), and every catalog record a user's request
//! removed without the deleter (a record-only delete). Stored before the reply is sent, so a
//! client that reads the audit after an answer finds its request there.

use serde_json::Value;
use sexton_model::records::{BackupRecord, ScheduleRecord};
use sexton_shared::{
    api::ApiError,
    audit::{self, Actor, AuditBackup, AuditEvent},
};

use super::Api;

/// Requests that only read, and are not audited.
const READ_ONLY: &[&str] = &[
    "schedule.get",
    "schedule.describe",
    "schedule.list",
    "backup.list",
    "backup.describe",
    "backup.taken",
];

/// A schedule's settings as the audit shows them: without the status the scheduler rewrites.
fn settings(schedule: &ScheduleRecord) -> Value {
    let mut value = serde_json::to_value(schedule).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("status");
    }
    value
}

impl Api {
    /// One `user-action` entry for a request that could change something, through the one
    /// writer every service's API shares.
    pub(super) async fn audit_request(
        &self,
        verb: &str,
        arguments: Value,
        actor: &Actor,
        result: &Result<Value, ApiError>,
    ) {
        // A request naming only a schedule (a refused update, a pause) is filed under the
        // schedule's cluster, so `sexton audit --cluster` finds it.
        let mut filed_under = None;
        if !audit::changes_nothing(verb, &arguments, READ_ONLY)
            && audit::request_cluster(&arguments, result).is_none()
            && (verb.starts_with("schedule.") || verb == "backup.create")
        {
            if let Some(name) = arguments.get("name").and_then(Value::as_str) {
                filed_under = self.read(name).await.ok().map(|(record, _)| record.cluster);
            }
        }
        self.audit
            .user_action(verb, arguments, READ_ONLY, filed_under, actor, result)
            .await;
    }

    /// One `schedule-changed` entry, unless the settings did not change.
    pub(super) async fn audit_schedule(
        &self,
        before: Option<&ScheduleRecord>,
        after: Option<&ScheduleRecord>,
        actor: &Actor,
    ) {
        let (before_settings, after_settings) = (before.map(settings), after.map(settings));
        if before_settings == after_settings {
            return;
        }
        let Some(schedule) = after.or(before) else {
            return;
        };
        let entry = self.audit.entry(
            Some(&schedule.cluster),
            Some(&schedule.plan),
            AuditEvent::ScheduleChanged {
                schedule: schedule.name.to_string(),
                before: before_settings,
                after: after_settings,
            },
        );
        let _ = self.audit.record_by(actor, vec![entry]).await;
    }

    /// One `records-removed` entry for records a user's request removed, objects kept.
    pub(super) async fn audit_records_removed(
        &self,
        records: &[&BackupRecord],
        why: &str,
        actor: &Actor,
    ) {
        let Some(first) = records.first() else {
            return;
        };
        let backups: Vec<AuditBackup> = records
            .iter()
            .map(|record| AuditBackup {
                id: record.id.to_string(),
                uid: record.uid.clone(),
                reasons: vec![why.to_string()],
                ..Default::default()
            })
            .collect();
        let entries = self
            .audit
            .entries(Some(&first.cluster), None, backups, |backups| {
                AuditEvent::RecordsRemoved { backups }
            });
        let _ = self.audit.record_by(actor, entries).await;
    }
}
