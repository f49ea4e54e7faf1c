//! `sexton get` (issue 31): the fleet's schedules, delete plugins and locations out as
//! manifests, which `sexton apply -f` takes back unchanged.

use serde_json::Value;
use sexton_model::records::ScheduleRecord;

use super::{labels_of, live_locations, live_plugins, live_schedules, LivePlugin};
use crate::client::Client;
use crate::failure::Failure;
use crate::listing::Selector;
use crate::manifest;
use crate::output::Output;

/// `sexton get locations [NAME]`: the fleet's locations as manifests (no credentials).
pub async fn get_locations(
    client: &Client,
    output: Output,
    name: Option<&str>,
) -> Result<(), Failure> {
    let manifests: Vec<Value> = live_locations(client)
        .await?
        .values()
        .filter(|l| name.is_none_or(|name| l.name == name))
        .map(manifest::location_manifest_of)
        .collect();
    write_found(output, "location", name, &manifests)
}

/// `sexton get deleteplugins [NAME] [-l SELECTOR] [--no-status]`: registered delete plugins
/// as manifests, which `sexton apply -f` takes back unchanged. An unreadable registration is
/// named on stderr and left out.
pub async fn get_plugins(
    client: &Client,
    output: Output,
    name: Option<&str>,
    selector: Option<&Selector>,
    with_status: bool,
) -> Result<(), Failure> {
    let mut manifests = Vec::new();
    for (plugin, live) in live_plugins(client).await? {
        if name.is_some_and(|name| name != plugin) {
            continue;
        }
        let LivePlugin::Plugin(spec) = live else {
            eprintln!(
                "warning: delete plugin {plugin} cannot be read (sexton plugin list says why)"
            );
            continue;
        };
        if selector.is_some_and(|s| !s.matches(Some(&labels_of(&spec.labels)))) {
            continue;
        }
        manifests.push(manifest::plugin_manifest_of(&spec, with_status));
    }
    write_found(output, "delete plugin", name, &manifests)
}

/// What `get` found, written as manifests; asked for by `name` and not found, an error; none
/// at all, said on stderr.
fn write_found(
    output: Output,
    what: &str,
    name: Option<&str>,
    manifests: &[Value],
) -> Result<(), Failure> {
    if manifests.is_empty() {
        if let Some(name) = name {
            return Err(Failure::input(format!("{what} {name} not found")));
        }
        eprintln!("no {what}s found");
    }
    match output {
        Output::Json => crate::output::document(
            output,
            &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": manifests}),
        ),
        _ => print!("{}", manifest::to_yaml_documents(manifests)),
    }
    Ok(())
}

/// `sexton get schedules [NAME] [-l SELECTOR] [--no-status]`: live schedules as manifests
/// (YAML documents, or a JSON `List`), which `sexton apply -f` takes back unchanged; with
/// their status unless `with_status` is false.
pub async fn get(
    client: &Client,
    output: Output,
    name: Option<&str>,
    selector: Option<&Selector>,
    with_status: bool,
) -> Result<(), Failure> {
    let live = live_schedules(client).await?;
    let now = chrono::Utc::now();
    let status_at = with_status.then_some(now);
    let mut manifests = Vec::new();
    for described in live
        .iter()
        .filter(|d| name.is_none_or(|name| d.schedule.name.as_str() == name))
        .filter(|d| selector.is_none_or(|s| s.matches(Some(&labels_of(&d.schedule.labels)))))
    {
        let record = &described.schedule;
        let mut manifest = manifest::manifest_of(record, status_at);
        if with_status {
            let mut added = vec![sexton_model::conditions::retention_decided(
                described.retention.as_ref(),
            )];
            if states_objectives(record) {
                added.push(recoverable_condition(client, record).await);
            }
            if let Some(conditions) = manifest
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut)
            {
                conditions.extend(
                    added
                        .into_iter()
                        .map(|c| serde_json::to_value(c).expect("conditions serialise")),
                );
            }
        }
        manifests.push(manifest);
    }
    write_found(output, "schedule", name, &manifests)
}

/// Whether a schedule states recovery objectives, for primary or for a copy rule's location.
fn states_objectives(record: &ScheduleRecord) -> bool {
    record.objectives.is_some() || record.copies.iter().any(|rule| rule.objectives.is_some())
}

/// The `Recoverable` condition of a schedule with objectives (issue 47): its group's recovery
/// value at every place, as the retention-worker computes it now (`recovery.window`); the
/// schedule's own objectives and its copy rules' are those checked.
async fn recoverable_condition(
    client: &Client,
    record: &ScheduleRecord,
) -> sexton_model::conditions::Condition {
    let request = sexton_shared::api::RecoveryRequest {
        schema_version: sexton_model::wire::SCHEMA_VERSION,
        cluster: record.cluster.clone(),
        plan: Some(record.plan.clone()),
        location: None,
    };
    let subject = sexton_shared::topology::api_subject("recovery", "window");
    let answer: Result<Vec<sexton_shared::recovery::PlaceRecovery>, Failure> =
        client.call_as(&subject, &request).await;
    match answer {
        Ok(places) => sexton_model::conditions::recoverable(Ok(&places)),
        Err(failure) => sexton_model::conditions::recoverable(Err(&failure.message)),
    }
}
