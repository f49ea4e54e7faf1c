//! Per-volume chains (issue 8, seed 001): the dependencies of a backup with volumes live
//! between volume artifacts, not between whole backups.
//!
//! The rules still decide which *backups* to keep (they count backups). This phase then works
//! on artifacts, one node per (backup, volume):
//! - an artifact of a kept backup is kept, and so is every artifact it depends on, walking up
//!   the same volume's parents (`needed by <id>`, the kept backup whose walk reached it first);
//! - merge mode and immutable chains work per volume chain, with the same algorithms as for
//!   whole backups ([`crate::chains`]);
//! - an expired backup whose artifacts are all needed stays whole (kept, reasons per volume);
//!   one with some of them needed is *partial*: the record and those artifacts stay, the rest
//!   go; one with none needed is deleted.
//!
//! Failed backups are not chain nodes, so none of their volumes joins a chain (seed 001: one
//! volume failing fails the backup). Backups without volumes keep the whole-backup chains of
//! the earlier phases. A volume whose parent is a backup without volumes (a catalog mixing the
//! two shapes) keeps that whole backup and its own chain: the parent's single artifact may
//! hold the volume, and keeping errs on the safe side.
//!
//! This phase runs only when some backup has volumes, so catalogs without volumes pay nothing
//! for it.

use std::collections::HashMap;
use std::ops::Range;

use crate::id_hash::hash_id;

use crate::catalog::{BackupRecord, Catalog};
use crate::chains::{chain_roots, find_cycle, plan_merges, MergeIndices, ParentLinks};
use crate::error::PlanError;
use crate::flags::{
    ART_BACKUP_KEPT, FACT_CHAIN_NODE, FACT_FULL, FACT_IMMUTABLE, FACT_VOLUMES, KEEP_ANY, KEEP_HOLD,
    KEEP_IMMUTABLE_CHAIN, KEEP_INDEPENDENT, KEEP_LEGAL_HOLD, KEEP_MERGE_SOURCE, KEEP_NEEDED,
    KEEP_VOLUMES_NEEDED, NONE, PARTIAL,
};

/// At the artifact level, kept in its own right: its backup is kept, or a hold, or its
/// immutable chain is kept.
pub(crate) const ART_INDEPENDENT: u32 = KEEP_INDEPENDENT | ART_BACKUP_KEPT;
/// Kept for any reason.
pub(crate) const ART_KEPT: u32 = ART_INDEPENDENT | KEEP_MERGE_SOURCE | KEEP_NEEDED;

/// The volume phase's decisions, as artifact indices. Artifact `a` of backup `i` is
/// `first[i] + position of the volume in the record`.
pub(crate) struct VolumeDecisions {
    /// Per backup, the index of its first artifact; one more entry at the end.
    first: Vec<u32>,
    /// Per artifact: the backup it belongs to.
    backup_of: Vec<u32>,
    /// Per artifact: keep bits at the artifact level and the facts of its backup.
    pub(crate) flags: Vec<u32>,
    /// (artifact, kept backup that needs it), sorted by artifact; dependents newest first.
    pub(crate) needed_by: Vec<(u32, u32)>,
    /// (merge source artifact, target backup), sorted.
    pub(crate) merge_target_of: Vec<(u32, u32)>,
    /// (artifact of an immutable chain, the chain's newest backup kept in its own right).
    pub(crate) immutable_with: Vec<(u32, u32)>,
    /// Merge jobs over artifact indices.
    pub(crate) merges: Vec<MergeIndices>,
    /// Per artifact: its parent artifact, or `NONE`.
    pub(crate) art_parent: Vec<u32>,
    /// Per artifact: the backup without volumes its parent link points to, or `NONE`.
    pub(crate) cross_parent: Vec<u32>,
}

impl VolumeDecisions {
    /// The artifacts of backup `index` (empty for a backup without volumes).
    pub(crate) fn artifacts(&self, index: usize) -> Range<usize> {
        self.first[index] as usize..self.first[index + 1] as usize
    }

    /// The backup artifact `artifact` belongs to, and the volume's position in its record.
    pub(crate) fn locate(&self, artifact: u32) -> (usize, usize) {
        let backup = self.backup_of[artifact as usize] as usize;
        (backup, artifact as usize - self.first[backup] as usize)
    }

    pub(crate) fn is_kept(&self, artifact: usize) -> bool {
        self.flags[artifact] & ART_KEPT != 0
    }
}

