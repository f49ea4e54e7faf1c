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
pub mod metrics;
pub mod reports;
pub mod sweeps;
pub mod timers;
pub mod verdicts;
pub mod verify;

use std::sync::Arc;

use anyhow::Context as _;
use sexton_shared::{config::Config, service::TaskGroup, telemetry, topology, Shutdown};

/// How long the scheduler's tasks have to stop once it is stopping: a firing burst's records
/// and an API request in hand finish well within it.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs the scheduler until `shutdown` trips, or until one of its tasks fails (which stops the
/// others). `main` and the tests both call this.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut tasks = TaskGroup::new("scheduler", shutdown);
    let shutdown = tasks.shutdown();
    let client = sexton_shared::nats::connect(&config.nats, "sexton-scheduler").await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure_for(&jetstream, &config)
        .await
        .context("creating the nats topology")?;
    let clusters_bucket = topology::clusters_bucket(&jetstream, config.nats.replicas)
        .await
        .context("opening the clusters bucket")?;
    let dues = topology::dues_bucket(&jetstream, config.nats.replicas)
        .await
        .context("opening the bucket of issued due-backups")?;
    // The copier's, created here: the copier's user creates nothing.
    topology::copy_leases_bucket(&jetstream, config.nats.replicas)
        .await
        .context("creating the copy leases' bucket")?;
    // The retention-worker's run statuses (issue 54): it writes them, the API reads them.
    let retention_status = topology::retention_status_bucket(&jetstream, config.nats.replicas)
        .await
        .context("creating the retention status bucket")?;
    // The retention-worker's partitions (issue 32), created here for the same reason.
    topology::partitions_bucket(&jetstream, config.nats.replicas)
        .await
        .context("creating the partitions' bucket")?;
    let metrics = Arc::new(metrics::Metrics::new());
    // Ready once connected and answering the API: a client that waits for /readyz and then
    // calls the API must find a responder.
    let api_ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readiness: telemetry::ReadinessCheck = {
        let client = client.clone();
        let api_ready = api_ready.clone();
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
    };
    let addr = telemetry::serve(
        &config.http.listen,
        metrics.registry.clone(),
        readiness,
        shutdown.clone(),
    )
    .await?;
    sexton_shared::build::start(&client, "scheduler", &metrics.registry, shutdown.clone()).await?;
    tracing::info!(metrics = %telemetry::listen_text(addr), "scheduler started");

    // The API listens before the timers fire anything: an executor asks `backup.taken` about a
    // due-backup as soon as it has one, and with no answer it takes the backup without knowing
    // whether it was taken before.
    let api_listener = api::subscribe(&client).await?;
    api_ready.store(true, std::sync::atomic::Ordering::Release);
    // The timers' watch keeps the set of clusters with schedules; the sweeps read it.
    let (clusters, clusters_seen) = tokio::sync::watch::channel(Default::default());
    tasks.spawn(
        "timers",
        timers::run(
            topology.clone(),
            dues.clone(),
            config.clone(),
            metrics.clone(),
            clusters,
            shutdown.clone(),
        ),
    );
    // Intake reads the bucket: a completed backup counts only once its objects are seen.
    let store = sexton_shared::object_store::ObjectStore::connect(&config.s3)
        .await
        .context("configuring the object store")?;
    tasks.spawn(
        "reports",
        reports::run(
            topology.clone(),
            clusters_bucket.clone(),
            store.clone(),
            dues.clone(),
            config.clone(),
            metrics.clone(),
            shutdown.clone(),
        ),
    );
    // Restore tests: the scheduled ones, the verdicts, and the API's on-demand ones share the
    // tests this replica waits on.
    let locations = sexton_shared::object_store::ObjectStore::connect_locations(&config).await?;
    let verifier = verify::Verifier {
        topology: topology.clone(),
        catalog: sexton_shared::catalog::Catalog::new(topology.catalog.clone()),
        metrics: metrics.clone(),
        pending: verify::Pending::default(),
        places: verify::Places {
            primary: store.clone(),
            locations: locations.clone(),
        },
    };
    tasks.spawn("verify", verify::run(verifier.clone(), shutdown.clone()));
    tasks.spawn(
        "verdicts",
        verdicts::run(verifier.clone(), shutdown.clone()),
    );
    tasks.spawn(
        "api",
        api::run(
            api_listener,
            topology.clone(),
            clusters_bucket.clone(),
            api::Edges {
                store: store.clone(),
                verifier,
                locations,
                dues,
                retention_status,
            },
            config.clone(),
            metrics.clone(),
            shutdown.clone(),
        ),
    );
    tasks.spawn(
        "sweeps",
        sweeps::run(
            topology.clone(),
            clusters_bucket,
            config.clone(),
            metrics.clone(),
            clusters_seen,
            shutdown.clone(),
        ),
    );
    let stopped = tasks.join(DRAIN).await;
    client.flush().await.ok();
    tracing::info!("scheduler stopped");
    stopped
}
