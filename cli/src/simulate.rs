//! `sexton retention simulate` and `sexton schedule describe NAME --simulate`: parse the
//! options into a [`Scenario`], run the pure simulator (`sexton-simulate`), and print the
//! result as a terminal calendar, JSON, or a self-contained HTML page.
//!
//! Nothing here decides anything: the simulator replays the scheduler's cron and cadence code
//! and the retention engine; this module only turns flags into values and values into text.

mod calendar;
mod page;
mod words;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::Value;
use sexton_retention::{FullEvery, Policy};
use sexton_schedule::CronSpec;
use sexton_simulate::{
    compare_with_progress, keeper_of, simulate_with_progress, start_of_day, ByteSize, Comparison,
    Days, Failures, Keeper, Scenario, Simulation, Sizes, SweepInterval,
};

use crate::{failure::Failure, output::Output};

/// The simulated days when `--days` is not given: a year and a bit, so yearly rules show.
pub const DEFAULT_DAYS: i64 = 400;

/// Options shared by `retention simulate` and `schedule describe --simulate`.
#[derive(Args, Debug, Default, Clone)]
pub struct SimulationOptions {
    /// Days to simulate, 1 to 3660 [default: 400].
    #[arg(long, allow_negative_numbers = true)]
    pub days: Option<i64>,
    /// The first simulated instant (RFC 3339) [default: the start of today in the cron's zone].
    #[arg(long)]
    pub from: Option<String>,
    /// Which backups fail: a rate (30%, 0.3; seeded, see --seed) or a pattern repeated over the
    /// ticks (ok,ok,fail).
    #[arg(long)]
    pub failures: Option<String>,
    /// The seed of a failure rate: the same seed fails the same backups.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Storage a full backup takes (per volume with volumes), such as 10GiB or 500MB
    /// [default: 10GiB].
    #[arg(long, allow_hyphen_values = true)]
    pub size_full: Option<String>,
    /// Storage an incremental backup takes (per volume) [default: 1GiB].
    #[arg(long, allow_hyphen_values = true)]
    pub size_incremental: Option<String>,
    /// How often the fleet's retention sweep runs (scheduler.retention_sweep_interval), or
    /// off to run retention only when a backup completes [default: 1h].
    #[arg(long)]
    pub sweep_every: Option<String>,
    /// One calendar row per day or per week [default: day up to 62 days, week beyond].
    #[arg(long, value_parser = ["day", "week"])]
    pub rows: Option<String>,
    /// Compare with another policy (a file or inline JSON): each day side by side, and what
    /// switching to it at the end would delete.
    #[arg(long, value_name = "FILE|JSON")]
    pub against: Option<String>,
    /// The bucket's Object Lock setting, as SEXTON_S3_LOCK writes it (min=1d,daily=35d,...):
    /// each run locks what it keeps, and the days show what only the locks keep and its cost.
    #[arg(long, value_name = "TIERS")]
    pub lock: Option<String>,
    /// Copy rules, as a schedule's `copies` (a file or inline JSON, `[{"to": "dr", "policy":
    /// {...}}]`): each location is simulated with its own policy, storage per class and what
    /// early deletions cost [default with schedule describe: the schedule's].
    #[arg(long, value_name = "FILE|JSON")]
    pub copies: Option<String>,
    /// Simulate the binlog (WAL) archive too: a segment of SIZE closed every EVERY (1h:256MiB),
    /// collected as the engine's binlog plan says; the days show its size and where
    /// point-in-time recovery starts (see pitr_full and standalone holds).
    #[arg(long, value_name = "EVERY:SIZE")]
    pub binlog: Option<String>,
}

impl SimulationOptions {
    /// Whether any option was given (`schedule describe` refuses them without --simulate).
    pub fn any(&self) -> bool {
        self.days.is_some()
            || self.from.is_some()
            || self.failures.is_some()
            || self.seed.is_some()
            || self.size_full.is_some()
            || self.size_incremental.is_some()
            || self.sweep_every.is_some()
            || self.rows.is_some()
            || self.against.is_some()
            || self.lock.is_some()
            || self.copies.is_some()
            || self.binlog.is_some()
    }
}

