//! The arguments of `sexton recovery ...` and `sexton retention ...`: what can be restored and
//! drilled, and what a retention policy keeps, previews and deletes.

use clap::Subcommand;

use super::*;

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
