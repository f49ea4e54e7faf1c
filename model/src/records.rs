//! The records Sexton keeps in its JetStream key-value buckets: schedules and the backup
//! catalog. These are the stored shapes (serde, with a schema version); the retention engine's
//! input is derived from them in [`crate::engine_form`].

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

pub use sexton_retention::{BackupKind, BackupStatus, LogRange, Policy, VerificationState};

use crate::names::{BackupId, ClusterName, LocationName, PlanName, ScheduleName};

/// The one schema version this build writes and reads.
pub const RECORD_SCHEMA_VERSION: u32 = 1;

fn record_schema_version() -> u32 {
    RECORD_SCHEMA_VERSION
}

/// A schedule: what to back up, when, and how long to keep it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScheduleRecord {
    #[serde(default = "record_schema_version")]
    pub schema_version: u32,
    pub name: ScheduleName,
    pub cluster: ClusterName,
    pub plan: PlanName,
    /// The cron text as the user wrote it. Kept as text so a schedule whose spec became
    /// invalid (say, a zone removed from the database) is marked, not dropped.
    pub cron: String,
    #[serde(default)]
    pub paused: bool,
    /// Unset means the server default; consumed and reset to unset when applied.
    #[serde(default)]
    pub skip_immediately: Option<bool>,
    pub policy: Policy,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Whether deleting a record of this schedule also deletes its objects (seed 003: opt-in).
    #[serde(default)]
    pub remote_cleanup: bool,
    /// What to do with a due tick while a backup of this schedule is still in progress.
    #[serde(default)]
    pub overlap_policy: OverlapPolicy,
    /// Kubernetes' `startingDeadlineSeconds`: a missed run older than this is skipped. The API
    /// takes it as `starting_deadline` (a span such as `15m`) or, as before, in seconds.
    #[serde(default)]
    pub starting_deadline_seconds: Option<u64>,
    /// Every run moves by a fixed offset in `[0, jitter)` drawn from the schedule's name, so a
    /// fleet's schedules do not all start at once (issue 19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<sexton_schedule::Span>,
    /// Blackout windows: a run due inside one is skipped or deferred (`on_blackout`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<sexton_schedule::WindowSpec>,
    #[serde(default, skip_serializing_if = "sexton_schedule::OnBlackout::is_skip")]
    pub on_blackout: sexton_schedule::OnBlackout,
    /// Pause the schedule after this many consecutive failed backups (with an incident).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    /// Free-form notes for executors (Kubernetes annotations: label-style keys, any values),
    /// carried on every due-backup; labels, whose values must be Kubernetes label values, are
    /// for selecting.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `full_every: N` (seed 001): a full backup, then N − 1 incrementals, per volume. Unset:
    /// a schedule without volumes takes fulls only (a database base backup), one with volumes
    /// is forever incremental (Trilio's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_every: Option<sexton_retention::FullEvery>,
    /// The volumes the application has now (seed 001's PVs): the due-backup event says, for
    /// each, the kind to take and the parent to build on. A volume added later starts with a
    /// full; one removed is no longer backed up (its artifacts age out with their backups).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// What deleting this schedule does to its backup records (seed 003's
    /// `backupOwnerReference`). Default `none`: they stay.
    #[serde(default)]
    pub backup_owner: BackupOwner,
    /// Scheduled restore tests (issue 13): when, which backup, and how long an executor has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifySpec>,
    /// The circuit breaker's settings for this schedule's group (docs/safety.md); unset: the
    /// server's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<crate::breaker::BreakerSpec>,
    /// Copy rules (issue 28): each completed backup is copied to these locations, each with
    /// its own retention policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<crate::copies::CopyRule>,
    /// Recovery objectives at primary (issue 47): the newest restorable point's age, the
    /// window every instant of which is restorable, how recently a restore test passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objectives: Option<crate::objectives::Objectives>,
    pub created_at: DateTime<Utc>,
    /// Counts the changes of what a manifest declares (Kubernetes' `metadata.generation`): 1
    /// when created, one more for each accepted change of the declared spec. Not moved by
    /// pausing (an operation), nor by the scheduler's own status writes. 0: written before
    /// generations were counted.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub generation: u64,
    #[serde(default)]
    pub status: ScheduleStatus,
}

/// A schedule's restore tests: `verify: {cron, pick, timeout}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VerifySpec {
    /// When to test, in the schedule's cron grammar (robfig's, `CRON_TZ=` allowed).
    pub cron: String,
    #[serde(default)]
    pub pick: VerifyPick,
    /// How long an executor has to answer; the backup is held until then. 1m to 7d,
    /// default 1h.
    #[serde(default)]
    pub timeout: VerifyTimeout,
    /// Test the copies at this location instead of the primary's objects (issue 28): one of
    /// the schedule's copy rules must copy there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<LocationName>,
}

