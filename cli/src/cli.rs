//! The `sexton` command line, in the style of `velero` and `kubectl`: nouns, verbs, `-o
//! table|wide|json|yaml|name` (printed by `crate::output`). Talks to the fleet over the NATS
//! request/reply API; the offline commands (`retention plan`, `schedule next`) run the pure
//! engines locally.
//!
//! Exit codes: 0 success (also when the reader of stdout went away), 1 the fleet or a
//! dependency failed, or what was named does not exist, 2 bad input (usage, a malformed file, a
//! request the API refused as invalid), 77 NATS refused a subject to this user (a permission
//! denial: the user's rights, not the fleet, are at fault).

use std::{collections::BTreeMap, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};
use sexton_shared::{
    api::{ErrorCode, Reply},
    config::Config,
    topology,
};

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
    #[arg(long, global = true, env = "SEXTON_CONFIG")]
    pub config: Option<PathBuf>,
    /// The NATS server to talk to (overrides nats.url).
    #[arg(long, global = true)]
    pub nats_url: Option<String>,
    /// Output format: table (default), wide (more columns, absolute times), json, yaml, or
    /// name (kind/name per line).
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Print tables without their header row.
    #[arg(long, global = true)]
    pub no_headers: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    /// Columns for people, ages instead of times.
    Table,
    /// The table with more columns and absolute times (to the second, UTC).
    Wide,
    Json,
    Yaml,
    /// `kind/name`, one per line (`schedule/nightly`, `backup/<id>`).
    Name,
    /// A self-contained page, written to the file named after it (`retention simulate` and
    /// `schedule describe --simulate` only).
    Html,
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
    /// Run a service in this process: scheduler, retention-worker or deleter.
    #[command(after_help = "Examples:
  sexton serve scheduler --config /etc/sexton/sexton.toml
  SEXTON_NATS_URL=nats://127.0.0.1:4222 sexton serve deleter")]
    Serve {
        /// The service to run.
        #[arg(value_parser = ["scheduler", "retention-worker", "deleter", "executor"])]
        service: String,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish or powershell).
    #[command(after_help = "Examples:
  sexton completion bash > /etc/bash_completion.d/sexton
  sexton completion zsh > \"${fpath[1]}/_sexton\"
  sexton completion fish > ~/.config/fish/completions/sexton.fish")]
    Completion {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print this client's version and ask every running service for its own.
    #[command(after_help = "Examples:
  sexton version
  sexton version -o json")]
    Version,
}

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create a schedule.
    #[command(after_help = "Examples:
  sexton schedule create nightly --cluster db1 --plan full --cron '0 3 * * *' --keep-last 7
  sexton schedule create hourly --cluster db1 --plan full --cron 'CRON_TZ=Europe/Berlin 0 * * * *' \\
      --policy '{\"keep_last\": 24, \"recovery_window\": \"30d\"}' --label team=db")]
    Create(Box<CreateArgs>),
    /// Show one schedule as stored, with its next run.
    #[command(after_help = "Examples:
  sexton schedule get nightly
  sexton schedule get nightly -o yaml")]
    Get {
        /// The schedule's name.
        name: String,
    },
    /// Show one schedule with why it did or did not fire; with --simulate, also replay its
    /// cron and policy over the coming days (see `retention simulate`).
    #[command(after_help = "Examples:
  sexton schedule describe nightly
  sexton schedule describe nightly -o json
  sexton schedule describe nightly --simulate --days 30")]
    Describe {
        /// The schedule's name.
        name: String,
        /// Simulate the schedule's cron, cadence and policy offline, from today.
        #[arg(long)]
        simulate: bool,
        #[command(flatten)]
        options: crate::simulate::SimulationOptions,
        /// With -o html: the page to write.
        #[arg(value_name = "FILE")]
        page: Option<PathBuf>,
    },
    /// List schedules.
    #[command(after_help = "Examples:
  sexton schedule list
  sexton schedule list --cluster db1 -o wide
  sexton schedule list -l team=db -o name
  sexton schedule list --watch=5")]
    List {
        /// Only the schedules of this cluster.
        #[arg(long)]
        cluster: Option<String>,
        #[command(flatten)]
        list: crate::listing::ListArgs,
    },
    /// Delete a schedule. What happens to its backup records is its backup_owner (none and
    /// cluster: they stay; schedule: they go, with their objects only if remote cleanup is on);
    /// the command says what it will do to how many records before it does it, and asks
    /// before removing any (--yes without a terminal).
    #[command(after_help = "Examples:
  sexton schedule delete nightly --dry-run
  sexton schedule delete nightly --yes")]
    Delete {
        /// The schedule's name.
        name: String,
        /// Only say what deleting would do; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Remove the records it says it removes without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Pause a schedule: nothing fires while paused.
    #[command(after_help = "Examples:
  sexton schedule pause nightly")]
    Pause {
        /// The schedule's name.
        name: String,
    },
    /// Unpause a schedule.
    #[command(after_help = "Examples:
  sexton schedule unpause nightly
  sexton schedule unpause nightly --skip-immediately")]
    Unpause {
        /// The schedule's name.
        name: String,
        /// Skip a run that is due right now (default: the schedule's value, else the server's).
        #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
        skip_immediately: Option<bool>,
    },
    /// Print the next runs of a cron spec (offline), with jitter and blackout windows
    /// applied: when each fires, its cron time, and whether a window skips or defers it.
    #[command(after_help = "Examples:
  sexton schedule next --cron '0 3 * * *' -n 3
  sexton schedule next --cron '@daily-random' --name nightly --jitter 15m")]
    Next {
        /// The cron spec: 5 fields, a descriptor (@daily, @every 6h), optionally CRON_TZ=<zone>
        /// first.
        #[arg(long)]
        cron: String,
        /// Start from this instant (RFC 3339); default now.
        #[arg(long)]
        from: Option<String>,
        /// How many runs to print (1 to 10000).
        #[arg(short = 'n', long, default_value_t = 5)]
        count: usize,
        /// The schedule's name: jitter offsets and @hourly-random, @daily-random and
        /// @weekly-random are drawn from it.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        timing: TimingArgs,
    },
    /// Fire the schedule's ticks of a past interval now, once each (Temporal's backfill).
    #[command(after_help = "Examples:
  sexton schedule backfill nightly --from 2026-11-01T00:00:00Z --to 2026-11-08T00:00:00Z
  sexton schedule backfill nightly --from 2026-11-01T00:00:00Z --to 2026-11-02T00:00:00Z --overlap allow")]
    Backfill {
        /// The schedule's name.
        name: String,
        /// The first instant of the interval (RFC 3339); ticks at or after it fire.
        #[arg(long)]
        from: String,
        /// The end of the interval (RFC 3339, not in the future); ticks before it fire.
        #[arg(long)]
        to: String,
        /// skip: one backup at a time, each tick waiting for the one before to report;
        /// allow: all at once. Default: the schedule's overlap policy.
        #[arg(long, value_parser = ["skip", "allow"])]
        overlap: Option<String>,
    },
    /// Run the pure schedule logic offline on a schedule document: why would it fire or not?
    #[command(after_help = "Examples:
  sexton schedule explain --schedule schedule.json --now 2026-11-23T03:00:05Z")]
    Explain {
        /// `{"cron", "created_at", "paused"?, "skip_immediately"?, "last_backup"?,
        /// "last_skipped"?, "in_flight"?, "starting_deadline_seconds"?, "name"?, "jitter"?,
        /// "exclude"?, "on_blackout"?}`
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
    #[command(after_help = "Examples:
  sexton schedule update nightly --cron '30 2 * * *'
  sexton schedule update nightly --keep-last 14 --label team=db")]
    Update(Box<UpdateArgs>),
}

/// The timing settings `create`, `update` and `next` share.
#[derive(Args, Debug, Default)]
pub struct TimingArgs {
    /// Move every run by a fixed offset in [0, JITTER) drawn from the schedule's name (90s,
    /// 15m, 1h), so a fleet's schedules do not start at once.
    #[arg(long, value_parser = parse_span)]
    pub jitter: Option<sexton_schedule::Span>,
    /// A blackout window, repeatable, as JSON: {"cron": "0 8 * * 1-5", "duration": "10h",
    /// "zone": "Europe/Berlin"} or {"from": "2026-12-24", "to": "2026-12-27", "zone": ...}.
    #[arg(long = "exclude", value_parser = parse_window)]
    pub exclude: Vec<sexton_schedule::WindowSpec>,
    /// What a run due inside a blackout window does: skip it (default), or defer it to the
    /// window's end.
    #[arg(long, value_parser = ["skip", "defer"])]
    pub on_blackout: Option<String>,
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// The schedule's name.
    pub name: String,
    /// A new cron spec (5 fields, a descriptor, optionally CRON_TZ=<zone> first).
    #[arg(long)]
    pub cron: Option<String>,
    /// Change keep_last only; the policy's other rules stay.
    #[arg(long)]
    pub keep_last: Option<u32>,
    /// Policy keys to change, as JSON (`null` removes a key); the other keys stay. With
    /// --replace-policy, the whole new policy.
    #[arg(long)]
    pub policy: Option<String>,
    /// The policy given (--policy or --keep-last) replaces the stored one whole.
    #[arg(long)]
    pub replace_policy: bool,
    /// Go ahead although the new policy deletes backups kept now (shown first).
    #[arg(long)]
    pub yes: bool,
    /// Say what the change would do (the policy's diff, what it deletes now); change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The circuit breaker's settings for this schedule's group, as JSON:
    /// {"max_delete_fraction": 0.3, "max_delete_count": 50, "stale_after": "3d", "enabled": true}.
    #[arg(long, value_parser = parse_breaker, conflicts_with = "breaker_defaults")]
    pub breaker: Option<Value>,
    /// Back to the server's breaker defaults.
    #[arg(long)]
    pub breaker_defaults: bool,
    /// Labels as key=value, repeatable; replaces all labels.
    #[arg(long = "label", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// What a due tick does while a backup of this schedule is still running.
    #[arg(long, value_parser = ["skip", "allow"])]
    pub overlap_policy: Option<String>,
    /// Skip a missed run older than this many seconds (the older spelling of
    /// --starting-deadline).
    #[arg(long, conflicts_with_all = ["starting_deadline", "no_starting_deadline"])]
    pub starting_deadline_seconds: Option<u64>,
    /// Skip a run missed by more than this (90s, 15m, 2h) instead of firing it late
    /// (Kubernetes' startingDeadlineSeconds).
    #[arg(long, value_parser = parse_span, conflicts_with = "no_starting_deadline")]
    pub starting_deadline: Option<sexton_schedule::Span>,
    /// Remove the starting deadline: missed runs fire however late.
    #[arg(long)]
    pub no_starting_deadline: bool,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Remove the jitter.
    #[arg(long, conflicts_with = "jitter")]
    pub no_jitter: bool,
    /// Remove every blackout window.
    #[arg(long, conflicts_with = "exclude")]
    pub no_exclude: bool,
    /// Pause the schedule after N consecutive failed backups.
    #[arg(long, value_parser = parse_pause_after, conflicts_with = "no_pause_after_failures")]
    pub pause_after_failures: Option<u32>,
    /// Never pause the schedule on failures.
    #[arg(long)]
    pub no_pause_after_failures: bool,
    /// Annotations as key=value, repeatable; replaces all annotations.
    #[arg(long = "annotation", value_parser = parse_annotation)]
    pub annotations: Vec<(String, String)>,
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
    /// Restore tests: when (cron), e.g. '0 6 * * 0' (see docs/verification.md).
    #[arg(long)]
    pub verify_cron: Option<String>,
    /// Which backup a test proves: latest, random, oldest_kept or each (each new one once).
    #[arg(long, value_parser = ["latest", "random", "oldest_kept", "each"])]
    pub verify_pick: Option<String>,
    /// How long an executor has to answer a test (1m to 7d; default 1h).
    #[arg(long)]
    pub verify_timeout: Option<String>,
    /// No restore tests any more.
    #[arg(long, conflicts_with_all = ["verify_cron", "verify_pick", "verify_timeout"])]
    pub no_verify: bool,
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The schedule's name (letters, digits, `-` and `_`).
    pub name: String,
    /// The cluster (database, application) the schedule backs up.
    #[arg(long)]
    pub cluster: String,
    /// The backup plan within the cluster (full, logical, ...): retention applies per
    /// cluster and plan.
    #[arg(long)]
    pub plan: String,
    /// Standard 5-field cron, a descriptor (@daily, @every 6h), optionally CRON_TZ=<zone>
    /// first; CloudNativePG's 6-field form with a seconds field of 0 is accepted too.
    #[arg(long)]
    pub cron: String,
    /// Keep the newest N completed backups.
    #[arg(long)]
    pub keep_last: Option<u32>,
    /// A retention policy as JSON (keys: keep_last, keep_daily, recovery_window, ...).
    #[arg(long)]
    pub policy: Option<String>,
    /// Create the schedule paused: nothing fires until it is unpaused.
    #[arg(long)]
    pub paused: bool,
    /// Skip a run that is due right when the schedule becomes active (default: the server's
    /// setting).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub skip_immediately: Option<bool>,
    /// Labels as key=value, repeatable.
    #[arg(long = "label", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// What a due tick does while a backup of this schedule is still running (default skip:
    /// the tick is recorded as skipped).
    #[arg(long, value_parser = ["skip", "allow"])]
    pub overlap_policy: Option<String>,
    /// Skip a missed run older than this many seconds (the older spelling of
    /// --starting-deadline).
    #[arg(long, conflicts_with = "starting_deadline")]
    pub starting_deadline_seconds: Option<u64>,
    /// Skip a run missed by more than this (90s, 15m, 2h) instead of firing it late
    /// (Kubernetes' startingDeadlineSeconds).
    #[arg(long, value_parser = parse_span)]
    pub starting_deadline: Option<sexton_schedule::Span>,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Pause the schedule after N consecutive failed backups (with an incident and an alert);
    /// unpausing resets the count.
    #[arg(long, value_parser = parse_pause_after)]
    pub pause_after_failures: Option<u32>,
    /// Annotations as key=value, repeatable: free-form notes for executors (label values must
    /// be Kubernetes label values; annotations may hold any text).
    #[arg(long = "annotation", value_parser = parse_annotation)]
    pub annotations: Vec<(String, String)>,
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
    /// Restore tests: when (cron), e.g. '0 6 * * 0' (see docs/verification.md).
    #[arg(long)]
    pub verify_cron: Option<String>,
    /// Which backup a test proves: latest, random, oldest_kept or each (each new one once).
    #[arg(long, value_parser = ["latest", "random", "oldest_kept", "each"])]
    pub verify_pick: Option<String>,
    /// How long an executor has to answer a test (1m to 7d; default 1h).
    #[arg(long)]
    pub verify_timeout: Option<String>,
    /// The circuit breaker's settings for this schedule's group, as JSON (see schedule update).
    #[arg(long, value_parser = parse_breaker)]
    pub breaker: Option<Value>,
    /// Go ahead although the policy deletes backups of the group kept now (shown first).
    #[arg(long)]
    pub yes: bool,
    /// Say what creating it would do to the group's backups; create nothing.
    #[arg(long)]
    pub dry_run: bool,
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
pub enum BackupCommand {
    /// Take a backup now from a schedule's settings (does not change the schedule's timing).
    #[command(after_help = "Examples:
  sexton backup create --from-schedule nightly")]
    Create {
        /// The schedule whose cluster, plan, labels and volumes the backup takes.
        #[arg(long)]
        from_schedule: String,
    },
    /// List backups in the catalog.
    #[command(after_help = "Examples:
  sexton backup list
  sexton backup list --cluster db1 -o wide
  sexton backup list --schedule nightly -l team=db
  sexton backup list --cluster db1 -o name | head -1
  sexton backup list --cluster db1 --watch")]
    List {
        /// Only this cluster's backups.
        #[arg(long)]
        cluster: Option<String>,
        /// Only backups of this plan.
        #[arg(long)]
        plan: Option<String>,
        /// Only backups this schedule took.
        #[arg(long)]
        schedule: Option<String>,
        #[command(flatten)]
        list: crate::listing::ListArgs,
    },
    /// Show one backup: its record, its volumes (which remain, and why: `needed by`), and what
    /// retention decides about it now.
    #[command(after_help = "Examples:
  sexton backup describe nightly-20261123030000 --cluster db1
  sexton backup describe nightly-20261123030000 --cluster db1 -o yaml")]
    Describe {
        /// The backup's id (NAME in `backup list`).
        id: String,
        /// The cluster the backup belongs to.
        #[arg(long)]
        cluster: String,
    },
    /// Keep a backup while it is in use (a restore, a clone, a bootstrap), whatever retention
    /// says, until the same reason is released.
    #[command(after_help = "Examples:
  sexton backup hold nightly-20261123030000 --cluster db1 --reason restore:r-42")]
    Hold {
        /// The backup's id.
        id: String,
        /// The cluster the backup belongs to.
        #[arg(long)]
        cluster: String,
        /// `<what>:<id>`, such as `restore:r-42`.
        #[arg(long, value_parser = parse_hold_reason)]
        reason: String,
    },
    /// Release a hold; a backup no rule keeps then goes at the next retention pass.
    #[command(after_help = "Examples:
  sexton backup release nightly-20261123030000 --cluster db1 --reason restore:r-42")]
    Release {
        /// The backup's id.
        id: String,
        /// The cluster the backup belongs to.
        #[arg(long)]
        cluster: String,
        /// The reason the hold was taken with, `<what>:<id>`.
        #[arg(long, value_parser = parse_hold_reason)]
        reason: String,
    },
    /// Delete a backup's catalog record; its objects too with --remote (or when the backup,
    /// its schedule or its cluster/plan's schedules set remote_cleanup).
    #[command(after_help = "Examples:
  sexton backup delete nightly-20261123030000 --cluster db1
  sexton backup delete nightly-20261123030000 --cluster db1 --remote")]
    Delete {
        /// The backup's id.
        id: String,
        /// The cluster the backup belongs to.
        #[arg(long)]
        cluster: String,
        /// Also delete the objects, through the deleter.
        #[arg(long)]
        remote: bool,
        /// Delete even the newest full backup, or one a kept backup depends on, now.
        #[arg(long)]
        force: bool,
        /// Only say what deleting would do; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Delete the objects (--remote, or remote cleanup) without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Ask for a restore test of a backup now: an executor restores it (with its chain) and
    /// answers; the backup is held until then. With --wait, wait for the verdict.
    #[command(after_help = "Examples:
  sexton backup verify nightly-20261123030000 --cluster db1 --wait
  sexton backup verify nightly-20261123030000 --cluster db1 --timeout 2h")]
    Verify {
        /// The backup's id.
        id: String,
        /// The cluster the backup belongs to.
        #[arg(long)]
        cluster: String,
        /// How long the executor has (1m to 7d; default 1h).
        #[arg(long)]
        timeout: Option<String>,
        /// Wait for the verdict (up to the timeout) and print it; exit 1 if it failed.
        #[arg(long)]
        wait: bool,
    },
    /// List objects under the cluster's prefix that no catalog record owns.
    #[command(after_help = "Examples:
  sexton backup orphans --cluster db1
  sexton backup orphans --cluster db1 --grace 7d -o json
  sexton backup orphans --cluster db1 --delete")]
    Orphans {
        /// The cluster whose prefix is listed.
        #[arg(long)]
        cluster: String,
        /// Delete them (asks first; --yes without a terminal).
        #[arg(long)]
        delete: bool,
        /// Ignore objects younger than this (90s, 15m, 24h, 7d).
        #[arg(long, default_value = "24h")]
        grace: String,
        /// With --delete: only say what would be deleted.
        #[arg(long, requires = "delete")]
        dry_run: bool,
        /// With --delete: delete without asking.
        #[arg(long, requires = "delete")]
        yes: bool,
    },
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
  sexton catalog import --cluster db1")]
    Import {
        /// The cluster whose records are rebuilt.
        #[arg(long)]
        cluster: String,
        /// Only say what would be imported; write nothing.
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

#[derive(Subcommand, Debug)]
pub enum RetentionCommand {
    /// Ask the live fleet what it would delete now and why, and whether the circuit breaker
    /// holds it; deletes nothing.
    #[command(after_help = "Examples:
  sexton retention preview --cluster db1
  sexton retention preview --cluster db1 --plan full -o json")]
    Preview {
        /// The cluster to plan.
        #[arg(long)]
        cluster: String,
        /// Only this plan's group.
        #[arg(long)]
        plan: Option<String>,
    },
    /// Let a retention run the circuit breaker holds go through, once: exactly what the
    /// preview shows it deleting (asks first; --yes without a terminal).
    #[command(after_help = "Examples:
  sexton retention approve --cluster db1 --plan full --dry-run
  sexton retention approve --cluster db1 --plan full --yes")]
    Approve {
        /// The cluster whose held run to let through.
        #[arg(long)]
        cluster: String,
        /// The plan (group) whose held run to let through.
        #[arg(long)]
        plan: String,
        /// Approve without asking.
        #[arg(long)]
        yes: bool,
        /// Only show the held run; approve nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Run the retention engine offline on a catalog file and a policy file.
    #[command(after_help = "Examples:
  sexton retention plan --catalog catalog.json --policy policy.json
  sexton retention plan --catalog catalog.json --policy policy.json --now 2026-11-23T00:00:00Z -o json")]
    Plan {
        /// A catalog file (JSON: the backups of one group).
        #[arg(long)]
        catalog: PathBuf,
        /// A retention policy file (JSON).
        #[arg(long)]
        policy: PathBuf,
        /// The instant to decide at (RFC 3339); default now.
        #[arg(long)]
        now: Option<String>,
        /// With -o json: indent the plan even when it is large (plans of more than 10,000
        /// backups are written compact by default).
        #[arg(long)]
        pretty: bool,
    },
    /// Replay a schedule and a policy offline, day by day: which backups exist (and why),
    /// how many, how much storage, the worst gap. A calendar by default, -o json, or
    /// -o html FILE for a page.
    #[command(after_help = "Examples:
  sexton retention simulate --cron '0 3 * * *' --policy '{\"keep_daily\": 7, \"keep_weekly\": 4}'
  sexton retention simulate --cron '@daily' --policy policy.json --days 400 --failures 10%
  sexton retention simulate --cron '@daily' --policy policy.json -o html page.html")]
    Simulate {
        /// The schedule's cron: 5 fields, a descriptor (@daily, @every 6h), optionally
        /// CRON_TZ=<zone> first.
        #[arg(long)]
        cron: String,
        /// The retention policy: a file, or inline JSON.
        #[arg(long, value_name = "FILE|JSON")]
        policy: String,
        /// A full backup, then N-1 incrementals (per volume), as the scheduler's cadence.
        #[arg(long, value_parser = parse_full_every)]
        full_every: Option<u32>,
        /// The application's volumes, repeatable: each gets its own chain.
        #[arg(long = "volume")]
        volumes: Vec<String>,
        /// The schedule's name, for backup ids (`<name>-<tick>`).
        #[arg(long, default_value = "sim")]
        name: String,
        #[command(flatten)]
        options: Box<crate::simulate::SimulationOptions>,
        /// With -o html: the page to write.
        #[arg(value_name = "FILE")]
        page: Option<PathBuf>,
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
    /// The command that restores a chain and checks it (a restore test); its exit status is
    /// the verdict. Without it, restore tests are left to another executor.
    #[arg(long, env = "SEXTON_EXEC_VERIFY_COMMAND")]
    pub verify_command: Option<String>,
    /// Take only this cluster's backups (default: every cluster's).
    #[arg(long, env = "SEXTON_EXEC_CLUSTER")]
    pub cluster: Option<String>,
    /// The durable consumer of due backups (default sexton-exec[-<cluster>]).
    #[arg(long, env = "SEXTON_EXEC_DURABLE")]
    pub durable: Option<String>,
    /// The durable consumer of merge jobs (default <durable>-merge).
    #[arg(long, env = "SEXTON_EXEC_MERGE_DURABLE")]
    pub merge_durable: Option<String>,
    /// The durable consumer of restore tests (default <durable>-verify).
    #[arg(long, env = "SEXTON_EXEC_VERIFY_DURABLE")]
    pub verify_durable: Option<String>,
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
        let (durable, merge_durable, verify_durable) =
            crate::exec::ExecOptions::default_durables(cluster.as_ref());
        let durable_given = self.durable.clone();
        let options = crate::exec::ExecOptions {
            backup_command: self.backup_command.clone(),
            merge_command: self.merge_command.clone(),
            verify_command: self.verify_command.clone(),
            verify_durable: self
                .verify_durable
                .clone()
                .unwrap_or_else(|| match &durable_given {
                    Some(durable) => format!("{durable}-verify"),
                    None => verify_durable,
                }),
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
    #[command(after_help = "Examples:
  sexton binlog append --cluster db1 /var/lib/mysql/mysql-bin.000041 /var/lib/mysql/mysql-bin.000042
  sexton binlog append --cluster db1 --format file wal/0000000100000000000000A1")]
    Append {
        /// The cluster whose archive takes the files.
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
    #[command(after_help = "Examples:
  sexton binlog status --cluster db1
  sexton binlog status --cluster db1 -o yaml")]
    Status {
        /// The cluster whose archive is described.
        #[arg(long)]
        cluster: String,
    },
}

/// The `verify` block of a schedule from its flags: none without `--verify-cron` (the others
/// alone are refused: they would change nothing).
fn verify_json(
    cron: &Option<String>,
    pick: &Option<String>,
    timeout: &Option<String>,
) -> Result<Option<Value>, Failure> {
    let Some(cron) = cron else {
        if pick.is_some() || timeout.is_some() {
            return Err(Failure::input(
                "--verify-pick and --verify-timeout need --verify-cron (the whole verify block is set at once)",
            ));
        }
        return Ok(None);
    };
    let mut verify = json!({"cron": cron});
    if let Some(pick) = pick {
        verify["pick"] = json!(pick);
    }
    if let Some(timeout) = timeout {
        verify["timeout"] = json!(timeout);
    }
    Ok(Some(verify))
}

/// A schedule's `breaker` block, checked here for a quick error (the server checks again).
fn parse_breaker(text: &str) -> Result<Value, String> {
    let spec: sexton_shared::breaker::BreakerSpec =
        serde_json::from_str(text).map_err(|err| format!("invalid breaker settings: {err}"))?;
    serde_json::to_value(spec).map_err(|err| err.to_string())
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
    sexton_shared::api::check_label_key("label", key)?;
    sexton_shared::api::check_label_value(key, value)?;
    Ok((key.to_string(), value.to_string()))
}

fn parse_annotation(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("annotation {text:?} is not key=value"))?;
    sexton_shared::api::check_label_key("annotation", key)?;
    Ok((key.to_string(), value.to_string()))
}

fn parse_span(text: &str) -> Result<sexton_schedule::Span, String> {
    sexton_schedule::Span::parse(text).map_err(|err| err.to_string())
}

fn parse_window(text: &str) -> Result<sexton_schedule::WindowSpec, String> {
    let window: sexton_schedule::WindowSpec = serde_json::from_str(text).map_err(|err| {
        format!(
            "{err} (expected JSON such as {{\"cron\": \"0 8 * * 1-5\", \"duration\": \"10h\", \
             \"zone\": \"Europe/Berlin\"}})"
        )
    })?;
    sexton_schedule::Window::parse(&window).map_err(|err| err.to_string())?;
    Ok(window)
}

fn parse_pause_after(text: &str) -> Result<u32, String> {
    let bad = || format!("{text:?} is not a number of failures from 1 to 1000");
    let n: u32 = text.parse().map_err(|_| bad())?;
    if n == 0 || n > sexton_shared::api::MAX_PAUSE_AFTER_FAILURES {
        return Err(bad());
    }
    Ok(n)
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

/// The exit code of a permission denial by NATS (sysexits' EX_NOPERM).
pub const EXIT_DENIED: u8 = 77;

impl Failure {
    pub(crate) fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
    pub(crate) fn runtime(err: anyhow::Error) -> Failure {
        Failure {
            code: 1,
            message: format!("{err:#}"),
        }
    }
}

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
            eprintln!("error: {}", failure.message);
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
        if ["executor", "exec", "serve", "completion"].contains(&sub.get_name()) {
            sub.arg(output.clone()).arg(no_headers.clone())
        } else {
            sub
        }
    })
}

pub(crate) fn parse_time(flag: &str, text: &str) -> Result<DateTime<Utc>, Failure> {
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
    crate::output::configure(crate::output::Settings {
        no_headers: cli.no_headers,
    });
    match &cli.command {
        Command::Completion { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut command(), "sexton", &mut script);
            crate::output::emit(&String::from_utf8_lossy(&script));
            Ok(())
        }
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
        }) => {
            let page = crate::simulate::page_path(cli.output, page)?;
            let against = options
                .against
                .as_deref()
                .map(|text| crate::simulate::read_policy("against", text))
                .transpose()?;
            let config = load_config()?;
            let (subject, body, _) = request_for(&cli.command)?;
            let client = connect(&config).await?;
            let mut described = match request(&client, &subject, body).await {
                Ok(described) => described,
                Err(failure) => return Err(suggest(&client, &cli.command, failure).await),
            };
            let scenario = schedule_scenario(name, &described, options)?;
            let report = crate::simulate::run(&scenario, against.as_ref())?;
            match cli.output {
                Output::Json | Output::Yaml => {
                    described["simulation"] = report.to_json();
                    crate::output::document(cli.output, &described);
                    Ok(())
                }
                output => {
                    print_schedule_description(&described);
                    println!();
                    crate::simulate::print(output, &report, options.rows.as_deref(), page)
                }
            }
        }
        Command::Schedule(ScheduleCommand::Next {
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
            // CloudNativePG's 6-field form, read as the API reads it.
            let cron = &*sexton_schedule::CronSpec::five_field_form(cron)
                .map_err(|err| Failure::input(format!("invalid cron {cron:?}: {err}")))?;
            if *count == 0 || *count > 10_000 {
                return Err(Failure::input("-n must be between 1 and 10000"));
            }
            let on_blackout = match timing.on_blackout.as_deref() {
                Some("defer") => sexton_schedule::OnBlackout::Defer,
                _ => sexton_schedule::OnBlackout::Skip,
            };
            let needs_name = timing.jitter.is_some()
                || sexton_schedule::spread::RANDOM_DESCRIPTORS
                    .iter()
                    .any(|descriptor| cron.trim_end().ends_with(descriptor));
            if needs_name && name.is_none() {
                return Err(Failure::input(
                    "--name is needed: jitter and @*-random descriptors are drawn from the \
                     schedule's name",
                ));
            }
            let spec = sexton_schedule::TimingSpec {
                name: name.as_deref().unwrap_or_default(),
                cron,
                jitter: timing.jitter,
                exclude: &timing.exclude,
                on_blackout,
            };
            let (timing, warnings) =
                sexton_schedule::Timing::check_input(&spec, from).map_err(|err| match err {
                    sexton_schedule::TimingError::Window { .. } => Failure::input(err.to_string()),
                    err => Failure::input(format!("invalid cron {cron:?}: {err}")),
                })?;
            for warning in &warnings {
                eprintln!("warning: {warning}");
            }
            let runs = timing.upcoming(from, *count);
            match cli.output {
                Output::Json | Output::Yaml => {
                    let value =
                        serde_json::to_value(&runs).map_err(|err| Failure::runtime(err.into()))?;
                    crate::output::document(cli.output, &value);
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
            pretty,
        }) => crate::offline_plan::run(catalog, policy, now.as_deref(), cli.output, *pretty),
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
        Command::Audit(args) => {
            let cluster = args
                .cluster
                .as_deref()
                .map(sexton_shared::names::ClusterName::new)
                .transpose()
                .map_err(|err| Failure::input(format!("--cluster: {err}")))?;
            let since =
                match args.since.as_str() {
                    "all" => None,
                    text => Some(
                        Utc::now()
                            - chrono::Duration::from_std(parse_duration(text).map_err(|err| {
                                Failure::input(format!("--since: {err} (or all)"))
                            })?)
                            .map_err(|err| Failure::input(format!("--since: {err}")))?,
                    ),
                };
            let config = load_config()?;
            let client = connect(&config).await?;
            let query = crate::audit::Query {
                cluster,
                backup: args.backup.clone(),
                since,
            };
            let entries = crate::audit::read(&client, &query)
                .await
                .map_err(Failure::runtime)?;
            match cli.output {
                Output::Json | Output::Yaml => {
                    let value = serde_json::to_value(&entries)
                        .map_err(|err| Failure::runtime(err.into()))?;
                    print_value(cli.output, &value, &[]);
                }
                _ => crate::audit::print_table(&entries, args.backup.as_deref()),
            }
            Ok(())
        }
        command => {
            let config = load_config()?;
            crate::safety::set_actor(&config);
            let (subject, mut body, columns) = request_for(command)?;
            let client = connect(&config).await?;
            // Commands that delete say what they will do first (a dry run of the same request)
            // and, when that deletes anything, ask (or need --yes); the result then says it
            // again only if it came out differently.
            let mut announced = None;
            if let Some((yes, preview_body)) = destructive(command, &body) {
                let plan = match request(&client, &preview_body.0, preview_body.1).await {
                    Ok(plan) => plan,
                    Err(failure) => return Err(suggest(&client, command, failure).await),
                };
                let (summary, question) = describe_destructive(command, &plan);
                eprintln!("{summary}");
                if let Some(question) = question {
                    crate::safety::confirm(&question, yes)?;
                }
                announced = Some(cell(plan.get("summary")));
            }
            loop {
                let mut value = match request_raw(&client, &subject, body.clone()).await? {
                    // A policy that deletes backups kept now: show what, ask, and confirm it.
                    Err(refusal) if refusal.needs_confirmation() => {
                        let preview = refusal
                            .details
                            .as_ref()
                            .and_then(|d| d.get("preview"))
                            .cloned()
                            .unwrap_or(Value::Null);
                        crate::safety::print_policy_change("the new policy", &preview);
                        crate::safety::confirm(&format!("{}.", refusal.message), false)?;
                        body["confirm"] = json!(true);
                        match request(&client, &subject, body.clone()).await {
                            Ok(value) => value,
                            Err(failure) => return Err(suggest(&client, command, failure).await),
                        }
                    }
                    Err(err) => {
                        let failure = Failure {
                            code: if err.code == ErrorCode::Invalid { 2 } else { 1 },
                            message: err.message,
                        };
                        return Err(suggest(&client, command, failure).await);
                    }
                    Ok(value) => value,
                };
                // The policy's effect, when there is something to say: a changed rule, a
                // deletion, or a dry run that asked for it.
                let worth_saying = |change: &&Value| {
                    let listed = |key: &str| {
                        change
                            .get(key)
                            .and_then(Value::as_array)
                            .is_some_and(|list| !list.is_empty())
                    };
                    listed("diff")
                        || listed("deleted")
                        || listed("volumes_deleted")
                        || value.get("dry_run") == Some(&json!(true))
                };
                if let Some(change) = value
                    .get("policy_change")
                    .filter(|c| !c.is_null())
                    .filter(worth_saying)
                {
                    crate::safety::print_policy_change("policy change", change);
                }
                let said_already = announced
                    .as_ref()
                    .is_some_and(|said| *said == cell(value.get("summary")));
                let columns: Vec<&str> = columns
                    .iter()
                    .copied()
                    .filter(|column| !(said_already && *column == "summary"))
                    .collect();
                // A schedule's create and update answer warnings about what the spec means.
                for warning in value
                    .get("warnings")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    eprintln!("warning: {}", cell(Some(warning)));
                }
                check_cluster_known(&client, command, &value).await?;
                match command {
                    Command::Backup(BackupCommand::Verify {
                        id,
                        cluster,
                        wait: true,
                        ..
                    }) => return wait_for_verdict(&client, cluster, id, &value, cli.output).await,
                    Command::Retention(RetentionCommand::Approve { dry_run: true, .. })
                        if matches!(cli.output, Output::Table | Output::Wide) =>
                    {
                        crate::safety::print_preview(&value)
                    }
                    command => print_answer(command, cli.output, &mut value, &columns),
                }
                let Some(seconds) = watch_seconds(command) else {
                    return Ok(());
                };
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(seconds)) => {}
                    _ = tokio::signal::ctrl_c() => return Ok(()),
                }
                // A blank line between two listings (a closed pipe ends the command here).
                crate::output::emit("\n");
            }
        }
    }
}

/// For a command that deletes (unless it is a dry run itself): whether `--yes` was given, and
/// the dry run of the same request that shows what it would do.
fn destructive(command: &Command, body: &Value) -> Option<(bool, (String, Value))> {
    let dry = |subject: String| {
        let mut preview = body.clone();
        preview["dry_run"] = json!(true);
        (subject, preview)
    };
    match command {
        Command::Schedule(ScheduleCommand::Delete {
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("schedule", "delete")))),
        Command::Cluster(ClusterCommand::Forget {
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("cluster", "forget")))),
        Command::Backup(BackupCommand::Delete {
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("backup", "delete")))),
        Command::Backup(BackupCommand::Orphans {
            delete: true,
            dry_run: false,
            yes,
            ..
        }) => Some((*yes, dry(topology::api_subject("orphans", "delete")))),
        Command::Retention(RetentionCommand::Approve {
            cluster,
            plan,
            yes,
            dry_run: false,
        }) => Some((
            *yes,
            (
                topology::api_subject("retention", "preview"),
                json!({"schema_version": 1, "cluster": cluster, "plan": plan}),
            ),
        )),
        _ => None,
    }
}

