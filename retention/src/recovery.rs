//! What a group can be restored to: the recovery value of a catalog (issue 47).
//!
//! Retention decides what stays; this module says what that buys. [`restorable`] reads a
//! catalog and `now` and returns the restore points (backups whose whole chain is there), the
//! intervals that replaying the binlog (or WAL) archive reaches from them, and the gaps in
//! between, each with why. With [`after_plan`] it answers "what would this plan cost": the
//! recovery value of the catalog before and after the plan, compared instant by instant. The
//! property tests hold the engine to that: a plan never loses an instant of the promised
//! recovery window, and a hold never loses anything.
//!
//! Pure like the engine: no clock (`now` is a parameter), no I/O.
//!
//! The model, conservative throughout (what it says is restorable is, given the records):
//! - a *point* is a `completed` backup whose every ancestor (its parent, or each volume's
//!   parent artifact) is in the catalog and `completed` too. A backup marked `expiring`,
//!   `deleting` or `delete-failed` is on its way out and neither a point nor a link; `missing`
//!   and `failed` ones never are. A volume artifact marked `expiring` (a partial delete under
//!   way) or `failed` breaks its backup's chain likewise.
//! - segments link into *runs*: two segments continue each other where their names are
//!   consecutive in one numbered sequence (`mysql-bin.000041`, then `.000042`: same stem before
//!   the last `.`, digits of the same width after it); where the names do not compare (no such
//!   sequence, or two different ones), where the second starts no later than
//!   [`RANGE_MARGIN`] after the first ends. A segment covers from its first to its last event;
//!   one with an unknown last event ends its run at its first event, and one with an unknown
//!   first event covers its last event only: what was not seen is never counted.
//! - an *interval* is the time from a point's `completed_at` (it is consistent there, not
//!   before) to the end of the run that covers its start (`started_at`, or `completed_at`),
//!   cut at `now`.
//!
//! A backup's `log_range` is not used: it names the segments a backup needs to be consistent,
//! not where its replay starts, and the times say that.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

use crate::catalog::{BackupStatus, BinlogSegment, Catalog};
use crate::plan::Plan;

mod chain_check;

use chain_check::{ById, Chains};
pub(crate) use chain_check::{ChainCheck, SortedNeighbours};

/// How far around a backup's start and end times its own range reaches when segments are
/// matched by time: the executor's clock (the backup's times) and the database's (the
/// segments' event times) may disagree by this much. The binlog orphan margin, for the same
/// reason.
pub const RANGE_MARGIN: chrono::Duration = chrono::Duration::minutes(5);

/// What a catalog can be restored to at `now`. Every list is oldest first.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    pub points: Vec<RestorePoint>,
    /// Replay intervals, overlapping ones merged.
    pub intervals: Vec<RecoveryInterval>,
    /// Spans between the oldest and the newest restorable instant that nothing reaches.
    pub gaps: Vec<RecoveryGap>,
}

/// A backup that can be restored as it is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RestorePoint {
    pub id: String,
    /// Its `completed_at`: the instant it restores to.
    pub at: DateTime<FixedOffset>,
    /// The backups a restore reads, oldest first, ending with this one.
    pub chain: Vec<String>,
}

/// Instants reachable by restoring one of `bases` and replaying the archive.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RecoveryInterval {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The points whose replay makes up this interval, oldest first.
    pub bases: Vec<String>,
}

/// A span nothing restores to, with what the catalog says about why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct RecoveryGap {
    /// The last restorable instant before the gap.
    pub from: DateTime<Utc>,
    /// The first restorable instant after it.
    pub to: DateTime<Utc>,
    pub reason: String,
}

impl Recovery {
    /// Whether `t` is a point or within a replay interval (both ends included).
    pub fn restorable_at(&self, t: DateTime<Utc>) -> bool {
        let after = self.intervals.partition_point(|interval| interval.to < t);
        if self.intervals.get(after).is_some_and(|i| i.from <= t) {
            return true;
        }
        let after = self.points.partition_point(|point| point.at < t);
        self.points.get(after).is_some_and(|point| point.at == t)
    }

