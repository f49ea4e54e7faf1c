//! Whether a backup's chain is whole: each link (a backup, or one volume's artifact in it)
//! walked up to a full backup, found on demand and remembered. [`super::restorable`] asks it of
//! every backup; the engine asks it of a few candidates ([`crate::rules`], [`crate::binlog`]).

use std::collections::{HashMap, HashSet};

use crate::catalog::{BackupKind, BackupStatus, Catalog};
use crate::chains::PARENT_NEIGHBOURS;

/// Whether each backup's chain is whole, found once per backup and per volume artifact.
pub(super) struct Chains<'a> {
    check: ChainCheck<'a, ById<'a>>,
    /// Per backup: `None` when its chain is whole, or why it is not.
    broken: Vec<Option<String>>,
}

impl<'a> Chains<'a> {
    pub(super) fn new(catalog: &'a Catalog) -> Chains<'a> {
        let mut check = ChainCheck::new(catalog, ById::new(catalog));
        let broken = (0..catalog.backups.len())
            .map(|index| check.broken(index))
            .collect();
        Chains { check, broken }
    }

    pub(super) fn broken(&self, index: usize) -> Option<&str> {
        self.broken[index].as_deref()
    }

    pub(super) fn chain_ids(&mut self, index: usize) -> Vec<String> {
        self.check.chain_ids(index)
    }
}

/// How a [`ChainCheck`] finds a parent by id.
pub(crate) trait ParentLookup {
    /// The index of backup `id`, which the backup at `child` builds on, if it is there.
    fn find(&mut self, child: usize, id: &str) -> Option<usize>;
}

/// Every id in a map, built at once; of duplicate ids (which the engine refuses) the first
/// one stands.
pub(super) struct ById<'a>(pub(super) HashMap<&'a str, usize>);

impl<'a> ById<'a> {
    pub(super) fn new(catalog: &'a Catalog) -> ById<'a> {
        let mut by_id = HashMap::with_capacity(catalog.backups.len());
        for (index, backup) in catalog.backups.iter().enumerate() {
            by_id.entry(backup.id.as_str()).or_insert(index);
        }
        ById(by_id)
    }
}

impl ParentLookup for ById<'_> {
    fn find(&mut self, _child: usize, id: &str) -> Option<usize> {
        self.0.get(id).copied()
    }
}

/// Finds a parent for [`ChainCheck`] in the engine ([`crate::rules`], [`crate::binlog`]): among the next older backups of the sorted
/// order first, where the scheduler nearly always puts it (as [`crate::chains`] does), and by
/// a map of every id, built on first need, otherwise. Ids are unique here (phase 1 refuses
/// duplicates).
pub(crate) struct SortedNeighbours<'a> {
    catalog: &'a Catalog,
    order: &'a [u32],
    /// The sorted positions known so far: the candidates', and the parents found near them.
    positions: HashMap<usize, usize>,
    by_id: Option<HashMap<&'a str, usize>>,
}

impl<'a> SortedNeighbours<'a> {
    pub(crate) fn new(catalog: &'a Catalog, order: &'a [u32]) -> SortedNeighbours<'a> {
        SortedNeighbours {
            catalog,
            order,
            positions: HashMap::new(),
            by_id: None,
        }
    }

    /// Backup `index` is at sorted `position`.
    pub(crate) fn place(&mut self, index: usize, position: u32) {
        self.positions.insert(index, position as usize);
    }
}

impl ParentLookup for SortedNeighbours<'_> {
    fn find(&mut self, child: usize, id: &str) -> Option<usize> {
        let backups = &self.catalog.backups;
        if let Some(&position) = self.positions.get(&child) {
            let first = position + 1;
            let last = (first + PARENT_NEIGHBOURS).min(self.order.len());
            if let Some(found) = (first..last).find(|&at| backups[self.order[at] as usize].id == id)
            {
                let index = self.order[found] as usize;
                self.positions.insert(index, found);
                return Some(index);
            }
        }
        let by_id = self.by_id.get_or_insert_with(|| {
            backups
                .iter()
                .enumerate()
                .map(|(index, backup)| (backup.id.as_str(), index))
                .collect()
        });
        by_id.get(id).copied()
    }
}

/// Whether a backup's chain is whole (the module documentation's *point*, less its own status
/// and time): found on demand, each link once, and remembered. [`super::restorable`] asks it of every
/// backup; the engine asks it of the few candidates for the recovery window's base
/// ([`crate::rules`]), with a lookup that tries the next older backups first.
pub(crate) struct ChainCheck<'a, L> {
    catalog: &'a Catalog,
    lookup: L,
    /// Per link asked so far: `None` when it is whole, or why it is not.
    memo: HashMap<Link, Option<String>>,
}

/// A link of a chain: a backup as a whole, or one volume's artifact in it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Link {
    Backup(usize),
    Volume(usize, usize),
}

