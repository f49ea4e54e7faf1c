//! Backup chains: an incremental's parent link, resolved on demand, and what the engine does
//! with whole chains (their roots, loop checks, Trilio-style merges).
//!
//! The links here are between backups. Per-volume chains (issue 8) link volume artifacts
//! instead ([`crate::volumes`]); the whole-chain algorithms below ([`chain_roots`],
//! [`plan_merges`], [`find_cycle`]) only need "the parent of node i" and per-node flags, so
//! they run unchanged over either kind of node.

use std::collections::HashMap;

use crate::catalog::{BackupStatus, Catalog};
use crate::error::PlanError;
use crate::flags::{
    status_of, FACT_CHAIN_NODE, FACT_DELETE_REQUESTED, FACT_FULL, FACT_IMMUTABLE, KEEP_HOLD,
    KEEP_LEGAL_HOLD, KEEP_LOCKED, NONE,
};
use crate::id_hash::hash_id;

/// How many of the next older backups are tried as an incremental's parent before its id is
/// looked up by hash (failed backups in between are skipped this way).
pub(crate) const PARENT_NEIGHBOURS: usize = 4;

/// A parent link not looked up yet.
const UNRESOLVED: u32 = u32::MAX - 1;

/// A merge job as indices.
#[derive(Clone, Debug)]
pub(crate) struct MergeIndices {
    pub chain: u32,
    pub target: u32,
    pub sources: Vec<u32>,
    pub new_parent: u32,
}

/// An incremental's parent link, resolved on demand. The scheduler builds an incremental on
/// the last good backup, so the parent is nearly always among the next older backups in the
/// sorted order; their id hashes are compared first. Otherwise the sorted id hashes say whether
/// the parent exists at all, and a scan (or, after many misses, a map) finds it.
pub(crate) struct ParentLinks<'c> {
    catalog: &'c Catalog,
    order: &'c [u32],
    id_hashes: &'c [u64],
    /// Per backup: the hash of its parent's id, 0 when it has no parent in a chain.
    parent_hashes: Vec<u64>,
    sorted_hashes: Vec<u64>,
    hash_collision: bool,
    /// Per backup: `UNRESOLVED`, `NONE` (no parent in the chain) or the parent's index.
    pub(crate) parent: Vec<u32>,
    /// Per backup: its parent's sorted position when known (`NONE` otherwise), so that a walk
    /// can keep looking among neighbours.
    parent_position: Vec<u32>,
    n_scans: usize,
    by_hash: Option<HashMap<u64, u32>>,
    by_id: Option<HashMap<&'c str, u32>>,
    /// Some link points to a backup that is not older than its child (clock skew): parent
    /// links could then loop, and whole-chain phases check for it.
    pub(crate) has_forward_links: bool,
}

/// How many scans of the id hashes before building a map instead.
const MAX_SCANS: usize = 16;