/// A policy given as a file name or as inline JSON (text starting with `{`).
pub fn read_policy(flag: &str, text: &str) -> Result<Policy, Failure> {
    let json = if text.trim_start().starts_with('{') {
        text.to_owned()
    } else {
        std::fs::read_to_string(text)
            .map_err(|err| Failure::input(format!("--{flag}: cannot read {text}: {err}")))?
    };
    let policy = Policy::from_json(&json)
        .map_err(|err| Failure::input(format!("invalid --{flag}: {err}")))?;
    warn_months(&format!("--{flag}"), &policy);
    Ok(policy)
}

/// Says how a policy reads its months (issue 50: `15m` is fifteen months, which a reader of
/// `retention simulate`, `plan` or `diff` might take for minutes), on stderr, as `schedule
/// create` and `update` do in their warnings.
pub fn warn_months(what: &str, policy: &Policy) {
    for reading in policy.month_readings() {
        eprintln!("warning: {what}: {reading}");
    }
}

/// Copy rules given as a file name or as inline JSON (text starting with `[`), checked as a
/// schedule's are where they are written.
pub fn read_copies(text: &str) -> Result<Vec<sexton_model::copies::CopyRule>, Failure> {
    let json = if text.trim_start().starts_with('[') {
        text.to_owned()
    } else {
        std::fs::read_to_string(text)
            .map_err(|err| Failure::input(format!("--copies: cannot read {text}: {err}")))?
    };
    let rules: Vec<sexton_model::copies::CopyRule> = serde_json::from_str(&json)
        .map_err(|err| Failure::input(format!("invalid --copies: {err}")))?;
    Ok(rules)
}

/// The scenario the flags describe. `now` only sets the default `--from`.
pub fn scenario(
    name: &str,
    cron: &str,
    policy: Policy,
    full_every: Option<u32>,
    volumes: &[String],
    options: &SimulationOptions,
    now: DateTime<Utc>,
) -> Result<Scenario, Failure> {
    let input = |err: &dyn std::fmt::Display| Failure::input(err.to_string());
    let cron = CronSpec::five_field_form(cron)
        .and_then(|form| CronSpec::parse(&form))
        .map_err(|err| Failure::input(format!("invalid cron {cron:?}: {err}")))?;
    let days = Days::new(options.days.unwrap_or(DEFAULT_DAYS)).map_err(|e| input(&e))?;
    let from = match &options.from {
        Some(text) => crate::failure::parse_time("from", text)?,
        None => start_of_day(&cron, now),
    };
    let mut scenario = Scenario::new(cron, policy, from, days);
    scenario.name = name.to_owned();
    scenario.full_every = full_every
        .map(FullEvery::new)
        .transpose()
        .map_err(|e| input(&e))?;
    scenario.volumes = volumes.to_vec();
    if let Some(text) = &options.failures {
        scenario.failures =
            Failures::parse(text, options.seed.unwrap_or(1)).map_err(|e| input(&e))?;
    } else if options.seed.is_some() {
        return Err(Failure::input(
            "--seed goes with a failure rate (--failures 30%)",
        ));
    }
    let defaults = Sizes::default();
    let size = |flag: &str, text: &Option<String>, default: ByteSize| match text {
        Some(text) => {
            ByteSize::parse(text).map_err(|err| Failure::input(format!("--{flag}: {err}")))
        }
        None => Ok(default),
    };
    scenario.sizes = Sizes {
        full: size("size-full", &options.size_full, defaults.full)?,
        incremental: size(
            "size-incremental",
            &options.size_incremental,
            defaults.incremental,
        )?,
    };
    scenario.sweep_every = match options.sweep_every.as_deref() {
        None => Some(SweepInterval::HOURLY),
        Some("off") => None,
        Some(text) => Some(SweepInterval::parse(text).map_err(|e| input(&e))?),
    };
    if let Some(text) = &options.lock {
        let setting = sexton_shared::config::LockConfig::from_pairs(text)
            .map_err(|why| Failure::input(format!("--lock {text:?}: {why}")))?;
        scenario.lock = match setting {
            Some(setting) if !setting.tiers.is_empty() => {
                // A tier shorter than its rule promises, said as `schedule create` says it
                // (issue 50).
                for warning in
                    sexton_retention::lock::tier_warnings(&scenario.policy, &setting.tiers)
                {
                    eprintln!("warning: --lock: {warning}");
                }
                Some(setting.tiers)
            }
            _ => {
                return Err(Failure::input(format!(
                    "--lock {text:?}: no tier set, so nothing would be locked; give at least \
                     one of min, last, hourly, daily, weekly, monthly, yearly (min=1d,daily=35d)"
                )))
            }
        };
    }
    if let Some(text) = &options.copies {
        scenario.copies = read_copies(text)?;
    }
    if let Some(text) = &options.binlog {
        scenario.binlog = Some(sexton_simulate::BinlogArchive::parse(text).map_err(|e| input(&e))?);
    }
    scenario.validate().map_err(|e| input(&e))?;
    Ok(scenario)
}

