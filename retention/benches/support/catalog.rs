//! The catalog issue 17 measures, shared by `retention/benches/plan.rs` (built in memory) and
//! `cli/benches/offline_plan.rs` (written to a file): one backup every 5 minutes from 2016, a
//! full one a day and incrementals on the last good backup, one in a hundred failed, a weekly
//! `manual` tag; in time order or shuffled. Deterministic (a fixed xorshift seed).

use chrono::{DateTime, TimeDelta, TimeZone, Utc};

#[path = "random.rs"]
mod random;
use random::Random;

/// Backups a day (one every 5 minutes).
pub const PER_DAY: usize = 288;

/// One backup of the catalog: what each bench turns into its own form.
pub struct Slot {
    /// Its place in time: the id is `db1-<slot:08>`.
    pub slot: usize,
    pub started: DateTime<Utc>,
    pub completed: DateTime<Utc>,
    pub failed: bool,
    /// The slot of its parent when it is an incremental.
    pub parent: Option<usize>,
    pub manual: bool,
}

/// The catalog's backups in the order a catalog lists them, and the `now` to decide at (5
/// minutes after the newest).
pub fn issue_catalog(n_backups: usize, sorted: bool) -> (Vec<Slot>, DateTime<Utc>) {
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    let start = Utc.with_ymd_and_hms(2016, 1, 1, 0, 0, 0).unwrap();
    let mut failed = vec![false; n_backups];
    let mut parent_of = vec![usize::MAX; n_backups];
    let mut last_good = usize::MAX;
    for slot in 0..n_backups {
        failed[slot] = random.below(100) == 0;
        if slot % PER_DAY != 0 {
            parent_of[slot] = last_good;
        }
        if !failed[slot] {
            last_good = slot;
        }
    }
    let mut order: Vec<usize> = (0..n_backups).collect();
    if !sorted {
        for i in (1..n_backups).rev() {
            let j = random.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
    }
    let slots = order
        .into_iter()
        .map(|slot| {
            let completed = start + TimeDelta::minutes(5 * slot as i64 + 4);
            let parent = parent_of[slot];
            let incremental = slot % PER_DAY != 0 && parent != usize::MAX;
            Slot {
                slot,
                started: completed - TimeDelta::minutes(3),
                completed,
                failed: failed[slot],
                parent: incremental.then_some(parent),
                manual: slot % (7 * PER_DAY) == 100,
            }
        })
        .collect();
    (slots, start + TimeDelta::minutes(5 * n_backups as i64 + 5))
}
