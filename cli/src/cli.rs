//! The `sexton` command line, in the style of `velero` and `kubectl`: nouns, verbs, `-o
//! table|json`. Talks to the fleet over the NATS request/reply API; the offline commands
//! (`retention plan`, `schedule next`) run the pure engines locally.
//!
//! Exit codes: 0 success, 1 the fleet or a dependency failed, 2 bad input (usage, a malformed
//! file, a request the API refused as invalid).

use std::{collections::BTreeMap, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};
use sexton_schedule::CronSpec;
use sexton_shared::{
    api::{ErrorCode, Reply},
    config::Config,
    topology,
};

#[derive(Parser, Debug)]
#[command(
    name = "sexton",
    version,
    about = "Sexton: backup schedules, retention and deletion"
)]
pub struct Cli {
    /// A TOML configuration file; SEXTON_* environment variables override it.
    #[arg(long, global = true, env = "SEXTON_CONFIG")]
    pub config: Option<PathBuf>,
    /// The NATS server to talk to (overrides nats.url).
    #[arg(long, global = true)]
    pub nats_url: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create, inspect and control schedules.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Inspect backups in the catalog.
    #[command(subcommand)]
    Backup(BackupCommand),
    /// Preview or compute retention decisions.
    #[command(subcommand)]
    Retention(RetentionCommand),
    /// Inspect a cluster's binlog (PITR) archive.
    #[command(subcommand)]
    Binlog(BinlogCommand),
    /// Register, list and unregister delete plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Remove a cluster's backup records (what `backup_owner: cluster` waits for).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Run the reference executor (writes small backups to S3 and reports them).
    Executor,
    /// Run a generic executor: your command takes each due backup, Sexton uploads what it
    /// leaves in $SEXTON_OUTPUT_DIR, writes metadata.json and reports (docs/executors.md).
    Exec(ExecArgs),
    /// Run a service in this process: scheduler, retention-worker or deleter.
    Serve {
        #[arg(value_parser = ["scheduler", "retention-worker", "deleter", "executor"])]
        service: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create a schedule.
    Create(CreateArgs),
    /// Show one schedule as stored, with its next run.
    Get { name: String },
    /// Show one schedule with why it did or did not fire.
    Describe { name: String },
    /// List schedules.
    List {
        #[arg(long)]
        cluster: Option<String>,
    },
    /// Delete a schedule. What happens to its backup records is its backup_owner (none and
    /// cluster: they stay; schedule: they go, with their objects only if remote cleanup is on);
    /// the command says what it will do to how many records before it does it.
    Delete {
        name: String,
        /// Only say what deleting would do; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Pause a schedule: nothing fires while paused.
    Pause { name: String },
    /// Unpause a schedule.
    Unpause {
        name: String,
        /// Skip a run that is due right now (default: the schedule's value, else the server's).
        #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
        skip_immediately: Option<bool>,
    },
    /// Print the next run times of a cron spec (offline).
    Next {
        #[arg(long)]
        cron: String,
        /// Start from this instant (RFC 3339); default now.
        #[arg(long)]
        from: Option<String>,
        #[arg(short = 'n', long, default_value_t = 5)]
        count: usize,
    },
    /// Run the pure schedule logic offline on a schedule document: why would it fire or not?
    Explain {
        /// `{"cron", "created_at", "paused"?, "skip_immediately"?, "last_backup"?,
        /// "last_skipped"?, "in_flight"?}`
        #[arg(long)]
        schedule: PathBuf,
        /// The instant to decide at (RFC 3339).
        #[arg(long)]
        now: String,
        /// The server default of skip-immediately.
        #[arg(long)]
        server_skip_immediately: bool,
    },
    /// Change a schedule's cron spec, policy, labels, overlap policy or starting deadline.
    Update(UpdateArgs),
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    pub name: String,
    #[arg(long)]
    pub cron: Option<String>,
    #[arg(long)]
    pub keep_last: Option<u32>,
    #[arg(long)]
    pub policy: Option<String>,
    /// Labels as key=value, repeatable; replaces all labels.
    #[arg(long = "label", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// What a due tick does while a backup of this schedule is still running.
    #[arg(long, value_parser = ["skip", "allow"])]
    pub overlap_policy: Option<String>,
    /// Skip a missed run older than this many seconds (Kubernetes' startingDeadlineSeconds).
    #[arg(long)]
    pub starting_deadline_seconds: Option<u64>,
    /// A full backup, then N-1 incrementals (per volume).
    #[arg(long, value_parser = parse_full_every, conflicts_with = "no_full_every")]
    pub full_every: Option<u32>,
    /// Turn `full_every` off again: fulls only without volumes, forever incremental with them.
    #[arg(long)]
    pub no_full_every: bool,
    /// The application's volumes, repeatable; replaces the list (a new volume starts full).
    #[arg(long = "volume")]
    pub volumes: Vec<String>,
    /// What deleting the schedule does to its backup records.
    #[arg(long, value_parser = ["schedule", "cluster", "none"])]
    pub backup_owner: Option<String>,
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    pub name: String,
    #[arg(long)]
    pub cluster: String,
    #[arg(long)]
    pub plan: String,
    /// Standard 5-field cron, a descriptor (@daily, @every 6h), optionally CRON_TZ=<zone> first.
    #[arg(long)]
    pub cron: String,
    /// Keep the newest N completed backups.
    #[arg(long)]
    pub keep_last: Option<u32>,
    /// A retention policy as JSON (keys: keep_last, keep_daily, recovery_window, ...).
    #[arg(long)]
    pub policy: Option<String>,
    #[arg(long)]
    pub paused: bool,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub skip_immediately: Option<bool>,
    /// Labels as key=value, repeatable.
    #[arg(long = "label", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// What a due tick does while a backup of this schedule is still running (default skip:
    /// the tick is recorded as skipped).
    #[arg(long, value_parser = ["skip", "allow"])]
    pub overlap_policy: Option<String>,
    /// Skip a missed run older than this many seconds (Kubernetes' startingDeadlineSeconds).
    #[arg(long)]
    pub starting_deadline_seconds: Option<u64>,
    /// A full backup, then N-1 incrementals (per volume). Unset: fulls only without volumes,
    /// forever incremental with volumes.
    #[arg(long, value_parser = parse_full_every)]
    pub full_every: Option<u32>,
    /// The application's volumes (seed 001's PVs), repeatable: each gets its own chain.
    #[arg(long = "volume")]
    pub volumes: Vec<String>,
    /// What deleting the schedule does to its backup records: schedule (they go with it),
    /// cluster or none (they stay; the default).
    #[arg(long, value_parser = ["schedule", "cluster", "none"])]
    pub backup_owner: Option<String>,
    /// Deleting a record of this schedule also deletes its objects (through the deleter).
    #[arg(long)]
    pub remote_cleanup: bool,
}

#[derive(Subcommand, Debug)]
pub enum BackupCommand {
    /// Take a backup now from a schedule's settings (does not change the schedule's timing).
    Create {
        #[arg(long)]
        from_schedule: String,
    },
    /// List backups in the catalog.
    List {
        #[arg(long)]
        cluster: Option<String>,
        #[arg(long)]
        plan: Option<String>,
    },
    /// Show one backup: its record, its volumes (which remain, and why: `needed by`), and what
    /// retention decides about it now.
    Describe {
        id: String,
        #[arg(long)]
        cluster: String,
    },
    /// Keep a backup while it is in use (a restore, a clone, a bootstrap), whatever retention
    /// says, until the same reason is released.
    Hold {
        id: String,
        #[arg(long)]
        cluster: String,
        /// `<what>:<id>`, such as `restore:r-42`.
        #[arg(long, value_parser = parse_hold_reason)]
        reason: String,
    },
    /// Release a hold; a backup no rule keeps then goes at the next retention pass.
    Release {
        id: String,
        #[arg(long)]
        cluster: String,
        #[arg(long, value_parser = parse_hold_reason)]
        reason: String,
    },
    /// Delete a backup's catalog record; its objects too with --remote (or when the backup,
    /// its schedule or its cluster/plan's schedules set remote_cleanup).
    Delete {
        id: String,
        #[arg(long)]
        cluster: String,
        /// Also delete the objects, through the deleter.
        #[arg(long)]
        remote: bool,
        /// Delete even the newest full backup, or one a kept backup depends on, now.
        #[arg(long)]
        force: bool,
    },
    /// List objects under the cluster's prefix that no catalog record owns.
    Orphans {
        #[arg(long)]
        cluster: String,
        /// Delete them.
        #[arg(long)]
        delete: bool,
        /// Ignore objects younger than this (90s, 15m, 24h, 7d).
        #[arg(long, default_value = "24h")]
        grace: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Remove every backup record of a cluster that has no schedule left (refused while it
    /// has some). The records only; with --remote their objects too, through the deleter.
    /// Held, legal-held and in-progress backups (and what they build on) stay. Says what it
    /// will do to how many records before it does it.
    Forget {
        #[arg(long)]
        cluster: String,
        /// Also delete the objects, through the deleter.
        #[arg(long)]
        remote: bool,
        /// Only say what forgetting would do; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Register (or replace) a delete plugin: called on every deletion of a backup whose
    /// labels match the selector, in alphanumeric order of name.
    Register {
        name: String,
        /// Where the plugin answers requests (under sexton.v1.plugin.).
        #[arg(long)]
        subject: String,
        /// Labels a backup must carry, as key=value, repeatable.
        #[arg(long = "selector", value_parser = parse_label)]
        selector: Vec<(String, String)>,
        /// Seconds to wait for an answer (default: the deleter's plugin_timeout).
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// List delete plugins.
    List,
    /// Unregister a delete plugin.
    Unregister { name: String },
}

#[derive(Subcommand, Debug)]
pub enum RetentionCommand {
    /// Ask the live fleet what it would delete now and why; deletes nothing.
    Preview {
        #[arg(long)]
        cluster: String,
        #[arg(long)]
        plan: Option<String>,
    },
    /// Run the retention engine offline on a catalog file and a policy file.
    Plan {
        #[arg(long)]
        catalog: PathBuf,
        #[arg(long)]
        policy: PathBuf,
        /// The instant to decide at (RFC 3339); default now.
        #[arg(long)]
        now: Option<String>,
    },
}

/// `sexton exec`: every flag may also be given as its SEXTON_EXEC_* environment variable.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The command that takes a backup, run with `sh -c` (see docs/executors.md for its
    /// environment, its output directory and its facts file).
    #[arg(long, env = "SEXTON_EXEC_BACKUP_COMMAND")]
    pub backup_command: String,
    /// The command that merges a chain into its oldest kept backup (chain_mode: merge);
    /// without it, merge jobs are left to another executor.
    #[arg(long, env = "SEXTON_EXEC_MERGE_COMMAND")]
    pub merge_command: Option<String>,
    /// Take only this cluster's backups (default: every cluster's).
    #[arg(long, env = "SEXTON_EXEC_CLUSTER")]
    pub cluster: Option<String>,
    /// The durable consumer of due backups (default sexton-exec[-<cluster>]).
    #[arg(long, env = "SEXTON_EXEC_DURABLE")]
    pub durable: Option<String>,
    /// The durable consumer of merge jobs (default <durable>-merge).
    #[arg(long, env = "SEXTON_EXEC_MERGE_DURABLE")]
    pub merge_durable: Option<String>,
    /// Where job directories are made (default $TMPDIR/sexton-exec).
    #[arg(long, env = "SEXTON_EXEC_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// A command still running after this is stopped and the backup reported failed.
    #[arg(long, env = "SEXTON_EXEC_TIMEOUT", default_value = "6h", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Jobs (backups and merges) at once.
    #[arg(long, env = "SEXTON_EXEC_CONCURRENCY", default_value_t = 1)]
    pub concurrency: usize,
    /// The most bytes one backup's output may hold (1TiB, 500GiB, 10MiB, a number of bytes).
    #[arg(long, env = "SEXTON_EXEC_MAX_OUTPUT_BYTES", default_value = "1TiB", value_parser = parse_size)]
    pub max_output_bytes: u64,
    /// The most files one backup's output may hold.
    #[arg(long, env = "SEXTON_EXEC_MAX_OUTPUT_FILES", default_value_t = 10_000)]
    pub max_output_files: usize,
    /// Multipart upload part size (5MiB to 5GiB).
    #[arg(long, env = "SEXTON_EXEC_PART_SIZE", default_value = "8MiB", value_parser = parse_size)]
    pub part_size: u64,
    /// Parts of one file in memory (being read or sent) at once.
    #[arg(long, env = "SEXTON_EXEC_UPLOAD_CONCURRENCY", default_value_t = 4)]
    pub upload_concurrency: usize,
    /// On SIGTERM, how long running commands may still take before they are stopped and
    /// their jobs handed back.
    #[arg(long, env = "SEXTON_EXEC_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// The consumers' ack wait; a running job sends progress every third of it.
    #[arg(long, env = "SEXTON_EXEC_ACK_WAIT", default_value = "60s", value_parser = parse_duration)]
    pub ack_wait: Duration,
    /// A new durable starts with the due backups of this last while (not the stream's week).
    #[arg(long, env = "SEXTON_EXEC_CATCH_UP", default_value = "1h", value_parser = parse_duration)]
    pub catch_up: Duration,
}

impl ExecArgs {
    fn options(&self) -> Result<crate::exec::ExecOptions, Failure> {
        let cluster = self
            .cluster
            .as_deref()
            .map(sexton_shared::names::ClusterName::new)
            .transpose()
            .map_err(|err| Failure::input(format!("--cluster: {err}")))?;
        let (durable, merge_durable) = crate::exec::ExecOptions::default_durables(cluster.as_ref());
        let durable_given = self.durable.clone();
        let options = crate::exec::ExecOptions {
            backup_command: self.backup_command.clone(),
            merge_command: self.merge_command.clone(),
            merge_durable: self
                .merge_durable
                .clone()
                .unwrap_or_else(|| match &durable_given {
                    Some(durable) => format!("{durable}-merge"),
                    None => merge_durable,
                }),
            durable: durable_given.unwrap_or(durable),
            cluster,
            work_dir: self
                .work_dir
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("sexton-exec")),
            timeout: self.timeout,
            concurrency: self.concurrency,
            limits: crate::exec::output::Limits {
                max_files: self.max_output_files,
                max_bytes: self.max_output_bytes,
            },
            upload: sexton_shared::object_store::transfer::UploadSettings {
                part_size: self.part_size,
                concurrency: self.upload_concurrency,
            },
            shutdown_grace: self.shutdown_grace,
            ack_wait: self.ack_wait,
            catch_up: self.catch_up,
        };
        options.validate().map_err(Failure::input)?;
        Ok(options)
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    sexton_shared::config::duration_text::parse(text).map_err(|err| format!("{text:?}: {err}"))
}

/// Bytes as people write them: `1TiB`, `8MiB`, `512KiB`, `10GB`, `1048576`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let bad = || format!("{text:?} is not a size such as 8MiB, 1TiB or 1048576");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let factor: u64 = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[derive(Subcommand, Debug)]
pub enum BinlogCommand {
    /// Ship closed log files into the cluster's archive: each is uploaded, then appended to
    /// <prefix>/<cluster>/binlog/_index.json with a conditional write. Files already indexed
    /// (or older than the archive's oldest segment) are skipped, so shipping is idempotent.
    Append {
        #[arg(long)]
        cluster: String,
        /// How event times are found: binlog (MySQL/MariaDB headers) or file (modification time).
        #[arg(long, value_enum, default_value_t = crate::binlog_append::SegmentFormat::Binlog)]
        format: crate::binlog_append::SegmentFormat,
        /// Ship a binlog still flagged as open (one a crashed server left so).
        #[arg(long)]
        allow_in_use: bool,
        /// The files, oldest first.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// The binlog index of a cluster: its state and ETag, the PITR horizon retention gives
    /// now, and how many segments it lists, would delete, and keep for want of an end time.
    Status {
        #[arg(long)]
        cluster: String,
    },
}

fn parse_hold_reason(text: &str) -> Result<String, String> {
    sexton_shared::api::check_hold_reason(text).map(|()| text.to_string())
}

fn parse_full_every(text: &str) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a positive whole number of backups");
    let n: u32 = text.parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(bad());
    }
    Ok(n)
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("label {text:?} is not key=value"))?;
    if key.is_empty() {
        return Err(format!("label {text:?} has an empty key"));
    }
    Ok((key.to_string(), value.to_string()))
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
    fn runtime(err: anyhow::Error) -> Failure {
        Failure {
            code: 1,
            message: format!("{err:#}"),
        }
    }
}

/// Parses arguments, runs the command, prints, and returns the exit code.
pub async fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn parse_time(flag: &str, text: &str) -> Result<DateTime<Utc>, Failure> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|err| Failure::input(format!("--{flag} {text:?} is not an RFC 3339 time: {err}")))
}

pub async fn run(cli: Cli) -> Result<(), Failure> {
    let load_config = || -> Result<Config, Failure> {
        let mut config =
            Config::load(cli.config.as_deref()).map_err(|err| Failure::input(err.to_string()))?;
        if let Some(url) = &cli.nats_url {
            config
                .set("nats.url", url)
                .map_err(|err| Failure::input(err.to_string()))?;
            config
                .validate()
                .map_err(|err| Failure::input(err.to_string()))?;
        }
        Ok(config)
    };
    match &cli.command {
        Command::Schedule(ScheduleCommand::Next { cron, from, count }) => {
            let spec = CronSpec::parse(cron)
                .map_err(|err| Failure::input(format!("invalid cron {cron:?}: {err}")))?;
            let from = match from {
                Some(text) => parse_time("from", text)?,
                None => Utc::now(),
            };
            if *count == 0 || *count > 10_000 {
                return Err(Failure::input("-n must be between 1 and 10000"));
            }
            let runs: Vec<Value> = spec
                .upcoming(from, *count)
                .into_iter()
                .map(|t| json!(t.to_rfc3339()))
                .collect();
            print_value(cli.output, &Value::Array(runs), &["."]);
            Ok(())
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
            policy,
            now,
        }) => {
            let read = |path: &PathBuf| {
                std::fs::read_to_string(path)
                    .map_err(|err| Failure::input(format!("cannot read {}: {err}", path.display())))
            };
            let catalog_text = read(catalog)?;
            let policy_text = read(policy)?;
            let catalog: sexton_retention::Catalog =
                serde_json::from_str(&catalog_text).map_err(|err| {
                    Failure::input(format!("invalid catalog {}: {err}", catalog.display()))
                })?;
            let policy = sexton_retention::Policy::from_json(&policy_text).map_err(|err| {
                Failure::input(format!("invalid policy {}: {err}", policy.display()))
            })?;
            let now = match now {
                Some(text) => parse_time("now", text)?,
                None => Utc::now(),
            };
            let plan = sexton_retention::plan(&catalog, &policy, now)
                .map_err(|err| Failure::input(err.to_string()))?;
            let value = serde_json::to_value(&plan).map_err(|err| Failure::runtime(err.into()))?;
            match cli.output {
                Output::Json => print_value(Output::Json, &value, &[]),
                Output::Table => print_plan_table(&value),
            }
            Ok(())
        }
        Command::Exec(args) => {
            let options = args.options()?;
            let config = load_config()?;
            sexton_shared::telemetry::init_logging(config.log.format);
            crate::exec::run(config, options, sexton_shared::shutdown::on_signals())
                .await
                .map_err(Failure::runtime)
        }
        Command::Binlog(BinlogCommand::Append {
            cluster,
            format,
            allow_in_use,
            files,
        }) => {
            let cluster = sexton_shared::names::ClusterName::new(cluster.as_str())
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
                let outcome = crate::binlog_append::append(
                    &store,
                    &config.s3.prefix,
                    &cluster,
                    file,
                    *format,
                    *allow_in_use,
                    Default::default(),
                )
                .await;
                match outcome {
                    Ok(done) => shipped.push(done),
                    // A file that is not what it claims is the caller's to fix (exit 2); the
                    // files before it are shipped and stay so.
                    Err(err)
                        if err
                            .downcast_ref::<crate::binlog_file::BinlogFileError>()
                            .is_some() =>
                    {
                        print_shipped(cli.output, &shipped);
                        return Err(Failure::input(format!("{err:#}")));
                    }
                    Err(err) => {
                        print_shipped(cli.output, &shipped);
                        return Err(Failure::runtime(err));
                    }
                }
            }
            print_shipped(cli.output, &shipped);
            Ok(())
        }
        Command::Executor => {
            let config = load_config()?;
            sexton_shared::telemetry::init_logging(config.log.format);
            crate::executor::run(config, sexton_shared::shutdown::on_signals())
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
                _ => crate::executor::run(config, shutdown).await,
            };
            result.map_err(Failure::runtime)
        }
        command => {
            let config = load_config()?;
            let (subject, body, columns) = request_for(command)?;
            let client = sexton_shared::nats::connect_once(&config.nats, "sexton-cli")
                .await
                .map_err(Failure::runtime)?;
            // `schedule delete` and `cluster forget` say what they will do to the records first.
            if let Command::Schedule(ScheduleCommand::Delete { dry_run: false, .. })
            | Command::Cluster(ClusterCommand::Forget { dry_run: false, .. }) = command
            {
                let mut preview = body.clone();
                preview["dry_run"] = json!(true);
                let plan = request(&client, &subject, preview).await?;
                eprintln!("{}", cell(plan.get("summary")));
            }
            let value = request(&client, &subject, body).await?;
            match command {
                Command::Backup(BackupCommand::Describe { .. }) if cli.output == Output::Table => {
                    print_backup_description(&value)
                }
                _ => print_value(cli.output, &value, columns),
            }
            Ok(())
        }
    }
}

