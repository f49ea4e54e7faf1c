//! The deleter's pipeline, one batch of delete jobs at a time:
//!
//! 1. decode every job; judge each against a fresh view of its cluster's catalog and the
//!    plan made now ([`job::verify_all`]); a refused job deletes nothing (and a backup that the
//!    plan now keeps loses its `expiring` mark);
//! 2. claim each backup with a compare-and-set to `deleting` (a lost race is a retry, which
//!    then finds the work done or resumes it);
//! 3. call the delete plugins that apply, in name order; failures are recorded, never fatal;
//! 4. delete the data objects of all claimed backups together, in shared `DeleteObjects`
//!    requests of up to 1000 keys, checking the per-key errors of every 200 answer;
//! 5. then the `metadata.json` objects of the backups whose data is all gone;
//! 6. then their catalog records.
//!
//! Every step is idempotent, so a crash anywhere leaves records in `deleting` that the next
//! delivery of the same job finishes. A permanent failure (Object Lock, legal hold, a bucket
//! that is gone) stops that backup where it is: its `metadata.json` stays, its record becomes
//! `delete-failed` with the reason and lists exactly the objects that remain. A transient one
//! is retried with a growing delay. Each job ends in one [`Outcome`], settled by the caller.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
    time::{Duration, Instant},
};

use async_nats::jetstream;
use chrono::Utc;
use futures::StreamExt;
use sexton_model::{
    names::ClusterName,
    records::{BackupRecord, BackupStatus, VolumeDeletion},
    wire::{self, DeleteJob, Incident},
};
use sexton_shared::{
    catalog::{CasError, Versioned},
    channels,
    object_store::{ObjectError, Requests, DELETE_BATCH},
    outcome::{publish_incident, Outcome},
    planning,
};

use crate::{
    context::{Deleter, REQUESTS_IN_FLIGHT},
    job::{self, ClusterView, Verdict},
    trail::{self, BatchTrail},
};

mod record;

/// The fewest keys worth a request of their own when a batch's keys are spread over
/// [`REQUESTS_IN_FLIGHT`] requests.
const MIN_KEYS_PER_REQUEST: usize = 100;
/// Catalog writes a batch keeps in flight.
const WRITES_IN_FLIGHT: usize = 64;

/// A job the catalog lets go, with the record it was judged on: its slot in the batch, the
/// job, the record to claim.
type Claim = (usize, DeleteJob, Versioned<BackupRecord>);

/// A batch's messages by slot: how often each was delivered, and its outcome once known.
struct Slots {
    delivered: Vec<i64>,
    outcomes: Vec<Option<Outcome>>,
}

impl Slots {
    fn new(messages: &[jetstream::Message]) -> Slots {
        Slots {
            delivered: messages
                .iter()
                .map(|m| m.info().map_or(1, |info| info.delivered))
                .collect(),
            outcomes: vec![None; messages.len()],
        }
    }

    /// A job to try again, later the more often it was delivered.
    fn retry(&self, slot: usize) -> Outcome {
        Outcome::RetryAfter(job::retry_delay(self.delivered[slot]))
    }

    fn settle(&mut self, slot: usize, outcome: Outcome) {
        self.outcomes[slot] = Some(outcome);
    }

    /// One outcome per message, in order: a job nothing settled is tried again.
    fn into_outcomes(self) -> Vec<Outcome> {
        let Slots {
            delivered,
            outcomes,
        } = self;
        outcomes
            .into_iter()
            .enumerate()
            .map(|(slot, outcome)| {
                outcome.unwrap_or_else(|| Outcome::RetryAfter(job::retry_delay(delivered[slot])))
            })
            .collect()
    }
}

/// Decodes every message, each job under its cluster; a message that does not decode is
/// poison.
fn decode(
    messages: &[jetstream::Message],
    slots: &mut Slots,
) -> BTreeMap<ClusterName, Vec<(usize, DeleteJob)>> {
    let mut by_cluster: BTreeMap<ClusterName, Vec<(usize, DeleteJob)>> = BTreeMap::new();
    for (slot, message) in messages.iter().enumerate() {
        match channels::DELETE_JOBS.receive(message) {
            Err(why) => slots.settle(slot, Outcome::Poison(why)),
            Ok(job) => by_cluster
                .entry(job.cluster.clone())
                .or_default()
                .push((slot, job)),
        }
    }
    by_cluster
}

