//! Logs and the HTTP endpoint every service mounts: `/metrics` (Prometheus text format),
//! `/healthz` (the process is alive) and `/readyz` (its dependencies answer).

use std::{future::Future, net::SocketAddr, pin::Pin, sync::Arc};

use anyhow::Context as _;
use axum::{extract::State, http::StatusCode, routing::get, Router};
use prometheus::{Encoder, Registry, TextEncoder};

use crate::config::LogFormat;
use crate::Shutdown;

/// Sets up `tracing` once per process; `RUST_LOG` filters (default `info`).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    // Logs go to stderr, always: stdout is for what a command prints (`-o json` piped on).
    let ansi = ansi && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// `SEXTON_LOG_FORMAT` (`json` or `text`, default text), for a process that logs before it
/// has read its configuration.
pub fn log_format_from_env() -> LogFormat {
    match std::env::var("SEXTON_LOG_FORMAT") {
        Ok(format) if format.eq_ignore_ascii_case("json") => LogFormat::Json,
        _ => LogFormat::Text,
    }
}

type CheckFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A readiness check: resolves to `Err(why)` while the service should not get traffic.
pub type ReadinessCheck = Arc<dyn Fn() -> CheckFuture + Send + Sync>;

#[derive(Clone)]
struct EndpointState {
    registry: Registry,
    readiness: ReadinessCheck,
}

/// Starts the endpoint on `listen` and returns the address it bound (useful with port 0).
/// An empty `listen` turns it off.
pub async fn serve(
    listen: &str,
    registry: Registry,
    readiness: ReadinessCheck,
    mut shutdown: Shutdown,
) -> anyhow::Result<Option<SocketAddr>> {
    if listen.is_empty() {
        return Ok(None);
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the metrics endpoint to {listen}"))?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(EndpointState {
            registry,
            readiness,
        });
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.wait().await })
            .await;
        if let Err(err) = served {
            tracing::error!(error = %err, "metrics endpoint stopped");
        }
    });
    Ok(Some(addr))
}

async fn metrics(
    State(state): State<EndpointState>,
) -> (StatusCode, [(&'static str, &'static str); 1], Vec<u8>) {
    let mut body = Vec::new();
    let encoded = TextEncoder::new().encode(&state.registry.gather(), &mut body);
    match encoded {
        Ok(()) => (
            StatusCode::OK,
            [("content-type", "text/plain; version=0.0.4")],
            body,
        ),
        Err(err) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [("content-type", "text/plain")],
            err.to_string().into_bytes(),
        ),
    }
}

