//! How delete jobs reach the batch workers (issue 32): feeds pull them from JetStream and pass
//! them on through one channel, so a batch's `DeleteObjects` requests span clusters whichever
//! partitions the jobs came from.
//!
//! - On a stream with partitions (`topology::delete_transform`) there is one feed per partition
//!   this replica holds ([`feed_partition`], started and stopped by `shared::partitions`). It
//!   reads its durable in whole pulls, so letting go of a partition leaves nothing pulled and
//!   unread behind, and it ends only once every job it pulled is settled: the next holder never
//!   judges a job of the partition while this replica still works on one.
//! - On a stream created before issue 32 there is one feed over the one durable that every
//!   replica reads ([`feed_shared`]).
//!
//! Either way a job waiting for a worker holds a place in the replica's [`Intake`], which
//! bounds the jobs pulled and not yet settled to what the workers can take in one round plus
//! one pull per partition: no more wait out the ack wait in the channel than did in the
//! prefetch buffers of the per-worker pulls before.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::{self, consumer::PullConsumer, AckKind};
use futures::{FutureExt as _, StreamExt as _};
use sexton_shared::{channels, config::Config, topology, Shutdown};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// How long one pull of a partition waits for its jobs. A partition let go of stops within it.
const PARTITION_PULL: Duration = Duration::from_secs(2);

/// A delete job pulled for this replica, on its way to a batch worker.
pub struct Pulled {
    pub message: jetstream::Message,
    /// Its place in the intake, and in its partition's unsettled jobs: given back when the job
    /// is settled (or handed back).
    pub place: Place,
}

/// What a pulled job holds until it is settled.
pub struct Place {
    _intake: OwnedSemaphorePermit,
    _partition: Option<OwnedSemaphorePermit>,
}

/// The replica's room for jobs pulled and not yet settled.
#[derive(Clone)]
pub struct Intake {
    room: Arc<Semaphore>,
    /// The most one pull of a partition asks for.
    pull: usize,
    /// Every place there is (a partition's unsettled jobs never exceed it).
    places: u32,
}

impl Intake {
    /// Room for a full batch per worker, plus a pull's worth per partition: a partition with
    /// nothing to deliver holds its pull's room until the pull ends, and that must not keep a
    /// busy partition's jobs from the workers.
    pub fn new(config: &Config) -> Intake {
        let batches = crate::context::Deleter::workers(config) * config.deleter.batch_jobs.max(1);
        let pull = batches
            .div_ceil(usize::from(topology::DELETE_PARTITIONS))
            .clamp(1, config.deleter.batch_jobs.max(1));
        let places = batches + pull * usize::from(topology::DELETE_PARTITIONS);
        Intake {
            room: Arc::new(Semaphore::new(places)),
            pull,
            places: u32::try_from(places).unwrap_or(u32::MAX),
        }
    }

    /// Waits for room for at least one job and takes up to `most` places at once.
    async fn reserve(&self, most: usize) -> OwnedSemaphorePermit {
        let mut reserved = self
            .room
            .clone()
            .acquire_owned()
            .await
            .expect("the intake is never closed");
        let more = self.room.available_permits().min(most.saturating_sub(1));
        if more > 0 {
            if let Ok(more) = self.room.clone().try_acquire_many_owned(more as u32) {
                reserved.merge(more);
            }
        }
        reserved
    }
}

/// Feeds the jobs of one partition to the workers while this replica holds it (`stop` trips
/// when it lets go of it, loses it, or shuts down), pull after pull
/// (`partitions::PartitionReader`). Returns once every job it passed on is settled.
pub async fn feed_partition(
    jetstream: jetstream::Context,
    partition: u16,
    settings: channels::Settings,
    jobs: mpsc::UnboundedSender<Pulled>,
    intake: Intake,
    mut stop: Shutdown,
) {
    let unsettled = Arc::new(Semaphore::new(intake.places as usize));
    let mut reader = sexton_shared::partitions::PartitionReader::new(
        jetstream,
        &channels::DELETE_DURABLE,
        partition,
        settings,
        PARTITION_PULL,
    );
    loop {
        let mut room = tokio::select! {
            biased;
            _ = stop.wait() => break,
            room = intake.reserve(intake.pull) => room,
        };
        let Some(mut pull) = reader.pull(room.num_permits(), &mut stop).await else {
            break;
        };
        while let Some(message) = pull.next(&stop).await {
            // The pull asked for no more than the room reserved, and the partition's count has
            // a place for every place in the intake.
            let (Some(place), Ok(counted)) = (room.split(1), unsettled.clone().try_acquire_owned())
            else {
                pull.hand_back(message);
                continue;
            };
            let place = Place {
                _intake: place,
                _partition: Some(counted),
            };
            if let Err(mpsc::error::SendError(job)) = jobs.send(Pulled { message, place }) {
                // The workers are gone (the replica is stopping).
                pull.hand_back(job.message);
            }
        }
        pull.finish().await;
    }
    // Every job passed on is settled (or handed back) before the partition is let go of.
    let _ = unsettled.acquire_many(intake.places).await;
}

/// Feeds the jobs of the one durable every replica reads (a stream without partitions) until
/// `shutdown`, then hands back the jobs the client had already pulled.
pub async fn feed_shared(
    consumer: PullConsumer,
    jobs: mpsc::UnboundedSender<Pulled>,
    intake: Intake,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    // The client's continuous pull keeps up to a pull's worth of jobs at hand; hand-made
    // fetches leaked messages to abandoned inboxes.
    let batch = intake.pull;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(batch)
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading delete jobs")?;
    loop {
        let next = tokio::select! {
            biased;
            _ = shutdown.wait() => break,
            next = messages.next() => next,
        };
        let message = match next {
            Some(Ok(message)) => message,
            Some(Err(err)) => {
                tracing::warn!(error = %err, "reading delete jobs");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            None => anyhow::bail!("the deleter consumer ended"),
        };
        let place = tokio::select! {
            biased;
            _ = shutdown.wait() => {
                let _ = message.ack_with(AckKind::Nak(None)).await;
                break;
            }
            place = intake.reserve(1) => place,
        };
        let place = Place {
            _intake: place,
            _partition: None,
        };
        if let Err(mpsc::error::SendError(job)) = jobs.send(Pulled { message, place }) {
            let _ = job.message.ack_with(AckKind::Nak(None)).await;
            break;
        }
    }
    // Hand back what the client had already pulled and no worker started, so that another
    // deleter takes it at once rather than after the ack wait. Only what is already at hand,
    // at most one pull's worth: every job taken lets the client pull another, which could be
    // one just handed back.
    let mut handed_back = 0;
    while handed_back < batch {
        match messages.next().now_or_never() {
            Some(Some(Ok(message))) => {
                let _ = message.ack_with(AckKind::Nak(None)).await;
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
    Ok(())
}

/// Hands back (naks) the jobs waiting for a worker once the replica is stopping, until every
/// feed has stopped, so that another deleter takes them at once rather than after the ack wait.
pub async fn hand_back(pulled: &tokio::sync::Mutex<mpsc::UnboundedReceiver<Pulled>>) {
    let mut handed_back = 0;
    loop {
        let next = pulled.lock().await.recv().await;
        let Some(job) = next else { break };
        let _ = job.message.ack_with(AckKind::Nak(None)).await;
        handed_back += 1;
    }
    if handed_back > 0 {
        tracing::info!(
            handed_back,
            "shutting down: jobs not started were handed back"
        );
    }
}
