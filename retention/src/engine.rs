//! The retention engine: one pure function from (catalog, policy, now) to decisions.
//!
//! It never reads the clock and never does I/O. It is written for catalogs of a million
//! backups: one sequential pass over the records extracts what later phases need into
//! compact arrays (a packed sort entry that carries the offset and a few flags, per-backup
//! flags, id hashes), the backups are sorted once, and every later phase works on indices and
//! touches a record again only for the few backups it keeps. No string is allocated per
//! backup; reasons are bits that [`Evaluation::to_plan`] turns into [`crate::Reason`]s only
//! when asked ([`crate::evaluation`]).
//!
//! Phases, in order, each a named step of [`evaluate`]:
//! 1. validate and extract (statuses, times, holds, failed grace, duplicate ids):
//!    [`crate::extract`];
//! 2. sort newest first by instant, ties in input order (restic's stable sort):
//!    [`crate::sort_key`];
//! 3. the rules over completed backups: restic's rules ([`crate::gfs`]), then Karbor's
//!    `retention_duration`, the recovery window and the verified floor ([`crate::rules`]);
//! 4. the floor (newest completed full), immutable chains (kept or expired together) and
//!    merges, which need every parent link;
//! 5. chains: every ancestor of a kept backup is kept, `needed by` its nearest kept
//!    descendant. Without immutable chains or merges only the links above kept backups are
//!    resolved, and an incremental's parent is looked for first among the next older
//!    backups, where the scheduler nearly always puts it;
//! 6. volumes (issue 8), only when some backup has them: the same chain rules per volume
//!    artifact ([`crate::volumes`]); a backup may then lose only some of its volumes;
//! 7. the guard (never delete every completed backup) and binlog garbage collection.

use std::num::NonZeroU32;

use crate::binlog::plan_binlog;
use crate::catalog::{BackupStatus, Catalog};
use crate::chains::{chain_roots, older_than, plan_merges, MergeIndices, ParentLinks};
use crate::error::{PlanError, MAX_BACKUPS};
use crate::extract::{extract_all, Extracted};
use crate::flags::{
    status_of, FACT_ELIGIBLE, FACT_FULL, FACT_IMMUTABLE, KEEP_ANY, KEEP_FLOOR, KEEP_FULL_CHAIN,
    KEEP_IMMUTABLE_CHAIN, KEEP_INDEPENDENT, KEEP_MERGE_SOURCE, KEEP_NEEDED, KEEP_VOLUMES_NEEDED,
    NONE, PARTIAL,
};
use crate::gfs::GfsHit;
use crate::held::{self, any_kept_held};
use crate::plan::Plan;
use crate::policy::{ChainMode, KeepCount, Policy};
use crate::rules::keep_by_rules;
use crate::sort_key::{sort_and_scan, Sorted};
use crate::volumes::{self, VolumeDecisions};
use chrono::{DateTime, FixedOffset, Utc};

/// The engine's decisions as indices into the catalog it borrows. Cheap to compute and to
/// query; [`Evaluation::to_plan`] renders the owned [`Plan`].
pub struct Evaluation<'a> {
    pub(crate) catalog: &'a Catalog,
    pub(crate) policy: &'a Policy,
    /// Catalog indices, newest first.
    pub(crate) order: Vec<u32>,
    pub(crate) flags: Vec<u32>,
    pub(crate) id_hashes: Vec<u64>,
    pub(crate) gfs_hits: Vec<GfsHit>,
    /// Per backup: index into `gfs_hits`, or `NONE`.
    pub(crate) gfs_hit_of: Vec<u32>,
    /// (needed backup, the kept backup that needs it), sorted.
    pub(crate) needed_by: Vec<(u32, u32)>,
    /// (member of an immutable chain, the chain's newest backup kept in its own right).
    pub(crate) immutable_with: Vec<(u32, u32)>,
    /// (a backup kept with its full chain by `keep_full`, that full), sorted.
    pub(crate) full_chain_of: Vec<(u32, u32)>,
    /// (merge source, merge target), sorted.
    pub(crate) merge_target_of: Vec<(u32, u32)>,
    pub(crate) merges: Vec<MergeIndices>,
    /// Per-volume decisions, when some backup has volumes.
    pub(crate) volumes: Option<VolumeDecisions>,
    pub(crate) horizon: Option<(DateTime<FixedOffset>, u32)>,
    /// Segment indices, newest first.
    pub(crate) binlog_keep: Vec<u32>,
    pub(crate) binlog_delete: Vec<u32>,
    /// Kept backups the archive keeps only their own range for, with why, in plan order.
    pub(crate) range_only: Vec<(u32, crate::binlog::RangeWhy)>,
    pub(crate) warnings: Vec<String>,
    pub(crate) n_keep: usize,
    pub(crate) n_partial: usize,
}

