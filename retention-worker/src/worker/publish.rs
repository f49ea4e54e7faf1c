//! What a run publishes, after the catalog says so: a backup's delete job once it is marked,
//! the `retention` event of a group, the merge jobs a plan asks for (`chain_mode: merge`) and
//! the cluster's binlog job. Each job's message id makes a second copy a no-op. Nothing here
//! decides what goes (the plan) or writes the catalog ([`super::marks`]); [`merge_job`] is the
//! pure part, a merge job built from the records as the catalog has them.

use std::collections::BTreeMap;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use sexton_model::{
    copies::CopyDeleteJob,
    names::{ClusterName, LocationName},
    records::{BackupRecord, BackupStatus},
    wire::{
        self, BackupRetention, DecisionSummary, DeleteJob, Incident, MergeBackup, MergeJob,
        Message, PartialSummary,
    },
};
use sexton_shared::{catalog::Versioned, channels, outcome::publish_incident, topology};

use super::Worker;
use crate::binlog::{self, BinlogInput, IndexState};
use crate::decisions::RunDecision;
use crate::group_plan::GroupPlan;

/// A delete job on its way for a mark at `revision`: made by this run (`new`), or by an
/// earlier run whose job may have been lost and is published again. Only a new mark goes in
/// the audit's `backups-marked` / `copies-marked` entry: the mark was audited when made, and a
/// run that published it again after a deleter claimed it would put the mark after the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    pub revision: u64,
    pub new: bool,
}

impl Mark {
    /// A mark this run wrote.
    pub fn new(revision: u64) -> Mark {
        Mark {
            revision,
            new: true,
        }
    }

    /// A mark an earlier run wrote, its job published again.
    pub fn again(revision: u64) -> Mark {
        Mark {
            revision,
            new: false,
        }
    }
}

/// The delete jobs a run's marks ask for, held until the run's audit entry says what it marked
/// and published then ([`Worker::publish_jobs`]): the audit has a mark before any deleter can
/// claim it (docs/safety.md). A run that fails before publishing leaves its marks in the
/// catalog; the next run publishes their jobs again, as for a lost job.
#[derive(Default)]
pub(super) struct Jobs(Vec<PendingJob>);

enum PendingJob {
    Delete(DeleteJob),
    CopyDelete(CopyDeleteJob),
}

impl PendingJob {
    /// `sexton_retention_jobs_published_total`'s label.
    fn kind(&self) -> &'static str {
        match self {
            PendingJob::Delete(job) if job.volumes.is_empty() => "backup",
            PendingJob::Delete(_) => "volumes",
            PendingJob::CopyDelete(_) => "copy",
        }
    }
}

impl Jobs {
    /// The delete job of `record`, marked expiring (whole, or the `volumes` named) at
    /// `revision`. Its message id names the record's uid and the revision of the mark, so a
    /// job published again for the same mark is a no-op.
    pub(super) fn delete(
        &mut self,
        record: &BackupRecord,
        revision: u64,
        reasons: &[String],
        volumes: &[String],
    ) {
        let job = DeleteJob {
            schema_version: wire::SCHEMA_VERSION,
            cluster: record.cluster.clone(),
            backup_id: record.id.clone(),
            uid: record.uid.clone(),
            revision,
            reasons: reasons.to_vec(),
            volumes: volumes.to_vec(),
        };
        self.0.push(PendingJob::Delete(job));
    }

    /// The delete job of the copy of `record` at `location`, marked at `mark` (the revision
    /// the mark was written over); the message id names the uid, the location and the mark.
    pub(super) fn copy_delete(
        &mut self,
        record: &BackupRecord,
        location: &LocationName,
        mark: u64,
        reasons: &[String],
    ) {
        let job = CopyDeleteJob {
            schema_version: wire::SCHEMA_VERSION,
            cluster: record.cluster.clone(),
            backup_id: record.id.clone(),
            uid: record.uid.clone(),
            location: location.clone(),
            revision: mark,
            reasons: reasons.to_vec(),
        };
        self.0.push(PendingJob::CopyDelete(job));
    }
}

impl Worker {
    /// Publishes the jobs a run held, in the order its marks were made.
    pub(super) async fn publish_jobs(&self, jobs: Jobs) -> anyhow::Result<()> {
        let jetstream = &self.topology.jetstream;
        for job in jobs.0 {
            match &job {
                PendingJob::Delete(delete) => {
                    channels::DELETE_JOBS
                        .publish_once(jetstream, delete, &channels::ids::delete_job(delete))
                        .await?
                }
                PendingJob::CopyDelete(delete) => {
                    channels::COPY_DELETE_JOBS
                        .publish_once(jetstream, delete, &channels::ids::copy_delete_job(delete))
                        .await?
                }
            };
            self.metrics
                .jobs_published
                .with_label_values(&[job.kind()])
                .inc();
        }
        Ok(())
    }