    /// The newest restorable instant: `now` minus it is the recovery point age.
    pub fn newest(&self) -> Option<DateTime<Utc>> {
        let point = self.points.last().map(|point| point.at.to_utc());
        let interval = self.intervals.last().map(|interval| interval.to);
        point.max(interval)
    }

    /// The oldest restorable instant.
    pub fn oldest(&self) -> Option<DateTime<Utc>> {
        // Every interval starts at a point, so the oldest point is the oldest instant.
        self.points.first().map(|point| point.at.to_utc())
    }

    /// The restore point of backup `id`, if it is one.
    pub fn point(&self, id: &str) -> Option<&RestorePoint> {
        self.points.iter().find(|point| point.id == id)
    }
}

/// What `catalog` can be restored to at `now`. See the module documentation for the model.
pub fn restorable(catalog: &Catalog, now: DateTime<Utc>) -> Recovery {
    let mut chains = Chains::new(catalog);
    let mut points: Vec<(usize, DateTime<FixedOffset>)> = Vec::new();
    for (index, backup) in catalog.backups.iter().enumerate() {
        let Some(at) = backup.completed_at else {
            continue;
        };
        if backup.status == BackupStatus::Completed
            && at.to_utc() <= now
            && chains.broken(index).is_none()
        {
            points.push((index, at));
        }
    }
    points.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    let runs = Runs::new(&catalog.binlog_segments);
    let mut replays: Vec<(DateTime<Utc>, DateTime<Utc>, usize)> = Vec::new();
    for &(index, at) in &points {
        let backup = &catalog.backups[index];
        let start = backup.started_at.unwrap_or(at).to_utc();
        if let Some(end) = runs.end_from(start) {
            let end = end.min(now);
            if end > at.to_utc() {
                replays.push((at.to_utc(), end, index));
            }
        }
    }
    let intervals = merge_replays(catalog, replays);
    let points: Vec<RestorePoint> = points
        .iter()
        .map(|&(index, at)| RestorePoint {
            id: catalog.backups[index].id.clone(),
            at,
            chain: chains.chain_ids(index),
        })
        .collect();
    let gaps = find_gaps(catalog, &chains, &runs, &points, &intervals);
    Recovery {
        points,
        intervals,
        gaps,
    }
}

/// What a restore to one instant reads (issue 47, restore drills): the point to restore and,
/// when the instant is past it, the replay of the archive that reaches it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Drill {
    pub base: RestorePoint,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
}

/// A replay of the archive: the segments that may hold events of `since..=until`, applied from
/// the base's own log position and stopped at `until`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    /// The first instant of the newest segment that starts no later than the base did: the
    /// segment being written when the base was taken, where its replay begins.
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
}

/// How to restore `catalog` to instant `t` at `now`: the newest point at `t` exactly, else the
/// newest point before `t` whose replay reaches `t` (a restore reads as little archive as it
/// can). `Err` says why `t` is not restorable: the gap it falls in, with its reason, or where
/// the restorable span begins or ends. Consistent with [`restorable`]: `t` has a drill exactly
/// when `restorable(catalog, now).restorable_at(t)`.
pub fn drill(catalog: &Catalog, now: DateTime<Utc>, t: DateTime<Utc>) -> Result<Drill, String> {
    if t > now {
        return Err(format!(
            "{} is in the future (now is {})",
            said(t),
            said(now)
        ));
    }
    let recovery = restorable(catalog, now);
    if let Some(point) = recovery.points.iter().rev().find(|p| p.at.to_utc() == t) {
        return Ok(Drill {
            base: point.clone(),
            replay: None,
        });
    }
    let by_id = ById::new(catalog);
    let runs = Runs::new(&catalog.binlog_segments);
    for point in recovery.points.iter().rev() {
        let at = point.at.to_utc();
        if at > t {
            continue;
        }
        let Some(&index) = by_id.0.get(point.id.as_str()) else {
            continue;
        };
        let start = catalog.backups[index]
            .started_at
            .unwrap_or(point.at)
            .to_utc();
        if runs.end_from(start).is_some_and(|end| end.min(now) >= t) {
            let count = runs.starts.partition_point(|&low| low <= start);
            let since = runs.starts[count - 1];
            return Ok(Drill {
                base: point.clone(),
                replay: Some(Replay { since, until: t }),
            });
        }
    }
    let t_text = said(t);
    Err(match (recovery.oldest(), recovery.newest()) {
        (None, _) | (_, None) => "nothing is restorable here: no backup's chain is whole".into(),
        (Some(oldest), _) if t < oldest => format!(
            "{t_text} is before the oldest restorable instant, {}",
            said(oldest)
        ),
        (_, Some(newest)) if t > newest => format!(
            "{t_text} is after the newest restorable instant, {} (the archive reaches no further)",
            said(newest)
        ),
        _ => match recovery.gaps.iter().find(|gap| gap.from < t && t < gap.to) {
            Some(gap) => format!(
                "{t_text} falls in a gap from {} to {}: {}",
                said(gap.from),
                said(gap.to),
                gap.reason
            ),
            None => format!("{t_text} is not restorable here"),
        },
    })
}