fn print_shipped(output: Output, shipped: &[crate::binlog_append::Shipped]) {
    let value = serde_json::to_value(shipped).expect("shipped segments serialise");
    print_value(
        output,
        &value,
        &["key", "action", "first_event", "last_event", "size"],
    );
}

/// The API call of an online command, and the columns its table shows.
fn request_for(command: &Command) -> Result<(String, Value, &'static [&'static str]), Failure> {
    const SCHEDULE_COLUMNS: &[&str] = &[
        "schedule.name",
        "schedule.cluster",
        "schedule.plan",
        "schedule.cron",
        "schedule.status.phase",
        "schedule.status.last_backup",
        "schedule.status.next_run_time",
    ];
    let by_name = |name: &str| json!({"schema_version": 1, "name": name});
    Ok(match command {
        Command::Schedule(cmd) => match cmd {
            ScheduleCommand::Create(args) => {
                let policy =
                    policy_json(args.policy.as_deref(), args.keep_last, true)?.expect("required");
                let labels: BTreeMap<_, _> = args.labels.iter().cloned().collect();
                let mut body = json!({
                    "schema_version": 1,
                    "name": args.name,
                    "cluster": args.cluster,
                    "plan": args.plan,
                    "cron": args.cron,
                    "paused": args.paused,
                    "policy": policy,
                    "labels": labels,
                    "remote_cleanup": args.remote_cleanup,
                });
                if let Some(skip) = args.skip_immediately {
                    body["skip_immediately"] = json!(skip);
                }
                if let Some(overlap) = &args.overlap_policy {
                    body["overlap_policy"] = json!(overlap);
                }
                if let Some(seconds) = args.starting_deadline_seconds {
                    body["starting_deadline_seconds"] = json!(seconds);
                }
                if let Some(n) = args.full_every {
                    body["full_every"] = json!(n);
                }
                if !args.volumes.is_empty() {
                    body["volumes"] = json!(args.volumes);
                }
                if let Some(owner) = &args.backup_owner {
                    body["backup_owner"] = json!(owner);
                }
                (
                    topology::api_subject("schedule", "create"),
                    body,
                    SCHEDULE_COLUMNS,
                )
            }
            ScheduleCommand::Get { name } => (
                topology::api_subject("schedule", "get"),
                by_name(name),
                SCHEDULE_COLUMNS,
            ),
            ScheduleCommand::Describe { name } => (
                topology::api_subject("schedule", "describe"),
                by_name(name),
                &[
                    "schedule.name",
                    "schedule.cron",
                    "explain.action",
                    "explain.next_run_time",
                    "schedule.status.last_backup",
                    "schedule.status.last_skipped",
                    "schedule.status.last_skip_reason",
                    "explain.error",
                ],
            ),
            ScheduleCommand::List { cluster } => {
                let mut body = json!({"schema_version": 1});
                if let Some(cluster) = cluster {
                    body["cluster"] = json!(cluster);
                }
                (
                    topology::api_subject("schedule", "list"),
                    body,
                    SCHEDULE_COLUMNS,
                )
            }
            ScheduleCommand::Delete { name, dry_run } => {
                let mut body = by_name(name);
                body["dry_run"] = json!(dry_run);
                (
                    topology::api_subject("schedule", "delete"),
                    body,
                    &["schedule", "deleted", "records", "summary"],
                )
            }
            ScheduleCommand::Pause { name } => (
                topology::api_subject("schedule", "pause"),
                by_name(name),
                SCHEDULE_COLUMNS,
            ),
            ScheduleCommand::Unpause {
                name,
                skip_immediately,
            } => {
                let mut body = by_name(name);
                if let Some(skip) = skip_immediately {
                    body["skip_immediately"] = json!(skip);
                }
                (
                    topology::api_subject("schedule", "unpause"),
                    body,
                    SCHEDULE_COLUMNS,
                )
            }
            ScheduleCommand::Update(args) => {
                let mut body = by_name(&args.name);
                if let Some(cron) = &args.cron {
                    body["cron"] = json!(cron);
                }
                if let Some(policy) = policy_json(args.policy.as_deref(), args.keep_last, false)? {
                    body["policy"] = policy;
                }
                if !args.labels.is_empty() {
                    body["labels"] = json!(args.labels.iter().cloned().collect::<BTreeMap<_, _>>());
                }
                if let Some(overlap) = &args.overlap_policy {
                    body["overlap_policy"] = json!(overlap);
                }
                if let Some(seconds) = args.starting_deadline_seconds {
                    body["starting_deadline_seconds"] = json!(seconds);
                }
                if let Some(n) = args.full_every {
                    body["full_every"] = json!(n);
                }
                if args.no_full_every {
                    body["full_every"] = Value::Null;
                }
                if !args.volumes.is_empty() {
                    body["volumes"] = json!(args.volumes);
                }
                if let Some(owner) = &args.backup_owner {
                    body["backup_owner"] = json!(owner);
                }
                (
                    topology::api_subject("schedule", "update"),
                    body,
                    SCHEDULE_COLUMNS,
                )
            }
            ScheduleCommand::Next { .. } | ScheduleCommand::Explain { .. } => {
                unreachable!("offline commands are handled before")
            }
        },
        Command::Backup(BackupCommand::Create { from_schedule }) => (
            topology::api_subject("backup", "create"),
            json!({"schema_version": 1, "name": from_schedule}),
            &["backup_id", "schedule", "tick"],
        ),
        Command::Backup(BackupCommand::List { cluster, plan }) => {
            let mut body = json!({"schema_version": 1});
            if let Some(cluster) = cluster {
                body["cluster"] = json!(cluster);
            }
            if let Some(plan) = plan {
                body["plan"] = json!(plan);
            }
            (
                topology::api_subject("backup", "list"),
                body,
                &["cluster", "plan", "id", "kind", "status", "completed_at"],
            )
        }
        Command::Backup(BackupCommand::Describe { id, cluster }) => (
            topology::api_subject("backup", "describe"),
            json!({"schema_version": 1, "cluster": cluster, "id": id}),
            &[],
        ),
        Command::Backup(BackupCommand::Hold {
            id,
            cluster,
            reason,
        }) => (
            topology::api_subject("backup", "hold"),
            json!({"schema_version": 1, "cluster": cluster, "id": id, "reason": reason}),
            &["cluster", "id", "action", "holds", "warning"],
        ),
        Command::Backup(BackupCommand::Release {
            id,
            cluster,
            reason,
        }) => (
            topology::api_subject("backup", "release"),
            json!({"schema_version": 1, "cluster": cluster, "id": id, "reason": reason}),
            &["cluster", "id", "action", "holds"],
        ),
        Command::Backup(BackupCommand::Delete {
            id,
            cluster,
            remote,
            force,
        }) => (
            topology::api_subject("backup", "delete"),
            json!({"schema_version": 1, "cluster": cluster, "id": id,
                   "remote": remote, "force": force}),
            &["cluster", "id", "action", "remote", "reason"],
        ),
        Command::Backup(BackupCommand::Orphans {
            cluster,
            delete,
            grace,
        }) => (
            topology::api_subject("orphans", if *delete { "delete" } else { "list" }),
            json!({"schema_version": 1, "cluster": cluster, "grace": grace}),
            &[],
        ),
        Command::Plugin(PluginCommand::Register {
            name,
            subject,
            selector,
            timeout,
        }) => {
            let mut body = json!({"schema_version": 1, "name": name, "subject": subject,
                                  "selector": selector.iter().cloned().collect::<BTreeMap<_, _>>()});
            if let Some(timeout) = timeout {
                body["timeout_seconds"] = json!(timeout);
            }
            (
                topology::api_subject("plugin", "register"),
                body,
                &["name", "subject", "selector", "timeout_seconds"],
            )
        }
        Command::Plugin(PluginCommand::List) => (
            topology::api_subject("plugin", "list"),
            json!({"schema_version": 1}),
            &["name", "subject", "selector", "timeout_seconds", "error"],
        ),
        Command::Plugin(PluginCommand::Unregister { name }) => (
            topology::api_subject("plugin", "unregister"),
            json!({"schema_version": 1, "name": name}),
            &["unregistered"],
        ),
        Command::Retention(RetentionCommand::Preview { cluster, plan }) => {
            let mut body = json!({"schema_version": 1, "cluster": cluster});
            if let Some(plan) = plan {
                body["plan"] = json!(plan);
            }
            (topology::api_subject("retention", "preview"), body, &[])
        }
        Command::Binlog(BinlogCommand::Status { cluster }) => (
            topology::api_subject("binlog", "status"),
            json!({"schema_version": 1, "cluster": cluster}),
            &[
                "cluster",
                "index.state",
                "index.etag",
                "horizon",
                "horizon_backup",
                "segments.total",
                "segments.expired",
                "segments.unknown_end",
                "collection",
            ],
        ),
        Command::Cluster(ClusterCommand::Forget {
            cluster,
            remote,
            dry_run,
        }) => {
            // A quick, local refusal of a name the API would refuse too.
            sexton_shared::names::ClusterName::new(cluster.as_str())
                .map_err(|err| Failure::input(format!("--cluster {cluster:?}: {err}")))?;
            (
                topology::api_subject("cluster", "forget"),
                json!({"schema_version": 1, "cluster": cluster, "remote": remote,
                       "dry_run": dry_run}),
                &["cluster", "forgotten", "records", "summary"],
            )
        }
        _ => unreachable!("offline commands are handled before"),
    })
}