/// The artifact graph and the walk over it.
struct Walk<'c, 'l> {
    flags: &'l mut [u32],
    links: &'l mut ParentLinks<'c>,
    needed_by: &'l mut Vec<(u32, u32)>,
    warnings: &'l mut Vec<String>,
    first: Vec<u32>,
    art_flags: Vec<u32>,
    art_parent: Vec<u32>,
    /// Per artifact: the backup without volumes its parent link points to, or `NONE`.
    cross_parent: Vec<u32>,
    art_needed: Vec<(u32, u32)>,
    /// Artifacts of backups that became needed whole during the walk, with who needs them.
    pending: Vec<(u32, u32)>,
}

/// Decides every artifact of the backups with volumes, and which of those backups are kept
/// whole (`KEEP_VOLUMES_NEEDED`), partial (`PARTIAL`) or deleted. Runs after the backup-level
/// chains; `flags` and `needed_by` are the backup-level decisions, updated in place.
pub(crate) fn decide<'c>(
    mut ids: IdIndex<'c, '_>,
    flags: &mut [u32],
    links: &mut ParentLinks<'c>,
    needed_by: &mut Vec<(u32, u32)>,
    merge_mode: bool,
    warnings: &mut Vec<String>,
) -> Result<VolumeDecisions, PlanError> {
    let (catalog, order) = (ids.catalog, ids.order);
    let backups = &catalog.backups;
    let (first, backup_of) = artifact_layout(backups)?;
    // Newest backup first, then the volumes in the record's order.
    let art_order: Vec<u32> = order
        .iter()
        .flat_map(|&index| first[index as usize]..first[index as usize + 1])
        .collect();
    let mut art_flags = artifact_flags(backups, flags, &first);
    let parents = resolve_parents(
        &mut ids, flags, &first, &backup_of, &art_order, &art_flags, warnings,
    )?;
    let chains = volume_chains(&art_order, &parents, &backup_of, &mut art_flags, merge_mode);

    // The walk: up every volume chain from each artifact kept in its own right, newest first.
    let mut walk = Walk {
        flags,
        links,
        needed_by,
        warnings,
        first,
        art_flags,
        art_parent: parents.art_parent,
        cross_parent: parents.cross_parent,
        art_needed: Vec::new(),
        pending: Vec::new(),
    };
    walk.walk_all(&art_order, &backup_of);
    let Walk {
        flags,
        needed_by,
        warnings,
        first,
        art_flags,
        art_parent,
        cross_parent,
        mut art_needed,
        ..
    } = walk;
    art_needed.sort_by_key(|&(artifact, _)| artifact);
    needed_by.sort_by_key(|&(needed, _)| needed);

    let decisions = VolumeDecisions {
        first,
        backup_of,
        flags: art_flags,
        needed_by: art_needed,
        merge_target_of: chains.merge_target_of,
        immutable_with: chains.immutable_with,
        merges: chains.merges,
        art_parent,
        cross_parent,
    };
    judge_backups(order, backups, flags, &decisions, warnings);
    Ok(decisions)
}

/// The artifacts' numbering: per backup, the index of its first artifact (one more entry at
/// the end), and per artifact, its backup. Refuses more artifacts than the engine handles.
fn artifact_layout(backups: &[BackupRecord]) -> Result<(Vec<u32>, Vec<u32>), PlanError> {
    let n = backups.len();
    let mut first = Vec::with_capacity(n + 1);
    let mut n_artifacts: usize = 0;
    for backup in backups {
        first.push(n_artifacts as u32);
        n_artifacts += backup.volumes.len();
        if n_artifacts > crate::error::MAX_BACKUPS {
            return Err(PlanError::TooManyVolumes { n_artifacts });
        }
    }
    first.push(n_artifacts as u32);
    let mut backup_of = vec![0u32; n_artifacts];
    for index in 0..n {
        for artifact in first[index]..first[index + 1] {
            backup_of[artifact as usize] = index as u32;
        }
    }
    Ok((first, backup_of))
}

/// Each artifact's flags: its backup's facts, its own kind, and whether its backup is kept.
fn artifact_flags(backups: &[BackupRecord], flags: &[u32], first: &[u32]) -> Vec<u32> {
    let copied = !(KEEP_ANY | PARTIAL | ART_BACKUP_KEPT | FACT_FULL);
    let mut art_flags = vec![0u32; *first.last().unwrap_or(&0) as usize];
    for (index, backup) in backups.iter().enumerate() {
        let bits = flags[index];
        for (offset, volume) in backup.volumes.iter().enumerate() {
            let mut art_bits = (bits & copied) | (bits & (KEEP_LEGAL_HOLD | KEEP_HOLD));
            if volume.kind == crate::catalog::BackupKind::Full {
                art_bits |= FACT_FULL;
            }
            if bits & KEEP_ANY != 0 {
                art_bits |= ART_BACKUP_KEPT;
            }
            art_flags[first[index] as usize + offset] = art_bits;
        }
    }
    art_flags
}

