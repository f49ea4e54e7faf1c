//! One retention run over the simulated fleet ([`Fleet::run_engine`]): the engine's plan,
//! carried out at once as the retention-worker, the deleter and a merging executor would, and
//! the day's sample read from it.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sexton_retention::{
    evaluate, BackupKind, BackupStatus, ChainMode, Evaluation, Merge, Plan, PlanError, Verdict,
    VolumeMerge,
};

use super::{retain_by, Fleet, Sample};
use crate::days::{is_locked_only, BinlogDay};
use crate::measures::{promised_window_start, worst_gap};

/// What one engine run did.
pub(super) struct RunOutcome {
    pub(super) n_deleted: usize,
    /// Restore points after the run.
    pub(super) count: usize,
    pub(super) sample: Option<Sample>,
}

/// The binlog plan of a run, carried out after the backups' (the collector runs after them).
struct BinlogRun {
    /// The segments the run deletes.
    delete: HashSet<String>,
    /// The bytes of one segment.
    segment_bytes: u64,
    /// Where point-in-time recovery starts (the horizon).
    pitr_from: Option<DateTime<Utc>>,
    /// Segments kept only for a backup's own range.
    own_range_segments: usize,
}

impl BinlogRun {
    fn planned(evaluation: &Evaluation<'_>, segment_bytes: u64) -> BinlogRun {
        let plan = evaluation.binlog_owned();
        let own_range_segments = plan.range_only.iter().map(|r| r.segments.len()).sum();
        BinlogRun {
            delete: plan.delete.into_iter().collect(),
            segment_bytes,
            pitr_from: evaluation.horizon().map(|h| h.with_timezone(&Utc)),
            own_range_segments,
        }
    }
}

/// The volumes partial verdicts delete: backup index, volume names.
type VolumeCuts = Vec<(usize, Vec<String>)>;

/// Each backup's verdict (by the evaluation's index), and the volumes a partial verdict
/// deletes.
fn verdicts(evaluation: &Evaluation<'_>, n: usize) -> (Vec<Verdict>, VolumeCuts) {
    let mut verdicts = Vec::with_capacity(n);
    let mut volume_cuts: VolumeCuts = Vec::new();
    for index in 0..n {
        let verdict = evaluation.verdict_at(index);
        if verdict == Verdict::Partial {
            let (_, deleted) = evaluation.volume_decisions_at(index);
            volume_cuts.push((index, deleted.into_iter().map(|v| v.name).collect()));
        }
        verdicts.push(verdict);
    }
    (verdicts, volume_cuts)
}

