//! Binlog (or WAL) garbage collection. The point-in-time horizon is the start of the oldest
//! kept full backup that point-in-time recovery is promised from: every kept full, or the
//! newest `pitr_full` of them that restore (issue 47: a kept full whose chain is broken does
//! not count, nor one kept only by holds, [`crate::held`]), never one kept only by a
//! standalone hold. A segment that ends before it goes, unless an older kept backup needs it
//! to be consistent: such a backup (standalone, past `pitr_full`, kept only by holds under
//! `pitr_full`, or an incremental of one) is restorable to its own end, and the archive keeps
//! its own range, by segment name where its executor said them and by time around its start
//! and end either way. Conservative by construction: an unknown end, or no kept full, deletes
//! nothing.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, FixedOffset};

use crate::catalog::{
    holds_standalone, range_covers, BackupKind, BackupRecord, BackupStatus, BinlogSegment, Catalog,
};
use crate::error::PlanError;
use crate::flags::{status_of, FACT_CHAIN_NODE, FACT_FULL, KEEP_ANY, KEEP_HOLD, PARTIAL};
use crate::recovery::{ChainCheck, SortedNeighbours, RANGE_MARGIN};

/// Why a kept backup gets only its own range of the archive, not everything after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeWhy {
    /// Held `standalone:<why>`.
    Standalone,
    /// A full past the newest `pitr_full`.
    BeyondPitr(u32),
    /// An incremental that starts before the horizon (it builds on one of the above).
    BeforeHorizon,
    /// A full kept only by holds, which `pitr_full` does not count ([`crate::held`]).
    HeldOnly,
}

impl RangeWhy {
    pub(crate) fn text(self) -> String {
        match self {
            RangeWhy::Standalone => "standalone: restorable to its own end only".to_owned(),
            RangeWhy::BeyondPitr(n) => format!(
                "older than the newest {n} full backup(s) pitr_full keeps point-in-time \
                 recovery from: restorable to its own end only"
            ),
            RangeWhy::BeforeHorizon => {
                "starts before the point-in-time horizon: restorable to its own end only".to_owned()
            }
            RangeWhy::HeldOnly => "kept only by holds, which pitr_full does not count: \
                                   restorable to its own end only"
                .to_owned(),
        }
    }
}

pub(crate) struct BinlogDecisions {
    pub(crate) horizon: Option<(DateTime<FixedOffset>, u32)>,
    /// Segment indices, newest first.
    pub(crate) keep: Vec<u32>,
    pub(crate) delete: Vec<u32>,
    /// Kept backups that get only their own range, with why, in plan order.
    pub(crate) range_only: Vec<(u32, RangeWhy)>,
}

/// Whether `backup`'s own range needs `segment`: its named segments, and every segment whose
/// events may fall within [`RANGE_MARGIN`] of its start..end. A backup without any time needs
/// everything (it cannot be placed).
pub fn own_range_needs(backup: &BackupRecord, segment: &BinlogSegment) -> bool {
    if let Some(range) = &backup.log_range {
        if range_covers(range, &segment.key) == Some(true) {
            return true;
        }
    }
    let (Some(start), Some(end)) = (
        backup.started_at.or(backup.completed_at),
        backup.completed_at.or(backup.started_at),
    ) else {
        return true;
    };
    segment
        .last_event
        .is_none_or(|last| last >= start - RANGE_MARGIN)
        && segment
            .first_event
            .is_none_or(|first| first <= end + RANGE_MARGIN)
}

