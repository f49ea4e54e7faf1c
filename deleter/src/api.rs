//! The deleter's half of the request/reply API: delete plugins (`plugin.register`,
//! `plugin.unregister`, `plugin.list`) and orphaned objects (`orphans.list`,
//! `orphans.delete`). Both need what only the deleter holds: the plugin registry and the
//! right to delete objects. Answered in the `sexton-api` queue group like the scheduler's.

use std::sync::Arc;

use anyhow::Context as _;
use chrono::Utc;
use futures::StreamExt;
use serde_json::{json, Value};
use sexton_shared::{
    api::{ApiError, ErrorCode, Reply},
    topology,
    wire::{self, Message},
    Shutdown,
};

use crate::{
    batch::Deleter,
    orphans::{self, OrphansRequest},
    plugins::{PluginByName, PluginSpec, Registration},
};

pub async fn serve(
    client: async_nats::Client,
    deleter: Arc<Deleter>,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut requests = futures::stream::select(
        client
            .queue_subscribe(
                topology::api_subject("plugin", "*"),
                topology::API_QUEUE_GROUP.into(),
            )
            .await
            .context("subscribing to the plugin api")?,
        client
            .queue_subscribe(
                topology::api_subject("orphans", "*"),
                topology::API_QUEUE_GROUP.into(),
            )
            .await
            .context("subscribing to the orphans api")?,
    );
    loop {
        let request = tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            request = requests.next() => match request {
                Some(request) => request,
                None => anyhow::bail!("the api subscription ended"),
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
        // Orphan scans list a whole prefix: answer them off the loop.
        let deleter = deleter.clone();
        let client = client.clone();
        tokio::spawn(async move {
            let reply = Reply::from_result(handle(&deleter, &verb, &request.payload).await);
            let body = serde_json::to_vec(&reply).expect("replies serialise");
            if let Err(err) = client.publish(reply_to, body.into()).await {
                tracing::warn!(error = %err, "could not send an api reply");
            }
        });
    }
}

fn invalid(err: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Invalid, err.to_string())
}

fn unavailable(err: anyhow::Error) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("{err:#}"))
}

fn decode<T: Message>(body: &[u8]) -> Result<T, ApiError> {
    let body: &[u8] = if body.is_empty() {
        br#"{"schema_version":1}"#
    } else {
        body
    };
    wire::decode(body).map_err(invalid)
}

#[tracing::instrument(skip_all, fields(verb = %verb))]
async fn handle(deleter: &Deleter, verb: &str, body: &[u8]) -> Result<Value, ApiError> {
    match verb {
        "plugin.register" => {
            let spec: PluginSpec = decode(body)?;
            let stored = deleter
                .plugins()
                .register(spec)
                .await
                .map_err(unavailable)?;
            Ok(json!(stored))
        }
        "plugin.unregister" => {
            let req: PluginByName = decode(body)?;
            match deleter.plugins().unregister(&req.name).await {
                Ok(true) => Ok(json!({ "unregistered": req.name })),
                Ok(false) => Err(ApiError::new(
                    ErrorCode::NotFound,
                    format!("plugin {} not found", req.name),
                )),
                Err(err) => Err(unavailable(err)),
            }
        }
        "plugin.list" => {
            let registrations = deleter.plugins().load().await.map_err(unavailable)?;
            Ok(Value::Array(
                registrations
                    .into_iter()
                    .map(|r| match r {
                        Registration::Plugin(spec) => json!(spec),
                        Registration::Unreadable { key, error } => {
                            json!({ "name": key, "error": error })
                        }
                    })
                    .collect(),
            ))
        }
        "orphans.list" => scan(deleter, decode(body)?, false).await,
        "orphans.delete" => scan(deleter, decode(body)?, true).await,
        _ => Err(invalid(format!("unknown api call {verb:?}"))),
    }
}

async fn scan(deleter: &Deleter, req: OrphansRequest, delete: bool) -> Result<Value, ApiError> {
    let grace = req.grace_period().map_err(invalid)?;
    let grace = chrono::Duration::from_std(grace).map_err(invalid)?;
    // Records first: an object written after this listing is younger than the grace period.
    let records = deleter
        .catalog()
        .list_cluster(&req.cluster)
        .await
        .map_err(unavailable)?;
    let records: Vec<_> = records.into_iter().map(|r| r.value).collect();
    let cluster_prefix = deleter.store().cluster_prefix(&req.cluster);
    let objects = deleter
        .store()
        .list(&cluster_prefix)
        .await
        .map_err(|err| unavailable(anyhow::Error::new(err)))?;
    let lost = orphans::catalog_looks_lost(&objects, &records, &cluster_prefix, &req.cluster);
    let scan = orphans::find_orphans(objects, &records, &cluster_prefix, grace, Utc::now());
    if let (true, Some(why)) = (delete, &lost) {
        tracing::warn!(cluster = %req.cluster, %why, "orphan deletion refused");
        return Err(ApiError::new(ErrorCode::Conflict, why.clone()));
    }
    let mut reply = json!({
        "cluster": req.cluster,
        "prefix": cluster_prefix,
        "grace_seconds": grace.num_seconds(),
        "orphans": scan.orphans,
        "n_young": scan.n_young,
        "n_in_progress": scan.n_in_progress,
        "n_binlog": scan.n_binlog,
    });
    if let Some(why) = lost {
        reply["warning"] = json!(why);
    }
    if delete {
        let (keys, refused) = orphans::deletable(&scan, deleter.prefix(), &req.cluster);
        let mut deleted = Vec::new();
        let mut failed: Vec<Value> = refused
            .into_iter()
            .map(|key| json!({"key": key, "error": "not a plain key under the cluster's prefix"}))
            .collect();
        for chunk in keys.chunks(sexton_shared::object_store::DELETE_BATCH) {
            match deleter.store().delete_batch(chunk).await {
                Ok(failures) => {
                    let bad: std::collections::HashSet<&str> =
                        failures.iter().map(|f| f.key.as_str()).collect();
                    deleted.extend(chunk.iter().filter(|k| !bad.contains(k.as_str())).cloned());
                    failed.extend(
                        failures
                            .iter()
                            .map(|f| json!({"key": f.key, "error": f.to_string()})),
                    );
                }
                Err(err) => failed.extend(
                    chunk
                        .iter()
                        .map(|key| json!({"key": key, "error": err.to_string()})),
                ),
            }
        }
        tracing::info!(cluster = %req.cluster, deleted = deleted.len(), failed = failed.len(), "orphaned objects deleted");
        reply["deleted"] = json!(deleted);
        reply["failed"] = json!(failed);
    }
    Ok(reply)
}
