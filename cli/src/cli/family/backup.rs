//! `backup`: `fetch` (a backup's files fetched from the object store) and `delete --oldest`
//! (the oldest set's id found first) run here; the rest are online requests.

use std::collections::BTreeSet;

use sexton_shared::{api::ListFilter, config::Config, topology};

use crate::cli::args::*;
use crate::cli::values::{self, parsed};
use crate::cli::{fetch, online};
use crate::client::Client;
use crate::failure::Failure;

/// Runs a `backup` command.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
        Command::Backup(BackupCommand::Fetch {
            id,
            cluster,
            location,
            to,
            only,
        }) => {
            fetch::backup_fetch(
                output,
                load_config,
                id,
                values::given_cluster(cluster)?,
                location.as_deref(),
                to,
                *only,
            )
            .await
        }
        Command::Backup(BackupCommand::Delete {
            id: None,
            oldest: true,
            cluster,
            plan,
            remote,
            force,
            dry_run,
            yes,
            location,
            with_dependents,
        }) => {
            let cluster_name = cluster
                .as_deref()
                .ok_or_else(|| Failure::input("backup delete --oldest needs --cluster"))?;
            let id = resolve_oldest(load_config, cluster_name, plan.as_deref()).await?;
            let resolved = Command::Backup(BackupCommand::Delete {
                id: Some(id),
                oldest: true,
                cluster: cluster.clone(),
                plan: plan.clone(),
                remote: *remote,
                force: *force,
                dry_run: *dry_run,
                yes: *yes,
                location: location.clone(),
                with_dependents: *with_dependents,
            });
            online::run(output, load_config, &resolved).await
        }
        command => online::run(output, load_config, command).await,
    }
}

/// `backup delete --oldest`: the full of the oldest backup set of the cluster's plan
/// ([`sexton_retention::judge::oldest_set`]), said on stderr. The delete is then judged by the
/// scheduler as any `--with-dependents` one.
async fn resolve_oldest(
    load_config: &dyn Fn() -> Result<Config, Failure>,
    cluster: &str,
    plan: Option<&str>,
) -> Result<String, Failure> {
    let client = Client::connect(&load_config()?).await?;
    let filter = ListFilter {
        cluster: Some(parsed::<ListFilter, _>(cluster)?),
        plan: plan.map(parsed::<ListFilter, _>).transpose()?,
        ..ListFilter::default()
    };
    let rows = client
        .call(&topology::api_subject("backup", "list"), &filter)
        .await?;
    let records: Vec<sexton_model::records::BackupRecord> =
        serde_json::from_value(rows).map_err(|err| Failure::runtime(err.into()))?;
    let records: Vec<_> = records
        .into_iter()
        .filter(|r| r.held_at_primary())
        .collect();
    let plans: BTreeSet<String> = records.iter().map(|r| r.plan.to_string()).collect();
    if plans.len() > 1 {
        return Err(Failure::input(format!(
            "cluster {cluster} has backups of plans {}: say which with --plan",
            plans.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    let group: Vec<sexton_retention::BackupRecord> =
        records.iter().map(|r| r.to_engine()).collect();
    let id = sexton_retention::judge::oldest_set(&group).map_err(|why| {
        Failure::input(format!(
            "backup delete --oldest on cluster {cluster}{}: {why}",
            plan.map(|p| format!(", plan {p}")).unwrap_or_default()
        ))
    })?;
    eprintln!("the oldest backup set of cluster {cluster} starts at {id}");
    Ok(id.to_string())
}