impl VerifySpec {
    /// Checks the cron (it must parse) and the timeout's bounds.
    pub fn validate(&self) -> Result<(), String> {
        sexton_schedule::CronSpec::parse(&self.cron)
            .map_err(|err| format!("verify: invalid cron {:?}: {err}", self.cron))?;
        self.timeout.check()
    }
}

/// Which backup a scheduled restore test proves.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", try_from = "String", into = "String")]
pub enum VerifyPick {
    /// The newest completed backup.
    #[default]
    Latest,
    /// One completed backup, chosen from the tick (the same on every replica).
    Random,
    /// The oldest completed backup: the far end of the recovery window.
    OldestKept,
    /// Each new backup once: the oldest completed backup never tested.
    Each,
    /// A drill (issue 47): an instant among those restorable at the test's place (within the
    /// promised window where one is stated), chosen from the tick; the backup a restore to it
    /// reads is restored and the log archive replayed to the instant.
    Point,
}

impl VerifyPick {
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyPick::Latest => "latest",
            VerifyPick::Random => "random",
            VerifyPick::OldestKept => "oldest_kept",
            VerifyPick::Each => "each",
            VerifyPick::Point => "point",
        }
    }
}

impl TryFrom<String> for VerifyPick {
    type Error = String;

    fn try_from(text: String) -> Result<VerifyPick, String> {
        Ok(match text.as_str() {
            "latest" => VerifyPick::Latest,
            "random" => VerifyPick::Random,
            "oldest_kept" => VerifyPick::OldestKept,
            "each" => VerifyPick::Each,
            "point" => VerifyPick::Point,
            _ => {
                return Err(format!(
                    "verify pick {text:?}: expected latest, random, oldest_kept, each or point"
                ))
            }
        })
    }
}

impl From<VerifyPick> for String {
    fn from(pick: VerifyPick) -> String {
        pick.as_str().to_string()
    }
}

/// How long a restore test may take: `90s`, `30m`, `2h`, `1d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct VerifyTimeout(pub std::time::Duration);

impl Default for VerifyTimeout {
    fn default() -> VerifyTimeout {
        VerifyTimeout(std::time::Duration::from_secs(3600))
    }
}

impl VerifyTimeout {
    const MIN: std::time::Duration = std::time::Duration::from_secs(60);
    const MAX: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

    fn check(&self) -> Result<(), String> {
        if self.0 < Self::MIN || self.0 > Self::MAX {
            return Err(format!(
                "verify timeout {}s: expected 1m to 7d",
                self.0.as_secs()
            ));
        }
        Ok(())
    }

    pub fn as_delta(self) -> chrono::Duration {
        chrono::Duration::from_std(self.0).expect("at most 7 days")
    }
}

impl TryFrom<String> for VerifyTimeout {
    type Error = String;

    fn try_from(text: String) -> Result<VerifyTimeout, String> {
        let timeout = VerifyTimeout(
            crate::duration_text::parse(&text)
                .map_err(|why| format!("verify timeout {text:?}: {why}"))?,
        );
        timeout.check()?;
        Ok(timeout)
    }
}

impl From<VerifyTimeout> for String {
    fn from(timeout: VerifyTimeout) -> String {
        format!("{}s", timeout.0.as_secs())
    }
}

/// Kubernetes' and Velero's overlap handling, reduced to the two policies that keep data safe.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OverlapPolicy {
    /// No new backup while one from this schedule is in progress; the tick is recorded skipped.
    #[default]
    Skip,
    Allow,
}

/// Who owns the backup records a schedule creates (seed 003): what `schedule delete` does to
/// them. Removing a record deletes its objects only with remote cleanup opted in (the
/// schedule's or the backup's `remote_cleanup`), and then through the deleter's pipeline.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase", try_from = "serde_json::Value")]
pub enum BackupOwner {
    /// Removed with the schedule (held, in-progress and still-needed backups excepted).
    Schedule,
    /// Kept until the cluster's records are removed.
    Cluster,
    /// Standalone: kept. The default, because a deleted schedule must not take the recovery
    /// window with it unless the user said so.
    #[default]
    #[serde(rename = "none")]
    Standalone,
}

impl TryFrom<serde_json::Value> for BackupOwner {
    type Error = String;

    fn try_from(value: serde_json::Value) -> Result<BackupOwner, String> {
        match value.as_str() {
            Some("schedule") => Ok(BackupOwner::Schedule),
            Some("cluster") => Ok(BackupOwner::Cluster),
            Some("none") => Ok(BackupOwner::Standalone),
            _ => Err(format!(
                "backup_owner: expected schedule, cluster or none, got {value}"
            )),
        }
    }
}

