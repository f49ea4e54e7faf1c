//! The `sexton` command's arguments: the clap definitions of every noun and verb, and the
//! parsers of their values (durations, sizes, labels, windows). No requests, no printing.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand};

use crate::failure::Failure;
pub use crate::output::Output;

mod backup;
mod binlog;
mod exec;
mod retention;
mod schedule;

pub use backup::BackupCommand;
pub use binlog::{BinlogCommand, SegmentFormat};
pub use exec::ExecArgs;
pub use retention::{RecoveryCommand, RetentionCommand};
pub use schedule::{CreateArgs, PolicyArgs, ScheduleCommand, TimingArgs, UpdateArgs};

#[derive(Parser, Debug)]
#[command(
    name = "sexton",
    version,
    about = "Sexton: backup schedules, retention and deletion",
    after_help = "Examples:
  sexton schedule list                       # every schedule, as a table
  sexton backup list --cluster db1 -o wide   # with absolute times and labels
  sexton backup list -l team=db -o name      # backup/<id> per line, for scripts
  sexton schedule describe nightly           # settings, policy, why it fires next
  sexton completion bash > /etc/bash_completion.d/sexton
  sexton version                             # this client and every service

Exit codes: 0 success, 1 failure or not found, 2 bad input, 77 permission denied by NATS."
)]
pub struct Cli {
    /// A TOML configuration file; SEXTON_* environment variables override it.
    #[arg(
        long,
        global = true,
        env = "SEXTON_CONFIG",
        help_heading = "Global options"
    )]
    pub config: Option<PathBuf>,
    /// The NATS server to talk to (overrides nats.url).
    #[arg(long, global = true, help_heading = "Global options")]
    pub nats_url: Option<String>,
    /// Output format: table (default), wide (more columns, absolute times), json, yaml, or
    /// name (kind/name per line).
    #[arg(
        short = 'o',
        long,
        global = true,
        value_enum,
        default_value_t = Output::Table,
        help_heading = "Global options"
    )]
    pub output: Output,
    /// Print tables without their header row.
    #[arg(long, global = true, help_heading = "Global options")]
    pub no_headers: bool,
    #[command(subcommand)]
    pub command: Command,
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
    /// Compare the catalog with the bucket, or rebuild it from the bucket.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// What can be restored, to which points in time, from which place (docs/recovery.md).
    #[command(subcommand)]
    Recovery(RecoveryCommand),
    /// Read the audit trail: who decided, marked, claimed and deleted what, and why
    /// (docs/safety.md).
    #[command(after_help = "Examples:
  sexton audit --cluster db1 --since 24h
  sexton audit --cluster db1 --backup nightly-20261124030000
  sexton audit --since all -o json")]
    Audit(AuditArgs),
    /// Run the reference executor (writes small backups to S3 and reports them).
    #[command(after_help = "Examples:
  sexton executor --config /etc/sexton/sexton.toml
  SEXTON_NATS_URL=nats://127.0.0.1:4222 sexton executor")]
    Executor,
    /// Run a generic executor: your command takes each due backup, Sexton uploads what it
    /// leaves in $SEXTON_OUTPUT_DIR, writes metadata.json and reports (docs/executors.md).
    #[command(after_help = "Examples:
  sexton exec --cluster db1 --backup-command deploy/executors/mariadb/backup.sh
  sexton exec --backup-command 'pg_basebackup -D \"$SEXTON_OUTPUT_DIR\" -Ft -z' --concurrency 2
  sexton exec --backup-command ./backup.sh --verify-command ./restore-verify.sh")]
    Exec(ExecArgs),
    /// Run a service in this process: scheduler, retention-worker, deleter, copier or the
    /// reference executor.
    #[command(after_help = "Examples:
  sexton serve scheduler --config /etc/sexton/sexton.toml
  SEXTON_NATS_URL=nats://127.0.0.1:4222 sexton serve deleter
  sexton serve copier --config /etc/sexton/sexton.toml")]
    Serve {
        /// The service to run.
        #[arg(value_parser = ["scheduler", "retention-worker", "deleter", "copier", "executor"])]
        service: String,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell); bash, zsh and
    /// fish complete the fleet's cluster, schedule and backup names too.
    #[command(after_help = "Examples:
  sexton completion bash > /etc/bash_completion.d/sexton
  sexton completion zsh > \"${fpath[1]}/_sexton\"
  sexton completion fish > ~/.config/fish/completions/sexton.fish")]
    Completion {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// The names a completion script offers (hidden: the scripts call it).
    #[command(
        name = "__complete-names",
        hide = true,
        after_help = "Examples:
  sexton __complete-names schedule
  sexton __complete-names backup --cluster db1"
    )]
    CompleteNames {
        /// What to name: cluster, schedule or backup.
        kind: crate::completion::NameKind,
        /// Backups of this cluster only.
        #[arg(long)]
        cluster: Option<String>,
    },
    /// Print this client's version and ask every running service for its own.
    #[command(after_help = "Examples:
  sexton version
  sexton version -o json")]
    Version,
    /// Create and update schedules to match manifests (YAML or JSON, several documents per
    /// file, directories read recursively); the whole set is checked before anything changes
    /// (docs/gitops.md).
    #[command(after_help = "Examples:
  sexton apply -f schedules/
  sexton apply -f nightly.yaml --dry-run
  sexton apply -f schedules/ --prune -l team=db --yes")]
    Apply(ApplyArgs),
    /// What `apply -f` would change: each schedule's spec as a unified diff, and what the
    /// change deletes now. Exits 1 when anything differs, as `kubectl diff` does.
    #[command(after_help = "Examples:
  sexton diff -f schedules/ || echo 'differs from the fleet'
  sexton diff -f schedules/ --prune -l team=db   # also what apply --prune would delete")]
    Diff {
        /// Manifest files or directories.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<std::path::PathBuf>,
        /// Also show what `apply --prune` would delete: the schedules (and delete plugins)
        /// apply manages that match -l and that no manifest names.
        #[arg(long, requires = "selector")]
        prune: bool,
        /// With --prune: which objects it may delete (key=value or key!=value, comma-separated).
        #[arg(short = 'l', long = "selector", value_parser = crate::listing::Selector::parse)]
        selector: Option<crate::listing::Selector>,
    },
    /// Write the fleet's schedules (or delete plugins) as manifests that `apply -f` takes
    /// back unchanged (YAML documents; `-o json`: a List), each with its status (for a
    /// schedule: generation, last backup and its outcome, next run, conditions Ready, Held and
    /// Failing), which apply ignores.
    #[command(after_help = "Examples:
  sexton get schedules --no-status > schedules.yaml    # what to keep in Git
  sexton get deleteplugins --no-status > plugins.yaml
  sexton get locations > locations.yaml                 # checked by apply, never changed
  sexton get schedule nightly
  sexton get schedules -l team=db -o json")]
    Get {
        /// What to write.
        #[arg(value_parser = ["schedules", "schedule", "deleteplugins", "deleteplugin", "locations", "location", "backups", "backup"])]
        kind: String,
        /// One object of the kind.
        name: Option<String>,
        /// Only those whose labels match: key=value or key!=value, comma-separated.
        #[arg(short = 'l', long = "selector", value_parser = crate::listing::Selector::parse)]
        selector: Option<crate::listing::Selector>,
        /// Leave out status and metadata.generation: the manifests as a repository keeps them.
        #[arg(long)]
        no_status: bool,
    },
}

