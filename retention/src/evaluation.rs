//! What an [`Evaluation`] answers: verdicts and lookups by index or id, and the decisions
//! rendered with their reasons ([`Reason`]), one at a time or as the owned [`Plan`].

use chrono::{DateTime, FixedOffset};

use crate::catalog::{BackupRecord, BackupStatus, Catalog};
use crate::engine::Evaluation;
use crate::flags::*;
use crate::gfs;
use crate::id_hash::hash_id;
use crate::plan::{
    BinlogPlan, Decision, Merge, Plan, PlanSummary, RangeOnly, Verdict, VolumeDecision, VolumeMerge,
};
use crate::policy::Policy;
use crate::reason::{Reason, Reasons};
use crate::volumes::VolumeDecisions;

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
    fn expiry_reasons(&self, bits: u32) -> Vec<Reason> {
        let mut reasons = Vec::new();
        push_expiry_reasons(bits, &mut reasons);
        reasons
    }

    /// The reasons for the decision on the backup at catalog index `index`, as text.
    pub fn reasons_at(&self, index: usize) -> Vec<String> {
        let mut reasons = Vec::new();
        self.reasons_into(index, &mut reasons);
        Reason::texts(&reasons)
    }

    /// The reasons for the decision on the backup at catalog index `index`, appended to
    /// `reasons`, most important first. Only reasons naming something (`needed by <id>`,
    /// `hold <why>`) allocate, so rendering a million decisions allocates for the few kept
    /// ones.
    pub fn reasons_into(&self, index: usize, reasons: &mut Vec<Reason>) {
        let bits = self.flags[index];
        let catalog: &'a Catalog = self.catalog;
        let backup = &catalog.backups[index];
        let policy: &'a Policy = self.policy;
        let id_of = |index: u32| catalog.backups[index as usize].id.clone();
        if bits & KEEP_ANY == 0 {
            push_expiry_reasons(bits, reasons);
            if bits & PARTIAL != 0 {
                self.push_volume_reasons(index, reasons);
            }
            return;
        }
        if bits & KEEP_LEGAL_HOLD != 0 {
            reasons.push(Reason::LegalHold);
        }
        if bits & KEEP_HOLD != 0 {
            reasons.extend(backup.holds.iter().map(|hold| Reason::Hold(hold.clone())));
        }
        if bits & KEEP_IN_PROGRESS != 0 {
            reasons.push(Reason::InProgress);
        }
        if bits & KEEP_FAILED_GRACE != 0 {
            reasons.push(Reason::FailedGrace(policy.failed_grace));
        }
        if bits & KEEP_FAILED_NO_TIME != 0 {
            reasons.push(Reason::FailedNoTime);
        }
        if bits & KEEP_GFS != 0 {
            let hit = &self.gfs_hits[self.gfs_hit_of[index] as usize];
            gfs::push_matches(hit, policy, reasons);
        }
        if bits & KEEP_RETENTION_DURATION != 0 {
            if let Some(days) = policy.retention_duration {
                reasons.push(Reason::RetentionDuration(days));
            }
        }
        if let Some(window) = policy.recovery_window {
            if bits & KEEP_WINDOW != 0 {
                reasons.push(Reason::RecoveryWindow(window));
            }
            if bits & KEEP_WINDOW_BASE != 0 {
                reasons.push(Reason::RecoveryWindowBase(window));
            }
        }
        if bits & KEEP_FLOOR != 0 {
            reasons.push(Reason::Floor {
                volumes: bits & FACT_VOLUMES != 0,
            });
        }
        if bits & KEEP_IMMUTABLE_CHAIN != 0 {
            for &(_, with) in pairs_of(&self.immutable_with, index) {
                reasons.push(Reason::ImmutableChain(id_of(with)));
            }
        }
        if bits & KEEP_VERIFIED != 0 {
            if let Some(count) = policy.keep_verified {
                reasons.push(Reason::KeepVerified(count));
            }
        }
        if bits & KEEP_FLOOR_VERIFIED != 0 {
            reasons.push(Reason::VerifiedFloor);
        }
        if bits & KEEP_FULL_CHAIN != 0 {
            // keep_full's chains, or keep_diff's: the anchor says which (issue 30).
            let differential = |i: usize| self.catalog.backups[i].differential;
            match (
                pairs_of(&self.full_chain_of, index).first(),
                policy.keep_diff,
            ) {
                (Some(&(_, anchor)), Some(count)) if differential(anchor as usize) => {
                    reasons.push(Reason::DiffChainMember {
                        count,
                        differential: id_of(anchor),
                    })
                }
                (None, Some(count)) if differential(index) => reasons.push(Reason::KeepDiff(count)),
                (Some(&(_, full)), _) => {
                    if let Some(count) = policy.keep_full {
                        reasons.push(Reason::FullChainMember {
                            count,
                            full: id_of(full),
                        })
                    }
                }
                (None, _) => {
                    if let Some(count) = policy.keep_full {
                        reasons.push(Reason::KeepFull(count))
                    }
                }
            }
        }
        if bits & KEEP_MIN_REDUNDANCY != 0 {
            if let Some(floor) = policy.minimum_redundancy {
                reasons.push(Reason::MinimumRedundancy(floor.get()));
            }
        }
        if bits & KEEP_MISSING != 0 {
            reasons.push(Reason::Missing);
        }
        if bits & KEEP_LOCKED != 0 {
            if let Some(until) = backup.locked_until {
                reasons.push(Reason::Locked {
                    until,
                    only: bits & KEEP_INDEPENDENT == KEEP_LOCKED,
                });
            }
        }
        if bits & KEEP_MERGE_SOURCE != 0 {
            for &(_, target) in pairs_of(&self.merge_target_of, index) {
                reasons.push(Reason::MergePending(id_of(target)));
            }
        }
        if bits & KEEP_NEEDED != 0 {
            for &(_, by) in pairs_of(&self.needed_by, index) {
                reasons.push(Reason::NeededBy(id_of(by)));
            }
        }
        if bits & KEEP_VOLUMES_NEEDED != 0 {
            self.push_volume_reasons(index, reasons);
        }
        if bits & FACT_DELETE_REQUESTED != 0 {
            reasons.push(Reason::DeleteDeferred);
        }
    }

    /// For a backup kept only for its volumes, or partial: `volume <name>: <reason>` for
    /// every reason of every kept volume.
    fn push_volume_reasons(&self, index: usize, reasons: &mut Vec<Reason>) {
        let Some(decisions) = &self.volumes else {
            return;
        };
        let backup = &self.catalog.backups[index];
        for (artifact, volume) in decisions.artifacts(index).zip(&backup.volumes) {
            if decisions.is_kept(artifact) {
                for reason in self.artifact_keep_reasons(decisions, artifact) {
                    reasons.push(Reason::Volume {
                        name: volume.name.clone(),
                        reason: Box::new(reason),
                    });
                }
            }
        }
    }

    /// Why a kept volume artifact stays.
    fn artifact_keep_reasons(&self, decisions: &VolumeDecisions, artifact: usize) -> Vec<Reason> {
        let bits = decisions.flags[artifact];
        let id_of = |index: u32| self.catalog.backups[index as usize].id.clone();
        let mut reasons = Vec::new();
        if bits & ART_BACKUP_KEPT != 0 {
            reasons.push(Reason::KeptWithBackup);
            return reasons;
        }
        if bits & KEEP_IMMUTABLE_CHAIN != 0 {
            for &(_, with) in pairs_of(&decisions.immutable_with, artifact) {
                reasons.push(Reason::ImmutableChain(id_of(with)));
            }
        }
        if bits & KEEP_MERGE_SOURCE != 0 {
            for &(_, target) in pairs_of(&decisions.merge_target_of, artifact) {
                reasons.push(Reason::MergePending(id_of(target)));
            }
        }
        if bits & KEEP_NEEDED != 0 {
            for &(_, by) in pairs_of(&decisions.needed_by, artifact) {
                reasons.push(Reason::NeededBy(id_of(by)));
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
                    reasons.insert(0, Reason::AlreadyExpiring);
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

    /// [`Evaluation::decision_at`], its reasons gathered in `scratch` (reused by the caller) so
    /// that the decision's own list is allocated once, at its length, and only for two reasons
    /// or more ([`Reasons`]).
    fn decision_with(&self, index: usize, scratch: &mut Vec<Reason>) -> Decision {
        scratch.clear();
        self.reasons_into(index, scratch);
        let reasons = Reasons::take_from(scratch);
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
    /// The lists are newest first; the catalog may be in any order. When it is (about) in time
    /// order, the decisions are rendered straight into their lists, reading the records in
    /// (about) the order they are stored. Otherwise, as for a catalog listed from a key-value
    /// bucket, in two passes (issue 17). The first renders the decisions in catalog order,
    /// reading the records and their ids' heap blocks in the order they were allocated (all
    /// allocation happens here), and appends each, with its newest-first position and
    /// verdict, to the bucket of `BUCKET` positions it falls in: a few hundred streams of
    /// sequential writes. The second takes the buckets in order, places each one's decisions
    /// in a cache-sized array by position and moves them to their lists. At a million
    /// shuffled backups, rendering newest first (records read at random, one miss at a time
    /// between two allocations) cost six to seven times the evaluation, writing each decision
    /// straight to its newest-first slot (which reads the slot first, to drop what was there)
    /// four and a half, and moving them from a catalog-order array (one miss a backup) three
    /// and a half.
    pub fn to_plan(&self) -> Plan {
        let mut counts = [0usize; 3];
        for index in 0..self.flags.len() {
            counts[self.verdict_at(index) as usize] += 1;
        }
        let mut lists = counts.map(Vec::with_capacity);
        let mut scratch = Vec::new();
        if self.in_time_order() {
            for &index in &self.order {
                let index = index as usize;
                let decision = self.decision_with(index, &mut scratch);
                lists[self.verdict_at(index) as usize].push(decision);
            }
        } else {
            let n = self.flags.len();
            let mut rank = vec![0u32; n];
            for (position, &index) in self.order.iter().enumerate() {
                rank[index as usize] = position as u32;
            }
            let mut buckets: Vec<Vec<(u32, Verdict, Decision)>> = (0..n.div_ceil(BUCKET))
                .map(|bucket| Vec::with_capacity(BUCKET.min(n - bucket * BUCKET)))
                .collect();
            for (index, &position) in rank.iter().enumerate() {
                let decision = self.decision_with(index, &mut scratch);
                let verdict = self.verdict_at(index);
                buckets[position as usize / BUCKET].push((position, verdict, decision));
            }
            drop(rank);
            let mut slots: Vec<Option<(Verdict, Decision)>> = std::iter::repeat_with(|| None)
                .take(BUCKET.min(n))
                .collect();
            for (bucket, decisions) in buckets.into_iter().enumerate() {
                let first = bucket * BUCKET;
                let len = decisions.len();
                for (position, verdict, decision) in decisions {
                    slots[position as usize - first] = Some((verdict, decision));
                }
                for slot in &mut slots[..len] {
                    let (verdict, decision) = slot.take().expect("every position holds a decision");
                    lists[verdict as usize].push(decision);
                }
            }
        }
        let [keep, partial, delete] = lists;
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

    /// Is the catalog stored (about) in time order, either way: do most backups lie within a
    /// few records of the next newer one? Then reading the records newest first reads them
    /// (about) in the order they are stored.
    fn in_time_order(&self) -> bool {
        const NEAR: u32 = 8;
        let near = self
            .order
            .windows(2)
            .filter(|pair| pair[0].abs_diff(pair[1]) <= NEAR)
            .count();
        near * 2 > self.order.len()
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
            range_only: self
                .range_only
                .iter()
                .map(|&(index, why)| {
                    let backup = &self.catalog.backups[index as usize];
                    let horizon = self.horizon();
                    RangeOnly {
                        backup: backup.id.clone(),
                        reason: why.text(),
                        segments: self
                            .binlog_keep
                            .iter()
                            .map(|&s| &segments[s as usize])
                            .filter(|segment| {
                                matches!(
                                    (horizon, segment.last_event),
                                    (Some(h), Some(last)) if last < h
                                ) && crate::binlog::own_range_needs(backup, segment)
                            })
                            .map(|segment| segment.key.clone())
                            .collect(),
                    }
                })
                .collect(),
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

/// Decisions per bucket in [`Evaluation::to_plan`]'s rendering of a shuffled catalog: about
/// half a MiB of them, placed in order within a processor's cache.
const BUCKET: usize = 4096;

/// Why a backup that no rule keeps may go: reasons that name nothing, never allocated.
fn push_expiry_reasons(bits: u32, reasons: &mut Vec<Reason>) {
    match status_of(bits) {
        BackupStatus::Failed => reasons.push(Reason::Failed),
        BackupStatus::Expiring => reasons.push(Reason::AlreadyExpiring),
        BackupStatus::Deleting => reasons.push(Reason::DeletionUnderWay),
        BackupStatus::DeleteFailed => reasons.push(Reason::RetryingDelete),
        BackupStatus::Missing => reasons.push(Reason::MissingDeleted),
        BackupStatus::Completed | BackupStatus::InProgress => {}
    }
    if bits & FACT_DELETE_REQUESTED != 0 {
        reasons.push(Reason::DeleteRequested);
    } else if status_of(bits) == BackupStatus::Completed {
        reasons.push(Reason::NoRule);
    }
    if bits & FACT_IMMUTABLE != 0 {
        reasons.push(Reason::RecordOnly);
    }
}

/// The entries of a sorted pair list whose first element is `index`.
fn pairs_of(pairs: &[(u32, u32)], index: usize) -> &[(u32, u32)] {
    let index = index as u32;
    let start = pairs.partition_point(|&(first, _)| first < index);
    let end = start + pairs[start..].partition_point(|&(first, _)| first == index);
    &pairs[start..end]
}