async fn readyz(State(state): State<EndpointState>) -> (StatusCode, String) {
    match (state.readiness)().await {
        Ok(()) => (StatusCode::OK, "ready\n".into()),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

/// The metrics endpoint's address for a log line: `127.0.0.1:9090`, or `off`.
pub fn listen_text(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "off".to_string(), |addr| addr.to_string())
}

/// A readiness check that passes while the NATS connection is up.
/// The stream sequence of a consumed JetStream message (0 if it carries no JetStream
/// metadata), for the span every handler opens per message.
pub fn stream_sequence(message: &async_nats::jetstream::Message) -> u64 {
    message.info().map_or(0, |info| info.stream_sequence)
}

/// The cluster a message's subject names: the last token of the subject as published
/// (`sexton.v1.<kind>.<cluster>`; a retention event's stored partition is not it).
pub fn subject_cluster(subject: &str) -> &str {
    crate::topology::published_subject(subject)
        .rsplit('.')
        .next()
        .unwrap_or_default()
}

/// The span a service handles one consumed message in, settling included: subject, stream
/// sequence and cluster; `backup` is recorded once the message is decoded, where it names one.
pub fn message_span(message: &async_nats::jetstream::Message) -> tracing::Span {
    tracing::info_span!(
        "message",
        subject = %message.subject,
        sequence = stream_sequence(message),
        cluster = subject_cluster(&message.subject),
        backup = tracing::field::Empty,
    )
}

pub fn nats_readiness(client: async_nats::Client) -> ReadinessCheck {
    Arc::new(move || {
        let client = client.clone();
        Box::pin(async move { nats_connected(&client) })
    })
}

pub fn nats_connected(client: &async_nats::Client) -> Result<(), String> {
    match client.connection_state() {
        async_nats::connection::State::Connected => Ok(()),
        state => Err(format!("nats {state}")),
    }
}

/// Registers `collectors` and returns the names of the metrics they export, so a test can check
/// that every metric a dashboard or an alert names is one the services really export.
pub fn register_all(
    registry: &Registry,
    collectors: Vec<Box<dyn prometheus::core::Collector>>,
) -> Vec<String> {
    let mut names = Vec::new();
    for collector in collectors {
        names.extend(collector.desc().iter().map(|d| d.fq_name.clone()));
        registry.register(collector).expect("unique metric names");
    }
    names
}

/// Metrics every consuming service exports about its durable consumers: backlog and the
/// messages it refused. Polled, not pushed, so a stuck handler still shows a growing backlog.
#[derive(Clone)]
pub struct ConsumerMetrics {
    pub pending: prometheus::IntGaugeVec,
    pub ack_pending: prometheus::IntGaugeVec,
    pub dead_letters: prometheus::IntCounter,
}

impl ConsumerMetrics {
    pub fn new(service: &str) -> (ConsumerMetrics, Vec<Box<dyn prometheus::core::Collector>>) {
        let pending = prometheus::IntGaugeVec::new(
            prometheus::Opts::new(
                "sexton_consumer_pending_messages",
                "messages waiting for a durable consumer",
            ),
            &["durable"],
        )
        .expect("valid metric");
        let ack_pending = prometheus::IntGaugeVec::new(
            prometheus::Opts::new(
                "sexton_consumer_ack_pending_messages",
                "messages delivered to a durable consumer and not yet acknowledged",
            ),
            &["durable"],
        )
        .expect("valid metric");
        let dead_letters = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "sexton_dead_letters_total",
                "messages refused as poison (terminated and recorded as incidents)",
            ),
            &["service"],
        )
        .expect("valid metric");
        let collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(pending.clone()),
            Box::new(ack_pending.clone()),
            Box::new(dead_letters.clone()),
        ];
        let metrics = ConsumerMetrics {
            pending,
            ack_pending,
            dead_letters: dead_letters.with_label_values(&[service]),
        };
        (metrics, collectors)
    }

    /// Counts a settled message's outcome.
    pub fn observe(&self, outcome: &crate::outcome::Outcome) {
        if matches!(outcome, crate::outcome::Outcome::Poison(_)) {
            self.dead_letters.inc();
        }
    }

    /// Polls the info of several durables of one stream (the partitions of issue 32) every
    /// `period` until shutdown: each one's gauges are set while it answers; those of a durable
    /// this replica cannot read are left as they were.
    pub fn spawn_poller_of(
        &self,
        jetstream: async_nats::jetstream::Context,
        stream: &'static str,
        durables: Vec<String>,
        period: std::time::Duration,
        mut shutdown: Shutdown,
    ) {
        let metrics = self.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(stream) = jetstream.get_stream(stream).await {
                    for durable in &durables {
                        let consumer: Result<async_nats::jetstream::consumer::PullConsumer, _> =
                            stream.get_consumer(durable).await;
                        // The lookup's answer is the consumer's info: one request each.
                        let Ok(consumer) = consumer else { continue };
                        let info = consumer.cached_info();
                        metrics
                            .pending
                            .with_label_values(&[durable])
                            .set(info.num_pending as i64);
                        metrics
                            .ack_pending
                            .with_label_values(&[durable])
                            .set(info.num_ack_pending as i64);
                    }
                }
                tokio::select! {
                    _ = shutdown.wait() => return,
                    _ = tokio::time::sleep(period) => {}
                }
            }
        });
    }

    /// Polls the consumer's info every `period` until shutdown.
    pub fn spawn_poller(
        &self,
        jetstream: async_nats::jetstream::Context,
        stream: &'static str,
        durable: &'static str,
        period: std::time::Duration,
        shutdown: Shutdown,
    ) {
        self.spawn_poller_of(
            jetstream,
            stream,
            vec![durable.to_string()],
            period,
            shutdown,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::subject_cluster;

    #[test]
    fn the_cluster_of_a_subject_is_its_last_token() {
        assert_eq!(subject_cluster("sexton.v1.report.db1"), "db1");
        assert_eq!(
            subject_cluster("sexton.v1.retention.checkpoint.db1.12"),
            "db1"
        );
        assert_eq!(subject_cluster("db1"), "db1");
        // Malformed subjects give an empty or odd field, never a panic.
        assert_eq!(subject_cluster(""), "");
        assert_eq!(subject_cluster("sexton.v1.report."), "");
    }
}
