//! `sexton apply -f`, `sexton diff -f` and `sexton get` (issue 31): manifests in, the fleet's
//! schedules and delete plugins made to match, and the fleet's objects out as manifests. What
//! a manifest is, and every comparison, is `crate::manifest`'s; this module talks to the API
//! (schedules to the scheduler, delete plugins to the deleter).
//!
//! The whole set is judged before anything changes: the files are read and checked, then every
//! create and update is asked as a dry run (the scheduler's own checks: locations, the policy's
//! effect). One bad document, or a change that would delete backups without `--yes`, and
//! nothing is applied.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use sexton_model::{
    records::{BackupOwner, ScheduleRecord},
    wire::SCHEMA_VERSION,
};
use sexton_shared::{
    api::{
        LocationList, LocationSpec, PluginByName, PluginList, PluginSpec, ScheduleChangeNotes,
        ScheduleDelete, ScheduleDescription, ScheduleSpec,
    },
    topology,
};

use crate::client::{decode_reply, Client};
use crate::failure::Failure;
use crate::listing::Selector;
use crate::manifest::{self, Kind, LocationManifest, Manifests, PluginManifest, ScheduleManifest};
use crate::output::Output;

mod get;

pub use get::{get, get_locations, get_plugins};

/// What apply does to one schedule.
#[derive(Debug)]
enum Action {
    Create,
    Update,
    Unchanged,
}

/// One manifest's schedule, its live counterpart and what apply does.
struct Step<'a> {
    manifest: &'a ScheduleManifest,
    live: Option<&'a ScheduleRecord>,
    action: Action,
}

/// Reads and checks the manifests of `files`: every problem at once, as bad input (before
/// the fleet is asked anything).
pub fn read(files: &[PathBuf]) -> Result<Manifests, Failure> {
    let (documents, mut errors) = manifest::read(files);
    match manifest::manifests(&documents) {
        Ok(found) if errors.is_empty() => return Ok(found),
        Ok(_) => {}
        Err(more) => errors.extend(more),
    }
    Err(Failure::input(format!(
        "{}\nnothing was applied",
        errors.join("\n")
    )))
}

async fn live_schedules(client: &Client) -> Result<Vec<ScheduleDescription>, Failure> {
    client
        .call_as(
            &topology::api_subject("schedule", "list"),
            &sexton_shared::api::ListFilter::default(),
        )
        .await
}

fn steps<'a>(
    desired: &'a [ScheduleManifest],
    live: &'a BTreeMap<String, ScheduleRecord>,
) -> Result<Vec<Step<'a>>, Failure> {
    let mut steps = Vec::new();
    let mut errors = Vec::new();
    for manifest in desired {
        let record = live.get(manifest.spec.name.as_str());
        let action = match record {
            None => Action::Create,
            Some(record) => {
                if let Some(why) = manifest::immutable_change(record, &manifest.spec) {
                    errors.push(format!("{}: {why}", manifest.at));
                    continue;
                }
                if ScheduleSpec::of_record(record).compared() == manifest.spec.compared() {
                    Action::Unchanged
                } else {
                    Action::Update
                }
            }
        };
        steps.push(Step {
            manifest,
            live: record,
            action,
        });
    }
    if errors.is_empty() {
        Ok(steps)
    } else {
        Err(Failure::input(format!(
            "{}\nnothing was applied",
            errors.join("\n")
        )))
    }
}

/// Asks the scheduler to create or update one schedule (`dry_run`: only to say what it would
/// do). The API's refusal is the inner `Err`, with the manifest's place.
async fn send(
    client: &Client,
    step: &Step<'_>,
    confirm: bool,
    dry_run: bool,
) -> Result<Result<ScheduleChangeNotes, String>, Failure> {
    let answer = match step.action {
        Action::Create => {
            let spec = ScheduleSpec {
                confirm,
                dry_run,
                ..step.manifest.spec.clone()
            };
            client
                .call_raw(&topology::api_subject("schedule", "create"), &spec)
                .await?
        }
        Action::Update => {
            let update = manifest::update_of(&step.manifest.spec, confirm, dry_run);
            client
                .call_raw(&topology::api_subject("schedule", "update"), &update)
                .await?
        }
        Action::Unchanged => return Ok(Ok(ScheduleChangeNotes::default())),
    };
    match answer {
        Ok(value) => Ok(Ok(decode_reply("schedule change", value)?)),
        Err(error) => Ok(Err(format!(
            "{}: schedule {}: {}",
            step.manifest.at, step.manifest.spec.name, error.message
        ))),
    }
}

