//! The simulation loop: the fleet's retention decisions replayed over a period, without NATS
//! or S3.
//!
//! Events are the schedule's ticks (from [`CronSpec`], the scheduler's own cron code) and the
//! retention sweeps (every [`crate::SweepInterval`], as the scheduler asks for them), in time
//! order. At a tick the simulated executor takes a backup: full or incremental as
//! `sexton_retention::cadence` answers (the scheduler's code), failed when the scenario says
//! so; it completes at once. After every event the engine runs over what exists, exactly as
//! the retention-worker runs it over a group's catalog, and what it deletes disappears
//! (a partial verdict drops the deleted volumes; a planned merge is carried out as an executor
//! would, and the next run deletes the sources). The state after the last run of each day is
//! that day's sample: which backups exist and the engine's reasons for each.
//!
//! The engine only ever sees what exists: a year of hourly backups is 8,760 runs over a few
//! hundred backups each, not over the growing history.

use chrono::{DateTime, LocalResult, NaiveDate, NaiveTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use sexton_retention::{
    next_backup_kind, next_volume_kinds, BackupKind, BackupRecord, BackupStatus, Catalog,
    PlanError, Policy, Verdict, VolumeArtifact,
};
use sexton_schedule::CronSpec;

use crate::days::{BinlogDay, Day, KeepSpan, SimulatedBackup};
use crate::measures::Gap;
use crate::random::SplitMix64;
use crate::scenario::{Failures, Scenario, ScenarioError};
use crate::summary::{summarise, Summary};

mod engine_run;

/// The most ticks plus sweeps one simulation runs (a year of backups every minute is
/// 525,600): beyond that the answer would take minutes and say nothing a shorter period
/// does not.
pub const MAX_EVENTS: usize = 2_000_000;

/// Why a simulation could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimulationError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(
        "the schedule and the sweeps make more than {MAX_EVENTS} engine runs in {days} days; \
         simulate fewer days or sweep less often"
    )]
    TooManyEvents { days: u32 },
    /// The engine refused the simulated catalog: the policy is the cause (the simulated
    /// records are always well formed).
    #[error("retention at {at}: {source}")]
    Engine {
        at: DateTime<Utc>,
        source: PlanError,
    },
}

