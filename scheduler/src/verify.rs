//! Restore tests (issue 13): a schedule's `verify: {cron, pick, timeout}` fires a
//! `verify-due` event once per tick, naming one backup and the chain a restore of it reads; an
//! executor restores it somewhere harmless and answers with a verdict ([`crate::verdicts`]).
//! Retention keeps the newest proven backups (`keep_verified`, the verified floor).
//!
//! Exactly once, as due ticks: the event's message id is the request id
//! (`<schedule>-<tick>`), the schedule's `last_verify_tick` is compare-and-set after it, and a
//! replica that finds its publication de-duplicated reads the stored event back and carries
//! out *that* request (the backup picked first), so replicas racing on a tick agree.
//!
//! Until its verdict or its deadline the backup is held (`verify:<request_id>` in its holds,
//! `verification.pending` says until when): retention keeps it, no deleter touches it. A test
//! nobody answers by its deadline is recorded as a timeout (the backup's state does not
//! change: no news is no proof, but no disproof either) and the hold released, by the replica
//! that fired it (a timer) or, after that replica died, at the schedule's next test.
//!
//! Which backup ([`pick`]) and what a restore reads ([`chain_of`]) are pure ([`plan`]).

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::Context as _;
use async_nats::jetstream::kv::Operation;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use sexton_model::{
    names::{BackupId, ClusterName, LocationName, PlanName},
    records::{
        BackupRecord, PendingVerification, ScheduleRecord, Verification, VerificationEntry,
        VerifyPick,
    },
    wire::{self, Incident, VerifyDue, VerifyReplay},
};
use sexton_schedule::CronSpec;
use sexton_shared::{
    binlog,
    catalog::{CasError, Catalog, Lookup, Versioned},
    channels,
    object_store::ObjectStore,
    outcome::publish_incident,
    topology::{self, Topology},
    Shutdown,
};

use crate::metrics::Metrics;

mod plan;

pub(crate) use plan::parents;
pub use plan::{
    chain_at, chain_of, drill_target, due_tick, event, in_store, pick, request_id, restore_chain,
    verify_backup,
};

/// Request id → (cluster, backup, deadline).
type PendingMap = HashMap<String, (ClusterName, BackupId, DateTime<Utc>)>;

/// Tests this replica asked for and waits on.
#[derive(Clone, Default)]
pub struct Pending(Arc<Mutex<PendingMap>>);

impl Pending {
    fn insert(&self, request: &str, cluster: &ClusterName, id: &BackupId, deadline: DateTime<Utc>) {
        self.0
            .lock()
            .expect("pending")
            .insert(request.to_string(), (cluster.clone(), id.clone(), deadline));
    }

    fn overdue(&self, now: DateTime<Utc>) -> Vec<(String, ClusterName, BackupId)> {
        let mut map = self.0.lock().expect("pending");
        let due: Vec<String> = map
            .iter()
            .filter(|(_, (_, _, deadline))| *deadline <= now)
            .map(|(request, _)| request.clone())
            .collect();
        due.into_iter()
            .filter_map(|request| {
                map.remove(&request)
                    .map(|(cluster, id, _)| (request, cluster, id))
            })
            .collect()
    }

    fn next_deadline(&self) -> Option<DateTime<Utc>> {
        self.0
            .lock()
            .expect("pending")
            .values()
            .map(|(_, _, deadline)| *deadline)
            .min()
    }
}

/// What the firing of a test, scheduled or asked for, needs.
#[derive(Clone)]
pub struct Verifier {
    pub topology: Topology,
    pub catalog: Catalog,
    pub metrics: Arc<Metrics>,
    pub pending: Pending,
    /// Where tests read, for the log archives a drill reads.
    pub places: Places,
}

impl Verifier {
    /// The restore tests of this replica, reading at the primary `store` and at `locations`.
    pub fn new(
        topology: &Topology,
        metrics: &Arc<Metrics>,
        store: &sexton_shared::object_store::ObjectStore,
        locations: &std::collections::BTreeMap<
            sexton_model::names::LocationName,
            sexton_shared::object_store::ObjectStore,
        >,
    ) -> Verifier {
        Verifier {
            topology: topology.clone(),
            catalog: Catalog::new(topology.catalog.clone()),
            metrics: metrics.clone(),
            pending: Pending::default(),
            places: Places {
                primary: store.clone(),
                locations: locations.clone(),
            },
        }
    }
}

/// The primary store and each location's, read only.
#[derive(Clone)]
pub struct Places {
    pub primary: ObjectStore,
    pub locations: BTreeMap<LocationName, ObjectStore>,
}

impl Places {
    /// The store of `location` (`None`: primary); `Err` for one this fleet lacks.
    pub fn store(&self, location: Option<&LocationName>) -> anyhow::Result<&ObjectStore> {
        match location {
            None => Ok(&self.primary),
            Some(name) => self
                .locations
                .get(name)
                .with_context(|| format!("location {name} has no store configured here")),
        }
    }
}

