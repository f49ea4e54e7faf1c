//! A run's work at the other locations (issue 28): each location's plan over the copies it
//! holds marks the copies it lets go `expiring` (compare-and-set on the revision planned on)
//! and publishes a copy delete job for each once the audit has the marks; the deleter
//! re-judges and deletes. Only whole copies go: a plan that would trim a copy's volumes keeps
//! the copy whole (the safe side; a copy is deleted as one). Merges and the binlog archive are
//! the primary's alone.

use sexton_model::{copies::CopyState, names::LocationName, records::BackupRecord};
use sexton_retention::Reason;
use sexton_shared::catalog::Versioned;

use super::publish::{Jobs, Mark};
use super::Worker;
use crate::group_plan::GroupPlan;

impl Worker {
    /// Carries out one location group's plan: the copies it deletes marked, their jobs
    /// published (again, for marks an earlier run made) once the audit has the marks.
    /// Returns the group's lock dates at its location (empty without locks there), for the
    /// binlog segments of the location's archive ([`Worker::lock_segments`]).
    pub(super) async fn run_location_group(
        &self,
        group: &GroupPlan,
    ) -> anyhow::Result<std::collections::HashMap<String, chrono::DateTime<chrono::Utc>>> {
        let cluster = &group.cluster;
        let Some(location) = &group.location else {
            return Ok(Default::default());
        };
        let Some(decision) = &group.run else {
            if let Some(reason) = &group.hold_reason {
                tracing::debug!(%cluster, plan = %group.plan, %location, reason, "copies kept");
            }
            return Ok(Default::default());
        };
        // Locks first, as at primary: a copy counts for deleting others there once locked.
        let locks = self.lock_planned(group, chrono::Utc::now()).await?;
        match &group.breaker {
            Some(breaker) if breaker.held => {
                self.envelope
                    .hold(
                        cluster,
                        &group.plan,
                        Some(location),
                        breaker,
                        group.policy_hash.as_deref().unwrap_or_default(),
                    )
                    .await;
                self.metrics
                    .runs
                    .with_label_values(&["copies", "held"])
                    .inc();
                return Ok(locks);
            }
            // Tripped, and a person's approval lets it through once: used up now.
            Some(breaker) => {
                self.envelope
                    .release(cluster, &group.plan, Some(location), breaker)
                    .await?
            }
            None => self.envelope.passed(cluster, &group.plan, Some(location)),
        }
        let policy_hash = group.policy_hash.clone().unwrap_or_default();
        let mut marked = Vec::new();
        let mut jobs = Jobs::default();
        for (index, delete) in &decision.delete {
            let status = group.members.engine.backups[*index].status;
            let writes = match status {
                sexton_retention::BackupStatus::Completed => true,
                sexton_retention::BackupStatus::Expiring => false,
                _ => continue,
            };
            let Some(record) = self.record_at(group, *index, writes).await? else {
                continue;
            };
            let reasons = Reason::texts(&delete.reasons);
            if let Some(mark) = self
                .expire_copy(&record, location, &reasons, &policy_hash, &mut jobs)
                .await?
            {
                self.metrics
                    .decisions
                    .with_label_values(&["delete", Reason::label_of_first(&delete.reasons)])
                    .inc();
                if mark.new {
                    let mut entry =
                        crate::safety::marked(&record.value, &reasons, &[], &policy_hash);
                    entry.revision = Some(mark.revision);
                    marked.push(entry);
                }
            }
        }
        self.envelope
            .record_copy_marks(
                cluster,
                &group.plan,
                location.as_str(),
                &policy_hash,
                marked,
            )
            .await;
        // The marks are in the audit before a deleter can claim them.
        self.publish_jobs(jobs).await?;
        Ok(locks)
    }

    /// Marks the copy of `record` at `location` expiring (if it is not already) and adds its
    /// delete job to `jobs`. The mark is named by the revision it was written over (the copy's
    /// `expiring_revision`): a later change of the record elsewhere (a mark at primary, a
    /// scrub) leaves the job valid. Returns the mark when a job is now on its way.
    async fn expire_copy(
        &self,
        record: &Versioned<BackupRecord>,
        location: &LocationName,
        reasons: &[String],
        policy_hash: &str,
        jobs: &mut Jobs,
    ) -> anyhow::Result<Option<Mark>> {
        let Some(copy) = record.value.copies.get(location) else {
            return Ok(None);
        };
        let mark = match copy.state {
            CopyState::Copied => {
                let mut marked = record.value.clone();
                marked.keep_mark(record.revision);
                let entry = marked
                    .copies
                    .get_mut(location)
                    .expect("the copy was just read");
                entry.state = CopyState::Expiring;
                entry.expiring_revision = Some(record.revision);
                entry.delete_reasons = reasons.to_vec();
                entry.delete_policy = Some(policy_hash.to_string());
                let written = self.catalog.update(&marked, record.revision).await;
                if self.written(written)?.is_none() {
                    return Ok(None);
                }
                tracing::info!(cluster = %record.value.cluster, plan = %record.value.plan, backup = %record.value.id, %location, reasons = ?reasons, policy = policy_hash, "copy marked expiring");
                // Named by the revision it was written over.
                Mark::new(record.revision)
            }
            // Marked by an earlier run whose job may have been lost: publish it again.
            CopyState::Expiring => match copy.expiring_revision {
                Some(revision) => Mark::again(revision),
                None => return Ok(None),
            },
            // A missing copy is never deleted by retention (the engine keeps it too).
            CopyState::Deleting | CopyState::Deleted | CopyState::Missing | CopyState::Skipped => {
                return Ok(None)
            }
        };
        jobs.copy_delete(&record.value, location, mark.revision, reasons);
        Ok(Some(mark))
    }
}
