//! The copies at other locations (issue 28), replayed after the primary's simulation: each copy
//! rule's location receives the backups its rule copies, when its `delay` has passed (skipping
//! what a `select: kept` rule's policy would delete at once, as the copier judges it), moves
//! them through the rule's storage-class transitions, and runs its own retention (the rule's
//! policy, over what the location holds) after each copy and at each sweep.
//!
//! What the simulation counts per location and day: the copies held (whole restore points),
//! their storage per class, the copies made, skipped and deleted, and the deletions made before
//! a class's minimum storage duration (each charged the rest of that minimum, in byte-days:
//! what the store bills for nothing).

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use serde::Serialize;
use sexton_model::copies::{self, CopyRule, CopySelect};
use sexton_retention::judge::deleted_at_once;
use sexton_retention::{evaluate, BackupRecord, BackupStatus, Catalog, PlanError, Verdict};

use crate::days::SimulatedBackup;

/// The label of storage written without a class (the location's default).
pub const DEFAULT_CLASS: &str = "default";

/// One location's simulation.
#[derive(Clone, Debug, Serialize)]
pub struct LocationSimulation {
    pub rule: CopyRule,
    pub days: Vec<LocationDay>,
    pub summary: LocationSummary,
}

/// What a location holds at the end of one simulated day, and what happened there that day.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LocationDay {
    pub date: NaiveDate,
    /// The backups whose copies the location holds (indices into
    /// [`crate::Simulation::backups`]), newest first.
    pub backups: Vec<usize>,
    /// Copies held (each whole: a restore point at the location).
    pub count: usize,
    pub storage_bytes: u64,
    /// Storage per class ([`DEFAULT_CLASS`]: written without one).
    pub storage_by_class: BTreeMap<String, u64>,
    pub oldest_restorable: Option<DateTime<Utc>>,
    pub copied: usize,
    /// Not copied: the rule's policy would have deleted the copy at once (`select: kept`).
    pub skipped: usize,
    pub deleted: usize,
    /// Of the day's deletions, those before their class's minimum storage duration, and what
    /// they are charged for nothing: bytes × the days of the minimum not reached.
    pub deleted_early: usize,
    pub early_charged_byte_days: u64,
}

/// A location's figures over the whole simulation.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LocationSummary {
    pub copied: usize,
    pub skipped: usize,
    pub deleted: usize,
    pub deleted_early: usize,
    pub early_charged_byte_days: u64,
    /// The last day's count, storage and storage per class.
    pub count: usize,
    pub storage_bytes: u64,
    pub storage_by_class: BTreeMap<String, u64>,
    pub peak_storage_bytes: u64,
}

/// A copy the location holds.
struct Held {
    /// Index into the primary's backups.
    backup: usize,
    record: BackupRecord,
    size: u64,
    class: Option<String>,
    class_since: DateTime<Utc>,
}

/// What happens at an instant: copies arriving (the backups whose delay ends then), or a
/// sweep.
#[derive(Clone, Copy, Debug)]
struct Event {
    at: DateTime<Utc>,
    /// The backup whose copy is due, or `None` for a sweep.
    arrival: Option<usize>,
}

/// The backups `rule` copies from the primary's simulation: completed ones its `select` picks,
/// with the instant each copy is due.
fn arrivals(rule: &CopyRule, backups: &[SimulatedBackup]) -> Vec<(usize, DateTime<Utc>)> {
    let delay = rule.delay.map_or(TimeDelta::zero(), |delay| delay.delta());
    backups
        .iter()
        .enumerate()
        .filter(|(_, backup)| !backup.failed())
        .filter(|(_, backup)| {
            rule.select
                .picks(backup.record.kind, !backup.record.volumes.is_empty())
        })
        .map(|(index, backup)| (index, backup.taken_at() + delay))
        .collect()
}

/// The copy of a primary backup as the location's engine sees it: the source's times, kind,
/// chain and tags; none of the source's holds (those awaiting this copy end with it).
fn copy_record(backup: &SimulatedBackup) -> BackupRecord {
    let mut record = backup.record.clone();
    record.status = BackupStatus::Completed;
    record.holds.clear();
    record.locked_until = None;
    for volume in &mut record.volumes {
        volume.expiring = false;
    }
    record
}

