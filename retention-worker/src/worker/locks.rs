//! Object Lock (issue 29), at primary and at each location with a lock setting: before a run
//! marks anything in a group, each kept backup's objects there are locked until the date its
//! reasons ask for ([`sexton_retention::lock`]), or their lock is lengthened when a promotion
//! asks for more. Only dates later than what the record says is set are asked for, so a run's
//! requests follow new backups and promotions, not the catalog's size. The record's
//! `locked_until` (a copy's, at a location) is written after the store took the lock, never
//! before, and only ever later.

use std::collections::HashMap;

use anyhow::Context as _;
use chrono::{DateTime, Utc};
use sexton_model::{
    names::{BackupId, ClusterName, LocationName},
    records::BackupRecord,
};
use sexton_retention::lock::{self, LockMode};
use sexton_shared::{catalog::CasError, object_store::ObjectStore};

use super::Worker;
use crate::group_plan::GroupPlan;

/// Locks set at once per run: enough to keep the store busy, few enough to be polite.
const LOCKS_IN_FLIGHT: usize = 8;

/// Where a group's backups are locked: primary's store, or a location's with the copies there.
#[derive(Clone, Copy)]
struct Target<'a> {
    store: &'a ObjectStore,
    location: Option<&'a LocationName>,
}

impl Worker {
    /// Sets or lengthens the locks the group's plan asks for. `Err` when one could not be set:
    /// the run then marks nothing in the group (a backup not yet locked must not push others
    /// out), and the next run tries again.
    /// Returns each kept backup's lock date now (the later of what was set and what was
    /// asked), for the binlog segments its bases need ([`Worker::lock_segments`]).
    pub(super) async fn lock_planned(
        &self,
        group: &GroupPlan,
        now: DateTime<Utc>,
    ) -> anyhow::Result<HashMap<String, DateTime<Utc>>> {
        let (setting, store) = match &group.location {
            None => (self.lock.as_ref(), Some(&self.store)),
            Some(location) => (
                self.location_locks.get(location),
                self.locations.get(location),
            ),
        };
        let (Some(setting), Some(store), Some(plan)) = (setting, store, &group.decision) else {
            return Ok(HashMap::new());
        };
        let target = Target {
            store,
            location: group.location.as_ref(),
        };
        let cluster = &group.cluster;
        if target.location.is_none() {
            // Counted once, where the plan was decided.
            let locked = group.locked_only.unwrap_or_default();
            let labels = [cluster.as_str(), group.plan.as_str()];
            self.metrics
                .locked_only
                .with_label_values(&labels)
                .set(locked.backups as i64);
            self.metrics
                .locked_only_bytes
                .with_label_values(&labels)
                .set(locked.bytes as i64);
        }
        let wanted = lock::lock_dates(&group.members.engine, plan, &setting.tiers);
        let current: HashMap<&str, Option<DateTime<Utc>>> = group
            .members
            .engine
            .backups
            .iter()
            .map(|b| (b.id.as_str(), b.locked_until))
            .collect();
        let extend = lock::extensions(&wanted, |id| current.get(id).copied().flatten(), now);
        let mut effective: HashMap<String, DateTime<Utc>> = current
            .iter()
            .filter_map(|(id, set)| Some((id.to_string(), (*set)?)))
            .collect();
        for (id, until) in &extend {
            effective.insert(id.to_string(), *until);
        }
        effective.retain(|_, until| *until > now);
        if extend.is_empty() {
            return Ok(effective);
        }
        let mode = setting.mode;
        let jobs: Vec<(String, DateTime<Utc>, bool)> = extend
            .into_iter()
            .map(|(id, until)| {
                let first = current.get(id).copied().flatten().is_none();
                (id.to_string(), until, first)
            })
            .collect();
        for chunk in jobs.chunks(LOCKS_IN_FLIGHT) {
            let outcomes = futures::future::join_all(chunk.iter().map(|(id, until, first)| {
                self.lock_counted(cluster, target, id, mode, *until, *first)
            }))
            .await;
            outcomes.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
        }
        Ok(effective)
    }