impl BackupOwner {
    pub fn as_str(self) -> &'static str {
        match self {
            BackupOwner::Schedule => "schedule",
            BackupOwner::Cluster => "cluster",
            BackupOwner::Standalone => "none",
        }
    }
}

/// A backup of a schedule that has started and not yet finished.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InFlight {
    pub backup_id: BackupId,
    pub since: DateTime<Utc>,
    /// The nominal tick it was taken for, when its executor said (the reference executor
    /// does): how the scheduler recognises the firing it has not recorded yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick: Option<DateTime<Utc>>,
}

/// After this long without a completion report, an in-flight backup no longer blocks the
/// schedule: an executor that died must not stop backups forever.
pub const IN_FLIGHT_STALE_AFTER: chrono::Duration = chrono::Duration::hours(24);

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScheduleStatus {
    #[serde(default)]
    pub phase: SchedulePhase,
    #[serde(default)]
    pub last_backup: Option<DateTime<Utc>>,
    #[serde(default)]
    pub last_skipped: Option<DateTime<Utc>>,
    #[serde(default)]
    pub next_run_time: Option<DateTime<Utc>>,
    /// The nominal tick of the last due-backup published; the de-duplication id uses it.
    #[serde(default)]
    pub last_fired_tick: Option<DateTime<Utc>>,
    #[serde(default)]
    pub validation_errors: Vec<String>,
    /// Why the last due tick did not fire, if it did not.
    #[serde(default)]
    pub last_skip_reason: Option<String>,
    /// Set on creation and unpause: skip-immediately is resolved at the next evaluation.
    #[serde(default)]
    pub activation_pending: bool,
    #[serde(default)]
    pub in_flight: Option<InFlight>,
    /// Volumes whose latest upload failed: their next backup is a full (seed 001). Kept here
    /// because the failed backup's record is cleaned up after `failed_grace`, usually before
    /// the next run; cleared by a completed report that took the volume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_volumes: Vec<String>,
    /// The latest backup of a schedule without volumes failed: the next one is a full.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_backup_failed: bool,
    /// The nominal tick of the last restore test asked for (its message id uses it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verify_tick: Option<DateTime<Utc>>,
    /// Failed backups since the last completed one (`pause_after_failures`); reset by a
    /// completed backup and by unpausing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive_failures: u32,
    /// The last failed backup counted, so a report delivered again is not counted twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failed_backup: Option<BackupId>,
    /// Why the scheduler paused the schedule by itself (after `pause_after_failures`); cleared
    /// by unpausing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
    /// A backfill in progress (`sexton schedule backfill`), or the last one, done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<Backfill>,
    /// The generation this status was computed for (Kubernetes' `observedGeneration`): the
    /// scheduler validates a spec and plans its next run in the same write that stores it.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub observed_generation: u64,
    /// When the latest completed backup of this schedule completed (its report's time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_completed: Option<DateTime<Utc>>,
}

