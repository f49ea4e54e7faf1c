//! The summary of a simulation: the steady state, the maxima, which rule kept what, and the
//! things a user would not expect from reading the policy.
//!
//! Which rule kept a backup is read from the engine's reasons (the strings `sexton retention
//! plan` prints), so the summary explains the engine's decisions and never re-derives them.
//! Rule use is counted over the days' samples (the state at each day's end).

use std::collections::BTreeSet;

use chrono::{NaiveDate, TimeDelta};
use serde::Serialize;
use sexton_retention::{KeepCount, Policy};

use crate::days::{Day, SimulatedBackup};
use crate::measures::{human_duration, Gap};
use crate::scenario::Scenario;

/// How many final days must show the same count for it to be called steady.
const STEADY_DAYS: usize = 7;

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub n_taken: usize,
    pub n_failed: usize,
    /// The median interval between ticks, in seconds.
    pub interval_seconds: Option<i64>,
    /// The window the policy promises (its longest stated time window), if any.
    pub promised_window: Option<String>,
    pub steady: Steady,
    pub max_count: DayValue,
    /// The most restore points at any run (between a backup and the next sweep).
    pub max_peak_count: DayValue,
    pub max_storage_bytes: DayValue,
    pub max_peak_storage_bytes: DayValue,
    /// With Object Locks (issue 29): the most backups and bytes kept only by their locks on
    /// any day, and the last day's; `None` without locks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_only: Option<LockedOnly>,
    /// With a binlog archive (issue 30): its largest size and the last day's, and how far
    /// back point-in-time recovery reached then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binlog: Option<BinlogSummary>,
    pub max_gap: Option<DayGap>,
    pub rules: Vec<RuleUse>,
    pub surprises: Vec<Surprise>,
}

/// The binlog archive over a simulation (issue 30).
#[derive(Clone, Debug, Serialize)]
pub struct BinlogSummary {
    pub max_bytes: DayValue,
    pub last_segments: u64,
    pub last_bytes: u64,
    /// Of the last day's segments, those kept only for backups restorable to their own end.
    pub last_own_range_segments: u64,
    pub last_pitr_from: Option<chrono::DateTime<chrono::Utc>>,
}

/// What Object Locks keep beyond the policy over a simulation.
#[derive(Clone, Debug, Serialize)]
pub struct LockedOnly {
    pub max_count: DayValue,
    pub max_bytes: DayValue,
    pub last_count: u64,
    pub last_bytes: u64,
}

/// The last day's restore points and storage, and since when the count has not changed (at
/// least the final week, else `None`: rules such as keep_monthly are still accruing).
#[derive(Clone, Debug, Serialize)]
pub struct Steady {
    pub count: usize,
    pub storage_bytes: u64,
    pub settled_on: Option<NaiveDate>,
}

/// A maximum and the first day it was reached.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DayValue {
    pub value: u64,
    pub on: Option<NaiveDate>,
}

/// The worst gap of the simulation and the first day it was seen.
#[derive(Clone, Debug, Serialize)]
pub struct DayGap {
    pub on: NaiveDate,
    #[serde(flatten)]
    pub gap: Gap,
    pub human: String,
}

/// One rule of the policy and what it kept.
#[derive(Clone, Debug, Serialize)]
pub struct RuleUse {
    /// The policy key: `keep_daily`, `recovery_window`, ...
    pub rule: &'static str,
    /// Its value as written: `30`, `"30d"`, `[["a"]]`.
    pub setting: String,
    /// Distinct backups it kept at some day's end.
    pub backups: usize,
    /// Of those, the ones no other rule kept that day.
    pub alone: usize,
}

/// Something the policy does that its text does not say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Surprise {
    pub kind: SurpriseKind,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SurpriseKind {
    /// The schedule does not fire in the simulated period.
    NoBackups,
    /// A rule of the policy kept no backup on any day.
    RuleNeverKeeps,
    /// A keep_hourly/daily/weekly/monthly count with backups sparser than its period: it keeps
    /// N backups, which span more than N periods.
    CountSpansLonger,
    /// keep_last N with backups more often than daily: N backups are less than N days.
    KeepLastShort,
    /// recovery_window keeps one backup more than its days: the newest before the window.
    WindowKeepsOneMore,
    /// A time window shorter than the interval between backups.
    WindowShorterThanInterval,
    /// The floor (newest completed full) was the only reason a backup existed.
    FloorKeeps,
    /// Backups kept only because kept incrementals build on them.
    ChainKeeps,
    /// Between a backup and the next sweep there are more backups than at the day's end.
    PeakAboveDayEnd,
    /// Failed backups widen the worst gap beyond the schedule's interval.
    FailuresWidenGaps,
}

