//! The engine's answer: which backups and binlog segments stay, which go, and why.
//!
//! [`Plan`] is the owned, serialisable form (issue 3's JSON output, previews, events). It is
//! rendered from an [`crate::Evaluation`], which holds the same decisions as indices into the
//! catalog; services that handle very large catalogs or only need one answer ("does this plan
//! delete backup X?") can use the evaluation and skip the rendering.
//!
//! A backup with volumes (issue 8) can also be *partial*: the record and the artifacts that a
//! kept backup still needs stay, its other artifacts go. Such backups are in `partial`, and
//! every decision on a backup with volumes says, per volume, what stays and what goes.

use std::sync::OnceLock;

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::catalog::{BackupKind, BackupStatus};
use crate::id_hash::hash_id;
use crate::reason::{Reason, Reasons};

/// Every backup of the catalog appears in exactly one of `keep`, `partial` and `delete`,
/// newest first. `partial` is only ever used for backups with volumes and is left out of the
/// JSON when empty, so a catalog without volumes gets issue 3's shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Plan {
    /// Kept whole: the record and every artifact stay.
    pub keep: Vec<Decision>,
    /// The record and the volumes in `volumes_keep` stay; the volumes in `volumes_delete` go.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partial: Vec<Decision>,
    /// Deleted whole: every artifact goes, then the record.
    pub delete: Vec<Decision>,
    /// Merge jobs for the executor (`chain_mode: merge`).
    #[serde(default)]
    pub merges: Vec<Merge>,
    /// Merge jobs on volume chains; left out of the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_merges: Vec<VolumeMerge>,
    pub binlog: BinlogPlan,
    /// Oddities that did not stop the plan (a parent missing from the catalog, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Built on the first lookup by id: (id hash, position, list).
    #[serde(skip)]
    lookup: OnceLock<Vec<(u64, u32, Verdict)>>,
}

impl PartialEq for Plan {
    fn eq(&self, other: &Plan) -> bool {
        self.keep == other.keep
            && self.partial == other.partial
            && self.delete == other.delete
            && self.merges == other.merges
            && self.volume_merges == other.volume_merges
            && self.binlog == other.binlog
            && self.warnings == other.warnings
    }
}

impl Eq for Plan {}

/// The decision about one backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub id: String,
    /// Why it stays or why it may go, most important first (serialised as their texts).
    pub reasons: Reasons,
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
    /// Backups with volumes only: the volumes that stay, each with its reasons (`kept with
    /// the backup`, `needed by <id>`, `merge into <id> pending`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes_keep: Vec<VolumeDecision>,
    /// Backups with volumes only: the volumes that go, with their object keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes_delete: Vec<VolumeDecision>,
}

/// The decision about one volume artifact of a backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct VolumeDecision {
    pub name: String,
    pub reasons: Vec<Reason>,
    /// The object keys to delete (on deleted volumes only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// False when the backup is immutable: drop the volume from the record, leave the objects
    /// to the bucket's lifecycle rules. Always true on kept volumes.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub remove_objects: bool,
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

/// A merge job on one volume's chain (`chain_mode: merge` with volumes): fold the artifacts of
/// `volume` in `sources` (backup ids, oldest first) into that volume's artifact in `target`.
/// Once the executor reports it done, the scheduler records `parent = new_parent` on that
/// volume of the target (and `kind: full` when `new_parent` is `None`); the next plan then
/// deletes the sources' artifacts of that volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct VolumeMerge {
    pub volume: String,
    /// The backup holding the full artifact the volume's chain starts from.
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
    /// Kept backups that are restorable to their own end only: the archive keeps their own
    /// range, not everything after them (standalone holds, `pitr_full`; issue 30).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub range_only: Vec<RangeOnly>,
}

/// A kept backup whose own range of the archive is kept, and no more.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeOnly {
    pub backup: String,
    pub reason: String,
    /// Segments before the horizon kept for it (they would go otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<String>,
}

/// Keep, delete, or (backups with volumes only) keep the record and some volumes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Keep,
    /// Some volumes go, the record and the volumes a kept backup needs stay.
    Partial,
    Delete,
}