/// What a change deletes at once (its policy's, and each copy rule's at its location), in
/// words; empty when nothing.
fn deletions(notes: &ScheduleChangeNotes) -> Vec<String> {
    let mut said = Vec::new();
    if let Some(change) = &notes.policy_change {
        if !change.deleted.is_empty() || !change.volumes_deleted.is_empty() {
            said.push(format!(
                "deletes {} backups and {} volumes of backups kept now",
                change.deleted.len(),
                change.volumes_deleted.len()
            ));
        }
    }
    for (location, change) in &notes.copy_changes {
        if !change.deleted.is_empty() {
            said.push(format!(
                "deletes {} copies at {location} kept now",
                change.deleted.len()
            ));
        }
    }
    said
}

/// `sexton apply -f PATH… [--dry-run] [--yes] [--prune -l SELECTOR]`.
pub async fn apply(
    client: &Client,
    output: Output,
    manifests: &Manifests,
    dry_run: bool,
    yes: bool,
    prune: Option<&Selector>,
) -> Result<(), Failure> {
    let desired = &manifests.schedules[..];
    // Locations first: a fleet whose stores are not those the manifests declare is not the
    // fleet they were written for.
    let locations_checked = check_locations(client, &manifests.locations).await?;
    // The deleter is asked only when plugins are in play.
    let plugins_live = if manifests.plugins.is_empty() && prune.is_none() {
        BTreeMap::new()
    } else {
        live_plugins(client).await?
    };
    let plugin_steps = plugin_steps(&manifests.plugins, &plugins_live);
    let plugins_pruned = prunable_plugins(&manifests.plugins, &plugins_live, prune);
    let live_list = live_schedules(client).await?;
    let live: BTreeMap<String, ScheduleRecord> = live_list
        .into_iter()
        .map(|described| (described.schedule.name.to_string(), described.schedule))
        .collect();
    let steps = steps(desired, &live)?;
    let pruned = prunable(desired, &live, prune)?;
    for cluster in left_without_schedules(desired, &live, &pruned) {
        eprintln!(
            "warning: cluster {cluster} is left without a schedule: no new backups are taken; \
             the backups it has keep their retention (their records stay with the cluster)"
        );
    }

    // The whole set judged first, by the scheduler, as dry runs.
    let mut errors = Vec::new();
    let mut effects: Vec<(String, Vec<String>)> = Vec::new();
    for step in &steps {
        match send(client, step, yes, true).await? {
            Ok(notes) => {
                for warning in &notes.warnings {
                    eprintln!("warning: schedule {}: {warning}", step.manifest.spec.name);
                }
                if let Some(change) = &notes.policy_change {
                    if !change.diff.is_empty() || !change.deleted.is_empty() {
                        crate::safety::print_policy_change(
                            &format!("schedule {}: policy change", step.manifest.spec.name),
                            change,
                        );
                    }
                }
                let deletes = deletions(&notes);
                if !deletes.is_empty() {
                    effects.push((step.manifest.spec.name.to_string(), deletes));
                }
            }
            Err(error) => errors.push(error),
        }
    }
    if !yes {
        for (name, deletes) in &effects {
            let said = format!(
                "schedule {name}: the change {}; give --yes to apply it (the breaker still \
                 judges the run that deletes)",
                deletes.join(" and ")
            );
            // A dry run reports what applying would need and ends well (kubectl apply
            // --dry-run=server does; issue 50): only the real apply refuses.
            if dry_run {
                eprintln!("note: {said}");
            } else {
                errors.push(said);
            }
        }
    }
    if !errors.is_empty() {
        return Err(Failure::input(format!(
            "{}\nnothing was applied",
            errors.join("\n")
        )));
    }

    let mut results: Vec<(Kind, String, &str)> = locations_checked
        .into_iter()
        .map(|name| (Kind::Location, name, "unchanged"))
        .collect();
    // Plugins first: a deletion the new schedules cause runs the plugins they go with.
    for (manifest, action) in &plugin_steps {
        if !dry_run && !matches!(action, Action::Unchanged) {
            if let Err(error) = register(client, manifest).await? {
                print_results(output, &results, dry_run);
                return Err(Failure {
                    code: 1,
                    message: format!("{error}\nthe objects above were applied; the rest were not"),
                });
            }
        }
        results.push((
            Kind::DeletePlugin,
            manifest.spec.name.clone(),
            action.word(),
        ));
    }
    for step in &steps {
        let word = step.action.word();
        if !dry_run {
            if let Err(error) = send(client, step, yes, false).await? {
                // The dry run passed and this did not: something changed meanwhile. What was
                // applied before stays; say what was and was not.
                print_results(output, &results, dry_run);
                return Err(Failure {
                    code: 1,
                    message: format!("{error}\nthe objects above were applied; the rest were not"),
                });
            }
        }
        results.push((Kind::Schedule, step.manifest.spec.name.to_string(), word));
    }
    for record in &pruned {
        if !dry_run {
            let request = ScheduleDelete {
                schema_version: SCHEMA_VERSION,
                name: record.name.clone(),
                dry_run: false,
            };
            client
                .call(&topology::api_subject("schedule", "delete"), &request)
                .await?;
        }
        results.push((Kind::Schedule, record.name.to_string(), "pruned"));
    }
    for name in &plugins_pruned {
        if !dry_run {
            let request = PluginByName {
                schema_version: SCHEMA_VERSION,
                name: name.clone(),
            };
            client
                .call(&topology::api_subject("plugin", "unregister"), &request)
                .await?;
        }
        results.push((Kind::DeletePlugin, name.clone(), "pruned"));
    }
    print_results(output, &results, dry_run);
    Ok(())
}