/// Who kept a backup, read from one of the engine's reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Keeper {
    /// A policy rule, by its key.
    Rule(&'static str),
    Floor,
    /// Needed by a kept backup, a pending merge, an immutable chain or a kept volume.
    Chain,
    /// A failed backup within its grace period.
    Failed,
    /// An unexpired Object Lock, the policy letting it go (issue 29).
    Lock,
    /// Holds, legal holds, in progress, anything else.
    Other,
}

/// Classifies one of the engine's keep reasons.
pub fn keeper_of(reason: &str) -> Keeper {
    let reason = reason.strip_prefix("oldest ").unwrap_or(reason);
    const COUNTS: [(&str, &str); 6] = [
        ("last snapshot", "keep_last"),
        ("hourly snapshot", "keep_hourly"),
        ("daily snapshot", "keep_daily"),
        ("weekly snapshot", "keep_weekly"),
        ("monthly snapshot", "keep_monthly"),
        ("yearly snapshot", "keep_yearly"),
    ];
    const WITHIN_BUCKETS: [(&str, &str); 5] = [
        ("hourly within ", "keep_within_hourly"),
        ("daily within ", "keep_within_daily"),
        ("weekly within ", "keep_within_weekly"),
        ("monthly within ", "keep_within_monthly"),
        ("yearly within ", "keep_within_yearly"),
    ];
    if let Some(&(_, rule)) = COUNTS.iter().find(|(text, _)| reason == *text) {
        return Keeper::Rule(rule);
    }
    if let Some(&(_, rule)) = WITHIN_BUCKETS
        .iter()
        .find(|(prefix, _)| reason.starts_with(prefix))
    {
        return Keeper::Rule(rule);
    }
    let prefixes: [(&str, Keeper); 12] = [
        ("within ", Keeper::Rule("keep_within")),
        ("has tags ", Keeper::Rule("keep_tags")),
        ("retention_duration ", Keeper::Rule("retention_duration")),
        ("recovery_window ", Keeper::Rule("recovery_window")),
        ("floor:", Keeper::Floor),
        ("needed by ", Keeper::Chain),
        ("merge into ", Keeper::Chain),
        ("immutable chain ", Keeper::Chain),
        ("volume ", Keeper::Chain),
        ("failed", Keeper::Failed),
        ("expired, locked until ", Keeper::Lock),
        ("locked until ", Keeper::Lock),
    ];
    prefixes
        .iter()
        .find(|(prefix, _)| reason.starts_with(prefix))
        .map_or(Keeper::Other, |&(_, keeper)| keeper)
}

/// The policy's rules, as (key, setting as written), in the policy file's order.
pub fn policy_rules(policy: &Policy) -> Vec<(&'static str, String)> {
    let mut rules = Vec::new();
    let count = |count: KeepCount| count.as_restic().to_string();
    let counts = [
        "keep_last",
        "keep_hourly",
        "keep_daily",
        "keep_weekly",
        "keep_monthly",
        "keep_yearly",
    ];
    for (key, value) in counts.into_iter().zip(policy.counts()) {
        if let Some(value) = value {
            rules.push((key, count(value)));
        }
    }
    if let Some(within) = policy.keep_within {
        rules.push(("keep_within", format!("{within}")));
    }
    let buckets = [
        "keep_within_hourly",
        "keep_within_daily",
        "keep_within_weekly",
        "keep_within_monthly",
        "keep_within_yearly",
    ];
    for (key, value) in buckets.into_iter().zip(policy.within_buckets()) {
        if let Some(value) = value {
            rules.push((key, format!("{value}")));
        }
    }
    if !policy.keep_tags.is_empty() {
        let lists: Vec<String> = policy
            .keep_tags
            .iter()
            .map(|list| list.to_string())
            .collect();
        rules.push(("keep_tags", lists.join(" ")));
    }
    if let Some(days) = policy.retention_duration {
        rules.push(("retention_duration", days.0.to_string()));
    }
    if let Some(window) = policy.recovery_window {
        rules.push(("recovery_window", window.to_string()));
    }
    rules
}