impl Fleet<'_> {
    /// One retention run at `now`: plan, then carry the plan out at once. With `sample`, the
    /// reasons of everything that stays are collected for the day's sample.
    pub(super) fn run_engine(
        &mut self,
        now: DateTime<Utc>,
        sample: bool,
    ) -> Result<RunOutcome, PlanError> {
        self.release_copied(now);
        self.close_segments(now);
        let evaluation = evaluate(&self.catalog, self.policy, now)?;
        // The binlog plan, carried out after the backups' (the collector runs after them).
        let binlog = self
            .scenario
            .binlog
            .map(|archive| BinlogRun::planned(&evaluation, archive.bytes.0));
        let (verdicts, volume_cuts) = verdicts(&evaluation, self.catalog.backups.len());
        let kept_reasons: Option<Vec<(usize, Vec<String>)>> = sample.then(|| {
            evaluation
                .newest_first()
                .filter(|&index| verdicts[index] != Verdict::Delete)
                .map(|index| (index, evaluation.reasons_at(index)))
                .collect()
        });
        let merging =
            self.policy.chain_mode == ChainMode::Merge && evaluation.summary().n_merges > 0;
        // The whole plan, rendered once, when merges or locks need it.
        let plan = (merging || self.scenario.lock.is_some()).then(|| evaluation.to_plan());
        let locks = self.lock_extensions(plan.as_ref(), now);
        let (merges, volume_merges) = match plan {
            Some(plan) if merging => (plan.merges, plan.volume_merges),
            _ => (Vec::new(), Vec::new()),
        };
        drop(evaluation);
        self.lock(&locks);
        self.cut_volumes(volume_cuts);
        self.carry_out_merges(&merges, &volume_merges);
        // The sample, read before the deleted entries go (indices are the evaluation's).
        let count = (0..verdicts.len())
            .filter(|&index| self.counts_as_restore_point(&verdicts, index))
            .count();
        let mut sample = kept_reasons.map(|kept| self.sample(kept, &verdicts, count, now));
        let n_deleted = self.delete(&verdicts, now);
        if let Some(binlog) = binlog {
            self.collect_binlog(binlog, sample.as_mut());
        }
        Ok(RunOutcome {
            n_deleted,
            count,
            sample,
        })
    }

    /// With Object Locks (issue 29): what the run keeps is locked, or its lock lengthened,
    /// as the retention-worker's run does before it marks anything; never shortened.
    fn lock_extensions(
        &self,
        plan: Option<&Plan>,
        now: DateTime<Utc>,
    ) -> HashMap<String, DateTime<Utc>> {
        let (Some(tiers), Some(plan)) = (&self.scenario.lock, plan) else {
            return HashMap::new();
        };
        let wanted = sexton_retention::lock::lock_dates(&self.catalog, plan, tiers);
        let current: HashMap<&str, Option<DateTime<Utc>>> = self
            .catalog
            .backups
            .iter()
            .map(|b| (b.id.as_str(), b.locked_until))
            .collect();
        sexton_retention::lock::extensions(&wanted, |id| current.get(id).copied().flatten(), now)
            .into_iter()
            .map(|(id, until)| (id.to_owned(), until))
            .collect()
    }

    /// Locks each backup of `locks` until its date.
    fn lock(&mut self, locks: &HashMap<String, DateTime<Utc>>) {
        if !locks.is_empty() {
            for backup in &mut self.catalog.backups {
                if let Some(until) = locks.get(&backup.id) {
                    backup.locked_until = Some(*until);
                }
            }
        }
    }

    /// A partial verdict drops the deleted volumes (`volume_cuts`: backup index, volume names)
    /// and the bytes they took.
    fn cut_volumes(&mut self, volume_cuts: VolumeCuts) {
        for (index, names) in volume_cuts {
            let record = &mut self.catalog.backups[index];
            let freed: u64 = record
                .volumes
                .iter()
                .filter(|volume| names.contains(&volume.name))
                .filter_map(|volume| volume.size_bytes)
                .sum();
            record
                .volumes
                .retain(|volume| !names.contains(&volume.name));
            self.sizes[index] = self.sizes[index].saturating_sub(freed);
        }
    }

    /// Whether the backup at `index` counts as a restore point after the run: kept whole, and
    /// completed.
    fn counts_as_restore_point(&self, verdicts: &[Verdict], index: usize) -> bool {
        verdicts[index] == Verdict::Keep
            && self.catalog.backups[index].status == BackupStatus::Completed
    }

    /// The day's sample at `now`: what the run keeps (`kept`: index and reasons, newest
    /// first), read before the deleted entries go.
    fn sample(
        &self,
        kept: Vec<(usize, Vec<String>)>,
        verdicts: &[Verdict],
        count: usize,
        now: DateTime<Utc>,
    ) -> Sample {
        let points: Vec<(&str, DateTime<Utc>)> = kept
            .iter()
            .filter(|&&(index, _)| self.counts_as_restore_point(verdicts, index))
            .map(|&(index, _)| {
                let backup = &self.backups[self.existing[index]];
                (backup.record.id.as_str(), backup.taken_at())
            })
            .collect();
        let window_start = promised_window_start(self.policy, now);
        let locked_only: Vec<usize> = kept
            .iter()
            .filter(|(_, reasons)| reasons.iter().any(|r| is_locked_only(r)))
            .map(|&(index, _)| index)
            .collect();
        Sample {
            at: Some(now),
            count,
            n_locked_only: locked_only.len(),
            locked_only_bytes: locked_only.iter().map(|&index| self.sizes[index]).sum(),
            n_partial: kept
                .iter()
                .filter(|&&(index, _)| verdicts[index] == Verdict::Partial)
                .count(),
            n_failed: kept
                .iter()
                .filter(|&&(index, _)| self.catalog.backups[index].status == BackupStatus::Failed)
                .count(),
            storage_bytes: kept.iter().map(|&(index, _)| self.sizes[index]).sum(),
            oldest_restorable: points.iter().map(|&(_, time)| time).min(),
            worst_gap: worst_gap(&points, window_start),
            binlog: None,
            backups: kept
                .into_iter()
                .map(|(index, reasons)| (self.existing[index], reasons))
                .collect(),
        }
    }

    /// What the plan deletes disappears; the rest keeps its order (what a catalog
    /// listing would give the next run). `retain` moves only what follows a deletion.
    /// Returns how many went.
    fn delete(&mut self, verdicts: &[Verdict], now: DateTime<Utc>) -> usize {
        let mut n_deleted = 0;
        for (index, verdict) in verdicts.iter().enumerate() {
            if *verdict == Verdict::Delete {
                self.backups[self.existing[index]].deleted_at = Some(now);
                n_deleted += 1;
            }
        }
        if n_deleted > 0 {
            retain_by(&mut self.catalog.backups, verdicts);
            retain_by(&mut self.existing, verdicts);
            retain_by(&mut self.sizes, verdicts);
        }
        n_deleted
    }

    /// The binlog collector after the backups: the planned segments go, and the sample (if
    /// any) says what is left.
    fn collect_binlog(&mut self, binlog: BinlogRun, sample: Option<&mut Sample>) {
        if !binlog.delete.is_empty() {
            self.catalog
                .binlog_segments
                .retain(|segment| !binlog.delete.contains(&segment.key));
        }
        if let Some(sample) = sample {
            let segments = self.catalog.binlog_segments.len();
            sample.binlog = Some(BinlogDay {
                segments,
                bytes: segments as u64 * binlog.segment_bytes,
                pitr_from: binlog.pitr_from,
                own_range_segments: binlog.own_range_segments,
            });
        }
    }

    /// The holds of the copies due by `now` go: the copy is made, the source's policy decides
    /// again (a `select: kept` rule's skipped copy ends its hold the same way).
    fn release_copied(&mut self, now: DateTime<Utc>) {
        if self.awaiting.iter().all(|(_, due, _)| *due > now) {
            return;
        }
        let (made, waiting) = std::mem::take(&mut self.awaiting)
            .into_iter()
            .partition(|(_, due, _)| *due <= now);
        self.awaiting = waiting;
        for (id, _, hold) in made {
            if let Some(backup) = self.catalog.backups.iter_mut().find(|b| b.id == id) {
                backup.holds.retain(|held| *held != hold);
            }
        }
    }

    /// What a merging executor does and the scheduler records (chain_mode merge): the target
    /// becomes a full (or builds on `new_parent`), the sources wait for the next run to go.
    fn carry_out_merges(&mut self, merges: &[Merge], volume_merges: &[VolumeMerge]) {
        if merges.is_empty() && volume_merges.is_empty() {
            return;
        }
        let position: HashMap<String, usize> = self
            .catalog
            .backups
            .iter()
            .enumerate()
            .map(|(index, backup)| (backup.id.clone(), index))
            .collect();
        let full_size = self.scenario.sizes.full.0;
        for merge in merges {
            let Some(&target) = position.get(&merge.target) else {
                continue;
            };
            let folded: u64 = merge
                .sources
                .iter()
                .filter_map(|source| position.get(source))
                .map(|&source| self.sizes[source])
                .sum();
            let record = &mut self.catalog.backups[target];
            record.parent = merge.new_parent.clone();
            if record.parent.is_none() {
                record.kind = BackupKind::Full;
                self.sizes[target] = full_size.max(self.sizes[target]);
            } else {
                self.sizes[target] += folded;
            }
            record.tags.push("synthetic-full".to_owned());
        }
        for merge in volume_merges {
            let Some(&target) = position.get(&merge.target) else {
                continue;
            };
            let folded: u64 = merge
                .sources
                .iter()
                .filter_map(|source| position.get(source))
                .filter_map(|&source| {
                    self.catalog.backups[source]
                        .volumes
                        .iter()
                        .find(|volume| volume.name == merge.volume)
                        .and_then(|volume| volume.size_bytes)
                })
                .sum();
            let record = &mut self.catalog.backups[target];
            let Some(volume) = record.volumes.iter_mut().find(|v| v.name == merge.volume) else {
                continue;
            };
            let before = volume.size_bytes.unwrap_or(0);
            volume.parent = merge.new_parent.clone();
            let after = if volume.parent.is_none() {
                volume.kind = BackupKind::Full;
                full_size.max(before)
            } else {
                before + folded
            };
            volume.size_bytes = Some(after);
            self.sizes[target] = self.sizes[target] - before + after;
            if record.volumes.iter().all(|v| v.kind == BackupKind::Full) {
                record.kind = BackupKind::Full;
            }
            record.tags.push(format!("synthetic-full:{}", merge.volume));
        }
    }
}
