//! The requests of `schedule.*` (and the list filter `backup.list` shares): what a user writes
//! to create, change, pause, backfill and delete a schedule.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_retention::FullEvery;
use sexton_schedule::{OnBlackout, Span, WindowSpec};

use super::{present, v1};
use crate::checks::{
    validate_annotations, validate_deadline, validate_deadline_spellings, validate_labels,
    validate_pause_after_failures, validate_volumes,
};
use crate::names::{ClusterName, PlanName, ScheduleName};
use crate::records::{BackupOwner, OverlapPolicy, Policy, ScheduleRecord, MAX_BACKFILL_TICKS};
use crate::wire::Message;

/// `schedule.create`: a new schedule as the user writes it. Unknown fields are refused, so a
/// misspelt option is an error rather than a silently ignored setting.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    pub cluster: ClusterName,
    pub plan: PlanName,
    pub cron: String,
    #[serde(default)]
    pub paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_immediately: Option<bool>,
    pub policy: Policy,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub remote_cleanup: bool,
    #[serde(default)]
    pub overlap_policy: OverlapPolicy,
    /// The old spelling of `starting_deadline`, in seconds; still accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<u64>,
    /// Skip a missed run older than this (`15m`, `2h`, or seconds) instead of firing it late.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline: Option<Span>,
    /// A full backup, then N − 1 incrementals (a positive whole number, or a numeric string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_every: Option<FullEvery>,
    /// The application's volumes, each with its own chain (seed 001).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// What deleting the schedule does to its backup records (default `none`: they stay).
    #[serde(default)]
    pub backup_owner: BackupOwner,
    /// Scheduled restore tests (issue 13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<crate::records::VerifySpec>,
    /// Every run moves by a fixed offset in `[0, jitter)` drawn from the schedule's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Span>,
    /// Blackout windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<WindowSpec>,
    /// What a run due inside a blackout window does: `skip` (default) or `defer`.
    #[serde(default)]
    pub on_blackout: OnBlackout,
    /// Pause the schedule after this many consecutive failed backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_after_failures: Option<u32>,
    /// Free-form notes for executors, carried on every due-backup.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// The circuit breaker's settings for the schedule's group (docs/safety.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<crate::breaker::BreakerSpec>,
    /// Copy rules: the locations each completed backup is copied to, each with its own
    /// retention policy (issue 28; docs/copies.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<crate::copies::CopyRule>,
    /// Recovery objectives at primary (issue 47; docs/recovery.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objectives: Option<crate::objectives::Objectives>,
    /// Create it even though its policy deletes backups of the group at once (the reply of a
    /// request without it says which, and nothing is created).
    #[serde(default)]
    pub confirm: bool,
    /// Say what creating it would do (the policy's effect on the group now); create nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// The annotation naming who manages a schedule: `sexton apply` sets it on what it creates
/// or changes, and prunes only what carries it (issue 31, docs/gitops.md).
pub const MANAGED_BY: &str = "sexton.io/managed-by";
/// The field manager `sexton apply` writes into [`MANAGED_BY`].
pub const MANAGER: &str = "sexton-apply";
/// The annotation holding the digest of the spec `sexton apply` last applied
/// ([`ScheduleSpec::applied_digest`]): a live spec that no longer has it was changed since by
/// other means (drift).
pub const LAST_APPLIED: &str = "sexton.io/last-applied";

impl ScheduleSpec {
    /// A live schedule as the spec that would create it as it is.
    pub fn of_record(record: &ScheduleRecord) -> ScheduleSpec {
        ScheduleSpec {
            schema_version: crate::wire::SCHEMA_VERSION,
            name: record.name.clone(),
            cluster: record.cluster.clone(),
            plan: record.plan.clone(),
            cron: record.cron.clone(),
            paused: record.paused,
            skip_immediately: None,
            policy: record.policy.clone(),
            labels: record.labels.clone(),
            remote_cleanup: record.remote_cleanup,
            overlap_policy: record.overlap_policy,
            starting_deadline_seconds: record.starting_deadline_seconds,
            starting_deadline: None,
            full_every: record.full_every,
            volumes: record.volumes.clone(),
            backup_owner: record.backup_owner,
            verify: record.verify.clone(),
            jitter: record.jitter,
            exclude: record.exclude.clone(),
            on_blackout: record.on_blackout,
            pause_after_failures: record.pause_after_failures,
            annotations: record.annotations.clone(),
            breaker: record.breaker.clone(),
            copies: record.copies.clone(),
            objectives: record.objectives.clone(),
            confirm: false,
            dry_run: false,
        }
    }

