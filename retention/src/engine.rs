//! The retention engine: one pure function from (catalog, policy, now) to decisions.
//!
//! It never reads the clock and never does I/O. It is written for catalogs of a million
//! backups: one sequential pass over the records extracts what later phases need into
//! compact arrays (a packed sort entry that carries the offset and a few flags, per-backup
//! flags, id hashes), the backups are sorted once, and every later phase works on indices and
//! touches a record again only for the few backups it keeps. No string is allocated per
//! backup; reasons are bits that [`Evaluation::to_plan`] turns into text only when asked.
//!
//! Phases, in order:
//! 1. validate and extract (statuses, times, holds, failed grace, duplicate ids);
//! 2. sort newest first by instant, ties in input order (restic's stable sort);
//! 3. the rules over completed backups: restic's rules ([`crate::gfs`]), then Karbor's
//!    `retention_duration` and the recovery window; holds; the floor (newest completed full);
//! 4. immutable chains (kept or expired together) and merges, which need every parent link;
//! 5. chains: every ancestor of a kept backup is kept, `needed by` its nearest kept
//!    descendant. Without immutable chains or merges only the links above kept backups are
//!    resolved, and an incremental's parent is looked for first among the next older
//!    backups, where the scheduler nearly always puts it;
//! 6. volumes (issue 8), only when some backup has them: the same chain rules per volume
//!    artifact ([`crate::volumes`]); a backup may then lose only some of its volumes;
//! 7. the guard (never delete every completed backup) and binlog garbage collection.

use std::borrow::Cow;
use std::collections::HashSet;

use chrono::{DateTime, FixedOffset, Utc};

use crate::binlog::plan_binlog;
use crate::catalog::{BackupKind, BackupRecord, BackupStatus, Catalog, VerificationState};
use crate::chains::{chain_roots, older_than, plan_merges, MergeIndices, ParentLinks};
use crate::gfs::{self, GfsHit, SortedSnapshots};
use crate::id_hash::hash_id;
use crate::plan::{
    BinlogPlan, Decision, Merge, Plan, PlanSummary, Verdict, VolumeDecision, VolumeMerge,
};
use crate::policy::{ChainMode, KeepCount, Policy};
use crate::volumes::{self, VolumeDecisions};

/// The largest catalog the engine accepts (indices are `u32`, and the plan's lookup index
/// uses the top bit).
pub const MAX_BACKUPS: usize = (1 << 31) - 1;

/// "No backup" in index arrays.
pub(crate) const NONE: u32 = u32::MAX;

// Keep reasons, one bit each, in the order they are rendered.
pub(crate) const KEEP_LEGAL_HOLD: u32 = 1 << 0;
pub(crate) const KEEP_HOLD: u32 = 1 << 1;
pub(crate) const KEEP_IN_PROGRESS: u32 = 1 << 2;
pub(crate) const KEEP_FAILED_GRACE: u32 = 1 << 3;
pub(crate) const KEEP_FAILED_NO_TIME: u32 = 1 << 4;
pub(crate) const KEEP_GFS: u32 = 1 << 5;
pub(crate) const KEEP_RETENTION_DURATION: u32 = 1 << 6;
pub(crate) const KEEP_WINDOW: u32 = 1 << 7;
pub(crate) const KEEP_WINDOW_BASE: u32 = 1 << 8;
pub(crate) const KEEP_FLOOR: u32 = 1 << 9;
pub(crate) const KEEP_IMMUTABLE_CHAIN: u32 = 1 << 10;
/// One of the newest `keep_verified` backups a restore test proved restorable.
pub(crate) const KEEP_VERIFIED: u32 = 1 << 11;
/// The newest backup a restore test proved restorable: kept while no newer one is proven.
pub(crate) const KEEP_FLOOR_VERIFIED: u32 = 1 << 12;
/// Its objects are not in the bucket as recorded (the scrub said so): never counted, never
/// deleted without a user's word.
pub(crate) const KEEP_MISSING: u32 = 1 << 13;
pub(crate) const KEEP_MERGE_SOURCE: u32 = 1 << 14;
pub(crate) const KEEP_NEEDED: u32 = 1 << 15;
/// A backup with volumes that no rule keeps, but every one of its volumes is needed.
pub(crate) const KEEP_VOLUMES_NEEDED: u32 = 1 << 16;
/// Kept for a reason of its own, not only because something else needs it.
pub(crate) const KEEP_INDEPENDENT: u32 = (1 << 14) - 1;
pub(crate) const KEEP_ANY: u32 = (1 << 17) - 1;
/// Not kept, but some of its volumes are: the record and those volumes stay.
pub(crate) const PARTIAL: u32 = 1 << 17;
/// In artifact flags only ([`crate::volumes`]): the artifact's backup is kept.
pub(crate) const ART_BACKUP_KEPT: u32 = 1 << 18;

// Facts about the record, set in the first pass.
pub(crate) const FACT_FULL: u32 = 1 << 19;
pub(crate) const FACT_IMMUTABLE: u32 = 1 << 20;
pub(crate) const FACT_DELETE_REQUESTED: u32 = 1 << 21;
/// Not failed: may be a parent or have one.
pub(crate) const FACT_CHAIN_NODE: u32 = 1 << 22;
/// Completed and not delete-requested: the rules count it.
pub(crate) const FACT_ELIGIBLE: u32 = 1 << 23;
/// Has per-volume artifacts: its chains are per volume, and it counts as a full backup for
/// the floor and the binlog horizon (a kept one is restorable with its volumes' chains).
pub(crate) const FACT_VOLUMES: u32 = 1 << 24;
/// A restore test proved it restorable (its last verdict is `verified`).
pub(crate) const FACT_VERIFIED: u32 = 1 << 28;
const STATUS_SHIFT: u32 = 25;