pub(crate) fn summarise(scenario: &Scenario, backups: &[SimulatedBackup], days: &[Day]) -> Summary {
    let policy = &scenario.policy;
    let interval = median_interval(backups);
    let last_day = days.last().expect("at least one day");
    let promised_window = promised_window(policy);

    let max_of = |value: &dyn Fn(&Day) -> u64| {
        days.iter().fold(DayValue::default(), |best, day| {
            let value = value(day);
            if best.on.is_none() || value > best.value {
                DayValue {
                    value,
                    on: Some(day.date),
                }
            } else {
                best
            }
        })
    };
    let max_gap = days
        .iter()
        .filter_map(|day| day.worst_gap.as_ref().map(|gap| (day.date, gap)))
        .fold(None::<(NaiveDate, &Gap)>, |best, (date, gap)| match best {
            Some((_, best_gap)) if best_gap.seconds >= gap.seconds => best,
            _ => Some((date, gap)),
        })
        .map(|(on, gap)| DayGap {
            on,
            gap: gap.clone(),
            human: human_duration(gap.duration()),
        });

    // Rule use over the days' samples.
    let rules = policy_rules(policy);
    let mut kept_by: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); rules.len()];
    let mut alone: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); rules.len()];
    let mut floor_only_days: BTreeSet<usize> = BTreeSet::new();
    let mut window_base_seen = false;
    for (backup_index, backup) in backups.iter().enumerate() {
        for span in &backup.spans {
            let keepers: BTreeSet<Keeper> = span.reasons.iter().map(|r| keeper_of(r)).collect();
            let rule_keepers: Vec<&'static str> = keepers
                .iter()
                .filter_map(|keeper| match keeper {
                    Keeper::Rule(rule) => Some(*rule),
                    _ => None,
                })
                .collect();
            for (position, (rule, _)) in rules.iter().enumerate() {
                if rule_keepers.contains(rule) {
                    kept_by[position].insert(backup_index);
                    if rule_keepers.len() == 1 {
                        alone[position].insert(backup_index);
                    }
                }
            }
            if keepers.len() == 1 && keepers.contains(&Keeper::Floor) {
                floor_only_days.extend(span.first_day..=span.last_day);
            }
            window_base_seen |= span
                .reasons
                .iter()
                .any(|reason| reason.ends_with(": newest before the window"));
        }
    }
    let rule_uses: Vec<RuleUse> = rules
        .iter()
        .enumerate()
        .map(|(position, (rule, setting))| RuleUse {
            rule,
            setting: setting.clone(),
            backups: kept_by[position].len(),
            alone: alone[position].len(),
        })
        .collect();

    let n_failed = backups.iter().filter(|backup| backup.failed()).count();
    let mut summary = Summary {
        n_taken: backups.len(),
        n_failed,
        interval_seconds: interval.map(|interval| interval.num_seconds()),
        promised_window: promised_window.clone(),
        steady: Steady {
            count: last_day.count,
            storage_bytes: last_day.storage_bytes,
            settled_on: settled_on(days),
        },
        max_count: max_of(&|day| day.count as u64),
        max_peak_count: max_of(&|day| day.peak_count as u64),
        max_storage_bytes: max_of(&|day| day.storage_bytes),
        max_peak_storage_bytes: max_of(&|day| day.peak_storage_bytes),
        locked_only: scenario.lock.as_ref().map(|_| LockedOnly {
            max_count: max_of(&|day| day.n_locked_only as u64),
            max_bytes: max_of(&|day| day.locked_only_bytes),
            last_count: last_day.n_locked_only as u64,
            last_bytes: last_day.locked_only_bytes,
        }),
        binlog: scenario.binlog.map(|_| {
            let last = last_day.binlog.unwrap_or_default();
            BinlogSummary {
                max_bytes: max_of(&|day| day.binlog.map_or(0, |b| b.bytes)),
                last_segments: last.segments as u64,
                last_bytes: last.bytes,
                last_own_range_segments: last.own_range_segments as u64,
                last_pitr_from: last.pitr_from,
            }
        }),
        max_gap,
        rules: rule_uses,
        surprises: Vec::new(),
    };
    summary.surprises = surprises(
        scenario,
        backups,
        days,
        &summary,
        interval,
        &floor_only_days,
        window_base_seen,
    );
    summary
}

/// The median interval between consecutive ticks.
fn median_interval(backups: &[SimulatedBackup]) -> Option<TimeDelta> {
    let mut intervals: Vec<TimeDelta> = backups
        .windows(2)
        .map(|pair| pair[1].taken_at() - pair[0].taken_at())
        .collect();
    intervals.sort();
    intervals.get(intervals.len() / 2).copied()
}

/// The policy's longest stated time window, as written.
fn promised_window(policy: &Policy) -> Option<String> {
    let reference = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH + TimeDelta::days(365 * 50);
    let start = crate::measures::promised_window_start(policy, reference)?;
    Some(human_duration(reference - start))
}

