//! The names a user typed, checked against what the fleet knows: a schedule that is not found
//! gets the closest name suggested, and a reading verb's empty answer for a name nothing knows
//! is an error, not an empty table and exit 0.

use std::collections::BTreeSet;

use serde_json::Value;
use sexton_shared::{
    api::{ListFilter, ScheduleDescription},
    topology,
};

use super::args::*;
use super::values::parsed;
use crate::client::Client;
use crate::failure::Failure;

/// A not-found schedule gets the closest existing name suggested.
pub(super) async fn suggest(client: &Client, command: &Command, failure: Failure) -> Failure {
    let name = match command {
        Command::Schedule(
            ScheduleCommand::Get {
                name: Some(name), ..
            }
            | ScheduleCommand::Next {
                schedule: Some(name),
                ..
            }
            | ScheduleCommand::Describe { name, .. }
            | ScheduleCommand::Delete { name, .. }
            | ScheduleCommand::Pause { name }
            | ScheduleCommand::Unpause { name, .. }
            | ScheduleCommand::Backfill { name, .. },
        ) => name,
        Command::Schedule(ScheduleCommand::Update(args)) => &args.name,
        Command::Backup(BackupCommand::Create { from_schedule }) => from_schedule,
        _ => return failure,
    };
    if !failure.message.ends_with("not found") {
        return failure;
    }
    let Ok(schedules) = list_schedules(client).await else {
        return failure;
    };
    let names: BTreeSet<String> = schedules
        .iter()
        .map(|described| described.schedule.name.to_string())
        .collect();
    Failure {
        message: format!(
            "{}{}",
            failure.message,
            crate::listing::did_you_mean(name, names.iter().map(String::as_str))
        ),
        ..failure
    }
}

/// Every schedule, as `schedule.list` describes them.
pub(super) async fn list_schedules(client: &Client) -> Result<Vec<ScheduleDescription>, Failure> {
    client
        .call_as(
            &topology::api_subject("schedule", "list"),
            &ListFilter::default(),
        )
        .await
}

/// The names a user typed into a verb that reads: each must name something the fleet knows.
#[derive(Debug, Default, PartialEq)]
struct Typed<'a> {
    cluster: Option<&'a str>,
    plan: Option<&'a str>,
    schedule: Option<&'a str>,
}

/// The names to check for `command`, given its answer: those of a verb whose answer is empty
/// (a typo would otherwise print nothing and exit 0, issue 26), and always the cluster of a
/// scrub (which reports on what it found, so an empty report looks like a clean one).
fn typed_names<'a>(command: &'a Command, answer: &Value) -> Option<Typed<'a>> {
    let empty_list = answer.as_array().is_some_and(|rows| rows.is_empty());
    // `--schedule` filters here, not in the API: an answer with rows can still show none.
    let no_row_of = |schedule: &str| {
        answer
            .as_array()
            .is_some_and(|rows| !rows.iter().any(|row| row["schedule"] == schedule))
    };
    let typed = match command {
        Command::Backup(BackupCommand::List {
            cluster,
            plan,
            schedule,
            ..
        }) if empty_list || schedule.as_deref().is_some_and(no_row_of) => Typed {
            cluster: cluster.as_deref(),
            plan: plan.as_deref(),
            schedule: schedule.as_deref(),
        },
        Command::Schedule(ScheduleCommand::List { cluster, .. }) if empty_list => Typed {
            cluster: cluster.as_deref(),
            ..Typed::default()
        },
        Command::Retention(RetentionCommand::Preview { cluster, plan, .. }) if empty_list => {
            Typed {
                cluster: Some(cluster),
                plan: plan.as_deref(),
                ..Typed::default()
            }
        }
        Command::Catalog(CatalogCommand::Scrub { cluster, .. }) => Typed {
            cluster: Some(cluster),
            ..Typed::default()
        },
        Command::Recovery(RecoveryCommand::Window { cluster, plan, .. }) if empty_list => Typed {
            cluster: Some(cluster),
            plan: plan.as_deref(),
            ..Typed::default()
        },
        Command::Binlog(BinlogCommand::Status { cluster })
            if answer["segments"]["total"].as_u64() == Some(0) =>
        {
            Typed {
                cluster: Some(cluster),
                ..Typed::default()
            }
        }
        _ => return None,
    };
    (typed != Typed::default()).then_some(typed)
}

