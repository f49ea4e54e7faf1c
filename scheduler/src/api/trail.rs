//! The scheduler's audit entries (docs/safety.md): every API request that could change
//! something (with who asked, the verb, the arguments and how it ended), every schedule created,
//! changed or deleted (its settings before and after), and every catalog record a user's request
//! removed without the deleter (a record-only delete). Stored before the reply is sent, so a
//! client that reads the audit after an answer finds its request there.

use serde_json::{json, Value};
use sexton_shared::{
    api::ApiError,
    audit::{Actor, AuditBackup, AuditEvent},
    names::ClusterName,
    records::{BackupRecord, ScheduleRecord},
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

/// Whether a request changes nothing: a read, or a dry run.
pub(super) fn changes_nothing(verb: &str, arguments: &Value) -> bool {
    READ_ONLY.contains(&verb) || arguments.get("dry_run") == Some(&Value::Bool(true))
}

/// A request body as JSON, or its first characters as text when it is not JSON.
pub(super) fn arguments_of(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| json!(String::from_utf8_lossy(&body[..body.len().min(1000)])))
}

/// A schedule's settings as the audit shows them: without the status the scheduler rewrites.
fn settings(schedule: &ScheduleRecord) -> Value {
    let mut value = serde_json::to_value(schedule).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("status");
    }
    value
}

impl Api {
    /// One `user-action` entry for a request that could change something.
    pub(super) async fn audit_request(
        &self,
        verb: &str,
        arguments: Value,
        actor: &Actor,
        result: &Result<Value, ApiError>,
    ) {
        if changes_nothing(verb, &arguments) {
            return;
        }
        let mut cluster = arguments
            .get("cluster")
            .and_then(Value::as_str)
            .or_else(|| {
                result
                    .as_ref()
                    .ok()
                    .and_then(|reply| reply.pointer("/schedule/cluster"))
                    .and_then(Value::as_str)
            })
            .and_then(|name| name.parse::<ClusterName>().ok());
        // A request naming only a schedule (a refused update, a pause) is filed under the
        // schedule's cluster, so `sexton audit --cluster` finds it.
        if cluster.is_none() && (verb.starts_with("schedule.") || verb == "backup.create") {
            if let Some(name) = arguments.get("name").and_then(Value::as_str) {
                cluster = self.read(name).await.ok().map(|(record, _)| record.cluster);
            }
        }
        let (outcome, error) = match result {
            Ok(_) => ("done".to_string(), None),
            Err(err) if err.needs_confirmation() => (
                "refused, needs confirmation".to_string(),
                Some(err.message.clone()),
            ),
            Err(err) => (
                serde_json::to_value(err.code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "error".into()),
                Some(err.message.clone()),
            ),
        };
        let mut entry = self.audit.entry(
            cluster.as_ref(),
            None,
            AuditEvent::UserAction {
                verb: verb.to_string(),
                arguments,
                outcome,
                error,
            },
        );
        entry.actor = Some(actor.clone());
        let _ = self.audit.record(vec![entry]).await;
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
        let mut entry = self.audit.entry(
            Some(&schedule.cluster),
            Some(&schedule.plan),
            AuditEvent::ScheduleChanged {
                schedule: schedule.name.to_string(),
                before: before_settings,
                after: after_settings,
            },
        );
        entry.actor = Some(actor.clone());
        let _ = self.audit.record(vec![entry]).await;
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
        let mut entries = self
            .audit
            .entries(Some(&first.cluster), None, backups, |backups| {
                AuditEvent::RecordsRemoved { backups }
            });
        for entry in &mut entries {
            entry.actor = Some(actor.clone());
        }
        let _ = self.audit.record(entries).await;
    }
}
