//! Why a backup (or a volume of one) stays or goes, as a value: the rule that decided it and
//! that rule's parameters (issue 18).
//!
//! The engine builds a [`Reason`] per rule that fired; its text (`"last snapshot"`, `"needed
//! by d3"`, …) is written only when it is displayed or serialised, and the metric label of the
//! rule behind it comes from [`Reason::rule`] and [`Rule::label`]. Both are exhaustive `match`es
//! here, so a rule added to the engine cannot be counted under a label rebuilt from its text
//! (the retention-worker once matched substrings of the text, and counted what it did not
//! recognise as `other`).
//!
//! The texts are a wire format (plans, previews, events, the audit, restic's golden files):
//! they never change. A reason read back from JSON keeps its text ([`Reason::Text`]) unless it
//! is one of the fixed texts; two reasons are equal when their texts are.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::calendar::CalendarDuration;
use crate::policy::{GracePeriod, KeepCount, RecoveryWindow, RetentionDays, TagList};

/// The kind of rule behind a reason: what `sexton_retention_decisions_total` counts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    // Kept.
    LegalHold,
    Hold,
    InProgress,
    /// A failed backup within its grace period, or one with no time to judge it by.
    FailedGrace,
    KeepLast,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
    /// `keep_within` and restic's `keep_within_<bucket>` rules.
    KeepWithin,
    KeepTags,
    RetentionDuration,
    /// The recovery window and the newest backup before it.
    RecoveryWindow,
    /// The newest completed full backup.
    Floor,
    ImmutableChain,
    KeepVerified,
    /// The newest backup a restore test proved restorable.
    VerifiedFloor,
    /// barman's `minimum_redundancy`: kept so that N completed backups stay.
    MinimumRedundancy,
    /// `keep_full`: one of the newest N full backups, or a backup that builds on one.
    KeepFull,
    /// `keep_diff`: one of the newest N differentials, or an incremental built on one.
    KeepDiff,
    Missing,
    MergePending,
    /// `needed by`: an ancestor of a kept backup.
    Chain,
    /// A volume kept because its backup is kept.
    KeptWithBackup,
    /// Asked to be deleted, but still needed.
    DeleteDeferred,
    // Deleted.
    Failed,
    Expiring,
    Deleting,
    DeleteFailed,
    /// A missing backup nothing keeps (it was asked to be deleted).
    MissingDeleted,
    DeleteRequested,
    NoRule,
    /// A deleted immutable backup: its record only.
    RecordOnly,
    /// Kept by an Object Lock that has not expired (issue 29).
    Locked,
    /// A reason read back from text the engine does not write.
    Other,
}

impl Rule {
    /// The metric label: a small fixed set, one name per kind of rule.
    pub fn label(self) -> &'static str {
        match self {
            Rule::LegalHold => "legal-hold",
            Rule::Hold => "hold",
            Rule::InProgress => "in-progress",
            Rule::FailedGrace | Rule::Failed => "failed",
            Rule::KeepLast => "keep-last",
            Rule::Hourly | Rule::Daily | Rule::Weekly | Rule::Monthly | Rule::Yearly => "gfs",
            Rule::KeepWithin => "keep-within",
            Rule::KeepTags => "keep-tags",
            Rule::RetentionDuration => "retention-duration",
            Rule::RecoveryWindow => "recovery-window",
            Rule::Floor => "floor",
            Rule::ImmutableChain => "immutable-chain",
            Rule::KeepVerified => "keep-verified",
            Rule::VerifiedFloor => "verified-floor",
            Rule::MinimumRedundancy => "minimum-redundancy",
            Rule::KeepFull => "keep-full",
            Rule::KeepDiff => "keep-diff",
            Rule::Missing | Rule::MissingDeleted => "missing",
            Rule::MergePending => "merge-pending",
            Rule::Chain => "chain",
            Rule::KeptWithBackup => "kept-with-backup",
            Rule::DeleteDeferred => "delete-deferred",
            Rule::Expiring => "expiring",
            Rule::Deleting => "deleting",
            Rule::DeleteFailed => "delete-failed",
            Rule::DeleteRequested => "delete-requested",
            Rule::NoRule => "no-rule",
            Rule::RecordOnly => "record-only",
            Rule::Locked => "locked",
            Rule::Other => "other",
        }
    }
}