/// The objects each work's deletions took away, for the audit.
fn objects_deleted(works: &[Work], batch_trail: &mut BatchTrail) {
    for work in works {
        let gone = trail::gone_keys(&work.keys, &work.gone);
        if !gone.is_empty() {
            batch_trail.objects_deleted(
                &work.record.cluster,
                trail::backup(&work.record, work.revision, &work.volumes, &gone),
            );
        }
    }
}

/// A claimed backup on its way out.
struct Work {
    /// Index of its message in the batch.
    slot: usize,
    record: BackupRecord,
    /// The record's revision after our last write.
    revision: u64,
    /// Empty: the whole backup goes. Otherwise a partial deletion of these volumes.
    volumes: Vec<String>,
    /// The objects to delete: every object of the backup, or the named volumes' keys.
    keys: Vec<String>,
    remove_objects: bool,
    /// Keys confirmed deleted.
    gone: HashSet<String>,
    failure: Option<ObjectError>,
    /// Set when the work stops early (a lost compare-and-set, a catalog error).
    outcome: Option<Outcome>,
}

impl Work {
    fn note_failure(&mut self, error: ObjectError) {
        let worse = match &self.failure {
            None => true,
            Some(current) => error.permanent && !current.permanent,
        };
        if worse {
            self.failure = Some(error);
        }
    }

    fn active(&self) -> bool {
        self.outcome.is_none() && self.failure.is_none()
    }
}