/// The kept backups restorable to their own end only because of a standalone hold: held
/// standalone, and kept by nothing else (no rule, no other hold, and no kept backup that builds
/// on it, which the chain walk does not mark when the hold already keeps it).
///
/// Decision (issue 47): a hold only ever keeps more. A backup that the rules, the floor, a lock
/// or a dependent keep on their own would be a point-in-time base without its hold, so it stays
/// one with it; otherwise a standalone hold on, say, the oldest of `keep_last`'s fulls would
/// move the horizon newer and delete the archive after it. The rules count held backups
/// (barman's policies leave annotated backups out of their count); under `pitr_full`, a full
/// kept only by holds is left out of its count instead ([`crate::held`]), and the standalone
/// reason only limits what the hold adds.
///
/// The flags alone miss one such backup: the recovery window's newest base before the window,
/// when a standalone hold on it moved the rule to an older base. The rules keep it without
/// the hold ([`crate::held`]'s `kept_by_rules`, given under `pitr_full`, which counts it), so
/// it stays a point-in-time base: otherwise `pitr_full` would count it and promise nothing
/// from it, and the archive after it would go because of a hold.
///
/// Costs one pass over the catalog, and only when some backup is held standalone alone.
fn standalone_only(
    catalog: &Catalog,
    flags: &[u32],
    kept_by_rules: Option<&[bool]>,
    kept_restorable: impl Fn(u32) -> bool,
) -> HashSet<u32> {
    let held_only = |index: usize| {
        let backup = &catalog.backups[index];
        backup.is_standalone()
            && flags[index] & KEEP_ANY & !KEEP_HOLD == 0
            && kept_by_rules.is_none_or(|ruled| !ruled[index])
            && backup
                .holds
                .iter()
                .all(|hold| holds_standalone(std::slice::from_ref(hold)))
    };
    let mut only: HashMap<&str, u32> = (0..catalog.backups.len())
        .filter(|&index| kept_restorable(index as u32) && held_only(index))
        .map(|index| (catalog.backups[index].id.as_str(), index as u32))
        .collect();
    if only.is_empty() {
        return HashSet::new();
    }
    for (index, backup) in catalog.backups.iter().enumerate() {
        let bits = flags[index];
        if bits & (KEEP_ANY | PARTIAL) == 0 || bits & FACT_CHAIN_NODE == 0 {
            continue;
        }
        let own_parent = (backup.volumes.is_empty() && backup.kind == BackupKind::Incremental)
            .then_some(backup.parent.as_deref())
            .flatten();
        let volume_parents = backup
            .volumes
            .iter()
            .filter(|volume| volume.kind == BackupKind::Incremental)
            .filter_map(|volume| volume.parent.as_deref());
        for parent in own_parent.into_iter().chain(volume_parents) {
            if parent != backup.id {
                only.remove(parent);
            }
        }
    }
    only.into_values().collect()
}

/// See the module documentation. `pitr_full` is the policy's; `kept_by_rules`, per backup,
/// whether the plan would keep it if nothing were held ([`crate::held`]), where `pitr_full`
/// is set and some kept backup is held.
pub(crate) fn plan_binlog(
    catalog: &Catalog,
    order: &[u32],
    flags: &[u32],
    pitr_full: Option<u32>,
    kept_by_rules: Option<&[bool]>,
    warnings: &mut Vec<String>,
) -> Result<BinlogDecisions, PlanError> {
    let kept = Kept { catalog, flags };
    let standalone_only = standalone_only(catalog, flags, kept_by_rules, |index| {
        kept.restorable(index)
    });
    let mut range_only: Vec<(u32, RangeWhy)> = Vec::new();
    let mut fulls = kept.fulls(
        order,
        &standalone_only,
        pitr_full,
        kept_by_rules,
        &mut range_only,
    );
    if let Some(n) = pitr_full {
        kept.count_pitr_fulls(order, n, &mut fulls, &mut range_only);
    }
    let horizon = kept.horizon(&fulls, &range_only, warnings);
    if let Some((at, _)) = horizon {
        kept.before_horizon(order, at, &standalone_only, &mut range_only);
    }
    // In plan order (standalones, fulls past pitr_full and the incrementals before the
    // horizon were pushed in three passes). Most runs have none: no index of the whole order.
    if range_only.len() > 1 {
        let position: std::collections::HashMap<u32, usize> =
            order.iter().enumerate().map(|(at, &i)| (i, at)).collect();
        range_only.sort_by_key(|&(index, _)| position[&index]);
    }
    check_segments(&catalog.binlog_segments)?;
    let (keep, delete) = judge_segments(catalog, horizon, &range_only);
    Ok(BinlogDecisions {
        horizon,
        keep,
        delete,
        range_only,
    })
}

