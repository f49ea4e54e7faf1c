//! The command as typed, made the command that runs: `get` as the `describe` or `list` it means
//! (kubectl's habit), and a backup named by id without `--cluster` given the cluster it is of.

use std::collections::BTreeSet;

use sexton_shared::{api::ListFilter, topology};

use super::args::*;
use super::config_of;
use super::values::parsed;
use crate::client::Client;
use crate::failure::Failure;

/// The command as the verbs that do the work name it (kubectl's `get`): `backup get ID` is
/// `backup describe`, `backup get` and `schedule get` without a name are their `list`. The
/// list flags go only without a name, and `backup get ID` needs the backup's cluster.
pub(super) fn canonical(command: Command) -> Result<Command, Failure> {
    let listing = |cluster: bool, plan: bool, schedule: bool, list: &crate::listing::ListArgs| {
        cluster || plan || schedule || list.selector.is_some() || list.watch.is_some()
    };
    Ok(match command {
        // kubectl's habit (issue 50): `get backups` lists them, `get backup ID` describes one.
        // Backups are not manifests: the listing is `backup list`'s.
        Command::Get {
            kind,
            name,
            selector,
            ..
        } if kind.starts_with("backup") => match name {
            None => Command::Backup(BackupCommand::List {
                cluster: None,
                plan: None,
                schedule: None,
                location: None,
                list: crate::listing::ListArgs {
                    selector,
                    watch: None,
                },
            }),
            Some(id) => Command::Backup(BackupCommand::Describe { id, cluster: None }),
        },
        Command::Backup(BackupCommand::Get {
            id: None,
            cluster,
            plan,
            schedule,
            list,
        }) => Command::Backup(BackupCommand::List {
            cluster,
            plan,
            schedule,
            location: None,
            list,
        }),
        Command::Backup(BackupCommand::Get {
            id: Some(id),
            cluster,
            plan,
            schedule,
            list,
        }) => {
            if listing(false, plan.is_some(), schedule.is_some(), &list) {
                return Err(Failure::input(
                    "--plan, --schedule, -l and --watch list backups: give them without an ID",
                ));
            }
            Command::Backup(BackupCommand::Describe { id, cluster })
        }
        Command::Schedule(ScheduleCommand::Get {
            name: None,
            cluster,
            list,
        }) => Command::Schedule(ScheduleCommand::List { cluster, list }),
        Command::Schedule(ScheduleCommand::Get {
            name: Some(_),
            cluster,
            list,
        }) if listing(cluster.is_some(), false, false, &list) => {
            return Err(Failure::input(
                "--cluster, -l and --watch list schedules: give them without a NAME",
            ))
        }
        command => command,
    })
}

/// A backup named by id without `--cluster` (`describe`, `get`, `fetch`, `delete`): its cluster
/// found from the id (issue 50), said on stderr. Several clusters with that id are listed and
/// refused; none is `not found`, as the verb would say it.
pub(super) async fn resolve_cluster(
    mut command: Command,
    config: Option<&std::path::Path>,
    nats_url: Option<&str>,
) -> Result<Command, Failure> {
    // The `--cluster` left out, and the id it is to be found from.
    let (id, slot) = match &mut command {
        Command::Backup(BackupCommand::Describe { id, cluster })
        | Command::Backup(BackupCommand::Fetch { id, cluster, .. })
        | Command::Backup(BackupCommand::Hold { id, cluster, .. })
        | Command::Backup(BackupCommand::Release { id, cluster, .. })
        | Command::Backup(BackupCommand::Verify { id, cluster, .. })
        | Command::Backup(BackupCommand::Delete {
            id: Some(id),
            cluster,
            ..
        }) if cluster.is_none() => (id.clone(), cluster),
        _ => return Ok(command),
    };
    let filter = ListFilter {
        id: Some(parsed::<ListFilter, _>(&id)?),
        ..ListFilter::default()
    };
    let client = Client::connect(&config_of(config, nats_url)?).await?;
    let rows = client
        .call(&topology::api_subject("backup", "list"), &filter)
        .await?;
    let records: Vec<sexton_model::records::BackupRecord> =
        serde_json::from_value(rows).map_err(|err| Failure::runtime(err.into()))?;
    let clusters: BTreeSet<String> = records.iter().map(|r| r.cluster.to_string()).collect();
    let cluster = match clusters.len() {
        0 => {
            return Err(Failure {
                code: 1,
                message: format!("backup {id} not found in any cluster"),
            })
        }
        1 => clusters.into_iter().next().expect("one"),
        _ => {
            return Err(Failure::input(format!(
                "backup {id} is in clusters {}: say which with --cluster",
                clusters.into_iter().collect::<Vec<_>>().join(", ")
            )))
        }
    };
    eprintln!("backup {id} is of cluster {cluster}");
    *slot = Some(cluster);
    Ok(command)
}