impl ScheduleStatus {
    /// What a schedule replacing a deleted one of the same name keeps of that one's status:
    /// when it last backed up, skipped and fired, whether its last backup failed (and which
    /// volumes), and its last restore test's tick. Not its phase, in-flight backup, failure
    /// count or pause reason: the replacement starts those afresh.
    pub fn carry_over(&mut self, previous: &ScheduleStatus) {
        self.last_backup = previous.last_backup;
        self.last_skipped = previous.last_skipped;
        self.last_fired_tick = previous.last_fired_tick;
        self.last_backup_failed = previous.last_backup_failed;
        self.failed_volumes = previous.failed_volumes.clone();
        self.last_verify_tick = previous.last_verify_tick;
        self.last_completed = previous.last_completed;
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// `sexton schedule backfill`: the ticks of a past interval, fired once each (Temporal's
/// backfill). The cursor moves by compare-and-set after each tick's publication, whose message
/// id names the backfill and the tick, so a replica killed in between is followed by one that
/// republishes the same tick as a duplicate and moves the cursor on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Backfill {
    /// Names the backfill in message ids and backup ids: the request's instant in milliseconds.
    pub id: u64,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub overlap: OverlapPolicy,
    pub requested_at: DateTime<Utc>,
    /// The ticks to fire, oldest first (at most `MAX_BACKFILL_TICKS`).
    pub ticks: Vec<DateTime<Utc>>,
    /// How many of `ticks` are done (fired or skipped): the next to fire is `ticks[done]`.
    pub done: usize,
    #[serde(default)]
    pub fired: usize,
    /// With overlap `skip`: the backup the last step fired, until its report arrives (the
    /// next tick waits for it, at most `IN_FLIGHT_STALE_AFTER`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<BackupId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<DateTime<Utc>>,
    /// The last backup of the schedule whose final report arrived while the backfill ran: a
    /// report can beat the step that fired it to the record, and then there is nothing to wait
    /// for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reported: Option<BackupId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

/// The most ticks one backfill fires.
pub const MAX_BACKFILL_TICKS: usize = 1_000;

impl Backfill {
    /// The tick to fire next, unless the backfill is done.
    pub fn next_tick(&self) -> Option<DateTime<Utc>> {
        self.ticks.get(self.done).copied()
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulePhase {
    #[default]
    New,
    Enabled,
    Paused,
    FailedValidation,
}

/// What Sexton keeps per cluster, in the clusters bucket (key = cluster name). A cluster is
/// *known* once a schedule has named it; reports for other clusters are refused.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClusterRecord {
    #[serde(default = "record_schema_version")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub registered_at: DateTime<Utc>,
    /// When the scheduler last requested a retention sweep of this cluster (seed 003's
    /// `lastRetentionRunTime`); the next one is due `retention_sweep_interval` later.
    #[serde(default)]
    pub last_retention_run: Option<DateTime<Utc>>,
    /// When the sweep last asked for this cluster's scrub (catalog against bucket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scrub: Option<DateTime<Utc>>,
}

impl ClusterRecord {
    pub fn new(cluster: ClusterName, now: DateTime<Utc>) -> ClusterRecord {
        ClusterRecord {
            schema_version: RECORD_SCHEMA_VERSION,
            cluster,
            registered_at: now,
            last_retention_run: None,
            last_scrub: None,
        }
    }
}

/// How a cluster's retention runs are going (issue 54), in the retention status bucket
/// (key = cluster): written by the retention-worker after each run, read by `schedule get`
/// and `describe`. A cluster whose runs keep failing, or are held, says so and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RetentionStatus {
    #[serde(default = "record_schema_version")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    /// How the last run ended.
    pub outcome: RetentionOutcome,
    /// When it ended.
    pub at: DateTime<Utc>,
    /// Why a run failed or was held: its error, or the hold's explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Since when the runs have ended this way (the first of them).
    pub since: DateTime<Utc>,
    /// How many runs in a row ended this way.
    pub runs: u64,
    /// When a run last decided the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_decided: Option<DateTime<Utc>>,
}

/// How one retention run of a cluster ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RetentionOutcome {
    /// The run decided the cluster (whatever it decided).
    Decided,
    /// The run failed; it is retried, and the next sweep runs it again.
    Failed,
    /// The run decided nothing on purpose (a bucket the fleet was not given holds some of the
    /// cluster's backups): nothing is deleted or marked until a person acts.
    Held,
}

impl RetentionOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RetentionOutcome::Decided => "decided",
            RetentionOutcome::Failed => "failed",
            RetentionOutcome::Held => "held",
        }
    }
}

impl RetentionStatus {
    /// The status after a run of `cluster` that ended at `at` with `outcome`, given the one
    /// before it: `since` and `runs` carry on while the outcome (and a hold's reason) stays.
    pub fn after(
        previous: Option<&RetentionStatus>,
        cluster: &ClusterName,
        outcome: RetentionOutcome,
        reason: Option<String>,
        at: DateTime<Utc>,
    ) -> RetentionStatus {
        let same = previous.filter(|previous| {
            previous.outcome == outcome
                && (outcome != RetentionOutcome::Held || previous.reason == reason)
        });
        RetentionStatus {
            schema_version: RECORD_SCHEMA_VERSION,
            cluster: cluster.clone(),
            outcome,
            at,
            reason,
            since: same.map_or(at, |previous| previous.since.min(at)),
            runs: same.map_or(1, |previous| previous.runs.saturating_add(1)),
            last_decided: match outcome {
                RetentionOutcome::Decided => Some(at),
                _ => previous.and_then(|previous| previous.last_decided),
            },
        }
    }

    /// Whether this status starts something a person should hear of (a hold that began or
    /// changed its reason): the incident is raised once, not on every run.
    pub fn is_new_hold(&self) -> bool {
        self.outcome == RetentionOutcome::Held && self.runs == 1
    }
}

