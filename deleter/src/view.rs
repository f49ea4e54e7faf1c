//! The deleter's copy of each cluster's catalog, brought up to date before every batch.
//!
//! Judging a job needs the whole retention group (is the backup still one the plan deletes?),
//! and a batch holds many jobs of the same cluster. Listing the cluster for every batch would
//! cost O(catalog) per batch; instead the first batch lists it once and every later batch reads
//! only what the catalog's stream stored since (an ordered consumer from the next sequence).
//! After [`CatalogViews::current`] returns, the copy holds every change stored before the
//! call: it is as fresh as a full listing made at that moment, and the claim that follows is
//! still a compare-and-set on the record itself.

use std::{collections::HashMap, sync::Arc};

use anyhow::Context as _;
use async_nats::jetstream::{
    consumer::{pull::OrderedConfig, DeliverPolicy},
    kv,
};
use futures::StreamExt;
use sexton_shared::{
    catalog::{decode_record, Catalog, Versioned},
    names::{BackupId, ClusterName},
    records::BackupRecord,
};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// One cluster's records, and the first stream sequence not yet applied (0: never loaded).
#[derive(Default)]
pub struct ClusterCache {
    pub records: HashMap<BackupId, Versioned<BackupRecord>>,
    next_sequence: u64,
}

pub struct CatalogViews {
    store: kv::Store,
    catalog: Catalog,
    clusters: Mutex<HashMap<ClusterName, Arc<Mutex<ClusterCache>>>>,
}

impl CatalogViews {
    pub fn new(store: kv::Store) -> CatalogViews {
        CatalogViews {
            catalog: Catalog::new(store.clone()),
            store,
            clusters: Mutex::new(HashMap::new()),
        }
    }

    /// The cluster's records as of now, locked for the caller: batches of the same cluster
    /// judge their jobs one after the other, each with every change the previous one made.
    pub async fn current(
        &self,
        cluster: &ClusterName,
    ) -> anyhow::Result<OwnedMutexGuard<ClusterCache>> {
        let cache = self
            .clusters
            .lock()
            .await
            .entry(cluster.clone())
            .or_default()
            .clone();
        let mut cache = cache.lock_owned().await;
        if let Err(err) = self.refresh(cluster, &mut cache).await {
            // Start from a full listing next time rather than trust a copy of unknown age.
            *cache = ClusterCache::default();
            return Err(err);
        }
        Ok(cache)
    }

    async fn refresh(&self, cluster: &ClusterName, cache: &mut ClusterCache) -> anyhow::Result<()> {
        if cache.next_sequence == 0 {
            // Every change after `last` is replayed below, so one made during the listing is
            // applied twice at worst, in stream order, which is harmless.
            let mut stream = self.store.stream.clone();
            let last = stream
                .info()
                .await
                .context("reading the catalog stream's state")?
                .state
                .last_sequence;
            let records = self.catalog.list_cluster(cluster).await?;
            cache.records = records
                .into_iter()
                .map(|r| (r.value.id.clone(), r))
                .collect();
            cache.next_sequence = last + 1;
        }
        let consumer = self
            .store
            .stream
            .create_consumer(OrderedConfig {
                filter_subject: format!("{}{cluster}.*", self.store.prefix),
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: cache.next_sequence,
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
        if pending == 0 {
            return Ok(());
        }
        let mut messages = consumer
            .messages()
            .await
            .context("reading catalog changes")?;
        let key_prefix = format!("{}{cluster}.", self.store.prefix);
        while pending > 0 {
            let message = messages
                .next()
                .await
                .context("catalog changes ended early")?
                .context("reading catalog changes")?;
            let info = message
                .info()
                .map_err(|err| anyhow::anyhow!("catalog change metadata: {err}"))?;
            pending = info.pending;
            let revision = info.stream_sequence;
            cache.next_sequence = revision + 1;
            let Some(id) = message.subject.strip_prefix(key_prefix.as_str()) else {
                continue;
            };
            let id =
                BackupId::new(id).with_context(|| format!("catalog key {}", message.subject))?;
            let removed = message
                .headers
                .as_ref()
                .and_then(|h| h.get("KV-Operation"))
                .is_some();
            if removed {
                cache.records.remove(&id);
                continue;
            }
            let value = decode_record(&message.payload)
                .with_context(|| format!("catalog entry {}", message.subject))?;
            cache.records.insert(id, Versioned { value, revision });
        }
        Ok(())
    }
}
