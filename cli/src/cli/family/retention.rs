//! `retention`: `simulate` and `plan` run the engines offline here; the rest are online
//! requests.

use std::path::PathBuf;

use chrono::Utc;
use sexton_shared::config::Config;

use crate::cli::args::*;
use crate::cli::online;
use crate::failure::Failure;
use crate::offline_plan::{CatalogSource, PolicySource};

/// Runs a `retention` command.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
        Command::Retention(RetentionCommand::Simulate {
            cron,
            policy,
            full_every,
            volumes,
            name,
            options,
            page,
        }) => {
            let page = crate::simulate::page_path(output, page)?;
            let policy = crate::simulate::read_policy("policy", policy)?;
            let against = options
                .against
                .as_deref()
                .map(|text| crate::simulate::read_policy("against", text))
                .transpose()?;
            let scenario = crate::simulate::scenario(
                name,
                cron,
                policy,
                *full_every,
                volumes,
                options,
                Utc::now(),
            )?;
            let report = crate::simulate::run(&scenario, against.as_ref())?;
            crate::simulate::print(output, &report, options.rows.as_deref(), page)
        }
        Command::Retention(RetentionCommand::Plan {
            catalog,
            catalog_from,
            policy,
            policy_from,
            now,
            pretty,
            delete,
            with_dependents,
        }) => crate::offline_plan::run(
            catalog_source(catalog, catalog_from),
            policy_source(policy, policy_from),
            now.as_deref(),
            output,
            *pretty,
            delete
                .as_deref()
                .map(|id| crate::offline_plan::AskedDelete {
                    id,
                    with_dependents: *with_dependents,
                }),
        ),
        command => online::run(output, load_config, command).await,
    }
}

/// `retention plan`'s catalog: a file, or what another tool printed about its backups.
fn catalog_source<'a>(
    catalog: &'a Option<PathBuf>,
    catalog_from: &'a Option<String>,
) -> CatalogSource<'a> {
    match (catalog, catalog_from) {
        (Some(path), _) => CatalogSource::File(path),
        (None, Some(text)) => CatalogSource::Tool(text),
        (None, None) => unreachable!("clap requires --catalog or --catalog-from"),
    }
}

/// `retention plan`'s policy: a file, or another tool's setting to translate.
fn policy_source<'a>(
    policy: &'a Option<PathBuf>,
    policy_from: &'a Option<String>,
) -> PolicySource<'a> {
    match (policy, policy_from) {
        (Some(path), _) => PolicySource::File(path),
        (None, Some(text)) => PolicySource::Translated(text),
        (None, None) => unreachable!("clap requires --policy or --policy-from"),
    }
}