impl<'a, L: ParentLookup> ChainCheck<'a, L> {
    pub(crate) fn new(catalog: &'a Catalog, lookup: L) -> ChainCheck<'a, L> {
        ChainCheck {
            catalog,
            lookup,
            memo: HashMap::new(),
        }
    }

    pub(crate) fn lookup_mut(&mut self) -> &mut L {
        &mut self.lookup
    }

    /// Why backup `index` cannot be restored as far as its chain goes (it, each of its
    /// volumes' artifacts and every ancestor `completed`, none failed or expiring, every
    /// parent in the catalog), or `None` when its chain is whole.
    pub(crate) fn broken(&mut self, index: usize) -> Option<String> {
        self.link_broken(Link::Backup(index))
    }

    /// Why `link` (with everything it builds on) cannot be restored, or `None` when it can.
    /// Walks up the parents with an explicit path, so a long chain does not deepen the stack
    /// and a parent loop ends as a broken chain.
    fn link_broken(&mut self, link: Link) -> Option<String> {
        if let Some(known) = self.memo.get(&link) {
            return known.clone();
        }
        // A backup with volumes is whole when each of its volumes is.
        if let Link::Backup(index) = link {
            let volumes = self.catalog.backups[index].volumes.len();
            if volumes > 0 {
                let why =
                    (0..volumes).find_map(|volume| self.link_broken(Link::Volume(index, volume)));
                self.memo.insert(link, why.clone());
                return why;
            }
        }
        let mut path: Vec<Link> = Vec::new();
        let mut on_path: HashSet<Link> = HashSet::new();
        let mut node = link;
        let verdict = loop {
            if let Some(known) = self.memo.get(&node) {
                break known.clone();
            }
            if !on_path.insert(node) {
                break Some(format!("{} is in a parent loop", self.id(node)));
            }
            path.push(node);
            match self.step(node) {
                Step::Whole => break None,
                Step::Broken(why) => break Some(why),
                Step::Parent(parent) => node = parent,
            }
        };
        for node in path {
            self.memo.insert(node, verdict.clone());
        }
        verdict
    }

    /// One link's own state, and its parent link if it has one.
    fn step(&mut self, link: Link) -> Step {
        let catalog = self.catalog;
        let backups = &catalog.backups;
        let (index, kind, parent) = match link {
            Link::Backup(index) => {
                let backup = &backups[index];
                (index, backup.kind, backup.parent.as_deref())
            }
            Link::Volume(index, volume) => {
                let artifact = &backups[index].volumes[volume];
                if artifact.failed || artifact.expiring {
                    let state = if artifact.failed {
                        "failed"
                    } else {
                        "expiring"
                    };
                    return Step::Broken(format!(
                        "volume {} of {} is {state}",
                        artifact.name, backups[index].id
                    ));
                }
                (index, artifact.kind, artifact.parent.as_deref())
            }
        };
        let backup = &backups[index];
        if backup.status != BackupStatus::Completed {
            return Step::Broken(format!("{} is {}", backup.id, backup.status.as_str()));
        }
        if kind == BackupKind::Full {
            return Step::Whole;
        }
        let Some(parent_id) = parent else {
            return Step::Broken(format!("{} names no parent", self.id(link)));
        };
        let Some(parent) = self.lookup.find(index, parent_id) else {
            return Step::Broken(format!("{parent_id} is missing"));
        };
        let parent_backup = &backups[parent];
        match link {
            Link::Backup(_) if parent_backup.volumes.is_empty() => {
                Step::Parent(Link::Backup(parent))
            }
            Link::Volume(_, volume) => {
                let name = &backup.volumes[volume].name;
                match parent_backup.volumes.iter().position(|v| &v.name == name) {
                    Some(at) => Step::Parent(Link::Volume(parent, at)),
                    None => Step::Broken(format!("{parent_id} has no volume {name}")),
                }
            }
            Link::Backup(_) => {
                Step::Broken(format!("{parent_id} has volumes, {} has none", backup.id))
            }
        }
    }

    fn id(&self, link: Link) -> &'a str {
        match link {
            Link::Backup(index) | Link::Volume(index, _) => &self.catalog.backups[index].id,
        }
    }

    /// The backups a restore of `index` reads, oldest first (by `completed_at`, then id).
    fn chain_ids(&mut self, index: usize) -> Vec<String> {
        let backups = &self.catalog.backups;
        let mut members: Vec<usize> = vec![index];
        let mut seen: HashSet<Link> = HashSet::new();
        let mut todo: Vec<Link> = if backups[index].volumes.is_empty() {
            vec![Link::Backup(index)]
        } else {
            (0..backups[index].volumes.len())
                .map(|volume| Link::Volume(index, volume))
                .collect()
        };
        while let Some(link) = todo.pop() {
            if !seen.insert(link) {
                continue;
            }
            if let Step::Parent(parent) = self.step(link) {
                let (Link::Backup(at) | Link::Volume(at, _)) = parent;
                members.push(at);
                todo.push(parent);
            }
        }
        members.sort_unstable();
        members.dedup();
        members.sort_by(|&a, &b| {
            backups[a]
                .completed_at
                .cmp(&backups[b].completed_at)
                .then_with(|| backups[a].id.cmp(&backups[b].id))
        });
        members
            .into_iter()
            .map(|at| backups[at].id.clone())
            .collect()
    }
}

enum Step {
    Whole,
    Broken(String),
    Parent(Link),
}