/// Decides, for every backup and binlog segment of `catalog`, whether `policy` keeps it at
/// `now`, and why. See [`Evaluation`] for the decisions without rendering them.
pub fn evaluate<'a>(
    catalog: &'a Catalog,
    policy: &'a Policy,
    now: DateTime<Utc>,
) -> Result<Evaluation<'a>, PlanError> {
    let now_key = check_inputs(catalog, policy, now)?;
    let merge_mode = policy.chain_mode == ChainMode::Merge;
    let mut warnings = Vec::new();

    // Phase 1: one sequential pass over the records.
    let Extracted {
        mut flags,
        packed,
        id_hashes,
        parent_hashes,
        tag_masks,
        sorted_hashes,
        hash_collision,
        any_immutable,
        any_volumes,
        any_verified,
    } = extract_all(catalog, policy, now_key)?;

    // Phase 2: sort once.
    let Sorted {
        order,
        eligible,
        mut walk_from,
        floor_position,
    } = sort_and_scan(packed, &tag_masks, policy);
    drop(tag_masks);

    // Phase 3: the rules.
    let (gfs, unheld_window_base) = keep_by_rules(
        catalog,
        &eligible,
        &order,
        policy,
        now,
        any_verified,
        floor_position,
        &mut flags,
        &mut walk_from,
    );
    drop(eligible);

    // Phases 4 and 5: every parent link where whole chains are needed, then the chains.
    let mut links = ParentLinks::new(
        catalog,
        &order,
        &id_hashes,
        parent_hashes,
        sorted_hashes,
        hash_collision,
    );
    let (kept_chains, mut needed_by) = keep_chains(
        catalog,
        policy,
        &order,
        &mut links,
        &mut flags,
        floor_position,
        &mut walk_from,
        any_immutable,
        &mut warnings,
    )?;

    // Phase 6: per-volume chains.
    let volume_decisions = if any_volumes {
        Some(volumes::decide(
            volumes::IdIndex::new(catalog, &order, &id_hashes, hash_collision),
            &mut flags,
            &mut links,
            &mut needed_by,
            merge_mode,
            &mut warnings,
        )?)
    } else {
        None
    };
    // What the rules keep without any hold, for pitr_full's count (issue 47).
    let kept_by_rules = (policy.pitr_full.is_some() && any_kept_held(&flags)).then(|| {
        held::kept_by_rules(
            &flags,
            &mut links,
            held::Kept {
                immutable_chains: &kept_chains.immutable_chains,
                volumes: volume_decisions.as_ref(),
                unheld_window_base,
            },
        )
    });
    drop(links);

    // Phase 7: the guard, counts, warnings, binlog.
    let (n_keep, n_partial) = guard(&flags)?;
    warn_kept_while_deleting(
        catalog,
        &order,
        &flags,
        &walk_from,
        &needed_by,
        volume_decisions.is_some(),
        &mut warnings,
    );
    let binlog = plan_binlog(
        catalog,
        &order,
        &flags,
        policy.pitr_full.map(NonZeroU32::get),
        kept_by_rules.as_deref(),
        &mut warnings,
    )?;

    Ok(Evaluation {
        catalog,
        policy,
        order,
        flags,
        id_hashes,
        gfs_hits: gfs.hits,
        gfs_hit_of: gfs.hit_of,
        needed_by,
        immutable_with: kept_chains.immutable_with,
        full_chain_of: kept_chains.full_chain_of,
        merge_target_of: kept_chains.merge_target_of,
        merges: kept_chains.merges,
        volumes: volume_decisions,
        horizon: binlog.horizon,
        binlog_keep: binlog.keep,
        binlog_delete: binlog.delete,
        range_only: binlog.range_only,
        warnings,
        n_keep,
        n_partial,
    })
}