/// One backup in the catalog.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackupRecord {
    #[serde(default = "record_schema_version")]
    pub schema_version: u32,
    pub id: BackupId,
    /// Unique across re-used ids: a delete job names it, so a job for an old backup of the
    /// same id can never delete a new one.
    pub uid: String,
    pub cluster: ClusterName,
    pub plan: PlanName,
    #[serde(default)]
    pub schedule: Option<ScheduleName>,
    /// The `<backup-name>` path segment of the object keys.
    pub backup_name: String,
    pub kind: BackupKind,
    #[serde(default)]
    pub parent: Option<BackupId>,
    pub status: BackupStatus,
    #[serde(default)]
    pub started_at: Option<DateTime<FixedOffset>>,
    #[serde(default)]
    pub completed_at: Option<DateTime<FixedOffset>>,
    /// The nominal cron tick a scheduled backup was taken for (its id carries the instant it
    /// was asked for, which is later: after downtime, a deferral, jitter, or for a backfill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick: Option<DateTime<Utc>>,
    /// Full object keys; `metadata.json` is deleted after every other artifact.
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// The bytes the backup's objects hold, as its executor reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Each object as Sexton saw it in the bucket when it recorded the backup (intake): its
    /// size there and the SHA-256 the executor reported for it. The scrub compares the bucket
    /// with these; verification recomputes the checksums. Empty on records written before
    /// intake verification existed (the scrub then checks that the objects exist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<crate::wire::ObjectDigest>,
    /// When Sexton last saw every object of the backup in the bucket as recorded (intake, then
    /// each scrub that found them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_at: Option<DateTime<Utc>>,
    /// Per-volume artifacts (seed 001): each volume has its own chain. Empty for a backup with
    /// a single artifact set, such as a database base backup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<sexton_retention::VolumeArtifact>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub legal_hold: bool,
    #[serde(default)]
    pub holds: Vec<String>,
    #[serde(default)]
    pub immutable: bool,
    #[serde(default)]
    pub remote_cleanup: bool,
    #[serde(default)]
    pub delete_requested: bool,
    /// The catalog revision at which retention marked this backup expiring; the delete job
    /// carries the same number.
    #[serde(default)]
    pub expiring_revision: Option<u64>,
    /// Why this backup is being deleted (the retention plan's reasons).
    #[serde(default)]
    pub delete_reasons: Vec<String>,
    /// The hash of the policy whose plan marked it (`audit::policy_hash`), carried to the
    /// deleter's audit entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
    #[serde(default)]
    pub last_error: Option<String>,
    /// The status the backup had before retention (or a user's delete) marked it `expiring`.
    /// The deleter restores it when it recomputes the plan, so that a stale job (the backup is
    /// now kept) is refused. Unknown (written by an older build) counts as `completed`, the
    /// status that makes a plan keep more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_from: Option<BackupStatus>,
    /// A user's `sexton backup delete`, kept on the record so that a deferred request is
    /// carried out later the way it was asked. `delete_requested` is set with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_request: Option<DeleteRequest>,
    /// Delete plugins that failed or timed out while this backup was being deleted. They never
    /// stop the deletion; they are recorded here and in an incident event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugin_errors: Vec<PluginFailure>,
    /// Some volumes of this backup are being deleted while the record and its other volumes
    /// stay (a partial verdict, issue 8): set by the deleter when it claims the job, cleared
    /// when it drops those volumes from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_deletion: Option<VolumeDeletion>,
    /// Restore tests of this backup (issue 13): the state they left, the last verdict, a short
    /// history and the test under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// The locations the schedule's copy rules send this backup to (issue 28), set when it is
    /// recorded completed. While a location here has no copy, the backup is held at its source
    /// ([`crate::copies::awaiting_hold`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copy_to: Vec<crate::names::LocationName>,
    /// The copies at other locations, by location: those that count (`copied`) and those the
    /// location's retention is deleting.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub copies: BTreeMap<crate::names::LocationName, crate::copies::LocationCopy>,
    /// When a deleter removed the backup's objects at primary while copies of it stayed
    /// elsewhere (issue 28): the record stays, for those copies, until the last location's
    /// retention deletes its copy. Such a record is in no retention group at primary, is
    /// never scrubbed, tested or copied from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_deleted_at: Option<DateTime<Utc>>,
    /// Until when the backup's objects at primary are under S3 Object Lock (issue 29): the
    /// latest retain-until date the retention-worker has set on every one of them. Written
    /// only after the store took it, and only ever later: no request of Sexton shortens a
    /// lock. Until then retention keeps the backup (`expired, locked until T`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_until: Option<DateTime<Utc>>,
    /// The first and last binlog (or WAL) segment the backup needs to be consistent, as its
    /// executor reported them (issue 30): what the archive keeps for it when it is restorable
    /// to its own end only (standalone, or past `pitr_full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_range: Option<sexton_retention::LogRange>,
    /// A differential (pgBackRest's `diff`, issue 30): an incremental taken against its
    /// chain's full. Counted by `keep_diff`; everything else reads it as the incremental it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub differential: bool,
    /// The store its objects at primary were written to (issue 54): the fleet's `[s3]` when it
    /// recorded them, or where `sexton catalog migrate` moved them. Absent on records written
    /// before issue 54: they are taken to be where the fleet looks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::keys::StoreRef>,
}

/// What restore tests say of a backup.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Verification {
    /// `verified` once a restore test passed (counts for `keep_verified` and the verified
    /// floor), `failed` once one failed; a timeout changes nothing.
    pub state: VerificationState,
    /// When the state was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Verified as part of the chain another backup's restore replayed (that backup's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<BackupId>,
    /// Earlier verdicts, newest first, at most [`VERIFICATION_HISTORY`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<VerificationEntry>,
    /// A restore test asked for and not answered yet: the backup is held
    /// (`verify:<request_id>`) until its verdict or its deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingVerification>,
}

