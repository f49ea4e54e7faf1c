//! Copies of backups at other locations (issue 28): the copy rules a schedule carries, what a
//! backup record keeps of each copy, and the copy job the copier takes.
//!
//! A copy keeps the source's object keys below the destination's prefix and the source's
//! times: a backup is the instant it captured, wherever it lives (AWS Backup's copies do the
//! same, and count their expiry from the source's creation date).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sexton_retention::{BackupKind, KeepCount, Policy};

use crate::names::{BackupId, ClusterName, LocationName};
use crate::wire::{v1, Message, ObjectDigest};

/// The most copy rules one schedule may have.
pub const MAX_COPY_RULES: usize = 8;

/// The longest a copy rule may delay its copies: each backup waits that long at its source.
pub const MAX_COPY_DELAY_DAYS: u64 = 366;

/// One copy rule of a schedule: `copies: [{to: dr, policy: {keep_monthly: 12}}]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CopyRule {
    /// The destination: a location of the configuration, never `primary`.
    pub to: LocationName,
    /// What the destination keeps of the copies it holds, judged over them alone.
    pub policy: Policy,
    /// Which backups are copied: `all` (default), `fulls`, or `kept` (only those the rule's
    /// policy would keep at the location when the copy is due).
    #[serde(default, skip_serializing_if = "CopySelect::is_all")]
    pub select: CopySelect,
    /// How long after a backup completes its copy is made (`1d`, `36h`): the backup awaits
    /// its copy at the source meanwhile. With `select: kept`, the wait lets the backups that
    /// follow show which ones the location's policy keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<sexton_schedule::Span>,
    /// The storage class the copies are written in; unset: the location's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// Moves to colder classes as copies age (`[{after_days: 30, storage_class:
    /// "GLACIER_IR"}]`), counted from the backup's own time, in increasing order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<Transition>,
    /// Recovery objectives at the location (issue 47), checked over the copies there alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objectives: Option<crate::objectives::Objectives>,
}

/// A copy the location's plan deletes before its storage class's minimum duration has passed:
/// the store charges the rest of that minimum anyway (`retention preview --location`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EarlyDeletion {
    pub id: String,
    pub storage_class: String,
    /// Whole days the copy has been in its class (since it was copied, or last moved).
    pub days_in_class: u32,
    pub minimum_days: u32,
    /// Bytes of the copy: charged `minimum_days - days_in_class` more days.
    pub bytes: u64,
}

impl EarlyDeletion {
    /// Days charged for nothing.
    pub fn days_charged(&self) -> u32 {
        self.minimum_days.saturating_sub(self.days_in_class)
    }
}

/// What deleting `copy` (of backup `id`) at `now` costs beyond what was stored, if anything:
/// its class (`default_class` when the copy names none, the location's) has a minimum duration
/// it has not reached.
pub fn early_deletion(
    id: &str,
    copy: &LocationCopy,
    default_class: Option<&str>,
    now: DateTime<Utc>,
) -> Option<EarlyDeletion> {
    let name = copy.storage_class.as_deref().or(default_class)?;
    let class = storage_class(name).ok()?;
    let since = copy.transitioned_at.unwrap_or(copy.copied_at);
    let days = u32::try_from((now - since).num_days().max(0)).unwrap_or(u32::MAX);
    (days < class.minimum_days).then(|| EarlyDeletion {
        id: id.to_string(),
        storage_class: class.name.to_string(),
        days_in_class: days,
        minimum_days: class.minimum_days,
        bytes: copy.objects.iter().map(|object| object.size).sum(),
    })
}

/// The most transitions one copy rule may have.
pub const MAX_TRANSITIONS: usize = 4;

/// One step of a copy rule's storage-class lifecycle: once a backup is `after_days` old, its
/// copy moves to `storage_class` (S3 lifecycle's `Transition`, done by the copier).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Transition {
    pub after_days: u32,
    pub storage_class: String,
}

/// Which backups a copy rule copies.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CopySelect {
    /// Every completed backup, incrementals after their parents.
    #[default]
    All,
    /// Full backups only (a backup with volumes is not one: its volumes may be incrementals):
    /// what an archive class that cannot serve a chain's reads takes.
    Fulls,
    /// Every completed backup the rule's policy would keep at the location when its copy is
    /// due: the location's copies, with every backup still awaiting a copy there counted as
    /// copied, judged by the policy now. What it would delete at once is never copied (the
    /// copy is recorded `skipped`, with the policy's reasons).
    Kept,
}

