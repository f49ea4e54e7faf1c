//! Delete jobs that ran out of deliveries. JetStream then publishes a max-deliveries advisory
//! and, the jobs stream being a work queue, keeps the message. The deleter reads the message
//! by the advisory's sequence, records the backup as `delete-failed` (with the last error it
//! saw, and the objects that remain) and removes the message, so that nothing is left
//! silently half-cleaned and the stream does not fill with jobs nobody will deliver again.
//!
//! The advisories are kept by the `SEXTON_DEAD_LETTERS` stream (a work queue) and read through
//! one durable consumer, so an advisory raised while no deleter runs is handled when one
//! starts, and each is handled by one replica; handling is idempotent anyway (compare-and-set on
//! the record, deleting a removed message is a no-op).

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use serde::Deserialize;
use sexton_model::{
    records::BackupStatus,
    wire::{self, DeleteJob, Incident},
};
use sexton_shared::{
    outcome::{publish_incident, settle, Outcome},
    topology, Shutdown,
};

use crate::context::Deleter;

/// The fields of `io.nats.jetstream.advisory.v1.max_deliver` we use.
#[derive(Debug, Deserialize)]
struct MaxDeliveries {
    stream: String,
    consumer: String,
    stream_seq: u64,
    #[serde(default)]
    deliveries: u64,
}

pub async fn run(deleter: Arc<Deleter>, mut shutdown: Shutdown) -> anyhow::Result<()> {
    let jetstream = deleter.topology().jetstream.clone();
    let consumer = sexton_shared::channels::DEAD_LETTERS_DURABLE
        .open(
            &jetstream,
            None,
            sexton_shared::channels::Settings::ack_wait(Duration::from_secs(30)),
        )
        .await?;
    let mut advisories = consumer
        .stream()
        .max_messages_per_batch(16)
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading max-deliveries advisories")?;
    loop {
        let Some(message) = sexton_shared::nats::next_message(
            &mut advisories,
            &mut shutdown,
            "max-deliveries advisories",
        )
        .await?
        else {
            return Ok(());
        };
        let outcome = match serde_json::from_slice::<MaxDeliveries>(&message.payload) {
            Err(err) => Outcome::Poison(format!("unreadable max-deliveries advisory: {err}")),
            // Only the deleter's own durables on delete jobs (one per partition, or the one of
            // a stream created before issue 32) are ours to record.
            Ok(advisory)
                if advisory.stream != topology::STREAM_JOBS
                    || !topology::is_delete_durable(&advisory.consumer) =>
            {
                Outcome::Done
            }
            Ok(advisory) => match handle(&deleter, &advisory).await {
                Ok(()) => Outcome::Done,
                Err(err) => {
                    tracing::warn!(
                        sequence = advisory.stream_seq,
                        error = format!("{err:#}"),
                        "cannot handle a dead delete job; will retry"
                    );
                    Outcome::RetryAfter(Duration::from_secs(2))
                }
            },
        };
        settle(&jetstream, "deleter", &message, &outcome).await;
    }
}

async fn handle(deleter: &Deleter, advisory: &MaxDeliveries) -> anyhow::Result<()> {
    let jetstream = &deleter.topology().jetstream;
    let stream = jetstream
        .get_stream(topology::STREAM_JOBS)
        .await
        .context("opening the jobs stream")?;
    let message = match stream.get_raw_message(advisory.stream_seq).await {
        Ok(message) => message,
        Err(err)
            if err.kind() == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound =>
        {
            // Already handled by another replica, or acknowledged meanwhile.
            return Ok(());
        }
        Err(err) => return Err(anyhow::Error::new(err).context("reading the dead job")),
    };
    let gave_up = format!(
        "gave up after {} deliveries of the delete job",
        advisory.deliveries
    );
    match wire::decode::<DeleteJob>(&message.payload) {
        Err(err) => tracing::warn!(error = %err, "dropping an unreadable dead delete job"),
        Ok(job) => record_failure(deleter, &job, &gave_up).await?,
    }
    stream
        .delete_message(advisory.stream_seq)
        .await
        .map(|_| ())
        .or_else(|err| match err.kind() {
            // Deleted by another replica first.
            async_nats::jetstream::stream::DeleteMessageErrorKind::JetStream(e)
                if e.error_code() == async_nats::jetstream::ErrorCode::SEQUENCE_NOT_FOUND =>
            {
                Ok(())
            }
            _ => Err(anyhow::Error::new(err).context("removing the dead job")),
        })
}

