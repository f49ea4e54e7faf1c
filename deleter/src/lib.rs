//! The deleter: trusts no job. It takes delete jobs in batches, judges each against the
//! catalog (unique id, `expiring` at the job's revision, not held, every key under the
//! cluster's prefix, and the retention plan made now still lets it go), claims it with a
//! compare-and-set to `deleting`, runs the delete plugins, deletes the data objects, then
//! `metadata.json`, then the catalog record — the objects of a whole batch in shared
//! `DeleteObjects` requests ([`batch`]). Every step is idempotent, so a job redelivered after
//! a crash finishes the work. Jobs that run out of deliveries are recorded from the
//! max-deliveries advisory ([`dead_letters`]). It also answers the plugin and orphan API
//! ([`api`]). Beside the delete jobs it garbage-collects binlog segments on a queue of its own
//! ([`binlog`]), rewriting each cluster's binlog index last with a conditional write, and
//! deletes copies at other locations that their retention let go ([`copies`]), collecting
//! each such location's binlog archive after its copies go ([`copies_binlog`]).

pub mod api;
pub mod batch;
pub mod binlog;
pub mod copies;
pub mod copies_binlog;
pub mod dead_letters;
pub mod job;
pub mod metrics;
pub mod orphans;
pub mod plugins;
pub mod trail;
pub mod view;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::consumer::PullConsumer;
use futures::{FutureExt as _, StreamExt};
use sexton_shared::{
    config::Config, object_store::ObjectStore, outcome::settle, service::TaskGroup, telemetry,
    topology, Shutdown,
};

/// How long the tasks have, once the deleter is stopping, to finish what they hold: the batches
/// in hand (each step is idempotent, but finishing is kinder), the binlog job under way, the
/// request being answered. One deadline for all of them, not one per task.
const DRAIN: Duration = Duration::from_secs(20);

/// Runs the deleter until `shutdown` trips, or until one of its tasks fails: the binlog
/// collector, the API, the dead letters (any failure stops every task, so an orchestrator
/// restarts the whole replica instead of keeping one that silently lost a part). `main` and
/// the tests both call this.
pub async fn run(config: Config, shutdown: Shutdown) -> anyhow::Result<()> {
    let mut tasks = TaskGroup::new("deleter", shutdown);
    let shutdown = tasks.shutdown();
    let client = sexton_shared::nats::connect(&config.nats, "sexton-deleter").await?;
    let jetstream = async_nats::jetstream::new(client.clone());
    let topology = topology::ensure_for(&jetstream, &config)
        .await
        .context("creating the nats topology")?;
    let store = ObjectStore::connect(&config.s3).await?;
    let metrics = Arc::new(metrics::Metrics::new());
    let readiness = {
        let client = client.clone();
        let store = store.clone();
        Arc::new(move || {
            let client = client.clone();
            let store = store.clone();
            Box::pin(async move {
                telemetry::nats_connected(&client)?;
                store
                    .check_reachable()
                    .await
                    .map_err(|err| format!("{err:#}"))
            })
                as std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send>>
        })
    };
    let addr = telemetry::serve(
        &config.http.listen,
        metrics.registry.clone(),
        readiness,
        shutdown.clone(),
    )
    .await?;
    sexton_shared::build::start(&client, "deleter", &metrics.registry, shutdown.clone()).await?;
    tracing::info!(metrics = %telemetry::listen_text(addr), "deleter started");

    let deleter = Arc::new(batch::Deleter::new(
        topology.clone(),
        store.clone(),
        client.clone(),
        &config,
        metrics.clone(),
    ));
    // Each other location's client, built from that location's settings alone: copy
    // deletions (issue 28), and the binlog collector reads each location's index.
    let locations = ObjectStore::connect_locations(&config).await?;
    // The binlog collector runs beside the delete jobs on a queue of its own, judging with the
    // same catalog views.
    tasks.spawn(
        "binlog collector",
        binlog::run(
            topology.clone(),
            deleter.views(),
            store,
            Arc::new(locations.clone()),
            config.clone(),
            metrics.registry.clone(),
            shutdown.clone(),
        ),
    );
    let stream = jetstream
        .get_stream(topology::STREAM_JOBS)
        .await
        .context("opening the jobs stream")?;
    let batch_jobs = config.deleter.batch_jobs;
    let consumer: PullConsumer = stream
        .get_or_create_consumer(
            topology::CONSUMER_DELETER,
            async_nats::jetstream::consumer::pull::Config {
                // A batch per unit of concurrency held and one more at hand (the spare worker
                // of `Deleter::workers` shares this: the value stays what existing consumers
                // were created with).
                max_ack_pending: (2 * config.deleter.concurrency * batch_jobs) as i64,
                // No backoff: JetStream applies it to acknowledgement timeouts, so with it a
                // batch still running after 1 s would be delivered again. Failed jobs are
                // naked with a growing delay instead (job::retry_delay), and a long batch
                // keeps its messages with progress acks.
                backoff: Vec::new(),
                ..topology::consumer_config(
                    topology::CONSUMER_DELETER,
                    Some(format!("{}.job.delete.*", topology::SUBJECT_ROOT)),
                    config.deleter.ack_wait,
                )
            },
        )
        .await
        .context("creating the deleter consumer")?;
    metrics.consumer.spawn_poller(
        jetstream.clone(),
        topology::STREAM_JOBS,
        topology::CONSUMER_DELETER,
        Duration::from_secs(5),
        shutdown.clone(),
    );
    tasks.spawn(
        "api",
        api::serve(client.clone(), deleter.clone(), shutdown.clone()),
    );
    tasks.spawn(
        "dead letters",
        dead_letters::run(deleter.clone(), shutdown.clone()),
    );
    // Copies at other locations that their retention let go (issue 28), on a durable of
    // their own.
    tasks.spawn(
        "copy deletions",
        copies::run(
            deleter.clone(),
            locations,
            jetstream.clone(),
            config.deleter.concurrency.max(1),
            config.deleter.ack_wait,
            shutdown.clone(),
        ),
    );
    for _ in 0..batch::Deleter::workers(&config) {
        let batches = work(
            consumer.clone(),
            deleter.clone(),
            jetstream.clone(),
            metrics.clone(),
            batch_jobs,
            config.deleter.ack_wait / 3,
            shutdown.clone(),
        );
        tasks.spawn("batches", async move {
            batches.await;
            Ok(())
        });
    }
    let stopped = tasks.join(DRAIN).await;
    client.flush().await.ok();
    tracing::info!("deleter stopped");
    stopped
}