impl CopySelect {
    fn is_all(&self) -> bool {
        *self == CopySelect::All
    }

    /// Whether a completed backup of this kind is copied.
    pub fn picks(self, kind: BackupKind, has_volumes: bool) -> bool {
        match self {
            CopySelect::All | CopySelect::Kept => true,
            CopySelect::Fulls => kind == BackupKind::Full && !has_volumes,
        }
    }
}

/// An S3 storage class Sexton knows: its name and the minimum storage duration the provider
/// charges for (deleting earlier costs the rest of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageClass {
    pub name: &'static str,
    pub minimum_days: u32,
    /// An object in it must be restored before it can be read (Glacier Flexible Retrieval,
    /// Deep Archive): no chain's incrementals, no restore test without a restore.
    pub needs_restore: bool,
}

/// The classes of AWS S3 (the names other stores accept too), with their minimum durations.
pub const STORAGE_CLASSES: &[StorageClass] = &[
    StorageClass {
        name: "STANDARD",
        minimum_days: 0,
        needs_restore: false,
    },
    StorageClass {
        name: "INTELLIGENT_TIERING",
        minimum_days: 0,
        needs_restore: false,
    },
    StorageClass {
        name: "STANDARD_IA",
        minimum_days: 30,
        needs_restore: false,
    },
    StorageClass {
        name: "ONEZONE_IA",
        minimum_days: 30,
        needs_restore: false,
    },
    StorageClass {
        name: "GLACIER_IR",
        minimum_days: 90,
        needs_restore: false,
    },
    StorageClass {
        name: "GLACIER",
        minimum_days: 90,
        needs_restore: true,
    },
    StorageClass {
        name: "DEEP_ARCHIVE",
        minimum_days: 180,
        needs_restore: true,
    },
];

/// The storage class called `name`, or an error naming the ones there are.
pub fn storage_class(name: &str) -> Result<&'static StorageClass, String> {
    STORAGE_CLASSES
        .iter()
        .find(|class| class.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = STORAGE_CLASSES.iter().map(|c| c.name).collect();
            format!(
                "unknown storage class {name:?}: expected one of {}",
                names.join(", ")
            )
        })
}

/// The longest a policy can keep a backup, in days, when that is bounded: the longest of its
/// rules, each counted generously (a count of buckets as that many buckets, or that many
/// backups `interval` apart when backups are rarer than the bucket). `None` when a rule keeps
/// without bound (an unlimited count, a tag, `keep_last` without a known interval).
pub fn longest_keep_days(policy: &Policy, interval_days: Option<f64>) -> Option<f64> {
    let mut longest: f64 = 0.0;
    let interval = interval_days.unwrap_or(0.0);
    let counts = [
        (policy.keep_last, 0.0),
        (policy.keep_hourly, 1.0 / 24.0),
        (policy.keep_daily, 1.0),
        (policy.keep_weekly, 7.0),
        (policy.keep_monthly, 31.0),
        (policy.keep_yearly, 366.0),
    ];
    for (count, bucket_days) in counts {
        match count {
            None => {}
            Some(KeepCount::Unlimited) => return None,
            Some(KeepCount::Limited(n)) => {
                if bucket_days == 0.0 && interval_days.is_none() {
                    return None;
                }
                longest = longest.max(f64::from(n.get()) * f64::max(bucket_days, interval));
            }
        }
    }
    if let Some(n) = policy.keep_verified {
        match (n, interval_days) {
            (KeepCount::Limited(n), Some(interval)) => {
                longest = longest.max(f64::from(n.get()) * interval)
            }
            _ => return None,
        }
    }
    if !policy.keep_tags.is_empty() {
        return None;
    }
    let within = std::iter::once(policy.keep_within).chain(policy.within_buckets());
    for duration in within.flatten() {
        let days = f64::from(duration.years) * 366.0
            + f64::from(duration.months) * 31.0
            + f64::from(duration.days)
            + f64::from(duration.hours) / 24.0;
        longest = longest.max(days);
    }
    if let Some(days) = policy.retention_duration {
        longest = longest.max(f64::from(days.0.get()));
    }
    if let Some(window) = policy.recovery_window {
        use sexton_retention::WindowUnit;
        let unit = match window.unit {
            WindowUnit::Seconds => 1.0 / 86_400.0,
            WindowUnit::Minutes => 1.0 / 1_440.0,
            WindowUnit::Hours => 1.0 / 24.0,
            WindowUnit::Days => 1.0,
            WindowUnit::Weeks => 7.0,
            WindowUnit::Months => 30.0,
        };
        // The window plus the backup before it, which recovery to its start needs.
        longest = longest.max(f64::from(window.amount.get()) * unit + interval);
    }
    Some(longest)
}

