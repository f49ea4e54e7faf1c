//! The scheduler: owns schedules and the catalog's front door.
//!
//! - [`timers`] keeps every schedule in a queue ordered by its next run, fed by a watch on the
//!   schedules bucket, and publishes `due-backup` events exactly once per tick as consumers see
//!   it (a `Nats-Msg-Id` of schedule + tick, then a compare-and-set of the schedule's status).
//! - [`reports`] turns executor reports into catalog records and `checkpoint-complete` events.
//! - [`api`] answers the request/reply API the `sexton` CLI talks to.
//! - [`sweeps`] publishes at most one `retention-sweep` per cluster per interval and records it
//!   as the cluster's `last_retention_run`.
//!
//! Decisions come from `sexton-schedule` (pure); this crate only moves values in and out.

pub mod api;
pub mod dues;
pub mod intake;
mod merges;
pub mod metrics;
pub mod reports;
mod schedule_status;
pub mod sweeps;
pub mod timers;
pub mod verdicts;
pub mod verify;

use std::sync::Arc;

use anyhow::Context as _;
use sexton_shared::{config::Config, telemetry, topology, Shutdown};

/// How long the scheduler's tasks have to stop once it is stopping: a firing burst's records
/// and an API request in hand finish well within it.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs the scheduler until `shutdown` trips, or until one of its tasks fails (which stops the
/// others). `main` and the tests both call this.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let started = sexton_shared::service::start("scheduler", &config, shutdown).await?;
    let buckets = Buckets::open(&started.jetstream, &config).await?;
    let metrics = Arc::new(metrics::Metrics::new());
    // Ready once connected and answering the API: a client that waits for /readyz and then
    // calls the API must find a responder.
    let api_ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readiness = api_readiness(started.client.clone(), api_ready.clone());
    started
        .serve("scheduler", &config, &metrics.registry, readiness)
        .await?;
    // The API listens before the timers fire anything: an executor asks `backup.taken` about a
    // due-backup as soon as it has one, and with no answer it takes the backup without knowing
    // whether it was taken before.
    let api_listener = api::subscribe(&started.client).await?;
    api_ready.store(true, std::sync::atomic::Ordering::Release);
    let sexton_shared::service::Started {
        mut tasks,
        shutdown,
        client,
        topology,
        ..
    } = started;
    let scheduler = Scheduler::open(topology, config, metrics, buckets, shutdown).await?;
    // The timers' watch keeps the set of clusters with schedules; the sweeps read it.
    let (clusters, clusters_seen) = tokio::sync::watch::channel(Default::default());
    tasks.spawn("timers", scheduler.timers(clusters));
    tasks.spawn("reports", scheduler.reports());
    // Restore tests: the scheduled ones, the verdicts, and the API's on-demand ones share the
    // tests this replica waits on.
    let shutdown = &scheduler.shutdown;
    tasks.spawn(
        "verify",
        verify::run(scheduler.verifier(), shutdown.clone()),
    );
    tasks.spawn(
        "verdicts",
        verdicts::run(scheduler.verifier(), shutdown.clone()),
    );
    tasks.spawn("api", scheduler.api(api_listener));
    tasks.spawn("sweeps", scheduler.sweeps(clusters_seen));
    let stopped = tasks.join(DRAIN).await;
    client.flush().await.ok();
    tracing::info!("scheduler stopped");
    stopped
}

/// What the scheduler's tasks share once it has started: each method hands one task its part.
struct Scheduler {
    topology: topology::Topology,
    config: Config,
    metrics: Arc<metrics::Metrics>,
    buckets: Buckets,
    store: sexton_shared::object_store::ObjectStore,
    verifier: verify::Verifier,
    locations: std::collections::BTreeMap<
        sexton_model::names::LocationName,
        sexton_shared::object_store::ObjectStore,
    >,
    shutdown: Shutdown,
}

impl Scheduler {
    /// Connects the object stores: intake reads the bucket (a completed backup counts only once
    /// its objects are seen), and restore tests read the other locations too.
    async fn open(
        topology: topology::Topology,
        config: Config,
        metrics: Arc<metrics::Metrics>,
        buckets: Buckets,
        shutdown: Shutdown,
    ) -> anyhow::Result<Scheduler> {
        let store = sexton_shared::object_store::ObjectStore::connect(&config.s3)
            .await
            .context("configuring the object store")?;
        let locations =
            sexton_shared::object_store::ObjectStore::connect_locations(&config).await?;
        let verifier = verify::Verifier::new(&topology, &metrics, &store, &locations);
        Ok(Scheduler {
            topology,
            config,
            metrics,
            buckets,
            store,
            verifier,
            locations,
            shutdown,
        })
    }