impl Action {
    fn word(&self) -> &'static str {
        match self {
            Action::Create => "created",
            Action::Update => "configured",
            Action::Unchanged => "unchanged",
        }
    }
}

/// The fleet's locations, by name (`location.list`, answered by the scheduler).
async fn live_locations(client: &Client) -> Result<BTreeMap<String, LocationSpec>, Failure> {
    let listed: Vec<LocationSpec> = client
        .call_as(
            &topology::api_subject("location", "list"),
            &LocationList::default(),
        )
        .await?;
    Ok(listed.into_iter().map(|l| (l.name.clone(), l)).collect())
}

/// Checks each declared location against the fleet's: the names of those that match, or
/// every difference as bad input (a location is the services' configuration: apply never
/// changes one, and applies nothing while one differs).
async fn check_locations(
    client: &Client,
    desired: &[LocationManifest],
) -> Result<Vec<String>, Failure> {
    if desired.is_empty() {
        return Ok(Vec::new());
    }
    let live = live_locations(client).await?;
    let mut errors = Vec::new();
    for manifest in desired {
        let name = &manifest.spec.name;
        match live.get(name) {
            None => errors.push(format!(
                "{}: location {name}: the fleet has no such location (it has {}); add \
                 [locations.{name}] to the services' configuration and restart them",
                manifest.at,
                live.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
            Some(have) => {
                let differences = manifest.spec.differences(have);
                if !differences.is_empty() {
                    errors.push(format!(
                        "{}: location {name} differs from the fleet's ({}); a location is the \
                         services' configuration, which apply never changes: change it there \
                         and restart them, or the manifest",
                        manifest.at,
                        differences.join("; ")
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(desired.iter().map(|m| m.spec.name.clone()).collect())
    } else {
        Err(Failure::input(format!(
            "{}\nnothing was applied",
            errors.join("\n")
        )))
    }
}

/// A delete plugin as the deleter lists it: its spec, or why it cannot be read (a manifest
/// of that name registers it afresh; prune never touches it).
enum LivePlugin {
    Plugin(PluginSpec),
    Unreadable,
}

/// The registered delete plugins, by name (`plugin.list`, answered by the deleter).
async fn live_plugins(client: &Client) -> Result<BTreeMap<String, LivePlugin>, Failure> {
    let listed: Vec<Value> = client
        .call_as(
            &topology::api_subject("plugin", "list"),
            &PluginList::default(),
        )
        .await?;
    let mut live = BTreeMap::new();
    for entry in listed {
        let Some(name) = entry.get("name").and_then(Value::as_str).map(str::to_owned) else {
            continue;
        };
        let plugin = match serde_json::from_value::<PluginSpec>(entry) {
            Ok(spec) => LivePlugin::Plugin(spec),
            Err(_) => LivePlugin::Unreadable,
        };
        live.insert(name, plugin);
    }
    Ok(live)
}

/// What apply does to each manifest's plugin.
fn plugin_steps<'a>(
    desired: &'a [PluginManifest],
    live: &BTreeMap<String, LivePlugin>,
) -> Vec<(&'a PluginManifest, Action)> {
    desired
        .iter()
        .map(|manifest| {
            let action = match live.get(&manifest.spec.name) {
                None => Action::Create,
                Some(LivePlugin::Plugin(spec)) if spec.compared() == manifest.spec.compared() => {
                    Action::Unchanged
                }
                Some(_) => Action::Update,
            };
            (manifest, action)
        })
        .collect()
}

/// The plugins `--prune -l SELECTOR` unregisters: those apply manages, whose own labels
/// match, that no manifest names. Never one registered by hand, never an unreadable one.
fn prunable_plugins(
    desired: &[PluginManifest],
    live: &BTreeMap<String, LivePlugin>,
    prune: Option<&Selector>,
) -> Vec<String> {
    let Some(selector) = prune else {
        return Vec::new();
    };
    live.iter()
        .filter_map(|(name, plugin)| match plugin {
            LivePlugin::Plugin(spec) => Some((name, spec)),
            LivePlugin::Unreadable => None,
        })
        .filter(|(_, spec)| managed_by_apply(&spec.annotations))
        .filter(|(name, _)| !desired.iter().any(|m| &m.spec.name == *name))
        .filter(|(_, spec)| selector.matches(Some(&labels_of(&spec.labels))))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Registers one manifest's plugin; the deleter's refusal is the inner `Err`.
async fn register(
    client: &Client,
    manifest: &PluginManifest,
) -> Result<Result<(), String>, Failure> {
    match client
        .call_raw(&topology::api_subject("plugin", "register"), &manifest.spec)
        .await?
    {
        Ok(_) => Ok(Ok(())),
        Err(error) => Ok(Err(format!(
            "{}: deleteplugin {}: {}",
            manifest.at, manifest.spec.name, error.message
        ))),
    }
}

/// The live schedules `--prune -l SELECTOR` removes: those apply manages (its annotation),
/// whose labels match, that no manifest names. Never one made by hand, never one outside the
/// selector, never one whose deletion would take its backups (`backup_owner: schedule`).
fn prunable<'a>(
    desired: &[ScheduleManifest],
    live: &'a BTreeMap<String, ScheduleRecord>,
    prune: Option<&Selector>,
) -> Result<Vec<&'a ScheduleRecord>, Failure> {
    let Some(selector) = prune else {
        return Ok(Vec::new());
    };
    let mut pruned = Vec::new();
    let mut errors = Vec::new();
    for record in live.values() {
        let managed = managed_by_apply(&record.annotations);
        let named = desired.iter().any(|m| m.spec.name == record.name);
        if !managed || named || !selector.matches(Some(&labels_of(&record.labels))) {
            continue;
        }
        if record.backup_owner == BackupOwner::Schedule {
            errors.push(format!(
                "schedule {}: pruning it would delete its backups (backup_owner: schedule); \
                 change its backup_owner or delete it by hand",
                record.name
            ));
            continue;
        }
        pruned.push(record);
    }
    if !errors.is_empty() {
        return Err(Failure::input(format!(
            "{}\nnothing was applied",
            errors.join("\n")
        )));
    }
    Ok(pruned)
}

/// The clusters whose every schedule `pruned` removes, with no manifest giving them another:
/// what a prune says before it leaves a database without backups.
fn left_without_schedules(
    desired: &[ScheduleManifest],
    live: &BTreeMap<String, ScheduleRecord>,
    pruned: &[&ScheduleRecord],
) -> Vec<String> {
    let mut clusters: Vec<String> = pruned.iter().map(|r| r.cluster.to_string()).collect();
    clusters.sort();
    clusters.dedup();
    clusters.retain(|cluster| {
        let kept_live = live.values().any(|record| {
            record.cluster.as_str() == cluster && !pruned.iter().any(|p| p.name == record.name)
        });
        let given = desired
            .iter()
            .any(|manifest| manifest.spec.cluster.as_str() == cluster);
        !kept_live && !given
    });
    clusters
}

fn print_results(output: Output, results: &[(Kind, String, &str)], dry_run: bool) {
    match output {
        Output::Json | Output::Yaml => {
            let rows: Vec<Value> = results
                .iter()
                .map(|(kind, name, word)| {
                    serde_json::json!({"kind": kind.name(), "name": name, "result": word,
                                       "dry_run": dry_run})
                })
                .collect();
            crate::output::document(output, &Value::Array(rows));
        }
        _ => {
            for (kind, name, word) in results {
                let note = if dry_run { " (dry run)" } else { "" };
                println!("{}/{name} {word}{note}", kind.word());
            }
        }
    }
}

/// `sexton diff -f PATH…`: each schedule's live spec against its manifest as a unified diff,
/// and what applying would delete now; `Ok(true)` when anything differs.
pub async fn diff(
    client: &Client,
    manifests: &Manifests,
    prune: Option<&Selector>,
) -> Result<bool, Failure> {
    let mut differs = false;
    if !manifests.locations.is_empty() {
        let live = live_locations(client).await?;
        for manifest in &manifests.locations {
            let name = &manifest.spec.name;
            let wanted =
                manifest::to_yaml_documents(&[manifest::location_manifest_of(&manifest.spec)]);
            let (have, differences) = match live.get(name) {
                Some(have) => {
                    // Only the fields the manifest declares: the others are not checked.
                    let declared = manifest::location_manifest_of(&manifest.spec);
                    let mut live = manifest::location_manifest_of(have);
                    if let (Some(live), Some(declared)) =
                        (live["spec"].as_object_mut(), declared["spec"].as_object())
                    {
                        live.retain(|key, _| declared.contains_key(key));
                    }
                    (
                        manifest::to_yaml_documents(&[live]),
                        manifest.spec.differences(have),
                    )
                }
                None => (String::new(), vec!["the fleet has no such location".into()]),
            };
            if differences.is_empty() {
                continue;
            }
            differs = true;
            print!(
                "{}",
                manifest::unified_diff(
                    &format!("live/location/{name}"),
                    &manifest.at,
                    &have,
                    &wanted
                )
            );
            println!(
                "# location {name}: {}; apply refuses: a location is the services' \
                 configuration",
                differences.join("; ")
            );
        }
    }
    if !manifests.plugins.is_empty() {
        let live = live_plugins(client).await?;
        for manifest in &manifests.plugins {
            let name = &manifest.spec.name;
            let wanted = manifest::to_yaml_documents(&[manifest.spec.compared()]);
            let text = match live.get(name) {
                Some(LivePlugin::Plugin(spec)) => manifest::unified_diff(
                    &format!("live/deleteplugin/{name}"),
                    &manifest.at,
                    &manifest::to_yaml_documents(&[spec.compared()]),
                    &wanted,
                ),
                Some(LivePlugin::Unreadable) => manifest::unified_diff(
                    &format!("live/deleteplugin/{name} (unreadable)"),
                    &manifest.at,
                    "",
                    &wanted,
                ),
                None => manifest::unified_diff("/dev/null", &manifest.at, "", &wanted),
            };
            if !text.is_empty() {
                differs = true;
                print!("{text}");
            }
        }
    }
    let desired = &manifests.schedules[..];
    if desired.is_empty() && prune.is_none() {
        return Ok(differs);
    }
    let live: BTreeMap<String, ScheduleRecord> = live_schedules(client)
        .await?
        .into_iter()
        .map(|described| (described.schedule.name.to_string(), described.schedule))
        .collect();
    let steps = steps(desired, &live)?;
    for step in &steps {
        let name = &step.manifest.spec.name;
        crate::simulate::warn_months(&format!("schedule {name}"), &step.manifest.spec.policy);
        let wanted = manifest::to_yaml_documents(&[step.manifest.spec.compared()]);
        let text = match step.live {
            Some(record) => {
                let have =
                    manifest::to_yaml_documents(&[ScheduleSpec::of_record(record).compared()]);
                manifest::unified_diff(
                    &format!("live/schedule/{name}"),
                    &step.manifest.at,
                    &have,
                    &wanted,
                )
            }
            None => manifest::unified_diff("/dev/null", &step.manifest.at, "", &wanted),
        };
        if text.is_empty() {
            continue;
        }
        differs = true;
        print!("{text}");
        match send(client, step, false, true).await? {
            Ok(notes) => {
                for said in deletions(&notes) {
                    println!("# applying it {said}");
                }
            }
            Err(error) => println!("# the scheduler would refuse it: {error}"),
        }
    }
    // What `apply --prune -l SELECTOR` would delete, so a CI gate sees it (issue 50): each
    // such schedule as removed, and each such delete plugin.
    for record in prunable(desired, &live, prune)? {
        differs = true;
        let name = &record.name;
        let have = manifest::to_yaml_documents(&[ScheduleSpec::of_record(record).compared()]);
        print!(
            "{}",
            manifest::unified_diff(&format!("live/schedule/{name}"), "/dev/null", &have, "")
        );
        println!(
            "# schedule {name}: apply --prune deletes it (no manifest names it); its backups \
             stay with cluster {}",
            record.cluster
        );
    }
    if prune.is_some() {
        let plugins = live_plugins(client).await?;
        for name in prunable_plugins(&manifests.plugins, &plugins, prune) {
            differs = true;
            println!("# delete plugin {name}: apply --prune unregisters it (no manifest names it)");
        }
    }
    Ok(differs)
}

/// Whether apply manages an object (its annotation says so): only those are ever pruned.
fn managed_by_apply(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(manifest::MANAGED_BY).map(String::as_str) == Some(manifest::MANAGER)
}

/// An object's labels as the listing's selectors read them.
fn labels_of(labels: &BTreeMap<String, String>) -> Value {
    serde_json::to_value(labels).expect("labels serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, cluster: &str) -> ScheduleRecord {
        serde_json::from_value(serde_json::json!({
            "name": name, "cluster": cluster, "plan": "p", "cron": "@daily",
            "policy": {"keep_last": 3}, "created_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn a_prune_says_which_clusters_it_leaves_without_a_schedule() {
        let live: BTreeMap<String, ScheduleRecord> = [("a", "c1"), ("b", "c1"), ("c", "c2")]
            .into_iter()
            .map(|(name, cluster)| (name.to_string(), record(name, cluster)))
            .collect();
        // Pruning a and c: c1 keeps b, c2 keeps nothing.
        let pruned = vec![&live["a"], &live["c"]];
        assert_eq!(left_without_schedules(&[], &live, &pruned), ["c2"]);
        // A manifest giving c2 a schedule of its own: nothing to say.
        let documents = crate::manifest::parse(
            std::path::Path::new("m.yaml"),
            "apiVersion: sexton.io/v1\nkind: Schedule\nmetadata: {name: d}\n\
             spec: {cluster: c2, plan: p, cron: '@daily', policy: {keep_last: 3}}\n",
        )
        .0;
        let desired = crate::manifest::schedules(&documents).unwrap();
        assert!(left_without_schedules(&desired, &live, &pruned).is_empty());
        // Nothing pruned: nothing said.
        assert!(left_without_schedules(&[], &live, &[]).is_empty());
    }
}