impl CopyRule {
    /// The class a copy of a backup `age_days` old belongs in by the rule's transitions:
    /// the last one reached, `None` before the first (the class it was written in).
    pub fn class_at(&self, age_days: f64) -> Option<&str> {
        self.transitions
            .iter()
            .rev()
            .find(|step| f64::from(step.after_days) <= age_days)
            .map(|step| step.storage_class.as_str())
    }

    /// The class a copy now in `current` (`None`: the store's default) must move to at `now`,
    /// if a transition is due. Transitions only move forward: a copy already in the class of
    /// a later step (written there, or moved by hand) stays.
    pub fn transition_due(
        &self,
        taken: DateTime<Utc>,
        now: DateTime<Utc>,
        current: Option<&str>,
    ) -> Option<&str> {
        let age_days = (now - taken).num_seconds() as f64 / 86_400.0;
        let target = self.class_at(age_days)?;
        let reached = self
            .transitions
            .iter()
            .position(|step| step.storage_class == target)?;
        let already = current.and_then(|class| {
            self.transitions
                .iter()
                .position(|step| step.storage_class == class)
        });
        match already {
            Some(at) if at >= reached => None,
            _ if current == Some(target) => None,
            _ => Some(target),
        }
    }

    /// The checks of [`CopyRule::transitions`]: known classes in increasing ages, none that
    /// the policy deletes every copy before reaching or soon after (its minimum duration
    /// charged for nothing), archive classes only for fulls, none leaving the class before
    /// it was charged for in full.
    fn validate_transitions(&self, interval_days: Option<f64>) -> Result<(), String> {
        let to = &self.to;
        if self.transitions.len() > MAX_TRANSITIONS {
            return Err(format!(
                "copy rule to {to}: {} transitions, at most {MAX_TRANSITIONS}",
                self.transitions.len()
            ));
        }
        let longest = longest_keep_days(&self.policy, interval_days);
        let mut previous: Option<(u32, &str, u32)> = match &self.storage_class {
            Some(name) => Some((0, name.as_str(), storage_class(name)?.minimum_days)),
            None => None,
        };
        for step in &self.transitions {
            let name = &step.storage_class;
            let class = storage_class(name).map_err(|why| format!("copy rule to {to}: {why}"))?;
            if step.after_days == 0 {
                return Err(format!(
                    "copy rule to {to}: a transition after 0 days; write the copies in \
                     {name} (storage_class) instead"
                ));
            }
            if let Some((after, from, minimum)) = previous {
                if step.after_days <= after {
                    return Err(format!(
                        "copy rule to {to}: transitions must be in increasing after_days ({} \
                         after {after})",
                        step.after_days
                    ));
                }
                if from == name {
                    return Err(format!(
                        "copy rule to {to}: a transition to {name}, where copies already are"
                    ));
                }
                if step.after_days - after < minimum {
                    return Err(format!(
                        "copy rule to {to}: {from} charges for at least {minimum} days, but \
                         copies leave it for {name} after {} days: every transition would pay \
                         for days not stored",
                        step.after_days - after
                    ));
                }
            }
            if class.needs_restore && self.select == CopySelect::All {
                return Err(format!(
                    "copy rule to {to}: storage class {name} must be restored before it is \
                     read, so it cannot serve a chain's incrementals; use select: fulls"
                ));
            }
            if let Some(days) = longest {
                if days <= f64::from(step.after_days) {
                    return Err(format!(
                        "copy rule to {to}: the policy keeps a copy at most about {} days, so \
                         the transition to {name} after {} days never happens",
                        days.ceil(),
                        step.after_days
                    ));
                }
                if days < f64::from(step.after_days) + f64::from(class.minimum_days) {
                    return Err(format!(
                        "copy rule to {to}: storage class {name} charges for at least {} days, \
                         but a copy moved there after {} days is kept at most about {} days: \
                         every deletion would be early; keep longer or transition later",
                        class.minimum_days,
                        step.after_days,
                        days.ceil()
                    ));
                }
            }
            previous = Some((step.after_days, name.as_str(), class.minimum_days));
        }
        Ok(())
    }

