//! How long each kept backup's objects stay under S3 Object Lock (issue 29), decided from the
//! plan's reasons: one pure function from (plan, lock settings) to dates. The retention-worker
//! sets the locks; this module only says until when.
//!
//! - A time rule locks to the date it keeps until: `within 7d` → the backup's time + 7 days,
//!   `hourly within 2d` → + 2 days, `retention_duration 30d` → + 30 days, `recovery_window
//!   7d` → + 7 days.
//! - A count or calendar rule (`last`, `hourly` … `yearly`) locks for the tier the user set,
//!   from the backup's time: how long "the 3rd monthly" lives depends on backups not yet taken,
//!   so no date follows from the rule itself. A calendar pick is locked by its tier only once
//!   its period is over: the newest backup is the pick of the current hour, day, week, month
//!   and year, and loses each to the next backup of that period, so locking it for the yearly
//!   tier would lock every backup for years. When its period ends (a backup of the next period
//!   exists), the pick is final and its lock is extended: the daily that becomes the monthly.
//! - `min` applies to every kept completed backup, whatever keeps it.
//! - A chain's ancestor stays locked at least as long as the backups that need it
//!   (`needed by`), so a locked incremental never outlives its full.
//! - A reason with no tier (a hold, the floor, tags, …) adds nothing beyond `min`.
//!
//! A lock is never shortened: [`extensions`] returns only the dates later than what is set, and
//! only those still in the future.

use std::collections::HashMap;

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

use crate::calendar::{CalendarDuration, DurationError};
use crate::catalog::{BackupStatus, Catalog};
use crate::plan::{Decision, Plan};
use crate::reason::{Bucket, Reason};

/// S3 Object Lock's two modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockMode {
    /// A holder of `s3:BypassGovernanceRetention` can still delete or shorten it.
    Governance,
    /// Nobody can delete or shorten it before its date, not even the account's root.
    Compliance,
}

impl LockMode {
    /// The value S3 takes (`GOVERNANCE`, `COMPLIANCE`).
    pub fn as_s3(self) -> &'static str {
        match self {
            LockMode::Governance => "GOVERNANCE",
            LockMode::Compliance => "COMPLIANCE",
        }
    }
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LockMode::Governance => "governance",
            LockMode::Compliance => "compliance",
        })
    }
}

/// How long each kind of keep is locked. Unset tiers lock nothing of their own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockTiers {
    /// Every kept completed backup, at least.
    pub min: Option<CalendarDuration>,
    pub last: Option<CalendarDuration>,
    pub hourly: Option<CalendarDuration>,
    pub daily: Option<CalendarDuration>,
    pub weekly: Option<CalendarDuration>,
    pub monthly: Option<CalendarDuration>,
    pub yearly: Option<CalendarDuration>,
}

impl std::fmt::Display for LockTiers {
    /// `min=1d,daily=35d`: the set tiers as a lock setting writes them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for (name, tier) in [
            ("min", self.min),
            ("last", self.last),
            ("hourly", self.hourly),
            ("daily", self.daily),
            ("weekly", self.weekly),
            ("monthly", self.monthly),
            ("yearly", self.yearly),
        ] {
            if let Some(tier) = tier {
                write!(f, "{}{name}={tier}", if first { "" } else { "," })?;
                first = false;
            }
        }
        Ok(())
    }
}

impl LockTiers {
    fn of_bucket(&self, bucket: Bucket) -> Option<CalendarDuration> {
        match bucket {
            Bucket::Last => self.last,
            Bucket::Hourly => self.hourly,
            Bucket::Daily => self.daily,
            Bucket::Weekly => self.weekly,
            Bucket::Monthly => self.monthly,
            Bucket::Yearly => self.yearly,
        }
    }

    /// Whether any tier locks anything.
    pub fn is_empty(&self) -> bool {
        *self == LockTiers::default()
    }
}

