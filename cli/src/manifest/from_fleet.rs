//! The manifests of what the fleet has (schedules, delete plugins, locations): what `sexton get
//! -o yaml` writes, and what `apply` reads back unchanged.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sexton_model::{conditions, records::ScheduleRecord};
use sexton_shared::api::{LocationSpec, PluginSpec, ScheduleSpec};

use super::API_VERSION;

/// The manifest of one of the fleet's locations: what `sexton get locations` writes, and what
/// applies back unchanged (every field the fleet has, no credentials).
pub fn location_manifest_of(spec: &LocationSpec) -> Value {
    let Value::Object(mut body) = serde_json::to_value(spec).expect("a location serialises") else {
        unreachable!("a location is an object");
    };
    body.remove("name");
    serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": "Location",
        "metadata": {"name": spec.name},
        "spec": body,
    })
}

/// The manifest of a live schedule: what `sexton get schedules -o yaml` writes, and what
/// applies back unchanged (without apply's own annotation, which apply adds back). With
/// `status_at`, also `metadata.generation` and the status at that instant, which apply
/// ignores.
pub fn manifest_of(record: &ScheduleRecord, status_at: Option<DateTime<Utc>>) -> Value {
    let Value::Object(mut spec) = ScheduleSpec::of_record(record).canonical() else {
        unreachable!("a spec is an object");
    };
    let mut metadata = Map::new();
    metadata.insert("name".into(), spec.remove("name").unwrap_or(Value::Null));
    for key in ["labels", "annotations"] {
        if let Some(value) = spec.remove(key) {
            metadata.insert(key.into(), value);
        }
    }
    let mut manifest = Map::new();
    manifest.insert("apiVersion".into(), Value::String(API_VERSION.into()));
    manifest.insert("kind".into(), Value::String("Schedule".into()));
    if status_at.is_some() && record.generation > 0 {
        metadata.insert("generation".into(), Value::from(record.generation));
    }
    let mut metadata = Value::Object(metadata);
    sexton_shared::api::without_apply_annotations(&mut metadata);
    manifest.insert("metadata".into(), metadata);
    manifest.insert("spec".into(), Value::Object(spec));
    if let Some(now) = status_at {
        manifest.insert("status".into(), status_of(record, now));
    }
    Value::Object(manifest)
}

/// The manifest of a registered delete plugin: what `sexton get deleteplugins` writes, and
/// what applies back unchanged. With `with_status`, the time it was registered, which apply
/// ignores.
pub fn plugin_manifest_of(spec: &PluginSpec, with_status: bool) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(spec.name.clone()));
    if !spec.labels.is_empty() {
        metadata.insert("labels".into(), serde_json::json!(spec.labels));
    }
    if !spec.annotations.is_empty() {
        metadata.insert("annotations".into(), serde_json::json!(spec.annotations));
    }
    let mut metadata = Value::Object(metadata);
    sexton_shared::api::without_apply_annotations(&mut metadata);
    let mut body = Map::new();
    body.insert("subject".into(), Value::String(spec.subject.clone()));
    if !spec.selector.is_empty() {
        body.insert("selector".into(), serde_json::json!(spec.selector));
    }
    if let Some(timeout) = spec.timeout_seconds {
        body.insert("timeout_seconds".into(), Value::from(timeout));
    }
    let mut manifest = Map::new();
    manifest.insert("apiVersion".into(), Value::String(API_VERSION.into()));
    manifest.insert("kind".into(), Value::String("DeletePlugin".into()));
    manifest.insert("metadata".into(), metadata);
    manifest.insert("spec".into(), Value::Object(body));
    if let (true, Some(at)) = (with_status, spec.registered_at) {
        manifest.insert(
            "status".into(),
            serde_json::json!({
                "registeredAt": at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            }),
        );
    }
    Value::Object(manifest)
}

/// A schedule's status as a manifest shows it, in Kubernetes' shape (camelCase, conditions),
/// for health checks: what the scheduler recorded, and the conditions decided from it at `now`
/// (`sexton_model::conditions`).
pub fn status_of(record: &ScheduleRecord, now: DateTime<Utc>) -> Value {
    let status = &record.status;
    let mut out = Map::new();
    let mut put = |key: &str, value: Value| {
        if !value.is_null() {
            out.insert(key.into(), value);
        }
    };
    let time = |t: Option<DateTime<Utc>>| {
        t.map_or(Value::Null, |t| {
            Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        })
    };
    put(
        "observedGeneration",
        Value::from(status.observed_generation),
    );
    put(
        "phase",
        serde_json::to_value(status.phase).unwrap_or(Value::Null),
    );
    put("lastBackup", time(status.last_backup));
    put(
        "lastBackupOutcome",
        serde_json::to_value(conditions::last_backup_outcome(record)).unwrap_or(Value::Null),
    );
    put("lastCompleted", time(status.last_completed));
    put("nextRun", time(status.next_run_time));
    put("lastSkipped", time(status.last_skipped));
    put(
        "lastSkipReason",
        status
            .last_skip_reason
            .as_ref()
            .map_or(Value::Null, |r| Value::String(r.clone())),
    );
    if status.consecutive_failures > 0 {
        put(
            "consecutiveFailures",
            Value::from(status.consecutive_failures),
        );
    }
    put(
        "conditions",
        serde_json::to_value(conditions::schedule_conditions(record, now))
            .expect("conditions serialise"),
    );
    Value::Object(out)
}

/// Manifests as YAML documents, `---` between them (what `-o yaml` writes and apply reads).
pub fn to_yaml_documents(manifests: &[Value]) -> String {
    manifests
        .iter()
        .map(crate::output::to_yaml)
        .collect::<Vec<_>>()
        .join("---\n")
}