impl<'c> ParentLinks<'c> {
    pub(crate) fn new(
        catalog: &'c Catalog,
        order: &'c [u32],
        id_hashes: &'c [u64],
        parent_hashes: Vec<u64>,
        sorted_hashes: Vec<u64>,
        hash_collision: bool,
    ) -> ParentLinks<'c> {
        ParentLinks {
            catalog,
            order,
            id_hashes,
            parent_hashes,
            sorted_hashes,
            hash_collision,
            parent: vec![UNRESOLVED; catalog.backups.len()],
            parent_position: vec![NONE; catalog.backups.len()],
            n_scans: 0,
            by_hash: None,
            by_id: None,
            has_forward_links: false,
        }
    }

    /// The parent of `child` (at sorted `position`, or `NONE` if unknown) and the parent's
    /// position if known; `NONE` when it has none in the chain.
    pub(crate) fn parent_of(
        &mut self,
        child: usize,
        position: u32,
        flags: &[u32],
        warnings: &mut Vec<String>,
    ) -> (u32, u32) {
        let cached = self.parent[child];
        if cached != UNRESOLVED {
            return (cached, self.parent_position[child]);
        }
        let (found, found_position) = self.find(child, position, flags, warnings);
        self.parent[child] = found;
        self.parent_position[child] = found_position;
        (found, found_position)
    }

    fn find(
        &mut self,
        child: usize,
        position: u32,
        flags: &[u32],
        warnings: &mut Vec<String>,
    ) -> (u32, u32) {
        let backups = &self.catalog.backups;
        let wanted_hash = self.parent_hashes[child];
        if wanted_hash == 0 {
            return (NONE, NONE);
        }
        let mut found = None;
        if position != NONE && !self.hash_collision {
            // Ids have distinct hashes here, so an equal hash is the parent (or, with odds of
            // 2^-64, a stand-in for a parent missing from the catalog, which keeps more).
            let first = position as usize + 1;
            let last = (first + PARENT_NEIGHBOURS).min(self.order.len());
            found = (first..last)
                .find(|&candidate| self.id_hashes[self.order[candidate] as usize] == wanted_hash)
                .map(|candidate| (self.order[candidate], candidate as u32));
        }
        let wanted = backups[child].parent.as_deref().unwrap_or_default();
        if found.is_none() {
            found = self.look_up(wanted).map(|index| {
                if !older_than(self.catalog, index as usize, child) {
                    self.has_forward_links = true;
                }
                (index, NONE)
            });
        }
        let Some((found, found_position)) = found else {
            warnings.push(format!(
                "backup {}: parent {wanted} is not in the catalog; its chain is broken",
                backups[child].id
            ));
            return (NONE, NONE);
        };
        if flags[found as usize] & FACT_CHAIN_NODE == 0 {
            warnings.push(format!(
                "backup {}: parent {wanted} failed; failed backups are never part of a chain",
                backups[child].id
            ));
            return (NONE, NONE);
        }
        (found, found_position)
    }

    /// Resolves, where it can, the links of the backups at `positions` to one of their next
    /// older neighbours. Each iteration is independent of the others, so the processor can
    /// overlap their memory reads; the walks that follow then mostly find links resolved.
    pub(crate) fn link_to_neighbours(
        &mut self,
        positions: impl Iterator<Item = u32>,
        flags: &[u32],
    ) {
        if self.hash_collision {
            return;
        }
        let n = self.order.len();
        for position in positions {
            let child = self.order[position as usize] as usize;
            let wanted_hash = self.parent_hashes[child];
            if wanted_hash == 0 {
                if self.parent[child] == UNRESOLVED {
                    self.parent[child] = NONE;
                }
                continue;
            }
            let first = position as usize + 1;
            let last = (first + PARENT_NEIGHBOURS).min(n);
            if let Some(found_position) = (first..last)
                .find(|&candidate| self.id_hashes[self.order[candidate] as usize] == wanted_hash)
            {
                let found = self.order[found_position];
                // A failed parent is left for `parent_of`, which reports it.
                if flags[found as usize] & FACT_CHAIN_NODE != 0 {
                    self.parent[child] = found;
                    self.parent_position[child] = found_position as u32;
                }
            }
        }
    }

    /// The index of backup `id`, by its hash.
    fn look_up(&mut self, id: &str) -> Option<u32> {
        let backups = &self.catalog.backups;
        if self.hash_collision {
            let by_id = self.by_id.get_or_insert_with(|| {
                backups
                    .iter()
                    .enumerate()
                    .map(|(index, backup)| (backup.id.as_str(), index as u32))
                    .collect()
            });
            return by_id.get(id).copied();
        }
        let wanted = hash_id(id);
        if self.sorted_hashes.binary_search(&wanted).is_err() {
            return None;
        }
        let index = if let Some(by_hash) = &self.by_hash {
            by_hash.get(&wanted).copied()
        } else if self.n_scans < MAX_SCANS {
            self.n_scans += 1;
            self.id_hashes
                .iter()
                .position(|&hash| hash == wanted)
                .map(|index| index as u32)
        } else {
            let by_hash: HashMap<u64, u32> = self
                .id_hashes
                .iter()
                .enumerate()
                .map(|(index, &hash)| (hash, index as u32))
                .collect();
            self.by_hash.insert(by_hash).get(&wanted).copied()
        }?;
        // Distinct ids have distinct hashes here, but a parent missing from the catalog could
        // share a hash with an existing id: compare the strings.
        (backups[index as usize].id == id).then_some(index)
    }

    /// Resolves every link (immutable chains and merges work on whole chains) and checks
    /// that they do not loop.
    pub(crate) fn resolve_all(
        &mut self,
        flags: &[u32],
        warnings: &mut Vec<String>,
    ) -> Result<(), PlanError> {
        self.link_to_neighbours(0..self.order.len() as u32, flags);
        for position in 0..self.order.len() {
            let index = self.order[position] as usize;
            self.parent_of(index, position as u32, flags, warnings);
        }
        if self.has_forward_links {
            check_cycles(self.catalog, &self.parent)?;
        }
        Ok(())
    }
}

/// Whether backup `a` sorts after (is older than) backup `b`: by instant, then input order.
pub(crate) fn older_than(catalog: &Catalog, a: usize, b: usize) -> bool {
    let key = |index: usize| {
        let backup = &catalog.backups[index];
        backup
            .completed_at
            .or(backup.started_at)
            .and_then(|time| time.timestamp_nanos_opt())
            .unwrap_or(i64::MAX)
    };
    (key(a), std::cmp::Reverse(a)) < (key(b), std::cmp::Reverse(b))
}