/// A count rule's bucket (restic's `keep_last`, `keep_hourly`, …); the within buckets are the
/// same without `Last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bucket {
    Last,
    Hourly,
    Daily,
    Weekly,
    Monthly,
    Yearly,
}

impl Bucket {
    /// restic's order of the count buckets.
    pub(crate) const COUNTS: [Bucket; 6] = [
        Bucket::Last,
        Bucket::Hourly,
        Bucket::Daily,
        Bucket::Weekly,
        Bucket::Monthly,
        Bucket::Yearly,
    ];
    /// restic's order of the within buckets.
    pub(crate) const WITHIN: [Bucket; 5] = [
        Bucket::Hourly,
        Bucket::Daily,
        Bucket::Weekly,
        Bucket::Monthly,
        Bucket::Yearly,
    ];

    fn name(self) -> &'static str {
        match self {
            Bucket::Last => "last",
            Bucket::Hourly => "hourly",
            Bucket::Daily => "daily",
            Bucket::Weekly => "weekly",
            Bucket::Monthly => "monthly",
            Bucket::Yearly => "yearly",
        }
    }

    fn rule(self) -> Rule {
        match self {
            Bucket::Last => Rule::KeepLast,
            Bucket::Hourly => Rule::Hourly,
            Bucket::Daily => Rule::Daily,
            Bucket::Weekly => Rule::Weekly,
            Bucket::Monthly => Rule::Monthly,
            Bucket::Yearly => Rule::Yearly,
        }
    }
}

/// One reason a backup or a volume stays or goes, with what its text names.
#[derive(Clone)]
pub enum Reason {
    LegalHold,
    /// `hold <why>`.
    Hold(String),
    InProgress,
    FailedGrace(GracePeriod),
    FailedNoTime,
    /// restic's `has tags [a, b]`.
    Tags(TagList),
    /// restic's `within 7d`.
    Within(CalendarDuration),
    /// restic's `hourly snapshot`, `oldest daily snapshot`, `last snapshot`, ….
    Count {
        bucket: Bucket,
        oldest: bool,
    },
    /// restic's `hourly within 2d`, `oldest daily within 1m`, ….
    WithinBucket {
        bucket: Bucket,
        duration: CalendarDuration,
        oldest: bool,
    },
    RetentionDuration(RetentionDays),
    RecoveryWindow(RecoveryWindow),
    /// The newest backup before the recovery window: the base that replays to its start.
    RecoveryWindowBase(RecoveryWindow),
    /// The newest completed full backup (`volumes`: the newest completed backup with volumes).
    Floor {
        volumes: bool,
    },
    /// `immutable chain kept with <id>`.
    ImmutableChain(String),
    KeepVerified(KeepCount),
    VerifiedFloor,
    /// `minimum_redundancy N`: one of the newest N completed backups, which no rule kept.
    MinimumRedundancy(u32),
    /// `keep_full N`: one of the newest N full backups.
    KeepFull(KeepCount),
    /// `keep_full N: builds on <full>`: a backup of one of those fulls' chains.
    FullChainMember {
        count: KeepCount,
        full: String,
    },
    /// `keep_diff N`: one of the newest N differentials (fulls counted).
    KeepDiff(KeepCount),
    /// `keep_diff N: builds on <differential>`: an incremental built on one of them.
    DiffChainMember {
        count: KeepCount,
        differential: String,
    },
    /// Kept: its objects are not in the bucket as recorded.
    Missing,
    /// `merge into <id> pending`.
    MergePending(String),
    /// `needed by <id>`.
    NeededBy(String),
    /// `volume <name>: <reason>`: a backup kept, or partial, for a volume of its.
    Volume {
        name: String,
        reason: Box<Reason>,
    },
    KeptWithBackup,
    DeleteDeferred,
    Failed,
    AlreadyExpiring,
    DeletionUnderWay,
    RetryingDelete,
    /// Deleted while missing.
    MissingDeleted,
    DeleteRequested,
    NoRule,
    RecordOnly,
    /// Its objects are under an Object Lock until this instant (issue 29). `only`: nothing
    /// else keeps it (`expired, locked until T`): the policy lets it go, the store does not yet.
    Locked {
        until: chrono::DateTime<chrono::Utc>,
        only: bool,
    },
    /// A reason read back from text the engine does not write as a fixed text.
    Text(String),
}