/// What the engine refuses before any pass: a policy without a rule, a catalog over
/// [`MAX_BACKUPS`], a `now` out of range. Returns `now` as the sort key's nanoseconds.
fn check_inputs(catalog: &Catalog, policy: &Policy, now: DateTime<Utc>) -> Result<i64, PlanError> {
    if policy.has_no_rule() {
        return Err(PlanError::NoRule);
    }
    let n = catalog.backups.len();
    if n > MAX_BACKUPS {
        return Err(PlanError::TooLarge { n_backups: n });
    }
    now.timestamp_nanos_opt()
        .ok_or_else(|| PlanError::TimeOutOfRange {
            what: "now".to_owned(),
        })
}

/// Phases 4 and 5: every parent link when immutable chains, merges or full chains need whole
/// chains ([`keep_floor_and_whole_chains`]); then up every chain from the backups kept in
/// their own right ([`walk_chains`]), the links above them resolved first where not all were.
/// Returns the whole chains' decisions and `needed_by`.
#[allow(clippy::too_many_arguments)]
fn keep_chains(
    catalog: &Catalog,
    policy: &Policy,
    order: &[u32],
    links: &mut ParentLinks<'_>,
    flags: &mut [u32],
    floor_position: Option<usize>,
    walk_from: &mut Vec<u32>,
    any_immutable: bool,
    warnings: &mut Vec<String>,
) -> Result<(WholeChains, Pairs), PlanError> {
    let merge_mode = policy.chain_mode == ChainMode::Merge;
    let whole_chains =
        merge_mode || any_immutable || policy.keep_full.is_some() || policy.keep_diff.is_some();
    if whole_chains {
        links.resolve_all(flags, warnings)?;
    }
    let kept_chains = keep_floor_and_whole_chains(
        catalog,
        order,
        links,
        flags,
        floor_position,
        walk_from,
        any_immutable,
        merge_mode,
        (policy.keep_full, policy.keep_diff),
    );
    walk_from.sort_unstable();
    walk_from.dedup();
    if !whole_chains {
        links.link_to_neighbours(walk_from.iter().copied(), flags);
    }
    let needed_by = walk_chains(catalog, order, walk_from, links, flags, warnings)?;
    Ok((kept_chains, needed_by))
}

/// Pairs of catalog indices, sorted.
type Pairs = Vec<(u32, u32)>;

/// What keeping chains whole decided: immutable chains kept with their newest kept backup,
/// and the merges (`chain_mode: merge`).
struct WholeChains {
    /// (member of an immutable chain, the chain's newest backup kept in its own right), sorted.
    immutable_with: Vec<(u32, u32)>,
    /// (root, member) of every kept immutable chain, sorted: kept or expired together.
    immutable_chains: Vec<(u32, u32)>,
    /// (a backup that builds on one of `keep_full`'s fulls, that full), sorted.
    full_chain_of: Vec<(u32, u32)>,
    merges: Vec<MergeIndices>,
    /// (merge source, merge target), sorted.
    merge_target_of: Vec<(u32, u32)>,
}

