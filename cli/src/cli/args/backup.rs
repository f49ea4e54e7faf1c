//! The arguments of `sexton backup ...`: taking, listing, describing, holding, restore-testing
//! and deleting backups, and finding orphaned objects.

use clap::Subcommand;

use super::*;

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

/// A hold's `--reason`, checked as the API checks it.
fn parse_hold_reason(text: &str) -> Result<String, String> {
    sexton_shared::api::check_hold_reason(text).map(|()| text.to_string())
}

/// A `--location` name, checked as the services check it.
fn parse_location(text: &str) -> Result<String, String> {
    sexton_model::names::LocationName::new(text)
        .map(|_| text.to_string())
        .map_err(|err| err.to_string())
}
