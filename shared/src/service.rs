//! The common `main` of every service binary: parse `--config`, load the configuration, set
//! up logging, and run the service until SIGTERM or Ctrl-C.

use std::{future::Future, path::PathBuf};

use clap::Parser;

use crate::{config::Config, shutdown, telemetry, Shutdown};

#[derive(Parser, Debug)]
pub struct ServiceArgs {
    /// A TOML configuration file; SEXTON_* environment variables override it.
    #[arg(long, env = "SEXTON_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log format: text or json (overrides log.format).
    #[arg(long, value_parser = ["text", "json"])]
    pub log_format: Option<String>,
}

/// Runs `service` as a process: what each service's `main.rs` calls.
pub fn main<F, Fut>(name: &'static str, service: F) -> anyhow::Result<()>
where
    F: FnOnce(Config, Shutdown) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let args = ServiceArgs::parse_from(std::env::args_os());
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(format) = &args.log_format {
        config.set("log.format", format)?;
    }
    telemetry::init_logging(config.log.format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()?;
    runtime.block_on(async move { service(config, shutdown::on_signals()).await })
}