/// Phase 4: full chains (`keep_full`), the floor (the newest completed full backup),
/// immutable chains (kept or expired together) and merges, which need every parent link.
#[allow(clippy::too_many_arguments)]
fn keep_floor_and_whole_chains(
    catalog: &Catalog,
    order: &[u32],
    links: &ParentLinks<'_>,
    flags: &mut [u32],
    floor_position: Option<usize>,
    walk_from: &mut Vec<u32>,
    any_immutable: bool,
    merge_mode: bool,
    (keep_full, keep_diff): (Option<KeepCount>, Option<KeepCount>),
) -> WholeChains {
    let n = flags.len();
    let whole_chains = merge_mode || any_immutable || keep_full.is_some() || keep_diff.is_some();
    let floor = floor_position.map(|position| order[position] as usize);
    let roots =
        whole_chains.then(|| chain_roots(order, &links.parent, flags, links.has_forward_links));
    // Full chains first: what they keep is kept in its own right, which the merges respect.
    // With keep_diff, a differential and what builds on it are keep_diff's to decide
    // (pgBackRest's repo-retention-diff): each backup's anchor is then its nearest ancestor
    // (or itself) that is a full or a differential.
    let anchors = match (&roots, keep_diff) {
        (Some(_), Some(_)) => {
            let cut: Vec<u32> = links
                .parent
                .iter()
                .enumerate()
                .map(|(i, &up)| {
                    if catalog.backups[i].differential {
                        NONE
                    } else {
                        up
                    }
                })
                .collect();
            Some(chain_roots(order, &cut, flags, links.has_forward_links))
        }
        _ => None,
    };
    let mut full_chain_of = match (keep_full, &roots) {
        (Some(count), Some(roots)) => keep_full_chains(
            order,
            roots,
            anchors.as_deref().unwrap_or(roots),
            count,
            flags,
            walk_from,
        ),
        _ => Vec::new(),
    };
    if let (Some(count), Some(roots), Some(anchors)) = (keep_diff, &roots, &anchors) {
        full_chain_of.extend(keep_diff_chains(
            catalog, order, roots, anchors, count, flags, walk_from,
        ));
        full_chain_of.sort_unstable();
    }
    let mut chain_immutable = vec![false; if any_immutable { n } else { 0 }];
    if let Some(roots) = &roots {
        for index in 0..n {
            if flags[index] & FACT_IMMUTABLE != 0 && roots[index] != NONE {
                chain_immutable[roots[index] as usize] = true;
            }
        }
    }
    let is_immutable_chain = |roots: &[u32], index: usize| {
        any_immutable && roots[index] != NONE && chain_immutable[roots[index] as usize]
    };
    // Merging rewrites a chain, so a floor that a merge will fold into a newer backup is
    // decided after the merges; otherwise it is kept right away.
    let mut floor_pending = None;
    if let (Some(floor), Some(floor_position)) = (floor, floor_position) {
        walk_from.push(floor_position as u32);
        let deferred = merge_mode
            && roots
                .as_ref()
                .is_some_and(|roots| !is_immutable_chain(roots, floor));
        if deferred {
            floor_pending = Some(floor);
        } else {
            flags[floor] |= KEEP_FLOOR;
        }
    }
    let mut kept = WholeChains {
        full_chain_of,
        immutable_with: Vec::new(),
        immutable_chains: Vec::new(),
        merges: Vec::new(),
        merge_target_of: Vec::new(),
    };
    if any_immutable {
        let roots = roots
            .as_ref()
            .expect("roots are computed when a chain is immutable");
        (kept.immutable_with, kept.immutable_chains) =
            keep_immutable_chains(order, roots, &chain_immutable, flags);
    }
    if merge_mode {
        let roots = roots.as_ref().expect("roots are computed in merge mode");
        let mut merges = plan_merges(
            order,
            &links.parent,
            flags,
            roots,
            |index| is_immutable_chain(roots, index),
            KEEP_INDEPENDENT,
        );
        if let Some(floor) = floor_pending {
            let merged_away = merges
                .iter()
                .any(|merge| merge.sources.contains(&(floor as u32)));
            if !merged_away {
                flags[floor] |= KEEP_FLOOR;
                // The floor is now the oldest kept backup of its chain: nothing older to merge.
                merges.retain(|merge| merge.chain != roots[floor]);
            }
        }
        for merge in &merges {
            for &source in &merge.sources {
                flags[source as usize] |= KEEP_MERGE_SOURCE;
                kept.merge_target_of.push((source, merge.target));
            }
        }
        kept.merge_target_of.sort_unstable();
        kept.merges = merges;
    }
    kept
}

/// `keep_full: N` (pgBackRest's `repo-retention-full`, barman's `REDUNDANCY`): the newest N
/// counted full backups (completed, not asked to be deleted), and every counted backup whose
/// chain starts at one of them. Returns (member, its full), sorted.
fn keep_full_chains(
    order: &[u32],
    roots: &[u32],
    anchors: &[u32],
    count: KeepCount,
    flags: &mut [u32],
    walk_from: &mut Vec<u32>,
) -> Vec<(u32, u32)> {
    let wanted = count.limit();
    let mut chosen = vec![false; flags.len()];
    let mut seen = 0usize;
    for (position, &index) in order.iter().enumerate() {
        if seen >= wanted {
            break;
        }
        let i = index as usize;
        let counted_full = flags[i] & FACT_ELIGIBLE != 0 && flags[i] & FACT_FULL != 0;
        if !counted_full || roots[i] != index {
            continue;
        }
        chosen[i] = true;
        flags[i] |= KEEP_FULL_CHAIN;
        walk_from.push(position as u32);
        seen += 1;
    }
    let mut members = Vec::new();
    for (position, &index) in order.iter().enumerate() {
        let i = index as usize;
        // Without keep_diff the anchors are the roots; with it, a chain stops at a
        // differential, which keep_diff decides.
        let root = anchors[i];
        if root == NONE || root == index || !chosen[root as usize] {
            continue;
        }
        if flags[i] & FACT_ELIGIBLE == 0 {
            continue;
        }
        flags[i] |= KEEP_FULL_CHAIN;
        walk_from.push(position as u32);
        members.push((index, root));
    }
    members.sort_unstable();
    members
}