/// Every artifact's parent link, resolved.
struct ArtifactParents {
    /// Per artifact: its parent artifact, or `NONE`.
    art_parent: Vec<u32>,
    /// Per artifact: the backup without volumes its parent link points to, or `NONE`.
    cross_parent: Vec<u32>,
    /// Some artifact's parent is newer than it.
    has_forward_links: bool,
}

/// Parent links, all resolved: merges and immutable chains need whole chains, and the number
/// of artifacts is what the walk visits anyway. A broken link is a warning; a cycle refuses
/// the plan.
fn resolve_parents(
    ids: &mut IdIndex<'_, '_>,
    flags: &[u32],
    first: &[u32],
    backup_of: &[u32],
    art_order: &[u32],
    art_flags: &[u32],
    warnings: &mut Vec<String>,
) -> Result<ArtifactParents, PlanError> {
    let (catalog, order) = (ids.catalog, ids.order);
    let backups = &catalog.backups;
    let n_artifacts = art_flags.len();
    let mut position = vec![NONE; backups.len()];
    for (at, &index) in order.iter().enumerate() {
        position[index as usize] = at as u32;
    }
    let mut art_parent = vec![NONE; n_artifacts];
    let mut cross_parent = vec![NONE; n_artifacts];
    let mut has_forward_links = false;
    for &artifact in art_order {
        let art_bits = art_flags[artifact as usize];
        if art_bits & FACT_CHAIN_NODE == 0 || art_bits & FACT_FULL != 0 {
            continue;
        }
        let index = backup_of[artifact as usize] as usize;
        let backup = &backups[index];
        let offset = artifact as usize - first[index] as usize;
        let volume = &backup.volumes[offset];
        let wanted = volume.parent.as_deref().unwrap_or_default();
        let broken = |why: &str| {
            format!(
                "backup {} volume {}: parent {wanted} {why}",
                backup.id, volume.name
            )
        };
        let Some(parent) = ids.find(wanted, position[index]) else {
            warnings.push(broken("is not in the catalog; its chain is broken"));
            continue;
        };
        if flags[parent as usize] & FACT_CHAIN_NODE == 0 {
            warnings.push(broken("failed; failed backups are never part of a chain"));
            continue;
        }
        if position[parent as usize] < position[index] {
            has_forward_links = true;
        }
        if flags[parent as usize] & FACT_VOLUMES == 0 {
            cross_parent[artifact as usize] = parent;
            continue;
        }
        // Executors list volumes in the same order from one backup to the next.
        let parent_volumes = &backups[parent as usize].volumes;
        let same_place = parent_volumes
            .get(offset)
            .is_some_and(|candidate| candidate.name == volume.name);
        let found = if same_place {
            Some(offset)
        } else {
            parent_volumes
                .iter()
                .position(|candidate| candidate.name == volume.name)
        };
        match found {
            Some(offset) => art_parent[artifact as usize] = first[parent as usize] + offset as u32,
            None => warnings.push(broken(&format!(
                "has no artifact of volume {}; its chain is broken",
                volume.name
            ))),
        }
    }
    if has_forward_links {
        if let Some(artifact) = find_cycle(&art_parent) {
            return Err(PlanError::ParentCycle {
                id: backups[backup_of[artifact as usize] as usize].id.clone(),
            });
        }
    }
    Ok(ArtifactParents {
        art_parent,
        cross_parent,
        has_forward_links,
    })
}

/// What immutable chains and merges decide, per volume chain.
struct VolumeChains {
    immutable_with: Vec<(u32, u32)>,
    merges: Vec<MergeIndices>,
    merge_target_of: Vec<(u32, u32)>,
}

