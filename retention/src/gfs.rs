//! restic's `forget` policy (grandfather-father-son, keep-within, keep-tags), reproduced
//! exactly: same ordering, same buckets, same "oldest" rule, same reason strings and counters.
//!
//! This is the part of the engine that restic's 40 golden files test. The engine calls
//! `apply_sorted` on the completed backups it has already sorted; [`restic_keep`] is the same
//! core with restic's own interface (unsorted input, keep list with reasons) and nothing of
//! Sexton's (no floor, no chains, no Karbor or recovery-window rules), for conformance tests.
//!
//! Reference: restic `internal/data/snapshot_policy.go` (`ApplyPolicy`), BSD-2-Clause.

use chrono::{DateTime, FixedOffset, Utc};

use crate::calendar::{CalendarCache, CalendarDuration, LocalFields};
use crate::policy::Policy;
use crate::reason::{Bucket, Reason};
use crate::PlanError;

/// Bits of [`GfsHit::rules`] and [`GfsHit::oldest`], in restic's reason order.
pub(crate) const RULE_WITHIN: u16 = 1 << 0;
/// `RULE_COUNT_FIRST << b` for count bucket b (last, hourly, daily, weekly, monthly, yearly).
pub(crate) const RULE_COUNT_FIRST: u16 = 1 << 1;
/// `RULE_WITHIN_BUCKET_FIRST << b` for within bucket b (hourly … yearly).
pub(crate) const RULE_WITHIN_BUCKET_FIRST: u16 = 1 << 7;

/// The completed backups the rules look at, sorted newest first (ties in input order).
pub(crate) struct SortedSnapshots<'s> {
    /// Nanoseconds since the epoch.
    pub keys: &'s [i64],
    /// Each backup's recorded UTC offset, in seconds: calendar fields are read in it.
    pub offsets: &'s [i32],
    /// Bit `l` set when the backup matches tag list `l`. Empty when the policy has no tags.
    pub tag_masks: &'s [u64],
}

/// Why restic keeps one snapshot: which rules fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GfsHit {
    /// Position in the sorted list.
    pub position: u32,
    pub tag_lists: u64,
    pub rules: u16,
    /// Rules among `rules` that fired only through the "oldest snapshot" rule.
    pub oldest: u16,
}

/// restic's counters after each kept snapshot, in the order of the hits; only collected for
/// [`restic_keep`] (the engine does not report them).
pub(crate) type HitCounters = Vec<[i64; 6]>;

/// The policy's restic part, resolved once: counts as restic integers and cutoffs as instants.
struct Rules {
    counts: [i64; 6],
    within: Option<Cutoff>,
    within_buckets: [Option<Cutoff>; 5],
    has_tags: bool,
}

/// "Strictly after this instant". `None` inside means the cutoff is before any representable
/// time, so everything is after it.
#[derive(Clone, Copy)]
struct Cutoff(Option<i64>);

impl Cutoff {
    fn new(duration: CalendarDuration, latest: Option<DateTime<FixedOffset>>) -> Cutoff {
        // No snapshot before `now`: Go's zero time is the reference, so everything is after.
        let Some(latest) = latest else {
            return Cutoff(None);
        };
        Cutoff(
            duration
                .before(latest)
                .and_then(|cutoff| cutoff.timestamp_nanos_opt()),
        )
    }

    fn is_after(self, key: i64) -> bool {
        self.0.is_none_or(|cutoff| key > cutoff)
    }
}