/// `keep_diff: N` (pgBackRest's `repo-retention-diff`, issue 30), which narrows `keep_full`:
/// of the counted full and differential backups of the chains `keep_full` keeps, newest first
/// (a full counts as a differential, as pgBackRest counts it), the newest N; the differentials
/// among them are kept with every counted backup whose anchor they are (the incrementals built
/// on them). An older differential of a kept chain, and what builds on it, is not kept by
/// `keep_full` (`keep_full_chains` stops at differentials). Returns (member, its
/// differential), unsorted; the differentials themselves carry the bit alone.
fn keep_diff_chains(
    catalog: &Catalog,
    order: &[u32],
    roots: &[u32],
    anchors: &[u32],
    count: KeepCount,
    flags: &mut [u32],
    walk_from: &mut Vec<u32>,
) -> Vec<(u32, u32)> {
    let wanted = count.limit();
    let mut chosen = vec![false; flags.len()];
    let mut seen = 0usize;
    for (position, &index) in order.iter().enumerate() {
        if seen >= wanted {
            break;
        }
        let i = index as usize;
        if flags[i] & FACT_ELIGIBLE == 0 || roots[i] == NONE {
            continue;
        }
        let full = flags[i] & FACT_FULL != 0 && roots[i] == index;
        let differential = catalog.backups[i].differential && !full;
        if !full && !differential {
            continue;
        }
        // A chain keep_full lets go is not counted: its differentials go with its full.
        if flags[roots[i] as usize] & KEEP_FULL_CHAIN == 0 {
            continue;
        }
        seen += 1;
        if differential {
            chosen[i] = true;
            flags[i] |= KEEP_FULL_CHAIN;
            walk_from.push(position as u32);
        }
    }
    let mut members = Vec::new();
    for (position, &index) in order.iter().enumerate() {
        let i = index as usize;
        let anchor = anchors[i];
        if anchor == NONE || anchor == index || !chosen[anchor as usize] {
            continue;
        }
        if flags[i] & FACT_ELIGIBLE == 0 {
            continue;
        }
        flags[i] |= KEEP_FULL_CHAIN;
        walk_from.push(position as u32);
        members.push((index, anchor));
    }
    members
}

/// Keeps every member of an immutable chain whose newest backup is kept in its own right;
/// returns (member, that backup), sorted, and (the chain's root, member) for every member of
/// those chains, those kept in their own right too, sorted.
fn keep_immutable_chains(
    order: &[u32],
    roots: &[u32],
    chain_immutable: &[bool],
    flags: &mut [u32],
) -> (Pairs, Pairs) {
    let mut newest_kept = vec![NONE; flags.len()];
    for &index in order {
        let index = index as usize;
        let root = roots[index];
        if root != NONE
            && chain_immutable[root as usize]
            && flags[index] & KEEP_INDEPENDENT != 0
            && newest_kept[root as usize] == NONE
        {
            newest_kept[root as usize] = index as u32;
        }
    }
    let mut immutable_with = Vec::new();
    let mut kept_chains = Vec::new();
    for &index in order {
        let index = index as usize;
        let root = roots[index];
        if root == NONE || !chain_immutable[root as usize] {
            continue;
        }
        let kept_with = newest_kept[root as usize];
        if kept_with == NONE {
            continue;
        }
        kept_chains.push((root, index as u32));
        if flags[index] & KEEP_INDEPENDENT == 0 {
            flags[index] |= KEEP_IMMUTABLE_CHAIN;
            immutable_with.push((index as u32, kept_with));
        }
    }
    immutable_with.sort_unstable();
    kept_chains.sort_unstable();
    (immutable_with, kept_chains)
}