/// How long a batch waits for more jobs in all, and for the next one.
const BATCH_LINGER: Duration = Duration::from_millis(250);
const BATCH_GAP: Duration = Duration::from_millis(20);

/// Hands back (naks) the jobs the client had already pulled for this worker and no batch had
/// started, so that another deleter takes them at once rather than after the ack wait. Takes
/// only what is already at hand, at most one prefetch's worth: every job taken lets the client
/// pull another, which could be one just handed back.
async fn hand_back(jobs: &mut async_nats::jetstream::consumer::pull::Stream, batch_jobs: usize) {
    let mut handed_back = 0;
    while handed_back < batch_jobs {
        match jobs.next().now_or_never() {
            Some(Some(Ok(message))) => {
                let _ = message
                    .ack_with(async_nats::jetstream::AckKind::Nak(None))
                    .await;
                handed_back += 1;
            }
            _ => break,
        }
    }
    if handed_back > 0 {
        tracing::info!(
            handed_back,
            "shutting down: jobs not started were handed back"
        );
    }
}

/// One batch worker: waits for a delete job, takes whatever else has already arrived (up to
/// `batch_jobs`), works through them, settles each, and goes again until shutdown.
async fn work(
    consumer: PullConsumer,
    deleter: Arc<batch::Deleter>,
    jetstream: async_nats::jetstream::Context,
    metrics: Arc<metrics::Metrics>,
    batch_jobs: usize,
    progress_every: Duration,
    mut shutdown: sexton_shared::Shutdown,
) {
    // The client's continuous pull keeps up to `batch_jobs` jobs at hand, so a batch fills as
    // fast as the server delivers; hand-made fetches leaked messages to abandoned inboxes.
    let mut jobs = loop {
        match consumer
            .stream()
            .max_messages_per_batch(batch_jobs)
            .expires(topology::PULL_EXPIRES)
            .messages()
            .await
        {
            Ok(jobs) => break jobs,
            Err(err) => {
                tracing::warn!(error = %err, "reading delete jobs");
                tokio::select! {
                    _ = shutdown.wait() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    };
    loop {
        // Biased: once the replica is stopping, a job already waiting must not start another
        // batch (an unbiased select picks a ready branch at random, so a stopping replica
        // went on working through its backlog until the drain deadline cut a batch short).
        let first = tokio::select! {
            biased;
            _ = shutdown.wait() => {
                hand_back(&mut jobs, batch_jobs).await;
                return;
            }
            first = jobs.next() => first,
        };
        let mut messages = match first {
            Some(Ok(message)) => vec![message],
            Some(Err(err)) => {
                tracing::warn!(error = %err, "reading delete jobs");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            None => {
                tracing::error!("the deleter consumer ended");
                return;
            }
        };
        // Fill the batch while jobs keep coming: full batches make full DeleteObjects requests.
        // A lone job waits at most a few milliseconds for company.
        let linger_until = tokio::time::Instant::now() + BATCH_LINGER;
        while messages.len() < batch_jobs {
            let until = linger_until.min(tokio::time::Instant::now() + BATCH_GAP);
            match tokio::time::timeout_at(until, jobs.next()).await {
                Ok(Some(Ok(message))) => messages.push(message),
                _ => break,
            }
        }
        // A batch can outlast the ack wait (slow plugins, a slow store): keep it ours.
        let messages = Arc::new(messages);
        let progress = {
            let messages = messages.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(progress_every).await;
                    for message in messages.iter() {
                        let _ = message
                            .ack_with(async_nats::jetstream::AckKind::Progress)
                            .await;
                    }
                }
            })
        };
        let outcomes = deleter.run_batch(&messages).await;
        progress.abort();
        for (message, outcome) in messages.iter().zip(&outcomes) {
            settle(&jetstream, "deleter", message, outcome).await;
        }
        for outcome in &outcomes {
            metrics.consumer.observe(outcome);
            metrics.jobs.with_label_values(&[outcome.label()]).inc();
        }
    }
}