/// How a test is asked for: its request id, how long the executor has, the place it reads
/// (`None`: primary) and, for a drill, the replay of the log archive after the restore.
#[derive(Debug, Clone, Copy)]
pub struct TestRequest<'a> {
    pub request_id: &'a str,
    pub timeout: chrono::Duration,
    pub now: DateTime<Utc>,
    pub location: Option<&'a LocationName>,
    pub replay: Option<VerifyReplay>,
}

/// What asking for a test did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Asked {
    pub request_id: String,
    pub backup_id: String,
    pub deadline: DateTime<Utc>,
    /// Another replica had asked for it already (the stream kept the first event).
    pub duplicate: bool,
}

impl Verifier {
    /// Asks for a test of `target` (of `records`, its cluster's catalog): publishes the event
    /// (or finds it published) and holds the backup until the verdict or the deadline. A chain
    /// that cannot be restored is recorded failed at once. `Ok(None)`: nothing asked.
    pub async fn ask(
        &self,
        records: &[Versioned<BackupRecord>],
        target: &BackupRecord,
        request: TestRequest<'_>,
    ) -> anyhow::Result<Option<Asked>> {
        let TestRequest {
            request_id,
            timeout,
            now,
            location,
            replay,
        } = request;
        let by_id: BTreeMap<&str, &BackupRecord> = records
            .iter()
            .map(|r| (r.value.id.as_str(), &r.value))
            .collect();
        let chain = chain_of(&by_id, target, location).and_then(|chain| match location {
            Some(name) => chain_at(&chain, name).map(|()| chain),
            None => Ok(chain),
        });
        // Objects in another store than the place's (issue 54) are not a failed restore: the
        // test is not asked, and the caller hears why.
        if let (Ok(chain), Ok(store)) = (&chain, self.places.store(location)) {
            if let Err(why) = in_store(chain, location, store.place()) {
                anyhow::bail!("{why}");
            }
        }
        let chain = match chain {
            Ok(chain) => chain,
            Err(why) => {
                self.metrics
                    .verifications
                    .with_label_values(&["failed"])
                    .inc();
                self.settle(
                    &target.cluster,
                    &target.id,
                    &target.uid,
                    VerificationEntry {
                        request_id: request_id.to_string(),
                        outcome: "failed".into(),
                        at: now,
                        reason: Some(why.clone()),
                        duration_ms: None,
                        via: None,
                        location: location.cloned(),
                        until: replay.map(|r| r.until),
                    },
                )
                .await?;
                self.incident(&target.cluster, target.id.as_str(), "verify-failed", &why)
                    .await;
                return Ok(None);
            }
        };
        let event = event(request_id, &chain, now, timeout, location, replay);
        // Held before the event goes out: an executor may answer at once, and a verdict counts
        // only for a test the catalog knows was asked for.
        self.hold(&event).await?;
        let ack = channels::VERIFY_DUES
            .publish(
                &self.topology.jetstream,
                &event,
                &channels::ids::verify_due(request_id),
            )
            .await?;
        // A replica that asked first may have picked another backup: carry out its request.
        let event = if ack.duplicate {
            let stream = self
                .topology
                .jetstream
                .get_stream(topology::STREAM_VERIFY)
                .await
                .context("opening the verify stream")?;
            let stored = stream
                .get_raw_message(ack.sequence)
                .await
                .with_context(|| format!("reading verify-due {}", ack.sequence))?;
            let stored = wire::decode::<VerifyDue>(&stored.payload)
                .with_context(|| format!("decoding verify-due {}", ack.sequence))?;
            if stored.backup_id != event.backup_id || stored.uid != event.uid {
                self.unhold(&event).await?;
                self.hold(&stored).await?;
            }
            stored
        } else {
            event
        };
        self.pending
            .insert(request_id, &event.cluster, &event.backup_id, event.deadline);
        if !ack.duplicate {
            self.metrics.verify_requests.inc();
            tracing::info!(cluster = %event.cluster, backup = %event.backup_id, request = request_id, deadline = %event.deadline, "restore test asked for");
        }
        Ok(Some(Asked {
            request_id: request_id.to_string(),
            backup_id: event.backup_id.to_string(),
            deadline: event.deadline,
            duplicate: ack.duplicate,
        }))
    }