/// Immutable chains and merges, per volume chain: marks the artifacts an immutable chain
/// keeps (`KEEP_IMMUTABLE_CHAIN`) and the merges' sources (`KEEP_MERGE_SOURCE`).
fn volume_chains(
    art_order: &[u32],
    parents: &ArtifactParents,
    backup_of: &[u32],
    art_flags: &mut [u32],
    merge_mode: bool,
) -> VolumeChains {
    let any_immutable = art_flags
        .iter()
        .any(|&bits| bits & FACT_IMMUTABLE != 0 && bits & FACT_CHAIN_NODE != 0);
    let mut chains = VolumeChains {
        immutable_with: Vec::new(),
        merges: Vec::new(),
        merge_target_of: Vec::new(),
    };
    if !(merge_mode || any_immutable) {
        return chains;
    }
    let roots = chain_roots(
        art_order,
        &parents.art_parent,
        art_flags,
        parents.has_forward_links,
    );
    let mut chain_immutable = Vec::new();
    if any_immutable {
        (chain_immutable, chains.immutable_with) =
            keep_immutable_chains(art_order, &roots, backup_of, art_flags);
    }
    if merge_mode {
        let is_immutable_chain = |artifact: usize| {
            any_immutable && roots[artifact] != NONE && chain_immutable[roots[artifact] as usize]
        };
        chains.merges = plan_merges(
            art_order,
            &parents.art_parent,
            art_flags,
            &roots,
            is_immutable_chain,
            ART_INDEPENDENT,
        );
        for merge in &chains.merges {
            for &source in &merge.sources {
                art_flags[source as usize] |= KEEP_MERGE_SOURCE;
                chains
                    .merge_target_of
                    .push((source, backup_of[merge.target as usize]));
            }
        }
        chains.merge_target_of.sort_unstable();
    }
    chains
}

/// The immutable volume chains (by root: one holds an immutable artifact), and each of their
/// artifacts kept with the chain's newest artifact kept in its own right, marked so.
fn keep_immutable_chains(
    art_order: &[u32],
    roots: &[u32],
    backup_of: &[u32],
    art_flags: &mut [u32],
) -> (Vec<bool>, Vec<(u32, u32)>) {
    let n_artifacts = art_flags.len();
    let mut chain_immutable = vec![false; n_artifacts];
    let mut immutable_with = Vec::new();
    for artifact in 0..n_artifacts {
        if art_flags[artifact] & FACT_IMMUTABLE != 0 && roots[artifact] != NONE {
            chain_immutable[roots[artifact] as usize] = true;
        }
    }
    let mut newest_kept = vec![NONE; n_artifacts];
    for &artifact in art_order {
        let root = roots[artifact as usize];
        if root != NONE
            && chain_immutable[root as usize]
            && art_flags[artifact as usize] & ART_INDEPENDENT != 0
            && newest_kept[root as usize] == NONE
        {
            newest_kept[root as usize] = artifact;
        }
    }
    for &artifact in art_order {
        let root = roots[artifact as usize];
        if root == NONE || !chain_immutable[root as usize] {
            continue;
        }
        let kept_with = newest_kept[root as usize];
        if kept_with != NONE && art_flags[artifact as usize] & ART_INDEPENDENT == 0 {
            art_flags[artifact as usize] |= KEEP_IMMUTABLE_CHAIN;
            immutable_with.push((artifact, backup_of[kept_with as usize]));
        }
    }
    immutable_with.sort_unstable();
    (chain_immutable, immutable_with)
}

/// Per backup with volumes: kept whole (`KEEP_VOLUMES_NEEDED`) when every artifact is kept,
/// partial (`PARTIAL`) when some are, deleted when none are; a kept volume marked expiring is
/// a warning.
fn judge_backups(
    order: &[u32],
    backups: &[BackupRecord],
    flags: &mut [u32],
    decisions: &VolumeDecisions,
    warnings: &mut Vec<String>,
) {
    for &index in order {
        let index = index as usize;
        if flags[index] & FACT_VOLUMES == 0 {
            continue;
        }
        let backup = &backups[index];
        let artifacts = decisions.artifacts(index);
        let n_kept = artifacts
            .clone()
            .filter(|&artifact| decisions.is_kept(artifact))
            .count();
        if flags[index] & KEEP_ANY == 0 {
            if n_kept == artifacts.len() {
                flags[index] |= KEEP_VOLUMES_NEEDED;
            } else if n_kept > 0 {
                flags[index] |= PARTIAL;
            }
        }
        if n_kept == 0 || crate::flags::status_of(flags[index]).is_being_deleted() {
            continue;
        }
        for (offset, artifact) in artifacts.enumerate() {
            let volume = &backup.volumes[offset];
            if decisions.is_kept(artifact) && volume.expiring {
                warnings.push(format!(
                    "backup {} volume {}: marked expiring but kept by this plan",
                    backup.id, volume.name
                ));
            }
        }
    }
}

/// How many of the next older backups are tried as a volume's parent before its id is looked
/// up in a map: executors build on the last good backup, nearly always one of them.
const PARENT_NEIGHBOURS: usize = 4;

/// Finds a backup by id: by id hash among the next older backups, else in a map built on
/// first need.
pub(crate) struct IdIndex<'c, 'o> {
    catalog: &'c Catalog,
    order: &'o [u32],
    id_hashes: &'o [u64],
    /// Two ids of the catalog share a hash: compare strings only.
    hash_collision: bool,
    by_id: Option<HashMap<&'c str, u32>>,
}