/// How many verdicts a record keeps.
pub const VERIFICATION_HISTORY: usize = 5;

/// One verdict of a restore test.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerificationEntry {
    pub request_id: String,
    /// `verified`, `failed` or `timeout`.
    pub outcome: String,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<BackupId>,
    /// The location whose copy was tested (issue 28); absent: the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<LocationName>,
    /// A drill (issue 47): the instant the restore replayed the log archive to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

/// A restore test under way.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PendingVerification {
    pub request_id: String,
    pub since: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    /// The location whose copy is under test; absent: the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<LocationName>,
    /// A drill: the instant the restore replays the log archive to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

impl Verification {
    /// The hold a pending restore test puts on its backup.
    pub fn hold(request_id: &str) -> String {
        format!("verify:{request_id}")
    }

    /// Records a verdict: the state (a timeout leaves it), the history, the pending test
    /// answered.
    pub fn record(&mut self, entry: VerificationEntry) {
        // A test of a copy elsewhere proves (or fails) that copy, not the primary's objects:
        // it goes into the history and onto the copy, and leaves the backup's state alone.
        let state = match entry.outcome.as_str() {
            _ if entry.location.is_some() => None,
            "verified" => Some(VerificationState::Verified),
            "failed" => Some(VerificationState::Failed),
            _ => None,
        };
        if let Some(state) = state {
            self.state = state;
            self.at = Some(entry.at);
            self.reason = entry.reason.clone();
            self.duration_ms = entry.duration_ms;
            self.via = entry.via.clone();
        }
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.request_id == entry.request_id)
        {
            self.pending = None;
        }
        self.history.insert(0, entry);
        self.history.truncate(VERIFICATION_HISTORY);
    }
}

/// A claimed partial deletion: the job's revision (a redelivery of that job resumes it) and
/// the volumes it removes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VolumeDeletion {
    pub revision: u64,
    pub volumes: Vec<String>,
}

/// A user's request to delete a backup (`sexton backup delete`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeleteRequest {
    pub requested_at: DateTime<Utc>,
    /// Remove the objects too (`--remote`, or `remote_cleanup` on the backup, its schedule or
    /// its cluster/plan's schedules); otherwise only the catalog record goes (seed 003).
    pub remote: bool,
    /// `--force`: delete even the newest full backup or one a kept backup depends on. Never
    /// overrides a legal hold, a hold, or a backup in progress.
    #[serde(default)]
    pub force: bool,
}

/// One failed delete-plugin call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PluginFailure {
    pub plugin: String,
    pub error: String,
    pub at: DateTime<Utc>,
}

impl BackupRecord {
    /// The record's holds and one per location a copy rule still has to copy it to: the
    /// source never deletes what a copy still needs (issue 28).
    pub fn holds_with_copies(&self) -> Vec<String> {
        let mut holds = self.holds.clone();
        holds.extend(self.awaiting_copy().map(crate::copies::awaiting_hold));
        holds
    }

    /// Keeps the delete job of a mark at primary valid across a write that is not about that
    /// mark (a copy landing, a location's own mark or deletion of its copy): the job names the
    /// revision the mark was written at, and without this any later write of the record would
    /// make it stale. Called on the record about to be written, with the revision it was read
    /// at; the first such write after the mark records that revision as the mark's.
    pub fn keep_mark(&mut self, read_revision: u64) {
        if self.status == BackupStatus::Expiring && self.expiring_revision.is_none() {
            self.expiring_revision = Some(read_revision);
        }
    }

    /// The revision the delete job of this record's `expiring` mark carries, the record being
    /// at `revision`: the mark's own, as [`BackupRecord::keep_mark`] kept it, else `revision`
    /// (nothing has written the record since the mark).
    pub fn mark_revision(&self, revision: u64) -> u64 {
        self.expiring_revision.unwrap_or(revision)
    }