    /// Holds the event's backup (`verify:<request>`) and records the test under way.
    async fn hold(&self, event: &VerifyDue) -> anyhow::Result<()> {
        let hold = Verification::hold(&event.request_id);
        for _ in 0..10 {
            let Lookup::Live(current) = self
                .catalog
                .lookup(&event.cluster, &event.backup_id)
                .await?
            else {
                return Ok(());
            };
            let mut record = current.value.clone();
            if record.uid != event.uid {
                return Ok(());
            }
            let verification = record
                .verification
                .get_or_insert_with(Verification::default);
            let answered = verification
                .history
                .iter()
                .any(|e| e.request_id == event.request_id);
            if answered || record.holds.contains(&hold) {
                return Ok(());
            }
            verification.pending = Some(PendingVerification {
                request_id: event.request_id.clone(),
                since: event.requested_at,
                deadline: event.deadline,
                location: event.location.clone(),
                until: event.replay.map(|r| r.until),
            });
            record.holds.push(hold.clone());
            match self.catalog.update(&record, current.revision).await {
                Ok(_) => return Ok(()),
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(err),
            }
        }
        anyhow::bail!("backup {} kept changing while being held", event.backup_id)
    }

    /// Takes back a hold of `event`'s request that another replica's request replaced.
    async fn unhold(&self, event: &VerifyDue) -> anyhow::Result<()> {
        let hold = Verification::hold(&event.request_id);
        for _ in 0..10 {
            let Lookup::Live(current) = self
                .catalog
                .lookup(&event.cluster, &event.backup_id)
                .await?
            else {
                return Ok(());
            };
            let mut record = current.value.clone();
            let pending_here = record
                .verification
                .as_ref()
                .and_then(|v| v.pending.as_ref())
                .is_some_and(|p| p.request_id == event.request_id);
            if !pending_here && !record.holds.contains(&hold) {
                return Ok(());
            }
            if let Some(verification) = record.verification.as_mut() {
                if pending_here {
                    verification.pending = None;
                }
            }
            record.holds.retain(|h| *h != hold);
            match self.catalog.update(&record, current.revision).await {
                Ok(_) => return Ok(()),
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(err),
            }
        }
        anyhow::bail!(
            "backup {} kept changing while its hold was taken back",
            event.backup_id
        )
    }

    /// Records a verdict (or a timeout) on the backup and releases its hold. `false` when the
    /// backup is gone or another one (uid).
    pub async fn settle(
        &self,
        cluster: &ClusterName,
        id: &BackupId,
        uid: &str,
        entry: VerificationEntry,
    ) -> anyhow::Result<bool> {
        let hold = Verification::hold(&entry.request_id);
        for _ in 0..10 {
            let Lookup::Live(current) = self.catalog.lookup(cluster, id).await? else {
                return Ok(false);
            };
            let mut record = current.value.clone();
            if record.uid != uid {
                return Ok(false);
            }
            let verification = record
                .verification
                .get_or_insert_with(Verification::default);
            if verification
                .history
                .iter()
                .any(|e| e.request_id == entry.request_id && e.via == entry.via)
            {
                return Ok(true);
            }
            if let Some(copy) = entry
                .location
                .as_ref()
                .and_then(|name| record.copies.get_mut(name))
            {
                copy.verification = Some(sexton_model::copies::CopyTest {
                    request_id: entry.request_id.clone(),
                    outcome: entry.outcome.clone(),
                    at: entry.at,
                    reason: entry.reason.clone(),
                });
            }
            verification.record(entry.clone());
            record.holds.retain(|h| *h != hold);
            match self.catalog.update(&record, current.revision).await {
                Ok(_) => return Ok(true),
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(err),
            }
        }
        anyhow::bail!("backup {id} kept changing while its verdict was recorded")
    }

    /// Records every test of `records` whose deadline passed without a verdict as a timeout.
    pub async fn expire(&self, records: &[Versioned<BackupRecord>], now: DateTime<Utc>) {
        for record in records {
            let Some(pending) = record
                .value
                .verification
                .as_ref()
                .and_then(|v| v.pending.clone())
            else {
                continue;
            };
            if pending.deadline > now {
                continue;
            }
            self.time_out(
                &record.value.cluster,
                &record.value.id,
                &pending.request_id,
                now,
            )
            .await;
        }
    }

    async fn time_out(
        &self,
        cluster: &ClusterName,
        id: &BackupId,
        request: &str,
        now: DateTime<Utc>,
    ) {
        let Ok(Lookup::Live(current)) = self.catalog.lookup(cluster, id).await else {
            return;
        };
        let Some(pending) = current
            .value
            .verification
            .as_ref()
            .and_then(|v| v.pending.as_ref())
            .filter(|p| p.request_id == request && p.deadline <= now)
        else {
            return;
        };
        let location = pending.location.clone();
        let until = pending.until;
        let why = format!("no verdict for restore test {request} by its deadline");
        let entry = VerificationEntry {
            request_id: request.to_string(),
            outcome: "timeout".into(),
            at: now,
            reason: Some(why.clone()),
            duration_ms: None,
            via: None,
            location,
            until,
        };
        match self.settle(cluster, id, &current.value.uid, entry).await {
            Ok(_) => {
                self.metrics
                    .verifications
                    .with_label_values(&["timeout"])
                    .inc();
                self.incident(cluster, id.as_str(), "verify-timeout", &why)
                    .await;
            }
            Err(err) => {
                tracing::warn!(%cluster, backup = %id, error = format!("{err:#}"), "restore test timeout not recorded; the next test of the schedule records it")
            }
        }
    }