/// A lock length as written in a setting: restic's `1y2m3d4h`, or whole weeks (`8w`).
pub fn parse_lock_duration(text: &str) -> Result<CalendarDuration, DurationError> {
    let trimmed = text.trim();
    if let Some(weeks) = trimmed.strip_suffix('w') {
        if !weeks.is_empty() && weeks.bytes().all(|b| b.is_ascii_digit()) {
            let days = weeks
                .parse::<u32>()
                .ok()
                .and_then(|weeks| weeks.checked_mul(7))
                .ok_or_else(|| DurationError::ExpectedNumber {
                    text: text.to_string(),
                })?;
            return Ok(CalendarDuration {
                days,
                ..CalendarDuration::default()
            });
        }
    }
    CalendarDuration::parse(trimmed)
}

/// A calendar period of `bucket` (restic's bucket value), read in the backup's own offset as
/// the engine reads it. `None` for `last`, which is no period.
fn period(bucket: Bucket, at: DateTime<FixedOffset>) -> Option<(i32, u32, u32)> {
    use chrono::{Datelike, Timelike};
    let local = at.naive_local();
    match bucket {
        Bucket::Last => None,
        Bucket::Hourly => Some((local.year(), local.ordinal(), local.hour())),
        Bucket::Daily => Some((local.year(), local.ordinal(), 0)),
        Bucket::Weekly => {
            let week = local.iso_week();
            Some((week.year(), week.week(), 0))
        }
        Bucket::Monthly => Some((local.year(), local.month(), 0)),
        Bucket::Yearly => Some((local.year(), 0, 0)),
    }
}

/// The date `reason` alone locks a backup of time `at` until, `None` when it asks for no lock
/// of its own (chains are resolved by [`lock_dates`]). `newest` is the time of the group's
/// newest completed backup: a calendar rule's pick in a period that `newest` is still in is
/// provisional (the next backup of that day, month or year takes its place), so it gets no
/// tier yet; the tier comes when the period is over, as an extension.
fn reason_lock(
    reason: &Reason,
    at: DateTime<FixedOffset>,
    newest: DateTime<FixedOffset>,
    tiers: &LockTiers,
) -> Option<DateTime<Utc>> {
    let after = |duration: CalendarDuration| duration.after(at).map(|t| t.with_timezone(&Utc));
    match reason {
        Reason::Within(duration) => after(*duration),
        Reason::WithinBucket { duration, .. } => after(*duration),
        Reason::Count { bucket, .. } => {
            let provisional =
                period(*bucket, at).is_some_and(|own| period(*bucket, newest) == Some(own));
            if provisional {
                None
            } else {
                tiers.of_bucket(*bucket).and_then(after)
            }
        }
        Reason::RetentionDuration(days) => Some(at.with_timezone(&Utc) + days.as_delta()),
        Reason::RecoveryWindow(window) => Some(at.with_timezone(&Utc) + window.as_delta()),
        Reason::Volume { reason, .. } => reason_lock(reason, at, newest, tiers),
        _ => None,
    }
}