    /// Whether this backup itself can be restored at `location` (`None`: primary), judged by
    /// what that place holds, never by what another place did (issue 47): at primary, the
    /// record is `completed` and its objects are still there; at another location, its copy
    /// there counts (`copied`), whatever the status at primary (`deleting` once primary's
    /// retention took it, `missing` once a scrub found primary's objects gone). `Err` says why
    /// not, naming the places that do hold it. Its chain's other links are judged alike by
    /// the caller.
    pub fn restorable_at(
        &self,
        location: Option<&crate::names::LocationName>,
    ) -> Result<(), String> {
        let elsewhere = |except: Option<&str>| self.held_at_text(except);
        match location.filter(|name| !name.is_primary()) {
            Some(name) => match self.copies.get(name) {
                Some(copy) if copy.state == crate::copies::CopyState::Copied => Ok(()),
                Some(copy) => Err(format!(
                    "backup {} has no copy at {name} that counts ({}){}",
                    self.id,
                    copy.state.as_str(),
                    elsewhere(Some(name.as_str()))
                )),
                None => Err(format!(
                    "backup {} has no copy at {name} (never copied there){}",
                    self.id,
                    elsewhere(None)
                )),
            },
            None if !self.held_at_primary() => Err(format!(
                "backup {} is no longer at primary{}",
                self.id,
                elsewhere(None)
            )),
            None if self.status != BackupStatus::Completed => Err(format!(
                "backup {} is {} at primary: only a completed backup can be restored there{}",
                self.id,
                self.status.as_str(),
                elsewhere(None)
            )),
            None => Ok(()),
        }
    }

    /// Where else a restore could read this backup, as refusals say it: `; it is held at dr,
    /// vault (name one as the location)` for the locations whose copy counts (but `except`),
    /// empty when none does.
    pub fn held_at_text(&self, except: Option<&str>) -> String {
        let held: Vec<&str> = self
            .copies
            .iter()
            .filter(|(_, copy)| copy.state == crate::copies::CopyState::Copied)
            .map(|(name, _)| name.as_str())
            .filter(|name| Some(*name) != except)
            .collect();
        if held.is_empty() {
            String::new()
        } else {
            format!(
                "; it is held at {} (name one as the location)",
                held.join(", ")
            )
        }
    }

    /// Whether the backup's objects are still at primary (its source): the records a retention
    /// group at primary plans over, and that a scrub, a restore test or a copy reads from.
    pub fn held_at_primary(&self) -> bool {
        self.primary_deleted_at.is_none()
    }

    /// Whether any location other than primary holds a copy (in any state but `deleted`): the
    /// record must stay while one does.
    pub fn held_elsewhere(&self) -> bool {
        self.copies
            .values()
            .any(crate::copies::LocationCopy::is_held)
    }

    /// The status as a person reads it: `copies-only` once the objects at primary are gone and
    /// only copies elsewhere remain.
    pub fn status_text(&self) -> &'static str {
        if self.held_at_primary() {
            self.status.as_str()
        } else {
            "copies-only"
        }
    }

    /// The locations a copy rule sends this backup to that hold no copy of it yet.
    pub fn awaiting_copy(&self) -> impl Iterator<Item = &crate::names::LocationName> {
        // A copy a scrub found missing there is awaited again: the source keeps the backup
        // until the copier has copied it again.
        self.copy_to.iter().filter(|location| {
            self.copies
                .get(*location)
                .is_none_or(|copy| copy.state == crate::copies::CopyState::Missing)
        })
    }

    /// The object keys of the named volumes.
    pub fn volume_keys(&self, volumes: &[String]) -> Vec<String> {
        self.volumes
            .iter()
            .filter(|v| volumes.contains(&v.name))
            .flat_map(|v| v.keys.iter().cloned())
            .collect()
    }

    /// Every object of the backup, possibly twice (artifacts usually list the volumes' keys).
    pub fn all_keys_iter(&self) -> impl Iterator<Item = &str> {
        self.artifacts
            .iter()
            .chain(self.volumes.iter().flat_map(|v| &v.keys))
            .map(String::as_str)
    }

    /// Every object of the backup: its artifacts and its volumes' keys, once each.
    pub fn all_keys(&self) -> Vec<String> {
        let mut keys = self.artifacts.clone();
        for key in self.volumes.iter().flat_map(|v| &v.keys) {
            if !keys.contains(key) {
                keys.push(key.clone());
            }
        }
        keys
    }

    /// A full backup for the floor and the binlog horizon, as the engine counts it: a full, or
    /// any backup with volumes (each volume has its own chain; issue 8).
    pub fn counts_as_full(&self) -> bool {
        self.kind == BackupKind::Full || !self.volumes.is_empty()
    }

    /// The store this record's objects at primary are in, when it is not `here` (the store the
    /// fleet is given): a record that names none is taken to be here (written before records
    /// named their store), and one whose objects at primary are gone is nowhere.
    pub fn stranded_from(&self, here: &crate::keys::StoreRef) -> Option<&crate::keys::StoreRef> {
        self.store
            .as_ref()
            .filter(|store| self.held_at_primary() && !store.same_place(here))
    }

    /// The store this record's copy at `location` is in, when it is not `here` (the store the
    /// location's settings name): a copy that names none is taken to be there, one the
    /// location no longer holds is nowhere.
    pub fn copy_stranded_from(
        &self,
        location: &crate::names::LocationName,
        here: &crate::keys::StoreRef,
    ) -> Option<&crate::keys::StoreRef> {
        let copy = self.copies.get(location).filter(|copy| copy.is_held())?;
        copy.store.as_ref().filter(|store| !store.same_place(here))
    }

    /// The store of its objects at `place` (`None`: primary) when it is not `here`.
    pub fn stranded_at(
        &self,
        place: Option<&crate::names::LocationName>,
        here: &crate::keys::StoreRef,
    ) -> Option<&crate::keys::StoreRef> {
        match place {
            None => self.stranded_from(here),
            Some(location) => self.copy_stranded_from(location, here),
        }
    }

    /// The key `metadata.json` sits at, if the backup has one.
    pub fn is_metadata_key(key: &str) -> bool {
        key.rsplit('/').next() == Some("metadata.json")
    }
}