/// Counts for the `BackupRetention` event and for logs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanSummary {
    pub n_keep: usize,
    /// Backups that lose some volumes and keep their record.
    #[serde(default)]
    pub n_partial: usize,
    pub n_delete: usize,
    /// Deleted immutable backups: catalog record only.
    pub n_delete_record_only: usize,
    pub n_merges: usize,
    /// Volume artifacts deleted, from partial and deleted backups.
    #[serde(default)]
    pub n_volumes_delete: usize,
    pub n_binlog_keep: usize,
    pub n_binlog_delete: usize,
    pub horizon: Option<DateTime<FixedOffset>>,
}

impl Plan {
    pub(crate) fn new(
        keep: Vec<Decision>,
        partial: Vec<Decision>,
        delete: Vec<Decision>,
        merges: Vec<Merge>,
        volume_merges: Vec<VolumeMerge>,
        binlog: BinlogPlan,
        warnings: Vec<String>,
    ) -> Plan {
        Plan {
            keep,
            partial,
            delete,
            merges,
            volume_merges,
            binlog,
            warnings,
            lookup: OnceLock::new(),
        }
    }

    /// The decision about backup `id`, if the catalog had it. The first call builds an index
    /// (one hash per backup, no string copies); later calls are a binary search.
    pub fn decision(&self, id: &str) -> Option<(Verdict, &Decision)> {
        let lookup = self.lookup.get_or_init(|| {
            let mut entries: Vec<(u64, u32, Verdict)> =
                Vec::with_capacity(self.keep.len() + self.partial.len() + self.delete.len());
            for (verdict, list) in [
                (Verdict::Keep, &self.keep),
                (Verdict::Partial, &self.partial),
                (Verdict::Delete, &self.delete),
            ] {
                for (position, decision) in list.iter().enumerate() {
                    entries.push((hash_id(&decision.id), position as u32, verdict));
                }
            }
            entries.sort_unstable();
            entries
        });
        let hash = hash_id(id);
        let start = lookup.partition_point(|&(entry_hash, _, _)| entry_hash < hash);
        lookup[start..]
            .iter()
            .take_while(|&&(entry_hash, _, _)| entry_hash == hash)
            .find_map(|&(_, position, verdict)| {
                let decision = &self.list(verdict)[position as usize];
                (decision.id == id).then_some((verdict, decision))
            })
    }

    fn list(&self, verdict: Verdict) -> &[Decision] {
        match verdict {
            Verdict::Keep => &self.keep,
            Verdict::Partial => &self.partial,
            Verdict::Delete => &self.delete,
        }
    }

    /// Does this plan delete backup `id`, record and all? The deleter asks this of a plan
    /// recomputed from the current catalog before it touches anything.
    pub fn deletes(&self, id: &str) -> bool {
        matches!(self.decision(id), Some((Verdict::Delete, _)))
    }

    /// Does this plan delete volume `volume` of backup `id` (the backup is deleted or partial
    /// and lists the volume in `volumes_delete`)? The deleter's re-check for a volume job.
    pub fn deletes_volume(&self, id: &str, volume: &str) -> bool {
        match self.decision(id) {
            Some((Verdict::Delete | Verdict::Partial, decision)) => decision
                .volumes_delete
                .iter()
                .any(|deleted| deleted.name == volume),
            _ => false,
        }
    }

    /// Does this plan keep backup `id`?
    pub fn keeps(&self, id: &str) -> bool {
        matches!(self.decision(id), Some((Verdict::Keep, _)))
    }

    pub fn summary(&self) -> PlanSummary {
        PlanSummary {
            n_keep: self.keep.len(),
            n_partial: self.partial.len(),
            n_delete: self.delete.len(),
            n_delete_record_only: self.delete.iter().filter(|d| !d.remove_objects).count(),
            n_merges: self.merges.len() + self.volume_merges.len(),
            n_volumes_delete: self
                .partial
                .iter()
                .chain(&self.delete)
                .map(|d| d.volumes_delete.len())
                .sum(),
            n_binlog_keep: self.binlog.keep.len(),
            n_binlog_delete: self.binlog.delete.len(),
            horizon: self.binlog.horizon,
        }
    }
}