fn status_bits(status: BackupStatus) -> u32 {
    let code = match status {
        BackupStatus::InProgress => 0,
        BackupStatus::Completed => 1,
        BackupStatus::Failed => 2,
        BackupStatus::Expiring => 3,
        BackupStatus::Deleting => 4,
        BackupStatus::DeleteFailed => 5,
        BackupStatus::Missing => 6,
    };
    code << STATUS_SHIFT
}

pub(crate) fn status_of(flags: u32) -> BackupStatus {
    match (flags >> STATUS_SHIFT) & 0x7 {
        0 => BackupStatus::InProgress,
        1 => BackupStatus::Completed,
        2 => BackupStatus::Failed,
        3 => BackupStatus::Expiring,
        4 => BackupStatus::Deleting,
        5 => BackupStatus::DeleteFailed,
        _ => BackupStatus::Missing,
    }
}

/// Why a plan could not be made. None of these is retryable: the same catalog and policy give
/// the same error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("policy has no retention rule; a policy without rules would delete every backup")]
    NoRule,
    #[error("backup {id}: {message}")]
    InvalidBackup { id: String, message: String },
    #[error("backup {id}: duplicate id")]
    DuplicateId { id: String },
    #[error("backup {id}: parent chain loops back on itself")]
    ParentCycle { id: String },
    #[error("binlog segment {key}: {message}")]
    InvalidSegment { key: String, message: String },
    #[error("{what}: time is outside the supported range (years 1678 to 2261)")]
    TimeOutOfRange { what: String },
    #[error("catalog has {n_backups} backups; at most {MAX_BACKUPS} are supported")]
    TooLarge { n_backups: usize },
    #[error(
        "catalog has {n_artifacts} volume artifacts or more; at most {MAX_BACKUPS} are supported"
    )]
    TooManyVolumes { n_artifacts: usize },
    #[error(
        "refusing to delete every completed backup of the group; check the policy and the catalog"
    )]
    WouldDeleteAll,
}

impl PlanError {
    pub fn is_retryable(&self) -> bool {
        false
    }
}

// The low 32 bits of a packed sort entry: the backup's UTC offset plus 86 400 (18 bits) and
// what the scan after the sort needs to know without touching the record.
const PAYLOAD_OFFSET_MASK: u32 = (1 << 18) - 1;
const PAYLOAD_ELIGIBLE: u32 = 1 << 18;
/// Matches at least one of the policy's tag lists.
const PAYLOAD_TAGGED: u32 = 1 << 19;
/// Legal hold, a hold, or in progress: kept whatever the rules say.
const PAYLOAD_PROTECTED: u32 = 1 << 20;
const PAYLOAD_COMPLETED_FULL: u32 = 1 << 21;
/// The tag-list bit set, when the policy has at most `PAYLOAD_MAX_TAG_LISTS` lists.
const PAYLOAD_TAGS_SHIFT: u32 = 22;
const PAYLOAD_MAX_TAG_LISTS: usize = 10;

fn payload_from_offset(offset_seconds: i32) -> u32 {
    // chrono offsets are within ±86 399 s.
    (offset_seconds + 86_400) as u32 & PAYLOAD_OFFSET_MASK
}

fn payload_offset(payload: u32) -> i32 {
    (payload & PAYLOAD_OFFSET_MASK) as i32 - 86_400
}

/// Packs a sort key so that ascending `u128` order is newest first, then input order. The
/// low 32 bits are free for a payload: the index already makes every entry unique.
pub(crate) fn pack_newest_first(key: i64, index: u32) -> u128 {
    let ascending = (key as u64) ^ (1 << 63);
    (u128::from(!ascending) << 64) | (u128::from(index) << 32)
}

fn unpack_key(packed: u128) -> i64 {
    let ascending = !((packed >> 64) as u64);
    (ascending ^ (1 << 63)) as i64
}

/// The engine's decisions as indices into the catalog it borrows. Cheap to compute and to
/// query; [`Evaluation::to_plan`] renders the owned [`Plan`].
pub struct Evaluation<'a> {
    catalog: &'a Catalog,
    policy: &'a Policy,
    /// Catalog indices, newest first.
    order: Vec<u32>,
    flags: Vec<u32>,
    id_hashes: Vec<u64>,
    gfs_hits: Vec<GfsHit>,
    /// Per backup: index into `gfs_hits`, or `NONE`.
    gfs_hit_of: Vec<u32>,
    /// (needed backup, the kept backup that needs it), sorted.
    needed_by: Vec<(u32, u32)>,
    /// (member of an immutable chain, the chain's newest backup kept in its own right).
    immutable_with: Vec<(u32, u32)>,
    /// (merge source, merge target), sorted.
    merge_target_of: Vec<(u32, u32)>,
    merges: Vec<MergeIndices>,
    /// Per-volume decisions, when some backup has volumes.
    volumes: Option<VolumeDecisions>,
    horizon: Option<(DateTime<FixedOffset>, u32)>,
    /// Segment indices, newest first.
    binlog_keep: Vec<u32>,
    binlog_delete: Vec<u32>,
    warnings: Vec<String>,
    n_keep: usize,
    n_partial: usize,
}