    /// Locks the binlog segments that locked bases may replay through (issue 29), as long as
    /// the longest of those bases' locks ([`lock::segment_lock_dates`]), at their current
    /// version (the index records no version): the primary's archive, or a location's copy
    /// of it (`location`, locked as the copies there that need it). Segments already locked
    /// as long by this replica are skipped: a restart costs one request per segment, once. A
    /// failure is counted and logged, and never holds back backup retention.
    pub(super) async fn lock_segments<'g>(
        &self,
        cluster: &ClusterName,
        location: Option<&LocationName>,
        groups: impl IntoIterator<Item = &'g GroupPlan>,
        segments: &[sexton_retention::BinlogSegment],
        locks: &HashMap<String, DateTime<Utc>>,
        now: DateTime<Utc>,
    ) {
        let (setting, store) = match location {
            None => (self.lock.as_ref(), Some(&self.store)),
            Some(location) => (
                self.location_locks.get(location),
                self.locations.get(location),
            ),
        };
        let (Some(setting), Some(store)) = (setting, store) else {
            return;
        };
        let backups = groups
            .into_iter()
            .flat_map(|g| g.members.engine.backups.iter());
        let wanted = lock::segment_lock_dates(backups, segments, locks);
        // Remembered per place: a location's keys may repeat the primary's in another bucket.
        let place = location.map_or("primary", LocationName::as_str);
        let remembered = |key: &str| format!("{place}\u{0}{key}");
        let due: Vec<(String, DateTime<Utc>)> = {
            let done = self.segment_locks.lock().expect("segment locks");
            wanted
                .into_iter()
                .filter(|(key, until)| {
                    *until > now && done.get(&remembered(key)).is_none_or(|set| set < until)
                })
                .map(|(key, until)| (key, whole_second_up(until)))
                .collect()
        };
        for chunk in due.chunks(LOCKS_IN_FLIGHT) {
            let outcomes = futures::future::join_all(chunk.iter().map(|(key, until)| async move {
                let outcome =
                    lock_objects(store, vec![(key.clone(), None)], setting.mode, *until).await;
                (key, until, outcome)
            }))
            .await;
            for (key, until, outcome) in outcomes {
                let label = match &outcome {
                    Ok(_) => {
                        self.segment_locks
                            .lock()
                            .expect("segment locks")
                            .insert(remembered(key), *until);
                        "segment"
                    }
                    Err(err) => {
                        tracing::warn!(%cluster, segment = %key, %until, error = %format!("{err:#}"), "binlog segment not locked; the next run tries again");
                        "failed"
                    }
                };
                self.metrics
                    .locks
                    .with_label_values(&[cluster.as_str(), label])
                    .inc();
            }
        }
    }

    /// [`Worker::lock_backup`], counted by outcome.
    async fn lock_counted(
        &self,
        cluster: &ClusterName,
        target: Target<'_>,
        id: &str,
        mode: LockMode,
        until: DateTime<Utc>,
        first: bool,
    ) -> anyhow::Result<()> {
        let outcome = self.lock_backup(cluster, target, id, mode, until).await;
        let label = match (&outcome, first) {
            (Err(_), _) => "failed",
            (Ok(()), true) => "set",
            (Ok(()), false) => "extended",
        };
        self.metrics
            .locks
            .with_label_values(&[cluster.as_str(), label])
            .inc();
        outcome.with_context(|| {
            let at = target.location.map_or("primary", |l| l.as_str());
            format!("locking backup {id} at {at} until {until}")
        })
    }

    /// Locks every object of one backup (its copy, at a location) until `until`, then records
    /// it.
    async fn lock_backup(
        &self,
        cluster: &ClusterName,
        target: Target<'_>,
        id: &str,
        mode: LockMode,
        until: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        let id = BackupId::new(id).map_err(|err| anyhow::anyhow!("backup id {id:?}: {err}"))?;
        // The store keeps whole seconds: round up, so the lock is never shorter than asked.
        let until = whole_second_up(until);
        let Some(record) = self.catalog.get(cluster, &id).await? else {
            // Gone since the plan: nothing to lock.
            return Ok(());
        };
        let objects = match objects_at(&record.value, target.location) {
            Some(objects) => objects,
            None => return Ok(()),
        };
        let set = lock_objects(target.store, objects, mode, until).await?;
        self.record_lock(cluster, target.location, &id, set).await
    }

    /// Writes `locked_until` (the later of the record's and `until`), re-reading on a
    /// conflict: the lock is a fact about the store, true whatever else changed.
    async fn record_lock(
        &self,
        cluster: &ClusterName,
        location: Option<&LocationName>,
        id: &BackupId,
        until: DateTime<Utc>,
    ) -> anyhow::Result<()> {
        for _ in 0..5 {
            let Some(record) = self.catalog.get(cluster, id).await? else {
                return Ok(());
            };
            let mut locked = record.value.clone();
            let slot = match location {
                None => &mut locked.locked_until,
                Some(location) => match locked.copies.get_mut(location) {
                    Some(copy) => &mut copy.locked_until,
                    None => return Ok(()),
                },
            };
            if slot.is_some_and(|set| set >= until) {
                return Ok(());
            }
            *slot = Some(until);
            // Not a mark: a job already published for this record stays valid.
            locked.keep_mark(record.revision);
            match self.catalog.update(&locked, record.revision).await {
                Ok(_) => {
                    let at = location.map_or("primary", |l| l.as_str());
                    tracing::info!(%cluster, backup = %id, location = at, %until, "backup locked");
                    return Ok(());
                }
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(err),
            }
        }
        anyhow::bail!("backup {id}: the record kept changing while its lock was recorded")
    }
}

