//! The `sexton` command line, in the style of `velero` and `kubectl`: nouns, verbs, `-o
//! table|wide|json|yaml|name` (printed by `crate::output`). Talks to the fleet over the NATS
//! request/reply API; the offline commands (`retention plan`, `schedule next`) run the pure
//! engines locally.
//!
//! Exit codes: 0 success (also when the reader of stdout went away), 1 the fleet or a
//! dependency failed, or what was named does not exist, 2 bad input (usage, a malformed file, a
//! request the API refused as invalid), 77 NATS refused a subject to this user (a permission
//! denial: the user's rights, not the fleet, are at fault).

use std::{collections::BTreeSet, process::ExitCode};

use chrono::{DateTime, Utc};
use sexton_shared::{
    api::{ListFilter, ScheduleDescription},
    config::Config,
    topology,
};

mod actions;
mod args;
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
use known::{cluster_known, clusters_of, list_schedules, not_found, suggest};
use print::*;
use requests::*;
use resolve::{canonical, resolve_cluster};
use values::parsed;

use crate::client::{decode_reply, Client};
use crate::failure::parse_time;
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
    let simulates = matches!(
        &cli.command,
        Command::Retention(RetentionCommand::Simulate { .. })
            | Command::Schedule(ScheduleCommand::Describe { simulate: true, .. })
    );
    if cli.output == Output::Html && !simulates {
        return Err(Failure::input(
            "-o html is for retention simulate and schedule describe --simulate",
        ));
    }
    if let Some(what) = cli
        .command
        .answers_without_names()
        .filter(|_| cli.output == Output::Name)
    {
        return Err(Failure::input(format!(
            "-o name prints the kind/name of what a verb lists or acts on; this one answers with \
             {what}: use -o table, wide, json or yaml"
        )));
    }
    crate::output::configure(crate::output::Settings {
        no_headers: cli.no_headers,
    });
    match &cli.command {
        Command::Completion { shell } => {
            crate::output::emit(&crate::completion::script(*shell, command())?);
            Ok(())
        }
        Command::CompleteNames { kind, cluster } => match load_config() {
            Ok(config) => crate::completion::names(&config, *kind, cluster.as_deref()).await,
            // A completion prints no error into the user's line.
            Err(_) => Ok(()),
        },
        Command::Version => {
            let config = load_config()?;
            crate::version::run(&config, cli.output).await
        }
        Command::Retention(RetentionCommand::Simulate {
            cron,
            policy,
            full_every,
            volumes,
            name,
            options,
            page,
        }) => {
            let page = crate::simulate::page_path(cli.output, page)?;
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
            crate::simulate::print(cli.output, &report, options.rows.as_deref(), page)
        }
        Command::Schedule(ScheduleCommand::Describe {
            simulate: false,
            options,
            page,
            ..
        }) if options.any() || page.is_some() => Err(Failure::input(
            "simulation options (--days, --failures, ...) go with --simulate",
        )),
        Command::Schedule(ScheduleCommand::Describe {
            name,
            simulate: true,
            options,
            page,
        }) => describe_simulated(cli.output, &load_config, &cli.command, name, options, page).await,
        Command::Schedule(ScheduleCommand::Next {
            schedule,
            cron,
            from,
            count,
            name,
            timing,
        }) => {
            let from = match from {
                Some(text) => parse_time("from", text)?,
                None => Utc::now(),
            };
            if *count == 0 || *count > 10_000 {
                return Err(Failure::input("-n must be between 1 and 10000"));
            }
            match (schedule, cron) {
                (Some(_), Some(_)) => {
                    Err(Failure::input("give a schedule's NAME or --cron, not both"))
                }
                (None, None) => Err(Failure::input(
                    "give a stored schedule's NAME, or --cron CRON for a spec offline",
                )),
                (None, Some(cron)) => {
                    let spec = NextSpec {
                        cron,
                        name: name.as_deref(),
                        jitter: timing.jitter,
                        exclude: &timing.exclude,
                        on_blackout: match timing.on_blackout.as_deref() {
                            Some("defer") => sexton_schedule::OnBlackout::Defer,
                            _ => sexton_schedule::OnBlackout::Skip,
                        },
                    };
                    schedule_next(cli.output, &spec, from, *count)
                }
                (Some(schedule), None) => {
                    if name.is_some()
                        || timing.jitter.is_some()
                        || !timing.exclude.is_empty()
                        || timing.on_blackout.is_some()
                    {
                        return Err(Failure::input(
                            "--name, --jitter, --exclude and --on-blackout go with --cron: a \
                             stored schedule has its own",
                        ));
                    }
                    stored_schedule_next(
                        cli.output,
                        &load_config,
                        &cli.command,
                        schedule,
                        from,
                        *count,
                    )
                    .await
                }
            }
        }
        Command::Schedule(ScheduleCommand::Explain {
            schedule,
            now,
            server_skip_immediately,
        }) => {
            let text = std::fs::read_to_string(schedule).map_err(|err| {
                Failure::input(format!("cannot read {}: {err}", schedule.display()))
            })?;
            let doc: sexton_schedule::ScheduleDoc = serde_json::from_str(&text).map_err(|err| {
                Failure::input(format!("invalid schedule {}: {err}", schedule.display()))
            })?;
            let now = parse_time("now", now)?;
            let explanation = sexton_schedule::explain(&doc, now, *server_skip_immediately);
            let value =
                serde_json::to_value(&explanation).map_err(|err| Failure::runtime(err.into()))?;
            print_value(
                cli.output,
                &value,
                &["action", "due", "next_run_time", "reason", "error"],
            );
            Ok(())
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
            match (catalog, catalog_from) {
                (Some(path), _) => crate::offline_plan::CatalogSource::File(path),
                (None, Some(text)) => crate::offline_plan::CatalogSource::Tool(text),
                (None, None) => unreachable!("clap requires --catalog or --catalog-from"),
            },
            match (policy, policy_from) {
                (Some(path), _) => crate::offline_plan::PolicySource::File(path),
                (None, Some(text)) => crate::offline_plan::PolicySource::Translated(text),
                (None, None) => unreachable!("clap requires --policy or --policy-from"),
            },
            now.as_deref(),
            cli.output,
            *pretty,
            delete
                .as_deref()
                .map(|id| crate::offline_plan::AskedDelete {
                    id,
                    with_dependents: *with_dependents,
                }),
        ),
        Command::Exec(args) => {
            let options = args.options()?;
            let config = load_config()?;
            sexton_shared::telemetry::init_logging(config.log.format);
            sexton_executor::exec::run(config, options, sexton_shared::shutdown::on_signals())
                .await
                .map_err(Failure::runtime)
        }
        Command::Binlog(BinlogCommand::Append {
            cluster,
            format,
            allow_in_use,
            files,
        }) => {
            binlog_append(
                cli.output,
                &load_config,
                cluster,
                (*format).into(),
                *allow_in_use,
                files,
            )
            .await
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
        Command::Backup(BackupCommand::Fetch {
            id,
            cluster,
            location,
            to,
            only,
        }) => {
            fetch::backup_fetch(
                cli.output,
                &load_config,
                id,
                values::given_cluster(cluster)?,
                location.as_deref(),
                to,
                *only,
            )
            .await
        }
        Command::Catalog(CatalogCommand::Migrate {
            from_bucket,
            from_prefix,
            from_endpoint,
            cluster,
            location,
            dry_run,
        }) => {
            crate::migrate::migrate(
                cli.output,
                &load_config,
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
        Command::Binlog(BinlogCommand::Fetch {
            cluster,
            location,
            since,
            until,
            to,
        }) => {
            fetch::binlog_fetch(
                cli.output,
                &load_config,
                cluster,
                location.as_deref(),
                (since.as_deref(), until.as_deref()),
                to,
            )
            .await
        }
        Command::Audit(args) => audit(cli.output, &load_config, args).await,
        Command::Apply(args) => {
            if args.selector.is_some() && !args.prune {
                return Err(Failure::input(
                    "-l selects what --prune deletes; give --prune with it",
                ));
            }
            let desired = crate::apply::read(&args.files)?;
            let client = Client::connect(&load_config()?).await?;
            let prune = args.selector.as_ref().filter(|_| args.prune);
            crate::apply::apply(&client, cli.output, &desired, args.dry_run, args.yes, prune).await
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
                crate::apply::get_locations(&client, cli.output, name).await
            } else if kind.starts_with("deleteplugin") {
                crate::apply::get_plugins(&client, cli.output, name, selector, !no_status).await
            } else {
                crate::apply::get(&client, cli.output, name, selector, !no_status).await
            }
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
            let client = Client::connect(&load_config()?).await?;
            let id = resolve_oldest(&client, cluster_name, plan.as_deref()).await?;
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
            online::run(cli.output, &load_config, &resolved).await
        }
        command => online::run(cli.output, &load_config, command).await,
    }
}

/// `backup delete --oldest`: the full of the oldest backup set of the cluster's plan
/// ([`sexton_retention::judge::oldest_set`]), said on stderr. The delete is then judged by the
/// scheduler as any `--with-dependents` one.
async fn resolve_oldest(
    client: &Client,
    cluster: &str,
    plan: Option<&str>,
) -> Result<String, Failure> {
    let filter = ListFilter {
        cluster: Some(parsed::<ListFilter, _>(cluster)?),
        plan: plan.map(parsed::<ListFilter, _>).transpose()?,
        ..ListFilter::default()
    };
    let rows = client
        .call(&topology::api_subject("backup", "list"), &filter)
        .await?;
    let records: Vec<sexton_shared::records::BackupRecord> =
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

/// `schedule describe --simulate`: the schedule as the scheduler describes it, then its
/// simulation offline.
async fn describe_simulated(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
    name: &str,
    options: &crate::simulate::SimulationOptions,
    page: &Option<std::path::PathBuf>,
) -> Result<(), Failure> {
    let page = crate::simulate::page_path(output, page)?;
    let against = options
        .against
        .as_deref()
        .map(|text| crate::simulate::read_policy("against", text))
        .transpose()?;
    let config = load_config()?;
    let (subject, body, _) = request_for(command)?;
    let client = Client::connect(&config).await?;
    let mut described = match client.call(&subject, &body).await {
        Ok(described) => described,
        Err(failure) => return Err(suggest(&client, command, failure).await),
    };
    let typed: ScheduleDescription = decode_reply(&subject, described.clone())?;
    let scenario = schedule_scenario(name, &typed, options)?;
    let report = crate::simulate::run(&scenario, against.as_ref())?;
    match output {
        Output::Json | Output::Yaml => {
            described["simulation"] = report.to_json();
            crate::output::document(output, &described);
            Ok(())
        }
        output => {
            print_schedule_description(&typed);
            println!();
            crate::simulate::print(output, &report, options.rows.as_deref(), page)
        }
    }
}

/// The timing `schedule next` walks: a cron spec with the name its jitter and `@*-random`
/// descriptors are drawn from, its jitter and its blackout windows (the flags', or a stored
/// schedule's).
struct NextSpec<'a> {
    cron: &'a str,
    name: Option<&'a str>,
    jitter: Option<sexton_schedule::Span>,
    exclude: &'a [sexton_schedule::WindowSpec],
    on_blackout: sexton_schedule::OnBlackout,
}

/// `schedule next NAME`: the stored schedule as the scheduler describes it, then its next
/// runs computed here as for `--cron`.
async fn stored_schedule_next(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
    name: &str,
    from: DateTime<Utc>,
    count: usize,
) -> Result<(), Failure> {
    let subject = topology::api_subject("schedule", "describe");
    let asking = by_name(name)?;
    let config = load_config()?;
    let client = Client::connect(&config).await?;
    let described = match client.call(&subject, &asking).await {
        Ok(described) => described,
        Err(failure) => return Err(suggest(&client, command, failure).await),
    };
    let described: ScheduleDescription = decode_reply(&subject, described)?;
    let schedule = &described.schedule;
    let spec = NextSpec {
        cron: &schedule.cron,
        name: Some(schedule.name.as_str()),
        jitter: schedule.jitter,
        exclude: &schedule.exclude,
        on_blackout: schedule.on_blackout,
    };
    schedule_next(output, &spec, from, count)
}

/// `schedule next`: the next `count` runs of a timing from `from`, computed offline.
fn schedule_next(
    output: Output,
    next: &NextSpec<'_>,
    from: DateTime<Utc>,
    count: usize,
) -> Result<(), Failure> {
    // CloudNativePG's 6-field form, read as the API reads it.
    let cron = &*sexton_schedule::CronSpec::five_field_form(next.cron)
        .map_err(|err| Failure::input(format!("invalid cron {:?}: {err}", next.cron)))?;
    let needs_name = next.jitter.is_some()
        || sexton_schedule::spread::RANDOM_DESCRIPTORS
            .iter()
            .any(|descriptor| cron.trim_end().ends_with(descriptor));
    if needs_name && next.name.is_none() {
        return Err(Failure::input(
            "--name is needed: jitter and @*-random descriptors are drawn from the \
             schedule's name",
        ));
    }
    let spec = sexton_schedule::TimingSpec {
        name: next.name.unwrap_or_default(),
        cron,
        jitter: next.jitter,
        exclude: next.exclude,
        on_blackout: next.on_blackout,
    };
    let (timing, warnings) =
        sexton_schedule::Timing::check_input(&spec, from).map_err(|err| match err {
            sexton_schedule::TimingError::Window { .. } => Failure::input(err.to_string()),
            err => Failure::input(format!("invalid cron {cron:?}: {err}")),
        })?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    let runs = timing.upcoming(from, count);
    match output {
        Output::Json | Output::Yaml => {
            let value = serde_json::to_value(&runs).map_err(|err| Failure::runtime(err.into()))?;
            crate::output::document(output, &value);
        }
        _ => {
            for line in timing.describe() {
                println!("{line}");
            }
            print_runs(&runs, timing.cron().zone().unwrap_or(chrono_tz::UTC));
        }
    }
    Ok(())
}

/// `binlog append`: ships binlog files and appends them to the cluster's index.
async fn binlog_append(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    cluster: &str,
    format: sexton_executor::binlog_append::SegmentFormat,
    allow_in_use: bool,
    files: &[std::path::PathBuf],
) -> Result<(), Failure> {
    let cluster = sexton_shared::names::ClusterName::new(cluster)
        .map_err(|err| Failure::input(format!("--cluster: {err}")))?;
    for file in files {
        if !file.is_file() {
            return Err(Failure::input(format!(
                "{}: not a regular file",
                file.display()
            )));
        }
    }
    let config = load_config()?;
    let store = sexton_shared::object_store::ObjectStore::connect(&config.s3)
        .await
        .map_err(Failure::runtime)?;
    let mut shipped = Vec::new();
    for file in files {
        let outcome = sexton_executor::binlog_append::append(
            &store,
            &config.s3.prefix,
            &cluster,
            file,
            format,
            allow_in_use,
            Default::default(),
        )
        .await;
        match outcome {
            Ok(done) => shipped.push(done),
            // A file that is not what it claims is the caller's to fix (exit 2); the
            // files before it are shipped and stay so.
            Err(err)
                if err
                    .downcast_ref::<sexton_executor::binlog_file::BinlogFileError>()
                    .is_some() =>
            {
                print_shipped(output, &shipped);
                return Err(Failure::input(format!("{err:#}")));
            }
            Err(err) => {
                print_shipped(output, &shipped);
                return Err(Failure::runtime(err));
            }
        }
    }
    print_shipped(output, &shipped);
    Ok(())
}

/// `sexton audit`: the audit trail, filtered.
async fn audit(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    args: &AuditArgs,
) -> Result<(), Failure> {
    let cluster = args
        .cluster
        .as_deref()
        .map(sexton_shared::names::ClusterName::new)
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

/// `sexton audit --cluster C` that finds no entry: an error when nothing names the cluster (no
/// schedule, no backup and no audit entry ever), so a typo is not an empty trail.
async fn check_audit_cluster(
    client: &Client,
    cluster: &sexton_shared::names::ClusterName,
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