/// Decides, for every backup and binlog segment of `catalog`, whether `policy` keeps it at
/// `now`, and why. See [`Evaluation`] for the decisions without rendering them.
pub fn evaluate<'a>(
    catalog: &'a Catalog,
    policy: &'a Policy,
    now: DateTime<Utc>,
) -> Result<Evaluation<'a>, PlanError> {
    if policy.has_no_rule() {
        return Err(PlanError::NoRule);
    }
    let backups = &catalog.backups;
    let n = backups.len();
    if n > MAX_BACKUPS {
        return Err(PlanError::TooLarge { n_backups: n });
    }
    let now_key = now
        .timestamp_nanos_opt()
        .ok_or_else(|| PlanError::TimeOutOfRange {
            what: "now".to_owned(),
        })?;
    let grace_nanos = i128::from(
        policy
            .failed_grace
            .as_delta()
            .num_nanoseconds()
            .unwrap_or(i64::MAX),
    );
    let has_tags = !policy.keep_tags.is_empty();
    let merge_mode = policy.chain_mode == ChainMode::Merge;
    let mut warnings = Vec::new();

    // Phase 1: one sequential pass over the records.
    let mut flags: Vec<u32> = Vec::with_capacity(n);
    let mut packed: Vec<u128> = Vec::with_capacity(n);
    let mut id_hashes: Vec<u64> = Vec::with_capacity(n);
    let mut parent_hashes: Vec<u64> = Vec::with_capacity(n);
    // Up to PAYLOAD_MAX_TAG_LISTS tag lists ride in the sort entry; more need an array.
    let inline_tags = policy.keep_tags.len() <= PAYLOAD_MAX_TAG_LISTS;
    let mut tag_masks: Vec<u64> = Vec::with_capacity(if has_tags && !inline_tags { n } else { 0 });
    let mut any_immutable = false;
    let mut any_volumes = false;
    let mut any_verified = false;
    for (index, backup) in backups.iter().enumerate() {
        let (bits, payload, key) = extract(index, backup, now_key, grace_nanos)?;
        let mut payload = payload;
        if has_tags {
            let mask = gfs::tag_mask(policy, &backup.tags);
            if mask != 0 {
                payload |= PAYLOAD_TAGGED;
            }
            if inline_tags {
                payload |= (mask as u32) << PAYLOAD_TAGS_SHIFT;
            } else {
                tag_masks.push(mask);
            }
        }
        any_immutable |= bits & FACT_IMMUTABLE != 0 && bits & FACT_CHAIN_NODE != 0;
        any_volumes |= bits & FACT_VOLUMES != 0;
        any_verified |= bits & FACT_VERIFIED != 0;
        flags.push(bits);
        packed.push(pack_newest_first(key, index as u32) | u128::from(payload));
        id_hashes.push(hash_id(&backup.id));
        parent_hashes.push(match &backup.parent {
            Some(parent) if bits & FACT_CHAIN_NODE != 0 && bits & FACT_FULL == 0 => hash_id(parent),
            _ => 0,
        });
    }

    // Duplicate ids. Equal ids hash equal, so distinct hashes prove distinct ids; on a shared
    // hash, compare the strings.
    let mut sorted_hashes = id_hashes.clone();
    sorted_hashes.sort_unstable();
    let hash_collision = sorted_hashes.windows(2).any(|pair| pair[0] == pair[1]);
    if hash_collision {
        check_exact_duplicates(catalog)?;
    }

    // Phase 2: sort once. The entries carry what the rules need, so the scan after the sort
    // reads them in order instead of jumping around the per-backup arrays.
    packed.sort_unstable();
    let order: Vec<u32> = packed.iter().map(|&entry| (entry >> 32) as u32).collect();
    let mut eligible_positions: Vec<u32> = Vec::with_capacity(n);
    let mut eligible_keys: Vec<i64> = Vec::with_capacity(n);
    let mut eligible_offsets: Vec<i32> = Vec::with_capacity(n);
    let mut eligible_tags: Vec<u64> = Vec::with_capacity(if has_tags { n } else { 0 });
    let mut walk_from: Vec<u32> = Vec::new();
    let mut floor_position = None;
    for (position, &entry) in packed.iter().enumerate() {
        let payload = entry as u32;
        if payload & PAYLOAD_ELIGIBLE != 0 {
            eligible_positions.push(position as u32);
            eligible_keys.push(unpack_key(entry));
            eligible_offsets.push(payload_offset(payload));
            if has_tags {
                let mask = if payload & PAYLOAD_TAGGED == 0 {
                    0
                } else if inline_tags {
                    u64::from(payload >> PAYLOAD_TAGS_SHIFT)
                } else {
                    tag_masks[(entry >> 32) as u32 as usize]
                };
                eligible_tags.push(mask);
            }
        }
        if payload & PAYLOAD_PROTECTED != 0 {
            walk_from.push(position as u32);
        }
        if floor_position.is_none() && payload & PAYLOAD_COMPLETED_FULL != 0 {
            floor_position = Some(position);
        }
    }
    drop(packed);
    drop(tag_masks);

    // Phase 3: the rules, over completed backups that nobody asked to delete.
    let gfs_hits = gfs::apply_sorted(
        &SortedSnapshots {
            keys: &eligible_keys,
            offsets: &eligible_offsets,
            tag_masks: &eligible_tags,
        },
        policy,
        now,
        None,
    );
    let mut gfs_hit_of = vec![NONE; n];
    walk_from.reserve(gfs_hits.len());
    for (hit_index, hit) in gfs_hits.iter().enumerate() {
        let position = eligible_positions[hit.position as usize];
        let index = order[position as usize] as usize;
        flags[index] |= KEEP_GFS;
        gfs_hit_of[index] = hit_index as u32;
        walk_from.push(position);
    }
    if let Some(days) = policy.retention_duration {
        let cutoff = now
            .checked_sub_signed(days.as_delta())
            .and_then(|cutoff| cutoff.timestamp_nanos_opt());
        for (rank, &key) in eligible_keys.iter().enumerate() {
            if cutoff.is_some_and(|cutoff| key < cutoff) {
                break;
            }
            let position = eligible_positions[rank];
            flags[order[position as usize] as usize] |= KEEP_RETENTION_DURATION;
            walk_from.push(position);
        }
    }
    if let Some(window) = policy.recovery_window {
        let start = now
            .checked_sub_signed(window.as_delta())
            .and_then(|start| start.timestamp_nanos_opt());
        for (rank, &key) in eligible_keys.iter().enumerate() {
            let position = eligible_positions[rank];
            let index = order[position as usize] as usize;
            walk_from.push(position);
            if start.is_some_and(|start| key < start) {
                // The newest backup before the window: the base that replays to its start.
                flags[index] |= KEEP_WINDOW_BASE;
                break;
            }
            flags[index] |= KEEP_WINDOW;
        }
    }
    // Proven restorable (issue 13): the newest verified backup is the verified floor, kept
    // while no newer one is verified; `keep_verified` keeps the newest N. Only counted
    // backups (completed, not delete-requested) whose last restore test passed.
    if any_verified {
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
    drop(eligible_positions);
    drop(eligible_keys);
    drop(eligible_offsets);
    drop(eligible_tags);

    // Phase 4: every parent link, when immutable chains or merges need whole chains.
    let mut links = ParentLinks::new(
        catalog,
        &order,
        &id_hashes,
        parent_hashes,
        sorted_hashes,
        hash_collision,
    );
    let whole_chains = merge_mode || any_immutable;
    if whole_chains {
        links.resolve_all(&flags, &mut warnings)?;
    }
    let floor = floor_position.map(|position| order[position] as usize);
    let roots =
        whole_chains.then(|| chain_roots(&order, &links.parent, &flags, links.has_forward_links));
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
    let mut immutable_with = Vec::new();
    if any_immutable {
        let roots = roots
            .as_ref()
            .expect("roots are computed when a chain is immutable");
        let mut newest_kept = vec![NONE; n];
        for &index in &order {
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
        for &index in &order {
            let index = index as usize;
            let root = roots[index];
            if root == NONE || !chain_immutable[root as usize] {
                continue;
            }
            let kept_with = newest_kept[root as usize];
            if kept_with != NONE && flags[index] & KEEP_INDEPENDENT == 0 {
                flags[index] |= KEEP_IMMUTABLE_CHAIN;
                immutable_with.push((index as u32, kept_with));
            }
        }
        immutable_with.sort_unstable();
    }
    let mut merges = Vec::new();
    let mut merge_target_of = Vec::new();
    if merge_mode {
        let roots = roots.as_ref().expect("roots are computed in merge mode");
        merges = plan_merges(
            &order,
            &links.parent,
            &flags,
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
                merge_target_of.push((source, merge.target));
            }
        }
        merge_target_of.sort_unstable();
    }
    drop(chain_immutable);
    drop(roots);

    // Phase 5: chains. Walk up from every backup kept in its own right, newest first; stop at
    // a backup kept in its own right or already walked. Merge sources are passed through: the
    // target will depend on what lies above them.
    walk_from.sort_unstable();
    walk_from.dedup();
    if !whole_chains {
        links.link_to_neighbours(walk_from.iter().copied(), &flags);
    }
    let mut needed_by: Vec<(u32, u32)> = Vec::new();
    for &start_position in &walk_from {
        let start = order[start_position as usize] as usize;
        if flags[start] & KEEP_INDEPENDENT == 0 {
            continue;
        }
        let walk_begins = needed_by.len();
        let mut node = start;
        let mut node_position = start_position;
        loop {
            let (ancestor, ancestor_position) =
                links.parent_of(node, node_position, &flags, &mut warnings);
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

    // Phase 7: the guard, counts, warnings, binlog.
    let mut n_keep = 0;
    let mut n_partial = 0;
    let mut any_eligible = false;
    let mut any_completed_kept = false;
    for &bits in &flags {
        let kept = bits & KEEP_ANY != 0;
        n_keep += usize::from(kept);
        n_partial += usize::from(bits & PARTIAL != 0);
        any_eligible |= bits & FACT_ELIGIBLE != 0;
        any_completed_kept |= kept && status_of(bits) == BackupStatus::Completed;
    }
    if any_eligible && !any_completed_kept {
        return Err(PlanError::WouldDeleteAll);
    }
    let volume_backups_kept = volume_decisions
        .as_ref()
        .map(|_| (0..n).filter(|&index| flags[index] & (KEEP_VOLUMES_NEEDED | PARTIAL) != 0));
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
            backups[index].id,
            status_of(flags[index]).as_str()
        ));
    }
    let (horizon, binlog_keep, binlog_delete) =
        plan_binlog(catalog, &order, &flags, &mut warnings)?;

    Ok(Evaluation {
        catalog,
        policy,
        order,
        flags,
        id_hashes,
        gfs_hits,
        gfs_hit_of,
        needed_by,
        immutable_with,
        merge_target_of,
        merges,
        volumes: volume_decisions,
        horizon,
        binlog_keep,
        binlog_delete,
        warnings,
        n_keep,
        n_partial,
    })
}

