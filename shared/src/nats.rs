//! Connecting to NATS with the configured credentials and TLS, and publishing to JetStream with
//! a de-duplication id. Every service connects through here so auth and TLS behave the same.

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::{self, context::PublishAckFuture, message::PublishMessage};

use crate::config::NatsConfig;

/// Connects, retrying the initial connection so a service may start before its server.
pub async fn connect(config: &NatsConfig, client_name: &str) -> anyhow::Result<async_nats::Client> {
    connect_with(config, client_name, true, None).await
}

/// Connects once and fails if the server does not answer: for the CLI.
pub async fn connect_once(
    config: &NatsConfig,
    client_name: &str,
) -> anyhow::Result<async_nats::Client> {
    connect_with(config, client_name, false, None).await
}

/// Like [`connect_once`], and the server's permission violations of this connection
/// (`Permissions Violation for Publish to "..."`) arrive on the returned channel: NATS drops a
/// denied publication silently, so without them a denied request looks like an absent fleet.
pub async fn connect_once_watching_denials(
    config: &NatsConfig,
    client_name: &str,
) -> anyhow::Result<(
    async_nats::Client,
    tokio::sync::watch::Receiver<Option<String>>,
)> {
    let (denied, denials) = tokio::sync::watch::channel(None);
    let client = connect_with(config, client_name, false, Some(denied)).await?;
    Ok((client, denials))
}

async fn connect_with(
    config: &NatsConfig,
    client_name: &str,
    retry: bool,
    denials: Option<tokio::sync::watch::Sender<Option<String>>>,
) -> anyhow::Result<async_nats::Client> {
    // Two rustls providers are compiled in (ring for async-nats, aws-lc-rs for aws-sdk-s3):
    // without a process default, the first TLS handshake panics. Installing one that is
    // already installed is an error worth ignoring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut options = async_nats::ConnectOptions::new()
        .name(config.client_name.as_deref().unwrap_or(client_name));
    if let Some(denials) = denials {
        options = options.event_callback(move |event| {
            if let async_nats::Event::ServerError(async_nats::ServerError::Other(text)) = &event {
                if text.to_ascii_lowercase().contains("permissions violation") {
                    denials.send_replace(Some(text.trim_matches('\'').to_string()));
                }
            }
            async {}
        });
    }
    if retry {
        options = options.retry_on_initial_connect();
    }
    let mut options = options
        .connection_timeout(Duration::from_secs(5))
        .request_timeout(Some(Duration::from_secs(10)))
        .max_reconnects(None::<usize>);
    if let Some(path) = &config.creds_file {
        options = options
            .credentials_file(path)
            .await
            .with_context(|| format!("reading nats credentials file {path}"))?;
    }
    if let (Some(user), Some(password)) = (&config.user, &config.password) {
        options = options.user_and_password(user.clone(), password.clone());
    }
    if let Some(token) = &config.token {
        options = options.token(token.clone());
    }
    if let Some(ca) = &config.tls_ca_file {
        options = options.add_root_certificates(PathBuf::from(ca));
    }
    if let (Some(cert), Some(key)) = (&config.tls_cert_file, &config.tls_key_file) {
        options = options.add_client_certificate(PathBuf::from(cert), PathBuf::from(key));
    }
    if config.tls_required {
        options = options.require_tls(true);
    }
    // A comma-separated list of seed servers; the cluster gossips the others once connected.
    options
        .connect(server_urls(&config.url))
        .await
        .with_context(|| format!("connecting to nats at {}", config.url))
}

/// The servers of `nats.url` (configuration, kept with it so `config` needs nothing from here).
pub use crate::config::server_urls;

/// Publishes `payload` with a `Nats-Msg-Id`, so a retry or a second replica publishing the
/// same logical message is dropped by the stream. Returns whether it was a duplicate.
pub async fn publish_once(
    jetstream: &jetstream::Context,
    subject: String,
    message_id: &str,
    payload: bytes::Bytes,
) -> anyhow::Result<bool> {
    Ok(publish_once_acked(jetstream, subject, message_id, payload)
        .await?
        .duplicate)
}

/// Like [`publish_once`], returning the stream's acknowledgement: for a duplicate, its
/// sequence is the one of the message stored first, which the caller may read back.
pub async fn publish_once_acked(
    jetstream: &jetstream::Context,
    subject: String,
    message_id: &str,
    payload: bytes::Bytes,
) -> anyhow::Result<jetstream::publish::PublishAck> {
    let ack: PublishAckFuture = jetstream
        .send_publish(
            subject.clone(),
            PublishMessage::build()
                .payload(payload)
                .message_id(message_id),
        )
        .await
        .with_context(|| format!("publishing to {subject}"))?;
    ack.await
        .with_context(|| format!("waiting for the stream to store {subject}"))
}