/// A partial deletion that ran out of deliveries: the record stays (its other volumes are
/// restorable). If this job had claimed it, the claim comes off and the reason goes on the
/// record and in an incident, so the next retention run publishes a fresh job for the volumes
/// still marked, which a deleter judges again from the start.
async fn record_partial_failure(
    deleter: &Deleter,
    job: &DeleteJob,
    current: sexton_shared::catalog::Versioned<sexton_model::records::BackupRecord>,
    gave_up: &str,
) -> anyhow::Result<()> {
    let record = &current.value;
    let claimed_by_job = record.uid == job.uid
        && record
            .volume_deletion
            .as_ref()
            .is_some_and(|claim| claim.revision == job.revision);
    let reason = format!(
        "{gave_up} deleting volumes {}; last error: {}",
        job.volumes.join(", "),
        record.last_error.as_deref().unwrap_or("unknown")
    );
    if claimed_by_job {
        let mut released = record.clone();
        released.volume_deletion = None;
        released.last_error = Some(reason.clone());
        // A lost race: the record changed, and whoever changed it decides next.
        let _ = deleter.catalog().update(&released, current.revision).await;
    }
    publish_incident(
        &deleter.topology().jetstream,
        Incident {
            schema_version: wire::SCHEMA_VERSION,
            service: "deleter".into(),
            kind: if claimed_by_job {
                "delete-failed".into()
            } else {
                "dead-job-dropped".into()
            },
            cluster: Some(job.cluster.to_string()),
            backup_id: Some(job.backup_id.to_string()),
            subject: sexton_shared::channels::DELETE_JOBS.subject(&job.cluster),
            reason,
            at: chrono::Utc::now(),
        },
    )
    .await;
    Ok(())
}

/// Marks the job's backup `delete-failed`, if it is still the backup the job was for and
/// still on its way out; lists the objects that remain when the object store can tell.
async fn record_failure(deleter: &Deleter, job: &DeleteJob, gave_up: &str) -> anyhow::Result<()> {
    for _ in 0..5 {
        let Some(current) = deleter.catalog().get(&job.cluster, &job.backup_id).await? else {
            return Ok(());
        };
        let record = &current.value;
        if !job.volumes.is_empty() {
            return record_partial_failure(deleter, job, current, gave_up).await;
        }
        let this_job = record.uid == job.uid
            && match record.status {
                BackupStatus::Expiring => record.mark_revision(current.revision) == job.revision,
                BackupStatus::Deleting => record.expiring_revision == Some(job.revision),
                _ => false,
            };
        if !this_job {
            publish_incident(
                &deleter.topology().jetstream,
                Incident {
                    schema_version: wire::SCHEMA_VERSION,
                    service: "deleter".into(),
                    kind: "dead-job-dropped".into(),
                    cluster: Some(job.cluster.to_string()),
                    backup_id: Some(job.backup_id.to_string()),
                    subject: sexton_shared::channels::DELETE_JOBS.subject(&job.cluster),
                    reason: format!("{gave_up}; the backup is no longer waiting for it"),
                    at: chrono::Utc::now(),
                },
            )
            .await;
            return Ok(());
        }
        let mut remaining = Vec::new();
        let mut checked = true;
        for key in &record.artifacts {
            match deleter.store().exists(key).await {
                Ok(true) => remaining.push(key.clone()),
                Ok(false) => {}
                Err(_) => {
                    checked = false;
                    break;
                }
            }
        }
        let last_error = record.last_error.as_deref().unwrap_or("unknown");
        let reason = if checked {
            format!("{gave_up}; last error: {last_error}")
        } else {
            // The store does not answer: list every artifact, some may be gone already.
            remaining = record.artifacts.clone();
            format!(
                "{gave_up}; last error: {last_error}; objects not checked, some listed may be gone"
            )
        };
        if deleter
            .fail(
                record,
                current.revision,
                &reason,
                remaining,
                "max-deliveries",
            )
            .await?
        {
            return Ok(());
        }
    }
    anyhow::bail!("the backup kept changing")
}