/// The kept backups as the binlog plan reads them: the catalog and the plan's flags.
struct Kept<'a> {
    catalog: &'a Catalog,
    flags: &'a [u32],
}

/// The kept fulls point-in-time recovery may be promised from, newest start first.
struct PitrFulls {
    fulls: Vec<u32>,
    /// Their sorted positions, for the chain checks of pitr_full.
    positions: HashMap<u32, u32>,
    /// A kept full without a start time: then no segment goes.
    unknown_start: Option<u32>,
}

impl Kept<'_> {
    /// Kept, and neither failed nor in progress.
    fn restorable(&self, index: u32) -> bool {
        let bits = self.flags[index as usize];
        bits & KEEP_ANY != 0
            && !matches!(
                status_of(bits),
                BackupStatus::Failed | BackupStatus::InProgress
            )
    }

    fn start_of(&self, index: u32) -> Option<DateTime<FixedOffset>> {
        let backup = &self.catalog.backups[index as usize];
        backup.started_at.or(backup.completed_at)
    }

    /// The kept fulls point-in-time recovery may be promised from; the standalone-only
    /// backups, and under `pitr_full` the fulls kept only by holds, get their own range.
    fn fulls(
        &self,
        order: &[u32],
        standalone_only: &HashSet<u32>,
        pitr_full: Option<u32>,
        kept_by_rules: Option<&[bool]>,
        range_only: &mut Vec<(u32, RangeWhy)>,
    ) -> PitrFulls {
        let mut found = PitrFulls {
            fulls: Vec::new(),
            positions: HashMap::new(),
            unknown_start: None,
        };
        for (position, &index) in order.iter().enumerate() {
            if !self.restorable(index) {
                continue;
            }
            if standalone_only.contains(&index) {
                range_only.push((index, RangeWhy::Standalone));
                continue;
            }
            if self.flags[index as usize] & FACT_FULL == 0 {
                continue;
            }
            // A hold only ever keeps more (issue 47): a full kept only by holds is not one of
            // the newest N, or it would push a full the rules keep out of the count.
            if pitr_full.is_some() && kept_by_rules.is_some_and(|ruled| !ruled[index as usize]) {
                range_only.push((index, RangeWhy::HeldOnly));
                continue;
            }
            match self.start_of(index) {
                Some(_) => {
                    found.fulls.push(index);
                    if pitr_full.is_some() {
                        found.positions.insert(index, position as u32);
                    }
                }
                None => found.unknown_start = Some(index),
            }
        }
        // Newest start first; the plan order breaks ties.
        found
            .fulls
            .sort_by_key(|&index| std::cmp::Reverse(self.start_of(index)));
        found
    }

    /// Keeps the newest `n` fulls that restore open to point-in-time recovery; every full
    /// past them gets its own range.
    ///
    /// Only a full that restores counts (issue 47): one kept only because something needs it
    /// while it is on its way out, missing, or with a volume whose chain is broken is no base
    /// to replay from, and counting it would move the horizon past a restorable full and lose
    /// the replay from it. Such a full newer than the N-th restorable one keeps its place (the
    /// archive after it stays anyway); an older one gets its own range, as every full past the
    /// N-th does.
    fn count_pitr_fulls(
        &self,
        order: &[u32],
        n: u32,
        found: &mut PitrFulls,
        range_only: &mut Vec<(u32, RangeWhy)>,
    ) {
        let catalog = self.catalog;
        let mut chains = ChainCheck::new(catalog, SortedNeighbours::new(catalog, order));
        let mut counted = 0;
        let mut open = found.fulls.len();
        for (at, &index) in found.fulls.iter().enumerate() {
            if counted == n {
                open = at;
                break;
            }
            chains
                .lookup_mut()
                .place(index as usize, found.positions[&index]);
            if chains.broken(index as usize).is_none() {
                counted += 1;
            }
        }
        for index in found.fulls.split_off(open) {
            range_only.push((index, RangeWhy::BeyondPitr(n)));
        }
    }

    /// The point-in-time horizon: the start of the oldest full left open to point-in-time
    /// recovery. None (and a warning) when a kept full has no start, or none is left open.
    fn horizon(
        &self,
        found: &PitrFulls,
        range_only: &[(u32, RangeWhy)],
        warnings: &mut Vec<String>,
    ) -> Option<(DateTime<FixedOffset>, u32)> {
        let horizon = found
            .fulls
            .last()
            .and_then(|&index| self.start_of(index).map(|start| (start, index)));
        if let Some(index) = found.unknown_start {
            warnings.push(format!(
                "backup {}: kept full backup has no start time; no binlog segment is deleted",
                self.catalog.backups[index as usize].id
            ));
            return None;
        }
        if horizon.is_none() && !range_only.is_empty() {
            warnings.push(
                "no kept full backup is open to point-in-time recovery (the kept ones are \
                 standalone or kept only by holds): no binlog segment is deleted"
                    .to_owned(),
            );
        }
        horizon
    }

    /// The kept incrementals that start before the horizon `at` (or at no known time) get
    /// their own range: they build on a full that is not open to point-in-time recovery.
    fn before_horizon(
        &self,
        order: &[u32],
        at: DateTime<FixedOffset>,
        standalone_only: &HashSet<u32>,
        range_only: &mut Vec<(u32, RangeWhy)>,
    ) {
        for &index in order {
            if self.restorable(index)
                && self.flags[index as usize] & FACT_FULL == 0
                && !standalone_only.contains(&index)
                && self.start_of(index).is_none_or(|start| start < at)
            {
                range_only.push((index, RangeWhy::BeforeHorizon));
            }
        }
    }
}

