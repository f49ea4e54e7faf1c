//! The commands over manifests, kubectl's: `apply` and `diff` (files against the fleet) and `get`
//! (the fleet as manifests).

use sexton_shared::config::Config;

use crate::cli::args::*;
use crate::client::Client;
use crate::failure::Failure;

/// Runs `apply`, `diff` or `get`.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
        Command::Apply(args) => {
            if args.selector.is_some() && !args.prune {
                return Err(Failure::input(
                    "-l selects what --prune deletes; give --prune with it",
                ));
            }
            let desired = crate::apply::read(&args.files)?;
            let client = Client::connect(&load_config()?).await?;
            let prune = args.selector.as_ref().filter(|_| args.prune);
            crate::apply::apply(&client, output, &desired, args.dry_run, args.yes, prune).await
        }
        Command::Diff {
            files,
            prune,
            selector,
        } => {
            let desired = crate::apply::read(files)?;
            let client = Client::connect(&load_config()?).await?;
            let prune = selector.as_ref().filter(|_| *prune);
            if crate::apply::diff(&client, &desired, prune).await? {
                // Differences: exit 1 and nothing more to say (the diff said it).
                return Err(Failure {
                    code: 1,
                    message: String::new(),
                });
            }
            Ok(())
        }
        Command::Get {
            kind,
            name,
            selector,
            no_status,
        } => {
            let client = Client::connect(&load_config()?).await?;
            let (name, selector) = (name.as_deref(), selector.as_ref());
            if kind.starts_with("location") {
                crate::apply::get_locations(&client, output, name).await
            } else if kind.starts_with("deleteplugin") {
                crate::apply::get_plugins(&client, output, name, selector, !no_status).await
            } else {
                crate::apply::get(&client, output, name, selector, !no_status).await
            }
        }
        _ => unreachable!("run hands this module only apply, diff and get"),
    }
}
