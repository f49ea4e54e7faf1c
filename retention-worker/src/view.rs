//! The retention-worker's view of the catalog (issue 17): each cluster's records, grouped by
//! plan and already in the engine's form, brought up to date before every run by reading only
//! what the catalog's stream stored since the run before.
//!
//! A run used to list the cluster's whole catalog (every KV entry, read through an ordered
//! consumer) and convert every record to the engine's form, so its cost in NATS bytes and CPU
//! grew with the catalog, not with what changed: at 100,000 records, tens of megabytes per
//! checkpoint. Now the first run of a cluster lists it once; every later run reads the changes
//! after the last sequence it applied (an ordered consumer filtered to the cluster's keys,
//! from that sequence) and applies them in stream order: a put replaces the record (and its
//! engine form) in place, a delete or purge removes it.
//!
//! **Freshness.** [`CatalogView::current`] returns only after applying every change the stream
//! had stored when its consumer was created, so a run decides on a catalog at least as fresh
//! as a full listing started at the same moment — which is what runs read before. There is no
//! background watch whose lag could matter: the catch-up happens in the run, under the
//! cluster's lock, and a run that cannot catch up fails (retried later) instead of deciding on
//! an older view. A record changed after the catch-up is caught where it always was: the mark
//! is a compare-and-set on the revision the view holds (a conflict asks for another run), and
//! the deleter judges every job again on its own fresh read before it deletes anything.
//!
//! **Throwing it away.** Nothing here is state that matters: on any error (a read that fails,
//! an entry that does not decode, a record under another backup's key) the cluster's view is
//! dropped and the next run lists the cluster again, as runs always did. A replica's view is
//! its own; replicas never share or wait for each other's.
//!
//! Memory: a record is held once (behind an `Arc`, so a run's groups share it) plus its engine
//! form and an index entry; the bench `tests/benches/retention_scale.rs` prints the bytes per
//! record.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context as _;
use async_nats::jetstream::{
    consumer::{pull::OrderedConfig, DeliverPolicy},
    kv,
};
use futures::StreamExt;
use sexton_shared::{
    catalog::{decode_record, Catalog, Versioned},
    names::{BackupId, ClusterName, PlanName},
    records::BackupRecord,
};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// How long a catch-up read may wait for the next catalog change it knows is pending.
const CATCH_UP_STALL: std::time::Duration = std::time::Duration::from_secs(10);

/// Every cluster's view on this replica.
pub struct CatalogView {
    store: kv::Store,
    catalog: Catalog,
    clusters: Mutex<HashMap<ClusterName, Arc<Mutex<ClusterView>>>>,
}

/// One cluster's records by plan, and the first stream sequence not yet applied (0: never
/// loaded).
#[derive(Default)]
pub struct ClusterView {
    next_sequence: u64,
    groups: Vec<GroupView>,
    /// Where each backup is: (group slot, index in the group).
    location: HashMap<BackupId, (u32, u32)>,
    /// What the last [`CatalogView::current`] read to bring this view up to date.
    pub last_refresh: Refresh,
}

/// The records of one retention group (cluster and plan), in two aligned forms: the catalog's
/// records and the engine's catalog built from them, so a run evaluates without converting.
pub struct GroupView {
    pub plan: PlanName,
    pub records: Vec<Arc<Versioned<BackupRecord>>>,
    /// `engine.backups[i]` is `records[i].value.to_engine()`; the binlog segments are set by
    /// the run that evaluates it.
    pub engine: sexton_retention::Catalog,
}

/// What one catch-up read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refresh {
    /// The cluster was listed whole (first run, or after the view was dropped).
    pub full_listing: bool,
    /// Changes applied from the stream after the listing (or since the last run).
    pub changes: u64,
    /// Their subjects and payloads, in bytes.
    pub change_bytes: u64,
}

impl CatalogView {
    pub fn new(store: kv::Store) -> CatalogView {
        CatalogView {
            catalog: Catalog::new(store.clone()),
            store,
            clusters: Mutex::new(HashMap::new()),
        }
    }

    /// The cluster's records as of now, locked for the caller: runs and previews of the same
    /// cluster on this replica take turns, each with every change stored before it began.
    pub async fn current(
        &self,
        cluster: &ClusterName,
    ) -> anyhow::Result<OwnedMutexGuard<ClusterView>> {
        let view = self
            .clusters
            .lock()
            .await
            .entry(cluster.clone())
            .or_default()
            .clone();
        let mut view = view.lock_owned().await;
        if let Err(err) = self.refresh(cluster, &mut view).await {
            // Start from a full listing next time rather than trust a view of unknown age.
            *view = ClusterView::default();
            return Err(err);
        }
        Ok(view)
    }