/// The policy of `--policy JSON` or `--keep-last N`, validated here for a quick error (the server
/// validates again). `required` makes giving neither an error.
fn policy_json(
    policy: Option<&str>,
    keep_last: Option<u32>,
    required: bool,
) -> Result<Option<Value>, Failure> {
    match (policy, keep_last) {
        (Some(_), Some(_)) => Err(Failure::input("give --policy or --keep-last, not both")),
        (Some(text), None) => {
            sexton_retention::Policy::from_json(text)
                .map_err(|err| Failure::input(format!("invalid --policy: {err}")))?;
            serde_json::from_str::<Value>(text)
                .map(Some)
                .map_err(|err| Failure::input(format!("invalid --policy: {err}")))
        }
        (None, Some(0)) => Err(Failure::input("--keep-last must be at least 1")),
        (None, Some(n)) => Ok(Some(json!({"keep_last": n}))),
        (None, None) if required => Err(Failure::input(
            "a schedule needs a retention policy: --keep-last N or --policy JSON",
        )),
        (None, None) => Ok(None),
    }
}

async fn request(
    client: &async_nats::Client,
    subject: &str,
    body: Value,
) -> Result<Value, Failure> {
    let body = serde_json::to_vec(&body).map_err(|err| Failure::runtime(err.into()))?;
    let message = tokio::time::timeout(
        Duration::from_secs(15),
        client.request(subject.to_string(), body.into()),
    )
    .await
    .map_err(|_| Failure::runtime(anyhow::anyhow!("no answer on {subject} within 15s")))?
    .with_context(|| format!("no answer on {subject}: is the fleet running?"))
    .map_err(Failure::runtime)?;
    let reply: Reply = serde_json::from_slice(&message.payload)
        .with_context(|| format!("unreadable answer on {subject}"))
        .map_err(Failure::runtime)?;
    reply.into_result().map_err(|err| Failure {
        code: if err.code == ErrorCode::Invalid { 2 } else { 1 },
        message: err.message,
    })
}

fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    if path == "." {
        return Some(value);
    }
    path.split('.').try_fold(value, |v, part| v.get(part))
}

fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// Prints `value` as JSON, or as a table with `columns` (dotted paths into each row).
fn print_value(output: Output, value: &Value, columns: &[&str]) {
    if output == Output::Json || columns.is_empty() {
        println!(
            "{}",
            serde_json::to_string_pretty(value).expect("json prints")
        );
        return;
    }
    let rows: Vec<&Value> = match value {
        Value::Array(rows) => rows.iter().collect(),
        other => vec![other],
    };
    let header: Vec<String> = columns
        .iter()
        .map(|c| c.rsplit('.').next().unwrap_or(c).to_uppercase())
        .collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| columns.iter().map(|c| cell(lookup(row, c))).collect())
        .collect();
    print_table(&header, &cells);
}

fn print_table(header: &[String], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(String::len).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    println!("{}", line(header));
    for row in rows {
        println!("{}", line(row));
    }
}

/// `backup describe` as text: the backup, the retention verdict, and one row per volume.
fn print_backup_description(value: &Value) {
    let backup = value.get("backup").unwrap_or(&Value::Null);
    for (label, path) in [
        ("id", "id"),
        ("cluster", "cluster"),
        ("plan", "plan"),
        ("schedule", "schedule"),
        ("status", "status"),
        ("kind", "kind"),
        ("completed", "completed_at"),
        ("holds", "holds"),
        ("last error", "last_error"),
    ] {
        println!("{:<12}{}", format!("{label}:"), cell(lookup(backup, path)));
    }
    let retention = value.get("retention").unwrap_or(&Value::Null);
    println!(
        "{:<12}{} ({})",
        "retention:",
        cell(retention.get("verdict")),
        join_reasons(retention.get("reasons"))
    );
    let volumes = value.get("volumes").and_then(Value::as_array);
    if let Some(volumes) = volumes.filter(|v| !v.is_empty()) {
        println!();
        let rows: Vec<Vec<String>> = volumes
            .iter()
            .map(|v| {
                vec![
                    cell(v.get("name")),
                    cell(v.get("kind")),
                    cell(v.get("parent")),
                    cell(v.get("state")),
                    join_reasons(v.get("reasons")),
                ]
            })
            .collect();
        print_table(
            &["VOLUME", "KIND", "PARENT", "STATE", "WHY"].map(String::from),
            &rows,
        );
    }
}