impl Recovery {
    /// What of this value lies at or after `start`: points from `start`, intervals cut at it,
    /// gaps that end after it (how a drill keeps to a promised window).
    pub fn since(&self, start: DateTime<Utc>) -> Recovery {
        Recovery {
            points: self
                .points
                .iter()
                .filter(|point| point.at.to_utc() >= start)
                .cloned()
                .collect(),
            intervals: self
                .intervals
                .iter()
                .filter(|interval| interval.to >= start)
                .map(|interval| RecoveryInterval {
                    from: interval.from.max(start),
                    ..interval.clone()
                })
                .collect(),
            gaps: self
                .gaps
                .iter()
                .filter(|gap| gap.to > start)
                .cloned()
                .collect(),
        }
    }

    /// An instant among the restorable ones, `fraction` (0 to 1) of the way through their total
    /// length (the replay intervals laid end to end; the points alone when no interval has any
    /// length): how a scheduled drill picks its instant. `None` when nothing is restorable.
    pub fn instant_at(&self, fraction: f64) -> Option<DateTime<Utc>> {
        let fraction = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let total: i64 = self
            .intervals
            .iter()
            .map(|i| (i.to - i.from).num_seconds())
            .sum();
        if total <= 0 {
            let count = self.points.len();
            if count == 0 {
                return None;
            }
            let at = ((count - 1) as f64 * fraction).round() as usize;
            return Some(self.points[at.min(count - 1)].at.to_utc());
        }
        let mut left = (total as f64 * fraction).floor() as i64;
        for interval in &self.intervals {
            let length = (interval.to - interval.from).num_seconds();
            if left <= length {
                return Some(interval.from + chrono::Duration::seconds(left));
            }
            left -= length;
        }
        self.intervals.last().map(|i| i.to)
    }
}

/// The first and the last instant at or after `from` (up to `now`) that are restorable in
/// `catalog` and would not be once `plan` is carried out; `None` when the plan loses none.
/// What only backups a user asked to delete restore to is not counted: the user's word beats
/// the window. Judged at every point, interval end and gap end of the value before, and at 64
/// evenly spaced instants.
pub fn lost_instants(
    catalog: &Catalog,
    plan: &Plan,
    now: DateTime<Utc>,
    from: DateTime<Utc>,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    if plan.delete.is_empty()
        && plan.binlog.delete.is_empty()
        && plan
            .keep
            .iter()
            .chain(&plan.partial)
            .all(|d| d.volumes_delete.is_empty())
    {
        return None;
    }
    let without_requested = Catalog {
        backups: catalog
            .backups
            .iter()
            .filter(|b| !b.delete_requested)
            .cloned()
            .collect(),
        binlog_segments: catalog.binlog_segments.clone(),
    };
    let before = restorable(&without_requested, now);
    let after = restorable(&after_plan(catalog, plan), now);
    if from >= now {
        return None;
    }
    let lost: Vec<DateTime<Utc>> = sample_instants(&before, from, now, 64)
        .into_iter()
        .filter(|&t| before.restorable_at(t) && !after.restorable_at(t))
        .collect();
    Some((*lost.first()?, *lost.last()?))
}

