//! Step 6 of a batch, its last: each claimed backup's record removed (or kept for its copies
//! elsewhere, or its volumes taken off it), or the failure recorded on it, with its outcome.

use std::time::{Duration, Instant};

use chrono::Utc;
use futures::StreamExt;
use sexton_model::records::{BackupRecord, BackupStatus};
use sexton_shared::{
    catalog::CasError,
    outcome::{publish_incident, Outcome},
};

use super::{incident, Slots, Work, WRITES_IN_FLIGHT};
use crate::{
    context::Deleter,
    job,
    trail::{self, BatchTrail},
};

impl Deleter {
    /// Step 6: each work's end ([`Deleter::finish`]), [`WRITES_IN_FLIGHT`] at a time, its
    /// outcome settled and, where its record went, the audit told.
    pub(super) async fn finish_all(
        &self,
        works: Vec<Work>,
        started: Instant,
        slots: &mut Slots,
        batch_trail: &mut BatchTrail,
    ) {
        let delivered = &slots.delivered;
        let finishing: Vec<_> = works
            .into_iter()
            .map(|work| async move {
                let slot = work.slot;
                let removed = (
                    work.record.cluster.clone(),
                    trail::backup(&work.record, work.revision, &work.volumes, &[]),
                );
                let (outcome, done) = self.finish(work, started, delivered[slot]).await;
                (slot, outcome, done.then_some(removed))
            })
            .collect();
        let finished: Vec<(usize, Outcome, Option<_>)> = futures::stream::iter(finishing)
            .buffer_unordered(WRITES_IN_FLIGHT)
            .collect()
            .await;
        for (slot, outcome, removed) in finished {
            slots.settle(slot, outcome);
            if let Some((cluster, backup)) = removed {
                batch_trail.record_removed(&cluster, backup);
            }
        }
    }

    /// The end of one work: the record removed (or the failure recorded). The flag says whether
    /// the backup (or the named volumes) is gone from the catalog.
    #[tracing::instrument(skip_all, fields(cluster = %work.record.cluster, backup = %work.record.id))]
    async fn finish(&self, work: Work, started: Instant, delivered: i64) -> (Outcome, bool) {
        if let Some(outcome) = work.outcome {
            return (outcome, false);
        }
        if !work.volumes.is_empty() {
            return self.finish_volumes(work, delivered).await;
        }
        if let Some(failure) = &work.failure {
            if failure.permanent {
                let remaining = job::remaining(&work.keys, &work.gone);
                let reason = format!("object store refused: {failure}");
                let outcome = match self
                    .fail(&work.record, work.revision, &reason, remaining, "permanent")
                    .await
                {
                    Ok(true) => Outcome::Done,
                    Ok(false) => Outcome::RetryAfter(Duration::from_secs(1)),
                    Err(err) => {
                        tracing::warn!(backup = %work.record.id, error = format!("{err:#}"), "cannot record a failed deletion; will retry");
                        Outcome::RetryAfter(job::retry_delay(delivered))
                    }
                };
                return (outcome, false);
            }
            tracing::warn!(backup = %work.record.id, error = %failure, "transient object store failure; will retry");
            // Best effort: show the error on the record while the job is retried, so that a
            // job that runs out of deliveries is recorded with it.
            let mut record = work.record.clone();
            record.last_error = Some(failure.to_string());
            let _ = self.catalog().update(&record, work.revision).await;
            return (Outcome::RetryAfter(job::retry_delay(delivered)), false);
        }
        // Copies of it stay at other locations (issue 28): the record stays for them, gone
        // from primary, until the last location's retention deletes its copy.
        let removed = if work.record.held_elsewhere() {
            let mut kept = work.record.clone();
            kept.primary_deleted_at = Some(Utc::now());
            self.catalog()
                .update(&kept, work.revision)
                .await
                .map(|_| ())
        } else {
            self.catalog()
                .remove(&work.record.cluster, &work.record.id, work.revision)
                .await
        };
        let outcome = match removed {
            Ok(()) => {
                self.metrics().backups_deleted.inc();
                if let Some(bytes) = work.record.size_bytes {
                    self.metrics().bytes_deleted.inc_by(bytes);
                }
                self.metrics()
                    .delete_duration
                    .observe(started.elapsed().as_secs_f64());
                tracing::info!(cluster = %work.record.cluster, plan = %work.record.plan, backup = %work.record.id, objects = work.gone.len(), reasons = ?work.record.delete_reasons, policy = work.record.delete_policy.as_deref().unwrap_or("none"), kept_for_copies = work.record.held_elsewhere(), "backup deleted");
                // A record kept for its copies is not removed: the audit says so only when
                // it is.
                return (Outcome::Done, !work.record.held_elsewhere());
            }
            // Changed under us (another deleter finished it, or recorded something): the next
            // delivery finds it gone or resumes.
            Err(CasError::Conflict) => Outcome::RetryAfter(Duration::from_secs(1)),
            Err(CasError::Other(err)) => {
                tracing::warn!(backup = %work.record.id, error = format!("{err:#}"), "cannot remove the record; will retry");
                Outcome::RetryAfter(job::retry_delay(delivered))
            }
        };
        (outcome, false)
    }