    /// The spec in one form whatever its spelling: the deadline as a span, no request
    /// switches, no one-shot `skip_immediately`; as JSON.
    pub fn canonical(&self) -> serde_json::Value {
        let mut spec = self.clone();
        spec.starting_deadline = spec.starting_deadline.or_else(|| {
            spec.starting_deadline_seconds
                .and_then(|seconds| Span::from_seconds(seconds).ok())
        });
        spec.starting_deadline_seconds = None;
        spec.skip_immediately = None;
        let mut value = serde_json::to_value(&spec).expect("a schedule serialises");
        if let serde_json::Value::Object(map) = &mut value {
            for key in ["schema_version", "confirm", "dry_run"] {
                map.remove(key);
            }
        }
        value
    }

    /// What `sexton apply` compares, and drift is judged on: [`ScheduleSpec::canonical`]
    /// without `paused` (pausing is an operation: a person's, or `pause_after_failures`'s)
    /// and without apply's own annotations.
    pub fn compared(&self) -> serde_json::Value {
        let mut value = self.canonical();
        if let serde_json::Value::Object(map) = &mut value {
            map.remove("paused");
        }
        without_apply_annotations(&mut value);
        value
    }

    /// The digest of [`ScheduleSpec::compared`] (`sha256:<hex>`): what apply writes into
    /// [`LAST_APPLIED`].
    pub fn applied_digest(&self) -> String {
        let text = serde_json::to_string(&self.compared()).expect("a schedule serialises");
        format!("sha256:{}", crate::digest::sha256_hex(text.as_bytes()))
    }

    /// The starting deadline in seconds, from either spelling.
    pub fn deadline_seconds(&self) -> Option<u64> {
        self.starting_deadline
            .map(Span::seconds)
            .or(self.starting_deadline_seconds)
    }
}

impl Message for ScheduleSpec {
    const KIND: &'static str = "schedule";

    fn validate(&self) -> Result<(), String> {
        // A backup id is `<schedule>-<14 digits>` (a backfill's adds `-backfill-<14 digits>`),
        // and ids stay within 128 characters.
        if self.name.as_str().len() > 63 {
            return Err("schedule name is longer than 63 characters".into());
        }
        validate_deadline_spellings(self.starting_deadline, self.starting_deadline_seconds)?;
        validate_deadline(self.deadline_seconds())?;
        validate_pause_after_failures(self.pause_after_failures)?;
        validate_volumes(&self.volumes)?;
        if let Some(verify) = &self.verify {
            verify.validate()?;
        }
        validate_objectives(self.objectives.as_ref(), &self.copies)?;
        validate_labels(&self.labels)?;
        validate_annotations(&self.annotations)
    }
}

/// `schedule.get`, `schedule.describe`, `schedule.delete`, `schedule.pause`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ByName {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
}

impl Message for ByName {
    const KIND: &'static str = "request";
}

/// `schedule.update`: the fields to change; absent fields stay as they are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleUpdate {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_cleanup: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap_policy: Option<OverlapPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<u64>,
    /// Absent: unchanged; `null`: off again (fulls only without volumes, forever incremental
    /// with them); a number: the new cadence.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub full_every: Option<Option<FullEvery>>,
    /// Replaces the volume list: a volume added starts with a full at the next backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_owner: Option<BackupOwner>,
    /// Absent: unchanged; `null`: no deadline; a span (`15m`) or seconds: the new deadline.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub starting_deadline: Option<Option<Span>>,
    /// Absent: unchanged; `null`: no jitter; a span: the new jitter.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub jitter: Option<Option<Span>>,
    /// Replaces the blackout windows (`[]` removes them all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<WindowSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_blackout: Option<OnBlackout>,
    /// Absent: unchanged; `null`: never pause on failures; a number: the new threshold.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub pause_after_failures: Option<Option<u32>>,
    /// Replaces the annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Absent: unchanged; `null`: no restore tests any more; an object: the new tests.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub verify: Option<Option<crate::records::VerifySpec>>,
    /// Absent: unchanged; `null`: no objectives any more; an object: the new ones.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub objectives: Option<Option<crate::objectives::Objectives>>,
    /// Policy keys to change, merged into the stored policy (`null` removes a key): what
    /// `sexton schedule update --keep-last 5` sends, so the other rules stay. `policy`
    /// replaces the whole policy instead; giving both is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_patch: Option<serde_json::Map<String, serde_json::Value>>,
    /// Absent: unchanged; `null`: the server's defaults; an object: the new settings.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub breaker: Option<Option<crate::breaker::BreakerSpec>>,
    /// Replaces the copy rules (`[]` removes them). Backups recorded before keep the locations
    /// they were to be copied to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<Vec<crate::copies::CopyRule>>,
    /// Apply a policy change even though it deletes backups at once (the reply of a request
    /// without it says which, and nothing changes).
    #[serde(default)]
    pub confirm: bool,
    /// Say what the change would do (the policy's diff and what it deletes now); change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// `schedule.backfill` (`sexton schedule backfill NAME --from T --to T [--overlap skip|allow]`):