/// The instants at which to compare two recovery values over `from..=to`: every point, interval
/// end and gap end of `recovery` inside it (where restorability can change), and `steps + 1`
/// evenly spaced ones, both ends included; sorted, each once.
pub fn sample_instants(
    recovery: &Recovery,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    steps: i32,
) -> Vec<DateTime<Utc>> {
    let mut times: Vec<DateTime<Utc>> = recovery
        .points
        .iter()
        .map(|point| point.at.to_utc())
        .chain(recovery.intervals.iter().flat_map(|i| [i.from, i.to]))
        .chain(recovery.gaps.iter().flat_map(|g| [g.from, g.to]))
        .filter(|&t| from <= t && t <= to)
        .collect();
    let steps = steps.max(1);
    let step = (to - from) / steps;
    times.extend((0..=steps).map(|k| from + step * k));
    times.push(to);
    times.sort_unstable();
    times.dedup();
    times
}

/// The catalog as it stands once `plan` is carried out: deleted backups and binlog segments
/// gone, and the volumes a partial decision deletes gone from their backups. Statuses are left
/// as they are (a kept backup marked `expiring` stays marked until someone takes it back), and
/// pending merges are not applied: their sources stay until the executor reports them done.
pub fn after_plan(catalog: &Catalog, plan: &Plan) -> Catalog {
    let deleted: HashSet<&str> = plan.delete.iter().map(|d| d.id.as_str()).collect();
    let volumes_gone: HashMap<&str, HashSet<&str>> = plan
        .keep
        .iter()
        .chain(&plan.partial)
        .filter(|d| !d.volumes_delete.is_empty())
        .map(|d| {
            let names = d.volumes_delete.iter().map(|v| v.name.as_str()).collect();
            (d.id.as_str(), names)
        })
        .collect();
    let segments_gone: HashSet<&str> = plan.binlog.delete.iter().map(String::as_str).collect();
    let backups = catalog
        .backups
        .iter()
        .filter(|backup| !deleted.contains(backup.id.as_str()))
        .map(|backup| {
            let mut backup = backup.clone();
            if let Some(gone) = volumes_gone.get(backup.id.as_str()) {
                backup
                    .volumes
                    .retain(|volume| !gone.contains(volume.name.as_str()));
            }
            backup
        })
        .collect();
    let binlog_segments = catalog
        .binlog_segments
        .iter()
        .filter(|segment| !segments_gone.contains(segment.key.as_str()))
        .cloned()
        .collect();
    Catalog {
        backups,
        binlog_segments,
    }
}

/// The archive's segments as runs: for each segment, the latest instant a replay that passes
/// through it reaches.
struct Runs {
    /// (first covered instant, the end its run reaches), by first instant; with the running
    /// maximum of the ends, so that the run covering an instant is one binary search away.
    starts: Vec<DateTime<Utc>>,
    max_end: Vec<DateTime<Utc>>,
    /// Each segment's own covered span, for the gaps' reasons, by start.
    spans: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// The running maximum of the spans' ends, so the reach from an instant is one binary
    /// search away (the gaps' reasons, one per gap, stay linear in the archive's size).
    spans_max_high: Vec<DateTime<Utc>>,
}

/// A segment's name in a numbered sequence: (stem, width of the number), number.
fn sequence_name(key: &str) -> Option<((&str, usize), u64)> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let (stem, digits) = name.rsplit_once('.')?;
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(((stem, digits.len()), digits.parse().ok()?))
}

/// A segment's covered span: first and last covered instant, and whether a run may go on
/// after it (its last event is known).
type Span = (DateTime<Utc>, DateTime<Utc>, bool);

/// The span a segment covers: from its first to its last event, what is unknown left out.
/// `None` when neither is known.
fn covered_span(segment: &BinlogSegment) -> Option<Span> {
    match (segment.first_event, segment.last_event) {
        (Some(first), Some(last)) => Some((first.to_utc(), last.to_utc(), true)),
        (Some(first), None) => Some((first.to_utc(), first.to_utc(), false)),
        (None, Some(last)) => Some((last.to_utc(), last.to_utc(), true)),
        (None, None) => None,
    }
}