/// Until when each kept, completed backup of `plan` (made over `catalog`) should be locked, by id (those with no
/// lock at all are left out). Pure: the dates follow from the backups' times, the reasons and
/// the tiers, never from the clock.
pub fn lock_dates(
    catalog: &Catalog,
    plan: &Plan,
    tiers: &LockTiers,
) -> HashMap<String, DateTime<Utc>> {
    let lockable = |decision: &&Decision| {
        decision.status == BackupStatus::Completed && decision.completed_at.is_some()
    };
    let mut dates: HashMap<String, DateTime<Utc>> = HashMap::new();
    let Some(newest) = catalog
        .backups
        .iter()
        .filter(|b| b.status == BackupStatus::Completed)
        .filter_map(|b| b.completed_at)
        .max_by_key(|t| t.with_timezone(&Utc))
    else {
        return dates;
    };
    for decision in plan.keep.iter().filter(lockable) {
        let at = decision.completed_at.expect("filtered");
        let own = decision
            .reasons
            .iter()
            .filter_map(|reason| reason_lock(reason, at, newest, tiers))
            .chain(
                tiers
                    .min
                    .and_then(|min| min.after(at))
                    .map(|t| t.with_timezone(&Utc)),
            )
            .max();
        if let Some(own) = own {
            dates.insert(decision.id.clone(), own);
        }
    }
    // Chains: an ancestor is locked at least as long as what builds on it, whatever keeps it
    // (the floor keeps a full in its own right, and its reasons then name no dependent).
    // Newest first, a walk stops at an ancestor already locked as long: its own ancestors are
    // then too, so each link is raised about once.
    let parents: HashMap<&str, &str> = catalog
        .backups
        .iter()
        .filter(|b| b.kind != crate::BackupKind::Full && b.volumes.is_empty())
        .filter_map(|b| Some((b.id.as_str(), b.parent.as_deref()?)))
        .collect();
    for decision in plan.keep.iter().filter(lockable) {
        let Some(until) = dates.get(&decision.id).copied() else {
            continue;
        };
        let mut at = decision.id.as_str();
        let mut steps = 0;
        while let Some(parent) = parents.get(at).copied() {
            steps += 1;
            if steps > parents.len() || !plan.keeps(parent) {
                break;
            }
            let entry = dates.entry(parent.to_string()).or_insert(until);
            if *entry > until {
                break;
            }
            *entry = until;
            at = parent;
        }
    }
    dates
}

/// Where a count rule of `policy` promises to keep its picks longer than its lock tier protects
/// them (issue 29): `keep_daily 7` keeps a daily for about 7 days, and a `daily` tier of 3d
/// leaves it deletable by a stolen key for the other 4. One warning per such rule, for the
/// API to return where the policy is written. The promise is the rule's count of periods
/// (a month counted as 28 days, a year as 365, so the warning errs on the quiet side).
pub fn tier_warnings(policy: &crate::Policy, tiers: &LockTiers) -> Vec<String> {
    use crate::KeepCount;
    let rules = [
        ("keep_hourly", policy.keep_hourly, Bucket::Hourly, 3600i64),
        ("keep_daily", policy.keep_daily, Bucket::Daily, 86_400),
        (
            "keep_weekly",
            policy.keep_weekly,
            Bucket::Weekly,
            7 * 86_400,
        ),
        (
            "keep_monthly",
            policy.keep_monthly,
            Bucket::Monthly,
            28 * 86_400,
        ),
        (
            "keep_yearly",
            policy.keep_yearly,
            Bucket::Yearly,
            365 * 86_400,
        ),
    ];
    let reference = DateTime::parse_from_rfc3339("2001-01-01T00:00:00Z").expect("a valid instant");
    let mut warnings = Vec::new();
    for (field, count, bucket, period) in rules {
        let Some(KeepCount::Limited(n)) = count else {
            continue;
        };
        let Some(tier) = tiers.of_bucket(bucket) else {
            continue;
        };
        let Some(locked) = tier.after(reference) else {
            continue;
        };
        let locked = (locked - reference).num_seconds();
        let promised = i64::from(n.get()) * period;
        if locked < promised {
            warnings.push(format!(
                "{field} {n} keeps each pick for about {} days, but the lock tier {} is {tier}: \
                 for the rest of that time a stolen key could delete it (docs/immutability.md)",
                promised / 86_400,
                bucket_name(bucket),
            ));
        }
    }
    warnings
}

fn bucket_name(bucket: Bucket) -> &'static str {
    match bucket {
        Bucket::Last => "last",
        Bucket::Hourly => "hourly",
        Bucket::Daily => "daily",
        Bucket::Weekly => "weekly",
        Bucket::Monthly => "monthly",
        Bucket::Yearly => "yearly",
    }
}