    /// The checks that need nothing but the rule and the schedule's backup interval (in days,
    /// when the cron has one): a copy to the source itself, a policy that keeps nothing, an
    /// unknown storage class, one whose minimum duration outlasts what the policy keeps, an
    /// archive class for a chain.
    pub fn validate(&self, interval_days: Option<f64>) -> Result<(), String> {
        let to = &self.to;
        if to.is_primary() {
            return Err(format!(
                "copy rule to {to}: a backup is already at primary, its source; a copy goes to \
                 another location"
            ));
        }
        if self.policy.has_no_rule() {
            return Err(format!(
                "copy rule to {to}: its policy keeps nothing; give it a rule (keep_last, \
                 keep_daily, keep_within, ...) or remove the rule"
            ));
        }
        if let Some(delay) = self.delay {
            if delay.seconds() > MAX_COPY_DELAY_DAYS * 86_400 {
                return Err(format!(
                    "copy rule to {to}: a delay of {} is longer than {MAX_COPY_DELAY_DAYS} \
                     days; every backup would wait that long at its source for its copy",
                    delay.in_words()
                ));
            }
            let delay_days = delay.seconds() as f64 / 86_400.0;
            if self.select == CopySelect::Kept {
                if let Some(days) = longest_keep_days(&self.policy, interval_days) {
                    if days <= delay_days {
                        return Err(format!(
                            "copy rule to {to}: with select: kept and a delay of {}, nothing \
                             would ever be copied: the policy keeps a copy at most about {} \
                             days, so no backup is still kept when its copy is due; shorten \
                             the delay or keep longer",
                            delay.in_words(),
                            days.ceil()
                        ));
                    }
                }
            }
        }
        if let Some(name) = &self.storage_class {
            let class = storage_class(name).map_err(|why| format!("copy rule to {to}: {why}"))?;
            if class.needs_restore && self.select == CopySelect::All {
                return Err(format!(
                    "copy rule to {to}: storage class {name} must be restored before it is \
                     read, so it cannot serve a chain's incrementals; use select: fulls"
                ));
            }
            if let Some(days) = longest_keep_days(&self.policy, interval_days) {
                if days < f64::from(class.minimum_days) {
                    return Err(format!(
                        "copy rule to {to}: storage class {name} charges for at least {} days, \
                         but the policy keeps a copy at most about {} days: every deletion would \
                         be early; keep longer or choose another class",
                        class.minimum_days,
                        days.ceil()
                    ));
                }
            }
        }
        self.validate_transitions(interval_days)
    }
}

/// Checks a schedule's copy rules together: each valid, at most [`MAX_COPY_RULES`], no
/// location twice.
pub fn validate_copy_rules(rules: &[CopyRule], interval_days: Option<f64>) -> Result<(), String> {
    if rules.len() > MAX_COPY_RULES {
        return Err(format!(
            "{} copy rules: at most {MAX_COPY_RULES}",
            rules.len()
        ));
    }
    for (i, rule) in rules.iter().enumerate() {
        rule.validate(interval_days)?;
        if rules[..i].iter().any(|earlier| earlier.to == rule.to) {
            return Err(format!(
                "two copy rules to {}: one rule per location",
                rule.to
            ));
        }
    }
    Ok(())
}