/// Phase 5: walks up from every backup kept in its own right (at the sorted positions
/// `walk_from`, newest first), keeping each ancestor `needed by` the walk's start; stops at a
/// backup kept in its own right or already walked. Merge sources are passed through: the
/// target will depend on what lies above them. Returns (needed, the backup that needs it),
/// sorted by needed backup, each one's dependents newest first.
fn walk_chains(
    catalog: &Catalog,
    order: &[u32],
    walk_from: &[u32],
    links: &mut ParentLinks<'_>,
    flags: &mut [u32],
    warnings: &mut Vec<String>,
) -> Result<Vec<(u32, u32)>, PlanError> {
    let backups = &catalog.backups;
    let mut needed_by: Vec<(u32, u32)> = Vec::new();
    for &start_position in walk_from {
        let start = order[start_position as usize] as usize;
        if flags[start] & KEEP_INDEPENDENT == 0 {
            continue;
        }
        let walk_begins = needed_by.len();
        let mut node = start;
        let mut node_position = start_position;
        loop {
            let (ancestor, ancestor_position) =
                links.parent_of(node, node_position, flags, warnings);
            if ancestor == NONE {
                break;
            }
            let ancestor_flags = flags[ancestor as usize];
            if ancestor_flags & KEEP_MERGE_SOURCE != 0 {
                node = ancestor as usize;
                node_position = ancestor_position;
                continue;
            }
            if ancestor_flags & KEEP_INDEPENDENT != 0 {
                if ancestor as usize == start {
                    return Err(PlanError::ParentCycle {
                        id: backups[start].id.clone(),
                    });
                }
                break;
            }
            if ancestor_flags & KEEP_NEEDED != 0 {
                if needed_by[walk_begins..]
                    .iter()
                    .any(|&(needed, _)| needed == ancestor)
                {
                    return Err(PlanError::ParentCycle {
                        id: backups[ancestor as usize].id.clone(),
                    });
                }
                needed_by.push((ancestor, start as u32));
                break;
            }
            needed_by.push((ancestor, start as u32));
            flags[ancestor as usize] |= KEEP_NEEDED;
            node = ancestor as usize;
            node_position = ancestor_position;
        }
    }
    // By needed backup; for each, the dependents stay newest first (the walks' order).
    needed_by.sort_by_key(|&(needed, _)| needed);
    Ok(needed_by)
}

/// Phase 7's guard: never delete every completed backup. Returns the numbers of kept and
/// partial backups.
fn guard(flags: &[u32]) -> Result<(usize, usize), PlanError> {
    let mut n_keep = 0;
    let mut n_partial = 0;
    let mut any_eligible = false;
    let mut any_completed_kept = false;
    for &bits in flags {
        let kept = bits & KEEP_ANY != 0;
        n_keep += usize::from(kept);
        n_partial += usize::from(bits & PARTIAL != 0);
        any_eligible |= bits & FACT_ELIGIBLE != 0;
        any_completed_kept |= kept && status_of(bits) == BackupStatus::Completed;
    }
    if any_eligible && !any_completed_kept {
        return Err(PlanError::WouldDeleteAll);
    }
    Ok((n_keep, n_partial))
}

/// A warning, newest first, for every backup marked for deletion (or being deleted) that this
/// plan keeps, whole or for some volumes.
fn warn_kept_while_deleting(
    catalog: &Catalog,
    order: &[u32],
    flags: &[u32],
    walk_from: &[u32],
    needed_by: &[(u32, u32)],
    has_volumes: bool,
    warnings: &mut Vec<String>,
) {
    let volume_backups_kept = has_volumes.then(|| {
        (0..flags.len()).filter(|&index| flags[index] & (KEEP_VOLUMES_NEEDED | PARTIAL) != 0)
    });
    let mut kept_while_deleting: Vec<usize> = walk_from
        .iter()
        .map(|&position| order[position as usize] as usize)
        .chain(needed_by.iter().map(|&(needed, _)| needed as usize))
        .chain(volume_backups_kept.into_iter().flatten())
        .filter(|&index| status_of(flags[index]).is_being_deleted())
        .collect();
    kept_while_deleting.sort_by(|&a, &b| {
        if a == b {
            std::cmp::Ordering::Equal
        } else if older_than(catalog, a, b) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Less
        }
    });
    kept_while_deleting.dedup();
    for index in kept_while_deleting {
        let what = if flags[index] & PARTIAL != 0 {
            "some of its volumes are kept"
        } else {
            "kept"
        };
        warnings.push(format!(
            "backup {}: marked {} but {what} by this plan",
            catalog.backups[index].id,
            status_of(flags[index]).as_str()
        ));
    }
}

/// Decides the whole plan and renders it: [`evaluate`] followed by [`Evaluation::to_plan`].
pub fn plan(catalog: &Catalog, policy: &Policy, now: DateTime<Utc>) -> Result<Plan, PlanError> {
    Ok(evaluate(catalog, policy, now)?.to_plan())
}
