//! The one serve loop of every service's API verbs: subscribe in the API queue group, take each
//! request with who asked, hand it to the service's handler, and answer with a [`Reply`]. The
//! scheduler, the deleter and the retention-worker differ only in their handlers (and in
//! whether a slow verb is answered off the loop), never in how a request is received or answered.

use std::future::Future;

use anyhow::Context as _;
use futures::StreamExt as _;
use serde::Serialize;

use super::{ApiError, ErrorCode, Reply};
use crate::{
    audit::{Actor, ActorHeaders as _},
    topology, wire, Shutdown,
};

/// One request as it came: the verb it was sent to (`<area>.<verb>`, such as
/// `schedule.create`), its body as sent, and who asked.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub verb: String,
    pub payload: bytes::Bytes,
    pub actor: Actor,
}

/// Where the answer to one request goes.
struct Answer {
    client: async_nats::Client,
    reply_to: async_nats::Subject,
}

impl Answer {
    /// Sends the handler's result; a reply that cannot be sent is logged (the client times out).
    async fn send(self, verb: &str, result: Result<serde_json::Value, ApiError>) {
        let body = serde_json::to_vec(&Reply::from_result(result)).expect("replies serialise");
        if let Err(err) = self.client.publish(self.reply_to, body.into()).await {
            tracing::warn!(error = %err, "could not answer a {verb} request");
        }
    }
}

/// A service's API subscriptions, made before it serves so that it can say it is ready once
/// the server has them (a flush after [`Listener::subscribe`]).
pub struct Listener {
    client: async_nats::Client,
    requests: futures::stream::SelectAll<async_nats::Subscriber>,
    /// Whether the subscriptions ending before shutdown is a failure of the service (the
    /// scheduler's and the deleter's) or the loop's quiet end (the retention-worker's verbs).
    end_fails: bool,
}

impl Listener {
    /// Subscribes to `verbs`, each an area and a verb (`*` for every verb of the area), in the
    /// API queue group, so that any number of replicas share the requests.
    pub async fn subscribe(
        client: async_nats::Client,
        verbs: &[(&str, &str)],
    ) -> anyhow::Result<Listener> {
        let mut requests = futures::stream::SelectAll::new();
        for (area, verb) in verbs {
            let subscriber = client
                .queue_subscribe(
                    topology::api_subject(area, verb),
                    topology::API_QUEUE_GROUP.into(),
                )
                .await
                .with_context(|| format!("subscribing to {area}.{verb} requests"))?;
            requests.push(subscriber);
        }
        Ok(Listener {
            client,
            requests,
            end_fails: true,
        })
    }

    /// The next request with a reply subject, or `None` at shutdown.
    async fn next(
        &mut self,
        shutdown: &mut Shutdown,
    ) -> anyhow::Result<Option<(Incoming, Answer)>> {
        loop {
            let request = tokio::select! {
                // Stopping wins over work that is ready: a random pick would start more.
                biased;
                _ = shutdown.wait() => return Ok(None),
                request = self.requests.next() => match request {
                    Some(request) => request,
                    None if self.end_fails => anyhow::bail!("the api subscription ended"),
                    None => return Ok(None),
                },
            };
            let Some(reply_to) = request.reply.clone() else {
                continue;
            };
            let verb = request
                .subject
                .strip_prefix(topology::SUBJECT_ROOT)
                .unwrap_or_default()
                .trim_start_matches(".api.")
                .to_string();
            let incoming = Incoming {
                verb,
                actor: Actor::from_headers(request.headers.as_ref()),
                payload: request.payload,
            };
            let answer = Answer {
                client: self.client.clone(),
                reply_to,
            };
            return Ok(Some((incoming, answer)));
        }
    }

    /// Answers the requests one at a time until shutdown: the handler's result is the reply.
    pub async fn serve<F, Fut>(
        mut self,
        mut shutdown: Shutdown,
        mut handle: F,
    ) -> anyhow::Result<()>
    where
        F: FnMut(Incoming) -> Fut,
        Fut: Future<Output = Result<serde_json::Value, ApiError>>,
    {
        while let Some((incoming, answer)) = self.next(&mut shutdown).await? {
            let verb = incoming.verb.clone();
            let result = handle(incoming).await;
            answer.send(&verb, result).await;
        }
        Ok(())
    }

    /// Answers every request in a task of its own until shutdown, for verbs that may take long
    /// (the deleter's orphan scans list a whole prefix) and must not hold up the others.
    pub async fn serve_concurrently<F, Fut>(
        mut self,
        mut shutdown: Shutdown,
        handle: F,
    ) -> anyhow::Result<()>
    where
        F: Fn(Incoming) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<serde_json::Value, ApiError>> + Send + 'static,
    {
        while let Some((incoming, answer)) = self.next(&mut shutdown).await? {
            let handle = handle.clone();
            tokio::spawn(async move {
                let verb = incoming.verb.clone();
                let result = handle(incoming).await;
                answer.send(&verb, result).await;
            });
        }
        Ok(())
    }
}

/// Answers the requests of one API verb (`sexton.v1.api.<area>.<verb>`, in the API queue
/// group) until shutdown: each body is decoded as `R` (one that is not is answered
/// `Invalid`), handled with who asked, and the handler's result is the reply; a reply that
/// cannot be sent is logged. The retention-worker's verbs, one loop each.
pub async fn serve_requests<R, F, Fut>(
    client: async_nats::Client,
    area: &str,
    verb: &str,
    mut shutdown: Shutdown,
    mut handle: F,
) -> anyhow::Result<()>
where
    R: wire::Message,
    F: FnMut(R, Actor) -> Fut,
    Fut: Future<Output = Result<serde_json::Value, ApiError>>,
{
    let mut listener = Listener::subscribe(client, &[(area, verb)]).await?;
    listener.end_fails = false;
    while let Some((incoming, answer)) = listener.next(&mut shutdown).await? {
        let result = match wire::decode::<R>(&incoming.payload) {
            Err(err) => Err(ApiError::new(ErrorCode::Invalid, err.to_string())),
            Ok(request) => handle(request, incoming.actor).await,
        };
        answer.send(&incoming.verb, result).await;
    }
    Ok(())
}

/// A request body decoded as `T`, an empty body meaning "no parameters" (`{"schema_version":
/// 1}`), as list requests are often sent; one that does not decode is `Invalid`.
pub fn decode_request<T: wire::Message>(body: &[u8]) -> Result<T, ApiError> {
    let body: &[u8] = if body.is_empty() {
        br#"{"schema_version":1}"#
    } else {
        body
    };
    wire::decode(body).map_err(|err| ApiError::new(ErrorCode::Invalid, err.to_string()))
}

/// A handler's answer as the reply's JSON (`Unavailable` if it does not serialise).
pub fn reply_value<T: Serialize>(value: T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(value)
        .map_err(|err| ApiError::new(ErrorCode::Unavailable, err.to_string()))
}
