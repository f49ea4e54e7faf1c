//! `schedule`: `next`, `explain` and `describe --simulate` compute here (`next NAME` and
//! `describe --simulate` after asking for the stored schedule); the rest are online requests.

use std::path::Path;

use chrono::{DateTime, Utc};
use sexton_shared::{api::ScheduleDescription, config::Config, topology};

use crate::cli::args::*;
use crate::cli::known::suggest;
use crate::cli::online;
use crate::cli::print::{print_runs, print_schedule_description, print_value};
use crate::cli::requests::{by_name, request_for, schedule_scenario};
use crate::client::{decode_reply, Client};
use crate::failure::{parse_time, Failure};

/// Runs a `schedule` command.
pub(in crate::cli) async fn run(
    output: Output,
    load_config: &dyn Fn() -> Result<Config, Failure>,
    command: &Command,
) -> Result<(), Failure> {
    match command {
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
        }) => describe_simulated(output, load_config, command, name, options, page).await,
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
                    let spec = NextSpec::of_flags(cron, name.as_deref(), timing);
                    schedule_next(output, &spec, from, *count)
                }
                (Some(schedule), None) => {
                    no_timing_flags(name, timing)?;
                    stored_schedule_next(output, load_config, command, schedule, from, *count).await
                }
            }
        }
        Command::Schedule(ScheduleCommand::Explain {
            schedule,
            now,
            server_skip_immediately,
        }) => explain(output, schedule, now, *server_skip_immediately),
        command => online::run(output, load_config, command).await,
    }
}

/// `schedule explain`: what the scheduler would decide for a schedule document at `now`,
/// offline.
fn explain(
    output: Output,
    schedule: &Path,
    now: &str,
    server_skip_immediately: bool,
) -> Result<(), Failure> {
    let text = std::fs::read_to_string(schedule)
        .map_err(|err| Failure::input(format!("cannot read {}: {err}", schedule.display())))?;
    let doc: sexton_schedule::ScheduleDoc = serde_json::from_str(&text)
        .map_err(|err| Failure::input(format!("invalid schedule {}: {err}", schedule.display())))?;
    let now = parse_time("now", now)?;
    let explanation = sexton_schedule::explain(&doc, now, server_skip_immediately);
    let value = serde_json::to_value(&explanation).map_err(|err| Failure::runtime(err.into()))?;
    print_value(
        output,
        &value,
        &["action", "due", "next_run_time", "reason", "error"],
    );
    Ok(())
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

impl<'a> NextSpec<'a> {
    /// A `--cron` spec, with the name and timing flags given with it.
    fn of_flags(cron: &'a str, name: Option<&'a str>, timing: &'a TimingArgs) -> Self {
        NextSpec {
            cron,
            name,
            jitter: timing.jitter,
            exclude: &timing.exclude,
            on_blackout: match timing.on_blackout.as_deref() {
                Some("defer") => sexton_schedule::OnBlackout::Defer,
                _ => sexton_schedule::OnBlackout::Skip,
            },
        }
    }
}

/// `schedule next NAME` takes no timing flags: a stored schedule has its own.
fn no_timing_flags(name: &Option<String>, timing: &TimingArgs) -> Result<(), Failure> {
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
    Ok(())
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