/// Who keeps a backup on a day, from the engine's reasons; ordered by what a cell shows first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Failed,
    Locked,
    Partial,
    Chain,
    Floor,
    Rule,
}

impl Class {
    /// The classes a legend explains: the lock's only when the simulation locks.
    pub fn shown(locks: bool) -> Vec<Class> {
        let mut classes = vec![Class::Rule, Class::Floor, Class::Chain, Class::Partial];
        if locks {
            classes.push(Class::Locked);
        }
        classes.push(Class::Failed);
        classes
    }

    pub fn of(reasons: &[String]) -> Class {
        let keepers: Vec<Keeper> = reasons.iter().map(|r| keeper_of(r)).collect();
        if keepers
            .iter()
            .any(|k| matches!(k, Keeper::Rule(_) | Keeper::Other))
        {
            Class::Rule
        } else if keepers.contains(&Keeper::Floor) {
            Class::Floor
        } else if reasons.iter().any(|r| r == "no rule keeps it") {
            Class::Partial
        } else if keepers.contains(&Keeper::Chain) {
            Class::Chain
        } else if keepers.contains(&Keeper::Lock) {
            Class::Locked
        } else {
            Class::Failed
        }
    }

    pub fn mark(self) -> char {
        match self {
            Class::Rule => '●',
            Class::Floor => 'f',
            Class::Chain => 'c',
            Class::Partial => 'p',
            Class::Locked => 'l',
            Class::Failed => 'x',
        }
    }

    pub fn colour(self) -> &'static str {
        match self {
            Class::Rule => "\x1b[32m",
            Class::Floor => "\x1b[33m",
            Class::Chain => "\x1b[36m",
            Class::Partial => "\x1b[35m",
            Class::Locked => "\x1b[34m",
            Class::Failed => "\x1b[31m",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Class::Rule => "kept by a rule",
            Class::Floor => "kept by the floor alone",
            Class::Chain => "a kept backup builds on it",
            Class::Partial => "some volumes kept",
            Class::Locked => "kept only by its Object Lock",
            Class::Failed => "failed, within its grace period",
        }
    }

    /// The CSS class of the page's marks.
    pub fn css(self) -> &'static str {
        match self {
            Class::Rule => "rule",
            Class::Floor => "floor",
            Class::Chain => "chain",
            Class::Partial => "partial",
            Class::Locked => "locked",
            Class::Failed => "failed",
        }
    }
}

/// What to print: one simulation, or two policies compared.
pub enum Report {
    One(Box<Simulation>),
    Two(Box<Comparison>),
}