fn join_reasons(reasons: Option<&Value>) -> String {
    reasons
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .map(|v| cell(Some(v)))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

fn print_plan_table(plan: &Value) {
    let mut rows = Vec::new();
    for (decision, key) in [
        ("keep", "keep"),
        ("partial", "partial"),
        ("delete", "delete"),
    ] {
        for entry in plan
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let reasons = entry
                .get("reasons")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .map(|v| cell(Some(v)))
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default();
            rows.push(vec![decision.to_string(), cell(entry.get("id")), reasons]);
            // Per volume of a backup with volumes: what stays (and why), what goes.
            for (word, list) in [("keep", "volumes_keep"), ("delete", "volumes_delete")] {
                for volume in entry
                    .get(list)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    rows.push(vec![
                        format!("  {word} volume"),
                        cell(volume.get("name")),
                        join_reasons(volume.get("reasons")),
                    ]);
                }
            }
        }
    }
    print_table(&["DECISION".into(), "ID".into(), "REASONS".into()], &rows);
    if let Some(binlog) = plan.get("binlog") {
        println!();
        println!("binlog horizon: {}", cell(binlog.get("horizon")));
        for (label, key) in [("keep", "keep"), ("delete", "delete")] {
            let n = binlog
                .get(key)
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            println!("binlog segments to {label}: {n}");
        }
    }
}