impl Deleter {
    /// Works through one batch and returns one outcome per message, in order.
    #[tracing::instrument(skip_all, fields(
        jobs = messages.len(),
        sequences = ?messages.iter().map(sexton_shared::telemetry::stream_sequence).collect::<Vec<_>>(),
    ))]
    pub async fn run_batch(&self, messages: &[jetstream::Message]) -> Vec<Outcome> {
        self.metrics().batch_jobs.observe(messages.len() as f64);
        let now = Utc::now();
        let started = Instant::now();
        let mut slots = Slots::new(messages);

        // 1. Decode, and judge each cluster's jobs against its catalog.
        let by_cluster = decode(messages, &mut slots);
        let (claims, mut works) = self.judge_batch(by_cluster, now, &mut slots).await;
        let t_judge = started.elapsed();
        // 2. Claim.
        works.extend(self.claim_all(claims, &mut slots).await);
        self.audit_claims(&mut works).await;
        let t_claim = started.elapsed();
        let mut batch_trail = BatchTrail::default();
        // 3. Plugins.
        self.run_plugins(&mut works, &mut batch_trail).await;
        let t_plugins = started.elapsed();

        // 4, 5. Data objects, then metadata objects.
        self.delete_objects(&mut works, false).await;
        self.delete_objects(&mut works, true).await;
        let t_delete = started.elapsed();
        objects_deleted(&works, &mut batch_trail);

        // 6. Records, or the failure recorded.
        self.finish_all(works, started, &mut slots, &mut batch_trail)
            .await;
        batch_trail.publish(self.audit()).await;
        let outcomes = slots.into_outcomes();
        let ms = |d: Duration| d.as_millis() as u64;
        tracing::info!(
            jobs = outcomes.len(),
            done = outcomes.iter().filter(|o| **o == Outcome::Done).count(),
            judged_ms = ms(t_judge),
            claimed_ms = ms(t_claim),
            plugins_ms = ms(t_plugins),
            objects_ms = ms(t_delete),
            elapsed_ms = ms(started.elapsed()),
            "delete batch finished"
        );
        outcomes
    }

    /// Step 1: the verdicts on every cluster's jobs, read with one view of the schedules. A job
    /// to claim comes back as a [`Claim`], one to resume as a [`Work`]; every other job gets
    /// its outcome in `slots` (done, refused, or retried when its catalog cannot be read).
    async fn judge_batch(
        &self,
        by_cluster: BTreeMap<ClusterName, Vec<(usize, DeleteJob)>>,
        now: chrono::DateTime<Utc>,
        slots: &mut Slots,
    ) -> (Vec<Claim>, Vec<Work>) {
        let mut claims: Vec<Claim> = Vec::new();
        let mut works: Vec<Work> = Vec::new();
        // One read of the schedules for the whole batch, before any catalog read.
        let schedules = if by_cluster.is_empty() {
            Ok(Arc::default())
        } else {
            self.schedules().all().await
        };
        for (cluster, jobs) in by_cluster {
            let judged = match &schedules {
                Ok(schedules) => self.judge(&cluster, schedules, &jobs, now).await,
                Err(err) => Err(anyhow::anyhow!("{err:#}")),
            };
            let judged = match judged {
                Ok(judged) => judged,
                Err(err) => {
                    tracing::warn!(%cluster, error = format!("{err:#}"), "cannot read the catalog; will retry");
                    for (slot, _) in &jobs {
                        slots.settle(*slot, slots.retry(*slot));
                    }
                    continue;
                }
            };
            for ((slot, job), (verdict, current)) in jobs.into_iter().zip(judged) {
                match (verdict, current) {
                    (Verdict::AlreadyDone, _) => slots.settle(slot, Outcome::Done),
                    (Verdict::Superseded(why), _) => {
                        tracing::info!(%cluster, backup = %job.backup_id, volumes = ?job.volumes, why, "partial deletion superseded");
                        slots.settle(slot, Outcome::Done);
                    }
                    (Verdict::Refuse(refusal), current) => {
                        if let (true, Some(current)) = (refusal.unmark, current) {
                            self.unmark(&current).await;
                        }
                        slots.settle(slot, Outcome::Poison(refusal.reason));
                    }
                    (Verdict::Claim, Some(current)) => claims.push((slot, job, current)),
                    (Verdict::Resume, Some(current)) => {
                        works.push(Work::new(slot, current, job.volumes))
                    }
                    (Verdict::Lagging, _) | (_, None) => slots.settle(slot, slots.retry(slot)),
                }
            }
        }
        (claims, works)
    }

    /// Step 2: every claim made, [`WRITES_IN_FLIGHT`] at a time; the backups claimed become
    /// work, a claim lost or failed settles its job.
    async fn claim_all(&self, claims: Vec<Claim>, slots: &mut Slots) -> Vec<Work> {
        let claiming: Vec<_> = claims
            .into_iter()
            .map(|(slot, job, current)| async move {
                let claimed = self.claim(&job, current).await;
                (slot, claimed.map(|current| (current, job.volumes)))
            })
            .collect();
        #[allow(clippy::type_complexity)]
        let claimed: Vec<(
            usize,
            Result<(Versioned<BackupRecord>, Vec<String>), Option<Outcome>>,
        )> = futures::stream::iter(claiming)
            .buffer_unordered(WRITES_IN_FLIGHT)
            .collect()
            .await;
        let mut works = Vec::new();
        for (slot, result) in claimed {
            match result {
                Ok((current, volumes)) => works.push(Work::new(slot, current, volumes)),
                Err(stop) => {
                    let outcome = stop.unwrap_or_else(|| slots.retry(slot));
                    slots.settle(slot, outcome);
                }
            }
        }
        works
    }

    /// The audit says what is about to go before any of it goes; without it, nothing goes
    /// (the records stay `deleting`, and the next delivery resumes).
    async fn audit_claims(&self, works: &mut [Work]) {
        let claims: Vec<_> = works
            .iter()
            .filter(|w| w.active())
            .map(|w| {
                (
                    w.record.cluster.clone(),
                    trail::backup(&w.record, w.revision, &w.volumes, &[]),
                )
            })
            .collect();
        if let Err(err) = trail::claimed(self.audit(), claims).await {
            tracing::warn!(error = %err, "claims not audited; the batch waits");
            for work in works.iter_mut().filter(|w| w.outcome.is_none()) {
                work.outcome = Some(Outcome::RetryAfter(Duration::from_secs(5)));
            }
        }
    }

    /// The verdicts on one cluster's jobs, with the records they were judged on.
    async fn judge(
        &self,
        cluster: &ClusterName,
        schedules: &[sexton_model::records::ScheduleRecord],
        jobs: &[(usize, DeleteJob)],
        now: chrono::DateTime<Utc>,
    ) -> anyhow::Result<Vec<(Verdict, Option<Versioned<BackupRecord>>)>> {
        let schedules: Vec<_> = schedules
            .iter()
            .filter(|s| s.cluster == *cluster)
            .cloned()
            .collect();
        let policies = planning::group_policies(&schedules);
        // Judged only on a view holding every job's own mark (a revision already stored).
        // A job whose revision the view has not applied is checked with the leader: a
        // revision past the backup's latest entry was never a revision of that backup (a
        // forged or corrupted job), refused at once; otherwise the view lags (a replica behind
        // its leader answered the catch-up) and the job waits for the next delivery, while
        // the rest of the batch is judged now (issue 26).
        let views = self.views();
        let cache = views.current(cluster).await?;
        let applied = cache.applied();
        let mut held_back: Vec<Option<Verdict>> = Vec::with_capacity(jobs.len());
        for (_, job) in jobs {
            if job.revision <= applied {
                held_back.push(None);
                continue;
            }
            let latest = views.latest_revision(cluster, &job.backup_id).await?;
            held_back.push(Some(match job::never_stored(job.revision, latest) {
                Some(refusal) => Verdict::Refuse(refusal),
                None => {
                    tracing::info!(%cluster, backup = %job.backup_id, revision = job.revision, applied, "the catalog view is behind the job's mark; it waits for the next delivery");
                    Verdict::Lagging
                }
            }));
        }
        let refs: Vec<&DeleteJob> = jobs
            .iter()
            .zip(&held_back)
            .filter(|(_, held)| held.is_none())
            .map(|((_, job), _)| job)
            .collect();
        let view = ClusterView {
            records: &cache.records,
            policies: &policies,
        };
        let mut verdicts = job::verify_all(&refs, &view, self.prefix(), now).into_iter();
        Ok(jobs
            .iter()
            .zip(held_back)
            .map(|((_, job), held)| match held {
                Some(verdict) => (verdict, None),
                None => (
                    verdicts.next().expect("one verdict per job judged"),
                    cache.records.get(&job.backup_id).cloned(),
                ),
            })
            .collect())
    }

    /// Compare-and-set to `deleting`. `Err(Some(outcome))` when the job must stop with it,
    /// `Err(None)` for a transient failure.
    async fn claim(
        &self,
        job: &DeleteJob,
        current: Versioned<BackupRecord>,
    ) -> Result<Versioned<BackupRecord>, Option<Outcome>> {
        let mut claimed = current.value;
        if job.volumes.is_empty() {
            claimed.status = BackupStatus::Deleting;
            claimed.expiring_revision = Some(job.revision);
        } else {
            // The record stays `completed`: its other volumes are restorable throughout.
            claimed.volume_deletion = Some(VolumeDeletion {
                revision: job.revision,
                volumes: job.volumes.clone(),
            });
        }
        match self.catalog().update(&claimed, current.revision).await {
            Ok(revision) => Ok(Versioned {
                value: claimed,
                revision,
            }),
            // Another deleter claimed it, or it changed: the next delivery judges it again.
            Err(CasError::Conflict) => Err(Some(Outcome::RetryAfter(Duration::from_secs(1)))),
            Err(CasError::Other(err)) => {
                tracing::warn!(backup = %job.backup_id, error = format!("{err:#}"), "cannot claim; will retry");
                Err(None)
            }
        }
    }

    /// Takes the `expiring` mark off a backup that the plan made now keeps.
    async fn unmark(&self, current: &Versioned<BackupRecord>) {
        let mut record = current.value.clone();
        if record.status == BackupStatus::Expiring {
            record.status = record.expired_from.unwrap_or(BackupStatus::Completed);
        }
        record.expired_from = None;
        record.expiring_revision = None;
        record.delete_reasons.clear();
        // Volumes marked for a partial deletion that has not been claimed stay, too.
        if record.volume_deletion.is_none() {
            for volume in &mut record.volumes {
                volume.expiring = false;
            }
        }
        match self.catalog().update(&record, current.revision).await {
            Ok(_) => {
                tracing::info!(cluster = %record.cluster, backup = %record.id, status = record.status.as_str(), "kept after all: expiring mark taken off")
            }
            Err(err) => {
                tracing::warn!(backup = %record.id, error = %err, "could not take the expiring mark off")
            }
        }
    }

    async fn run_plugins(&self, works: &mut [Work], batch_trail: &mut BatchTrail) {
        // Plugins are called when a backup goes, not when some of its volumes do.
        if !works
            .iter()
            .any(|w| w.active() && w.remove_objects && w.volumes.is_empty())
        {
            return;
        }
        let registrations = match self.plugins().load().await {
            Ok(registrations) => registrations,
            Err(err) => {
                // Deleting without the plugins would orphan what they clean up: wait.
                tracing::warn!(
                    error = format!("{err:#}"),
                    "cannot read the delete plugins; will retry"
                );
                for work in works.iter_mut() {
                    work.outcome = Some(Outcome::RetryAfter(Duration::from_secs(5)));
                }
                return;
            }
        };
        if registrations.is_empty() {
            return;
        }
        let registrations = &registrations;
        let calls: Vec<_> = works
            .iter()
            .enumerate()
            .filter(|(_, w)| w.active() && w.remove_objects && w.volumes.is_empty())
            .map(|(index, work)| async move {
                (
                    index,
                    self.plugins().call_all(registrations, &work.record).await,
                )
            })
            .collect();
        let results: Vec<(usize, Vec<crate::plugins::PluginResult>)> = futures::stream::iter(calls)
            .buffer_unordered(16)
            .collect()
            .await;
        for (index, results) in results {
            let work = &works[index];
            for result in &results {
                batch_trail.plugin_called(
                    &work.record.cluster,
                    sexton_shared::audit::PluginCallEntry {
                        backup: work.record.id.to_string(),
                        plugin: result.plugin.clone(),
                        outcome: result.outcome.to_string(),
                        error: result.error.clone(),
                    },
                );
            }
            let failures: Vec<_> = results.iter().filter_map(|r| r.failure()).collect();
            if failures.is_empty() {
                continue;
            }
            let work = &mut works[index];
            for failure in &failures {
                publish_incident(
                    &self.topology().jetstream,
                    incident(
                        &work.record,
                        "plugin-failed",
                        format!("delete plugin {}: {}", failure.plugin, failure.error),
                    ),
                )
                .await;
            }
            let mut record = work.record.clone();
            record.plugin_errors.extend(failures);
            match self.catalog().update(&record, work.revision).await {
                Ok(revision) => {
                    work.record = record;
                    work.revision = revision;
                }
                Err(CasError::Conflict) => {
                    work.outcome = Some(Outcome::RetryAfter(Duration::from_secs(1)))
                }
                Err(CasError::Other(err)) => {
                    tracing::warn!(backup = %record.id, error = format!("{err:#}"), "cannot record plugin errors; will retry");
                    work.outcome = Some(Outcome::RetryAfter(Duration::from_secs(5)));
                }
            }
        }
    }

    /// Deletes the data (or metadata) objects of every active work in shared requests.
    async fn delete_objects(&self, works: &mut [Work], metadata: bool) {
        let mut owners: HashMap<String, Vec<usize>> = HashMap::new();
        let mut keys: Vec<String> = Vec::new();
        for (index, work) in works.iter().enumerate() {
            if !work.active() || !work.remove_objects {
                continue;
            }
            for key in &work.keys {
                if BackupRecord::is_metadata_key(key) != metadata {
                    continue;
                }
                owners
                    .entry(key.clone())
                    .or_insert_with(|| {
                        keys.push(key.clone());
                        Vec::new()
                    })
                    .push(index);
            }
        }
        if keys.is_empty() {
            return;
        }
        // In a versioned bucket a key delete keeps the data (a delete marker): delete every
        // version instead. One that is under legal hold or retention refuses (AccessDenied).
        let targets = match self.store().targets_of(&keys).await {
            Ok(targets) => targets,
            Err(err) => {
                for indices in owners.values() {
                    for &index in indices {
                        works[index].note_failure(err.clone());
                    }
                }
                return;
            }
        };
        let report = self
            .store()
            .delete_targets(
                &targets,
                Requests {
                    per_request: keys_per_request(targets.len()),
                    in_flight: REQUESTS_IN_FLIGHT,
                    // Never closed: the permits only bound the replica's requests in flight.
                    permits: Some(self.requests()),
                },
            )
            .await;
        // Every failure names a key sent (a failed request, or an error about no key sent,
        // fails each key of its request). A key is gone when every one of its versions was
        // deleted (a key without versions left is gone already).
        let mut failed: HashSet<&str> = HashSet::new();
        for failure in &report.failed {
            failed.insert(failure.key.as_str());
            for &index in owners.get(&failure.key).into_iter().flatten() {
                works[index].note_failure(failure.clone());
            }
        }
        let mut n_deleted = 0;
        for key in &keys {
            if failed.contains(key.as_str()) {
                continue;
            }
            n_deleted += 1;
            for &index in &owners[key] {
                works[index].gone.insert(key.clone());
            }
        }
        self.metrics().objects_deleted.inc_by(n_deleted);
    }
}