/// Prints the answer of an online command in `output`.
fn print_answer(command: &Command, output: Output, value: &mut Value, columns: &[&str]) {
    let table = matches!(output, Output::Table | Output::Wide);
    match command {
        Command::Schedule(ScheduleCommand::List { list, .. }) => {
            if let (Some(selector), Value::Array(rows)) = (&list.selector, &mut *value) {
                rows.retain(|row| selector.matches(row.pointer("/schedule/labels")));
            }
            crate::output::schedules(output, value)
        }
        Command::Schedule(
            ScheduleCommand::Get { .. }
            | ScheduleCommand::Create(_)
            | ScheduleCommand::Update(_)
            | ScheduleCommand::Pause { .. }
            | ScheduleCommand::Unpause { .. },
        ) => crate::output::schedules(output, value),
        Command::Schedule(ScheduleCommand::Describe { .. }) if table => {
            print_schedule_description(value)
        }
        Command::Backup(BackupCommand::Describe { .. }) if table => print_backup_description(value),
        Command::Backup(BackupCommand::List { schedule, list, .. }) => {
            if let Value::Array(rows) = &mut *value {
                rows.retain(|row| {
                    schedule
                        .as_ref()
                        .is_none_or(|s| row.get("schedule").and_then(Value::as_str) == Some(s))
                        && list
                            .selector
                            .as_ref()
                            .is_none_or(|selector| selector.matches(row.get("labels")))
                });
                if table {
                    let now = crate::output::now();
                    for row in rows.iter_mut() {
                        row["verified_cell"] = json!(verified_cell(row, now));
                    }
                }
            }
            let rows: Vec<Value> = value.as_array().cloned().unwrap_or_default();
            let rows: Vec<&Value> = rows.iter().collect();
            crate::output::backups(output, value, &rows)
        }
        Command::Backup(BackupCommand::Orphans { .. }) => crate::output::orphans(output, value),
        Command::Retention(RetentionCommand::Preview { .. }) => {
            // A run the circuit breaker holds says so above the table, with how to approve it.
            if table {
                for group in value.as_array().into_iter().flatten() {
                    if let Some(breaker) = group.get("breaker").filter(|b| !b.is_null()) {
                        crate::output::emit(&format!(
                            "{}/{}: {}\n",
                            cell(group.get("cluster")),
                            cell(group.get("plan")),
                            crate::safety::held_lines(breaker).join("\n  ")
                        ));
                    }
                }
            }
            crate::output::preview(output, value)
        }
        Command::Plugin(PluginCommand::List { list }) => {
            if let (Some(selector), Value::Array(rows)) = (&list.selector, &mut *value) {
                rows.retain(|row| selector.matches(row.get("selector")));
            }
            crate::output::plugins(output, value)
        }
        _ => print_value(output, value, columns),
    }
}

