//! What every service says about itself, by the conventions of the Prometheus ecosystem and of
//! `kubectl version`: `sexton_build_info{service,version} 1`, the `process_*` metrics, a
//! `sexton_nats_connected` gauge, and an answer on `sexton.v1.api.version` (every instance
//! answers, so `sexton version` sees the whole fleet, replicas included).

use futures::StreamExt as _;
use prometheus::{IntGauge, IntGaugeVec, Opts, Registry};
use serde::{Deserialize, Serialize};

use crate::Shutdown;

/// The version of this build (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every service instance answers a request here, not in a queue group.
pub fn version_subject() -> String {
    crate::topology::api_subject("version", "get")
}

/// One instance's answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct VersionInfo {
    pub service: String,
    pub version: String,
    /// `<host>/<pid>`: which replica answered.
    pub instance: String,
}

impl VersionInfo {
    pub fn of(service: &str) -> VersionInfo {
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        VersionInfo {
            service: service.to_string(),
            version: VERSION.to_string(),
            instance: format!("{host}/{}", std::process::id()),
        }
    }
}

/// The metrics every service has besides its own: build info, the process collector (where
/// the platform has one) and NATS connectivity. Returns the connectivity gauge, which
/// [`start`] keeps current.
pub fn register(registry: &Registry, service: &str) -> anyhow::Result<IntGauge> {
    let build_info = IntGaugeVec::new(
        Opts::new(
            "sexton_build_info",
            "Always 1; the labels say which build of which service runs.",
        ),
        &["service", "version"],
    )?;
    build_info.with_label_values(&[service, VERSION]).set(1);
    registry.register(Box::new(build_info))?;
    let connected = IntGauge::new(
        "sexton_nats_connected",
        "1 while the service's NATS connection is up, 0 while it is down or reconnecting.",
    )?;
    registry.register(Box::new(connected.clone()))?;
    #[cfg(target_os = "linux")]
    registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))?;
    Ok(connected)
}

/// Registers the common metrics on `registry` and starts answering version requests and
/// keeping `sexton_nats_connected` current, until `shutdown`.
pub async fn start(
    client: &async_nats::Client,
    service: &'static str,
    registry: &Registry,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let connected = register(registry, service)?;
    answer_version_requests(client, service, shutdown.clone()).await?;
    // The connection state polled once a second: async-nats has no callback for it here,
    // and a scrape every 15 s or more needs no finer grain.
    let watched = client.clone();
    let mut stop = shutdown;
    tokio::spawn(async move {
        loop {
            connected.set(i64::from(
                watched.connection_state() == async_nats::connection::State::Connected,
            ));
            tokio::select! {
                _ = stop.wait() => return,
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            }
        }
    });
    Ok(())
}

/// Answers version requests as `service` until `shutdown`: the services through [`start`],
/// executors (which export no metrics) directly.
pub async fn answer_version_requests(
    client: &async_nats::Client,
    service: &'static str,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut requests = client.subscribe(version_subject()).await?;
    let answer = serde_json::to_vec(&crate::api::Reply::from_result(
        Ok::<_, crate::api::ApiError>(serde_json::to_value(VersionInfo::of(service))?),
    ))?;
    let answering = client.clone();
    let mut stop = shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.wait() => return,
                request = requests.next() => match request {
                    Some(request) => {
                        if let Some(reply) = request.reply {
                            if let Err(err) = answering.publish(reply, answer.clone().into()).await {
                                tracing::debug!(error = %err, "could not answer a version request");
                            }
                        }
                    }
                    None => return,
                },
            }
        }
    });
    Ok(())
}