/// fire the schedule's ticks in `[from, to)` once each, now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBackfill {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// `skip`: no two backups of the schedule run at once, so each tick waits for the one
    /// before to report; `allow`: all at once. Default: the schedule's overlap policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<OverlapPolicy>,
}

impl Message for ScheduleBackfill {
    const KIND: &'static str = "request";

    fn validate(&self) -> Result<(), String> {
        if self.from >= self.to {
            return Err(format!(
                "backfill from {} is not before to {}",
                self.from.to_rfc3339(),
                self.to.to_rfc3339()
            ));
        }
        Ok(())
    }
}

/// The most ticks a backfill fires, for messages.
pub const BACKFILL_TICK_LIMIT: usize = MAX_BACKFILL_TICKS;

/// `schedule.delete`. With `dry_run` the reply says what deleting would do to the schedule's
/// backup records, and nothing is written.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDelete {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    #[serde(default)]
    pub dry_run: bool,
}

impl Message for ScheduleDelete {
    const KIND: &'static str = "request";
}

/// A backup record a deletion keeps, and why (`schedule.delete`, `cluster.forget`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KeptRecord {
    pub id: String,
    pub reason: String,
}

/// `schedule.delete`'s answer, and its dry run's: what becomes of the schedule's backup
/// records, counted, and in words (`summary`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScheduleDeleted {
    pub schedule: ScheduleName,
    pub deleted: bool,
    pub dry_run: bool,
    pub backup_owner: BackupOwner,
    pub remote_cleanup: bool,
    /// How many records the schedule has.
    pub records: usize,
    /// Records removed from the catalog, their objects kept.
    pub remove_records: usize,
    /// Records deleted with their objects, through the deleter.
    pub delete_with_objects: usize,
    pub already_deleting: usize,
    pub keep: Vec<KeptRecord>,
    pub summary: String,
}

/// A schedule as every schedule verb answers with it (`schedule.describe`, `get`, each row of
/// `list`, and `create`, `update`, `pause`, `unpause` with their notes beside it): the record as
/// stored, at `revision`, what it does now and why, its timing, and why the last due tick did
/// not fire.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScheduleDescription {
    pub schedule: ScheduleRecord,
    pub revision: u64,
    /// `sexton_schedule::Explanation` as it serialises: what happens now, and why.
    pub explain: serde_json::Value,
    pub timing: TimingView,
    /// `None` (`null`) when the last due tick fired.
    pub last_skip: Option<LastSkip>,
    /// How the cluster's retention runs are going (issue 54): absent before its first run,
    /// and in the answers of verbs that change the schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<crate::records::RetentionStatus>,
}

/// A schedule's timing: in words, with its next runs; or why it does not parse.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum TimingView {
    Parsed {
        /// The cron's time zone (`UTC` without `CRON_TZ`).
        zone: String,
        /// The spec the runs follow: for `@daily-random` and the like, the one drawn from the
        /// schedule's name.
        cron: String,
        jitter: Option<Span>,
        offset_seconds: i64,
        on_blackout: OnBlackout,
        /// The timing in words, one setting a line (`label: text`).
        settings: Vec<String>,
        /// The next runs, `sexton_schedule::PlannedRun` as it serialises.
        upcoming: serde_json::Value,
    },
    Error {
        error: String,
    },
}