impl Runs {
    fn new(segments: &[BinlogSegment]) -> Runs {
        let spans: Vec<Option<Span>> = segments.iter().map(covered_span).collect();
        let names: Vec<_> = segments
            .iter()
            .map(|segment| sequence_name(&segment.key))
            .collect();
        let mut by_name: HashMap<((&str, usize), u64), usize> = HashMap::new();
        for (index, name) in names.iter().enumerate() {
            if let (Some(name), Some(_)) = (name, spans[index]) {
                by_name.entry(*name).or_insert(index);
            }
        }
        // The segments by first instant, for the links by time.
        let mut by_start: Vec<usize> = (0..segments.len())
            .filter(|&index| spans[index].is_some())
            .collect();
        by_start.sort_by_key(|&index| (spans[index].map(|s| s.0), index));
        let successors = |index: usize| -> Vec<usize> {
            let Some((low, high, open)) = spans[index] else {
                return Vec::new();
            };
            if !open {
                return Vec::new();
            }
            let mut next = Vec::new();
            if let Some((sequence, number)) = names[index] {
                if let Some(&after) = by_name.get(&(sequence, number + 1)) {
                    next.push(after);
                }
            }
            let from = by_start.partition_point(|&i| spans[i].map(|s| s.0) < Some(low));
            for &other in &by_start[from..] {
                let (other_low, _, _) = spans[other].expect("by_start holds spans");
                if other_low > high + RANGE_MARGIN {
                    break;
                }
                let compare =
                    matches!((names[index], names[other]), (Some(a), Some(b)) if a.0 == b.0);
                if other != index && !compare && segments[other].first_event.is_some() {
                    next.push(other);
                }
            }
            next
        };
        let links: Vec<Vec<usize>> = (0..segments.len()).map(successors).collect();
        // The end each segment's run reaches: the latest end over what it links to, found by
        // passes from the newest start back until nothing grows (one or two passes unless the
        // names and the times disagree).
        let mut end: Vec<Option<DateTime<Utc>>> = spans.iter().map(|s| s.map(|s| s.1)).collect();
        loop {
            let mut grew = false;
            for &index in by_start.iter().rev() {
                for &next in &links[index] {
                    if end[next] > end[index] {
                        end[index] = end[next];
                        grew = true;
                    }
                }
            }
            if !grew {
                break;
            }
        }
        let mut starts = Vec::with_capacity(by_start.len());
        let mut max_end: Vec<DateTime<Utc>> = Vec::with_capacity(by_start.len());
        for &index in &by_start {
            let (low, _, _) = spans[index].expect("by_start holds spans");
            let reach = end[index].expect("a span has an end");
            starts.push(low);
            max_end.push(max_end.last().map_or(reach, |&m| m.max(reach)));
        }
        let spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = by_start
            .iter()
            .map(|&index| {
                let (low, _, _) = spans[index].expect("by_start holds spans");
                (low, end[index].expect("a span has an end"))
            })
            .collect();
        let mut spans_max_high: Vec<DateTime<Utc>> = Vec::with_capacity(spans.len());
        for &(_, high) in &spans {
            spans_max_high.push(spans_max_high.last().map_or(high, |&m| m.max(high)));
        }
        Runs {
            starts,
            max_end,
            spans,
            spans_max_high,
        }
    }

    /// The latest instant a replay from `start` reaches: the furthest end among the runs that
    /// cover `start`, or `None` when none does.
    fn end_from(&self, start: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let count = self.starts.partition_point(|&low| low <= start);
        let reach = *self.max_end.get(count.checked_sub(1)?)?;
        (reach >= start).then_some(reach)
    }

    /// Whether the runs cover every instant of `from..=to` (each run as the span from its
    /// segment's first instant to the end it reaches).
    fn uncovered(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        // Every span starting at or before `from` counts at once: the furthest of their ends.
        let first = self.spans.partition_point(|&(low, _)| low <= from);
        let mut reached = match first.checked_sub(1) {
            Some(last) => from.max(self.spans_max_high[last]),
            None => from,
        };
        if reached >= to {
            return None;
        }
        let mut at = first;
        while let Some(&(low, high)) = self.spans.get(at) {
            if low > reached {
                break;
            }
            reached = reached.max(high);
            if reached >= to {
                return None;
            }
            at += 1;
        }
        // The spans are by start: the first one past the reach is the next one not walked.
        let next = self.spans[at..]
            .iter()
            .map(|&(low, _)| low)
            .find(|&low| low > reached)
            .map_or(to, |low| low.min(to));
        Some((reached, next))
    }
}

