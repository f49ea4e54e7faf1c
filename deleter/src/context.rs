//! The deleter's context: what every part of a replica shares (its stores, the catalog and its
//! views, the schedules, the plugins, the audit trail, the metrics and the replica's budget of
//! `DeleteObjects` requests). The delete pipeline that works with it is [`crate::batch`]; the
//! API, the dead letters and the copy deletions read the same context.

use std::sync::Arc;

use sexton_shared::{
    catalog::Catalog, config::Config, object_store::ObjectStore, schedules_view::SchedulesView,
    service::Started, topology::Topology,
};

use crate::{metrics::Metrics, plugins::Plugins, view::CatalogViews};

/// `DeleteObjects` requests a batch keeps in flight.
pub(crate) const REQUESTS_IN_FLIGHT: usize = 2;

pub struct Deleter {
    topology: Topology,
    catalog: Catalog,
    /// Each cluster's catalog, shared with the binlog collector.
    views: Arc<CatalogViews>,
    /// The schedules (the policies jobs are judged with), brought up to date per batch.
    schedules: SchedulesView,
    store: ObjectStore,
    prefix: String,
    plugins: Plugins,
    metrics: Arc<Metrics>,
    /// The audit trail: claims before any object goes, then objects, records and plugin calls.
    audit: sexton_shared::audit::Audit,
    /// The replica's `DeleteObjects` requests in flight, all batches together:
    /// [`REQUESTS_IN_FLIGHT`] per batch of `deleter.concurrency`. One batch more than that is
    /// worked on ([`Deleter::workers`]), so that while one judges, claims or records, the
    /// others keep the store's requests full.
    requests: tokio::sync::Semaphore,
}

impl Deleter {
    /// The deleter's state: its object store, the catalog and its views, the schedules, the
    /// plugins' registrations, the audit trail and its metrics.
    pub async fn open(config: &Config, started: &Started) -> anyhow::Result<Deleter> {
        let store = ObjectStore::connect(&config.s3).await?;
        let metrics = Arc::new(Metrics::new());
        let topology = started.topology.clone();
        Ok(Deleter {
            catalog: Catalog::new(topology.catalog.clone()),
            views: Arc::new(CatalogViews::fed(topology.catalog.clone())),
            schedules: SchedulesView::new(topology.schedules.clone()),
            plugins: Plugins::new(
                topology.plugins.clone(),
                started.client.clone(),
                config.deleter.plugin_timeout,
                metrics.clone(),
            ),
            audit: sexton_shared::audit::Audit::new(
                topology.jetstream.clone(),
                "deleter",
                metrics.audit_entries.clone(),
            ),
            topology,
            store,
            prefix: config.s3.prefix.clone(),
            metrics,
            requests: tokio::sync::Semaphore::new(config.deleter.concurrency * REQUESTS_IN_FLIGHT),
        })
    }

    /// Each cluster's catalog as this replica last read it (the binlog collector reads it too).
    pub fn views(&self) -> Arc<CatalogViews> {
        self.views.clone()
    }

    /// How many batch workers a replica runs: `deleter.concurrency` deleting, and one more
    /// judging and claiming its batch meanwhile. With exactly `concurrency` workers the store
    /// sat idle for a worker's judge, claim and record phases (17-19 % of a batch at 20,000
    /// backups, deletion bench, issue 17).
    pub fn workers(config: &Config) -> usize {
        config.deleter.concurrency + 1
    }

    pub fn audit(&self) -> &sexton_shared::audit::Audit {
        &self.audit
    }

    /// The schedules as this replica last read them.
    pub fn schedules(&self) -> &SchedulesView {
        &self.schedules
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub fn store(&self) -> &ObjectStore {
        &self.store
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The replica's permits for `DeleteObjects` requests in flight, all batches together.
    pub(crate) fn requests(&self) -> &tokio::sync::Semaphore {
        &self.requests
    }
}
