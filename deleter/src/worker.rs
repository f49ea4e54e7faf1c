//! The batch workers: each takes the delete jobs the feeds pass on ([`crate::intake`]) a batch
//! at a time, works through it ([`Deleter::run_batch`]) keeping its messages ours meanwhile,
//! and settles every job.

use std::{sync::Arc, time::Duration};

use async_nats::jetstream::{self, AckKind};
use sexton_shared::{config::Config, outcome::settle, service::TaskGroup, Shutdown};
use tokio::sync::{mpsc::UnboundedReceiver, Mutex};

use crate::{context::Deleter, intake::Pulled};

/// How long a batch waits for more jobs in all, and for the next one.
const BATCH_LINGER: Duration = Duration::from_millis(250);
const BATCH_GAP: Duration = Duration::from_millis(20);

/// Spawns the replica's batch workers ([`Deleter::workers`]), each as a task `batches`, on the
/// jobs the feeds pass on through `pulled`.
pub fn spawn(
    tasks: &mut TaskGroup,
    pulled: UnboundedReceiver<Pulled>,
    deleter: &Arc<Deleter>,
    jetstream: &jetstream::Context,
    config: &Config,
) {
    let pulled = Arc::new(Mutex::new(pulled));
    let (batch_jobs, progress_every) = (config.deleter.batch_jobs, config.deleter.ack_wait / 3);
    for _ in 0..Deleter::workers(config) {
        let (pulled, deleter, jetstream) = (pulled.clone(), deleter.clone(), jetstream.clone());
        let shutdown = tasks.shutdown();
        let batches = work(
            pulled,
            deleter,
            jetstream,
            batch_jobs,
            progress_every,
            shutdown,
        );
        tasks.spawn("batches", async move {
            batches.await;
            Ok(())
        });
    }
}

/// One batch worker: waits for a delete job, takes whatever else has already arrived (up to
/// `batch_jobs`), works through them, settles each, and goes again until shutdown. Once the
/// replica is stopping it starts no batch: it hands back (naks) the jobs still waiting, so that
/// another deleter takes them at once rather than after the ack wait, until every feed has
/// stopped.
pub async fn work(
    pulled: Arc<Mutex<UnboundedReceiver<Pulled>>>,
    deleter: Arc<Deleter>,
    jetstream: jetstream::Context,
    batch_jobs: usize,
    progress_every: Duration,
    mut shutdown: Shutdown,
) {
    while let Some(batch) = take_batch(&pulled, batch_jobs, &mut shutdown).await {
        work_through(batch, &deleter, &jetstream, progress_every).await;
    }
}

/// The next batch: the first job to arrive and whatever follows it closely. `None` once every
/// feed has stopped, or once the replica is stopping (after handing back what waits).
async fn take_batch(
    pulled: &Mutex<UnboundedReceiver<Pulled>>,
    batch_jobs: usize,
    shutdown: &mut Shutdown,
) -> Option<Vec<Pulled>> {
    let mut batch = Vec::new();
    // Biased: once the replica is stopping, a job already waiting must not start another
    // batch (an unbiased select picks a ready branch at random, so a stopping replica went on
    // working through its backlog until the drain deadline cut a batch short).
    let first = tokio::select! {
        biased;
        _ = shutdown.wait() => None,
        mut receiver = pulled.lock() => tokio::select! {
            biased;
            _ = shutdown.wait() => None,
            first = receiver.recv() => Some((first, receiver)),
        },
    };
    let Some((first, mut receiver)) = first else {
        crate::intake::hand_back(pulled).await;
        return None;
    };
    // `None`: every feed has stopped, nothing more will come.
    batch.push(first?);
    // Fill the batch while jobs keep coming: full batches make full DeleteObjects requests. A
    // lone job waits at most a few milliseconds for company.
    let linger_until = tokio::time::Instant::now() + BATCH_LINGER;
    while batch.len() < batch_jobs {
        let until = linger_until.min(tokio::time::Instant::now() + BATCH_GAP);
        match tokio::time::timeout_at(until, receiver.recv()).await {
            Ok(Some(job)) => batch.push(job),
            _ => break,
        }
    }
    Some(batch)
}

/// Runs one batch, acking progress every `progress_every` while it runs, then settles and
/// counts each job.
async fn work_through(
    batch: Vec<Pulled>,
    deleter: &Deleter,
    jetstream: &jetstream::Context,
    progress_every: Duration,
) {
    let (messages, places): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .map(|job| (job.message, job.place))
        .unzip();
    // A batch can outlast the ack wait (slow plugins, a slow store): keep it ours.
    let messages = Arc::new(messages);
    let progress = {
        let messages = messages.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(progress_every).await;
                for message in messages.iter() {
                    let _ = message.ack_with(AckKind::Progress).await;
                }
            }
        })
    };
    let outcomes = deleter.run_batch(&messages).await;
    progress.abort();
    for (message, outcome) in messages.iter().zip(&outcomes) {
        settle(jetstream, "deleter", message, outcome).await;
    }
    // Settled: the feed that pulled them may let go of their partition.
    drop(places);
    let metrics = deleter.metrics();
    for outcome in &outcomes {
        metrics.consumer.observe(outcome);
        metrics.jobs.with_label_values(&[outcome.label()]).inc();
    }
}
