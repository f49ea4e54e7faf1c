//! `sexton apply -f`, `sexton diff -f` and `sexton get schedules` (issue 31): manifests in,
//! the fleet's schedules made to match, and the fleet's schedules out as manifests. What a
//! manifest is, and every comparison, is `crate::manifest`'s; this module talks to the API.
//!
//! The whole set is judged before anything changes: the files are read and checked, then every
//! create and update is asked as a dry run (the scheduler's own checks: locations, the policy's
//! effect). One bad document, or a change that would delete backups without `--yes`, and
//! nothing is applied.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use sexton_shared::{
    api::{ScheduleChangeNotes, ScheduleDelete, ScheduleDescription, ScheduleSpec},
    records::{BackupOwner, ScheduleRecord},
    topology,
    wire::SCHEMA_VERSION,
};

use crate::client::{decode_reply, Client};
use crate::failure::Failure;
use crate::listing::Selector;
use crate::manifest::{self, ScheduleManifest};
use crate::output::Output;

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
pub fn read(files: &[PathBuf]) -> Result<Vec<ScheduleManifest>, Failure> {
    let (documents, mut errors) = manifest::read(files);
    match manifest::schedules(&documents) {
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
    desired: &[ScheduleManifest],
    dry_run: bool,
    yes: bool,
    prune: Option<&Selector>,
) -> Result<(), Failure> {
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
            errors.push(format!(
                "schedule {name}: the change {}; give --yes to apply it (the breaker still \
                 judges the run that deletes)",
                deletes.join(" and ")
            ));
        }
    }
    if !errors.is_empty() {
        return Err(Failure::input(format!(
            "{}\nnothing was applied",
            errors.join("\n")
        )));
    }

    let mut results: Vec<(String, &str)> = Vec::new();
    for step in &steps {
        let word = match step.action {
            Action::Create => "created",
            Action::Update => "configured",
            Action::Unchanged => "unchanged",
        };
        if !dry_run {
            if let Err(error) = send(client, step, yes, false).await? {
                // The dry run passed and this did not: something changed meanwhile. What was
                // applied before stays; say what was and was not.
                print_results(output, &results, dry_run);
                return Err(Failure {
                    code: 1,
                    message: format!(
                        "{error}\nthe schedules above were applied; the rest were not"
                    ),
                });
            }
        }
        results.push((step.manifest.spec.name.to_string(), word));
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
        results.push((record.name.to_string(), "pruned"));
    }
    print_results(output, &results, dry_run);
    Ok(())
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
        let managed = record
            .annotations
            .get(manifest::MANAGED_BY)
            .map(String::as_str)
            == Some(manifest::MANAGER);
        let named = desired.iter().any(|m| m.spec.name == record.name);
        if !managed || named || !selector.matches(Some(&labels_of(record))) {
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

fn print_results(output: Output, results: &[(String, &str)], dry_run: bool) {
    match output {
        Output::Json | Output::Yaml => {
            let rows: Vec<Value> = results
                .iter()
                .map(|(name, word)| {
                    serde_json::json!({"kind": "Schedule", "name": name, "result": word,
                                       "dry_run": dry_run})
                })
                .collect();
            crate::output::document(output, &Value::Array(rows));
        }
        _ => {
            for (name, word) in results {
                let note = if dry_run { " (dry run)" } else { "" };
                println!("schedule/{name} {word}{note}");
            }
        }
    }
}

/// `sexton diff -f PATH…`: each schedule's live spec against its manifest as a unified diff,
/// and what applying would delete now; `Ok(true)` when anything differs.
pub async fn diff(client: &Client, desired: &[ScheduleManifest]) -> Result<bool, Failure> {
    let live: BTreeMap<String, ScheduleRecord> = live_schedules(client)
        .await?
        .into_iter()
        .map(|described| (described.schedule.name.to_string(), described.schedule))
        .collect();
    let steps = steps(desired, &live)?;
    let mut differs = false;
    for step in &steps {
        let name = &step.manifest.spec.name;
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
    Ok(differs)
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
    let manifests: Vec<Value> = live
        .iter()
        .map(|described| &described.schedule)
        .filter(|record| name.is_none_or(|name| record.name.as_str() == name))
        .filter(|record| selector.is_none_or(|s| s.matches(Some(&labels_of(record)))))
        .map(|record| manifest::manifest_of(record, status_at))
        .collect();
    if let (Some(name), true) = (name, manifests.is_empty()) {
        return Err(Failure::input(format!("schedule {name} not found")));
    }
    match output {
        Output::Json => crate::output::document(
            output,
            &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": manifests}),
        ),
        _ => print!("{}", manifest::to_yaml_documents(&manifests)),
    }
    Ok(())
}

/// A schedule's labels as the listing's selectors read them.
fn labels_of(record: &ScheduleRecord) -> Value {
    serde_json::to_value(&record.labels).expect("labels serialise")
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