/// Replays `rule`'s location over `[from, until)`: `sweeps` are the fleet's sweep instants,
/// `day_ends` the end of each simulated day (the primary's).
pub(crate) fn simulate_location(
    rule: &CopyRule,
    backups: &[SimulatedBackup],
    sweeps: &[DateTime<Utc>],
    first_date: NaiveDate,
    day_ends: &[DateTime<Utc>],
) -> Result<LocationSimulation, (DateTime<Utc>, PlanError)> {
    let until = *day_ends.last().expect("at least one day");
    let due = arrivals(rule, backups);
    let mut events: Vec<Event> = due
        .iter()
        .filter(|&&(_, at)| at < until)
        .map(|&(index, at)| Event {
            at,
            arrival: Some(index),
        })
        .chain(sweeps.iter().map(|&at| Event { at, arrival: None }))
        .collect();
    // Arrivals before a sweep at the same instant, in the order the backups were taken.
    events.sort_by_key(|event| (event.at, event.arrival.is_none(), event.arrival));
    let by_id: BTreeMap<&str, usize> = backups
        .iter()
        .enumerate()
        .map(|(index, backup)| (backup.record.id.as_str(), index))
        .collect();

    let mut held: Vec<Held> = Vec::new();
    let mut days: Vec<LocationDay> = Vec::with_capacity(day_ends.len());
    let mut today = LocationDay {
        date: first_date,
        ..LocationDay::default()
    };
    let mut summary = LocationSummary::default();
    let mut day_index = 0;
    let close = |held: &[Held], today: &mut LocationDay| {
        let mut indices: Vec<usize> = held.iter().map(|copy| copy.backup).collect();
        indices.sort_unstable_by(|a, b| b.cmp(a));
        today.backups = indices;
        today.count = held.len();
        today.storage_bytes = held.iter().map(|copy| copy.size).sum();
        today.storage_by_class = by_class(held);
        today.oldest_restorable = held
            .iter()
            .map(|copy| backups[copy.backup].taken_at())
            .min();
    };
    for event in &events {
        while event.at >= day_ends[day_index] {
            close(&held, &mut today);
            day_index += 1;
            let next = LocationDay {
                date: first_date + TimeDelta::days(day_index as i64),
                ..LocationDay::default()
            };
            days.push(std::mem::replace(&mut today, next));
        }
        let now = event.at;
        if let Some(index) = event.arrival {
            if held.iter().any(|copy| copy.backup == index) {
                continue;
            }
            if rule.select == CopySelect::Kept {
                // The location's view: what it holds, and every copy still awaited there (due
                // later, taken by now), the candidate with them.
                let mut view: Vec<BackupRecord> =
                    held.iter().map(|copy| copy.record.clone()).collect();
                view.extend(
                    due.iter()
                        .filter(|&&(other, at)| {
                            (other == index || at > now) && backups[other].taken_at() <= now
                        })
                        .map(|&(other, _)| copy_record(&backups[other])),
                );
                if deleted_at_once(view, &backups[index].record.id, &rule.policy, now).is_some() {
                    today.skipped += 1;
                    summary.skipped += 1;
                    continue;
                }
            }
            // The chain first: an ancestor the location lacks (skipped, or deleted there
            // before this copy needed it) is copied again.
            let mut chain = vec![index];
            let mut cursor = index;
            while let Some(parent) = backups[cursor]
                .record
                .parent
                .as_deref()
                .and_then(|id| by_id.get(id).copied())
            {
                if held.iter().any(|copy| copy.backup == parent) || chain.contains(&parent) {
                    break;
                }
                chain.push(parent);
                cursor = parent;
            }
            for &copied in chain.iter().rev() {
                let backup = &backups[copied];
                let age_days = (now - backup.taken_at()).num_seconds() as f64 / 86_400.0;
                let class = rule
                    .class_at(age_days)
                    .or(rule.storage_class.as_deref())
                    .map(str::to_owned);
                held.push(Held {
                    backup: copied,
                    record: copy_record(backup),
                    size: backup.size_bytes,
                    class,
                    class_since: now,
                });
                today.copied += 1;
                summary.copied += 1;
            }
        }
        // The copier's transitions, then the location's retention run.
        for copy in &mut held {
            let taken = backups[copy.backup].taken_at();
            if let Some(class) = rule.transition_due(taken, now, copy.class.as_deref()) {
                copy.class = Some(class.to_owned());
                copy.class_since = now;
            }
        }
        run_retention(rule, &mut held, now, &mut today).map_err(|err| (now, err))?;
        summary.peak_storage_bytes = summary
            .peak_storage_bytes
            .max(held.iter().map(|copy| copy.size).sum());
    }
    while days.len() < day_ends.len() {
        close(&held, &mut today);
        let next = LocationDay {
            date: first_date + TimeDelta::days(days.len() as i64 + 1),
            ..LocationDay::default()
        };
        days.push(std::mem::replace(&mut today, next));
    }
    for day in &days {
        summary.deleted += day.deleted;
        summary.deleted_early += day.deleted_early;
        summary.early_charged_byte_days += day.early_charged_byte_days;
    }
    let last = days.last().expect("at least one day");
    summary.count = last.count;
    summary.storage_bytes = last.storage_bytes;
    summary.storage_by_class = last.storage_by_class.clone();
    Ok(LocationSimulation {
        rule: rule.clone(),
        days,
        summary,
    })
}

/// One retention run at the location: the rule's policy over what it holds. Only whole copies
/// go (a partial verdict keeps the copy whole, as the retention-worker does at a location).
fn run_retention(
    rule: &CopyRule,
    held: &mut Vec<Held>,
    now: DateTime<Utc>,
    today: &mut LocationDay,
) -> Result<(), PlanError> {
    if held.is_empty() {
        return Ok(());
    }
    let catalog = Catalog {
        backups: held.iter().map(|copy| copy.record.clone()).collect(),
        binlog_segments: Vec::new(),
    };
    let evaluation = evaluate(&catalog, &rule.policy, now)?;
    let verdicts: Vec<Verdict> = (0..held.len())
        .map(|index| evaluation.verdict_at(index))
        .collect();
    drop(evaluation);
    let mut verdict = verdicts.iter();
    held.retain(|copy| {
        if verdict.next() != Some(&Verdict::Delete) {
            return true;
        }
        today.deleted += 1;
        let class = copy.class.as_deref();
        if let Some(minimum) = class.and_then(|name| copies::storage_class(name).ok()) {
            let days = u32::try_from((now - copy.class_since).num_days().max(0)).unwrap_or(0);
            if days < minimum.minimum_days {
                today.deleted_early += 1;
                today.early_charged_byte_days += copy.size * u64::from(minimum.minimum_days - days);
            }
        }
        false
    });
    Ok(())
}

fn by_class(held: &[Held]) -> BTreeMap<String, u64> {
    let mut classes: BTreeMap<String, u64> = BTreeMap::new();
    for copy in held {
        *classes
            .entry(
                copy.class
                    .clone()
                    .unwrap_or_else(|| DEFAULT_CLASS.to_owned()),
            )
            .or_default() += copy.size;
    }
    classes
}