/// A backup's copy at one location, once it counts there: every object written with the size
/// and SHA-256 intake recorded at the source, `metadata.json` last.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LocationCopy {
    pub state: CopyState,
    /// When the copier finished it.
    pub copied_at: DateTime<Utc>,
    /// Each object as written at the location (its key there).
    #[serde(default)]
    pub objects: Vec<ObjectDigest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// The catalog revision at which the location's retention marked this copy `expiring`;
    /// its delete job carries the same number. Kept through `deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiring_revision: Option<u64>,
    /// Why the location's retention deletes it (the plan's reasons).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_reasons: Vec<String>,
    /// The hash of the rule's policy whose plan marked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
    /// When a deleter finished deleting it (`deleted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<DateTime<Utc>>,
    /// When the copier last moved it to another class (`storage_class` is the class now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transitioned_at: Option<DateTime<Utc>>,
    /// The last restore test of this copy (`sexton backup verify --location`): read from the
    /// location, checked against intake's digests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<CopyTest>,
    /// What the last scrub of the location found wrong (`missing`): one entry per object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// When a user asked to delete this copy (`sexton backup delete --location`): the
    /// location's retention deletes it once no copy there builds on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_requested_at: Option<DateTime<Utc>>,
    /// Until when this copy's objects are under S3 Object Lock at the location (issue 29).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_until: Option<DateTime<Utc>>,
    /// The store the copy was written to (issue 54): the location's endpoint, bucket and
    /// prefix when the copier wrote it. Absent on copies written before: taken to be where the
    /// location's settings point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::keys::StoreRef>,
}

/// The last restore test of a copy at its location: the verdict of the backup's history entry
/// with the same request id.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CopyTest {
    pub request_id: String,
    /// `verified`, `failed` or `timeout`.
    pub outcome: String,
    pub at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LocationCopy {
    /// A copy in `state` as of `at` (`copied_at`), with nothing else known yet.
    pub fn new(state: CopyState, at: DateTime<Utc>) -> LocationCopy {
        LocationCopy {
            state,
            copied_at: at,
            objects: Vec::new(),
            storage_class: None,
            expiring_revision: None,
            delete_reasons: Vec::new(),
            delete_policy: None,
            deleted_at: None,
            transitioned_at: None,
            verification: None,
            problems: Vec::new(),
            delete_requested_at: None,
            locked_until: None,
            store: None,
        }
    }

    /// Whether the location holds (some of) the copy's objects: every state but `deleted`
    /// and `skipped`.
    pub fn is_held(&self) -> bool {
        !matches!(self.state, CopyState::Deleted | CopyState::Skipped)
    }
}

/// Where a copy stands.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CopyState {
    /// Whole at the location: it counts there.
    Copied,
    /// The location's retention chose to delete it and marked it; a deleter is on it. It
    /// counts no more at the location (as an `expiring` backup counts no more at its source).
    Expiring,
    /// A deleter claimed it and is removing its objects: it is never judged again, only
    /// finished (a redelivered job resumes).
    Deleting,
    /// The location's retention deleted it: nothing of it is there any more. Kept on the record
    /// so that the copy rule counts as served (no copy is awaited, a late copy job copies
    /// nothing); a descendant that needs it there again has it copied again.
    Deleted,
    /// A scrub of the location found objects of it gone or changed behind Sexton's back: it
    /// counts no more there (never a parent, never deleted by the location's retention). The
    /// copier copies it again while the source holds the backup; a scrub that finds it whole
    /// again makes it `copied`.
    Missing,
    /// Never copied: a `select: kept` rule's policy would have deleted the copy at once when
    /// it was due (`delete_reasons` says why, `copied_at` when it was judged). The rule counts
    /// as served; nothing of it is at the location. A descendant copied there later that needs
    /// it has it copied then.
    Skipped,
}

impl CopyState {
    pub fn as_str(self) -> &'static str {
        match self {
            CopyState::Copied => "copied",
            CopyState::Expiring => "expiring",
            CopyState::Deleting => "deleting",
            CopyState::Deleted => "deleted",
            CopyState::Missing => "missing",
            CopyState::Skipped => "skipped",
        }
    }
}

/// Retention-worker → deleter: delete this backup's copy at this location. A claim to check:
/// the deleter deletes only a copy the catalog marks `expiring` at the job's revision, with the
/// uid the job names, that the rule's plan made now still lets go.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CopyDeleteJob {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub backup_id: BackupId,
    pub uid: String,
    pub location: LocationName,
    /// The catalog revision at which the copy was marked expiring.
    pub revision: u64,
    #[serde(default)]
    pub reasons: Vec<String>,
}

impl Message for CopyDeleteJob {
    const KIND: &'static str = "copy delete job";

    fn validate(&self) -> Result<(), String> {
        crate::wire::check_uid(&self.uid)?;
        if self.location.is_primary() {
            return Err(
                "a copy delete job's location is never primary (a delete job deletes there)".into(),
            );
        }
        if self.revision == 0 {
            return Err("revision must be positive".into());
        }
        Ok(())
    }
}