/// Runs restic's `ApplyPolicy` loop over already-sorted snapshots and returns one hit per kept
/// snapshot, in sorted order. `now` only decides which snapshot is "latest" (the newest one
/// strictly before `now`); the within rules are relative to it.
pub(crate) fn apply_sorted(
    snapshots: &SortedSnapshots<'_>,
    policy: &Policy,
    now: DateTime<Utc>,
    mut counters: Option<&mut HitCounters>,
) -> Vec<GfsHit> {
    let len = snapshots.keys.len();
    if len == 0 {
        return Vec::new();
    }
    let now_key = now.timestamp_nanos_opt().unwrap_or(i64::MAX);
    let latest = snapshots
        .keys
        .iter()
        .position(|&key| key < now_key)
        .and_then(|position| {
            let offset = FixedOffset::east_opt(snapshots.offsets[position])?;
            Some(DateTime::from_timestamp_nanos(snapshots.keys[position]).with_timezone(&offset))
        });
    let counts = policy.counts();
    let within_buckets = policy.within_buckets();
    let mut rules = Rules {
        counts: counts.map(|count| count.map_or(0, |c| c.as_restic())),
        within: policy.keep_within.map(|d| Cutoff::new(d, latest)),
        within_buckets: within_buckets.map(|d| d.map(|d| Cutoff::new(d, latest))),
        has_tags: !policy.keep_tags.is_empty() && !snapshots.tag_masks.is_empty(),
    };
    let mut last_value = [-1i64; 6];
    let mut last_within_value = [-1i64; 5];
    let oldest_position = len - 1;
    let mut hits = Vec::new();
    let mut calendar = CalendarCache::new();

    for position in 0..len {
        let key = snapshots.keys[position];
        let is_oldest = position == oldest_position;
        let mut hit = GfsHit {
            position: position as u32,
            tag_lists: 0,
            rules: 0,
            oldest: 0,
        };
        if rules.has_tags {
            hit.tag_lists = snapshots.tag_masks[position];
        }
        if let Some(cutoff) = rules.within {
            if cutoff.is_after(key) {
                hit.rules |= RULE_WITHIN;
            }
        }
        let mut fields: Option<LocalFields> = None;
        for (bucket, (count, last)) in rules
            .counts
            .iter_mut()
            .zip(last_value.iter_mut())
            .enumerate()
        {
            if *count > 0 || *count == -1 {
                let value = if bucket == 0 {
                    position as i64
                } else {
                    let local = *fields
                        .get_or_insert_with(|| calendar.fields(key, snapshots.offsets[position]));
                    bucket_value(&mut calendar, &local, bucket - 1)
                };
                if value != *last || is_oldest {
                    let bit = RULE_COUNT_FIRST << bucket;
                    if value == *last {
                        hit.oldest |= bit;
                    }
                    hit.rules |= bit;
                    *last = value;
                    if *count > 0 {
                        *count -= 1;
                    }
                }
            }
        }
        for (bucket, (cutoff, last)) in rules
            .within_buckets
            .iter()
            .zip(last_within_value.iter_mut())
            .enumerate()
        {
            let Some(cutoff) = cutoff else {
                continue;
            };
            if !cutoff.is_after(key) {
                continue;
            }
            let local =
                *fields.get_or_insert_with(|| calendar.fields(key, snapshots.offsets[position]));
            let value = bucket_value(&mut calendar, &local, bucket);
            if value != *last || is_oldest {
                let bit = RULE_WITHIN_BUCKET_FIRST << bucket;
                if value == *last {
                    hit.oldest |= bit;
                }
                hit.rules |= bit;
                *last = value;
            }
        }
        if hit.rules != 0 || hit.tag_lists != 0 {
            if let Some(counters) = counters.as_deref_mut() {
                counters.push(rules.counts);
            }
            hits.push(hit);
        }
        // Nothing further down can be kept once every count is spent and every within cutoff
        // is passed (keys only decrease); without tags, stop scanning.
        if !rules.has_tags
            && rules.counts.iter().all(|&count| count == 0)
            && rules.within.is_none_or(|cutoff| !cutoff.is_after(key))
            && rules
                .within_buckets
                .iter()
                .all(|cutoff| cutoff.is_none_or(|cutoff| !cutoff.is_after(key)))
        {
            break;
        }
    }
    hits
}

/// Calendar bucket `bucket` (0 hourly, 1 daily, 2 weekly, 3 monthly, 4 yearly) of `local`.
fn bucket_value(calendar: &mut CalendarCache, local: &LocalFields, bucket: usize) -> i64 {
    match bucket {
        0 => local.hourly(),
        1 => local.daily(),
        2 => calendar.weekly(local),
        3 => local.monthly(),
        _ => local.yearly(),
    }
}

/// restic's `matches` strings for one hit, in restic's order: tags, within, count buckets,
/// within buckets.
pub(crate) fn matches(hit: &GfsHit, policy: &Policy) -> Vec<String> {
    let mut matches = Vec::new();
    push_matches(hit, policy, &mut matches);
    Reason::texts(&matches)
}