/// The objects of `record` at `location` (primary when `None`), each with the version written
/// there when it was recorded: intake's at primary, the copier's at a location. A record
/// written before intake kept its objects: its artifacts, at their current version. `None`:
/// the location holds no copy of it.
fn objects_at(
    record: &BackupRecord,
    location: Option<&LocationName>,
) -> Option<Vec<(String, Option<String>)>> {
    let pairs = |objects: &[sexton_model::wire::ObjectDigest]| {
        objects
            .iter()
            .map(|object| (object.key.clone(), object.version_id.clone()))
            .collect()
    };
    match location {
        None if record.objects.is_empty() => Some(
            record
                .all_keys()
                .into_iter()
                .map(|key| (key, None))
                .collect(),
        ),
        None => Some(pairs(&record.objects)),
        Some(location) => record.copies.get(location).map(|copy| pairs(&copy.objects)),
    }
}

/// Locks each of `targets` (a key, and the version recorded where there is one) until
/// `until`. Returns the date every object is now locked until at least: `until`, also where
/// the store already held a longer lock (a catalog rebuilt by an import knows no lock; the
/// store refuses to shorten one, and reading it back proves it is long enough).
async fn lock_objects(
    store: &ObjectStore,
    mut targets: Vec<(String, Option<String>)>,
    mode: LockMode,
    until: DateTime<Utc>,
) -> anyhow::Result<DateTime<Utc>> {
    // metadata.json last, as everywhere: a backup is whole only with it.
    targets.sort_by_key(|(key, _)| BackupRecord::is_metadata_key(key));
    for (key, version) in &targets {
        match store
            .lock_version(key, version.as_deref(), mode, until)
            .await
        {
            Ok(()) => {}
            Err(err) if err.code == "AccessDenied" => {
                // Perhaps already locked for longer: read it back, never guess.
                match store.retention_of(key, version.as_deref()).await? {
                    Some(held) if held.until >= until => {}
                    _ => return Err(err.into()),
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(until)
}

/// `at`, or the next whole second when it has a fraction.
fn whole_second_up(at: DateTime<Utc>) -> DateTime<Utc> {
    if at.timestamp_subsec_nanos() == 0 {
        at
    } else {
        DateTime::from_timestamp(at.timestamp() + 1, 0).unwrap_or(at)
    }
}