    pub async fn incident(&self, cluster: &ClusterName, backup: &str, kind: &str, reason: &str) {
        publish_incident(
            &self.topology.jetstream,
            Incident {
                schema_version: wire::SCHEMA_VERSION,
                service: "scheduler".into(),
                kind: kind.into(),
                cluster: Some(cluster.to_string()),
                backup_id: Some(backup.to_string()),
                subject: sexton_shared::channels::VERIFY_DUES.subject(cluster),
                reason: reason.to_string(),
                at: Utc::now(),
            },
        )
        .await;
    }

    /// One scheduled test of `schedule` at `tick`: expire what is overdue, pick, ask, then
    /// record the tick (compare-and-set on the schedule record at `revision`).
    async fn fire(
        &self,
        schedule: &ScheduleRecord,
        revision: u64,
        tick: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let spec = schedule
            .verify
            .as_ref()
            .expect("only schedules with tests fire");
        let records = self.catalog.list_cluster(&schedule.cluster).await?;
        self.expire(&records, now).await;
        let location = spec.location.as_ref();
        let mine: Vec<&BackupRecord> = records
            .iter()
            .map(|r| &r.value)
            .filter(|r| r.schedule.as_ref() == Some(&schedule.name))
            .collect();
        let request = request_id(&schedule.name, tick);
        let chosen = match spec.pick {
            VerifyPick::Point => {
                let place = location.cloned().unwrap_or_else(LocationName::primary);
                let window = sexton_shared::recovery::objectives_for(
                    std::slice::from_ref(schedule),
                    &schedule.plan,
                    &place,
                )
                .and_then(|objectives| objectives.window);
                let catalog = self
                    .place_catalog(&records, &schedule.plan, location)
                    .await?;
                drill_target(&catalog, now, window.map(|w| now - w.delta()), &request)
            }
            how => pick(&mine, how, &request, location).map(|target| (target.id.clone(), None)),
        };
        // A drill's base already under test waits for the next tick, as a pick skips it.
        let target = chosen.and_then(|(id, replay)| {
            records
                .iter()
                .find(|r| r.value.id == id)
                .filter(|r| {
                    r.value
                        .verification
                        .as_ref()
                        .is_none_or(|v| v.pending.is_none())
                })
                .map(|r| (&r.value, replay))
        });
        match target {
            Some((target, replay)) => {
                self.ask(
                    &records,
                    target,
                    TestRequest {
                        request_id: &request,
                        timeout: spec.timeout.as_delta(),
                        now,
                        location,
                        replay,
                    },
                )
                .await?;
            }
            None => {
                tracing::info!(schedule = %schedule.name, tick = %tick, "restore test due, but no backup to test");
            }
        }
        let mut updated = schedule.clone();
        updated.status.last_verify_tick = Some(tick);
        let body = serde_json::to_vec(&updated)?;
        // Lost to another replica (or another change): the watch brings the new state.
        let _ = self
            .topology
            .schedules
            .update(schedule.name.as_str(), body.into(), revision)
            .await;
        Ok(())
    }
}

impl Verifier {
    /// `plan`'s records as the place `location` (`None`: primary) holds them, in the engine's
    /// form, with that place's log archive read as restores read it (the recorded index, from
    /// beneath a newer version if need be; none where the place never had one): what the
    /// recovery value there is computed from, and what a drill there reads.
    pub async fn place_catalog(
        &self,
        records: &[Versioned<BackupRecord>],
        plan: &PlanName,
        location: Option<&LocationName>,
    ) -> anyhow::Result<sexton_retention::Catalog> {
        let place = location.cloned().unwrap_or_else(LocationName::primary);
        let of_plan: Vec<&BackupRecord> = records
            .iter()
            .map(|r| &r.value)
            .filter(|r| r.plan == *plan)
            .collect();
        let (mut catalog, _) = sexton_shared::recovery::place_catalog(&of_plan, &place);
        if let Some(cluster) = of_plan.first().map(|r| &r.cluster) {
            catalog.binlog_segments = self.log_archive(cluster, location).await?;
        }
        Ok(catalog)
    }

