//! Which kept backups the rules keep, and which are kept only because of holds (issue 47).
//!
//! `pitr_full: N` promises point-in-time recovery from the newest N kept fulls. A hold must
//! only ever keep more, so a full kept only by holds (a legal hold, `keep:`, `standalone:`
//! or a restore test's hold) is not one of those N: counting it would move an older full out
//! of the count and delete the archive after it because of a hold. barman leaves annotated
//! backups out of its policies the same way. Such a full keeps its own range
//! ([`crate::binlog`]).
//!
//! "Kept by the rules" is what would be kept if nothing were held: a backup a rule (or the
//! floor, a lock, a failed backup's grace, ...) keeps in its own right, every backup it needs
//! (its ancestors, per volume where it has volumes, also where a held backup stops the chain
//! walk), every member of an immutable chain one of whose members is kept by the rules, and a
//! backup with volumes all of whose volumes a backup kept by the rules needs. The keep bits
//! cannot say it: the chain walk stops at a held backup, and a held backup that a kept one
//! builds on carries only its hold. The recovery window's base is the one it would take
//! without standalone holds ([`crate::rules`]).
//!
//! Where the answer is unsure (volumes' immutable chains) it leaves a backup out of the rules'
//! keeping: a full that is not counted only moves the horizon older, which keeps more.
//!
//! Runs only under `pitr_full` when something kept is held: one pass over the flags and one
//! visit of each backup (and artifact) the rules keep, whose parent links the chain walk has
//! resolved already.

use std::collections::HashMap;

use crate::chains::ParentLinks;
use crate::flags::{
    FACT_VOLUMES, KEEP_ANY, KEEP_HOLD, KEEP_IMMUTABLE_CHAIN, KEEP_INDEPENDENT, KEEP_LEGAL_HOLD,
    KEEP_WINDOW_BASE, NONE,
};
use crate::volumes::VolumeDecisions;

/// The keep bits of holds.
pub(crate) const HOLDS: u32 = KEEP_LEGAL_HOLD | KEEP_HOLD;

/// Kept in its own right by something other than a hold. An immutable chain is kept for its
/// members' reasons, which [`kept_by_rules`] follows.
const OWN_RULES: u32 = KEEP_INDEPENDENT & !(HOLDS | KEEP_IMMUTABLE_CHAIN);

/// Whether [`kept_by_rules`] has anything to tell apart: some kept backup is held.
pub(crate) fn any_kept_held(flags: &[u32]) -> bool {
    flags
        .iter()
        .any(|&bits| bits & HOLDS != 0 && bits & KEEP_ANY != 0)
}

/// The decisions [`kept_by_rules`] reads besides the flags.
pub(crate) struct Kept<'d> {
    /// (root, member) of every kept immutable chain, sorted.
    pub(crate) immutable_chains: &'d [(u32, u32)],
    pub(crate) volumes: Option<&'d VolumeDecisions>,
    /// The recovery window's base without standalone holds, where it is not the one taken.
    pub(crate) unheld_window_base: Option<u32>,
}

/// Per backup: whether the plan would keep it if nothing were held (see the module
/// documentation). Only meaningful for kept backups.
pub(crate) fn kept_by_rules(
    flags: &[u32],
    links: &mut ParentLinks<'_>,
    kept: Kept<'_>,
) -> Vec<bool> {
    let n = flags.len();
    let n_artifacts = kept.volumes.map_or(0, |volumes| volumes.flags.len());
    // Nodes: backups 0..n, then artifacts.
    let mut ruled = vec![false; n + n_artifacts];
    let mut stack: Vec<u32> = Vec::new();
    // The window's base taken because a standalone hold skipped a newer one is kept for that
    // hold; the skipped one is what the rule keeps.
    let own = if kept.unheld_window_base.is_some() {
        OWN_RULES & !KEEP_WINDOW_BASE
    } else {
        OWN_RULES
    };
    for (index, &bits) in flags.iter().enumerate() {
        if bits & own != 0 {
            mark(index as u32, &mut ruled, &mut stack);
        }
    }
    if let Some(base) = kept.unheld_window_base {
        mark(base, &mut ruled, &mut stack);
    }
    let chain_of: HashMap<u32, u32> = kept
        .immutable_chains
        .iter()
        .map(|&(root, member)| (member, root))
        .collect();
    // (backup, artifact kept with it in an immutable volume chain), sorted.
    let mut volume_chains: Vec<(u32, u32)> = kept
        .volumes
        .map(|volumes| {
            volumes
                .immutable_with
                .iter()
                .map(|&(artifact, with)| (with, artifact))
                .collect()
        })
        .unwrap_or_default();
    volume_chains.sort_unstable();
    let mut artifacts_ruled = vec![0u32; if kept.volumes.is_some() { n } else { 0 }];
    // The chain walk resolved the links of every kept backup; a warning found again is the
    // walk's, already given.
    let mut warnings = Vec::new();
    while let Some(node) = stack.pop() {
        let node = node as usize;
        if node < n {
            if let Some(volumes) = kept.volumes.filter(|_| flags[node] & FACT_VOLUMES != 0) {
                for artifact in volumes.artifacts(node) {
                    mark((n + artifact) as u32, &mut ruled, &mut stack);
                }
            } else {
                let (parent, _) = links.parent_of(node, NONE, flags, &mut warnings);
                if parent != NONE {
                    mark(parent, &mut ruled, &mut stack);
                }
            }
            if let Some(&root) = chain_of.get(&(node as u32)) {
                let from = kept.immutable_chains.partition_point(|&(r, _)| r < root);
                for &(r, member) in &kept.immutable_chains[from..] {
                    if r != root {
                        break;
                    }
                    mark(member, &mut ruled, &mut stack);
                }
            }
            let from = volume_chains.partition_point(|&(with, _)| (with as usize) < node);
            for &(with, artifact) in &volume_chains[from..] {
                if with as usize != node {
                    break;
                }
                mark(n as u32 + artifact, &mut ruled, &mut stack);
            }
        } else {
            let volumes = kept.volumes.expect("artifacts only with volumes");
            let artifact = node - n;
            let up = volumes.art_parent[artifact];
            if up != NONE {
                mark(n as u32 + up, &mut ruled, &mut stack);
            } else if volumes.cross_parent[artifact] != NONE {
                mark(volumes.cross_parent[artifact], &mut ruled, &mut stack);
            }
            // A backup all of whose volumes the rules need is kept whole by them.
            let (backup, _) = volumes.locate(artifact as u32);
            artifacts_ruled[backup] += 1;
            if artifacts_ruled[backup] as usize == volumes.artifacts(backup).len() {
                mark(backup as u32, &mut ruled, &mut stack);
            }
        }
    }
    drop(warnings);
    ruled.truncate(n);
    ruled
}

fn mark(node: u32, ruled: &mut [bool], stack: &mut Vec<u32>) {
    if !ruled[node as usize] {
        ruled[node as usize] = true;
        stack.push(node);
    }
}
