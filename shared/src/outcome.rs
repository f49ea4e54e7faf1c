//! Every JetStream message a service handles ends in one [`Outcome`], and [`settle`] is the one
//! place that turns it into an ack, a delayed nak or a term. Keeping that mapping in a single
//! `match` is what makes "a poison message is never retried forever, a transient failure is
//! never dropped" checkable by reading one function.

use std::time::Duration;

use async_nats::jetstream::{self, AckKind};

use crate::wire::{self, Incident};

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The work is done (or was already done): acknowledge.
    Done,
    /// A transient failure: redeliver after the delay.
    RetryAfter(Duration),
    /// The message can never succeed (malformed, forged, refused): stop redelivery and record
    /// why. Nothing was changed.
    Poison(String),
}

impl Outcome {
    /// The metric label for this outcome.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::RetryAfter(_) => "retry",
            Outcome::Poison(_) => "poison",
        }
    }
}

/// Acknowledges `message` according to `outcome`. A poison message is also published as an
/// incident on the events stream, so an operator can see what was refused and why.
pub async fn settle(
    jetstream: &jetstream::Context,
    service: &str,
    message: &jetstream::Message,
    outcome: &Outcome,
) {
    let result = match outcome {
        Outcome::Done => message.ack().await,
        Outcome::RetryAfter(delay) => message.ack_with(AckKind::Nak(Some(*delay))).await,
        Outcome::Poison(reason) => {
            let subject = crate::topology::published_subject(&message.subject);
            let cluster = subject.rsplit('.').next().unwrap_or("unknown");
            let cluster = if crate::names::check_name("cluster", cluster).is_ok() {
                cluster
            } else {
                "unknown"
            };
            publish_incident(
                jetstream,
                Incident {
                    schema_version: wire::SCHEMA_VERSION,
                    service: service.to_string(),
                    kind: "poison-message".into(),
                    cluster: Some(cluster.to_string()),
                    backup_id: None,
                    subject: subject.to_string(),
                    reason: reason.clone(),
                    at: chrono::Utc::now(),
                },
            )
            .await;
            message.ack_with(AckKind::Term).await
        }
    };
    if let Err(err) = result {
        // The server will redeliver after ack_wait; the handlers are idempotent.
        tracing::warn!(error = %err, subject = %message.subject, "could not settle a message");
    }
}

/// Publishes an incident event; failures are logged, never fatal.
pub async fn publish_incident(jetstream: &jetstream::Context, incident: Incident) {
    let subject = crate::topology::event_subject(
        "incident",
        incident.cluster.as_deref().unwrap_or("unknown"),
    );
    tracing::warn!(
        service = %incident.service,
        kind = %incident.kind,
        subject = %incident.subject,
        reason = %incident.reason,
        "incident"
    );
    match jetstream.publish(subject, wire::encode(&incident)).await {
        Ok(ack) => {
            if let Err(err) = ack.await {
                tracing::warn!(error = %err, "incident event not stored");
            }
        }
        Err(err) => tracing::warn!(error = %err, "incident event not published"),
    }
}
