//! The CLI's typed API client: one connection to the fleet's NATS per command, and
//! [`Client::call`], which sends a request type of `sexton_shared::api` (serialised here, so a
//! renamed field is a compile error, not a refusal at run time) to its subject with who asks
//! in the headers, and reads the [`Reply`]. A permission denial by NATS ends the wait at once
//! (exit code 77), no answer within 15 s is a failure of the fleet (exit code 1), and the
//! API's refusal keeps its code (`invalid` exits 2, the others 1).
//!
//! Replies the CLI decides on are decoded into the reply types beside the requests
//! ([`Client::call_as`]); the generic `-o json|yaml|table` printing of server documents passes
//! the server's JSON through unchanged ([`Client::call`] answers a `serde_json::Value`), so what
//! the user sees is what the service sent.

use std::time::Duration;

use anyhow::Context as _;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;
use sexton_shared::{
    api::{ApiError, ErrorCode, Reply},
    config::Config,
};

use crate::failure::{Failure, EXIT_DENIED};

/// How long a request waits for its answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(15);

/// Where the CLI's `nats.url` came from, for the error that says it cannot connect (set once,
/// when the configuration is loaded).
static URL_SOURCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records where `nats.url` came from: `--nats-url`, the environment, a file, or the default.
pub(crate) fn note_url_source(source: String) {
    let _ = URL_SOURCE.set(source);
}

/// The failure to connect, saying which URL was tried, where it came from and how to change it
/// (issue 26: a new user's CLI tried the default port while the local fleet listened on
/// another, and the error named neither the choice nor the way out).
fn unreachable(url: &str, err: anyhow::Error) -> Failure {
    let source = URL_SOURCE
        .get()
        .map_or("the default", String::as_str)
        .to_string();
    let cause = format!("{:#}", err.root_cause());
    Failure {
        code: 1,
        message: format!(
            "cannot connect to NATS at {url} (from {source}): {cause}\n\
             hint: is the fleet running? ./deploy/local/run starts one at nats://127.0.0.1:4222, \
             the default; point the CLI elsewhere with --nats-url URL, SEXTON_NATS_URL=URL, or \
             nats.url in the file given by --config / SEXTON_CONFIG"
        ),
    }
}

/// A connection to the fleet's NATS that watches for permission denials.
#[derive(Clone)]
pub struct Client {
    nats: async_nats::Client,
    /// The denials NATS reported on this connection.
    denials: tokio::sync::watch::Receiver<Option<String>>,
}

impl Client {
    /// Connects to the fleet's NATS, watching for permission denials (see [`Client::call`]).
    pub async fn connect(config: &Config) -> Result<Client, Failure> {
        let (nats, denials) =
            sexton_shared::nats::connect_once_watching_denials(&config.nats, "sexton-cli")
                .await
                .map_err(|err| unreachable(&config.nats.url, err))?;
        Ok(Client { nats, denials })
    }

    /// The NATS connection itself (for what is not an API call: the audit stream).
    pub fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    /// One API request; the API's refusal is a [`Failure`] with its exit code.
    pub async fn call<R: Serialize>(&self, subject: &str, request: &R) -> Result<Value, Failure> {
        self.call_raw(subject, request).await?.map_err(refused)
    }

    /// One API request whose answer the CLI reads: decoded as `T` (an answer that is not one
    /// is a failure of the fleet, exit code 1).
    pub async fn call_as<R: Serialize, T: DeserializeOwned>(
        &self,
        subject: &str,
        request: &R,
    ) -> Result<T, Failure> {
        let value = self.call(subject, request).await?;
        decode_reply(subject, value)
    }

    /// One API request, with who asks in its headers; the API's refusal is the inner `Err`.
    pub async fn call_raw<R: Serialize>(
        &self,
        subject: &str,
        request: &R,
    ) -> Result<Result<Value, ApiError>, Failure> {
        let body = serde_json::to_vec(request).map_err(|err| Failure::runtime(err.into()))?;
        let asked = tokio::time::timeout(
            ANSWER_WITHIN,
            self.nats.request_with_headers(
                subject.to_string(),
                crate::safety::actor_headers(),
                body.into(),
            ),
        );
        // NATS drops a publication the user may not make and says so only on the connection: a
        // denial ends the wait at once, as itself, not as "no answer".
        let mut denials = self.denials.clone();
        let denied = async {
            match denials.wait_for(Option::is_some).await {
                Ok(denial) => denial.clone().unwrap_or_default(),
                Err(_) => std::future::pending().await,
            }
        };
        let answered = tokio::select! {
            answered = asked => answered,
            denial = denied => {
                return Err(Failure {
                    code: EXIT_DENIED,
                    message: format!(
                        "permission denied: NATS refused {subject} to this user ({denial}); \
                         check nats.user and deploy/nats/authorization.conf"
                    ),
                });
            }
        };
        let message = answered
            .map_err(|_| Failure::runtime(anyhow::anyhow!("no answer on {subject} within 15s")))?
            .with_context(|| format!("no answer on {subject}: is the fleet running?"))
            .map_err(Failure::runtime)?;
        let reply: Reply = serde_json::from_slice(&message.payload)
            .with_context(|| format!("unreadable answer on {subject}"))
            .map_err(Failure::runtime)?;
        Ok(reply.into_result())
    }
}

/// The API's refusal as the CLI's failure: `invalid` is bad input (exit code 2), the rest 1.
pub fn refused(err: ApiError) -> Failure {
    Failure {
        code: if err.code == ErrorCode::Invalid { 2 } else { 1 },
        message: err.message,
    }
}

/// An answer decoded as the reply type the CLI reads.
pub fn decode_reply<T: DeserializeOwned>(subject: &str, value: Value) -> Result<T, Failure> {
    serde_json::from_value(value)
        .with_context(|| format!("unreadable answer on {subject}"))
        .map_err(Failure::runtime)
}