impl Work {
    fn new(slot: usize, current: Versioned<BackupRecord>, volumes: Vec<String>) -> Work {
        let record = current.value;
        let keys = if volumes.is_empty() {
            record.all_keys()
        } else {
            record.volume_keys(&volumes)
        };
        // An immutable backup's objects are left to the bucket's lifecycle rules (seed 001), and
        // a user's delete without remote cleanup removes the record only (seed 003).
        let remove_objects = !record.immutable
            && record
                .delete_request
                .as_ref()
                .is_none_or(|request| request.remote);
        Work {
            slot,
            revision: current.revision,
            record,
            volumes,
            keys,
            remove_objects,
            gone: HashSet::new(),
            failure: None,
            outcome: None,
        }
    }
}

/// How many keys each of a phase's `DeleteObjects` requests carries: the phase's keys spread
/// over the [`REQUESTS_IN_FLIGHT`] requests a batch may have, at least
/// [`MIN_KEYS_PER_REQUEST`], at most what one request takes. A full batch's 1000 keys sent as
/// one request gave the store one request per batch to work on, while it deletes faster with
/// several at once (deletion bench, issue 17, 20,000 backups: two requests of 500 keys per
/// batch took the fleet from 65-85 % to 77-99 % of raw DeleteObjects with as many requests in
/// flight as the deleter may have, 8).
fn keys_per_request(keys: usize) -> usize {
    keys.div_ceil(REQUESTS_IN_FLIGHT)
        .clamp(MIN_KEYS_PER_REQUEST, DELETE_BATCH)
}