impl SimulationError {
    /// The same scenario fails the same way: nothing here is retryable.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// One simulation's result: every backup taken, one sample per day, and the summary.
#[derive(Clone, Debug, Serialize)]
pub struct Simulation {
    pub scenario: Scenario,
    /// The zone days are cut in: the cron's `CRON_TZ`, else UTC.
    pub zone: String,
    pub from: DateTime<Utc>,
    /// The end of the last day (exclusive).
    pub until: DateTime<Utc>,
    /// Engine runs: one per tick and one per sweep (one when both fall on the same instant).
    pub n_runs: usize,
    /// Every backup the schedule took, in tick order, as the executor reported it.
    pub backups: Vec<SimulatedBackup>,
    pub days: Vec<Day>,
    pub summary: Summary,
    /// Each copy rule's location (issue 28): what it holds day by day, storage per class,
    /// copies made, skipped and deleted, and what early deletions cost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<crate::locations::LocationSimulation>,
    /// What can be restored at the end (issue 47): the recovery value of what exists after
    /// the last run (its archive included, when simulated), at `until`.
    pub recovery: sexton_retention::recovery::Recovery,
    /// What exists after the last run, as the engine sees it.
    #[serde(skip)]
    pub final_catalog: Catalog,
    /// The bytes each entry of `final_catalog` takes (after partial deletions and merges).
    #[serde(skip)]
    pub final_sizes: Vec<u64>,
}

/// Runs the scenario. Pure: the same scenario gives the same simulation.
pub fn simulate(scenario: &Scenario) -> Result<Simulation, SimulationError> {
    simulate_with_progress(scenario, &mut |_, _| {})
}

/// [`simulate`], telling `progress(done, total)` after each event (a tick or a sweep) so a
/// terminal can show how far a long simulation is (issue 26: a month of backups every minute
/// ran for minutes in silence). The callback only observes.
pub fn simulate_with_progress(
    scenario: &Scenario,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Simulation, SimulationError> {
    scenario.validate()?;
    let zone: Tz = scenario.cron.zone().unwrap_or(Tz::UTC);
    let first_date = scenario.from.with_timezone(&zone).date_naive();
    let n_days = scenario.days.get() as usize;
    let day_ends: Vec<DateTime<Utc>> = (1..=n_days)
        .map(|offset| local_midnight(&zone, first_date + TimeDelta::days(offset as i64)))
        .collect();
    let until = *day_ends.last().expect("at least one day");
    let events = events(scenario, until)?;

    let mut fleet = Fleet::new(scenario);
    let mut days: Vec<Day> = Vec::with_capacity(n_days);
    let mut today = DayTally::default();
    let mut sample = Sample::default();
    let mut day_index = 0;
    for (position, event) in events.iter().enumerate() {
        progress(position + 1, events.len());
        while event.at >= day_ends[day_index] {
            days.push(fleet.close_day(first_date, day_index, &sample, &today));
            today = DayTally::starting_with(&sample);
            day_index += 1;
        }
        if event.tick {
            let failed = fleet.take_backup(event.at);
            today.taken += 1;
            today.failed += usize::from(failed);
        }
        let last_of_day = events
            .get(position + 1)
            .is_none_or(|next| next.at >= day_ends[day_index]);
        let outcome =
            fleet
                .run_engine(event.at, last_of_day)
                .map_err(|source| SimulationError::Engine {
                    at: event.at,
                    source,
                })?;
        today.deleted += outcome.n_deleted;
        today.peak_count = today.peak_count.max(outcome.count);
        today.peak_storage_bytes = today.peak_storage_bytes.max(fleet.storage_bytes());
        if let Some(new_sample) = outcome.sample {
            sample = new_sample;
        }
    }
    while days.len() < n_days {
        days.push(fleet.close_day(first_date, days.len(), &sample, &today));
        today = DayTally::starting_with(&sample);
    }
    let n_runs = events.len();
    let backups = fleet.backups;
    let summary = summarise(scenario, &backups, &days);
    // Each location's retention runs when the primary's does (a run plans every place), and
    // after each copy lands there.
    let runs: Vec<DateTime<Utc>> = events.iter().map(|event| event.at).collect();
    let locations = scenario
        .copies
        .iter()
        .map(|rule| {
            crate::locations::simulate_location(rule, &backups, &runs, first_date, &day_ends)
                .map_err(|(at, source)| SimulationError::Engine { at, source })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Simulation {
        scenario: scenario.clone(),
        zone: zone.name().to_owned(),
        from: scenario.from,
        until,
        n_runs,
        backups,
        days,
        summary,
        locations,
        recovery: sexton_retention::recovery::restorable(&fleet.catalog, until),
        final_catalog: fleet.catalog,
        final_sizes: fleet.sizes,
    })
}

impl Simulation {
    /// Every backup taken before `until`, none deleted: the catalog a fleet without retention
    /// would hold. `sexton retention plan` over it at a day's sampling instant keeps what the
    /// simulation shows for that day (without merges, which rewrite records).
    pub fn history_catalog(&self, until: DateTime<Utc>) -> Catalog {
        Catalog {
            backups: self
                .backups
                .iter()
                .filter(|backup| backup.taken_at() <= until)
                .map(|backup| backup.record.clone())
                .collect(),
            binlog_segments: Vec::new(),
        }
    }

    /// The ids of the backups that exist at the end of day `day`, newest first.
    pub fn ids_on(&self, day: usize) -> Vec<&str> {
        self.days[day]
            .backups
            .iter()
            .map(|&index| self.backups[index].record.id.as_str())
            .collect()
    }
}

/// A tick (a backup is taken, then the engine runs) or a sweep (the engine runs).
#[derive(Clone, Copy, Debug)]
struct Event {
    at: DateTime<Utc>,
    tick: bool,
}

/// The schedule's ticks and the sweeps in `[from, until)`, in time order; a sweep at the
/// instant of a tick is the tick's run.
fn events(scenario: &Scenario, until: DateTime<Utc>) -> Result<Vec<Event>, SimulationError> {
    let too_many = || SimulationError::TooManyEvents {
        days: scenario.days.get(),
    };
    let ticks = ticks(&scenario.cron, scenario.from, until, MAX_EVENTS).ok_or_else(too_many)?;
    let mut events: Vec<Event> = ticks.iter().map(|&at| Event { at, tick: true }).collect();
    if let Some(interval) = scenario.sweep_every {
        let mut at = scenario.from;
        while at < until {
            if events.len() >= MAX_EVENTS {
                return Err(too_many());
            }
            events.push(Event { at, tick: false });
            at += interval.as_delta();
        }
    }
    // Ticks before sweeps at the same instant, then one run for both.
    events.sort_by_key(|event| (event.at, !event.tick));
    events.dedup_by(|later, earlier| later.at == earlier.at);
    Ok(events)
}

/// The ticks the scheduler fires in `[from, until)` for a schedule whose first run is the
/// first at or after `from`: each next tick is `cron.next_after(previous tick)`, as the
/// scheduler computes it from `last_backup`. `None` when there are more than `limit`.
pub fn ticks(
    cron: &CronSpec,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    limit: usize,
) -> Option<Vec<DateTime<Utc>>> {
    // The instant whose next run is the first at or after `from`: one second before for a
    // calendar spec (robfig's walk starts at the next whole second), one delay before for
    // `@every`, whose runs are a delay apart.
    let before = cron
        .every()
        .and_then(|delay| TimeDelta::from_std(delay).ok())
        .unwrap_or(TimeDelta::seconds(1));
    let mut cursor = from.checked_sub_signed(before)?;
    let mut ticks = Vec::new();
    while let Some(next) = cron.next_after(cursor) {
        if next >= until {
            break;
        }
        if ticks.len() >= limit {
            return None;
        }
        ticks.push(next);
        cursor = next;
    }
    Some(ticks)
}

/// Drops the entries of `items` whose verdict is a deletion (one verdict per entry, in order).
fn retain_by<T>(items: &mut Vec<T>, verdicts: &[Verdict]) {
    let mut verdict = verdicts.iter();
    items.retain(|_| verdict.next() != Some(&Verdict::Delete));
}

/// The first instant of the day holding `now` in the cron's zone (UTC without `CRON_TZ`):
/// where a simulation starting "today" starts.
pub fn start_of_day(cron: &CronSpec, now: DateTime<Utc>) -> DateTime<Utc> {
    let zone: Tz = cron.zone().unwrap_or(Tz::UTC);
    local_midnight(&zone, now.with_timezone(&zone).date_naive())
}

/// The first instant of `date` in `zone` (after the gap, where midnight does not exist).
fn local_midnight(zone: &Tz, date: NaiveDate) -> DateTime<Utc> {
    let midnight = date.and_time(NaiveTime::MIN);
    (0..=24 * 60)
        .find_map(|minutes| {
            match zone.from_local_datetime(&(midnight + TimeDelta::minutes(minutes))) {
                LocalResult::Single(time) | LocalResult::Ambiguous(time, _) => Some(time),
                LocalResult::None => None,
            }
        })
        .expect("every day has an instant")
        .with_timezone(&Utc)
}

/// Counters of one day, and its peaks (starting from what the previous day left).
#[derive(Clone, Debug, Default)]
struct DayTally {
    taken: usize,
    failed: usize,
    deleted: usize,
    peak_count: usize,
    peak_storage_bytes: u64,
}

impl DayTally {
    fn starting_with(sample: &Sample) -> DayTally {
        DayTally {
            peak_count: sample.count,
            peak_storage_bytes: sample.storage_bytes,
            ..DayTally::default()
        }
    }
}

/// The state after a run, with the engine's reasons: a day's sample.
#[derive(Clone, Debug, Default)]
struct Sample {
    at: Option<DateTime<Utc>>,
    /// (backup index, reasons), newest first.
    backups: Vec<(usize, Vec<String>)>,
    count: usize,
    n_locked_only: usize,
    locked_only_bytes: u64,
    n_partial: usize,
    n_failed: usize,
    storage_bytes: u64,
    oldest_restorable: Option<DateTime<Utc>>,
    worst_gap: Option<Gap>,
    binlog: Option<BinlogDay>,
}

/// The simulated fleet: the catalog of what exists and what the scheduler remembers.
struct Fleet<'s> {
    scenario: &'s Scenario,
    policy: &'s Policy,
    /// What exists, as the engine reads it.
    catalog: Catalog,
    /// Per catalog entry: its index in `backups`, and the bytes it takes now.
    existing: Vec<usize>,
    sizes: Vec<u64>,
    backups: Vec<SimulatedBackup>,
    /// The scheduler's memory of a failed upload (`last_backup_failed`, `failed_volumes`):
    /// the failed record is cleaned up after the grace period, the next backup is a full.
    last_backup_failed: bool,
    failed_volumes: Vec<String>,
    random: SplitMix64,
    n_ticks: usize,
    /// Backups held at the primary until their copy is due (a copy rule's `delay`): the id,
    /// when the copy is made, and the hold (`awaiting copy to <location>`).
    awaiting: Vec<(String, DateTime<Utc>, String)>,
    /// Binlog segments closed so far (issue 30); those that exist are in the catalog.
    segments_closed: i64,
}

impl<'s> Fleet<'s> {
    fn new(scenario: &'s Scenario) -> Fleet<'s> {
        let seed = match scenario.failures {
            Failures::Rate { seed, .. } => seed,
            _ => 0,
        };
        Fleet {
            scenario,
            policy: &scenario.policy,
            catalog: Catalog::default(),
            existing: Vec::new(),
            sizes: Vec::new(),
            backups: Vec::new(),
            last_backup_failed: false,
            failed_volumes: Vec::new(),
            random: SplitMix64::new(seed),
            n_ticks: 0,
            awaiting: Vec::new(),
            segments_closed: 0,
        }
    }

    /// Closes the binlog segments that end by `now`, as a server rotates its binlog and an
    /// executor ships it.
    fn close_segments(&mut self, now: DateTime<Utc>) {
        let Some(archive) = self.scenario.binlog else {
            return;
        };
        let every = archive.every.as_delta();
        loop {
            let first = self.scenario.from + every * self.segments_closed as i32;
            let last = first + every;
            if last > now {
                break;
            }
            self.catalog
                .binlog_segments
                .push(sexton_retention::BinlogSegment {
                    key: format!("binlog/{}.{:08}", self.scenario.name, self.segments_closed),
                    first_event: Some(first.fixed_offset()),
                    last_event: Some(last.fixed_offset()),
                });
            self.segments_closed += 1;
        }
    }

    fn storage_bytes(&self) -> u64 {
        self.sizes.iter().sum()
    }

    fn tick_fails(&mut self) -> bool {
        let index = self.n_ticks;
        self.n_ticks += 1;
        match &self.scenario.failures {
            Failures::None => false,
            Failures::Rate { per_million, .. } => self.random.chance(*per_million),
            Failures::Pattern(pattern) => pattern[index % pattern.len()],
        }
    }

    /// The executor takes the tick's backup and reports it; returns whether it failed.
    fn take_backup(&mut self, tick: DateTime<Utc>) -> bool {
        let scenario = self.scenario;
        let failed = self.tick_fails();
        let id = format!("{}-{}", scenario.name, tick.format("%Y%m%d%H%M%S"));
        let time = tick.fixed_offset();
        let sizes = scenario.sizes;
        let size_of = |kind: BackupKind| match kind {
            BackupKind::Full => sizes.full.0,
            BackupKind::Incremental => sizes.incremental.0,
        };
        let mut record = BackupRecord {
            id,
            completed_at: Some(time),
            started_at: Some(time),
            status: if failed {
                BackupStatus::Failed
            } else {
                BackupStatus::Completed
            },
            ..BackupRecord::default()
        };
        let has_cadence = scenario.full_every.is_some() || !scenario.volumes.is_empty();
        let mut kind_reason = None;
        if scenario.volumes.is_empty() {
            if has_cadence {
                // The scheduler's `ask`: a remembered failure means a full, else the cadence.
                let choice = next_backup_kind(scenario.full_every, &self.catalog.backups);
                if self.last_backup_failed {
                    kind_reason = Some("last_attempt_failed".to_owned());
                } else {
                    record.kind = choice.kind;
                    record.parent = choice.parent;
                    kind_reason = Some(choice.reason.as_str().to_owned());
                }
            }
        } else {
            let choices = next_volume_kinds(
                scenario.full_every,
                &self.catalog.backups,
                &scenario.volumes,
            );
            record.volumes = choices
                .into_iter()
                .map(|volume| {
                    let remembered_failure = self.failed_volumes.contains(&volume.name);
                    let (kind, parent) = if remembered_failure {
                        (BackupKind::Full, None)
                    } else {
                        (volume.choice.kind, volume.choice.parent)
                    };
                    VolumeArtifact {
                        keys: vec![format!("{}/{}", record.id, volume.name)],
                        size_bytes: Some(if failed { 0 } else { size_of(kind) }),
                        failed,
                        name: volume.name,
                        kind,
                        parent,
                        expiring: false,
                    }
                })
                .collect();
            record.kind = if record
                .volumes
                .iter()
                .all(|volume| volume.kind == BackupKind::Full)
            {
                BackupKind::Full
            } else {
                BackupKind::Incremental
            };
        }
        // A failed backup joins no chain: its kind is what was asked, its parent is dropped.
        if failed {
            record.parent = None;
        }
        let size_bytes = if failed {
            0
        } else if record.volumes.is_empty() {
            size_of(record.kind)
        } else {
            record.volumes.iter().filter_map(|v| v.size_bytes).sum()
        };
        // Awaiting its copies: the source holds a backup until each delayed copy is due (an
        // undelayed one is made at once, in the simulation as good as at the same instant).
        if !failed {
            for rule in &scenario.copies {
                let picked = rule.select.picks(record.kind, !record.volumes.is_empty());
                if let Some(delay) = rule.delay.filter(|_| picked) {
                    let hold = sexton_model::copies::awaiting_hold(&rule.to);
                    record.holds.push(hold.clone());
                    self.awaiting
                        .push((record.id.clone(), tick + delay.delta(), hold));
                }
            }
        }
        self.last_backup_failed = failed;
        if failed {
            self.failed_volumes = scenario.volumes.clone();
        } else {
            self.failed_volumes.clear();
        }
        self.existing.push(self.backups.len());
        self.sizes.push(size_bytes);
        self.catalog.backups.push(record.clone());
        self.backups.push(SimulatedBackup {
            record,
            size_bytes,
            kind_reason,
            deleted_at: None,
            spans: Vec::new(),
        });
        failed
    }

    /// Day `day_index`'s record from the latest sample, and the backups' keep spans extended.
    fn close_day(
        &mut self,
        first_date: NaiveDate,
        day_index: usize,
        sample: &Sample,
        tally: &DayTally,
    ) -> Day {
        for (backup_index, reasons) in &sample.backups {
            let spans = &mut self.backups[*backup_index].spans;
            match spans.last_mut() {
                Some(span) if span.last_day + 1 == day_index && span.reasons == *reasons => {
                    span.last_day = day_index;
                }
                _ => spans.push(KeepSpan {
                    first_day: day_index,
                    last_day: day_index,
                    reasons: reasons.clone(),
                }),
            }
        }
        Day {
            date: first_date + TimeDelta::days(day_index as i64),
            sampled_at: sample.at,
            backups: sample.backups.iter().map(|&(index, _)| index).collect(),
            count: sample.count,
            n_locked_only: sample.n_locked_only,
            locked_only_bytes: sample.locked_only_bytes,
            n_partial: sample.n_partial,
            n_failed: sample.n_failed,
            storage_bytes: sample.storage_bytes,
            peak_count: tally.peak_count.max(sample.count),
            peak_storage_bytes: tally.peak_storage_bytes.max(sample.storage_bytes),
            oldest_restorable: sample.oldest_restorable,
            worst_gap: sample.worst_gap.clone(),
            taken: tally.taken,
            failed: tally.failed,
            deleted: tally.deleted,
            binlog: sample.binlog,
        }
    }
}
