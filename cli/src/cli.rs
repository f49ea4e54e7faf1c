//! The `sexton` command line, in the style of `velero` and `kubectl`: nouns, verbs, `-o
//! table|wide|json|yaml|name` (printed by `crate::output`). Talks to the fleet over the NATS
//! request/reply API; the offline commands (`retention plan`, `schedule next`) run the pure
//! engines locally.
//!
//! Exit codes: 0 success (also when the reader of stdout went away), 1 the fleet or a
//! dependency failed, or what was named does not exist, 2 bad input (usage, a malformed file, a
//! request the API refused as invalid), 77 NATS refused a subject to this user (a permission
//! denial: the user's rights, not the fleet, are at fault).//!
//! `run` makes the command the one the verbs name (`resolve`), then hands it to its family
//! (`family`: the commands that compute here, read files, start a process or poll) or sends it
//! as one request and prints the answer (`online`).

use std::process::ExitCode;

use sexton_shared::config::Config;

mod actions;
mod args;
mod family;
mod fetch;
mod known;
mod online;
mod print;
#[cfg(test)]
mod request_tests;
mod requests;
mod resolve;
mod schedule_body;
mod values;

pub use args::*;
use resolve::{canonical, resolve_cluster};

pub use crate::failure::{Failure, EXIT_DENIED};

/// Parses arguments, runs the command, prints, and returns the exit code.
pub async fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let parsed = command()
        .try_get_matches_from(args)
        .and_then(|matches| <Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // An empty message: the exit code is the answer (`diff`'s 1).
            if !failure.message.is_empty() {
                eprintln!("error: {}", failure.message);
            }
            ExitCode::from(failure.code)
        }
    }
}

/// The command's clap definition, with the printing flags hidden from the commands that print
/// nothing but logs (the services and executors) and from `completion`.
pub fn command() -> clap::Command {
    let command = <Cli as clap::CommandFactory>::command();
    // A subcommand's own copy of a global argument stops clap propagating the root's there.
    let hidden = |id: &str| {
        command
            .get_arguments()
            .find(|arg| arg.get_id() == id)
            .cloned()
            .expect("a global printing flag")
            .hide(true)
    };
    let (output, no_headers) = (hidden("output"), hidden("no_headers"));
    command.mut_subcommands(|sub| {
        if [
            "executor",
            "exec",
            "serve",
            "completion",
            crate::completion::NAMES_VERB,
        ]
        .contains(&sub.get_name())
        {
            sub.arg(output.clone()).arg(no_headers.clone())
        } else {
            sub
        }
    })
}

/// Where `nats.url` came from, most specific first, as the connection error names it.
fn url_source(
    flag: bool,
    environment: bool,
    file: Option<&std::path::Path>,
    config: &Config,
) -> String {
    if flag {
        "--nats-url".into()
    } else if environment {
        "the environment variable SEXTON_NATS_URL".into()
    } else if let Some(path) = file.filter(|_| config.nats.url != Config::default().nats.url) {
        format!("nats.url in {}", path.display())
    } else {
        "the default".into()
    }
}

/// Runs a parsed command: made the command the verbs name, checked against `-o`, then handed
/// to its family or sent as an online request.
pub async fn run(cli: Cli) -> Result<(), Failure> {
    let cli = Cli {
        command: canonical(cli.command)?,
        ..cli
    };
    let cli = Cli {
        command: resolve_cluster(cli.command, cli.config.as_deref(), cli.nats_url.as_deref())
            .await?,
        ..cli
    };
    let load_config = || config_of(cli.config.as_deref(), cli.nats_url.as_deref());
    check_output(cli.output, &cli.command)?;
    crate::output::configure(crate::output::Settings {
        no_headers: cli.no_headers,
    });
    let (output, command) = (cli.output, &cli.command);
    match command {
        Command::Completion { .. } | Command::CompleteNames { .. } | Command::Version => {
            family::about::run(output, &load_config, command).await
        }
        Command::Schedule(_) => family::schedule::run(output, &load_config, command).await,
        Command::Retention(_) => family::retention::run(output, &load_config, command).await,
        Command::Backup(_) => family::backup::run(output, &load_config, command).await,
        Command::Binlog(_) => family::binlog::run(output, &load_config, command).await,
        Command::Catalog(_) => family::catalog::run(output, &load_config, command).await,
        Command::Exec(_) | Command::Executor | Command::Serve { .. } => {
            family::serve::run(&load_config, command).await
        }
        Command::Audit(args) => family::audit::run(output, &load_config, args).await,
        Command::Apply(_) | Command::Diff { .. } | Command::Get { .. } => {
            family::manifests::run(output, &load_config, command).await
        }
        command => online::run(output, &load_config, command).await,
    }
}