/// A name typed into a reading verb that names nothing the fleet knows is an error with the
/// closest known name, not an empty answer and exit 0: a cluster no schedule and no backup
/// names, a plan no schedule and no backup of the cluster has, a schedule that does not exist.
pub(super) async fn check_names_known(
    client: &Client,
    command: &Command,
    answer: &Value,
) -> Result<(), Failure> {
    let Some(typed) = typed_names(command, answer) else {
        return Ok(());
    };
    let schedules = list_schedules(client).await?;
    if let Some(name) = typed.schedule {
        let names: BTreeSet<String> = schedules
            .iter()
            .map(|described| described.schedule.name.to_string())
            .collect();
        if !names.contains(name) {
            return Err(not_found(
                &format!("schedule {name}"),
                "no schedule has this name",
                name,
                &names,
            ));
        }
    }
    if let Some(cluster) = typed.cluster {
        let clusters = clusters_of(&schedules);
        if !cluster_known(client, &clusters, cluster).await? {
            return Err(not_found(
                &format!("cluster {cluster}"),
                "no schedule and no backup names it",
                cluster,
                &clusters,
            ));
        }
    }
    if let Some(plan) = typed.plan {
        let plans: BTreeSet<String> = schedules
            .iter()
            .filter(|described| {
                typed
                    .cluster
                    .is_none_or(|c| described.schedule.cluster.as_str() == c)
            })
            .map(|described| described.schedule.plan.to_string())
            .collect();
        if !plans.contains(plan) && !has_backups(client, typed.cluster, Some(plan)).await? {
            let place = typed
                .cluster
                .map(|c| format!(" of cluster {c}"))
                .unwrap_or_default();
            return Err(not_found(
                &format!("plan {plan}"),
                &format!("no schedule and no backup{place} has it"),
                plan,
                &plans,
            ));
        }
    }
    Ok(())
}

/// `<what> not found: <why>; did you mean <closest>?` (exit 1).
pub(super) fn not_found(what: &str, why: &str, typed: &str, known: &BTreeSet<String>) -> Failure {
    Failure {
        code: 1,
        message: format!(
            "{what} not found: {why}{}",
            crate::listing::did_you_mean(typed, known.iter().map(String::as_str))
        ),
    }
}

/// The clusters the schedules name.
pub(super) fn clusters_of(schedules: &[ScheduleDescription]) -> BTreeSet<String> {
    schedules
        .iter()
        .map(|described| described.schedule.cluster.to_string())
        .collect()
}

/// Whether a schedule (one of `clusters`, theirs) or a backup names `cluster`.
pub(super) async fn cluster_known(
    client: &Client,
    clusters: &BTreeSet<String>,
    cluster: &str,
) -> Result<bool, Failure> {
    Ok(clusters.contains(cluster) || has_backups(client, Some(cluster), None).await?)
}

/// Whether the catalog holds a backup of `cluster` (and `plan`).
async fn has_backups(
    client: &Client,
    cluster: Option<&str>,
    plan: Option<&str>,
) -> Result<bool, Failure> {
    let filter = ListFilter {
        cluster: cluster.map(parsed::<ListFilter, _>).transpose()?,
        plan: plan.map(parsed::<ListFilter, _>).transpose()?,
        ..ListFilter::default()
    };
    let backups = client
        .call(&topology::api_subject("backup", "list"), &filter)
        .await?;
    Ok(backups.as_array().is_some_and(|rows| !rows.is_empty()))
}