impl<'c, 'o> IdIndex<'c, 'o> {
    /// `order` is the catalog's indices newest first, `id_hashes` the ids' hashes, and
    /// `hash_collision` whether two ids of the catalog share one.
    pub(crate) fn new(
        catalog: &'c Catalog,
        order: &'o [u32],
        id_hashes: &'o [u64],
        hash_collision: bool,
    ) -> IdIndex<'c, 'o> {
        IdIndex {
            catalog,
            order,
            id_hashes,
            hash_collision,
            by_id: None,
        }
    }

    fn find(&mut self, wanted: &str, position: u32) -> Option<u32> {
        if !self.hash_collision {
            // Ids have distinct hashes here, so an equal hash is the parent (or, with odds of
            // 2^-64, a stand-in for a parent missing from the catalog, which keeps more).
            let wanted_hash = hash_id(wanted);
            let first = position as usize + 1;
            let last = (first + PARENT_NEIGHBOURS).min(self.order.len());
            if let Some(&found) = self.order[first.min(last)..last]
                .iter()
                .find(|&&candidate| self.id_hashes[candidate as usize] == wanted_hash)
            {
                return Some(found);
            }
        }
        let catalog = self.catalog;
        self.by_id
            .get_or_insert_with(|| {
                catalog
                    .backups
                    .iter()
                    .enumerate()
                    .map(|(index, backup)| (backup.id.as_str(), index as u32))
                    .collect()
            })
            .get(wanted)
            .copied()
    }
}

impl Walk<'_, '_> {
    /// Walks up from each artifact kept in its own right, newest first, then from the
    /// artifacts of backups the walk found needed whole.
    fn walk_all(&mut self, art_order: &[u32], backup_of: &[u32]) {
        for &artifact in art_order {
            if self.art_flags[artifact as usize] & ART_INDEPENDENT != 0 {
                self.walk_artifact(artifact, backup_of[artifact as usize]);
            }
        }
        while let Some((artifact, by)) = self.pending.pop() {
            self.walk_artifact(artifact, by);
        }
    }

    /// Walks up the volume chain above `start`, marking what `by` (a kept backup) needs.
    fn walk_artifact(&mut self, start: u32, by: u32) {
        let mut node = start as usize;
        loop {
            let up = self.art_parent[node];
            if up == NONE {
                let cross = self.cross_parent[node];
                if cross != NONE {
                    self.walk_backup(cross, by);
                }
                return;
            }
            let up_bits = self.art_flags[up as usize];
            if up_bits & KEEP_MERGE_SOURCE != 0 {
                // Kept until the merge is done; the target depends on what lies above it.
                node = up as usize;
                continue;
            }
            if up_bits & ART_INDEPENDENT != 0 {
                return;
            }
            self.art_needed.push((up, by));
            if up_bits & KEEP_NEEDED != 0 {
                return;
            }
            self.art_flags[up as usize] |= KEEP_NEEDED;
            node = up as usize;
        }
    }

    /// A volume's parent is a backup without volumes: keep it whole, and its own chain. A
    /// backup with volumes reached that way is kept whole too, and its volumes' chains walked.
    fn walk_backup(&mut self, first_needed: u32, by: u32) {
        let mut node = first_needed;
        loop {
            let bits = self.flags[node as usize];
            if bits & KEEP_ANY != 0 {
                if bits & KEEP_INDEPENDENT == 0 && bits & KEEP_NEEDED != 0 {
                    self.needed_by.push((node, by));
                }
                return;
            }
            self.flags[node as usize] |= KEEP_NEEDED;
            self.needed_by.push((node, by));
            if bits & FACT_VOLUMES != 0 {
                let artifacts = self.first[node as usize]..self.first[node as usize + 1];
                for artifact in artifacts {
                    self.art_flags[artifact as usize] |= ART_BACKUP_KEPT;
                    self.pending.push((artifact, by));
                }
                return;
            }
            let (up, _) = self
                .links
                .parent_of(node as usize, NONE, self.flags, self.warnings);
            if up == NONE {
                return;
            }
            node = up;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_masks_do_not_overlap_the_backup_verdict_bits() {
        assert_eq!(ART_KEPT & PARTIAL, 0);
        assert_eq!(ART_BACKUP_KEPT & KEEP_ANY, 0);
        assert_eq!(KEEP_VOLUMES_NEEDED & KEEP_INDEPENDENT, 0);
    }
}