/// Why the last due tick of a schedule did not fire.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LastSkip {
    pub at: DateTime<Utc>,
    /// The scheduler's code: `skip_immediately`, `in_flight`, `starting_deadline_exceeded`,
    /// `blackout`.
    pub reason: String,
    /// The same in a sentence.
    pub explanation: String,
}

/// What the answers of `schedule.create` and `schedule.update` say besides the schedule: whether
/// it was a dry run, what the policy does to the group's backups now, and warnings about what
/// the spec means.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScheduleChangeNotes {
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub policy_change: Option<crate::policy_change::PolicyEffect>,
    /// What a change of the copy rules does to the copies at each location it touches (issue
    /// 28), by location.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub copy_changes: BTreeMap<crate::names::LocationName, crate::policy_change::PolicyEffect>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

impl Message for ScheduleUpdate {
    const KIND: &'static str = "schedule update";

    fn validate(&self) -> Result<(), String> {
        validate_labels(self.labels.iter().flatten())?;
        validate_annotations(self.annotations.iter().flatten())?;
        validate_volumes(self.volumes.iter().flatten())?;
        if let Some(Some(verify)) = &self.verify {
            verify.validate()?;
        }
        validate_objectives(
            self.objectives.as_ref().and_then(Option::as_ref),
            self.copies.iter().flatten(),
        )?;
        if let Some(Some(_)) = self.starting_deadline {
            validate_deadline_spellings(
                self.starting_deadline.flatten(),
                self.starting_deadline_seconds,
            )?;
        }
        validate_deadline(self.starting_deadline.flatten().map(Span::seconds))?;
        validate_deadline(self.starting_deadline_seconds)?;
        if self.policy.is_some() && self.policy_patch.is_some() {
            return Err(
                "give policy (a replacement) or policy_patch (keys to change), not both".into(),
            );
        }
        validate_pause_after_failures(self.pause_after_failures.flatten())
    }
}

/// `schedule.unpause`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Unpause {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub name: ScheduleName,
    /// Overrides the schedule's own value and the server default for this unpause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_immediately: Option<bool>,
}

impl Message for Unpause {
    const KIND: &'static str = "request";
}

/// `schedule.list`, `backup.list`. The default lists everything.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ListFilter {
    #[serde(default = "v1")]
    pub schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanName>,
    /// Only the backups of this id, whatever their cluster (`backup.list`): how the CLI finds
    /// the cluster of a backup named without one (issue 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<crate::names::BackupId>,
}

impl Default for ListFilter {
    fn default() -> ListFilter {
        ListFilter {
            schema_version: v1(),
            cluster: None,
            plan: None,
            id: None,
        }
    }
}

impl Message for ListFilter {
    const KIND: &'static str = "request";
}

/// Removes apply's own annotations ([`MANAGED_BY`], [`LAST_APPLIED`]) from a spec's (or a
/// manifest's metadata's) `annotations`, and the annotations when that leaves none.
pub fn without_apply_annotations(value: &mut serde_json::Value) {
    let serde_json::Value::Object(map) = value else {
        return;
    };
    let empty = match map.get_mut("annotations") {
        Some(serde_json::Value::Object(annotations)) => {
            annotations.remove(MANAGED_BY);
            annotations.remove(LAST_APPLIED);
            annotations.is_empty()
        }
        _ => false,
    };
    if empty {
        map.remove("annotations");
    }
}

/// Whether a live schedule drifted from what `sexton apply` last applied to it: `None` when
/// apply never did (no [`LAST_APPLIED`]), else whether its spec now differs.
pub fn drifted(record: &ScheduleRecord) -> Option<bool> {
    let applied = record.annotations.get(LAST_APPLIED)?;
    Some(*applied != ScheduleSpec::of_record(record).applied_digest())
}

/// Each objectives block states something (the schedule's and each copy rule's).
fn validate_objectives<'a>(
    objectives: Option<&crate::objectives::Objectives>,
    copies: impl IntoIterator<Item = &'a crate::copies::CopyRule>,
) -> Result<(), String> {
    if let Some(objectives) = objectives {
        objectives.validate()?;
    }
    for rule in copies {
        if let Some(objectives) = &rule.objectives {
            objectives
                .validate()
                .map_err(|why| format!("copies: {}: {why}", rule.to))?;
        }
    }
    Ok(())
}