/// Refuses an index with an empty or repeated segment key, or a segment whose first event
/// is after its last.
fn check_segments(segments: &[BinlogSegment]) -> Result<(), PlanError> {
    let mut seen: HashSet<&str> = HashSet::with_capacity(segments.len());
    for segment in segments {
        if segment.key.is_empty() {
            return Err(PlanError::InvalidSegment {
                key: "\"\"".to_owned(),
                message: "key is empty".to_owned(),
            });
        }
        if !seen.insert(segment.key.as_str()) {
            return Err(PlanError::InvalidSegment {
                key: segment.key.clone(),
                message: "duplicate key".to_owned(),
            });
        }
        if let (Some(first), Some(last)) = (segment.first_event, segment.last_event) {
            if first > last {
                return Err(PlanError::InvalidSegment {
                    key: segment.key.clone(),
                    message: "first_event is after last_event".to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// Each segment, newest first, kept or deleted: it goes when it ends before the horizon and
/// no backup restorable to its own end only needs it.
fn judge_segments(
    catalog: &Catalog,
    horizon: Option<(DateTime<FixedOffset>, u32)>,
    range_only: &[(u32, RangeWhy)],
) -> (Vec<u32>, Vec<u32>) {
    let segments = &catalog.binlog_segments;
    let mut segment_order: Vec<u32> = (0..segments.len() as u32).collect();
    segment_order.sort_by(|&a, &b| {
        let (a, b) = (&segments[a as usize], &segments[b as usize]);
        newest_first(a.last_event, b.last_event)
            .then_with(|| newest_first(a.first_event, b.first_event))
            .then_with(|| a.key.cmp(&b.key))
    });
    let mut keep = Vec::new();
    let mut delete = Vec::new();
    for index in segment_order {
        let segment = &segments[index as usize];
        let expired = match (horizon, segment.last_event) {
            (Some((horizon, _)), Some(last_event)) => {
                last_event < horizon
                    && !range_only.iter().any(|&(backup, _)| {
                        own_range_needs(&catalog.backups[backup as usize], segment)
                    })
            }
            _ => false,
        };
        if expired {
            delete.push(index);
        } else {
            keep.push(index);
        }
    }
    (keep, delete)
}

/// Newest first, an unknown time counting as newer than any known one.
fn newest_first(
    a: Option<DateTime<FixedOffset>>,
    b: Option<DateTime<FixedOffset>>,
) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}