    /// The group's `retention` event, for operators, when this run marked something: what it
    /// keeps (the newest) and what it let go, whole or in part. A lost event is only logged.
    pub(super) async fn announce(
        &self,
        group: &GroupPlan,
        decision: &RunDecision,
        deleting: Vec<DecisionSummary>,
        trimming: Vec<PartialSummary>,
        now: DateTime<Utc>,
    ) {
        if deleting.is_empty() && trimming.is_empty() {
            return;
        }
        let cluster = &group.cluster;
        tracing::info!(
            %cluster,
            plan = %group.plan,
            kept = decision.n_keep,
            deleting = deleting.len(),
            partial = trimming.len(),
            "retention decided"
        );
        let event = BackupRetention {
            schema_version: wire::SCHEMA_VERSION,
            cluster: cluster.clone(),
            plan: group.plan.clone(),
            at: now,
            keep: decision.keep_newest.clone(),
            n_keep: Some(decision.n_keep),
            delete: deleting,
            partial: trimming,
        };
        let published = self
            .topology
            .jetstream
            .publish(
                topology::event_subject("retention", cluster.as_str()),
                wire::encode(&event),
            )
            .await;
        if let Err(err) = published {
            tracing::warn!(error = %err, "retention event not published");
        }
    }

    /// After the backups are marked: one binlog job for the cluster, if every group's plan
    /// gives a horizon and the index could be read.
    pub(super) async fn publish_binlog(
        &self,
        cluster: &ClusterName,
        groups: &[GroupPlan],
        binlog: &BinlogInput,
    ) -> anyhow::Result<()> {
        match &binlog.state {
            IndexState::Ok { .. } | IndexState::Missing => {}
            IndexState::Malformed { error } => {
                publish_incident(
                    &self.topology.jetstream,
                    Incident {
                        schema_version: wire::SCHEMA_VERSION,
                        service: "retention-worker".into(),
                        kind: "binlog-index-malformed".into(),
                        cluster: Some(cluster.to_string()),
                        backup_id: None,
                        subject: binlog.key.clone(),
                        reason: format!("{error}; binlog segments are kept until it is fixed"),
                        at: Utc::now(),
                    },
                )
                .await;
                return Ok(());
            }
            IndexState::Unavailable { error } => {
                tracing::warn!(%cluster, error, "binlog index not read; no binlog gc this run");
                return Ok(());
            }
        }
        let decision = match binlog::decide(groups) {
            Ok(decision) => decision,
            Err(why) => {
                tracing::debug!(%cluster, reason = %why, "no binlog gc");
                return Ok(());
            }
        };
        for (message_id, job) in binlog::jobs(cluster, &decision, binlog.etag()) {
            channels::BINLOG_JOBS
                .publish_once(&self.topology.jetstream, &job, &message_id)
                .await?;
            self.metrics
                .jobs_published
                .with_label_values(&["binlog"])
                .inc();
        }
        if !decision.delete.is_empty() {
            tracing::info!(%cluster, horizon = %decision.horizon, segments = decision.delete.len(), "binlog gc job published");
        }
        Ok(())
    }

