//! The `sexton` command's arguments: the clap definitions of every noun and verb, and the
//! parsers of their values (durations, sizes, labels, windows). No requests, no printing.

use std::{path::PathBuf, time::Duration};

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::failure::Failure;
pub use crate::output::Output;

mod schedule;

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
pub enum BackupCommand {
    /// Take a backup now from a schedule's settings (does not change the schedule's timing).
    #[command(after_help = "Examples:
  sexton backup create --from-schedule nightly")]
    Create {
        /// The schedule whose cluster, plan, labels and volumes the backup takes.
        #[arg(long)]
        from_schedule: String,
    },
    /// Show one backup (as `backup describe`), or without an id list them (as `backup list`):
    /// kubectl's `get`.
    #[command(after_help = "Examples:
  sexton backup get                                          # every backup, as backup list
  sexton backup get --cluster db1 -o wide
  sexton backup get nightly-20261123030000 --cluster db1     # as backup describe")]
    Get {
        /// The backup's id; without it, every backup.
        id: Option<String>,
        /// The cluster the backup belongs to (needed with an id); without an id, only this
        /// cluster's backups.
        #[arg(long)]
        cluster: Option<String>,
        /// Without an id: only backups of this plan.
        #[arg(long)]
        plan: Option<String>,
        /// Without an id: only backups this schedule took.
        #[arg(long)]
        schedule: Option<String>,
        #[command(flatten)]
        list: crate::listing::ListArgs,
    },
    /// List backups in the catalog.
    #[command(after_help = "Examples:
  sexton backup list
  sexton backup list --cluster db1 -o wide
  sexton backup list --schedule nightly -l team=db
  sexton backup list --cluster db1 -o name | head -1
  sexton backup list --cluster db1 --watch
  sexton backup list --location dr                  # what dr holds, each copy's state there")]
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
        /// Only what this location holds: backups with a copy there (STATUS is the copy's
        /// state there); `primary`: those whose objects are still at primary.
        #[arg(long, value_parser = parse_location)]
        location: Option<String>,
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
        /// The cluster the backup belongs to; found from the id when only one cluster has it.
        #[arg(long)]
        cluster: Option<String>,
    },
    /// Keep a backup while it is in use (a restore, a clone, a bootstrap), whatever retention
    /// says, until the same reason is released. A `standalone:<why>` hold keeps an archival
    /// backup restorable to its own end only: the binlog archive keeps its own range, not
    /// every segment after it (barman's keep:standalone).
    #[command(after_help = "Examples:
  sexton backup hold nightly-20261123030000 --cluster db1 --reason restore:r-42
  sexton backup hold nightly-20260101030000 --cluster db1 --reason standalone:yearly-2026")]
    Hold {
        /// The backup's id.
        id: String,
        /// The cluster the backup belongs to; found from the id when only one cluster has it.
        #[arg(long)]
        cluster: Option<String>,
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
        /// The cluster the backup belongs to; found from the id when only one cluster has it.
        #[arg(long)]
        cluster: Option<String>,
        /// The reason the hold was taken with, `<what>:<id>`.
        #[arg(long, value_parser = parse_hold_reason)]
        reason: String,
    },
    /// Delete a backup's catalog record; its objects too with --remote (or when the backup,
    /// its schedule or its cluster/plan's schedules set remote_cleanup).
    #[command(after_help = "Examples:
  sexton backup delete nightly-20261123030000 --cluster db1
  sexton backup delete nightly-20261123030000 --cluster db1 --remote
  sexton backup delete nightly-20261123030000 --cluster db1 --with-dependents --dry-run
  sexton backup delete --oldest --cluster db1 --plan base --dry-run")]
    Delete {
        /// The backup's id.
        #[arg(required_unless_present = "oldest", conflicts_with = "oldest")]
        id: Option<String>,
        /// The cluster the backup belongs to; found from the id when only one cluster has it
        /// (--oldest needs it).
        #[arg(long)]
        cluster: Option<String>,
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
        /// Delete only the backup's copy at this location (its objects there), once no copy
        /// there builds on it.
        #[arg(long)]
        location: Option<String>,
        /// Delete it and every backup that builds on it, now (pgBackRest's expire --set,
        /// barman's delete); refused whole if one is held, or if no full backup would be left.
        #[arg(long, conflicts_with_all = ["force", "location"])]
        with_dependents: bool,
        /// Delete the oldest backup set now: the oldest completed full backup with every
        /// backup that builds on it (barman's delete SERVER oldest), judged as
        /// --with-dependents is; the last full never goes.
        #[arg(long, conflicts_with_all = ["force", "location"])]
        oldest: bool,
        /// With --oldest: the plan whose oldest set goes (needed when the cluster has backups
        /// of several plans).
        #[arg(long, requires = "oldest")]
        plan: Option<String>,
    },
    /// Ask for a restore test of a backup now: an executor restores it (with its chain) and
    /// answers; the backup is held until then. With --wait, wait for the verdict.
    #[command(after_help = "Examples:
  sexton backup verify nightly-20261123030000 --cluster db1 --wait
  sexton backup verify nightly-20261123030000 --cluster db1 --timeout 2h
  sexton backup verify nightly-20261123030000 --cluster db1 --location dr --wait")]
    Verify {
        /// The backup's id.
        id: String,
        /// The cluster the backup belongs to; found from the id when only one cluster has it.
        #[arg(long)]
        cluster: Option<String>,
        /// How long the executor has (1m to 7d; default 1h).
        #[arg(long)]
        timeout: Option<String>,
        /// Test the backup's copy at this location (read from there) instead of the primary's.
        #[arg(long)]
        location: Option<String>,
        /// Wait for the verdict (up to the timeout) and print it; exit 1 if it failed.
        #[arg(long)]
        wait: bool,
    },
    /// Download a backup for a restore: every object of its chain (oldest first), at the
    /// versions Sexton recorded, each checked against the size and SHA-256 recorded when it
    /// was taken, into <DIR>/<backup id>/. Objects written over or "deleted" in the bucket
    /// since are read from the recorded (locked) versions.
    #[command(after_help = "Examples:
  sexton backup fetch nightly-20261123030000 --cluster db1 --to /restore
  sexton backup fetch nightly-20261123030000 --cluster db1 --location dr --to /restore -o json")]
    Fetch {
        /// The backup's id.
        id: String,
        /// The cluster the backup belongs to; found from the id when only one cluster has it.
        #[arg(long)]
        cluster: Option<String>,
        /// Read the backup's copies at this location instead of the primary's objects.
        #[arg(long)]
        location: Option<String>,
        /// The directory to write into (created if missing); each backup of the chain gets a
        /// directory of its own there.
        #[arg(long)]
        to: PathBuf,
        /// Only the backup's own objects, not the backups it builds on.
        #[arg(long)]
        only: bool,
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

#[derive(Subcommand, Debug)]
pub enum RecoveryCommand {
    /// Each place's recovery value now: the restore points and the instants the log replays
    /// to, as a timeline, the gaps and why, the promised window against what is held, the
    /// recovery point age (the log's tail included), the newest passed restore test, and each
    /// objective checked. Exit 0 whatever it finds (a script reads `-o json`).
    #[command(after_help = "Examples:
  sexton recovery window --cluster db1
  sexton recovery window --cluster db1 --location dr -o json")]
    Window {
        /// The cluster.
        #[arg(long)]
        cluster: String,
        /// Only this plan's group.
        #[arg(long)]
        plan: Option<String>,
        /// Only this place: primary, or a location of the fleet.
        #[arg(long, value_name = "LOCATION")]
        location: Option<String>,
    },
    /// A restore drill to a point in time: an executor restores, at one place, the backup a
    /// recovery to --at reads there (its chain, then the log archive replayed up to --at),
    /// checks it and answers; the verdict is recorded on the backup with the instant. Refused,
    /// saying why (the gap, or where the restorable span ends), when --at is not restorable
    /// there. With --wait, wait for the verdict; exit 1 if it failed.
    #[command(after_help = "Examples:
  sexton recovery drill --cluster db1 --at 2026-11-23T14:00:00Z --wait
  sexton recovery drill --cluster db1 --at 2026-11-20T09:30:00Z --location dr --timeout 2h")]
    Drill {
        /// The cluster.
        #[arg(long)]
        cluster: String,
        /// The instant to recover to (RFC 3339).
        #[arg(long)]
        at: String,
        /// The plan whose backups to read; needed when the cluster has more than one.
        #[arg(long)]
        plan: Option<String>,
        /// Read the copies and the log archive at this location instead of the primary's.
        #[arg(long)]
        location: Option<String>,
        /// How long the executor has (1m to 7d; default 1h).
        #[arg(long)]
        timeout: Option<String>,
        /// Wait for the verdict (up to the timeout) and print it; exit 1 if it failed.
        #[arg(long)]
        wait: bool,
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
        /// The plans of the copies at this location (docs/copies.md) instead of primary's.
        #[arg(long, value_name = "LOCATION")]
        location: Option<String>,
    },
    /// Let a retention run the circuit breaker holds go through, once: exactly what the
    /// preview shows it deleting (asks first; --yes without a terminal).
    #[command(after_help = "Examples:
  sexton retention approve --cluster db1 --plan full --dry-run
  sexton retention approve --cluster db1 --plan full --yes
  sexton retention approve --cluster db1 --plan full --location dr   # copies at dr")]
    Approve {
        /// The cluster whose held run to let through.
        #[arg(long)]
        cluster: String,
        /// The plan (group) whose held run to let through.
        #[arg(long)]
        plan: String,
        /// The held plan of the group's copies at this location (docs/copies.md).
        #[arg(long, value_name = "LOCATION")]
        location: Option<String>,
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
  sexton retention plan --catalog catalog.json --policy policy.json --now 2026-11-23T00:00:00Z -o json
  sexton retention plan --catalog catalog.json --policy policy.json --delete b3 --with-dependents
  sexton retention plan --catalog catalog.json --policy-from pgbackrest:'repo1-retention-full=2'
  sexton retention plan --catalog-from pgbackrest:info.json --policy-from pgbackrest:'repo1-retention-full=2'
  sexton retention plan --catalog-from barman:list.json --policy-from barman:'retention_policy=REDUNDANCY 2'")]
    Plan {
        /// A catalog file (JSON: the backups of one group).
        #[arg(
            long,
            required_unless_present = "catalog_from",
            conflicts_with = "catalog_from"
        )]
        catalog: Option<PathBuf>,
        /// Or what pgBackRest or barman printed about their backups, read into a catalog,
        /// and compared with what that tool keeps: pgbackrest:FILE (`pgbackrest info
        /// --stanza=NAME --output=json`), barman:FILE (`barman list-backups SERVER --format
        /// json`).
        #[arg(long, value_name = "TOOL:FILE")]
        catalog_from: Option<String>,
        /// A retention policy file (JSON).
        #[arg(
            long,
            required_unless_present = "policy_from",
            conflicts_with = "policy_from"
        )]
        policy: Option<PathBuf>,
        /// Or a pgBackRest or barman retention setting, translated (printed on stderr):
        /// pgbackrest:'repo1-retention-full=2', barman:'retention_policy=REDUNDANCY 2,
        /// minimum_redundancy=1'.
        #[arg(long, value_name = "TOOL:SETTINGS")]
        policy_from: Option<String>,
        /// The instant to decide at (RFC 3339); default now.
        #[arg(long)]
        now: Option<String>,
        /// With -o json: indent the plan even when it is large (plans of more than 10,000
        /// backups are written compact by default).
        #[arg(long)]
        pretty: bool,
        /// Plan as if a user asked to delete this backup (judged as `backup delete` judges it:
        /// refused, deferred or done at the run).
        #[arg(long, value_name = "ID")]
        delete: Option<String>,
        /// With --delete: the backup and every backup that builds on it (backup delete
        /// --with-dependents).
        #[arg(long, requires = "delete")]
        with_dependents: bool,
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
    pub(super) fn options(&self) -> Result<sexton_executor::exec::ExecOptions, Failure> {
        let cluster = self
            .cluster
            .as_deref()
            .map(sexton_shared::names::ClusterName::new)
            .transpose()
            .map_err(|err| Failure::input(format!("--cluster: {err}")))?;
        let (durable, merge_durable, verify_durable) =
            sexton_executor::exec::ExecOptions::default_durables(cluster.as_ref());
        let durable_given = self.durable.clone();
        let options = sexton_executor::exec::ExecOptions {
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
            limits: sexton_executor::exec::output::Limits {
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
        #[arg(long, value_enum, default_value_t = SegmentFormat::Binlog)]
        format: SegmentFormat,
        /// Ship a binlog still flagged as open (one a crashed server left so).
        #[arg(long)]
        allow_in_use: bool,
        /// The files, oldest first.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Download the archive's segments for a point-in-time recovery, each checked against the
    /// size and SHA-256 its index entry records; a segment written over or "deleted" since is
    /// read from the version that is the recorded one. Files are named as in the archive.
    #[command(after_help = "Examples:
  sexton binlog fetch --cluster db1 --to /restore/binlog
  sexton binlog fetch --cluster db1 --since 2026-11-23T03:00:00Z --until 2026-11-23T09:30:00Z --to /restore/binlog
  sexton binlog fetch --cluster db1 --location dr --to /restore/binlog")]
    Fetch {
        /// The cluster whose archive is read.
        #[arg(long)]
        cluster: String,
        /// Read the archive's copy at this location instead of the primary's.
        #[arg(long)]
        location: Option<String>,
        /// Only segments that may hold events at or after this instant (RFC 3339), such as
        /// the start of the backup restored.
        #[arg(long)]
        since: Option<String>,
        /// Only segments that may hold events at or before this instant (RFC 3339): the
        /// point to recover to.
        #[arg(long)]
        until: Option<String>,
        /// The directory to write into (created if missing).
        #[arg(long)]
        to: PathBuf,
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

/// How a file's event times are found: `--format`'s values, turned into the executor crate's
/// [`sexton_executor::binlog_append::SegmentFormat`] (which knows nothing of clap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SegmentFormat {
    /// A MySQL/MariaDB binlog: times from its event headers.
    Binlog,
    /// Any other closed log file (a WAL segment): it ends at its modification time and starts
    /// where the newest indexed segment ends.
    File,
}

impl From<SegmentFormat> for sexton_executor::binlog_append::SegmentFormat {
    fn from(format: SegmentFormat) -> Self {
        match format {
            SegmentFormat::Binlog => Self::Binlog,
            SegmentFormat::File => Self::File,
        }
    }
}

/// A schedule's `breaker` block, checked here for a quick error (the server checks again).
pub(super) fn parse_breaker(text: &str) -> Result<sexton_shared::breaker::BreakerSpec, String> {
    serde_json::from_str(text).map_err(|err| format!("invalid breaker settings: {err}"))
}

/// A schedule's copy rules, checked here for a quick error (the server checks again, against
/// its configured locations).
pub(super) fn parse_copies(text: &str) -> Result<CopyRules, String> {
    let rules: Vec<sexton_shared::copies::CopyRule> =
        serde_json::from_str(text).map_err(|err| format!("invalid copy rules: {err}"))?;
    sexton_shared::copies::validate_copy_rules(&rules, None)?;
    Ok(CopyRules(rules))
}

/// `--objectives JSON`: a recovery objectives block, checked as the API checks it.
pub(super) fn parse_objectives(
    text: &str,
) -> Result<sexton_shared::objectives::Objectives, String> {
    let objectives: sexton_shared::objectives::Objectives =
        serde_json::from_str(text).map_err(|err| format!("invalid objectives: {err}"))?;
    objectives.validate()?;
    Ok(objectives)
}

/// `--copies JSON`: one value holding the whole list (clap would take a `Vec` for a flag given
/// several times).
#[derive(Debug, Clone)]
pub struct CopyRules(pub Vec<sexton_shared::copies::CopyRule>);

fn parse_hold_reason(text: &str) -> Result<String, String> {
    sexton_shared::api::check_hold_reason(text).map(|()| text.to_string())
}

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

/// A `--location` name, checked as the services check it.
fn parse_location(text: &str) -> Result<String, String> {
    sexton_shared::names::LocationName::new(text)
        .map(|_| text.to_string())
        .map_err(|err| err.to_string())
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
