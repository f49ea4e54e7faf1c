//! The arguments of `sexton schedule ...`: its verbs, and the options a schedule is created
//! and changed with (timing, policy, volumes, ownership). The value parsers are the parent's.

use clap::{Args, Subcommand};

#[allow(unused_imports)]
use super::*;

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create a schedule.
    #[command(after_help = "Examples:
  sexton schedule create nightly --cluster db1 --plan full --cron '0 3 * * *' --keep-last 7
  sexton schedule create daily --cluster db1 --plan full --cron @daily --keep-daily 7 --keep-weekly 4
  sexton schedule create velero --cluster k8s --plan velero --schedule '0 3 * * *' --ttl 720h
  sexton schedule create hourly --cluster db1 --plan full --cron 'CRON_TZ=Europe/Berlin 0 * * * *' \\
      --policy '{\"keep_last\": 24, \"recovery_window\": \"30d\"}' --label team=db")]
    Create(Box<CreateArgs>),
    /// Show one schedule as stored, with its next run; without a name, every schedule (as
    /// `schedule list`, kubectl's `get`).
    #[command(after_help = "Examples:
  sexton schedule get nightly
  sexton schedule get nightly -o yaml
  sexton schedule get                        # every schedule, as schedule list
  sexton schedule get --cluster db1 --watch")]
    Get {
        /// The schedule's name; without it, every schedule.
        name: Option<String>,
        /// Without a name: only the schedules of this cluster.
        #[arg(long)]
        cluster: Option<String>,
        #[command(flatten)]
        list: crate::listing::ListArgs,
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
    /// Print the next runs of a stored schedule, or of a cron spec (offline), with jitter and
    /// blackout windows applied: when each fires, its cron time, and whether a window skips or
    /// defers it.
    #[command(after_help = "Examples:
  sexton schedule next nightly -n 3              # a stored schedule's own timing
  sexton schedule next --cron '0 3 * * *' -n 3   # offline
  sexton schedule next --cron '@daily-random' --name nightly --jitter 15m")]
    Next {
        /// A stored schedule whose runs to print (its cron, jitter and windows, asked of the
        /// scheduler); or give --cron.
        #[arg(value_name = "NAME")]
        schedule: Option<String>,
        /// The cron spec: 5 fields, a descriptor (@daily, @every 6h), optionally CRON_TZ=<zone>
        /// first (offline; or give a schedule's NAME).
        #[arg(long)]
        cron: Option<String>,
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
  sexton schedule update nightly --keep-last 14 --label team=db
  sexton schedule update nightly --keep-daily 7 --ttl 720h   # other rules stay")]
    Update(Box<UpdateArgs>),
}

/// The retention rules of `create` and `update`, one flag per key of the policy JSON
/// (`sexton_retention::Policy`), and Velero's `--ttl`. Together they make one policy object
/// (on update, the keys of the policy patch); `schedule_body` merges them with `--policy`.
#[derive(Args, Debug, Default, Clone)]
#[command(next_help_heading = "Retention rules (merged with --policy)")]
pub struct PolicyArgs {
    /// Keep the newest N completed backups (keep_last; `unlimited`: all).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_last: Option<i64>,
    /// Keep the newest backup of each of the last N hours (keep_hourly).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_hourly: Option<i64>,
    /// Keep the newest backup of each of the last N days (keep_daily).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_daily: Option<i64>,
    /// Keep the newest backup of each of the last N ISO weeks (keep_weekly).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_weekly: Option<i64>,
    /// Keep the newest backup of each of the last N months (keep_monthly).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_monthly: Option<i64>,
    /// Keep the newest backup of each of the last N years (keep_yearly).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_yearly: Option<i64>,
    /// Keep every backup completed within DURATION of the newest one (restic's keep_within:
    /// 7d, 6mo, 1y2mo3d4h; units y, mo or m = months, d, h: no minutes).
    #[arg(long, value_name = "DURATION")]
    pub keep_within: Option<String>,
    /// Keep the newest backup of every hour within DURATION of the newest one (7d, 6mo:
    /// m and mo are months).
    #[arg(long, value_name = "DURATION")]
    pub keep_within_hourly: Option<String>,
    /// Keep the newest backup of every day within DURATION of the newest one (7d, 6mo:
    /// m and mo are months).
    #[arg(long, value_name = "DURATION")]
    pub keep_within_daily: Option<String>,
    /// Keep the newest backup of every week within DURATION of the newest one (7d, 6mo:
    /// m and mo are months).
    #[arg(long, value_name = "DURATION")]
    pub keep_within_weekly: Option<String>,
    /// Keep the newest backup of every month within DURATION of the newest one (7d, 6mo:
    /// m and mo are months).
    #[arg(long, value_name = "DURATION")]
    pub keep_within_monthly: Option<String>,
    /// Keep the newest backup of every year within DURATION of the newest one (7d, 6mo:
    /// m and mo are months).
    #[arg(long, value_name = "DURATION")]
    pub keep_within_yearly: Option<String>,
    /// Keep backups carrying every one of these comma-separated tags (one AND-list of
    /// keep_tags); repeatable, a backup matching any list is kept.
    #[arg(long = "keep-tag", value_name = "TAG,...")]
    pub keep_tags: Vec<String>,
    /// Keep every backup completed at most DAYS days before now (Karbor's
    /// retention_duration).
    #[arg(long, value_name = "DAYS", value_parser = clap::value_parser!(u32).range(1..))]
    pub retention_duration: Option<u32>,
    /// Velero's TTL (720h, 30d): a backup expires DURATION after it was taken. Kept as
    /// retention_duration in whole days (said on stderr); a TTL that is not whole days is
    /// refused.
    #[arg(long, value_name = "DURATION", conflicts_with = "retention_duration")]
    pub ttl: Option<String>,
    /// Keep every point of the last WINDOW recoverable (barman's recovery_window: 30d, 4w,
    /// 1mo or 1m = a month of 30 days, 12h, 90min).
    #[arg(long, value_name = "WINDOW")]
    pub recovery_window: Option<String>,
    /// Keep the newest N backups a restore test proved restorable (keep_verified).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_verified: Option<i64>,
    /// Keep the newest N full backups, each with every backup that builds on it (keep_full:
    /// pgBackRest's repo-retention-full, barman's REDUNDANCY; -1 = every full).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_full: Option<i64>,
    /// Of keep_full's chains, only the newest N differentials (fulls counting) stay, with
    /// their incrementals (keep_diff: pgBackRest's repo-retention-diff; needs --keep-full).
    #[arg(long, value_name = "N", value_parser = parse_keep_count)]
    pub keep_diff: Option<i64>,
    /// Never fewer than N completed backups, whatever the rules or a user's delete say
    /// (barman's minimum_redundancy; a floor, not a rule).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub minimum_redundancy: Option<u32>,
    /// Point-in-time recovery from the newest N kept full backups only; older kept backups
    /// keep the binlog segments that make them consistent (pitr_full: pgBackRest's
    /// repo-retention-archive; not a rule).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub pitr_full: Option<u32>,
    /// How long a failed backup's partial artifacts are left alone (failed_grace: 1h, 30min,
    /// 2d, or never, as barman keeps failed backups; not a rule).
    #[arg(long, value_name = "DURATION")]
    pub failed_grace: Option<String>,
    /// What happens to the ancestors of a kept incremental no rule keeps: keep them, or ask
    /// the executor to merge them (chain_mode; not a rule).
    #[arg(long, value_parser = ["keep", "merge"])]
    pub chain_mode: Option<String>,
}

/// The timing settings `create`, `update` and `next` share.
#[derive(Args, Debug, Default)]
#[command(next_help_heading = "Timing")]
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
    /// A new cron spec (5 fields, a descriptor, optionally CRON_TZ=<zone> first); --schedule
    /// is Velero's name for it.
    #[arg(long, visible_alias = "schedule")]
    pub cron: Option<String>,
    /// The policy rules to change, one flag each; the rules not named stay.
    #[command(flatten)]
    pub rules: PolicyArgs,
    /// Policy keys to change, as JSON (`null` removes a key); the other keys stay. With
    /// --replace-policy, the whole new policy. Merged with the rule flags (a key given twice
    /// is refused).
    #[arg(long)]
    pub policy: Option<String>,
    /// The policy given (--policy and the rule flags) replaces the stored one whole.
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
    pub breaker: Option<sexton_shared::breaker::BreakerSpec>,
    /// Replaces the copy rules, as JSON (`[]` removes them; docs/copies.md):
    /// [{"to": "dr", "policy": {"keep_monthly": 12}, "select": "fulls", "storage_class": "STANDARD_IA"}].
    #[arg(long, value_parser = parse_copies)]
    pub copies: Option<CopyRules>,
    /// Replaces the recovery objectives at primary, as JSON (docs/recovery.md):
    /// {"rpo": "1h", "window": "30d", "tested_within": "7d"}.
    #[arg(long, value_parser = parse_objectives, conflicts_with = "no_objectives")]
    pub objectives: Option<sexton_model::objectives::Objectives>,
    /// Removes the recovery objectives.
    #[arg(long)]
    pub no_objectives: bool,
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
    /// Which backup a test proves: latest, random, oldest_kept, each (each new one once) or
    /// point (a drill: an instant of the window, the log replayed to it).
    #[arg(long, value_parser = ["latest", "random", "oldest_kept", "each", "point"])]
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
    /// --schedule is Velero's name for it.
    #[arg(long, visible_alias = "schedule")]
    pub cron: String,
    /// The retention rules, one flag each (they make one policy).
    #[command(flatten)]
    pub rules: PolicyArgs,
    /// A retention policy as JSON (keys: keep_last, keep_daily, recovery_window, ...), merged
    /// with the rule flags (a key given twice is refused).
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
    /// Which backup a test proves: latest, random, oldest_kept, each (each new one once) or
    /// point (a drill: an instant of the window, the log replayed to it).
    #[arg(long, value_parser = ["latest", "random", "oldest_kept", "each", "point"])]
    pub verify_pick: Option<String>,
    /// How long an executor has to answer a test (1m to 7d; default 1h).
    #[arg(long)]
    pub verify_timeout: Option<String>,
    /// The circuit breaker's settings for this schedule's group, as JSON (see schedule update).
    #[arg(long, value_parser = parse_breaker)]
    pub breaker: Option<sexton_shared::breaker::BreakerSpec>,
    /// Copy rules, as JSON: each completed backup is copied to these locations, each keeping
    /// what its own policy keeps (docs/copies.md):
    /// [{"to": "dr", "policy": {"keep_monthly": 12}}].
    #[arg(long, value_parser = parse_copies)]
    pub copies: Option<CopyRules>,
    /// Recovery objectives at primary, as JSON (docs/recovery.md; a copy rule takes its own):
    /// {"rpo": "1h", "window": "30d", "tested_within": "7d"}.
    #[arg(long, value_parser = parse_objectives)]
    pub objectives: Option<sexton_model::objectives::Objectives>,
    /// Go ahead although the policy deletes backups of the group kept now (shown first).
    #[arg(long)]
    pub yes: bool,
    /// Say what creating it would do to the group's backups; create nothing.
    #[arg(long)]
    pub dry_run: bool,
}