/// The one copy policy of `plan` at `location`, given the copy rules of the plan's schedules:
/// every schedule of the plan that copies there must give the same policy (as a group's own
/// policy must be one). `Err`: why the location's copies of the group are not planned
/// (everything kept there).
pub fn copy_policy<'a>(
    rules: impl IntoIterator<Item = &'a CopyRule>,
    location: &LocationName,
) -> Result<&'a Policy, String> {
    let mut found: Option<&'a Policy> = None;
    for rule in rules.into_iter().filter(|rule| rule.to == *location) {
        match found {
            None => found = Some(&rule.policy),
            Some(policy) if *policy == rule.policy => {}
            Some(_) => {
                return Err(format!(
                    "the schedules of this plan give different policies for copies at {location}; keeping every copy there"
                ))
            }
        }
    }
    found.ok_or_else(|| {
        format!("no schedule of this plan has a copy rule to {location}; keeping every copy there")
    })
}

/// What a copy rule asks for one backup awaiting its copy at a location, now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyVerdict {
    /// Copy it.
    Copy,
    /// Not before this instant: the rule's `delay` after the backup completed.
    NotBefore(DateTime<Utc>),
    /// Never: the rule's policy (`select: kept`) would delete the copy at once, for these
    /// reasons.
    Skip(Vec<String>),
}

/// The hold a backup carries at its source while a copy rule still has to copy it.
pub fn awaiting_hold(location: &LocationName) -> String {
    format!("awaiting copy to {location}")
}

/// The location an [`awaiting_hold`] names, if `hold` is one.
pub fn awaited_location(hold: &str) -> Option<&str> {
    hold.strip_prefix("awaiting copy to ")
}

/// A key at the source as it lies at a destination: the same path below the destination's
/// prefix. `None` when the key is not under the source's prefix.
pub fn destination_key(source_prefix: &str, destination_prefix: &str, key: &str) -> Option<String> {
    let rest = key.strip_prefix(source_prefix.trim_end_matches('/'))?;
    let rest = rest.strip_prefix('/')?;
    let destination = destination_prefix.trim_end_matches('/');
    Some(if destination.is_empty() {
        rest.to_string()
    } else {
        format!("{destination}/{rest}")
    })
}

/// Scheduler (or a sweep) → copier: copy this backup to this location. A claim to check: the
/// copier copies only what the catalog says a rule asks for, with the uid the job names.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CopyJob {
    #[serde(default = "v1")]
    pub schema_version: u32,
    pub cluster: ClusterName,
    pub backup_id: BackupId,
    /// The record's uid: a job for an earlier backup of the same id copies nothing.
    pub uid: String,
    pub location: LocationName,
}

impl Message for CopyJob {
    const KIND: &'static str = "copy job";