fn incident(record: &BackupRecord, kind: &str, reason: String) -> Incident {
    Incident {
        schema_version: wire::SCHEMA_VERSION,
        service: "deleter".into(),
        kind: kind.into(),
        cluster: Some(record.cluster.to_string()),
        backup_id: Some(record.id.to_string()),
        subject: String::new(),
        reason,
        at: Utc::now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_is_spread_over_the_requests_a_batch_may_have() {
        let requests = |keys: usize| keys.div_ceil(keys_per_request(keys));
        // A full batch: two requests of 500, never one of 1000.
        assert_eq!(keys_per_request(1000), 500);
        assert_eq!(requests(1000), REQUESTS_IN_FLIGHT);
        // A few keys stay one request; only the last request of a phase holds fewer than the
        // floor (150 keys: 100 and 50).
        assert_eq!(requests(1), 1);
        assert_eq!(requests(100), 1);
        assert_eq!(requests(150), 2);
        assert_eq!(keys_per_request(250), 125);
        // Never more than a request takes, however many keys (volumes add keys per job).
        assert_eq!(keys_per_request(5000), DELETE_BATCH);
        for keys in 1..5000 {
            let per = keys_per_request(keys);
            assert!(
                (MIN_KEYS_PER_REQUEST..=DELETE_BATCH).contains(&per),
                "{keys}: {per}"
            );
        }
    }
}