/// The first day of the final run of days with the last day's count, if that run is at least
/// [`STEADY_DAYS`] long.
fn settled_on(days: &[Day]) -> Option<NaiveDate> {
    let last = days.last()?.count;
    let run = days
        .iter()
        .rev()
        .take_while(|day| day.count == last)
        .count();
    (run >= STEADY_DAYS).then(|| days[days.len() - run].date)
}

/// `interval` × `n`, saturating (counts go up to 2³² − 1).
fn times(interval: TimeDelta, n: i64) -> TimeDelta {
    i32::try_from(n)
        .ok()
        .and_then(|n| interval.checked_mul(n))
        .unwrap_or(TimeDelta::MAX)
}

/// The period a count rule's bucket covers, for comparing with the schedule's interval.
fn count_period(rule: &str) -> Option<(TimeDelta, &'static str)> {
    match rule {
        "keep_hourly" => Some((TimeDelta::hours(1), "hours")),
        "keep_daily" => Some((TimeDelta::days(1), "days")),
        "keep_weekly" => Some((TimeDelta::weeks(1), "weeks")),
        "keep_monthly" => Some((TimeDelta::days(31), "months")),
        _ => None,
    }
}

/// What the policy did that its text does not say, in the order a reader meets them.
fn surprises(
    scenario: &Scenario,
    backups: &[SimulatedBackup],
    days: &[Day],
    summary: &Summary,
    interval: Option<TimeDelta>,
    floor_only_days: &BTreeSet<usize>,
    window_base_seen: bool,
) -> Vec<Surprise> {
    if backups.is_empty() {
        return vec![no_backups(scenario, days)];
    }
    let policy = &scenario.policy;
    let every = interval
        .map(human_duration)
        .unwrap_or_else(|| "-".to_owned());
    let mut found = rules_never_keeping(summary);
    if let Some(interval) = interval {
        found.extend(counts_spanning_longer(summary, interval, &every));
        found.extend(keep_last_short(policy, interval, &every));
        found.extend(windows_shorter(policy, interval, &every));
    }
    if window_base_seen {
        found.extend(window_keeps_one_more(policy, backups, days));
    }
    found.extend(floor_keeps(floor_only_days, days));
    found.extend(chain_keeps(backups, days));
    found.extend(peak_above_day_end(days));
    if let Some(interval) = interval {
        found.extend(failures_widen_gaps(summary, interval, &every));
    }
    found
}

/// A surprise of `kind`, saying `message`.
fn surprise(kind: SurpriseKind, message: String) -> Surprise {
    Surprise { kind, message }
}

/// The schedule does not fire in the simulated period.
fn no_backups(scenario: &Scenario, days: &[Day]) -> Surprise {
    surprise(
        SurpriseKind::NoBackups,
        format!(
            "the schedule {} does not fire between {} and {}",
            scenario.cron,
            days.first()
                .map_or_else(String::new, |d| d.date.to_string()),
            days.last().map_or_else(String::new, |d| d.date.to_string()),
        ),
    )
}

/// The rules of the policy that kept no backup on any day.
fn rules_never_keeping(summary: &Summary) -> Vec<Surprise> {
    let mut found = Vec::new();
    for rule in &summary.rules {
        if rule.backups == 0 {
            let why = match rule.rule {
                "keep_tags" => ": no backup of this schedule carries those tags",
                _ => "",
            };
            found.push(surprise(
                SurpriseKind::RuleNeverKeeps,
                format!(
                    "{} {} never kept a backup at any day's end{why}",
                    rule.rule, rule.setting
                ),
            ));
        }
    }
    found
}

/// The count rules whose N backups, a backup every `interval`, span more than N periods.
fn counts_spanning_longer(summary: &Summary, interval: TimeDelta, every: &str) -> Vec<Surprise> {
    let mut found = Vec::new();
    for rule in &summary.rules {
        let Some((period, unit)) = count_period(rule.rule) else {
            continue;
        };
        let Ok(n) = rule.setting.parse::<i64>() else {
            continue;
        };
        if n > 0 && interval > period && rule.backups > 0 {
            found.push(surprise(
                SurpriseKind::CountSpansLonger,
                format!(
                    "{} {n} counts backups, not {unit}: with a backup every {every} it keeps \
                     {n} backups spanning about {}",
                    rule.rule,
                    human_duration(times(interval, n))
                ),
            ));
        }
    }
    found
}

/// keep_last N with backups more often than daily: N backups are less than N days.
fn keep_last_short(policy: &Policy, interval: TimeDelta, every: &str) -> Option<Surprise> {
    let Some(KeepCount::Limited(n)) = policy.keep_last else {
        return None;
    };
    (interval < TimeDelta::days(1)).then(|| {
        surprise(
            SurpriseKind::KeepLastShort,
            format!(
                "keep_last {n} keeps the newest {n} backups: with a backup every {every} \
                 that is {} of history, not {n} days",
                human_duration(times(interval, i64::from(n.get())))
            ),
        )
    })
}

