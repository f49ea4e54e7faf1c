//! The copier (issue 28): takes copy jobs from `SEXTON_COPIES` and copies a backup from the
//! primary store to another location, objects through bounded memory, `metadata.json` last,
//! each checked against the size and SHA-256 intake recorded, ancestors first. Only once every
//! object is written does it record the copy in the catalog (a compare-and-set on the record),
//! so a copier killed at any point leaves nothing that counts; the next delivery of the job
//! copies again. It deletes nothing anywhere.
//!
//! A job is a claim: the copier copies only a backup the catalog holds, with the uid the job
//! names, completed, that a copy rule sends to the job's location, to a location of its own
//! configuration. Anything else is refused as poison (an incident, nothing copied).
//!
//! Its steps, a module each: `consume` (the job loop), `copy` (copying one backup), `record`
//! (making a copy count in the catalog), `binlog` (the binlog archive), `passes` (the periodic
//! pass: awaited copies, binlog, `transitions`), `report` (incidents, scrubs and retention runs
//! asked for), `lease` (a cluster's turn across replicas).

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::Context as _;
use sexton_model::names::{ClusterName, LocationName};
use sexton_shared::{
    catalog::Catalog,
    channels,
    config::Config,
    object_store::{transfer::UploadSettings, ObjectStore},
    telemetry, topology,
    topology::Topology,
    Shutdown,
};

mod binlog;
mod consume;
mod copy;
mod lease;
pub mod metrics;
mod outcome;
mod passes;
mod record;
mod report;
mod transitions;

/// A location the copier writes to: its client (its own credentials) and default class.
#[derive(Clone)]
struct Location {
    store: ObjectStore,
    storage_class: Option<String>,
    /// The location locks what it keeps (`[locations.<name>.lock]`, issue 29): a copy landing
    /// there asks for a retention run, which locks it at once.
    locked: bool,
}

/// A replica's turn at a cluster: the cluster's slot in this process, then its lease across
/// replicas ([`lease`]). Both go when it is dropped.
struct Turn<'a> {
    _lease: lease::Lease,
    _local: tokio::sync::MutexGuard<'a, ()>,
}

impl Copier {
    /// Waits for `cluster`'s turn in this replica, then takes its lease: `None` when another
    /// replica holds it now.
    async fn turn(&self, cluster: &ClusterName) -> anyhow::Result<Option<Turn<'_>>> {
        let local = self.clusters.lock(cluster).await;
        Ok(self.leases.try_take(cluster).await?.map(|lease| Turn {
            _lease: lease,
            _local: local,
        }))
    }
}

/// What every copy job shares.
struct Copier {
    topology: Topology,
    catalog: Catalog,
    source: ObjectStore,
    locations: BTreeMap<LocationName, Location>,
    settings: UploadSettings,
    metrics: Arc<metrics::Metrics>,
    /// One copy job of a cluster at a time: a chain's jobs copy the same ancestors, and two of
    /// them at once wrote one backup twice, the second still writing after the location's
    /// retention had deleted the first (objects left there that no copy counts). Within this
    /// replica; `leases` does the same across replicas.
    clusters: sexton_shared::service::ClusterLocks,
    leases: lease::Leases,
    /// Each cluster's records, caught up before each binlog pass (a location's horizon).
    views: sexton_shared::catalog_view::CatalogView<sexton_shared::catalog_view::Records>,
    schedules: sexton_shared::schedules_view::SchedulesView,
    /// The last problem reported per (cluster, location) binlog archive: one incident per
    /// new problem, not one per pass.
    binlog_reported: std::sync::Mutex<BTreeMap<(ClusterName, LocationName), String>>,
}

pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let started = sexton_shared::service::start("copier", &config, shutdown).await?;
    let copier = Arc::new(Copier::open(&config, &started).await?);
    // Ready with NATS: a location (or the primary) being down delays copies, it does not make
    // the copier unready, so one store's outage never restarts the service.
    let readiness = telemetry::nats_readiness(started.client.clone());
    let registry = &copier.metrics.registry;
    started
        .serve("copier", &config, registry, readiness)
        .await?;
    let consumer = channels::COPY_DURABLE
        .open(
            &started.jetstream,
            None,
            channels::Settings {
                ack_wait: config.copier.ack_wait,
                max_ack_pending: Some((4 * config.copier.concurrency) as i64),
            },
        )
        .await?;
    let (mut tasks, shutdown) = (started.tasks, started.shutdown);
    copier.metrics.consumer.spawn_poller(
        started.jetstream,
        topology::STREAM_COPIES,
        topology::CONSUMER_COPIER,
        Duration::from_secs(5),
        shutdown.clone(),
    );
    let interval = config.copier.binlog_interval;
    let passes = passes::binlog_passes(copier.clone(), interval, shutdown.clone());
    tasks.spawn("binlog copies", passes);
    let (concurrency, ack_wait) = (config.copier.concurrency, config.copier.ack_wait);
    let jobs = consume::consume(copier, consumer, concurrency, ack_wait, shutdown);
    tasks.spawn("copy jobs", jobs);
    tasks.join(Duration::from_secs(30)).await
}

impl Copier {
    /// The copier's state: its stores (the primary and each location), its leases' bucket,
    /// its views of the catalog and the schedules, its metrics.
    async fn open(
        config: &Config,
        started: &sexton_shared::service::Started,
    ) -> anyhow::Result<Copier> {
        let source = ObjectStore::connect(&config.s3).await?;
        let mut locations = BTreeMap::new();
        for (name, store) in ObjectStore::connect_locations(config).await? {
            let configured = config.locations.get(name.as_str());
            let storage_class = configured.and_then(|location| location.storage_class.clone());
            let locked = configured.is_some_and(|location| location.s3.lock.is_some());
            locations.insert(
                name,
                Location {
                    store,
                    storage_class,
                    locked,
                },
            );
        }
        tracing::info!(locations = ?locations.keys().collect::<Vec<_>>(), "copying to");
        let leases = topology::copy_leases_bucket(&started.jetstream, config.nats.replicas)
            .await
            .context("opening the copy leases' bucket")?;
        let topology = started.topology.clone();
        Ok(Copier {
            catalog: Catalog::new(topology.catalog.clone()),
            views: sexton_shared::catalog_view::CatalogView::new(topology.catalog.clone()),
            schedules: sexton_shared::schedules_view::SchedulesView::new(
                topology.schedules.clone(),
            ),
            binlog_reported: Default::default(),
            topology,
            source,
            locations,
            settings: UploadSettings {
                part_size: config.copier.part_size,
                concurrency: config.copier.parts_in_flight,
            },
            metrics: Arc::new(metrics::Metrics::new()),
            clusters: sexton_shared::service::ClusterLocks::new(64),
            leases: lease::Leases::new(leases),
        })
    }
}