    /// One merge job per merge the plan asks for (`chain_mode: merge`), for the executors:
    /// whole-backup merges and, on schedules with volumes, one job per volume chain.
    /// Nothing is deleted here: the plan keeps the sources (`merge into <target> pending`)
    /// until the scheduler has recorded the target (or the target's volume) as a synthetic
    /// full. The message id names the target's and the sources' uids (and the volume), so a
    /// re-run within the duplicate window publishes nothing new; after it, a job still pending
    /// is asked for again (merging is idempotent).
    pub(super) async fn publish_merges(
        &self,
        group: &GroupPlan,
        merges: &[sexton_retention::Merge],
        volume_merges: &[sexton_retention::VolumeMerge],
    ) -> anyhow::Result<()> {
        if merges.is_empty() && volume_merges.is_empty() {
            return Ok(());
        }
        // Merge jobs of this cluster still waiting (no executor has taken them yet): ask for
        // nothing more, so a fleet without a merging executor does not pile up a job per
        // merge per run in the work queue. What is still missing is asked for once they drain.
        let subject = channels::MERGE_JOBS.subject(&group.cluster);
        if let Some(count) = self.merge_jobs_waiting(&subject).await? {
            tracing::info!(cluster = %group.cluster, waiting = count, "merge jobs still waiting for an executor; none added");
            return Ok(());
        }
        // The records the merges name, whole (a job carries their uids and keys); one changed
        // since the plan is left out, and its merge is asked for by the next run, which plans
        // over the change.
        let mut fetched: Vec<Versioned<BackupRecord>> = Vec::new();
        let named: std::collections::BTreeSet<&str> = merges
            .iter()
            .map(|merge| (&merge.target, &merge.sources))
            .chain(
                volume_merges
                    .iter()
                    .map(|merge| (&merge.target, &merge.sources)),
            )
            .flat_map(|(target, sources)| sources.iter().chain([target]))
            .map(String::as_str)
            .collect();
        let indexes: Vec<usize> = (group.members.engine.backups.iter().enumerate())
            .filter(|(_, backup)| named.contains(backup.id.as_str()))
            .map(|(index, _)| index)
            .collect();
        for index in indexes {
            if let Some(record) = self.record_at(group, index, false).await? {
                fetched.push(record);
            }
        }
        let by_id: BTreeMap<&str, &Versioned<BackupRecord>> =
            fetched.iter().map(|r| (r.value.id.as_str(), r)).collect();
        let by_id = &by_id;
        let whole = merges
            .iter()
            .map(|merge| (None, &merge.target, &merge.sources));
        let volumes = volume_merges
            .iter()
            .map(|merge| (Some(merge.volume.as_str()), &merge.target, &merge.sources));
        for (volume, target, sources) in whole.chain(volumes) {
            let job = match merge_job(group, by_id, volume, target, sources) {
                Ok(job) => job,
                Err(why) => {
                    tracing::info!(cluster = %group.cluster, %target, volume, why, "merge not asked for");
                    continue;
                }
            };
            channels::MERGE_JOBS
                .publish_once(
                    &self.topology.jetstream,
                    &job,
                    &channels::ids::merge_job(&job),
                )
                .await?;
            tracing::info!(cluster = %group.cluster, %target, volume, ?sources, "merge job published");
        }
        Ok(())
    }

    /// How many merge jobs on `subject` no executor has taken yet, if any.
    async fn merge_jobs_waiting(&self, subject: &str) -> anyhow::Result<Option<usize>> {
        let mut waiting = self
            .topology
            .jetstream
            .get_stream(topology::STREAM_JOBS)
            .await
            .context("opening the jobs stream")?
            .info_with_subjects(subject)
            .await
            .context("counting waiting merge jobs")?;
        while let Some((_, count)) = waiting
            .try_next()
            .await
            .context("counting waiting merge jobs")?
        {
            if count > 0 {
                return Ok(Some(count));
            }
        }
        Ok(None)
    }
}

/// The merge job for `target` and `sources` (backup ids, oldest first) as the catalog has them
/// now: of the whole backups, or of one volume's artifacts. `Err` says why none is asked for:
/// a backup gone, not settled, or (for a volume) without that volume's artifact, or a chain
/// that no longer holds together.
fn merge_job(
    group: &GroupPlan,
    by_id: &BTreeMap<&str, &Versioned<BackupRecord>>,
    volume: Option<&str>,
    target: &str,
    sources: &[String],
) -> Result<MergeJob, String> {
    let mut backups = Vec::with_capacity(sources.len() + 1);
    for id in sources.iter().map(String::as_str).chain([target]) {
        let Some(record) = by_id.get(id) else {
            return Err(format!("backup {id} is gone"));
        };
        let record = &record.value;
        if record.status != BackupStatus::Completed {
            return Err(format!("backup {id} is {:?}", record.status));
        }
        let (parent, artifacts) = match volume {
            // Only whole backups without volumes are merged whole.
            None if record.volumes.is_empty() => (record.parent.clone(), record.artifacts.clone()),
            None => return Err(format!("backup {id} has volumes")),
            Some(name) => {
                let Some(artifact) = record.volumes.iter().find(|v| v.name == name) else {
                    return Err(format!("backup {id} has no volume {name}"));
                };
                if artifact.expiring || artifact.keys.is_empty() {
                    return Err(format!("volume {name} of backup {id} is being deleted"));
                }
                let parent = match &artifact.parent {
                    None => None,
                    Some(parent) => Some(parent.parse().map_err(|e| format!("{e}"))?),
                };
                (parent, artifact.keys.clone())
            }
        };
        backups.push(MergeBackup {
            id: record.id.clone(),
            uid: record.uid.clone(),
            backup_name: record.backup_name.clone(),
            parent,
            artifacts,
        });
    }
    let target = backups.pop().expect("the target was pushed last");
    let job = MergeJob {
        schema_version: wire::SCHEMA_VERSION,
        cluster: group.cluster.clone(),
        plan: group.plan.clone(),
        target,
        sources: backups,
        volume: volume.map(str::to_owned),
    };
    job.validate()?;
    Ok(job)
}