/// The reasons of one hit, in restic's order.
pub(crate) fn push_matches(hit: &GfsHit, policy: &Policy, out: &mut Vec<Reason>) {
    for (list_index, list) in policy.keep_tags.iter().enumerate() {
        if hit.tag_lists & (1 << list_index) != 0 {
            out.push(Reason::Tags(list.clone()));
        }
    }
    if hit.rules & RULE_WITHIN != 0 {
        if let Some(within) = policy.keep_within {
            out.push(Reason::Within(within));
        }
    }
    for (rank, bucket) in Bucket::COUNTS.into_iter().enumerate() {
        let bit = RULE_COUNT_FIRST << rank;
        if hit.rules & bit != 0 {
            out.push(Reason::Count {
                bucket,
                oldest: hit.oldest & bit != 0,
            });
        }
    }
    let within_buckets = policy.within_buckets();
    for (rank, bucket) in Bucket::WITHIN.into_iter().enumerate() {
        let bit = RULE_WITHIN_BUCKET_FIRST << rank;
        if hit.rules & bit != 0 {
            out.push(Reason::WithinBucket {
                bucket,
                duration: within_buckets[rank].unwrap_or_default(),
                oldest: hit.oldest & bit != 0,
            });
        }
    }
}

/// One snapshot as restic sees it: a time (with its recorded offset) and tags.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot<'a> {
    pub time: DateTime<FixedOffset>,
    pub tags: &'a [String],
}

/// restic's `counters`: what each count rule has left after this snapshot (-1 = unlimited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub last: i64,
    pub hourly: i64,
    pub daily: i64,
    pub weekly: i64,
    pub monthly: i64,
    pub yearly: i64,
}

/// One kept snapshot with restic's reasons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResticKeep {
    /// Index into the input slice.
    pub input_index: usize,
    pub matches: Vec<String>,
    pub counters: Counters,
}

/// restic's `ApplyPolicy` on its own: the kept snapshots newest first (ties in input order)
/// with restic's match strings and counters. Only the restic rules of `policy` are used (no
/// floor, no chains, no `retention_duration` or `recovery_window`); an empty policy keeps
/// nothing, as in restic. `now` plays restic's `time.Now()`.
pub fn restic_keep(
    snapshots: &[Snapshot<'_>],
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<Vec<ResticKeep>, PlanError> {
    let mut packed = Vec::with_capacity(snapshots.len());
    for (index, snapshot) in snapshots.iter().enumerate() {
        let key = snapshot
            .time
            .timestamp_nanos_opt()
            .ok_or_else(|| PlanError::TimeOutOfRange {
                what: format!("snapshot {index}"),
            })?;
        packed.push(crate::sort_key::pack_newest_first(key, index as u32));
    }
    packed.sort_unstable();
    let order: Vec<usize> = packed.iter().map(|&p| (p >> 32) as u32 as usize).collect();
    let keys: Vec<i64> = order
        .iter()
        .map(|&i| snapshots[i].time.timestamp_nanos_opt().unwrap_or_default())
        .collect();
    let offsets: Vec<i32> = order
        .iter()
        .map(|&i| snapshots[i].time.offset().local_minus_utc())
        .collect();
    let tag_masks: Vec<u64> = if policy.keep_tags.is_empty() {
        Vec::new()
    } else {
        order
            .iter()
            .map(|&i| tag_mask(policy, snapshots[i].tags))
            .collect()
    };
    let sorted = SortedSnapshots {
        keys: &keys,
        offsets: &offsets,
        tag_masks: &tag_masks,
    };
    let mut counters = HitCounters::new();
    let hits = apply_sorted(&sorted, policy, now, Some(&mut counters));
    Ok(hits
        .iter()
        .zip(&counters)
        .map(|(hit, counters)| ResticKeep {
            input_index: order[hit.position as usize],
            matches: matches(hit, policy),
            counters: Counters {
                last: counters[0],
                hourly: counters[1],
                daily: counters[2],
                weekly: counters[3],
                monthly: counters[4],
                yearly: counters[5],
            },
        })
        .collect())
}

/// Which of the policy's tag lists a backup matches, as a bit set.
pub(crate) fn tag_mask(policy: &Policy, tags: &[String]) -> u64 {
    let mut mask = 0;
    for (list_index, list) in policy.keep_tags.iter().enumerate() {
        if list.matches(tags) {
            mask |= 1 << list_index;
        }
    }
    mask
}
