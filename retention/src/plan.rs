//! The engine's answer: which backups and binlog segments stay, which go, and why.
//!
//! [`Plan`] is the owned, serialisable form (issue 3's JSON output, previews, events). It is
//! rendered from an [`crate::Evaluation`], which holds the same decisions as indices into the
//! catalog; services that handle very large catalogs or only need one answer ("does this plan
//! delete backup X?") can use the evaluation and skip the rendering.

use std::sync::OnceLock;

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::catalog::{BackupKind, BackupStatus};
use crate::id_hash::hash_id;

/// Every backup of the catalog appears in exactly one of `keep` and `delete`, newest first.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Plan {
    pub keep: Vec<Decision>,
    pub delete: Vec<Decision>,
    /// Merge jobs for the executor (`chain_mode: merge`).
    #[serde(default)]
    pub merges: Vec<Merge>,
    pub binlog: BinlogPlan,
    /// Oddities that did not stop the plan (a parent missing from the catalog, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Built on the first lookup by id.
    #[serde(skip)]
    lookup: OnceLock<Vec<(u64, u32)>>,
}

impl PartialEq for Plan {
    fn eq(&self, other: &Plan) -> bool {
        self.keep == other.keep
            && self.delete == other.delete
            && self.merges == other.merges
            && self.binlog == other.binlog
            && self.warnings == other.warnings
    }
}

impl Eq for Plan {}

/// The decision about one backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub id: String,
    /// Why it stays or why it may go, most important first.
    pub reasons: Vec<String>,
    /// False for a deleted immutable backup: remove the catalog record only, never the
    /// objects (the bucket's lifecycle rules do that). Always true on kept backups.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub remove_objects: bool,
    /// The record's status when the plan was made (a deleted `expiring` backup is already
    /// marked; a kept one may need its mark taken back).
    pub status: BackupStatus,
    pub kind: BackupKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<FixedOffset>>,
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// A merge job (Trilio's synthetic full): fold `sources` (oldest first) into `target`. Until
/// the executor reports it done, the sources stay in the plan's keep list. Once done, the
/// scheduler records the target with `parent = new_parent` (a full when `new_parent` is
/// `None`); nothing then needs the sources and the next plan deletes them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Merge {
    /// The full backup the chain starts from.
    pub chain: String,
    pub target: String,
    pub sources: Vec<String>,
    pub new_parent: Option<String>,
}

/// Binlog garbage collection: what `_index.json` must list after the deleter's pass (`keep`)
/// and which segments it removes (`delete`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct BinlogPlan {
    /// The start of the oldest kept full backup; `None` deletes nothing.
    pub horizon: Option<DateTime<FixedOffset>>,
    /// The backup the horizon comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_backup: Option<String>,
    pub keep: Vec<String>,
    pub delete: Vec<String>,
}

/// Keep or delete.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Keep,
    Delete,
}

/// Counts for the `BackupRetention` event and for logs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanSummary {
    pub n_keep: usize,
    pub n_delete: usize,
    /// Deleted immutable backups: catalog record only.
    pub n_delete_record_only: usize,
    pub n_merges: usize,
    pub n_binlog_keep: usize,
    pub n_binlog_delete: usize,
    pub horizon: Option<DateTime<FixedOffset>>,
}

impl Plan {
    pub(crate) fn new(
        keep: Vec<Decision>,
        delete: Vec<Decision>,
        merges: Vec<Merge>,
        binlog: BinlogPlan,
        warnings: Vec<String>,
    ) -> Plan {
        Plan {
            keep,
            delete,
            merges,
            binlog,
            warnings,
            lookup: OnceLock::new(),
        }
    }

    /// The decision about backup `id`, if the catalog had it. The first call builds an index
    /// (one hash per backup, no string copies); later calls are a binary search.
    pub fn decision(&self, id: &str) -> Option<(Verdict, &Decision)> {
        let lookup = self.lookup.get_or_init(|| {
            let mut entries: Vec<(u64, u32)> =
                Vec::with_capacity(self.keep.len() + self.delete.len());
            for (position, decision) in self.keep.iter().enumerate() {
                entries.push((hash_id(&decision.id), position as u32));
            }
            for (position, decision) in self.delete.iter().enumerate() {
                entries.push((hash_id(&decision.id), position as u32 | DELETE_TAG));
            }
            entries.sort_unstable();
            entries
        });
        let hash = hash_id(id);
        let start = lookup.partition_point(|&(entry_hash, _)| entry_hash < hash);
        lookup[start..]
            .iter()
            .take_while(|&&(entry_hash, _)| entry_hash == hash)
            .find_map(|&(_, tagged)| {
                let (verdict, decision) = if tagged & DELETE_TAG != 0 {
                    (
                        Verdict::Delete,
                        &self.delete[(tagged & !DELETE_TAG) as usize],
                    )
                } else {
                    (Verdict::Keep, &self.keep[tagged as usize])
                };
                (decision.id == id).then_some((verdict, decision))
            })
    }

    /// Does this plan delete backup `id`? The deleter asks this of a plan recomputed from the
    /// current catalog before it touches anything.
    pub fn deletes(&self, id: &str) -> bool {
        matches!(self.decision(id), Some((Verdict::Delete, _)))
    }

    /// Does this plan keep backup `id`?
    pub fn keeps(&self, id: &str) -> bool {
        matches!(self.decision(id), Some((Verdict::Keep, _)))
    }

    pub fn summary(&self) -> PlanSummary {
        PlanSummary {
            n_keep: self.keep.len(),
            n_delete: self.delete.len(),
            n_delete_record_only: self.delete.iter().filter(|d| !d.remove_objects).count(),
            n_merges: self.merges.len(),
            n_binlog_keep: self.binlog.keep.len(),
            n_binlog_delete: self.binlog.delete.len(),
            horizon: self.binlog.horizon,
        }
    }
}

/// Marks a delete-list position in the lookup index. The engine refuses catalogs of 2^31
/// backups or more, so a position never has this bit.
const DELETE_TAG: u32 = 1 << 31;
