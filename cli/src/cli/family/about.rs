//! The commands about `sexton` itself: its shell completion script, the names a completion
//! offers, and its version (then every service instance's).

use sexton_shared::config::Config;

use crate::cli::args::*;
use crate::failure::Failure;

/// Runs `completion`, `__complete-names` or `version`.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
        Command::Completion { shell } => {
            crate::output::emit(&crate::completion::script(*shell, crate::cli::command())?);
            Ok(())
        }
        Command::CompleteNames { kind, cluster } => match load_config() {
            Ok(config) => crate::completion::names(&config, *kind, cluster.as_deref()).await,
            // A completion prints no error into the user's line.
            Err(_) => Ok(()),
        },
        Command::Version => {
            let config = load_config()?;
            crate::version::run(&config, output).await
        }
        _ => unreachable!("run hands this module only completion and version"),
    }
}