/// Phase 1 for one record: validation, flags, the sort payload and the sort key.
fn extract(
    index: usize,
    backup: &BackupRecord,
    now_key: i64,
    grace_nanos: i128,
) -> Result<(u32, u32, i64), PlanError> {
    let invalid = |message: &str| PlanError::InvalidBackup {
        id: display_id(index, &backup.id),
        message: message.to_owned(),
    };
    if backup.id.is_empty() {
        return Err(invalid("id is empty"));
    }
    let time = match backup.status {
        BackupStatus::Completed => Some(
            backup
                .completed_at
                .ok_or_else(|| invalid("completed backup has no completed_at"))?,
        ),
        _ => backup.completed_at.or(backup.started_at),
    };
    let key = match time {
        Some(time) => time
            .timestamp_nanos_opt()
            .ok_or_else(|| PlanError::TimeOutOfRange {
                what: format!("backup {}", backup.id),
            })?,
        // No time at all (an in-progress backup that did not say when it started): newest.
        None => i64::MAX,
    };
    let mut bits = status_bits(backup.status);
    let mut payload = time.map_or(0, |time| {
        payload_from_offset(time.offset().local_minus_utc())
    });
    let has_volumes = !backup.volumes.is_empty();
    if has_volumes {
        check_volumes(backup).map_err(|message| invalid(&message))?;
        bits |= FACT_VOLUMES;
    }
    // A backup with volumes has no backup-level chain: its volumes have theirs.
    let full = backup.kind == BackupKind::Full || has_volumes;
    if full {
        bits |= FACT_FULL;
    }
    if backup.immutable {
        bits |= FACT_IMMUTABLE;
    }
    if backup.delete_requested {
        bits |= FACT_DELETE_REQUESTED;
    }
    if backup.legal_hold {
        bits |= KEEP_LEGAL_HOLD;
    }
    if backup.verification == VerificationState::Verified {
        bits |= FACT_VERIFIED;
    }
    if !backup.holds.is_empty() {
        bits |= KEEP_HOLD;
    }
    match backup.status {
        BackupStatus::InProgress => bits |= KEEP_IN_PROGRESS | FACT_CHAIN_NODE,
        BackupStatus::Completed => {
            bits |= FACT_CHAIN_NODE;
            if !backup.delete_requested {
                bits |= FACT_ELIGIBLE;
                payload |= PAYLOAD_ELIGIBLE;
            }
            if full {
                payload |= PAYLOAD_COMPLETED_FULL;
            }
        }
        BackupStatus::Failed => {
            if time.is_none() {
                bits |= KEEP_FAILED_NO_TIME;
            } else if !backup.delete_requested
                && i128::from(now_key) - i128::from(key) <= grace_nanos
            {
                bits |= KEEP_FAILED_GRACE;
            }
        }
        BackupStatus::Expiring | BackupStatus::Deleting | BackupStatus::DeleteFailed => {
            bits |= FACT_CHAIN_NODE;
        }
        // Not counted (its objects are gone or changed), but kept with what it builds on until
        // a user deletes it or the scrub finds its objects again.
        BackupStatus::Missing => {
            bits |= FACT_CHAIN_NODE;
            if !backup.delete_requested {
                bits |= KEEP_MISSING;
            }
        }
    }
    if bits & (KEEP_LEGAL_HOLD | KEEP_HOLD | KEEP_IN_PROGRESS | KEEP_MISSING) != 0 {
        payload |= PAYLOAD_PROTECTED;
    }
    if !full && backup.status != BackupStatus::Failed {
        match &backup.parent {
            None => return Err(invalid("incremental backup has no parent")),
            Some(parent) if *parent == backup.id => {
                return Err(invalid("backup is its own parent"))
            }
            Some(_) => {}
        }
    }
    Ok((bits, payload, key))
}