/// Until when each of `segments` should be locked: as long as the longest-locked
/// base that may replay through it. A base (a full backup, or one with volumes) locked until T
/// replays from its start to any later point, so it needs every segment that ends at or after
/// its start; each such segment is locked until at least T. A segment whose end is unknown
/// may be needed by every base. `locks`: each backup's lock date (those without one are no
/// base). Segments no locked base needs are left out. Pure, like [`lock_dates`].
pub fn segment_lock_dates<'a>(
    backups: impl IntoIterator<Item = &'a crate::BackupRecord>,
    segments: &[crate::BinlogSegment],
    locks: &HashMap<String, DateTime<Utc>>,
) -> HashMap<String, DateTime<Utc>> {
    // Bases by start, each with the longest lock among those that started no later.
    let mut bases: Vec<(DateTime<Utc>, DateTime<Utc>)> = backups
        .into_iter()
        .filter(|b| b.kind == crate::BackupKind::Full || !b.volumes.is_empty())
        .filter_map(|b| {
            let until = *locks.get(&b.id)?;
            let start = b.started_at.or(b.completed_at)?.with_timezone(&Utc);
            Some((start, until))
        })
        .collect();
    bases.sort_unstable();
    let mut longest = Vec::with_capacity(bases.len());
    let mut so_far: Option<DateTime<Utc>> = None;
    for (_, until) in &bases {
        so_far = Some(so_far.map_or(*until, |max| max.max(*until)));
        longest.push(so_far.expect("set"));
    }
    let Some(&all) = longest.last() else {
        return HashMap::new();
    };
    segments
        .iter()
        .filter_map(|segment| {
            let until = match segment.last_event {
                None => all,
                Some(end) => {
                    let end = end.with_timezone(&Utc);
                    let started = bases.partition_point(|(start, _)| *start <= end);
                    *longest.get(started.checked_sub(1)?)?
                }
            };
            Some((segment.key.clone(), until))
        })
        .collect()
}