/// The windows shorter than the time between backups.
fn windows_shorter(policy: &Policy, interval: TimeDelta, every: &str) -> Vec<Surprise> {
    let windows = [
        (
            "recovery_window",
            policy
                .recovery_window
                .map(|w| (w.to_string(), w.as_delta())),
        ),
        (
            "retention_duration",
            policy
                .retention_duration
                .map(|d| (d.0.to_string(), d.as_delta())),
        ),
    ];
    let mut found = Vec::new();
    for (rule, window) in windows {
        if let Some((text, delta)) = window {
            if delta < interval {
                found.push(surprise(
                    SurpriseKind::WindowShorterThanInterval,
                    format!(
                        "{rule} {text} is shorter than the {every} between backups: the \
                         window often holds no backup, and the floor or the newest backup \
                         before the window does the keeping"
                    ),
                ));
            }
        }
    }
    found
}

/// recovery_window keeps one backup more than those inside it: the newest before it.
fn window_keeps_one_more(
    policy: &Policy,
    backups: &[SimulatedBackup],
    days: &[Day],
) -> Option<Surprise> {
    let window = policy.recovery_window?;
    let last = days.len() - 1;
    let in_window = backups
        .iter()
        .filter(|backup| {
            backup.reasons_on(last).is_some_and(|reasons| {
                reasons
                    .iter()
                    .any(|reason| *reason == format!("recovery_window {window}"))
            })
        })
        .count();
    Some(surprise(
        SurpriseKind::WindowKeepsOneMore,
        format!(
            "recovery_window {window} keeps {} backups at the last day's end, not {in_window}: \
             the {in_window} inside the window and the newest before it, kept so that the \
             window's first instant stays recoverable (barman 274)",
            in_window + 1
        ),
    ))
}

/// The days on which the floor alone kept a backup.
fn floor_keeps(floor_only_days: &BTreeSet<usize>, days: &[Day]) -> Option<Surprise> {
    let &first = floor_only_days.first()?;
    Some(surprise(
        SurpriseKind::FloorKeeps,
        format!(
            "on {} of {} days (first {}) the floor, the newest completed full backup, was \
             the only reason a backup existed: no rule kept it",
            floor_only_days.len(),
            days.len(),
            days[first].date
        ),
    ))
}

/// The backups of the last day kept only because kept incrementals build on them.
fn chain_keeps(backups: &[SimulatedBackup], days: &[Day]) -> Option<Surprise> {
    let last = days.len() - 1;
    let chain_only = days[last]
        .backups
        .iter()
        .filter(|&&index| {
            backups[index].reasons_on(last).is_some_and(|reasons| {
                reasons
                    .iter()
                    .all(|reason| keeper_of(reason) == Keeper::Chain)
            })
        })
        .count();
    (chain_only > 0).then(|| {
        surprise(
            SurpriseKind::ChainKeeps,
            format!(
                "on the last day {chain_only} of {} backups exist only because kept \
                 incrementals build on them",
                days[last].backups.len()
            ),
        )
    })
}

/// The days with more backups between a backup and the next sweep than at the day's end.
fn peak_above_day_end(days: &[Day]) -> Option<Surprise> {
    let peak_days: Vec<&Day> = days
        .iter()
        .filter(|day| day.peak_count > day.count)
        .collect();
    // The first day with the largest excess.
    let worst = peak_days
        .iter()
        .max_by_key(|day| (day.peak_count - day.count, std::cmp::Reverse(day.date)))?;
    Some(surprise(
        SurpriseKind::PeakAboveDayEnd,
        format!(
            "on {} days there are more backups between a backup and the next retention \
             sweep than at the day's end (on {}: {} against {}): storage must hold the peak",
            peak_days.len(),
            worst.date,
            worst.peak_count,
            worst.count
        ),
    ))
}

/// Failed backups that make the worst gap wider than the time between backups.
fn failures_widen_gaps(summary: &Summary, interval: TimeDelta, every: &str) -> Option<Surprise> {
    let gap = summary.max_gap.as_ref()?;
    (summary.n_failed > 0 && gap.gap.duration() > interval).then(|| {
        surprise(
            SurpriseKind::FailuresWidenGaps,
            format!(
                "{} of {} backups failed: the worst gap between restore points is {}, \
                 against a backup every {every}",
                summary.n_failed, summary.n_taken, gap.human
            ),
        )
    })
}