/// Merges the replay intervals (from, to, base) that overlap or touch, naming every base.
fn merge_replays(
    catalog: &Catalog,
    mut replays: Vec<(DateTime<Utc>, DateTime<Utc>, usize)>,
) -> Vec<RecoveryInterval> {
    replays.sort_by_key(|&(from, to, index)| (from, to, index));
    let mut merged: Vec<RecoveryInterval> = Vec::new();
    for (from, to, index) in replays {
        let id = catalog.backups[index].id.clone();
        match merged.last_mut() {
            Some(last) if from <= last.to => {
                last.to = last.to.max(to);
                last.bases.push(id);
            }
            _ => merged.push(RecoveryInterval {
                from,
                to,
                bases: vec![id],
            }),
        }
    }
    merged
}

/// The spans between the oldest and the newest restorable instant that nothing reaches, each
/// with the catalog's reasons: where the archive has no segment, which backups in it have a
/// broken chain or are on their way out.
fn find_gaps(
    catalog: &Catalog,
    chains: &Chains<'_>,
    runs: &Runs,
    points: &[RestorePoint],
    intervals: &[RecoveryInterval],
) -> Vec<RecoveryGap> {
    // Everything restorable as closed spans, oldest first: the intervals and the points.
    let mut reached: Vec<(DateTime<Utc>, DateTime<Utc>)> = intervals
        .iter()
        .map(|interval| (interval.from, interval.to))
        .chain(
            points
                .iter()
                .map(|point| (point.at.to_utc(), point.at.to_utc())),
        )
        .collect();
    reached.sort_unstable();
    // The backups by their instant, once: each gap's reasons read the ones inside it.
    let mut by_time: Vec<(DateTime<Utc>, usize)> = catalog
        .backups
        .iter()
        .enumerate()
        .filter_map(|(index, backup)| Some((backup.completed_at?.to_utc(), index)))
        .collect();
    by_time.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| catalog.backups[a.1].id.cmp(&catalog.backups[b.1].id))
    });
    let mut gaps = Vec::new();
    let mut last_end: Option<DateTime<Utc>> = None;
    for (from, to) in reached {
        if let Some(end) = last_end {
            if from > end {
                gaps.push(RecoveryGap {
                    from: end,
                    to: from,
                    reason: gap_reason(catalog, chains, runs, &by_time, end, from),
                });
            }
        }
        last_end = Some(last_end.map_or(to, |end| end.max(to)));
    }
    gaps
}

/// An instant as a reason says it to people: UTC to the second (`2026-11-28T03:00:00Z`); the
/// nanoseconds stay in the value's own fields (issue 50).
fn said(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn gap_reason(
    catalog: &Catalog,
    chains: &Chains<'_>,
    runs: &Runs,
    by_time: &[(DateTime<Utc>, usize)],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> String {
    let mut reasons = Vec::new();
    match runs.uncovered(from, to) {
        Some((start, end)) => reasons.push(format!(
            "no segment between {} and {}",
            said(start),
            said(end)
        )),
        None => reasons.push(format!(
            "no restorable backup before {} starts in the archive's run over it",
            said(to)
        )),
    }
    let low = by_time.partition_point(|&(at, _)| at <= from);
    let high = by_time.partition_point(|&(at, _)| at < to);
    for &(_, index) in &by_time[low..high.max(low)] {
        let backup = &catalog.backups[index];
        match backup.status {
            BackupStatus::Completed => {
                if let Some(why) = chains.broken(index) {
                    reasons.push(format!("chain of {} broken: {why}", backup.id));
                }
            }
            BackupStatus::Failed | BackupStatus::InProgress => {}
            other => reasons.push(format!("{} is {}", backup.id, other.as_str())),
        }
    }
    reasons.join("; ")
}
