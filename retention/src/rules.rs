//! The engine's third phase: the retention rules over the completed backups that nobody asked
//! to delete, newest first. restic's rules ([`crate::gfs`]), Karbor's `retention_duration`,
//! the recovery window and the verified floor each set their `KEEP_*` bit on what they keep
//! and add its position to the chain walks' starts.

use chrono::{DateTime, Utc};

use crate::catalog::Catalog;
use crate::flags::{
    FACT_ELIGIBLE, FACT_VERIFIED, KEEP_FLOOR_VERIFIED, KEEP_GFS, KEEP_INDEPENDENT,
    KEEP_MIN_REDUNDANCY, KEEP_RETENTION_DURATION, KEEP_VERIFIED, KEEP_WINDOW, KEEP_WINDOW_BASE,
    NONE,
};
use crate::gfs::{self, GfsHit, SortedSnapshots};
use crate::policy::{KeepCount, Policy};
use crate::recovery::{ChainCheck, SortedNeighbours};
use crate::sort_key::Eligible;

/// What restic's rules kept: the hits, and per backup its hit's index (or `NONE`).
pub(crate) struct GfsKept {
    pub hits: Vec<GfsHit>,
    pub hit_of: Vec<u32>,
}

/// Applies every rule of `policy`: sets the `KEEP_*` bits in `flags` and pushes the positions
/// of what they keep onto `walk_from`.
///
/// `floor_position` is the newest completed full backup's, which the next phase keeps: the
/// minimum redundancy counts it as kept.
///
/// Also returns the base the recovery window would take if no backup were held standalone,
/// where that is not the base it took ([`keep_recovery_window`]): what the rules keep without
/// any hold, for `pitr_full` ([`crate::held`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn keep_by_rules(
    catalog: &Catalog,
    eligible: &Eligible,
    order: &[u32],
    policy: &Policy,
    now: DateTime<Utc>,
    any_verified: bool,
    floor_position: Option<usize>,
    flags: &mut [u32],
    walk_from: &mut Vec<u32>,
) -> (GfsKept, Option<u32>) {
    let gfs = keep_gfs(eligible, order, policy, now, flags, walk_from);
    keep_retention_duration(eligible, order, policy, now, flags, walk_from);
    let unheld_base = keep_recovery_window(catalog, eligible, order, policy, now, flags, walk_from);
    if any_verified {
        keep_verified(order, policy, flags, walk_from);
    }
    keep_minimum_redundancy(eligible, order, policy, floor_position, flags, walk_from);
    (gfs, unheld_base)
}

/// barman's `minimum_redundancy` (issue 30): the newest N counted backups (completed, not
/// delete-requested) stay, whatever else is kept; those no rule keeps get the reason
/// `minimum_redundancy N`. An older held backup does not stand in for one of them: barman's
/// own tests (`test_keep_*_out_of_policy`) keep the newest N beside an old `keep:` backup.
fn keep_minimum_redundancy(
    eligible: &Eligible,
    order: &[u32],
    policy: &Policy,
    floor_position: Option<usize>,
    flags: &mut [u32],
    walk_from: &mut Vec<u32>,
) {
    let Some(floor) = policy.minimum_redundancy else {
        return;
    };
    let kept = |flags: &[u32], position: u32| {
        flags[order[position as usize] as usize] & KEEP_INDEPENDENT != 0
            || floor_position == Some(position as usize)
    };
    for &position in eligible.positions.iter().take(floor.get() as usize) {
        if kept(flags, position) {
            continue;
        }
        flags[order[position as usize] as usize] |= KEEP_MIN_REDUNDANCY;
        walk_from.push(position);
    }
}

/// restic's rules: `keep_last`, the calendar buckets, `keep_within*`, `keep_tags`.
fn keep_gfs(
    eligible: &Eligible,
    order: &[u32],
    policy: &Policy,
    now: DateTime<Utc>,
    flags: &mut [u32],
    walk_from: &mut Vec<u32>,
) -> GfsKept {
    let hits = gfs::apply_sorted(
        &SortedSnapshots {
            keys: &eligible.keys,
            offsets: &eligible.offsets,
            tag_masks: &eligible.tags,
        },
        policy,
        now,
        None,
    );
    let mut hit_of = vec![NONE; flags.len()];
    walk_from.reserve(hits.len());
    for (hit_index, hit) in hits.iter().enumerate() {
        let position = eligible.positions[hit.position as usize];
        let index = order[position as usize] as usize;
        flags[index] |= KEEP_GFS;
        hit_of[index] = hit_index as u32;
        walk_from.push(position);
    }
    GfsKept { hits, hit_of }
}

/// Karbor's `retention_duration`: everything completed within the last N days.
fn keep_retention_duration(
    eligible: &Eligible,
    order: &[u32],
    policy: &Policy,
    now: DateTime<Utc>,
    flags: &mut [u32],
    walk_from: &mut Vec<u32>,
) {
    let Some(days) = policy.retention_duration else {
        return;
    };
    let cutoff = now
        .checked_sub_signed(days.as_delta())
        .and_then(|cutoff| cutoff.timestamp_nanos_opt());
    for (rank, &key) in eligible.keys.iter().enumerate() {
        if cutoff.is_some_and(|cutoff| key < cutoff) {
            break;
        }
        let position = eligible.positions[rank];
        flags[order[position as usize] as usize] |= KEEP_RETENTION_DURATION;
        walk_from.push(position);
    }
}

