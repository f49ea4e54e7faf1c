//! The packed sort entry of the engine's one sort: newest first, ties in input order, with a
//! 32-bit payload that carries what the scan after the sort needs without touching the record;
//! and the engine's second phase, the sort and that scan.

use crate::policy::Policy;

// The low 32 bits of a packed sort entry: the backup's UTC offset plus 86 400 (18 bits) and
// what the scan after the sort needs to know without touching the record.
pub(crate) const PAYLOAD_OFFSET_MASK: u32 = (1 << 18) - 1;
pub(crate) const PAYLOAD_ELIGIBLE: u32 = 1 << 18;
/// Matches at least one of the policy's tag lists.
pub(crate) const PAYLOAD_TAGGED: u32 = 1 << 19;
/// Legal hold, a hold, or in progress: kept whatever the rules say.
pub(crate) const PAYLOAD_PROTECTED: u32 = 1 << 20;
pub(crate) const PAYLOAD_COMPLETED_FULL: u32 = 1 << 21;
/// The tag-list bit set, when the policy has at most `PAYLOAD_MAX_TAG_LISTS` lists.
pub(crate) const PAYLOAD_TAGS_SHIFT: u32 = 22;
pub(crate) const PAYLOAD_MAX_TAG_LISTS: usize = 10;

pub(crate) fn payload_from_offset(offset_seconds: i32) -> u32 {
    // chrono offsets are within ±86 399 s.
    (offset_seconds + 86_400) as u32 & PAYLOAD_OFFSET_MASK
}

pub(crate) fn payload_offset(payload: u32) -> i32 {
    (payload & PAYLOAD_OFFSET_MASK) as i32 - 86_400
}

/// Packs a sort key so that ascending `u128` order is newest first, then input order. The
/// low 32 bits are free for a payload: the index already makes every entry unique.
pub(crate) fn pack_newest_first(key: i64, index: u32) -> u128 {
    let ascending = (key as u64) ^ (1 << 63);
    (u128::from(!ascending) << 64) | (u128::from(index) << 32)
}

pub(crate) fn unpack_key(packed: u128) -> i64 {
    let ascending = !((packed >> 64) as u64);
    (ascending ^ (1 << 63)) as i64
}

/// Whether the policy's tag lists ride in the sort entry's payload (at most
/// [`PAYLOAD_MAX_TAG_LISTS`] of them); more need an array of their own.
pub(crate) fn tags_inline(policy: &Policy) -> bool {
    policy.keep_tags.len() <= PAYLOAD_MAX_TAG_LISTS
}

/// The completed backups the rules count (not delete-requested), newest first, as
/// [`crate::gfs`] reads them.
pub(crate) struct Eligible {
    /// Each one's position in the newest-first order.
    pub positions: Vec<u32>,
    /// Nanoseconds since the epoch.
    pub keys: Vec<i64>,
    /// The recorded UTC offsets, in seconds.
    pub offsets: Vec<i32>,
    /// The tag-list masks; empty when the policy has no tags.
    pub tags: Vec<u64>,
}

/// The backups sorted, and what one scan of the sorted entries finds.
pub(crate) struct Sorted {
    /// Catalog indices, newest first.
    pub order: Vec<u32>,
    pub eligible: Eligible,
    /// Positions of the backups kept whatever the rules say (holds, in progress, missing):
    /// the first starts of the chain walks.
    pub walk_from: Vec<u32>,
    /// The position of the newest completed full backup (the floor).
    pub floor_position: Option<usize>,
}

/// Phase 2: sorts the entries once, then reads them in order: the entries carry what the rules
/// need, so the scan does not jump around the per-backup arrays. `tag_masks` holds the masks
/// that do not ride in the payload (see [`tags_inline`]).
pub(crate) fn sort_and_scan(mut packed: Vec<u128>, tag_masks: &[u64], policy: &Policy) -> Sorted {
    let n = packed.len();
    let has_tags = !policy.keep_tags.is_empty();
    let inline_tags = tags_inline(policy);
    packed.sort_unstable();
    let order: Vec<u32> = packed.iter().map(|&entry| (entry >> 32) as u32).collect();
    let mut eligible = Eligible {
        positions: Vec::with_capacity(n),
        keys: Vec::with_capacity(n),
        offsets: Vec::with_capacity(n),
        tags: Vec::with_capacity(if has_tags { n } else { 0 }),
    };
    let mut walk_from: Vec<u32> = Vec::new();
    let mut floor_position = None;
    for (position, &entry) in packed.iter().enumerate() {
        let payload = entry as u32;
        if payload & PAYLOAD_ELIGIBLE != 0 {
            eligible.positions.push(position as u32);
            eligible.keys.push(unpack_key(entry));
            eligible.offsets.push(payload_offset(payload));
            if has_tags {
                let mask = if payload & PAYLOAD_TAGGED == 0 {
                    0
                } else if inline_tags {
                    u64::from(payload >> PAYLOAD_TAGS_SHIFT)
                } else {
                    tag_masks[(entry >> 32) as u32 as usize]
                };
                eligible.tags.push(mask);
            }
        }
        if payload & PAYLOAD_PROTECTED != 0 {
            walk_from.push(position as u32);
        }
        if floor_position.is_none() && payload & PAYLOAD_COMPLETED_FULL != 0 {
            floor_position = Some(position);
        }
    }
    Sorted {
        order,
        eligible,
        walk_from,
        floor_position,
    }
}