    /// `cluster`'s log archive at `location` (`None`: primary) in the engine's form, read as
    /// restores read it (the recorded index, from beneath a newer version if need be); empty
    /// where the place never had one.
    pub async fn log_archive(
        &self,
        cluster: &ClusterName,
        location: Option<&LocationName>,
    ) -> anyhow::Result<Vec<sexton_retention::BinlogSegment>> {
        let place = location.cloned().unwrap_or_else(LocationName::primary);
        let store = self.places.store(location)?;
        let index_key = binlog::index_key(store.prefix(), cluster);
        let archive = binlog::binlog_prefix(store.prefix(), cluster);
        Ok(
            binlog::store::read_recorded_if_any(store, &index_key, &archive)
                .await
                .with_context(|| format!("reading the log archive at {place}"))?
                .map(|(index, _)| index.to_engine())
                .unwrap_or_default(),
        )
    }
}

/// Fires the scheduled restore tests until `shutdown` trips: a watch on the schedules bucket
/// keeps each schedule with `verify` (and its revision), the loop sleeps until the earliest
/// test is due or a test's deadline passes.
pub async fn run(verifier: Verifier, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let schedules_bucket = verifier.topology.schedules.clone();
    let mut watch = schedules_bucket
        .watch_with_history(">")
        .await
        .context("watching the schedules bucket")?;
    let mut known: HashMap<String, (ScheduleRecord, u64, CronSpec)> = HashMap::new();
    let mut last_revision = 0;
    loop {
        let now = Utc::now();
        let next_tick = known
            .values()
            .filter(|(record, _, _)| !record.paused)
            .filter_map(|(record, _, cron)| next_of(record, cron))
            .min();
        let wake = [next_tick, verifier.pending.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        let sleep_for = match wake {
            Some(at) => (at - now).to_std().unwrap_or(Duration::ZERO),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            update = watch.next() => match update {
                Some(Ok(entry)) => {
                    last_revision = entry.revision;
                    if entry.operation != Operation::Put {
                        known.remove(&entry.key);
                        continue;
                    }
                    match serde_json::from_slice::<ScheduleRecord>(&entry.value) {
                        Ok(record) => match record.verify.as_ref().map(|v| CronSpec::parse(&v.cron)) {
                            Some(Ok(cron)) => {
                                known.insert(entry.key.clone(), (record, entry.revision, cron));
                            }
                            _ => {
                                known.remove(&entry.key);
                            }
                        },
                        Err(err) => tracing::warn!(schedule = %entry.key, error = %err, "unreadable schedule"),
                    }
                }
                other => {
                    if let Some(Err(err)) = other {
                        tracing::warn!(error = %err, "schedules watch failed; resuming");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    watch = schedules_bucket
                        .watch_all_from_revision(last_revision + 1)
                        .await
                        .context("re-watching the schedules bucket")?;
                }
            },
            _ = tokio::time::sleep(sleep_for) => {
                let now = Utc::now();
                for (request, cluster, id) in verifier.pending.overdue(now) {
                    verifier.time_out(&cluster, &id, &request, now).await;
                }
                let due: Vec<(ScheduleRecord, u64, DateTime<Utc>)> = known
                    .values()
                    .filter(|(record, _, _)| !record.paused)
                    .filter_map(|(record, revision, cron)| {
                        let since = since(record);
                        due_tick(cron, since, now).map(|tick| (record.clone(), *revision, tick))
                    })
                    .collect();
                for (record, revision, tick) in due {
                    if let Err(err) = verifier.fire(&record, revision, tick, now).await {
                        tracing::warn!(schedule = %record.name, error = format!("{err:#}"), "restore test not asked for; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    } else if let Some((stored, _, _)) = known.get_mut(record.name.as_str()) {
                        // The watch brings the recorded tick; meanwhile do not fire it again.
                        stored.status.last_verify_tick = Some(tick);
                    }
                }
            }
        }
    }
}

/// Tests count from the last one asked for, or from the schedule's creation.
fn since(record: &ScheduleRecord) -> DateTime<Utc> {
    record
        .status
        .last_verify_tick
        .unwrap_or(record.created_at)
        .max(record.created_at)
}

fn next_of(record: &ScheduleRecord, cron: &CronSpec) -> Option<DateTime<Utc>> {
    cron.next_after(since(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sexton_model::{keys::StoreRef, records::BackupStatus};

    /// The store the tests' fleet reads.
    fn here() -> StoreRef {
        StoreRef {
            endpoint: Some("http://127.0.0.1:8333".into()),
            bucket: "new".into(),
            prefix: "b".into(),
        }
    }

    #[test]
    fn a_chain_at_primary_with_a_link_in_another_store_is_refused_naming_it_and_the_way_out() {
        let full = record("f1", 1, None);
        let mut i1 = record("i1", 2, Some("f1"));
        let by_id = |records: &[&BackupRecord]| -> BTreeMap<String, BackupRecord> {
            records
                .iter()
                .map(|r| (r.id.to_string(), (*r).clone()))
                .collect()
        };
        // Records written before they named their store are where the fleet reads.
        let all = by_id(&[&full, &i1]);
        let index: BTreeMap<&str, &BackupRecord> =
            all.iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert!(restore_chain(&index, &i1, None, Some(&here())).is_ok());
        // The same store written otherwise is the same place.
        let mut same = here();
        same.endpoint = Some("HTTP://127.0.0.1:8333/".into());
        same.prefix = "b/".into();
        i1.store = Some(same);
        let all = by_id(&[&full, &i1]);
        let index: BTreeMap<&str, &BackupRecord> =
            all.iter().map(|(k, v)| (k.as_str(), v)).collect();
        assert!(restore_chain(&index, &i1, None, Some(&here())).is_ok());
        // The full in the old bucket: the chain is refused, naming it and the command.
        let mut old_full = full.clone();
        old_full.store = Some(StoreRef {
            bucket: "old".into(),
            ..here()
        });
        let all = by_id(&[&old_full, &i1]);
        let index: BTreeMap<&str, &BackupRecord> =
            all.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let why = restore_chain(&index, &i1, None, Some(&here())).unwrap_err();
        assert!(why.contains("f1 is recorded in bucket old"), "{why}");
        assert!(why.contains("--from-bucket old"), "{why}");
    }

    fn record(id: &str, hour: u32, parent: Option<&str>) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p", "schedule": "s",
            "backup_name": "s", "kind": if parent.is_some() { "incremental" } else { "full" },
            "parent": parent, "status": "completed",
            "completed_at": format!("2026-01-01T{hour:02}:00:00Z"),
            "artifacts": [format!("b/c1/s/{id}/data")],
        }))
        .unwrap()
    }

    /// A scheduled drill draws its instant from the tick, among what is restorable within the
    /// promised window, and reads the newest base that reaches it.
    #[test]
    fn a_scheduled_drill_draws_an_instant_of_the_window_the_same_everywhere() {
        let at = |h: u32| {
            chrono::DateTime::parse_from_rfc3339(&format!("2026-01-01T{h:02}:00:00Z")).unwrap()
        };
        let catalog = sexton_retention::Catalog {
            backups: vec![
                record("f1", 1, None).to_engine(),
                record("f2", 5, None).to_engine(),
            ],
            binlog_segments: (0..3)
                .map(|k| sexton_retention::BinlogSegment {
                    key: format!("a/mysql-bin.{k:06}"),
                    first_event: Some(at(4 * k)),
                    last_event: Some(at(4 * k + 4)),
                })
                .collect(),
        };
        let now = at(12).to_utc();
        let start = at(6).to_utc();
        let mut bases = std::collections::BTreeSet::new();
        for n in 0..40 {
            let request = format!("s-{n}");
            let (id, replay) = drill_target(&catalog, now, Some(start), &request).unwrap();
            assert_eq!(
                drill_target(&catalog, now, Some(start), &request),
                Some((id.clone(), replay))
            );
            let replay = replay.expect("between the points, the log is replayed");
            assert!(start <= replay.until && replay.until <= now, "{replay:?}");
            assert_eq!(id.as_str(), "f2", "the newest base before {}", replay.until);
            bases.insert(replay.until);
        }
        assert!(bases.len() > 30, "instants drawn: {bases:?}");
        // The whole span without a window: f1's replay too.
        let whole: Vec<_> = (0..40)
            .filter_map(|n| drill_target(&catalog, now, None, &format!("s-{n}")))
            .map(|(id, _)| id.to_string())
            .collect();
        assert!(whole.iter().any(|id| id == "f1"), "{whole:?}");
        assert_eq!(
            drill_target(&sexton_retention::Catalog::default(), now, None, "s-1"),
            None
        );
    }

    #[test]
    fn each_pick_chooses_as_documented_and_random_is_the_same_everywhere() {
        let mut tested = record("b2", 2, None);
        tested.verification = Some(Verification {
            history: vec![VerificationEntry {
                request_id: "r".into(),
                outcome: "verified".into(),
                at: Utc::now(),
                reason: None,
                duration_ms: None,
                via: None,
                location: None,
                until: None,
            }],
            ..Verification::default()
        });
        let mut failed = record("b4", 4, None);
        failed.status = BackupStatus::Failed;
        let backups = [record("b1", 1, None), tested, record("b3", 3, None), failed];
        let all: Vec<&BackupRecord> = backups.iter().collect();
        let id = |r: Option<&BackupRecord>| r.map(|r| r.id.to_string());
        assert_eq!(
            id(pick(&all, VerifyPick::Latest, "x", None)).as_deref(),
            Some("b3")
        );
        assert_eq!(
            id(pick(&all, VerifyPick::OldestKept, "x", None)).as_deref(),
            Some("b1")
        );
        // Each: the oldest never tested.
        assert_eq!(
            id(pick(&all, VerifyPick::Each, "x", None)).as_deref(),
            Some("b1")
        );
        let draws: std::collections::BTreeSet<_> = (0..50)
            .map(|n| id(pick(&all, VerifyPick::Random, &format!("s-{n}"), None)).unwrap())
            .collect();
        assert!(draws.len() > 1 && !draws.contains("b4"), "{draws:?}");
        assert_eq!(
            id(pick(&all, VerifyPick::Random, "s-7", None)),
            id(pick(&all, VerifyPick::Random, "s-7", None))
        );
        assert_eq!(
            pick(&[], VerifyPick::Latest, "x", None).map(|r| r.id.clone()),
            None
        );
    }

    #[test]
    fn a_chain_is_read_oldest_first_and_a_broken_one_is_said_so() {
        let f = record("f", 1, None);
        let i1 = record("i1", 2, Some("f"));
        let i2 = record("i2", 3, Some("i1"));
        let by_id: BTreeMap<&str, &BackupRecord> = [&f, &i1, &i2]
            .into_iter()
            .map(|r| (r.id.as_str(), r))
            .collect();
        let chain: Vec<&str> = chain_of(&by_id, &i2, None)
            .unwrap()
            .iter()
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(chain, ["f", "i1", "i2"]);
        let mut missing = by_id.clone();
        missing.remove("f");
        assert!(chain_of(&missing, &i2, None)
            .unwrap_err()
            .contains("f is not in the catalog"));
        let mut failed_f = f.clone();
        failed_f.status = BackupStatus::Missing;
        let mut broken = by_id.clone();
        broken.insert("f", &failed_f);
        assert!(chain_of(&broken, &i2, None)
            .unwrap_err()
            .contains("f is missing"));
    }

    #[test]
    fn a_restore_reads_where_every_link_is_and_names_where_it_went() {
        let dr = LocationName::new("dr").unwrap();
        let mut f = copy_at(record("f", 1, None), "copied");
        let i1 = copy_at(record("i1", 2, Some("f")), "copied");
        let restored = |f: &BackupRecord, location: Option<&LocationName>| {
            let by_id: BTreeMap<&str, &BackupRecord> =
                [f, &i1].into_iter().map(|r| (r.id.as_str(), r)).collect();
            restore_chain(&by_id, &i1, location, Some(&here()))
                .map(|chain| chain.iter().map(|r| r.id.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(restored(&f, None).unwrap(), ["f", "i1"]);
        assert_eq!(restored(&f, Some(&dr)).unwrap(), ["f", "i1"]);
        // The full gone from primary, its copy at dr kept: restored from dr only.
        f.primary_deleted_at = Some("2026-01-02T00:00:00Z".parse().unwrap());
        let why = restored(&f, None).unwrap_err();
        assert!(
            why.contains("f is no longer at primary; it is held at dr"),
            "{why}"
        );
        assert_eq!(restored(&f, Some(&dr)).unwrap(), ["f", "i1"]);
        // And the copy leaving dr: nowhere.
        let leaving = copy_at(f.clone(), "expiring");
        assert!(restored(&leaving, Some(&dr))
            .unwrap_err()
            .contains("f at dr is expiring"));
        assert!(!restored(&leaving, None).unwrap_err().contains("held at"));
    }

    /// Issue 47: a scheduled test at `dr` picks among what dr can restore, the backups primary
    /// already let go included (those are what a longer retention at dr exists for); at
    /// primary, never one primary no longer holds.
    #[test]
    fn a_test_at_a_location_picks_what_that_location_can_restore() {
        let dr = LocationName::new("dr").unwrap();
        let mut old = copy_at(record("old", 1, None), "copied");
        old.status = BackupStatus::Deleting;
        old.primary_deleted_at = Some("2026-01-02T00:00:00Z".parse().unwrap());
        let new = record("new", 2, None);
        let all = [&old, &new];
        let id = |r: Option<&BackupRecord>| r.map(|r| r.id.to_string());
        assert_eq!(
            id(pick(&all, VerifyPick::Latest, "x", Some(&dr))).as_deref(),
            Some("old")
        );
        assert_eq!(
            id(pick(&all, VerifyPick::OldestKept, "x", None)).as_deref(),
            Some("new")
        );
    }

    /// Issue 47: what primary found or did says nothing of a copy elsewhere. A full that a
    /// scrub found gone at primary (`missing`), and a target primary's retention took
    /// (`deleting`, objects gone), are both whole at `dr`, and restored from there.
    #[test]
    fn a_chain_at_a_location_is_judged_by_its_copies_there_not_by_primary() {
        let dr = LocationName::new("dr").unwrap();
        let mut f = copy_at(record("f", 1, None), "copied");
        f.status = BackupStatus::Missing;
        let mut i1 = copy_at(record("i1", 2, Some("f")), "copied");
        i1.status = BackupStatus::Deleting;
        i1.primary_deleted_at = Some("2026-01-02T00:00:00Z".parse().unwrap());
        let by_id: BTreeMap<&str, &BackupRecord> =
            [&f, &i1].into_iter().map(|r| (r.id.as_str(), r)).collect();
        let chain: Vec<&str> = restore_chain(&by_id, &i1, Some(&dr), Some(&here()))
            .unwrap()
            .iter()
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(chain, ["f", "i1"]);
        assert!(restore_chain(&by_id, &i1, None, Some(&here()))
            .unwrap_err()
            .contains("f is missing"));
        assert_eq!(i1.restorable_at(Some(&dr)), Ok(()));
        let why = i1.restorable_at(None).unwrap_err();
        assert!(
            why.contains("i1 is no longer at primary; it is held at dr"),
            "{why}"
        );
        let why = f.restorable_at(None).unwrap_err();
        assert!(why.contains("f is missing at primary"), "{why}");
        // Its copy at dr found missing too: nowhere, and said so.
        let gone = copy_at(f.clone(), "missing");
        let why = gone.restorable_at(Some(&dr)).unwrap_err();
        assert!(why.contains("no copy at dr that counts (missing)"), "{why}");
        let elsewhere = LocationName::new("b2").unwrap();
        let why = f.restorable_at(Some(&elsewhere)).unwrap_err();
        assert!(
            why.contains("no copy at b2 (never copied there); it is held at dr"),
            "{why}"
        );
    }

    fn copy_at(mut record: BackupRecord, state: &str) -> BackupRecord {
        record.copies.insert(
            LocationName::new("dr").unwrap(),
            serde_json::from_value(serde_json::json!({
                "state": state, "copied_at": "2026-01-02T00:00:00Z",
                "objects": [{"key": format!("dr/c1/s/{}/data", record.id), "size": 4,
                             "sha256": "ab".repeat(32)}]
            }))
            .unwrap(),
        );
        record
    }

    #[test]
    fn a_test_at_a_location_reads_the_copies_and_needs_the_chain_there() {
        let dr = LocationName::new("dr").unwrap();
        let f = copy_at(record("f", 1, None), "copied");
        let i1 = copy_at(record("i1", 2, Some("f")), "copied");
        let chain = [&f, &i1];
        chain_at(&chain, &dr).unwrap();
        let now: DateTime<Utc> = "2026-01-03T00:00:00Z".parse().unwrap();
        let due = event(
            "r",
            &chain,
            now,
            chrono::Duration::hours(1),
            Some(&dr),
            None,
        );
        assert_eq!(due.location.as_ref(), Some(&dr));
        assert_eq!(due.chain[0].objects[0].key, "dr/c1/s/f/data");
        assert_eq!(due.chain[1].objects[0].size, Some(4));
        // At primary: the primary's keys.
        let due = event("r", &chain, now, chrono::Duration::hours(1), None, None);
        assert_eq!(due.chain[0].objects[0].key, "b/c1/s/f/data");
        assert_eq!(due.location, None);
        // The parent's copy being deleted there, or never made: no test there.
        let leaving = copy_at(record("f", 1, None), "expiring");
        assert!(chain_at(&[&leaving, &i1], &dr)
            .unwrap_err()
            .contains("f at dr is expiring"));
        let never = record("f", 1, None);
        assert!(chain_at(&[&never, &i1], &dr)
            .unwrap_err()
            .contains("f has no copy at dr"));
    }

    #[test]
    fn a_verdict_on_a_copy_leaves_the_backups_own_state() {
        let mut verification = Verification::default();
        let entry = |outcome: &str, location: Option<&str>| VerificationEntry {
            request_id: format!("r-{outcome}-{location:?}"),
            outcome: outcome.into(),
            at: Utc::now(),
            reason: None,
            duration_ms: None,
            via: None,
            location: location.map(|l| LocationName::new(l).unwrap()),
            until: None,
        };
        verification.record(entry("failed", Some("dr")));
        assert_eq!(
            verification.state,
            sexton_model::records::VerificationState::Unverified
        );
        assert_eq!(verification.history.len(), 1);
        verification.record(entry("verified", None));
        assert_eq!(
            verification.state,
            sexton_model::records::VerificationState::Verified
        );
        verification.record(entry("failed", Some("dr")));
        assert_eq!(
            verification.state,
            sexton_model::records::VerificationState::Verified
        );
    }

    #[test]
    fn one_test_for_the_newest_missed_tick() {
        let cron = CronSpec::parse("@hourly").unwrap();
        let since: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let now: DateTime<Utc> = "2026-01-01T05:30:00Z".parse().unwrap();
        assert_eq!(
            due_tick(&cron, since, now),
            Some("2026-01-01T05:00:00Z".parse().unwrap())
        );
        assert_eq!(due_tick(&cron, now, now), None);
        assert_eq!(
            request_id(
                &"nightly".parse().unwrap(),
                "2026-01-01T05:00:00Z".parse().unwrap()
            ),
            "nightly-20260101050000"
        );
    }
}