/// Deletes a one-shot ephemeral consumer (a listing of a bucket) when dropped, whether the
/// listing finished or stopped at an error. Left alone, each one lives on the server until its
/// inactivity threshold passes: under load (hundreds of retention runs per second, each listing
/// the schedules and a cluster's catalog) they piled up until the server refused new ones with
/// "maximum consumers limit reached", and every run failed and was retried. The deletion runs
/// in the background and its failure is harmless (the threshold still applies).
pub struct EphemeralConsumer {
    stream: Option<jetstream::stream::Stream>,
    name: String,
}

impl EphemeralConsumer {
    pub fn new(stream: &jetstream::stream::Stream, name: &str) -> EphemeralConsumer {
        EphemeralConsumer {
            stream: Some(stream.clone()),
            name: name.to_string(),
        }
    }
}

impl Drop for EphemeralConsumer {
    fn drop(&mut self) {
        let (Some(stream), Ok(runtime)) =
            (self.stream.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let name = std::mem::take(&mut self.name);
        runtime.spawn(async move {
            let _ = stream.delete_consumer(&name).await;
        });
    }
}

/// Keeps a message this consumer's while its work runs, however long that takes: a progress
/// ack every `every` (a third of the ack wait) until the guard is dropped.
pub struct KeepInProgress(tokio::task::JoinHandle<()>);

impl KeepInProgress {
    pub fn start(message: &jetstream::Message, every: Duration) -> KeepInProgress {
        let message = message.clone();
        KeepInProgress(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let _ = message.ack_with(jetstream::AckKind::Progress).await;
            }
        }))
    }
}

impl Drop for KeepInProgress {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The delay before a failed job that waits on something outside (a store down, a location
/// unreachable) is delivered again: 2 s doubling with each delivery to 5 minutes, so a
/// destination down for hours is tried every few minutes and no job is dropped.
pub fn patient_retry_delay(delivered: i64) -> Duration {
    let exponent = delivered.clamp(1, 10) as u32 - 1;
    Duration::from_secs(2u64.saturating_mul(1 << exponent).min(300))
}

/// Hands each message of a service's consumer to `handle`, in a task of its own, at most
/// `limit` at once, until `shutdown` trips; then waits for the ones in hand (what was pulled
/// and not started comes back after its ack wait). `handle` settles its message. `what` names
/// the messages as for [`next_message`].
pub async fn handle_concurrently<F, Fut>(
    messages: &mut jetstream::consumer::pull::Stream,
    shutdown: &mut crate::Shutdown,
    what: &str,
    limit: usize,
    handle: F,
) -> anyhow::Result<()>
where
    F: Fn(jetstream::Message) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(limit));
    let mut in_flight = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            // Stopping wins over work that is ready: a random pick would start more.
            biased;
            _ = shutdown.wait() => break,
            permit = permits.clone().acquire_owned() => {
                permit.expect("the semaphore is never closed")
            }
        };
        while in_flight.try_join_next().is_some() {}
        let Some(message) = next_message(messages, shutdown, what).await? else {
            break;
        };
        let work = handle(message);
        in_flight.spawn(async move {
            work.await;
            drop(permit);
        });
    }
    while in_flight.join_next().await.is_some() {}
    Ok(())
}

/// The next message of a service's consumer, or `None` once `shutdown` trips. A read error is
/// logged and the read retried after a pause; the stream ending is an error. `what` names the
/// messages in both (`"executor reports"`).
pub async fn next_message(
    messages: &mut jetstream::consumer::pull::Stream,
    shutdown: &mut crate::Shutdown,
    what: &str,
) -> anyhow::Result<Option<jetstream::Message>> {
    use futures::StreamExt as _;
    loop {
        let next = tokio::select! {
            // Stopping wins over work that is ready: a random pick would start more.
            biased;
            _ = shutdown.wait() => return Ok(None),
            next = messages.next() => next,
        };
        match next {
            Some(Ok(message)) => return Ok(Some(message)),
            Some(Err(err)) => {
                tracing::warn!(error = %err, "reading {what}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            None => anyhow::bail!("the consumer of {what} ended"),
        }
    }
}
