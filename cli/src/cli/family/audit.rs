//! `sexton audit`: the audit trail, read from its stream here rather than asked of a service.

use chrono::Utc;
use sexton_shared::config::Config;

use crate::cli::args::*;
use crate::cli::known::{cluster_known, clusters_of, list_schedules, not_found};
use crate::cli::print::print_value;
use crate::client::Client;
use crate::failure::Failure;

/// `sexton audit`: the audit trail, filtered.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    args: &AuditArgs,
) -> Result<(), Failure> {
    let cluster = args
        .cluster
        .as_deref()
        .map(sexton_model::names::ClusterName::new)
        .transpose()
        .map_err(|err| Failure::input(format!("--cluster: {err}")))?;
    let since = match args.since.as_str() {
        "all" => None,
        text => Some(
            Utc::now()
                - chrono::Duration::from_std(
                    parse_duration(text)
                        .map_err(|err| Failure::input(format!("--since: {err} (or all)")))?,
                )
                .map_err(|err| Failure::input(format!("--since: {err}")))?,
        ),
    };
    let config = load_config()?;
    let client = Client::connect(&config).await?;
    let query = crate::audit::Query {
        cluster,
        backup: args.backup.clone(),
        since,
    };
    let entries = crate::audit::read(client.nats(), &query)
        .await
        .map_err(Failure::runtime)?;
    if let (true, Some(cluster)) = (entries.is_empty(), &query.cluster) {
        check_audit_cluster(&client, cluster).await?;
    }
    match output {
        Output::Json | Output::Yaml => {
            let value =
                serde_json::to_value(&entries).map_err(|err| Failure::runtime(err.into()))?;
            print_value(output, &value, &[]);
        }
        _ => crate::audit::print_table(&entries, args.backup.as_deref()),
    }
    Ok(())
}

/// `sexton audit --cluster C` that finds no entry: an error when nothing names the cluster (no
/// schedule, no backup and no audit entry ever), so a typo is not an empty trail.
async fn check_audit_cluster(
    client: &Client,
    cluster: &sexton_model::names::ClusterName,
) -> Result<(), Failure> {
    let clusters = clusters_of(&list_schedules(client).await?);
    if cluster_known(client, &clusters, cluster.as_str()).await? {
        return Ok(());
    }
    let ever = crate::audit::read(
        client.nats(),
        &crate::audit::Query {
            cluster: Some(cluster.clone()),
            backup: None,
            since: None,
        },
    )
    .await
    .map_err(Failure::runtime)?;
    if !ever.is_empty() {
        return Ok(());
    }
    Err(not_found(
        &format!("cluster {cluster}"),
        "no schedule, no backup and no audit entry names it",
        cluster.as_str(),
        &clusters,
    ))
}