    fn validate(&self) -> Result<(), String> {
        crate::wire::check_uid(&self.uid)?;
        if self.location.is_primary() {
            return Err("a copy job's location is never primary".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: serde_json::Value) -> Result<CopyRule, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    #[test]
    fn a_kept_rule_whose_delay_outlasts_what_it_keeps_is_refused() {
        let never = rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3},
            "select": "kept", "delay": "5d"}))
        .unwrap();
        let err = never.validate(Some(1.0)).unwrap_err();
        assert!(err.contains("nothing would ever be copied"), "{err}");
        // Copying all of them after the same delay is fine (the source holds them meanwhile);
        // so is keeping monthlies.
        let all = CopyRule {
            select: CopySelect::All,
            ..never.clone()
        };
        all.validate(Some(1.0)).unwrap();
        let monthly = rule(
            serde_json::json!({"to": "dr", "policy": {"keep_monthly": 12},
            "select": "kept", "delay": "5d"}),
        )
        .unwrap();
        monthly.validate(Some(1.0)).unwrap();
        let long = rule(
            serde_json::json!({"to": "dr", "policy": {"keep_monthly": 12},
            "delay": "400d"}),
        )
        .unwrap();
        assert!(long
            .validate(Some(1.0))
            .unwrap_err()
            .contains("longer than 366"));
        for bad in ["0s", "soon", "-1d", "5x"] {
            assert!(
                rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3}, "delay": bad}))
                    .is_err(),
                "{bad}"
            );
        }
        assert!(
            rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3},
            "select": "newest"}))
            .is_err()
        );
    }

    #[test]
    fn a_rule_to_primary_or_keeping_nothing_is_refused() {
        let to_primary =
            rule(serde_json::json!({"to": "primary", "policy": {"keep_last": 3}})).unwrap();
        assert!(to_primary
            .validate(Some(1.0))
            .unwrap_err()
            .contains("primary"));
        // The policy's own decoding refuses a policy without a rule; a rule built in code is
        // refused too.
        assert!(rule(serde_json::json!({"to": "dr", "policy": {}})).is_err());
        let nothing = CopyRule {
            policy: Policy::default(),
            ..to_primary.clone()
        };
        let nothing = CopyRule {
            to: LocationName::new("dr").unwrap(),
            ..nothing
        };
        assert!(nothing
            .validate(Some(1.0))
            .unwrap_err()
            .contains("keeps nothing"));
        assert!(
            rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3}, "extra": 1})).is_err()
        );
        assert!(rule(serde_json::json!({"to": "d/r", "policy": {"keep_last": 3}})).is_err());
    }

    #[test]
    fn a_class_whose_minimum_outlasts_the_policy_is_refused() {
        let short = rule(serde_json::json!({"to": "dr", "policy": {"keep_daily": 7},
            "storage_class": "GLACIER_IR"}))
        .unwrap();
        let err = short.validate(Some(1.0)).unwrap_err();
        assert!(err.contains("at least 90 days"), "{err}");
        let long = rule(
            serde_json::json!({"to": "dr", "policy": {"keep_monthly": 12},
            "storage_class": "GLACIER_IR"}),
        )
        .unwrap();
        long.validate(Some(1.0)).unwrap();
        // keep_last without a known interval: cannot judge, so not refused.
        let unknown = rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3},
            "storage_class": "STANDARD_IA"}))
        .unwrap();
        unknown.validate(None).unwrap();
        assert!(unknown.validate(Some(1.0)).is_err());
        let bogus = rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3},
            "storage_class": "COLD"}))
        .unwrap();
        assert!(bogus
            .validate(None)
            .unwrap_err()
            .contains("unknown storage class"));
        let archive = rule(serde_json::json!({"to": "dr", "policy": {"keep_yearly": 7},
            "storage_class": "DEEP_ARCHIVE"}))
        .unwrap();
        assert!(archive
            .validate(Some(1.0))
            .unwrap_err()
            .contains("select: fulls"));
    }

    #[test]
    fn two_rules_to_one_location_are_refused() {
        let a = rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3}})).unwrap();
        assert!(validate_copy_rules(&[a.clone(), a], Some(1.0))
            .unwrap_err()
            .contains("two copy rules"));
    }

    #[test]
    fn destination_keys_keep_the_path_below_the_prefix() {
        assert_eq!(
            destination_key("backups", "dr-copies", "backups/c1/s/id/metadata.json").as_deref(),
            Some("dr-copies/c1/s/id/metadata.json")
        );
        assert_eq!(
            destination_key("backups/", "", "backups/c1/x").as_deref(),
            Some("c1/x")
        );
        assert_eq!(destination_key("backups", "dr", "other/c1/x"), None);
        assert_eq!(destination_key("backups", "dr", "backupsX/c1/x"), None);
    }

    #[test]
    fn transitions_are_checked_where_they_are_written() {
        let with = |transitions: serde_json::Value, policy: serde_json::Value, select: &str| {
            rule(
                serde_json::json!({"to": "dr", "policy": policy, "select": select,
                "transitions": transitions}),
            )
            .unwrap()
            .validate(Some(1.0))
        };
        let yearly = serde_json::json!({"keep_yearly": 7});
        with(
            serde_json::json!([{"after_days": 30, "storage_class": "STANDARD_IA"},
                               {"after_days": 90, "storage_class": "GLACIER_IR"}]),
            yearly.clone(),
            "all",
        )
        .unwrap();
        let refused = |transitions, policy, select, needle: &str| {
            let err = with(transitions, policy, select).unwrap_err();
            assert!(err.contains(needle), "{err}");
        };
        refused(
            serde_json::json!([{"after_days": 90, "storage_class": "GLACIER_IR"},
                               {"after_days": 30, "storage_class": "STANDARD_IA"}]),
            yearly.clone(),
            "all",
            "increasing",
        );
        refused(
            serde_json::json!([{"after_days": 30, "storage_class": "STANDARD_IA"},
                               {"after_days": 40, "storage_class": "GLACIER_IR"}]),
            yearly.clone(),
            "all",
            "charges for at least 30 days",
        );
        refused(
            serde_json::json!([{"after_days": 30, "storage_class": "DEEP_ARCHIVE"}]),
            yearly.clone(),
            "all",
            "select: fulls",
        );
        with(
            serde_json::json!([{"after_days": 30, "storage_class": "DEEP_ARCHIVE"}]),
            yearly,
            "fulls",
        )
        .unwrap();
        refused(
            serde_json::json!([{"after_days": 30, "storage_class": "GLACIER_IR"}]),
            serde_json::json!({"keep_daily": 14}),
            "all",
            "never happens",
        );
        refused(
            serde_json::json!([{"after_days": 30, "storage_class": "GLACIER_IR"}]),
            serde_json::json!({"keep_daily": 60}),
            "all",
            "every deletion would be early",
        );
        refused(
            serde_json::json!([{"after_days": 0, "storage_class": "GLACIER_IR"}]),
            serde_json::json!({"keep_monthly": 24}),
            "all",
            "after 0 days",
        );
        refused(
            serde_json::json!([{"after_days": 30, "storage_class": "COLD"}]),
            serde_json::json!({"keep_monthly": 24}),
            "all",
            "unknown storage class",
        );
        assert!(
            rule(serde_json::json!({"to": "dr", "policy": {"keep_last": 3},
            "transitions": [{"after_days": 30, "class": "X"}]}))
            .is_err()
        );
    }

    #[test]
    fn deleting_before_the_class_minimum_is_priced() {
        let copy: LocationCopy = serde_json::from_value(serde_json::json!({
            "state": "copied", "copied_at": "2026-01-01T00:00:00Z",
            "storage_class": "GLACIER_IR",
            "objects": [{"key": "dr/a", "size": 1000}, {"key": "dr/b", "size": 24}]
        }))
        .unwrap();
        let at = |day: i64| {
            "2026-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap() + chrono::Duration::days(day)
        };
        let early = early_deletion("b1", &copy, None, at(10)).unwrap();
        assert_eq!(
            (
                early.days_in_class,
                early.minimum_days,
                early.bytes,
                early.days_charged()
            ),
            (10, 90, 1024, 80)
        );
        assert_eq!(early_deletion("b1", &copy, None, at(90)), None);
        // Moved to the class later: counted from the move.
        let mut moved = copy.clone();
        moved.transitioned_at = Some(at(85));
        assert_eq!(
            early_deletion("b1", &moved, None, at(95))
                .unwrap()
                .days_in_class,
            10
        );
        // No class on the copy: the location's default, else the store's (no minimum).
        let mut plain = copy.clone();
        plain.storage_class = None;
        assert_eq!(early_deletion("b1", &plain, None, at(1)), None);
        assert_eq!(
            early_deletion("b1", &plain, Some("STANDARD_IA"), at(1))
                .unwrap()
                .minimum_days,
            30
        );
    }

    #[test]
    fn a_transition_is_due_once_and_only_forward() {
        let r = rule(serde_json::json!({"to": "dr", "policy": {"keep_yearly": 7},
            "transitions": [{"after_days": 30, "storage_class": "STANDARD_IA"},
                            {"after_days": 90, "storage_class": "GLACIER_IR"}]}))
        .unwrap();
        let taken: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let day = |n: i64| taken + chrono::Duration::days(n);
        assert_eq!(r.transition_due(taken, day(29), None), None);
        assert_eq!(r.transition_due(taken, day(30), None), Some("STANDARD_IA"));
        assert_eq!(r.transition_due(taken, day(31), Some("STANDARD_IA")), None);
        assert_eq!(
            r.transition_due(taken, day(95), Some("STANDARD_IA")),
            Some("GLACIER_IR")
        );
        // Written late (day 95) in the first class: straight to the class of its age.
        assert_eq!(r.transition_due(taken, day(95), None), Some("GLACIER_IR"));
        assert_eq!(r.transition_due(taken, day(95), Some("GLACIER_IR")), None);
        // Never back to an earlier step.
        assert_eq!(r.transition_due(taken, day(40), Some("GLACIER_IR")), None);
    }
}