/// `--watch`'s interval of a list verb, if given.
fn watch_seconds(command: &Command) -> Option<u64> {
    match command {
        Command::Schedule(ScheduleCommand::List { list, .. })
        | Command::Backup(BackupCommand::List { list, .. })
        | Command::Plugin(PluginCommand::List { list }) => list.watch,
        _ => None,
    }
}

/// What a destructive command's dry run says, and the question to ask before going ahead
/// (`None`: it deletes nothing, so nothing to ask).
fn describe_destructive(command: &Command, plan: &Value) -> (String, Option<String>) {
    let count = |key: &str| plan.get(key).and_then(Value::as_u64).unwrap_or(0);
    match command {
        Command::Schedule(ScheduleCommand::Delete { name, .. }) => {
            let n = count("remove_records") + count("delete_with_objects");
            (
                cell(plan.get("summary")),
                (n > 0).then(|| format!("Delete schedule {name} and remove {n} backup record(s)?")),
            )
        }
        Command::Cluster(ClusterCommand::Forget { cluster, .. }) => {
            let n = count("delete_with_objects");
            (
                cell(plan.get("summary")),
                (n > 0).then(|| {
                    format!("Forget cluster {cluster} and delete {n} backup(s) with their objects?")
                }),
            )
        }
        Command::Backup(BackupCommand::Delete { id, cluster, .. }) => {
            let action = cell(plan.get("action"));
            let remote = plan.get("remote").and_then(Value::as_bool).unwrap_or(false);
            let what = match (action.as_str(), remote) {
                ("record-deleted", _) => "removes its catalog record; its objects stay".to_string(),
                ("deleting", true) => "deletes it with its objects".to_string(),
                ("deferred", true) => format!(
                    "deletes it with its objects once nothing kept needs it ({})",
                    cell(plan.get("reason"))
                ),
                ("deferred", false) => format!(
                    "removes its record once nothing kept needs it ({})",
                    cell(plan.get("reason"))
                ),
                ("already-deleting", _) => "nothing: it is being deleted already".to_string(),
                (other, _) => other.to_string(),
            };
            let destroys = remote && matches!(action.as_str(), "deleting" | "deferred");
            (
                format!("deleting backup {id} of cluster {cluster} {what}"),
                destroys
                    .then(|| format!("Delete backup {id} of cluster {cluster} and its objects?")),
            )
        }
        Command::Backup(BackupCommand::Orphans { cluster, .. }) => {
            let n = plan
                .get("orphans")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            (
                format!(
                    "{n} orphaned object(s) under {} would be deleted",
                    cell(plan.get("prefix"))
                ),
                (n > 0).then(|| format!("Delete {n} orphaned object(s) of cluster {cluster}?")),
            )
        }
        Command::Retention(RetentionCommand::Approve {
            cluster,
            plan: name,
            ..
        }) => {
            let group = plan.as_array().and_then(|groups| groups.first());
            let breaker = group.and_then(|g| g.get("breaker"));
            let lines = breaker.map(crate::safety::held_lines).unwrap_or_else(|| {
                vec![format!(
                    "retention of cluster {cluster} plan {name} is not held now"
                )]
            });
            let n = breaker
                .and_then(|b| b.get("deleting"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            (
                lines.join("\n"),
                breaker.map(|_| {
                    format!("Let this run of {cluster}/{name} delete {n} backup(s), once?")
                }),
            )
        }
        _ => (cell(plan.get("summary")), None),
    }
}

/// The denials NATS reported on this process's connection (one connection per command).
static DENIALS: std::sync::OnceLock<tokio::sync::watch::Receiver<Option<String>>> =
    std::sync::OnceLock::new();

/// Connects to the fleet's NATS, watching for permission denials (see [`request`]).
async fn connect(config: &Config) -> Result<async_nats::Client, Failure> {
    let (client, denials) =
        sexton_shared::nats::connect_once_watching_denials(&config.nats, "sexton-cli")
            .await
            .map_err(Failure::runtime)?;
    let _ = DENIALS.set(denials);
    Ok(client)
}

/// A not-found schedule gets the closest existing name suggested.
async fn suggest(client: &async_nats::Client, command: &Command, failure: Failure) -> Failure {
    let name = match command {
        Command::Schedule(
            ScheduleCommand::Get { name }
            | ScheduleCommand::Describe { name, .. }
            | ScheduleCommand::Delete { name, .. }
            | ScheduleCommand::Pause { name }
            | ScheduleCommand::Unpause { name, .. }
            | ScheduleCommand::Backfill { name, .. },
        ) => name,
        Command::Schedule(ScheduleCommand::Update(args)) => &args.name,
        Command::Backup(BackupCommand::Create { from_schedule }) => from_schedule,
        _ => return failure,
    };
    if !failure.message.ends_with("not found") {
        return failure;
    }
    let Ok(schedules) = request(
        client,
        &topology::api_subject("schedule", "list"),
        json!({"schema_version": 1}),
    )
    .await
    else {
        return failure;
    };
    let names = crate::listing::schedule_field(&schedules, "name");
    Failure {
        message: format!(
            "{}{}",
            failure.message,
            crate::listing::did_you_mean(name, names.iter().map(String::as_str))
        ),
        ..failure
    }
}

/// A list verb filtered by a cluster that no schedule and no backup names is an error (a
/// typo would otherwise print an empty table and exit 0), with the closest known cluster.
async fn check_cluster_known(
    client: &async_nats::Client,
    command: &Command,
    answer: &Value,
) -> Result<(), Failure> {
    let cluster = match command {
        Command::Backup(BackupCommand::List {
            cluster: Some(cluster),
            ..
        })
        | Command::Schedule(ScheduleCommand::List {
            cluster: Some(cluster),
            ..
        })
        | Command::Retention(RetentionCommand::Preview { cluster, .. }) => cluster,
        _ => return Ok(()),
    };
    if answer.as_array().is_none_or(|rows| !rows.is_empty()) {
        return Ok(());
    }
    let schedules = request(
        client,
        &topology::api_subject("schedule", "list"),
        json!({"schema_version": 1}),
    )
    .await?;
    let clusters = crate::listing::schedule_field(&schedules, "cluster");
    if clusters.contains(cluster) {
        return Ok(());
    }
    let backups = request(
        client,
        &topology::api_subject("backup", "list"),
        json!({"schema_version": 1, "cluster": cluster}),
    )
    .await?;
    if backups.as_array().is_some_and(|rows| !rows.is_empty()) {
        return Ok(());
    }
    Err(Failure {
        code: 1,
        message: format!(
            "cluster {cluster} not found: no schedule and no backup names it{}",
            crate::listing::did_you_mean(cluster, clusters.iter().map(String::as_str))
        ),
    })
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
                if let Some(deadline) = args.starting_deadline {
                    body["starting_deadline"] = json!(deadline);
                }
                if let Some(jitter) = args.timing.jitter {
                    body["jitter"] = json!(jitter);
                }
                if !args.timing.exclude.is_empty() {
                    body["exclude"] = json!(args.timing.exclude);
                }
                if let Some(on_blackout) = &args.timing.on_blackout {
                    body["on_blackout"] = json!(on_blackout);
                }
                if let Some(n) = args.pause_after_failures {
                    body["pause_after_failures"] = json!(n);
                }
                if !args.annotations.is_empty() {
                    body["annotations"] =
                        json!(args.annotations.iter().cloned().collect::<BTreeMap<_, _>>());
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
                if let Some(verify) =
                    verify_json(&args.verify_cron, &args.verify_pick, &args.verify_timeout)?
                {
                    body["verify"] = verify;
                }
                if let Some(breaker) = &args.breaker {
                    body["breaker"] = breaker.clone();
                }
                body["confirm"] = json!(args.yes);
                body["dry_run"] = json!(args.dry_run);
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
            ScheduleCommand::Describe { name, .. } => (
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
            ScheduleCommand::List { cluster, .. } => {
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
            ScheduleCommand::Delete { name, dry_run, .. } => {
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
                if args.replace_policy {
                    let policy = policy_json(args.policy.as_deref(), args.keep_last, false)?
                        .ok_or_else(|| {
                            Failure::input("--replace-policy needs --policy or --keep-last")
                        })?;
                    body["policy"] = policy;
                } else if let Some(patch) = policy_patch(args.policy.as_deref(), args.keep_last)? {
                    body["policy_patch"] = patch;
                }
                if let Some(breaker) = &args.breaker {
                    body["breaker"] = breaker.clone();
                }
                if args.breaker_defaults {
                    body["breaker"] = Value::Null;
                }
                body["confirm"] = json!(args.yes);
                body["dry_run"] = json!(args.dry_run);
                if !args.labels.is_empty() {
                    body["labels"] = json!(args.labels.iter().cloned().collect::<BTreeMap<_, _>>());
                }
                if let Some(overlap) = &args.overlap_policy {
                    body["overlap_policy"] = json!(overlap);
                }
                if let Some(seconds) = args.starting_deadline_seconds {
                    body["starting_deadline_seconds"] = json!(seconds);
                }
                if let Some(deadline) = args.starting_deadline {
                    body["starting_deadline"] = json!(deadline);
                }
                if args.no_starting_deadline {
                    body["starting_deadline"] = Value::Null;
                }
                if let Some(jitter) = args.timing.jitter {
                    body["jitter"] = json!(jitter);
                }
                if args.no_jitter {
                    body["jitter"] = Value::Null;
                }
                if !args.timing.exclude.is_empty() {
                    body["exclude"] = json!(args.timing.exclude);
                }
                if args.no_exclude {
                    body["exclude"] = json!([]);
                }
                if let Some(on_blackout) = &args.timing.on_blackout {
                    body["on_blackout"] = json!(on_blackout);
                }
                if let Some(n) = args.pause_after_failures {
                    body["pause_after_failures"] = json!(n);
                }
                if args.no_pause_after_failures {
                    body["pause_after_failures"] = Value::Null;
                }
                if !args.annotations.is_empty() {
                    body["annotations"] =
                        json!(args.annotations.iter().cloned().collect::<BTreeMap<_, _>>());
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
                if let Some(verify) =
                    verify_json(&args.verify_cron, &args.verify_pick, &args.verify_timeout)?
                {
                    body["verify"] = verify;
                }
                if args.no_verify {
                    body["verify"] = Value::Null;
                }
                (
                    topology::api_subject("schedule", "update"),
                    body,
                    SCHEDULE_COLUMNS,
                )
            }
            ScheduleCommand::Backfill {
                name,
                from,
                to,
                overlap,
            } => {
                let mut body = by_name(name);
                body["from"] = json!(parse_time("from", from)?);
                body["to"] = json!(parse_time("to", to)?);
                if let Some(overlap) = overlap {
                    body["overlap"] = json!(overlap);
                }
                (
                    topology::api_subject("schedule", "backfill"),
                    body,
                    &[
                        "schedule.name",
                        "backfill.ticks",
                        "backfill.first",
                        "backfill.last",
                        "backfill.overlap",
                    ],
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
        Command::Backup(BackupCommand::List { cluster, plan, .. }) => {
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
                &[
                    "cluster",
                    "plan",
                    "id",
                    "kind",
                    "status",
                    "completed_at",
                    "verified",
                ],
            )
        }
        Command::Backup(BackupCommand::Verify {
            id,
            cluster,
            timeout,
            wait: _,
        }) => {
            let mut body = json!({"schema_version": 1, "cluster": cluster, "id": id});
            if let Some(timeout) = timeout {
                body["timeout"] = json!(timeout);
            }
            (
                topology::api_subject("backup", "verify"),
                body,
                &["request_id", "backup_id", "deadline", "recorded"],
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
            dry_run,
            yes: _,
        }) => (
            topology::api_subject("backup", "delete"),
            json!({"schema_version": 1, "cluster": cluster, "id": id,
                   "remote": remote, "force": force, "dry_run": dry_run}),
            &["cluster", "id", "action", "remote", "reason", "dry_run"],
        ),
        Command::Backup(BackupCommand::Orphans {
            cluster,
            delete,
            grace,
            dry_run,
            yes: _,
        }) => {
            let mut body = json!({"schema_version": 1, "cluster": cluster, "grace": grace});
            if *delete {
                body["dry_run"] = json!(dry_run);
            }
            (
                topology::api_subject("orphans", if *delete { "delete" } else { "list" }),
                body,
                &[],
            )
        }
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
        Command::Plugin(PluginCommand::List { .. }) => (
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
        Command::Retention(RetentionCommand::Approve {
            cluster,
            plan,
            dry_run,
            ..
        }) => (
            // A dry run shows the held run as the preview does, and approves nothing.
            topology::api_subject("retention", if *dry_run { "preview" } else { "approve" }),
            json!({"schema_version": 1, "cluster": cluster, "plan": plan}),
            if *dry_run {
                &[]
            } else {
                &["cluster", "plan", "approved_at", "deleting"]
            },
        ),
        Command::Catalog(CatalogCommand::Scrub { cluster, dry_run }) => (
            topology::api_subject("catalog", "scrub"),
            json!({"schema_version": 1, "cluster": cluster, "dry_run": dry_run}),
            &[
                "cluster",
                "dry_run",
                "checked",
                "findings",
                "missing_after",
                "unowned_objects",
            ],
        ),
        Command::Catalog(CatalogCommand::Import { cluster, dry_run }) => (
            topology::api_subject("catalog", "import"),
            json!({"schema_version": 1, "cluster": cluster, "dry_run": dry_run}),
            &[
                "cluster",
                "dry_run",
                "directories",
                "known",
                "imported",
                "skipped",
            ],
        ),
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
            yes: _,
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

/// The simulation of a schedule as `schedule.describe` returned it: its cron, policy, cadence
/// and volumes, with the command's simulation options.
fn schedule_scenario(
    name: &str,
    described: &Value,
    options: &crate::simulate::SimulationOptions,
) -> Result<sexton_simulate::Scenario, Failure> {
    let schedule = described
        .get("schedule")
        .ok_or_else(|| Failure::runtime(anyhow::anyhow!("schedule.describe sent no schedule")))?;
    let unreadable = |what: &str| {
        Failure::runtime(anyhow::anyhow!(
            "schedule.describe sent an unreadable {what}"
        ))
    };
    // The spec the runs follow: for @daily-random & co. the one drawn from the name.
    let cron = described
        .get("timing")
        .and_then(|timing| timing.get("cron"))
        .or_else(|| schedule.get("cron"))
        .and_then(Value::as_str)
        .ok_or_else(|| unreadable("cron"))?;
    let policy: sexton_retention::Policy =
        serde_json::from_value(schedule.get("policy").cloned().unwrap_or(Value::Null))
            .map_err(|_| unreadable("policy"))?;
    let full_every = match schedule.get("full_every") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            serde_json::from_value::<sexton_retention::FullEvery>(value.clone())
                .map_err(|_| unreadable("full_every"))?
                .get(),
        ),
    };
    let volumes: Vec<String> = match schedule.get("volumes") {
        None | Some(Value::Null) => Vec::new(),
        Some(value) => {
            serde_json::from_value(value.clone()).map_err(|_| unreadable("volume list"))?
        }
    };
    crate::simulate::scenario(
        name,
        cron,
        policy,
        full_every,
        &volumes,
        options,
        Utc::now(),
    )
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

/// The keys `schedule update` changes in the stored policy: `--keep-last N`, or the keys of
/// `--policy JSON` (an object; `null` removes a key).
fn policy_patch(policy: Option<&str>, keep_last: Option<u32>) -> Result<Option<Value>, Failure> {
    match (policy, keep_last) {
        (Some(_), Some(_)) => Err(Failure::input("give --policy or --keep-last, not both")),
        (None, Some(0)) => Err(Failure::input("--keep-last must be at least 1")),
        (None, Some(n)) => Ok(Some(json!({"keep_last": n}))),
        (Some(text), None) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(keys)) => Ok(Some(Value::Object(keys))),
            Ok(_) => Err(Failure::input(
                "invalid --policy: expected a JSON object of the keys to change",
            )),
            Err(err) => Err(Failure::input(format!("invalid --policy: {err}"))),
        },
        (None, None) => Ok(None),
    }
}

async fn request(
    client: &async_nats::Client,
    subject: &str,
    body: Value,
) -> Result<Value, Failure> {
    request_raw(client, subject, body)
        .await?
        .map_err(|err| Failure {
            code: if err.code == ErrorCode::Invalid { 2 } else { 1 },
            message: err.message,
        })
}

/// One API request, with who asks in its headers; the API's refusal is the inner `Err`.
async fn request_raw(
    client: &async_nats::Client,
    subject: &str,
    body: Value,
) -> Result<Result<Value, sexton_shared::api::ApiError>, Failure> {
    let body = serde_json::to_vec(&body).map_err(|err| Failure::runtime(err.into()))?;
    let asked = tokio::time::timeout(
        Duration::from_secs(15),
        client.request_with_headers(
            subject.to_string(),
            crate::safety::actor_headers(),
            body.into(),
        ),
    );
    // NATS drops a publication the user may not make and says so only on the connection: a
    // denial ends the wait at once, as itself, not as "no answer".
    let mut denials = DENIALS.get().cloned();
    let denied = async {
        match &mut denials {
            Some(denials) => match denials.wait_for(Option::is_some).await {
                Ok(denial) => denial.clone().unwrap_or_default(),
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    };
    let answered = tokio::select! {
        answered = asked => answered,
        denial = denied => {
            return Err(Failure {
                code: EXIT_DENIED,
                message: format!(
                    "permission denied: NATS refused {subject} to this user ({denial}); \
                     check nats.user and deploy/nats/authorization.conf"
                ),
            });
        }
    };
    let message = answered
        .map_err(|_| Failure::runtime(anyhow::anyhow!("no answer on {subject} within 15s")))?
        .with_context(|| format!("no answer on {subject}: is the fleet running?"))
        .map_err(Failure::runtime)?;
    let reply: Reply = serde_json::from_slice(&message.payload)
        .with_context(|| format!("unreadable answer on {subject}"))
        .map_err(Failure::runtime)?;
    Ok(reply.into_result())
}

fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    if path == "." {
        return Some(value);
    }
    path.split('.').try_fold(value, |v, part| v.get(part))
}

fn cell(value: Option<&Value>) -> String {
    crate::output::text(value)
}

/// Prints `value` as JSON or YAML, or as a table with `columns` (dotted paths into each row).
fn print_value(output: Output, value: &Value, columns: &[&str]) {
    crate::output::generic(output, value, columns)
}

fn print_table(header: &[String], rows: &[Vec<String>]) {
    crate::output::table(header, rows)
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
    println!("{:<12}{}", "verified:", verified_cell(backup, Utc::now()));
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
    let history = backup
        .pointer("/verification/history")
        .and_then(Value::as_array);
    if let Some(history) = history.filter(|h| !h.is_empty()) {
        println!();
        let rows: Vec<Vec<String>> = history
            .iter()
            .map(|e| {
                vec![
                    cell(e.get("at")),
                    cell(e.get("outcome")),
                    cell(e.get("duration_ms")),
                    cell(e.get("request_id")),
                    cell(e.get("reason")),
                ]
            })
            .collect();
        print_table(
            &["TESTED", "OUTCOME", "MS", "REQUEST", "WHY"].map(String::from),
            &rows,
        );
    }
}

/// The VERIFIED cell of `backup list`: how long ago a restore test proved the backup, `failed`,
/// `testing` while one runs, `-` when never tested.
fn verified_cell(record: &Value, now: chrono::DateTime<Utc>) -> String {
    let Some(verification) = record.get("verification").filter(|v| !v.is_null()) else {
        return "-".into();
    };
    if verification.get("pending").is_some_and(|p| !p.is_null()) {
        return "testing".into();
    }
    match verification.get("state").and_then(Value::as_str) {
        Some("verified") => verification
            .get("at")
            .and_then(Value::as_str)
            .and_then(|at| at.parse::<chrono::DateTime<Utc>>().ok())
            .map(|at| format!("{} ago", short_age(now - at)))
            .unwrap_or_else(|| "verified".into()),
        Some("failed") => "failed".into(),
        _ => "-".into(),
    }
}

/// `45s`, `12m`, `3h`, `5d`.
fn short_age(age: chrono::Duration) -> String {
    let seconds = age.num_seconds().max(0);
    match seconds {
        0..=119 => format!("{seconds}s"),
        120..=7199 => format!("{}m", seconds / 60),
        7200..=172_799 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// `backup verify --wait`: polls the backup until the test's verdict is recorded (or its
/// deadline passed) and prints it; a failed test or a timeout exits 1.
async fn wait_for_verdict(
    client: &async_nats::Client,
    cluster: &str,
    id: &str,
    asked: &Value,
    output: Output,
) -> Result<(), Failure> {
    let Some(request_id) = asked.get("request_id").and_then(Value::as_str) else {
        return Err(Failure::runtime(anyhow::anyhow!(
            "no request id in {asked}"
        )));
    };
    let deadline = asked
        .get("deadline")
        .and_then(Value::as_str)
        .and_then(|d| d.parse::<chrono::DateTime<Utc>>().ok())
        .unwrap_or_else(|| Utc::now() + chrono::Duration::hours(1));
    let subject = topology::api_subject("backup", "describe");
    loop {
        let described = request(
            client,
            &subject,
            json!({"schema_version": 1, "cluster": cluster, "id": id}),
        )
        .await?;
        let history = described
            .pointer("/backup/verification/history")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(entry) = history
            .iter()
            .find(|e| e.get("request_id").and_then(Value::as_str) == Some(request_id))
        {
            print_value(
                output,
                entry,
                &["request_id", "outcome", "at", "duration_ms", "reason"],
            );
            return match entry.get("outcome").and_then(Value::as_str) {
                Some("verified") => Ok(()),
                _ => Err(Failure {
                    code: 1,
                    message: format!("restore test {request_id} of {id} did not pass"),
                }),
            };
        }
        if Utc::now() > deadline + chrono::Duration::minutes(1) {
            return Err(Failure {
                code: 1,
                message: format!("no verdict for restore test {request_id} of {id} by {deadline}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// An instant as the schedule's zone reads it (UTC without `CRON_TZ`), with its offset.
fn in_zone(t: DateTime<Utc>, zone: chrono_tz::Tz) -> String {
    t.with_timezone(&zone).to_rfc3339()
}

/// The upcoming runs of `schedule next` and `describe`, in the schedule's zone: when each
/// fires, its cron time, and what a blackout does to it.
fn print_runs(runs: &[sexton_schedule::PlannedRun], zone: chrono_tz::Tz) {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let effect = match run.effect {
                sexton_schedule::RunEffect::Fires => "fires".to_string(),
                sexton_schedule::RunEffect::Skipped { blackout } => {
                    format!("skipped: blackout until {}", in_zone(blackout.end, zone))
                }
                sexton_schedule::RunEffect::Deferred { blackout } => {
                    format!("deferred: fires at {}", in_zone(blackout.end, zone))
                }
            };
            vec![in_zone(run.at, zone), in_zone(run.nominal, zone), effect]
        })
        .collect();
    print_table(&["RUN AT", "CRON TIME", "EFFECT"].map(String::from), &rows);
}

/// `schedule describe` as text: the schedule's settings, its timing in words (the zone said
/// even when it is UTC), what happens now and why, and its next runs.
fn print_schedule_description(value: &Value) {
    let schedule = value.get("schedule").unwrap_or(&Value::Null);
    let timing = value.get("timing").unwrap_or(&Value::Null);
    let explain = value.get("explain").unwrap_or(&Value::Null);
    let status = schedule.get("status").unwrap_or(&Value::Null);
    let line = |label: &str, text: String| println!("{:<14}{text}", format!("{label}:"));
    for (label, path) in [("name", "name"), ("cluster", "cluster"), ("plan", "plan")] {
        line(label, cell(lookup(schedule, path)));
    }
    // The policy as its keys, one line: `keep_last=7, recovery_window=30d`.
    line("policy", cell(schedule.get("policy")).replace(',', ", "));
    if schedule
        .get("labels")
        .and_then(Value::as_object)
        .is_some_and(|labels| !labels.is_empty())
    {
        line("labels", cell(schedule.get("labels")));
    }
    if let Some(created) = schedule.get("created_at").and_then(Value::as_str) {
        if let Ok(at) = created.parse::<DateTime<Utc>>() {
            line(
                "created",
                format!(
                    "{} ({} ago)",
                    crate::output::time(at),
                    crate::output::age(crate::output::now() - at)
                ),
            );
        }
    }
    match timing.get("settings").and_then(Value::as_array) {
        Some(settings) => {
            for setting in settings {
                let text = cell(Some(setting));
                match text.split_once(": ") {
                    Some((label, rest)) => line(label, rest.to_string()),
                    None => line("timing", text),
                }
            }
        }
        None => line("timing", cell(timing.get("error"))),
    }
    if let Some(seconds) = schedule
        .get("starting_deadline_seconds")
        .and_then(Value::as_u64)
    {
        let deadline = sexton_schedule::Span::from_seconds(seconds)
            .map_or_else(|_| format!("{seconds}s"), |s| s.to_string());
        line(
            "deadline",
            format!("{deadline}: a run missed by more than this is skipped"),
        );
    }
    if let Some(n) = schedule.get("pause_after_failures").and_then(Value::as_u64) {
        let so_far = status
            .get("consecutive_failures")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        line(
            "pause after",
            format!("{n} consecutive failed backups ({so_far} so far)"),
        );
    }
    line("phase", cell(status.get("phase")));
    if let Some(reason) = status.get("paused_reason").filter(|r| !r.is_null()) {
        line("paused", cell(Some(reason)));
    }
    line("last backup", cell(status.get("last_backup")));
    if let Some(skip) = value.get("last_skip").filter(|s| !s.is_null()) {
        line(
            "last skip",
            format!(
                "{}: {}",
                cell(skip.get("reason")),
                cell(skip.get("explanation"))
            ),
        );
    }
    if let Some(backfill) = status.get("backfill").filter(|b| !b.is_null()) {
        let total = backfill
            .get("ticks")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        line(
            "backfill",
            format!(
                "{} to {}: {} of {total} ticks done{}",
                cell(backfill.get("from")),
                cell(backfill.get("to")),
                cell(backfill.get("done")),
                match backfill.get("finished_at").filter(|f| !f.is_null()) {
                    Some(at) => format!(", finished {}", cell(Some(at))),
                    None => String::new(),
                }
            ),
        );
    }
    line(
        "now",
        format!(
            "{}: {}",
            cell(explain.get("action")),
            cell(explain.get("reason"))
        ),
    );
    if let Some(error) = explain.get("error").filter(|e| !e.is_null()) {
        line("error", cell(Some(error)));
    }
    if let Some(upcoming) = timing.get("upcoming") {
        if let Ok(runs) = serde_json::from_value::<Vec<PlannedRunView>>(upcoming.clone()) {
            let zone = timing
                .get("zone")
                .and_then(Value::as_str)
                .and_then(|name| name.parse().ok())
                .unwrap_or(chrono_tz::UTC);
            println!();
            let rows: Vec<Vec<String>> = runs.iter().map(|run| run.row(zone)).collect();
            print_table(&["RUN AT", "CRON TIME", "EFFECT"].map(String::from), &rows);
        }
    }
}

/// An upcoming run as `describe` sends it (`PlannedRun`'s JSON).
#[derive(serde::Deserialize)]
struct PlannedRunView {
    nominal: DateTime<Utc>,
    at: DateTime<Utc>,
    effect: String,
    #[serde(default)]
    blackout: Option<BlackoutView>,
}

#[derive(serde::Deserialize)]
struct BlackoutView {
    end: DateTime<Utc>,
}

impl PlannedRunView {
    fn row(&self, zone: chrono_tz::Tz) -> Vec<String> {
        let end = self
            .blackout
            .as_ref()
            .map_or_else(|| "?".to_string(), |b| in_zone(b.end, zone));
        let effect = match self.effect.as_str() {
            "skipped" => format!("skipped: blackout until {end}"),
            "deferred" => format!("deferred: fires at {end}"),
            other => other.to_string(),
        };
        vec![in_zone(self.at, zone), in_zone(self.nominal, zone), effect]
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
            for sub in command.get_subcommands() {
                walk(sub, format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::command(), "sexton".into(), &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }
}
