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
    // A bad configuration is bad input: exit 2, as clap does for bad arguments and the CLI for
    // every refused input, so a supervisor can tell it from a failure at run time (1).
    let loaded = Config::load(args.config.as_deref()).and_then(|mut config| {
        if let Some(format) = &args.log_format {
            config.set("log.format", format)?;
        }
        Ok(config)
    });
    let config = match loaded {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(2);
        }
    };
    telemetry::init_logging(config.log.format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()?;
    runtime.block_on(async move { service(config, shutdown::on_signals()).await })
}