    /// The restore tests this replica waits on, shared by the scheduled ones, the verdicts and
    /// the API's on-demand ones.
    fn verifier(&self) -> verify::Verifier {
        self.verifier.clone()
    }

    /// The timers, which publish the clusters with schedules on `clusters`.
    fn timers(
        &self,
        clusters: timers::ClusterSet,
    ) -> impl std::future::Future<Output = anyhow::Result<()>> + Send + 'static {
        timers::run(
            self.topology.clone(),
            self.buckets.dues.clone(),
            self.config.clone(),
            self.metrics.clone(),
            clusters,
            self.shutdown.clone(),
        )
    }

    /// The intake of executor reports.
    fn reports(&self) -> impl std::future::Future<Output = anyhow::Result<()>> + Send + 'static {
        reports::run(
            self.topology.clone(),
            self.buckets.clusters.clone(),
            self.store.clone(),
            self.buckets.dues.clone(),
            self.config.clone(),
            self.metrics.clone(),
            self.shutdown.clone(),
        )
    }

    /// The request/reply API, answering on `listener`.
    fn api(
        &self,
        listener: sexton_shared::api::Listener,
    ) -> impl std::future::Future<Output = anyhow::Result<()>> + Send + 'static {
        let edges = api::Edges {
            store: self.store.clone(),
            verifier: self.verifier(),
            locations: self.locations.clone(),
            dues: self.buckets.dues.clone(),
            retention_status: self.buckets.retention_status.clone(),
        };
        api::run(
            listener,
            self.topology.clone(),
            self.buckets.clusters.clone(),
            edges,
            self.config.clone(),
            self.metrics.clone(),
            self.shutdown.clone(),
        )
    }

    /// The retention sweeps, over the clusters the timers see (`clusters_seen`).
    fn sweeps(
        &self,
        clusters_seen: tokio::sync::watch::Receiver<
            std::collections::BTreeSet<sexton_model::names::ClusterName>,
        >,
    ) -> impl std::future::Future<Output = anyhow::Result<()>> + Send + 'static {
        sweeps::run(
            self.topology.clone(),
            self.buckets.clusters.clone(),
            self.config.clone(),
            self.metrics.clone(),
            clusters_seen,
            self.shutdown.clone(),
        )
    }
}

/// The buckets only the scheduler opens (besides the topology's), and those it creates for the
/// services whose users create nothing.
struct Buckets {
    clusters: async_nats::jetstream::kv::Store,
    dues: async_nats::jetstream::kv::Store,
    retention_status: async_nats::jetstream::kv::Store,
}

impl Buckets {
    async fn open(
        jetstream: &async_nats::jetstream::Context,
        config: &Config,
    ) -> anyhow::Result<Buckets> {
        let replicas = config.nats.replicas;
        let clusters = topology::clusters_bucket(jetstream, replicas)
            .await
            .context("opening the clusters bucket")?;
        let dues = topology::dues_bucket(jetstream, replicas)
            .await
            .context("opening the bucket of issued due-backups")?;
        // The copier's, created here: the copier's user creates nothing.
        topology::copy_leases_bucket(jetstream, replicas)
            .await
            .context("creating the copy leases' bucket")?;
        // The retention-worker's run statuses (issue 54): it writes them, the API reads them.
        let retention_status = topology::retention_status_bucket(jetstream, replicas)
            .await
            .context("creating the retention status bucket")?;
        // The retention-worker's partitions (issue 32), created here for the same reason.
        topology::partitions_bucket(jetstream, replicas)
            .await
            .context("creating the partitions' bucket")?;
        Ok(Buckets {
            clusters,
            dues,
            retention_status,
        })
    }
}

/// Ready once connected and once the API is subscribed (`api_ready`).
fn api_readiness(
    client: async_nats::Client,
    api_ready: Arc<std::sync::atomic::AtomicBool>,
) -> telemetry::ReadinessCheck {
    Arc::new(move || {
        let result = telemetry::nats_connected(&client).and_then(|()| {
            if api_ready.load(std::sync::atomic::Ordering::Acquire) {
                Ok(())
            } else {
                Err("the api is not subscribed yet".to_string())
            }
        });
        Box::pin(async move { result })
    })
}