/// A decision's reasons, most important first: a list of [`Reason`]s (it derefs to a slice),
/// whose single reason, the case of nearly every decision ("no rule keeps it", "failed",
/// "daily snapshot"), is held in place rather than in an allocation of its own. A plan of a
/// million backups used to allocate a million one-element lists (issue 17). Serialised as the
/// list of texts, like a `Vec<Reason>`.
#[derive(Clone, Default)]
pub struct Reasons(Held);

#[derive(Clone, Default)]
enum Held {
    #[default]
    None,
    One(Reason),
    Many(Vec<Reason>),
}

impl Reasons {
    pub fn as_slice(&self) -> &[Reason] {
        match &self.0 {
            Held::None => &[],
            Held::One(reason) => std::slice::from_ref(reason),
            Held::Many(reasons) => reasons,
        }
    }

    pub fn into_vec(self) -> Vec<Reason> {
        match self.0 {
            Held::None => Vec::new(),
            Held::One(reason) => vec![reason],
            Held::Many(reasons) => reasons,
        }
    }

    /// Takes the reasons gathered in `scratch`, leaving it empty (and its capacity to the
    /// caller); allocates only for two reasons or more.
    pub(crate) fn take_from(scratch: &mut Vec<Reason>) -> Reasons {
        match scratch.len() {
            0 => Reasons(Held::None),
            1 => Reasons(Held::One(scratch.pop().expect("one reason"))),
            _ => {
                let mut reasons = Vec::with_capacity(scratch.len());
                reasons.append(scratch);
                Reasons(Held::Many(reasons))
            }
        }
    }
}

impl std::ops::Deref for Reasons {
    type Target = [Reason];

    fn deref(&self) -> &[Reason] {
        self.as_slice()
    }
}

impl From<Vec<Reason>> for Reasons {
    fn from(mut reasons: Vec<Reason>) -> Reasons {
        match reasons.len() {
            0 => Reasons(Held::None),
            1 => Reasons(Held::One(reasons.pop().expect("one reason"))),
            _ => Reasons(Held::Many(reasons)),
        }
    }
}

impl FromIterator<Reason> for Reasons {
    fn from_iter<I: IntoIterator<Item = Reason>>(reasons: I) -> Reasons {
        Reasons::from(reasons.into_iter().collect::<Vec<Reason>>())
    }
}