/// The catalog's volumes from a report's (or a `metadata.json`'s): the kind the executor took,
/// which may be a full where an incremental was asked for (a lost snapshot), so a full has no
/// parent whatever the entry says.
pub fn volume_artifacts(
    volumes: &[crate::wire::ReportVolume],
) -> Vec<sexton_retention::VolumeArtifact> {
    volumes
        .iter()
        .map(|volume| sexton_retention::VolumeArtifact {
            name: volume.name.clone(),
            kind: volume.kind,
            parent: match volume.kind {
                BackupKind::Full => None,
                BackupKind::Incremental => volume.parent.as_ref().map(|p| p.to_string()),
            },
            keys: volume.keys.clone(),
            failed: volume.failed,
            expiring: false,
            size_bytes: volume.size_bytes,
        })
        .collect()
}

/// The copy rule of `schedules` that sends `record` to `location`: its schedule's rule there,
/// if the schedule still has one.
pub fn rule_for<'a>(
    schedules: &'a [ScheduleRecord],
    record: &BackupRecord,
    location: &crate::names::LocationName,
) -> Option<&'a crate::copies::CopyRule> {
    let name = record.schedule.as_ref()?;
    schedules
        .iter()
        .find(|schedule| schedule.cluster == record.cluster && schedule.name == *name)?
        .copies
        .iter()
        .find(|rule| rule.to == *location)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_status_counts_runs_that_end_alike_and_starts_over_on_a_change() {
        let cluster = ClusterName::new("c1").unwrap();
        let t = |s: i64| DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap();
        let failed = |previous: Option<&RetentionStatus>, s, why: &str| {
            RetentionStatus::after(
                previous,
                &cluster,
                RetentionOutcome::Failed,
                Some(why.into()),
                t(s),
            )
        };
        let decided = RetentionStatus::after(None, &cluster, RetentionOutcome::Decided, None, t(0));
        assert_eq!(
            (decided.runs, decided.since, decided.last_decided),
            (1, t(0), Some(t(0)))
        );
        let first = failed(Some(&decided), 10, "a");
        let second = failed(Some(&first), 20, "b");
        assert_eq!((second.runs, second.since), (2, t(10)));
        assert_eq!(second.reason.as_deref(), Some("b"));
        assert_eq!(
            second.last_decided,
            Some(t(0)),
            "a failure keeps the last decided run"
        );
        let again = RetentionStatus::after(
            Some(&second),
            &cluster,
            RetentionOutcome::Decided,
            None,
            t(30),
        );
        assert_eq!((again.runs, again.since), (1, t(30)));
        // A hold is new when it begins and when its reason changes, not on every run.
        let hold = |previous: Option<&RetentionStatus>, s, why: &str| {
            RetentionStatus::after(
                previous,
                &cluster,
                RetentionOutcome::Held,
                Some(why.into()),
                t(s),
            )
        };
        let held = hold(Some(&again), 40, "bucket a");
        assert!(held.is_new_hold());
        let still = hold(Some(&held), 50, "bucket a");
        assert!(!still.is_new_hold());
        assert_eq!(still.since, t(40));
        assert!(hold(Some(&still), 60, "bucket b").is_new_hold());
        assert!(!second.is_new_hold());
        // Read back as written; an unknown outcome is refused, not guessed.
        let text = serde_json::to_string(&still).unwrap();
        assert!(text.contains(r#""outcome":"held""#), "{text}");
        assert_eq!(
            serde_json::from_str::<RetentionStatus>(&text).unwrap(),
            still
        );
        let bad = text.replace(r#""held""#, r#""paused""#);
        assert!(serde_json::from_str::<RetentionStatus>(&bad).is_err());
    }

    #[test]
    fn metadata_key_is_recognised_by_its_last_segment() {
        assert!(BackupRecord::is_metadata_key("p/c/n/id/metadata.json"));
        assert!(!BackupRecord::is_metadata_key("p/c/n/id/metadata.json.bak"));
        assert!(!BackupRecord::is_metadata_key("p/c/n/id/backup.xbstream"));
    }
}