/// Of `wanted` dates, those that would lengthen a backup's lock: later than what is set
/// (`current`) and still in the future at `now`. Never a shorter date: a lock only grows.
pub fn extensions(
    wanted: &HashMap<String, DateTime<Utc>>,
    current: impl Fn(&str) -> Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<(&str, DateTime<Utc>)> {
    let mut out: Vec<(&str, DateTime<Utc>)> = wanted
        .iter()
        .filter(|(id, until)| **until > now && current(id).is_none_or(|set| **until > set))
        .map(|(id, until)| (id.as_str(), *until))
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{evaluate, BackupKind, BackupRecord, KeepCount, Policy};
    use std::num::NonZeroU32;

    fn at(text: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(text).unwrap()
    }

    fn utc(text: &str) -> DateTime<Utc> {
        at(text).with_timezone(&Utc)
    }

    fn backup(id: &str, time: &str) -> BackupRecord {
        BackupRecord {
            id: id.into(),
            completed_at: Some(at(time)),
            status: BackupStatus::Completed,
            kind: BackupKind::Full,
            ..BackupRecord::default()
        }
    }

    fn d(text: &str) -> CalendarDuration {
        parse_lock_duration(text).unwrap()
    }

    fn count(n: u32) -> Option<KeepCount> {
        Some(KeepCount::Limited(NonZeroU32::new(n).unwrap()))
    }

    fn plan_of(backups: Vec<BackupRecord>, policy: &Policy, now: &str) -> (Catalog, Plan) {
        let catalog = Catalog {
            backups,
            binlog_segments: Vec::new(),
        };
        let plan = evaluate(&catalog, policy, utc(now)).unwrap().to_plan();
        (catalog, plan)
    }

    #[test]
    fn weeks_and_restic_durations_parse_and_nonsense_does_not() {
        assert_eq!(d("8w").days, 56);
        assert_eq!(d("7y").years, 7);
        assert_eq!(d("400d").days, 400);
        assert!(parse_lock_duration("w").is_err());
        assert!(parse_lock_duration("8x").is_err());
        assert!(parse_lock_duration("").is_err());
        assert!(parse_lock_duration("99999999999w").is_err());
    }

    #[test]
    fn each_tier_locks_from_the_backups_own_time() {
        // Daily for 3 days, monthly for 2: the newest of each day is a daily, the newest of
        // each month a monthly.
        let policy = Policy {
            keep_daily: count(3),
            keep_monthly: count(2),
            ..Policy::default()
        };
        let tiers = LockTiers {
            daily: Some(d("14d")),
            monthly: Some(d("400d")),
            ..LockTiers::default()
        };
        let (catalog, plan) = plan_of(
            vec![
                backup("oct31", "2026-10-31T02:00:00Z"),
                backup("nov26", "2026-11-26T02:00:00Z"),
                backup("nov27", "2026-11-27T02:00:00Z"),
            ],
            &policy,
            "2026-11-27T03:00:00Z",
        );
        let dates = lock_dates(&catalog, &plan, &tiers);
        // nov27 is the pick of its day and of November, both still under way: provisional.
        assert!(!dates.contains_key("nov27"), "{dates:?}");
        // nov26's day is over: a daily. October is over: oct31 is its monthly.
        assert_eq!(dates["nov26"], utc("2026-12-10T02:00:00Z"));
        assert_eq!(dates["oct31"], utc("2027-12-05T02:00:00Z"));
    }

    #[test]
    fn the_newest_backup_is_locked_by_min_and_its_tiers_come_when_its_periods_end() {
        let policy = Policy {
            keep_daily: count(7),
            keep_monthly: count(12),
            keep_yearly: count(7),
            ..Policy::default()
        };
        let tiers = LockTiers {
            min: Some(d("1d")),
            daily: Some(d("14d")),
            monthly: Some(d("400d")),
            yearly: Some(d("7y")),
            ..LockTiers::default()
        };
        let mut backups = vec![
            backup("nov30a", "2026-11-30T01:00:00Z"),
            backup("nov30b", "2026-11-30T02:00:00Z"),
        ];
        let (catalog, plan) = plan_of(backups.clone(), &policy, "2026-11-30T03:00:00Z");
        let dates = lock_dates(&catalog, &plan, &tiers);
        // The newest is the day's, the month's and the year's pick so far: min only, not 7 years.
        assert_eq!(dates["nov30b"], utc("2026-12-01T02:00:00Z"));
        // nov30a is kept as the oldest pick (restic keeps the oldest while a count is not
        // reached), in the same day and month: provisional too.
        assert_eq!(dates["nov30a"], utc("2026-12-01T01:00:00Z"));
        // December begins: nov30b is now November's daily and monthly for good; 2026 is not over.
        backups.push(backup("dec01", "2026-12-01T02:00:00Z"));
        let (catalog, plan) = plan_of(backups.clone(), &policy, "2026-12-01T03:00:00Z");
        let dates = lock_dates(&catalog, &plan, &tiers);
        assert_eq!(dates["nov30b"], utc("2028-01-04T02:00:00Z"));
        assert_eq!(dates["dec01"], utc("2026-12-02T02:00:00Z"));
        let longer = extensions(
            &dates,
            |id| (id == "nov30b").then(|| utc("2026-12-01T02:00:00Z")),
            utc("2026-12-01T03:00:00Z"),
        );
        assert!(
            longer.contains(&("nov30b", utc("2028-01-04T02:00:00Z"))),
            "{longer:?}"
        );
        // A new year: December's last backup is 2026's yearly.
        backups.push(backup("jan01", "2027-01-01T02:00:00Z"));
        let (catalog, plan) = plan_of(backups, &policy, "2027-01-01T03:00:00Z");
        let dates = lock_dates(&catalog, &plan, &tiers);
        assert_eq!(dates["dec01"], utc("2033-12-01T02:00:00Z"));
    }

    #[test]
    fn time_rules_lock_to_the_date_they_keep_until_and_min_applies_to_all() {
        let policy = Policy {
            keep_within: Some(d("7d")),
            keep_tags: vec![crate::TagList::new(vec!["gold".into()]).unwrap()],
            ..Policy::default()
        };
        let tiers = LockTiers {
            min: Some(d("2d")),
            ..LockTiers::default()
        };
        let mut tagged = backup("old", "2026-10-01T00:00:00Z");
        tagged.tags = vec!["gold".into()];
        let (catalog, plan) = plan_of(
            vec![tagged, backup("new", "2026-11-27T00:00:00Z")],
            &policy,
            "2026-11-27T01:00:00Z",
        );
        let dates = lock_dates(&catalog, &plan, &tiers);
        assert_eq!(dates["new"], utc("2026-12-04T00:00:00Z"));
        // Kept by tags, which have no tier: min only.
        assert_eq!(dates["old"], utc("2026-10-03T00:00:00Z"));
    }

    #[test]
    fn a_full_stays_locked_as_long_as_the_incrementals_that_need_it() {
        let policy = Policy {
            keep_last: count(1),
            ..Policy::default()
        };
        let tiers = LockTiers {
            last: Some(d("30d")),
            ..LockTiers::default()
        };
        let mut inc1 = backup("inc1", "2026-11-02T00:00:00Z");
        inc1.kind = BackupKind::Incremental;
        inc1.parent = Some("full".into());
        let mut inc2 = backup("inc2", "2026-11-03T00:00:00Z");
        inc2.kind = BackupKind::Incremental;
        inc2.parent = Some("inc1".into());
        let (catalog, plan) = plan_of(
            vec![backup("full", "2026-11-01T00:00:00Z"), inc1, inc2],
            &policy,
            "2026-11-04T00:00:00Z",
        );
        let dates = lock_dates(&catalog, &plan, &tiers);
        let want = utc("2026-12-03T00:00:00Z");
        assert_eq!(dates["inc2"], want);
        assert_eq!(dates["inc1"], want);
        assert_eq!(dates["full"], want);
    }

    #[test]
    fn nothing_is_locked_without_a_tier_and_deleted_backups_never_are() {
        let policy = Policy {
            keep_last: count(1),
            ..Policy::default()
        };
        let (catalog, plan) = plan_of(
            vec![
                backup("a", "2026-11-01T00:00:00Z"),
                backup("b", "2026-11-02T00:00:00Z"),
            ],
            &policy,
            "2026-11-03T00:00:00Z",
        );
        assert!(lock_dates(&catalog, &plan, &LockTiers::default()).is_empty());
        let tiers = LockTiers {
            min: Some(d("1d")),
            ..LockTiers::default()
        };
        let dates = lock_dates(&catalog, &plan, &tiers);
        assert!(dates.contains_key("b"));
        assert!(!dates.contains_key("a"), "a deleted backup gets no lock");
    }

    #[test]
    fn a_segment_is_locked_as_long_as_the_longest_locked_base_that_replays_through_it() {
        let segment = |key: &str, end: Option<&str>| crate::BinlogSegment {
            key: key.into(),
            first_event: None,
            last_event: end.map(at),
        };
        let mut inc = backup("inc", "2026-11-03T00:00:00Z");
        inc.kind = BackupKind::Incremental;
        inc.parent = Some("f2".into());
        let catalog = Catalog {
            backups: vec![
                backup("f1", "2026-11-01T00:00:00Z"),
                backup("f2", "2026-11-02T00:00:00Z"),
                inc,
                backup("unlocked", "2026-11-04T00:00:00Z"),
            ],
            binlog_segments: vec![
                segment("before-all", Some("2026-10-31T00:00:00Z")),
                segment("after-f1", Some("2026-11-01T12:00:00Z")),
                segment("after-f2", Some("2026-11-02T12:00:00Z")),
                segment("open", None),
            ],
        };
        let locks: HashMap<String, DateTime<Utc>> = [
            ("f1", "2027-06-01T00:00:00Z"),
            ("f2", "2026-12-01T00:00:00Z"),
            // An incremental is no base: replay starts at a full.
            ("inc", "2030-01-01T00:00:00Z"),
        ]
        .into_iter()
        .map(|(id, t)| (id.to_string(), utc(t)))
        .collect();
        let dates = segment_lock_dates(&catalog.backups, &catalog.binlog_segments, &locks);
        assert!(
            !dates.contains_key("before-all"),
            "no base replays through it"
        );
        assert_eq!(dates["after-f1"], utc("2027-06-01T00:00:00Z"));
        // Needed by f1 (longer) and f2.
        assert_eq!(dates["after-f2"], utc("2027-06-01T00:00:00Z"));
        assert_eq!(dates["open"], utc("2027-06-01T00:00:00Z"));
        assert!(
            segment_lock_dates(&catalog.backups, &catalog.binlog_segments, &HashMap::new())
                .is_empty()
        );
    }

    #[test]
    fn a_tier_shorter_than_its_rule_promises_is_warned_about() {
        let policy = Policy {
            keep_daily: count(7),
            keep_monthly: count(12),
            keep_yearly: Some(KeepCount::Unlimited),
            ..Policy::default()
        };
        let tiers = LockTiers {
            daily: Some(d("3d")),
            monthly: Some(d("400d")),
            yearly: Some(d("1y")),
            ..LockTiers::default()
        };
        let warnings = tier_warnings(&policy, &tiers);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("keep_daily 7 keeps each pick for about 7 days")
                && warnings[0].contains("daily is 3d"),
            "{warnings:?}"
        );
        assert!(tier_warnings(&policy, &LockTiers::default()).is_empty());
    }

    #[test]
    fn extensions_only_lengthen_and_only_into_the_future() {
        let wanted: HashMap<String, DateTime<Utc>> = [
            ("longer", "2027-01-10T00:00:00Z"),
            ("same", "2027-01-05T00:00:00Z"),
            ("shorter", "2027-01-01T00:00:00Z"),
            ("new", "2027-01-02T00:00:00Z"),
            ("past", "2026-01-02T00:00:00Z"),
        ]
        .into_iter()
        .map(|(id, t)| (id.to_string(), utc(t)))
        .collect();
        let set = |id: &str| match id {
            "longer" | "same" => Some(utc("2027-01-05T00:00:00Z")),
            "shorter" => Some(utc("2027-01-09T00:00:00Z")),
            _ => None,
        };
        let got = extensions(&wanted, set, utc("2026-11-28T00:00:00Z"));
        assert_eq!(
            got,
            vec![
                ("longer", utc("2027-01-10T00:00:00Z")),
                ("new", utc("2027-01-02T00:00:00Z")),
            ]
        );
    }

    #[test]
    fn a_lock_keeps_what_the_policy_lets_go_until_it_expires() {
        let policy = Policy {
            keep_last: count(1),
            ..Policy::default()
        };
        let mut old = backup("old", "2026-11-01T00:00:00Z");
        old.locked_until = Some(utc("2026-11-10T00:00:00Z"));
        let backups = vec![old, backup("new", "2026-11-02T00:00:00Z")];
        let (_, plan) = plan_of(backups.clone(), &policy, "2026-11-05T00:00:00Z");
        assert!(plan.keeps("old"));
        let (_, decision) = plan.decision("old").unwrap();
        assert_eq!(
            decision.reasons,
            ["expired, locked until 2026-11-10T00:00:00Z"]
        );
        assert_eq!(
            decision.reasons[0].rule(),
            crate::Rule::Locked,
            "counted under its own label"
        );
        // After the date, nothing keeps it.
        let (_, plan) = plan_of(backups, &policy, "2026-11-10T00:00:01Z");
        assert!(plan.deletes("old"));
    }
}
