//! `catalog`: `migrate` (the backups recorded in another store moved into the fleet's own)
//! runs here; the rest are online requests.

use sexton_shared::config::Config;

use crate::cli::args::*;
use crate::cli::online;
use crate::failure::Failure;

/// Runs a `catalog` command.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
        Command::Catalog(CatalogCommand::Migrate {
            from_bucket,
            from_prefix,
            from_endpoint,
            cluster,
            location,
            dry_run,
        }) => {
            crate::migrate::migrate(
                output,
                load_config,
                crate::migrate::From {
                    bucket: from_bucket,
                    prefix: from_prefix.as_deref(),
                    endpoint: from_endpoint.as_deref(),
                },
                cluster.as_deref(),
                location.as_deref(),
                *dry_run,
            )
            .await
        }
        command => online::run(output, load_config, command).await,
    }
}