/// `-o html` and `-o name` only where they mean something: a simulation's page, and the
/// kind/name of what a verb lists or acts on.
fn check_output(output: Output, command: &Command) -> Result<(), Failure> {
    let simulates = matches!(
        command,
        Command::Retention(RetentionCommand::Simulate { .. })
            | Command::Schedule(ScheduleCommand::Describe { simulate: true, .. })
    );
    if output == Output::Html && !simulates {
        return Err(Failure::input(
            "-o html is for retention simulate and schedule describe --simulate",
        ));
    }
    if let Some(what) = command
        .answers_without_names()
        .filter(|_| output == Output::Name)
    {
        return Err(Failure::input(format!(
            "-o name prints the kind/name of what a verb lists or acts on; this one answers with \
             {what}: use -o table, wide, json or yaml"
        )));
    }
    Ok(())
}

/// The configuration a command runs with: the file (or `SEXTON_CONFIG`), the environment, and
/// `--nats-url` over them; who asks is remembered from it for every request.
fn config_of(path: Option<&std::path::Path>, nats_url: Option<&str>) -> Result<Config, Failure> {
    let mut config = Config::load(path).map_err(|err| Failure::input(err.to_string()))?;
    crate::client::note_url_source(url_source(
        nats_url.is_some(),
        std::env::var_os("SEXTON_NATS_URL").is_some(),
        path,
        &config,
    ));
    if let Some(url) = nats_url {
        config
            .set("nats.url", &with_scheme(url))
            .map_err(|err| Failure::input(err.to_string()))?;
        config
            .validate()
            .map_err(|err| Failure::input(err.to_string()))?;
    }
    // Who asks, for every request of this command (apply's too: it said `by unknown`).
    crate::safety::set_actor(&config);
    Ok(config)
}

/// `--nats-url` as people type it: `127.0.0.1:4222` is `nats://127.0.0.1:4222` (issue 50), each
/// of several comma-separated; a URL with a scheme is left as it is (and checked as before).
fn with_scheme(urls: &str) -> String {
    urls.split(',')
        .map(|url| {
            let url = url.trim();
            if url.contains("://") || url.is_empty() {
                url.to_string()
            } else {
                format!("nats://{url}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod help_tests {
    /// Every argument of every command says what it is for, and every command a user runs
    /// shows examples in its --help (clap's after_help).
    #[test]
    fn every_argument_has_help_and_every_command_examples() {
        fn walk(command: &clap::Command, path: String, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if arg.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path}: argument {id} has no help"));
                }
            }
            let leaves = command.get_subcommands().count() == 0;
            if leaves && command.get_after_help().is_none() {
                missing.push(format!("{path}: no examples"));
            }
            // The global options under a heading of their own, after the command's (issue
            // 50: they were mixed into the rule flags).
            if leaves {
                let help = command.clone().render_help().to_string();
                let heading = help.find("Global options:");
                let nats_url = help.find("--nats-url");
                if heading.is_none() || nats_url < heading {
                    missing.push(format!("{path}: global options not under their heading"));
                }
            }
            // clap's own `help` subcommands (added by building) are not commands of ours.
            for sub in command
                .get_subcommands()
                .filter(|sub| sub.get_name() != "help")
            {
                walk(sub, format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        // Built, so the global options reach every subcommand as they do when it runs.
        let mut root = super::command();
        root.build();
        walk(&root, "sexton".into(), &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