    /// Forgets every cluster's view (the next run of each lists it again).
    pub async fn clear(&self) {
        self.clusters.lock().await.clear();
    }

    async fn refresh(&self, cluster: &ClusterName, view: &mut ClusterView) -> anyhow::Result<()> {
        let mut refresh = Refresh::default();
        if view.next_sequence == 0 {
            // Every change after `last` is replayed below, so one made while the listing runs
            // is applied again, in stream order, which changes nothing.
            let mut stream = self.store.stream.clone();
            let last = stream
                .info()
                .await
                .context("reading the catalog stream's state")?
                .state
                .last_sequence;
            let records = self.catalog.list_cluster(cluster).await?;
            *view = ClusterView::default();
            for record in records {
                let id = record.value.id.clone();
                view.apply(cluster, id, Some(record))?;
            }
            view.next_sequence = last + 1;
            refresh.full_listing = true;
        }
        let consumer = self
            .store
            .stream
            .create_consumer(OrderedConfig {
                filter_subject: format!("{}{cluster}.*", self.store.prefix),
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: view.next_sequence,
                },
                ..Default::default()
            })
            .await
            .context("reading catalog changes")?;
        let _delete = sexton_shared::nats::EphemeralConsumer::new(
            &self.store.stream,
            &consumer.cached_info().name,
        );
        let mut pending = consumer.cached_info().num_pending;
        if pending > 0 {
            let mut messages = consumer
                .messages()
                .await
                .context("reading catalog changes")?;
            let key_prefix = format!("{}{cluster}.", self.store.prefix);
            while pending > 0 {
                // Never wait for ever under the cluster's lock: a read that stalls fails the
                // run (it is retried, and the next one lists the catalog again), instead of
                // holding every later run of the cluster behind it.
                let message = tokio::time::timeout(CATCH_UP_STALL, messages.next())
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "catalog changes stalled: nothing within {CATCH_UP_STALL:?} with {pending} pending"
                        )
                    })?
                    .context("catalog changes ended early")?
                    .context("reading catalog changes")?;
                let info = message
                    .info()
                    .map_err(|err| anyhow::anyhow!("catalog change metadata: {err}"))?;
                pending = info.pending;
                let revision = info.stream_sequence;
                view.next_sequence = revision + 1;
                refresh.changes += 1;
                refresh.change_bytes += (message.subject.len() + message.payload.len()) as u64;
                let Some(id) = message.subject.strip_prefix(key_prefix.as_str()) else {
                    continue;
                };
                let id = BackupId::new(id)
                    .with_context(|| format!("catalog key {}", message.subject))?;
                let removed = message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("KV-Operation"))
                    .is_some();
                if removed {
                    view.apply(cluster, id, None)?;
                    continue;
                }
                // One unreadable entry fails the run, as it failed the listing: deciding
                // without it could delete the parent of a backup nobody can see.
                let value = decode_record(&message.payload)
                    .with_context(|| format!("catalog entry {}", message.subject))?;
                view.apply(cluster, id, Some(Versioned { value, revision }))?;
            }
        }
        view.last_refresh = refresh;
        Ok(())
    }
}

impl ClusterView {
    /// The groups, by plan name (the order runs have always taken them in).
    pub fn groups_mut(&mut self) -> Vec<&mut GroupView> {
        let mut groups: Vec<&mut GroupView> = self
            .groups
            .iter_mut()
            .filter(|group| !group.records.is_empty())
            .collect();
        groups.sort_by(|a, b| a.plan.cmp(&b.plan));
        groups
    }

    /// Records in the view.
    pub fn len(&self) -> usize {
        self.location.len()
    }

    pub fn is_empty(&self) -> bool {
        self.location.is_empty()
    }

    /// Applies one change of the entry `<cluster>.<id>`: the record now stored there, or `None`
    /// when it was removed.
    fn apply(
        &mut self,
        cluster: &ClusterName,
        id: BackupId,
        change: Option<Versioned<BackupRecord>>,
    ) -> anyhow::Result<()> {
        if let Some(record) = &change {
            // Retention groups records by the fields inside them; one filed under another
            // backup's key (or cluster) would be planned as something it is not.
            anyhow::ensure!(
                record.value.id == id && record.value.cluster == *cluster,
                "catalog entry {cluster}.{id} holds backup {}.{}",
                record.value.cluster,
                record.value.id
            );
        }
        let existing = self.location.get(&id).copied();
        match (existing, change) {
            (None, None) => {}
            (Some((slot, index)), None) => self.remove_at(slot, index),
            (Some((slot, index)), Some(record))
                if self.groups[slot as usize].plan == record.value.plan =>
            {
                let group = &mut self.groups[slot as usize];
                group.engine.backups[index as usize] = record.value.to_engine();
                group.records[index as usize] = Arc::new(record);
            }
            (Some((slot, index)), Some(record)) => {
                self.remove_at(slot, index);
                self.insert(id, record);
            }
            (None, Some(record)) => self.insert(id, record),
        }
        Ok(())
    }