/// Runs the simulation (or the comparison with `against`).
pub fn run(scenario: &Scenario, against: Option<&Policy>) -> Result<Report, Failure> {
    // The simulated records are well formed, so what the engine refuses is the policy: bad
    // input, exit code 2.
    let refused = |err: sexton_simulate::SimulationError| Failure::input(err.to_string());
    let mut progress = Progress::on_terminal();
    let mut tell = |done: usize, total: usize| progress.tell(done, total);
    let report = match against {
        None => Report::One(Box::new(
            simulate_with_progress(scenario, &mut tell).map_err(refused)?,
        )),
        Some(proposed) => Report::Two(Box::new(
            compare_with_progress(scenario, proposed, &mut tell).map_err(refused)?,
        )),
    };
    progress.finish();
    Ok(report)
}

/// How far a long simulation is, on stderr when it is a terminal: one line rewritten in place
/// each whole percent, after the first second (a short one prints nothing), wiped at the end.
struct Progress {
    started: std::time::Instant,
    shown: Option<usize>,
    terminal: bool,
}

impl Progress {
    fn on_terminal() -> Progress {
        use std::io::IsTerminal as _;
        Progress {
            started: std::time::Instant::now(),
            shown: None,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn tell(&mut self, done: usize, total: usize) {
        if !self.terminal || total == 0 || self.started.elapsed().as_secs() < 1 {
            return;
        }
        let percent = done * 100 / total;
        if self.shown != Some(percent) {
            self.shown = Some(percent);
            eprint!("\rsimulating: {percent}% ({done} of {total} ticks and sweeps)");
        }
    }

    fn finish(&self) {
        if self.shown.is_some() {
            eprint!("\r{:79}\r", "");
        }
    }
}

impl Report {
    pub fn to_json(&self) -> Value {
        let value = match self {
            Report::One(simulation) => serde_json::to_value(simulation),
            Report::Two(comparison) => serde_json::to_value(comparison),
        };
        value.expect("a simulation serialises")
    }
}

/// Prints (or, for `-o html`, writes) the report.
pub fn print(
    output: Output,
    report: &Report,
    rows: Option<&str>,
    page_path: Option<&Path>,
) -> Result<(), Failure> {
    match output {
        Output::Json | Output::Yaml => crate::output::document(output, &report.to_json()),
        Output::Table | Output::Wide | Output::Name => {
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let text = match report {
                Report::One(simulation) => calendar::render(simulation, rows, colour),
                Report::Two(comparison) => calendar::render_comparison(comparison, rows, colour),
            };
            print!("{text}");
        }
        Output::Html => {
            let path = page_path
                .ok_or_else(|| Failure::input("-o html needs a file to write: -o html FILE"))?;
            let html = match report {
                Report::One(simulation) => page::render(simulation, None),
                Report::Two(comparison) => page::render(&comparison.current, Some(comparison)),
            };
            std::fs::write(path, html)
                .map_err(|err| Failure::input(format!("cannot write {}: {err}", path.display())))?;
            let simulation = match report {
                Report::One(simulation) => simulation.as_ref(),
                Report::Two(comparison) => &comparison.current,
            };
            println!(
                "wrote {} ({} days, {} backups taken, steady state {} backups)",
                path.display(),
                simulation.days.len(),
                simulation.backups.len(),
                simulation.summary.steady.count
            );
        }
    }
    Ok(())
}

/// The page file of `-o html FILE`: required with html, refused without it.
pub fn page_path(output: Output, page: &Option<PathBuf>) -> Result<Option<&Path>, Failure> {
    match (output, page) {
        (Output::Html, Some(path)) => Ok(Some(path)),
        (Output::Html, None) => Err(Failure::input(
            "-o html needs a file to write: -o html FILE",
        )),
        (_, Some(path)) => Err(Failure::input(format!(
            "unexpected argument {}: a file is only written with -o html",
            path.display()
        ))),
        (_, None) => Ok(None),
    }
}