/// The recovery window: everything within it, and the base that replays to the window's
/// start: the newest backup before it whose chain is whole and that is not held standalone.
///
/// Whole is [`crate::recovery`]'s judgement of a restore point (issue 47): the backup, each of
/// its volumes' artifacts and every ancestor `completed` (not failed, in progress, missing or
/// on its way out), no artifact failed or expiring, every parent in the catalog. A backup
/// whose chain is broken restores to nothing, so it is no base: keeping it instead of an older
/// whole one would let that one go and the window's start with it. The chain walk then keeps
/// the base's ancestors, which are all there, so the base stays restorable after the plan.
///
/// A standalone backup is restorable to its own end only (the archive keeps its own range, not
/// what follows it), so it is not the base when an older backup can be: the walk goes on to
/// the next older one, as barman's recovery window does (issue 47). The standalone backup
/// stays anyway, by its hold; skipping it only ever keeps more, so a hold never shrinks the
/// promised window. When no older backup can be the base, the standalone one still is: kept by
/// this rule, it stays a point-in-time base (see [`crate::binlog`]), as it was before its hold.
///
/// So the base is, of the backups before the window, newest first: the first whole one not
/// held standalone; else the first whole one held standalone; and when no chain before the
/// window is whole, the one the rule took before chains were looked at (the first not held
/// standalone, else the first), which a missing ancestor found again would make restorable.
///
/// Chains are looked at only before the window, newest first, until the base is found: one
/// or a few walks up a chain, the parent looked for first among the next older backups.
///
/// Returns the base the rule would take if no backup were held standalone (the first whole
/// one, else the first one), where that is not the base it took: a standalone hold moved the
/// base to an older backup, which is then kept because of a hold, and the skipped one is what
/// the rule keeps without holds. `pitr_full` counts by that ([`crate::held`]).
fn keep_recovery_window(
    catalog: &Catalog,
    eligible: &Eligible,
    order: &[u32],
    policy: &Policy,
    now: DateTime<Utc>,
    flags: &mut [u32],
    walk_from: &mut Vec<u32>,
) -> Option<u32> {
    let window = policy.recovery_window?;
    let start = now
        .checked_sub_signed(window.as_delta())
        .and_then(|start| start.timestamp_nanos_opt());
    let mut chains = ChainCheck::new(catalog, SortedNeighbours::new(catalog, order));
    // The fallbacks in order of preference: whole and standalone, broken and not standalone,
    // broken and standalone. Each (position, index).
    let mut fallbacks: [Option<(u32, usize)>; 3] = [None; 3];
    for (rank, &key) in eligible.keys.iter().enumerate() {
        let position = eligible.positions[rank];
        let index = order[position as usize] as usize;
        if start.is_none_or(|start| key >= start) {
            walk_from.push(position);
            flags[index] |= KEEP_WINDOW;
            continue;
        }
        let standalone = catalog.backups[index].is_standalone();
        chains.lookup_mut().place(index, position);
        let whole = chains.broken(index).is_none();
        let fallback = match (whole, standalone) {
            (true, false) => {
                walk_from.push(position);
                flags[index] |= KEEP_WINDOW_BASE;
                return fallbacks[0].map(|(_, unheld)| unheld as u32);
            }
            (true, true) => 0,
            (false, false) => 1,
            (false, true) => 2,
        };
        fallbacks[fallback].get_or_insert((position, index));
    }
    // Without standalone holds: the first whole one, else the first broken one.
    let unheld = fallbacks[0].or(match (fallbacks[1], fallbacks[2]) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    });
    let taken = fallbacks.into_iter().flatten().next();
    if let Some((position, index)) = taken {
        walk_from.push(position);
        flags[index] |= KEEP_WINDOW_BASE;
    }
    unheld
        .filter(|&unheld| Some(unheld) != taken)
        .map(|(_, index)| index as u32)
}

/// Proven restorable (issue 13): the newest verified backup is the verified floor, kept while
/// no newer one is verified; `keep_verified` keeps the newest N. Only counted backups
/// (completed, not delete-requested) whose last restore test passed.
fn keep_verified(order: &[u32], policy: &Policy, flags: &mut [u32], walk_from: &mut Vec<u32>) {
    let wanted = match policy.keep_verified {
        None => 1,
        Some(KeepCount::Unlimited) => usize::MAX,
        Some(KeepCount::Limited(n)) => n.get() as usize,
    };
    let mut seen = 0usize;
    for (position, &index) in order.iter().enumerate() {
        let bits = flags[index as usize];
        if bits & FACT_ELIGIBLE == 0 || bits & FACT_VERIFIED == 0 {
            continue;
        }
        let mut kept = 0;
        if seen == 0 {
            kept |= KEEP_FLOOR_VERIFIED;
        }
        if policy.keep_verified.is_some() {
            kept |= KEEP_VERIFIED;
        }
        flags[index as usize] |= kept;
        walk_from.push(position as u32);
        seen += 1;
        if seen >= wanted {
            break;
        }
    }
}