    fn insert(&mut self, id: BackupId, record: Versioned<BackupRecord>) {
        let slot = match self
            .groups
            .iter()
            .position(|group| group.plan == record.value.plan)
        {
            Some(slot) => slot,
            None => {
                self.groups.push(GroupView {
                    plan: record.value.plan.clone(),
                    records: Vec::new(),
                    engine: sexton_retention::Catalog::default(),
                });
                self.groups.len() - 1
            }
        };
        let group = &mut self.groups[slot];
        self.location
            .insert(id, (slot as u32, group.records.len() as u32));
        group.engine.backups.push(record.value.to_engine());
        group.records.push(Arc::new(record));
    }

    fn remove_at(&mut self, slot: u32, index: u32) {
        let group = &mut self.groups[slot as usize];
        let removed = group.records.swap_remove(index as usize);
        group.engine.backups.swap_remove(index as usize);
        self.location.remove(&removed.value.id);
        if let Some(moved) = group.records.get(index as usize) {
            if let Some(location) = self.location.get_mut(&moved.value.id) {
                *location = (slot, index);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn record(id: &str, plan: &str, minute: u32, revision: u64) -> Versioned<BackupRecord> {
        let value: BackupRecord = serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}-{revision}"), "cluster": "c1", "plan": plan,
            "backup_name": "s", "kind": "full", "status": "completed",
            "completed_at": format!("2026-01-01T00:{:02}:00Z", minute % 60),
        }))
        .unwrap();
        Versioned { value, revision }
    }

    /// The view against a plain map of the same changes: every record once, in the group of
    /// its plan, its engine form beside it, every location right.
    fn check(view: &ClusterView, model: &BTreeMap<String, (String, u64)>) {
        assert_eq!(view.len(), model.len());
        let mut seen = 0;
        for (slot, group) in view.groups.iter().enumerate() {
            assert_eq!(group.records.len(), group.engine.backups.len());
            for (index, (record, engine)) in
                group.records.iter().zip(&group.engine.backups).enumerate()
            {
                let id = record.value.id.to_string();
                let (plan, revision) = &model[&id];
                assert_eq!(record.value.plan.as_str(), plan);
                assert_eq!(group.plan.as_str(), plan);
                assert_eq!(record.revision, *revision);
                assert_eq!(*engine, record.value.to_engine());
                assert_eq!(view.location[&record.value.id], (slot as u32, index as u32));
                seen += 1;
            }
        }
        assert_eq!(seen, model.len());
    }

    #[test]
    fn changes_in_any_order_leave_the_view_equal_to_the_catalog() {
        let cluster = ClusterName::new("c1").unwrap();
        let mut view = ClusterView::default();
        let mut model: BTreeMap<String, (String, u64)> = BTreeMap::new();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for revision in 1..3000u64 {
            let id = format!("b{}", next() % 40);
            let plan = ["daily", "weekly", "hourly"][(next() % 3) as usize];
            if next() % 4 == 0 {
                view.apply(&cluster, BackupId::new(id.as_str()).unwrap(), None)
                    .unwrap();
                model.remove(&id);
            } else {
                let change = record(&id, plan, (revision % 60) as u32, revision);
                view.apply(&cluster, BackupId::new(id.as_str()).unwrap(), Some(change))
                    .unwrap();
                model.insert(id, (plan.to_string(), revision));
            }
            check(&view, &model);
        }
    }

    #[test]
    fn a_record_under_another_backups_key_is_refused() {
        let cluster = ClusterName::new("c1").unwrap();
        let mut view = ClusterView::default();
        let refused = view.apply(
            &cluster,
            BackupId::new("b2").unwrap(),
            Some(record("b1", "daily", 0, 1)),
        );
        assert!(refused.is_err());
        let other_cluster = ClusterName::new("c2").unwrap();
        assert!(view
            .apply(
                &other_cluster,
                BackupId::new("b1").unwrap(),
                Some(record("b1", "daily", 0, 1))
            )
            .is_err());
    }
}
