//! The commands that run as a part of the fleet until stopped: `serve` (a service), `executor`
//! (the reference executor) and `exec` (the generic executor around a user's
//! backup command).

use sexton_shared::config::Config;

use crate::cli::args::*;
use crate::failure::Failure;

/// Runs `serve`, `executor` or `exec` until a signal stops it.
pub(in crate::cli) async fn run(
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
        Command::Exec(args) => {
            let options = args.options()?;
            let config = load_config()?;
            sexton_shared::telemetry::init_logging(config.log.format);
            sexton_executor::exec::run(config, options, sexton_shared::shutdown::on_signals())
                .await
                .map_err(Failure::runtime)
        }
        Command::Executor => {
            let config = load_config()?;
            sexton_shared::telemetry::init_logging(config.log.format);
            sexton_executor::reference::run(config, sexton_shared::shutdown::on_signals())
                .await
                .map_err(Failure::runtime)
        }
        Command::Serve { service } => {
            let config = load_config()?;
            sexton_shared::telemetry::init_logging(config.log.format);
            let shutdown = sexton_shared::shutdown::on_signals();
            let result = match service.as_str() {
                "scheduler" => sexton_scheduler::run(config, shutdown).await,
                "retention-worker" => sexton_retention_worker::run(config, shutdown).await,
                "deleter" => sexton_deleter::run(config, shutdown).await,
                "copier" => sexton_copier::run(config, shutdown).await,
                _ => sexton_executor::reference::run(config, shutdown).await,
            };
            result.map_err(Failure::runtime)
        }
        _ => unreachable!("run hands this module only serve, executor and exec"),
    }
}