impl<'r> IntoIterator for &'r Reasons {
    type Item = &'r Reason;
    type IntoIter = std::slice::Iter<'r, Reason>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl fmt::Debug for Reasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl PartialEq for Reasons {
    fn eq(&self, other: &Reasons) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Reasons {}

impl<T> PartialEq<Vec<T>> for Reasons
where
    Reason: PartialEq<T>,
{
    fn eq(&self, other: &Vec<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T, const N: usize> PartialEq<[T; N]> for Reasons
where
    Reason: PartialEq<T>,
{
    fn eq(&self, other: &[T; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Serialize for Reasons {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Reasons {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Reasons, D::Error> {
        Vec::<Reason>::deserialize(deserializer).map(Reasons::from)
    }
}

/// The reasons whose text names nothing: what reading a reason back recognises.
const FIXED: [Reason; 12] = [
    Reason::LegalHold,
    Reason::InProgress,
    Reason::FailedNoTime,
    Reason::VerifiedFloor,
    Reason::KeptWithBackup,
    Reason::DeleteDeferred,
    Reason::Failed,
    Reason::AlreadyExpiring,
    Reason::DeletionUnderWay,
    Reason::RetryingDelete,
    Reason::DeleteRequested,
    Reason::NoRule,
];

impl Reason {
    /// The rule behind this reason (a volume's reason: the rule that keeps the volume).
    pub fn rule(&self) -> Rule {
        match self {
            Reason::LegalHold => Rule::LegalHold,
            Reason::Hold(_) => Rule::Hold,
            Reason::InProgress => Rule::InProgress,
            Reason::FailedGrace(_) | Reason::FailedNoTime => Rule::FailedGrace,
            Reason::Tags(_) => Rule::KeepTags,
            Reason::Within(_) | Reason::WithinBucket { .. } => Rule::KeepWithin,
            Reason::Count { bucket, .. } => bucket.rule(),
            Reason::RetentionDuration(_) => Rule::RetentionDuration,
            Reason::RecoveryWindow(_) | Reason::RecoveryWindowBase(_) => Rule::RecoveryWindow,
            Reason::Floor { .. } => Rule::Floor,
            Reason::ImmutableChain(_) => Rule::ImmutableChain,
            Reason::KeepVerified(_) => Rule::KeepVerified,
            Reason::VerifiedFloor => Rule::VerifiedFloor,
            Reason::MinimumRedundancy(_) => Rule::MinimumRedundancy,
            Reason::KeepFull(_) | Reason::FullChainMember { .. } => Rule::KeepFull,
            Reason::KeepDiff(_) | Reason::DiffChainMember { .. } => Rule::KeepDiff,
            Reason::Missing => Rule::Missing,
            Reason::MergePending(_) => Rule::MergePending,
            Reason::NeededBy(_) => Rule::Chain,
            Reason::Volume { reason, .. } => reason.rule(),
            Reason::KeptWithBackup => Rule::KeptWithBackup,
            Reason::DeleteDeferred => Rule::DeleteDeferred,
            Reason::Failed => Rule::Failed,
            Reason::AlreadyExpiring => Rule::Expiring,
            Reason::DeletionUnderWay => Rule::Deleting,
            Reason::RetryingDelete => Rule::DeleteFailed,
            Reason::MissingDeleted => Rule::MissingDeleted,
            Reason::DeleteRequested => Rule::DeleteRequested,
            Reason::NoRule => Rule::NoRule,
            Reason::RecordOnly => Rule::RecordOnly,
            Reason::Locked { .. } => Rule::Locked,
            Reason::Text(text) if text.starts_with("expired, locked until ") => Rule::Locked,
            Reason::Text(text) if text.starts_with("locked until ") => Rule::Locked,
            Reason::Text(_) => Rule::Other,
        }
    }

    /// A reason from its text: a fixed text gets its typed reason back, any other text is kept
    /// as it is.
    pub fn from_text(text: String) -> Reason {
        match FIXED.iter().find(|fixed| **fixed == *text) {
            Some(fixed) => fixed.clone(),
            None => Reason::Text(text),
        }
    }

    /// The metric label of the first of `reasons` (`none` when there is none).
    pub fn label_of_first(reasons: &[Reason]) -> &'static str {
        reasons
            .first()
            .map_or("none", |reason| reason.rule().label())
    }

    /// `reasons` as their texts.
    pub fn texts(reasons: &[Reason]) -> Vec<String> {
        reasons.iter().map(ToString::to_string).collect()
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::LegalHold => f.write_str("legal hold"),
            Reason::Hold(why) => write!(f, "hold {why}"),
            Reason::InProgress => f.write_str("in progress"),
            Reason::FailedGrace(grace) if grace.is_never() => {
                f.write_str("failed, kept: failed_grace is never")
            }
            Reason::FailedGrace(grace) => write!(f, "failed, within grace {grace}"),
            Reason::FailedNoTime => f.write_str("failed, no time recorded"),
            Reason::Tags(list) => write!(f, "has tags {list}"),
            Reason::Within(within) => write!(f, "within {within}"),
            Reason::Count { bucket, oldest } => {
                if *oldest {
                    f.write_str("oldest ")?;
                }
                write!(f, "{} snapshot", bucket.name())
            }
            Reason::WithinBucket {
                bucket,
                duration,
                oldest,
            } => {
                if *oldest {
                    f.write_str("oldest ")?;
                }
                write!(f, "{} within {duration}", bucket.name())
            }
            Reason::RetentionDuration(days) => write!(f, "retention_duration {days}"),
            Reason::RecoveryWindow(window) => write!(f, "recovery_window {window}"),
            Reason::RecoveryWindowBase(window) => {
                write!(f, "recovery_window {window}: newest before the window")
            }
            Reason::Floor { volumes: true } => f.write_str("floor: newest completed backup"),
            Reason::Floor { volumes: false } => f.write_str("floor: newest completed full backup"),
            Reason::ImmutableChain(with) => write!(f, "immutable chain kept with {with}"),
            Reason::KeepVerified(count) => write!(f, "keep_verified {}", count.as_restic()),
            Reason::VerifiedFloor => f.write_str("floor: newest verified"),
            Reason::MinimumRedundancy(n) => write!(f, "minimum_redundancy {n}"),
            Reason::KeepFull(count) => write!(f, "keep_full {}", count.as_restic()),
            Reason::FullChainMember { count, full } => {
                write!(f, "keep_full {}: builds on {full}", count.as_restic())
            }
            Reason::KeepDiff(count) => write!(f, "keep_diff {}", count.as_restic()),
            Reason::DiffChainMember {
                count,
                differential,
            } => write!(
                f,
                "keep_diff {}: builds on {differential}",
                count.as_restic()
            ),
            Reason::Missing => f.write_str(
                "missing: its objects are not in the bucket as recorded; not counted, kept until \
                 a user deletes it",
            ),
            Reason::MergePending(target) => write!(f, "merge into {target} pending"),
            Reason::NeededBy(by) => write!(f, "needed by {by}"),
            Reason::Volume { name, reason } => write!(f, "volume {name}: {reason}"),
            Reason::KeptWithBackup => f.write_str("kept with the backup"),
            Reason::DeleteDeferred => f.write_str("delete requested, deferred"),
            Reason::Failed => f.write_str("failed"),
            Reason::AlreadyExpiring => f.write_str("already expiring"),
            Reason::DeletionUnderWay => f.write_str("deletion under way"),
            Reason::RetryingDelete => f.write_str("retrying a failed delete"),
            Reason::MissingDeleted => f.write_str("missing"),
            Reason::DeleteRequested => f.write_str("delete requested"),
            Reason::NoRule => f.write_str("no rule keeps it"),
            Reason::RecordOnly => f.write_str("immutable: catalog record only"),
            Reason::Locked { until, only } => {
                if *only {
                    f.write_str("expired, ")?;
                }
                write!(
                    f,
                    "locked until {}",
                    until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )
            }
            Reason::Text(text) => f.write_str(text),
        }
    }
}

/// Shown as its text, so a failed assertion reads like the plan's JSON.
impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

/// Compares what is written to it with a text, without allocating.
struct SameText<'t> {
    rest: &'t str,
}

impl fmt::Write for SameText<'_> {
    fn write_str(&mut self, written: &str) -> fmt::Result {
        match self.rest.strip_prefix(written) {
            Some(rest) => {
                self.rest = rest;
                Ok(())
            }
            None => Err(fmt::Error),
        }
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        let mut same = SameText { rest: other };
        fmt::write(&mut same, format_args!("{self}")).is_ok() && same.rest.is_empty()
    }
}

impl PartialEq for Reason {
    fn eq(&self, other: &Reason) -> bool {
        *self == *other.to_string()
    }
}

impl Eq for Reason {}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl PartialEq<String> for Reason {
    fn eq(&self, other: &String) -> bool {
        *self == **other
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Reason, D::Error> {
        String::deserialize(deserializer).map(Reason::from_text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_texts_read_back_as_their_reasons() {
        for reason in FIXED {
            let text = reason.to_string();
            assert_ne!(reason.rule(), Rule::Other, "{text}");
            assert_eq!(Reason::from_text(text.clone()).rule(), reason.rule());
        }
        assert_eq!(
            Reason::from_text("needed by d3".to_owned()).rule(),
            Rule::Other
        );
    }

    #[test]
    fn a_volume_reason_counts_as_the_rule_that_keeps_the_volume() {
        let reason = Reason::Volume {
            name: "pv1".to_owned(),
            reason: Box::new(Reason::NeededBy("d2".to_owned())),
        };
        assert_eq!(reason.to_string(), "volume pv1: needed by d2");
        assert_eq!(reason.rule().label(), "chain");
    }
}
