//! The job loop: copy jobs taken from `SEXTON_COPIES`, each handled in its cluster's turn.

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::{self, consumer::PullConsumer};
use sexton_model::copies::CopyJob;
use sexton_shared::{channels, outcome::Outcome, topology, Shutdown};

use crate::{
    binlog,
    copy::copy_backup,
    outcome::{Done, Failure},
    report::report_bad,
    Copier,
};

/// How long a job waits at most before it comes back when another replica holds its cluster.
const BUSY_RETRY: Duration = Duration::from_secs(10);

pub(crate) async fn consume(
    copier: Arc<Copier>,
    consumer: PullConsumer,
    concurrency: usize,
    ack_wait: Duration,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut messages = consumer
        .stream()
        .expires(topology::PULL_EXPIRES)
        .messages()
        .await
        .context("reading copy jobs")?;
    sexton_shared::nats::handle_concurrently(
        &mut messages,
        &mut shutdown,
        "copy jobs",
        concurrency,
        |message| {
            let copier = copier.clone();
            async move {
                // The job stays this replica's while it copies, however long that takes.
                let keep = sexton_shared::nats::KeepInProgress::start(&message, ack_wait / 3);
                // A job refused before it was read counts under `unknown`, `refused`.
                let labels = std::sync::Mutex::new(("unknown".to_string(), "refused"));
                channels::deliver(
                    &channels::COPY_JOBS,
                    "copier",
                    &copier.topology.jetstream,
                    Some(&copier.metrics.consumer),
                    &message,
                    |job| async {
                        let (location, label, outcome) = handle(&copier, job, &message).await;
                        *labels.lock().expect("not poisoned") = (location, label);
                        outcome
                    },
                )
                .await;
                drop(keep);
                let (location, label) = labels.into_inner().expect("not poisoned");
                copier
                    .metrics
                    .copies
                    .with_label_values(&[&location, label])
                    .inc();
            }
        },
    )
    .await
}

/// One copy job: the location and outcome labels for the metrics, and the outcome.
/// The job is received (`channels::COPY_JOBS`): it decoded and names its subject's cluster.
async fn handle(
    copier: &Copier,
    job: CopyJob,
    message: &jetstream::Message,
) -> (String, &'static str, Outcome) {
    let label = job.location.to_string();
    let Some(location) = copier.locations.get(&job.location) else {
        return (
            "unknown".into(),
            "refused",
            Outcome::Poison(format!(
                "copy job for backup {} of {}: location {} is not configured here",
                job.backup_id, job.cluster, job.location
            )),
        );
    };
    let delivered = message.info().map(|info| info.delivered).unwrap_or(1);
    let one_at_a_time = match copier.turn(&job.cluster).await {
        Ok(Some(turn)) => turn,
        // Another replica works on the cluster: the job comes back soon, to this replica or
        // that one.
        Ok(None) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered).min(BUSY_RETRY);
            return (label, "busy", Outcome::RetryAfter(delay));
        }
        Err(err) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered);
            tracing::warn!(cluster = %job.cluster, error = format!("{err:#}"), "cannot take the cluster's copy lease");
            return (label, "retry", Outcome::RetryAfter(delay));
        }
    };
    let copied = copy_backup(copier, &job, location).await;
    if matches!(copied, Ok(Done::Copied)) {
        // The binlog archive follows each backup there, so a restore from the location can
        // reach past the backup as soon as it counts.
        binlog::pass(copier, &job.cluster, &job.location, location).await;
    }
    drop(one_at_a_time);
    let (outcome_label, outcome) = match copied {
        Ok(done) => (done.label(), Outcome::Done),
        Err(Failure::Refused(why)) => ("refused", Outcome::Poison(why)),
        Err(Failure::Wait(why)) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered);
            tracing::warn!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, delay_s = delay.as_secs(), "copy not finished: {why}");
            ("retry", Outcome::RetryAfter(delay))
        }
        Err(Failure::Bad(incident)) => {
            let delay = sexton_shared::nats::patient_retry_delay(delivered);
            tracing::error!(cluster = %job.cluster, backup = %job.backup_id, location = %job.location, "copy refused: {}", incident.reason);
            report_bad(copier, incident).await;
            ("refused", Outcome::RetryAfter(delay))
        }
    };
    (label, outcome_label, outcome)
}