/// Only needed when some parent is not older than its child (clock skew or a bad catalog):
/// otherwise links always point to older backups and cannot loop.
fn check_cycles(catalog: &Catalog, parent: &[u32]) -> Result<(), PlanError> {
    match find_cycle(parent) {
        Some(node) => Err(PlanError::ParentCycle {
            id: catalog.backups[node as usize].id.clone(),
        }),
        None => Ok(()),
    }
}

/// A node on a loop of `parent` links, if there is one.
pub(crate) fn find_cycle(parent: &[u32]) -> Option<u32> {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; parent.len()];
    let mut path = Vec::new();
    for start in 0..parent.len() {
        let mut node = start as u32;
        while node != NONE && state[node as usize] == UNSEEN {
            state[node as usize] = ON_PATH;
            path.push(node);
            node = parent[node as usize];
        }
        if node != NONE && state[node as usize] == ON_PATH {
            return Some(node);
        }
        for &visited in &path {
            state[visited as usize] = DONE;
        }
        path.clear();
    }
    None
}

/// The first backup of each chain node's chain (a full, or an incremental whose parent is
/// missing); `NONE` for failed backups.
pub(crate) fn chain_roots(
    order: &[u32],
    parent: &[u32],
    flags: &[u32],
    has_forward_links: bool,
) -> Vec<u32> {
    let n = parent.len();
    let mut roots = vec![NONE; n];
    if !has_forward_links {
        // Parents are older, so oldest first sees every parent before its children.
        for &index in order.iter().rev() {
            let index = index as usize;
            if flags[index] & FACT_CHAIN_NODE == 0 {
                continue;
            }
            roots[index] = match parent[index] {
                NONE => index as u32,
                up => roots[up as usize],
            };
        }
        return roots;
    }
    let mut path = Vec::new();
    for start in 0..n {
        if flags[start] & FACT_CHAIN_NODE == 0 || roots[start] != NONE {
            continue;
        }
        let mut node = start as u32;
        while roots[node as usize] == NONE && parent[node as usize] != NONE {
            path.push(node);
            node = parent[node as usize];
        }
        let root = if roots[node as usize] == NONE {
            node
        } else {
            roots[node as usize]
        };
        roots[node as usize] = root;
        for &visited in &path {
            roots[visited as usize] = root;
        }
        path.clear();
    }
    roots
}

/// Trilio's consolidation: in each chain, the backups older than the oldest one kept in its
/// own right (any bit of `independent`) are merged into it, as far up as each of them has no
/// other child and is a plain completed backup.
pub(crate) fn plan_merges(
    order: &[u32],
    parent: &[u32],
    flags: &[u32],
    roots: &[u32],
    is_immutable_chain: impl Fn(usize) -> bool,
    independent: u32,
) -> Vec<MergeIndices> {
    let n = parent.len();
    let mut child_count = vec![0u8; n];
    for &up in parent {
        if up != NONE {
            child_count[up as usize] = child_count[up as usize].saturating_add(1);
        }
    }
    let mut oldest_kept = vec![NONE; n];
    for &index in order.iter().rev() {
        let root = roots[index as usize];
        if root != NONE
            && flags[index as usize] & independent != 0
            && oldest_kept[root as usize] == NONE
        {
            oldest_kept[root as usize] = index;
        }
    }
    let plain_completed = |index: usize| {
        status_of(flags[index]) == BackupStatus::Completed
            && flags[index] & FACT_IMMUTABLE == 0
            && flags[index] & (KEEP_LEGAL_HOLD | KEEP_HOLD | KEEP_LOCKED) == 0
    };
    let mut merges = Vec::new();
    for &target in order {
        let target = target as usize;
        let root = roots[target];
        if root == NONE
            || oldest_kept[root as usize] != target as u32
            || flags[root as usize] & FACT_FULL == 0
            || is_immutable_chain(target)
            || !plain_completed(target)
            || flags[target] & FACT_DELETE_REQUESTED != 0
        {
            continue;
        }
        let mut sources = Vec::new();
        let mut up = parent[target];
        while up != NONE
            && plain_completed(up as usize)
            && flags[up as usize] & independent == 0
            && child_count[up as usize] == 1
        {
            sources.push(up);
            up = parent[up as usize];
        }
        if !sources.is_empty() {
            sources.reverse();
            merges.push(MergeIndices {
                chain: root,
                target: target as u32,
                sources,
                new_parent: up,
            });
        }
    }
    merges
}