/// The per-volume checks of one record: names present and unique, every incremental of a
/// backup that did not fail has a parent other than itself, no failed volume in a completed
/// backup (one failed volume fails the backup, seed 001).
fn check_volumes(backup: &BackupRecord) -> Result<(), String> {
    /// Up to this many volumes, duplicates are looked for pairwise; beyond, by sorting.
    const PAIRWISE_MAX: usize = 32;
    let volumes = &backup.volumes;
    if volumes.len() > PAIRWISE_MAX {
        let mut names: Vec<&str> = volumes.iter().map(|volume| volume.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(format!("volume {} is listed twice", pair[0]));
        }
    }
    for (offset, volume) in volumes.iter().enumerate() {
        if volume.name.is_empty() {
            return Err(format!("volume at position {offset} has no name"));
        }
        if volumes.len() <= PAIRWISE_MAX
            && volumes[..offset]
                .iter()
                .any(|earlier| earlier.name == volume.name)
        {
            return Err(format!("volume {} is listed twice", volume.name));
        }
        if volume.failed && backup.status == BackupStatus::Completed {
            return Err(format!(
                "volume {} failed but the backup is completed; a failed volume fails the backup",
                volume.name
            ));
        }
        if volume.kind == BackupKind::Incremental && backup.status != BackupStatus::Failed {
            match &volume.parent {
                None => return Err(format!("incremental volume {} has no parent", volume.name)),
                Some(parent) if *parent == backup.id => {
                    return Err(format!("volume {} is its own parent", volume.name))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Decides the whole plan and renders it: [`evaluate`] followed by [`Evaluation::to_plan`].
pub fn plan(catalog: &Catalog, policy: &Policy, now: DateTime<Utc>) -> Result<Plan, PlanError> {
    Ok(evaluate(catalog, policy, now)?.to_plan())
}

/// An id for error messages; an empty id is named by its position.
fn display_id(index: usize, id: &str) -> String {
    if id.is_empty() {
        format!("at position {index}")
    } else {
        id.to_owned()
    }
}

fn check_exact_duplicates(catalog: &Catalog) -> Result<(), PlanError> {
    let mut seen: HashSet<&str> = HashSet::with_capacity(catalog.backups.len());
    for backup in &catalog.backups {
        if !seen.insert(backup.id.as_str()) {
            return Err(PlanError::DuplicateId {
                id: backup.id.clone(),
            });
        }
    }
    Ok(())
}

impl<'a> Evaluation<'a> {
    /// The record at catalog index `index`.
    pub fn backup_at(&self, index: usize) -> &'a BackupRecord {
        &self.catalog.backups[index]
    }

    /// Number of backups in the catalog.
    pub fn len(&self) -> usize {
        self.flags.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }

    pub fn n_keep(&self) -> usize {
        self.n_keep
    }

    /// Backups with volumes that keep their record and some volumes and lose the rest.
    pub fn n_partial(&self) -> usize {
        self.n_partial
    }

    /// Backups deleted whole, record and all.
    pub fn n_delete(&self) -> usize {
        self.flags.len() - self.n_keep - self.n_partial
    }

    /// Catalog indices of all backups, newest first (the order of the plan's lists).
    pub fn newest_first(&self) -> impl Iterator<Item = usize> + '_ {
        self.order.iter().map(|&index| index as usize)
    }

    /// The verdict on the backup at catalog index `index`.
    pub fn verdict_at(&self, index: usize) -> Verdict {
        let bits = self.flags[index];
        if bits & KEEP_ANY != 0 {
            Verdict::Keep
        } else if bits & PARTIAL != 0 {
            Verdict::Partial
        } else {
            Verdict::Delete
        }
    }

    /// Catalog index of backup `id`: a scan of the id hashes, no allocation.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        let wanted = hash_id(id);
        self.id_hashes
            .iter()
            .enumerate()
            .filter(|&(_, &hash)| hash == wanted)
            .map(|(index, _)| index)
            .find(|&index| self.catalog.backups[index].id == id)
    }

    /// The verdict on backup `id`, if the catalog has it.
    pub fn verdict(&self, id: &str) -> Option<Verdict> {
        self.index_of(id).map(|index| self.verdict_at(index))
    }

    /// Does this evaluation delete backup `id`, record and all? What the deleter asks before
    /// touching anything.
    pub fn deletes(&self, id: &str) -> bool {
        self.verdict(id) == Some(Verdict::Delete)
    }

    /// Does this evaluation delete volume `volume` of backup `id`? The deleter's re-check
    /// for a job that deletes some volumes of a backup.
    pub fn deletes_volume(&self, id: &str, volume: &str) -> bool {
        let Some(index) = self.index_of(id) else {
            return false;
        };
        let Some(decisions) = &self.volumes else {
            return false;
        };
        if self.flags[index] & KEEP_ANY != 0 {
            return false;
        }
        let backup = &self.catalog.backups[index];
        decisions
            .artifacts(index)
            .zip(&backup.volumes)
            .any(|(artifact, candidate)| candidate.name == volume && !decisions.is_kept(artifact))
    }

    /// Whether deleting the backup at `index` may remove its objects (false for immutable
    /// backups: the record goes, the bucket's lifecycle removes the objects).
    pub fn removes_objects_at(&self, index: usize) -> bool {
        self.flags[index] & FACT_IMMUTABLE == 0
    }

    /// Why a backup that no rule keeps may go (also each of its deleted volumes' reasons).
    fn expiry_reasons(&self, bits: u32) -> Vec<String> {
        let mut reasons = Vec::new();
        push_expiry_reasons(bits, &mut reasons);
        reasons.into_iter().map(Cow::into_owned).collect()
    }

    /// The reasons for the decision on the backup at catalog index `index`.
    pub fn reasons_at(&self, index: usize) -> Vec<String> {
        let mut reasons = Vec::new();
        self.reasons_into(index, &mut reasons);
        reasons.into_iter().map(Cow::into_owned).collect()
    }

    /// The reasons for the decision on the backup at catalog index `index`, appended to
    /// `reasons`. A reason that reads the same for every backup ("no rule keeps it", "last
    /// snapshot") is borrowed; only reasons naming something (`needed by <id>`, `hold <why>`)
    /// are allocated, so rendering a million decisions allocates for the few kept ones.
    pub fn reasons_into(&self, index: usize, reasons: &mut Vec<Cow<'a, str>>) {
        let bits = self.flags[index];
        let catalog: &'a Catalog = self.catalog;
        let backup = &catalog.backups[index];
        let policy: &'a Policy = self.policy;
        let id_of = |index: u32| catalog.backups[index as usize].id.as_str();
        if bits & KEEP_ANY == 0 {
            push_expiry_reasons(bits, reasons);
            if bits & PARTIAL != 0 {
                self.push_volume_reasons(index, reasons);
            }
            return;
        }
        if bits & KEEP_LEGAL_HOLD != 0 {
            reasons.push("legal hold".into());
        }
        if bits & KEEP_HOLD != 0 {
            reasons.extend(
                backup
                    .holds
                    .iter()
                    .map(|hold| format!("hold {hold}").into()),
            );
        }
        if bits & KEEP_IN_PROGRESS != 0 {
            reasons.push("in progress".into());
        }
        if bits & KEEP_FAILED_GRACE != 0 {
            reasons.push(format!("failed, within grace {}", policy.failed_grace).into());
        }
        if bits & KEEP_FAILED_NO_TIME != 0 {
            reasons.push("failed, no time recorded".into());
        }
        if bits & KEEP_GFS != 0 {
            let hit = &self.gfs_hits[self.gfs_hit_of[index] as usize];
            gfs::push_matches(hit, policy, reasons);
        }
        if bits & KEEP_RETENTION_DURATION != 0 {
            if let Some(days) = policy.retention_duration {
                reasons.push(format!("retention_duration {days}").into());
            }
        }
        if let Some(window) = policy.recovery_window {
            if bits & KEEP_WINDOW != 0 {
                reasons.push(format!("recovery_window {window}").into());
            }
            if bits & KEEP_WINDOW_BASE != 0 {
                reasons.push(format!("recovery_window {window}: newest before the window").into());
            }
        }
        if bits & KEEP_FLOOR != 0 {
            if bits & FACT_VOLUMES != 0 {
                reasons.push("floor: newest completed backup".into());
            } else {
                reasons.push("floor: newest completed full backup".into());
            }
        }
        if bits & KEEP_IMMUTABLE_CHAIN != 0 {
            for &(_, with) in pairs_of(&self.immutable_with, index) {
                reasons.push(format!("immutable chain kept with {}", id_of(with)).into());
            }
        }
        if bits & KEEP_VERIFIED != 0 {
            if let Some(count) = policy.keep_verified {
                reasons.push(format!("keep_verified {}", count.as_restic()).into());
            }
        }
        if bits & KEEP_FLOOR_VERIFIED != 0 {
            reasons.push("floor: newest verified".into());
        }
        if bits & KEEP_MISSING != 0 {
            reasons.push(
                "missing: its objects are not in the bucket as recorded; not counted, kept until \
                 a user deletes it"
                    .into(),
            );
        }
        if bits & KEEP_MERGE_SOURCE != 0 {
            for &(_, target) in pairs_of(&self.merge_target_of, index) {
                reasons.push(format!("merge into {} pending", id_of(target)).into());
            }
        }
        if bits & KEEP_NEEDED != 0 {
            for &(_, by) in pairs_of(&self.needed_by, index) {
                reasons.push(format!("needed by {}", id_of(by)).into());
            }
        }
        if bits & KEEP_VOLUMES_NEEDED != 0 {
            self.push_volume_reasons(index, reasons);
        }
        if bits & FACT_DELETE_REQUESTED != 0 {
            reasons.push("delete requested, deferred".into());
        }
    }

    /// For a backup kept only for its volumes, or partial: `volume <name>: <reason>` for
    /// every reason of every kept volume.
    fn push_volume_reasons(&self, index: usize, reasons: &mut Vec<Cow<'a, str>>) {
        let Some(decisions) = &self.volumes else {
            return;
        };
        let backup = &self.catalog.backups[index];
        for (artifact, volume) in decisions.artifacts(index).zip(&backup.volumes) {
            if decisions.is_kept(artifact) {
                for reason in self.artifact_keep_reasons(decisions, artifact) {
                    reasons.push(format!("volume {}: {reason}", volume.name).into());
                }
            }
        }
    }

    /// Why a kept volume artifact stays.
    fn artifact_keep_reasons(&self, decisions: &VolumeDecisions, artifact: usize) -> Vec<String> {
        let bits = decisions.flags[artifact];
        let id_of = |index: u32| self.catalog.backups[index as usize].id.as_str();
        let mut reasons = Vec::new();
        if bits & ART_BACKUP_KEPT != 0 {
            reasons.push("kept with the backup".to_owned());
            return reasons;
        }
        if bits & KEEP_IMMUTABLE_CHAIN != 0 {
            for &(_, with) in pairs_of(&decisions.immutable_with, artifact) {
                reasons.push(format!("immutable chain kept with {}", id_of(with)));
            }
        }
        if bits & KEEP_MERGE_SOURCE != 0 {
            for &(_, target) in pairs_of(&decisions.merge_target_of, artifact) {
                reasons.push(format!("merge into {} pending", id_of(target)));
            }
        }
        if bits & KEEP_NEEDED != 0 {
            for &(_, by) in pairs_of(&decisions.needed_by, artifact) {
                reasons.push(format!("needed by {}", id_of(by)));
            }
        }
        reasons
    }

    /// The volumes of the backup at catalog index `index` that stay and that go, each with
    /// its reasons; the deleted ones with their object keys. Empty for a backup without
    /// volumes.
    pub fn volume_decisions_at(&self, index: usize) -> (Vec<VolumeDecision>, Vec<VolumeDecision>) {
        let (mut keep, mut delete) = (Vec::new(), Vec::new());
        let Some(decisions) = &self.volumes else {
            return (keep, delete);
        };
        let bits = self.flags[index];
        let backup = &self.catalog.backups[index];
        let remove_objects = self.removes_objects_at(index);
        for (artifact, volume) in decisions.artifacts(index).zip(&backup.volumes) {
            if decisions.is_kept(artifact) {
                keep.push(VolumeDecision {
                    name: volume.name.clone(),
                    reasons: self.artifact_keep_reasons(decisions, artifact),
                    keys: Vec::new(),
                    remove_objects: true,
                });
            } else {
                let mut reasons = self.expiry_reasons(bits);
                if volume.expiring && !status_of(bits).is_being_deleted() {
                    reasons.insert(0, "already expiring".to_owned());
                }
                delete.push(VolumeDecision {
                    name: volume.name.clone(),
                    reasons,
                    keys: volume.keys.clone(),
                    remove_objects,
                });
            }
        }
        (keep, delete)
    }

    /// The decision on the backup at catalog index `index`, rendered.
    pub fn decision_at(&self, index: usize) -> Decision {
        self.decision_with(index, &mut Vec::new())
    }

    /// [`Evaluation::decision_at`], its reasons gathered in `scratch` (reused by the caller).
    fn decision_with(&self, index: usize, scratch: &mut Vec<Cow<'a, str>>) -> Decision {
        scratch.clear();
        self.reasons_into(index, scratch);
        let reasons = scratch.iter().map(|reason| reason.to_string()).collect();
        let backup = &self.catalog.backups[index];
        let kept = self.flags[index] & KEEP_ANY != 0;
        let (volumes_keep, volumes_delete) = if backup.volumes.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            self.volume_decisions_at(index)
        };
        Decision {
            id: backup.id.clone(),
            reasons,
            remove_objects: kept || self.removes_objects_at(index),
            status: backup.status,
            kind: backup.kind,
            completed_at: backup.completed_at,
            volumes_keep,
            volumes_delete,
        }
    }

    /// Renders the owned plan: one `String` per backup id and reason.
    ///
    /// The decisions are rendered in catalog order and placed at their newest-first positions,
    /// not rendered newest first: a catalog listed from a key-value bucket is in no time order,
    /// and walking it newest first jumped between records (and their ids' heap blocks) at
    /// random, which cost five times the evaluation over a million backups (issue 17).
    pub fn to_plan(&self) -> Plan {
        let mut position = vec![0u32; self.flags.len()];
        let mut counts = [0u32; 3];
        for &index in &self.order {
            let list = self.verdict_at(index as usize) as usize;
            position[index as usize] = counts[list];
            counts[list] += 1;
        }
        let mut lists: [Vec<Option<Decision>>; 3] = counts.map(|count| {
            std::iter::repeat_with(|| None)
                .take(count as usize)
                .collect()
        });
        let mut reasons = Vec::new();
        for (index, &slot) in position.iter().enumerate() {
            let list = self.verdict_at(index) as usize;
            lists[list][slot as usize] = Some(self.decision_with(index, &mut reasons));
        }
        let [keep, partial, delete] = lists.map(|list| {
            list.into_iter()
                .map(|decision| decision.expect("every position holds a decision"))
                .collect::<Vec<Decision>>()
        });
        Plan::new(
            keep,
            partial,
            delete,
            self.merges_owned(),
            self.volume_merges_owned(),
            self.binlog_owned(),
            self.warnings.clone(),
        )
    }

    /// The merge jobs of the plan, rendered.
    pub fn merges_owned(&self) -> Vec<Merge> {
        let id_of = |index: u32| self.catalog.backups[index as usize].id.clone();
        self.merges
            .iter()
            .map(|merge| Merge {
                chain: id_of(merge.chain),
                target: id_of(merge.target),
                sources: merge.sources.iter().map(|&source| id_of(source)).collect(),
                new_parent: (merge.new_parent != NONE).then(|| id_of(merge.new_parent)),
            })
            .collect()
    }

    /// The merge jobs on volume chains, rendered.
    pub fn volume_merges_owned(&self) -> Vec<VolumeMerge> {
        let id_of = |index: u32| self.catalog.backups[index as usize].id.clone();
        let mut volume_merges = Vec::new();
        if let Some(decisions) = &self.volumes {
            let backup_id = |artifact: u32| id_of(decisions.locate(artifact).0 as u32);
            volume_merges.extend(decisions.merges.iter().map(|merge| {
                let (target, offset) = decisions.locate(merge.target);
                VolumeMerge {
                    volume: self.catalog.backups[target].volumes[offset].name.clone(),
                    chain: backup_id(merge.chain),
                    target: backup_id(merge.target),
                    sources: merge
                        .sources
                        .iter()
                        .map(|&source| backup_id(source))
                        .collect(),
                    new_parent: (merge.new_parent != NONE).then(|| backup_id(merge.new_parent)),
                }
            }));
        }
        volume_merges
    }

    /// The binlog part of the plan, rendered (a key per segment: one a day or so).
    pub fn binlog_owned(&self) -> BinlogPlan {
        let segments = &self.catalog.binlog_segments;
        let segment_key = |&index: &u32| segments[index as usize].key.clone();
        BinlogPlan {
            horizon: self.horizon.map(|(horizon, _)| horizon),
            horizon_backup: self
                .horizon
                .map(|(_, index)| self.catalog.backups[index as usize].id.clone()),
            keep: self.binlog_keep.iter().map(segment_key).collect(),
            delete: self.binlog_delete.iter().map(segment_key).collect(),
        }
    }

    /// Binlog segment keys to delete, newest first.
    pub fn binlog_deletes(&self) -> impl Iterator<Item = &'a str> + '_ {
        let segments = &self.catalog.binlog_segments;
        self.binlog_delete
            .iter()
            .map(move |&index| segments[index as usize].key.as_str())
    }

    pub fn horizon(&self) -> Option<DateTime<FixedOffset>> {
        self.horizon.map(|(horizon, _)| horizon)
    }

    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn summary(&self) -> PlanSummary {
        let n_volumes_delete = self.volumes.as_ref().map_or(0, |decisions| {
            (0..self.flags.len())
                .filter(|&index| self.flags[index] & KEEP_ANY == 0)
                .flat_map(|index| decisions.artifacts(index))
                .filter(|&artifact| !decisions.is_kept(artifact))
                .count()
        });
        PlanSummary {
            n_keep: self.n_keep,
            n_partial: self.n_partial,
            n_delete: self.n_delete(),
            n_delete_record_only: self
                .flags
                .iter()
                .filter(|&&bits| bits & (KEEP_ANY | PARTIAL) == 0 && bits & FACT_IMMUTABLE != 0)
                .count(),
            n_merges: self.merges.len() + self.volumes.as_ref().map_or(0, |d| d.merges.len()),
            n_volumes_delete,
            n_binlog_keep: self.binlog_keep.len(),
            n_binlog_delete: self.binlog_delete.len(),
            horizon: self.horizon(),
        }
    }
}

/// Why a backup that no rule keeps may go: fixed texts, never allocated.
fn push_expiry_reasons(bits: u32, reasons: &mut Vec<Cow<'_, str>>) {
    match status_of(bits) {
        BackupStatus::Failed => reasons.push("failed".into()),
        BackupStatus::Expiring => reasons.push("already expiring".into()),
        BackupStatus::Deleting => reasons.push("deletion under way".into()),
        BackupStatus::DeleteFailed => reasons.push("retrying a failed delete".into()),
        BackupStatus::Missing => reasons.push("missing".into()),
        BackupStatus::Completed | BackupStatus::InProgress => {}
    }
    if bits & FACT_DELETE_REQUESTED != 0 {
        reasons.push("delete requested".into());
    } else if status_of(bits) == BackupStatus::Completed {
        reasons.push("no rule keeps it".into());
    }
    if bits & FACT_IMMUTABLE != 0 {
        reasons.push("immutable: catalog record only".into());
    }
}

/// The entries of a sorted pair list whose first element is `index`.
fn pairs_of(pairs: &[(u32, u32)], index: usize) -> &[(u32, u32)] {
    let index = index as u32;
    let start = pairs.partition_point(|&(first, _)| first < index);
    let end = start + pairs[start..].partition_point(|&(first, _)| first == index);
    &pairs[start..end]
}