/// `sexton apply`.
#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// Manifest files or directories.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<std::path::PathBuf>,
    /// Check everything and say what would change; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Apply changes that delete backups kept now (the breaker still judges the run).
    #[arg(long)]
    pub yes: bool,
    /// Also delete the schedules apply manages that match -l and that no manifest names;
    /// their backups stay with their cluster.
    #[arg(long, requires = "selector")]
    pub prune: bool,
    /// With --prune: which schedules it may delete (key=value or key!=value, comma-separated).
    #[arg(short = 'l', long = "selector", value_parser = crate::listing::Selector::parse)]
    pub selector: Option<crate::listing::Selector>,
}

/// `sexton audit`.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only entries about this cluster.
    #[arg(long)]
    pub cluster: Option<String>,
    /// Only entries that name this backup.
    #[arg(long)]
    pub backup: Option<String>,
    /// Entries of this last while (90s, 15m, 24h, 7d), or `all`.
    #[arg(long, default_value = "24h")]
    pub since: String,
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Remove every backup record of a cluster that has no schedule left (refused while it
    /// has some). The records only; with --remote their objects too, through the deleter.
    /// Held, legal-held and in-progress backups (and what they build on) stay. Says what it
    /// will do to how many records before it does it.
    #[command(after_help = "Examples:
  sexton cluster forget --cluster db1 --dry-run
  sexton cluster forget --cluster db1 --remote")]
    Forget {
        /// The cluster whose records go.
        #[arg(long)]
        cluster: String,
        /// Also delete the objects, through the deleter (asks first; --yes without a terminal).
        #[arg(long)]
        remote: bool,
        /// Only say what forgetting would do; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Delete the objects without asking.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum CatalogCommand {
    /// Compare a cluster's catalog with its bucket now (one listing): a completed backup
    /// whose objects are gone or changed size becomes `missing` and no longer counts; a
    /// missing one whose objects are back counts again. Objects without a record are counted
    /// (`sexton backup orphans` lists them).
    #[command(after_help = "Examples:
  sexton catalog scrub --cluster db1 --dry-run
  sexton catalog scrub --cluster db1")]
    Scrub {
        /// The cluster to compare.
        #[arg(long)]
        cluster: String,
        /// Only say what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Recreate the records a cluster's catalog lacks from the metadata.json documents in the
    /// bucket (after a catalog loss). Backups the catalog holds, or whose records were removed
    /// on purpose, are left alone; a document whose objects are not all there is skipped.
    #[command(after_help = "Examples:
  sexton catalog import --cluster db1 --dry-run
  sexton catalog import --cluster db1
  sexton catalog import --cluster db1 --from dr     # the copies at location dr
  sexton catalog import --cluster db1 --include-removed   # undo a record-only backup delete")]
    Import {
        /// The cluster whose records are rebuilt.
        #[arg(long)]
        cluster: String,
        /// Only say what would be imported; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Read the copies at this location (docs/copies.md) instead of the primary bucket.
        #[arg(long, value_name = "LOCATION")]
        from: Option<String>,
        /// Bring back records removed on purpose too: undoes a record-only `backup delete`.
        #[arg(long)]
        include_removed: bool,
    },
    /// Move the backups recorded in another store (a bucket, prefix or endpoint the fleet was
    /// given before) into the fleet's own: every object copied with the CLI's S3 settings and
    /// checked against the SHA-256 intake recorded, the cluster's binlog archive with them,
    /// then the records moved once the fleet has seen each object there. Until then those
    /// clusters' retention is held (docs/immutability.md).
    #[command(after_help = "Examples:
  sexton catalog migrate --from-bucket sexton-old --dry-run
  sexton catalog migrate --from-bucket sexton-old
  sexton catalog migrate --from-bucket sexton-old --cluster db1
  sexton catalog migrate --from-bucket b --from-prefix old/backups --from-endpoint https://s3.old:9000
  sexton catalog migrate --location dr --from-bucket dr-old     # the copies at location dr

The objects are read from the old store with the same credentials as the place's store
(SEXTON_S3_*, or the location's SEXTON_LOCATION_<NAME>_*); the old store's objects are left as
they are.")]
    Migrate {
        /// The bucket the backups were recorded in.
        #[arg(long, value_name = "BUCKET")]
        from_bucket: String,
        /// The prefix they were recorded under, when it is not the fleet's.
        #[arg(long, value_name = "PREFIX")]
        from_prefix: Option<String>,
        /// The endpoint of that store, when it is not the fleet's.
        #[arg(long, value_name = "URL")]
        from_endpoint: Option<String>,
        /// Only this cluster's backups.
        #[arg(long)]
        cluster: Option<String>,
        /// The copies at this location (its settings name the store they move to), instead of
        /// the backups at primary.
        #[arg(long, value_name = "LOCATION")]
        location: Option<String>,
        /// Only say what would be copied and moved; copy and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Register (or replace) a delete plugin: called on every deletion of a backup whose
    /// labels match the selector, in alphanumeric order of name.
    #[command(after_help = "Examples:
  sexton plugin register snapshots --subject sexton.v1.plugin.snapshots --selector tier=gold --timeout 5")]
    Register {
        /// The plugin's name (plugins are called in alphanumeric order of name).
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
    #[command(after_help = "Examples:
  sexton plugin list
  sexton plugin list -o yaml")]
    List {
        #[command(flatten)]
        list: crate::listing::ListArgs,
    },
    /// Unregister a delete plugin.
    #[command(after_help = "Examples:
  sexton plugin unregister snapshots")]
    Unregister {
        /// The plugin's name.
        name: String,
    },
}

pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
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

/// A schedule's `breaker` block, checked here for a quick error (the server checks again).
pub(super) fn parse_breaker(text: &str) -> Result<sexton_shared::breaker::BreakerSpec, String> {
    serde_json::from_str(text).map_err(|err| format!("invalid breaker settings: {err}"))
}

/// A schedule's copy rules, checked here for a quick error (the server checks again, against
/// its configured locations).
pub(super) fn parse_copies(text: &str) -> Result<CopyRules, String> {
    let rules: Vec<sexton_model::copies::CopyRule> =
        serde_json::from_str(text).map_err(|err| format!("invalid copy rules: {err}"))?;
    sexton_model::copies::validate_copy_rules(&rules, None)?;
    Ok(CopyRules(rules))
}

/// `--objectives JSON`: a recovery objectives block, checked as the API checks it.
pub(super) fn parse_objectives(text: &str) -> Result<sexton_model::objectives::Objectives, String> {
    let objectives: sexton_model::objectives::Objectives =
        serde_json::from_str(text).map_err(|err| format!("invalid objectives: {err}"))?;
    objectives.validate()?;
    Ok(objectives)
}

/// `--copies JSON`: one value holding the whole list (clap would take a `Vec` for a flag given
/// several times).
#[derive(Debug, Clone)]
pub struct CopyRules(pub Vec<sexton_model::copies::CopyRule>);

/// A count rule's N: a whole number of at least 1, or `unlimited` (restic's -1: every period).
pub(super) fn parse_keep_count(text: &str) -> Result<i64, String> {
    if text == "unlimited" {
        return Ok(-1);
    }
    match text.parse::<u32>() {
        Ok(0) => Err("0 keeps nothing: give at least 1 (or leave the rule out)".into()),
        Ok(n) => Ok(i64::from(n)),
        Err(_) => Err(format!(
            "{text:?} is not a count: a whole number of at least 1, or unlimited"
        )),
    }
}

pub(super) fn parse_full_every(text: &str) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a positive whole number of backups");
    let n: u32 = text.parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(bad());
    }
    Ok(n)
}

pub(super) fn parse_label(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("label {text:?} is not key=value"))?;
    sexton_shared::api::check_label_key("label", key)?;
    sexton_shared::api::check_label_value(key, value)?;
    Ok((key.to_string(), value.to_string()))
}

pub(super) fn parse_annotation(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("annotation {text:?} is not key=value"))?;
    sexton_shared::api::check_label_key("annotation", key)?;
    Ok((key.to_string(), value.to_string()))
}

pub(super) fn parse_span(text: &str) -> Result<sexton_schedule::Span, String> {
    sexton_schedule::Span::parse(text).map_err(|err| err.to_string())
}

pub(super) fn parse_window(text: &str) -> Result<sexton_schedule::WindowSpec, String> {
    let window: sexton_schedule::WindowSpec = serde_json::from_str(text).map_err(|err| {
        format!(
            "{err} (expected JSON such as {{\"cron\": \"0 8 * * 1-5\", \"duration\": \"10h\", \
             \"zone\": \"Europe/Berlin\"}})"
        )
    })?;
    sexton_schedule::Window::parse(&window).map_err(|err| err.to_string())?;
    Ok(window)
}

pub(super) fn parse_pause_after(text: &str) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a number of failures from 1 to 1000");
    let n: u32 = text.parse().map_err(|_| bad())?;
    if n == 0 || n > sexton_shared::api::MAX_PAUSE_AFTER_FAILURES {
        return Err(bad());
    }
    Ok(n)
}

impl Command {
    /// What this verb answers with when that is not a set of things with names, so that
    /// `-o name` is refused rather than ignored (issue 50); `None` for a verb that lists or acts
    /// on named things.
    pub fn answers_without_names(&self) -> Option<&'static str> {
        Some(match self {
            Command::Schedule(ScheduleCommand::Next { .. }) => "run times",
            Command::Schedule(ScheduleCommand::Explain { .. }) => "an explanation",
            Command::Retention(RetentionCommand::Simulate { .. }) => "a simulation",
            Command::Retention(RetentionCommand::Plan { .. }) => "an offline plan",
            Command::Recovery(RecoveryCommand::Window { .. }) => "restorable windows",
            Command::Recovery(RecoveryCommand::Drill { .. }) => "a drill's verdict",
            Command::Catalog(CatalogCommand::Migrate { .. }) => "a migration's report",
            Command::Binlog(BinlogCommand::Append { .. }) => "the segments it shipped",
            Command::Backup(BackupCommand::Fetch { .. }) => "the files it wrote",
            Command::Audit(_) => "audit entries",
            Command::Diff { .. } => "a diff",
            Command::Version => "versions",
            _ => return None,
        })
    }
}