    /// The end of a partial deletion: the named volumes leave the record (and their keys its
    /// artifacts), the claim is cleared, the record stays. A permanent object-store refusal is
    /// recorded on the backup (`last_error`, the claim kept so a redelivery resumes) and told
    /// to operators; a transient one is retried.
    async fn finish_volumes(&self, work: Work, delivered: i64) -> (Outcome, bool) {
        let mut record = work.record.clone();
        if let Some(failure) = &work.failure {
            let permanent = failure.permanent;
            let remaining = job::remaining(&work.keys, &work.gone);
            record.last_error = Some(format!(
                "deleting volumes {}: {failure}; objects left: {}",
                work.volumes.join(", "),
                remaining.join(", ")
            ));
            let _ = self.catalog().update(&record, work.revision).await;
            if permanent {
                self.metrics()
                    .delete_failures
                    .with_label_values(&["permanent"])
                    .inc();
                publish_incident(
                    &self.topology().jetstream,
                    incident(
                        &record,
                        "delete-failed",
                        record.last_error.clone().unwrap_or_default(),
                    ),
                )
                .await;
                return (Outcome::Done, false);
            }
            return (Outcome::RetryAfter(job::retry_delay(delivered)), false);
        }
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut record.volumes)
            .into_iter()
            .partition(|v| work.volumes.contains(&v.name));
        record.volumes = kept;
        // What the executor said each volume holds leaves the backup's size with it.
        let bytes_gone: u64 = gone.iter().filter_map(|v| v.size_bytes).sum();
        record.size_bytes = record
            .size_bytes
            .map(|size| size.saturating_sub(bytes_gone));
        record.artifacts.retain(|key| !work.keys.contains(key));
        record.volume_deletion = None;
        record.delete_reasons.clear();
        record.delete_policy = None;
        match self.catalog().update(&record, work.revision).await {
            Ok(_) => {
                self.metrics().bytes_deleted.inc_by(bytes_gone);
                tracing::info!(cluster = %record.cluster, backup = %record.id, volumes = ?work.volumes, remaining = record.volumes.len(), reasons = ?work.record.delete_reasons, policy = work.record.delete_policy.as_deref().unwrap_or("none"), "volumes deleted; backup kept");
                (Outcome::Done, true)
            }
            Err(CasError::Conflict) => (Outcome::RetryAfter(Duration::from_secs(1)), false),
            Err(CasError::Other(err)) => {
                tracing::warn!(backup = %record.id, error = format!("{err:#}"), "cannot update the record; will retry");
                (Outcome::RetryAfter(job::retry_delay(delivered)), false)
            }
        }
    }

    /// A deletion that cannot finish: the backup becomes `delete-failed` with the reason, its
    /// record lists the objects that remain, and operators are told (incident, metric).
    /// Returns false when the record changed under us (nothing recorded; judge again).
    pub async fn fail(
        &self,
        record: &BackupRecord,
        revision: u64,
        reason: &str,
        remaining: Vec<String>,
        kind: &'static str,
    ) -> anyhow::Result<bool> {
        let mut failed = record.clone();
        failed.status = BackupStatus::DeleteFailed;
        failed.last_error = Some(reason.to_string());
        failed.artifacts = remaining;
        // A user's request is done with; asking again retries (the retention-worker re-marks).
        failed.delete_request = None;
        failed.delete_requested = false;
        match self.catalog().update(&failed, revision).await {
            Ok(_) => {}
            Err(CasError::Conflict) => return Ok(false),
            Err(CasError::Other(err)) => return Err(err),
        }
        self.metrics()
            .delete_failures
            .with_label_values(&[kind])
            .inc();
        publish_incident(
            &self.topology().jetstream,
            incident(&failed, "delete-failed", reason.to_string()),
        )
        .await;
        Ok(true)
    }
}
