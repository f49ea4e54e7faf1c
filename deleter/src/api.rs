//! The deleter's half of the request/reply API: delete plugins (`plugin.register`,
//! `plugin.unregister`, `plugin.list`) and orphaned objects (`orphans.list`,
//! `orphans.delete`). Both need what only the deleter holds: the plugin registry and the
//! right to delete objects. Answered in the `sexton-api` queue group like the scheduler's.

use std::sync::Arc;

use chrono::Utc;
use serde_json::{json, Value};
use sexton_model::wire::Message;
use sexton_shared::{
    api::{
        decode_request, reply_value, ApiError, ErrorCode, FailedKey, Incoming, Listener,
        OrphansFound,
    },
    audit::{self, Actor, AuditBackup, AuditEvent, AuditObject},
    Shutdown,
};

use crate::{
    context::Deleter,
    orphans::{self, OrphansRequest},
    plugins::{PluginByName, PluginSpec, Registration},
};

/// Answers the deleter's verbs through the shared serve loop, each request in a task of its
/// own: orphan scans list a whole prefix, and must not hold up the others.
pub async fn serve(
    client: async_nats::Client,
    deleter: Arc<Deleter>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    Listener::subscribe(client, &[("plugin", "*"), ("orphans", "*")])
        .await?
        .serve_concurrently(shutdown, move |incoming| {
            let deleter = deleter.clone();
            async move { answer(&deleter, incoming).await }
        })
        .await
}

/// One request: handled, then audited before the reply goes.
async fn answer(deleter: &Deleter, incoming: Incoming) -> Result<Value, ApiError> {
    let Incoming {
        verb,
        payload,
        actor,
    } = incoming;
    let result = handle(deleter, &verb, &payload, &actor).await;
    audit_request(deleter, &verb, &payload, &actor, &result).await;
    result
}

fn invalid(err: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Invalid, err.to_string())
}

fn unavailable(err: anyhow::Error) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("{err:#}"))
}

fn decode<T: Message>(body: &[u8]) -> Result<T, ApiError> {
    decode_request(body)
}

/// The deleter's verbs that only read, and are not audited.
const READ_ONLY: &[&str] = &["plugin.list", "orphans.list"];

/// A `user-action` entry for a request that could change something (not listings, not dry
/// runs): the one writer every service's API shares.
async fn audit_request(
    deleter: &Deleter,
    verb: &str,
    body: &[u8],
    actor: &Actor,
    result: &Result<Value, ApiError>,
) {
    deleter
        .audit()
        .user_action(
            verb,
            audit::request_arguments(body),
            READ_ONLY,
            None,
            actor,
            result,
        )
        .await;
}

#[tracing::instrument(skip_all, fields(verb = %verb))]
async fn handle(
    deleter: &Deleter,
    verb: &str,
    body: &[u8],
    actor: &Actor,
) -> Result<Value, ApiError> {
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
            let _: sexton_shared::api::PluginList = decode(body)?;
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
        "orphans.list" => scan(deleter, decode(body)?, false, actor).await,
        "orphans.delete" => scan(deleter, decode(body)?, true, actor).await,
        _ => Err(invalid(format!("unknown api call {verb:?}"))),
    }
}

async fn scan(
    deleter: &Deleter,
    req: OrphansRequest,
    delete: bool,
    actor: &Actor,
) -> Result<Value, ApiError> {
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
    // Backups whose records the catalog removed on purpose are leftovers, not signs of a lost
    // catalog (their keys' last operation is a removal).
    let mut removed_on_purpose = std::collections::HashSet::new();
    for (directory, id) in orphans::unowned_described(&objects, &records) {
        let Ok(id) = sexton_model::names::BackupId::new(&id) else {
            continue;
        };
        let lookup = deleter
            .catalog()
            .lookup(&req.cluster, &id)
            .await
            .map_err(unavailable)?;
        if matches!(lookup, sexton_shared::catalog::Lookup::Removed) {
            removed_on_purpose.insert(directory);
        }
    }
    let lost = orphans::catalog_looks_lost(
        &objects,
        &records,
        &cluster_prefix,
        &req.cluster,
        &removed_on_purpose,
    );
    // The binlog archive serves the cluster's backups while it has a schedule or a record.
    let binlog_owned = !records.is_empty()
        || sexton_shared::planning::load_all_schedules(&deleter.topology().schedules)
            .await
            .map_err(unavailable)?
            .iter()
            .any(|schedule| schedule.cluster == req.cluster);
    let scan = orphans::find_orphans(
        objects,
        &records,
        &cluster_prefix,
        grace,
        Utc::now(),
        binlog_owned,
    );
    if let (true, Some(why)) = (delete, &lost) {
        tracing::warn!(cluster = %req.cluster, %why, "orphan deletion refused");
        return Err(ApiError::new(ErrorCode::Conflict, why.clone()));
    }
    let mut reply = OrphansFound {
        cluster: req.cluster.clone(),
        prefix: cluster_prefix,
        grace_seconds: grace.num_seconds(),
        orphans: scan.orphans.clone(),
        n_young: scan.n_young,
        n_in_progress: scan.n_in_progress,
        n_binlog: scan.n_binlog,
        warning: lost,
        dry_run: req.dry_run,
        deleted: None,
        failed: None,
    };
    if delete && !req.dry_run {
        let (keys, refused) = orphans::deletable(&scan, deleter.prefix(), &req.cluster);
        let mut deleted = Vec::new();
        let mut failed: Vec<FailedKey> = refused
            .into_iter()
            .map(|key| FailedKey {
                key,
                error: "not a plain key under the cluster's prefix".into(),
            })
            .collect();
        // Every version of each orphan on a versioned bucket, not a delete marker. A request
        // that failed as a whole fails its own keys, not those an earlier request deleted.
        match deleter.store().delete_keys_each(&keys).await {
            Ok(report) => {
                deleted.extend(report.deleted);
                failed.extend(report.failed.iter().map(|f| FailedKey {
                    key: f.key.clone(),
                    error: f.to_string(),
                }));
            }
            Err(err) => failed.extend(keys.iter().map(|key| FailedKey {
                key: key.clone(),
                error: err.to_string(),
            })),
        }
        tracing::info!(cluster = %req.cluster, deleted = deleted.len(), failed = failed.len(), "orphaned objects deleted");
        let sizes: std::collections::HashMap<&str, u64> = scan
            .orphans
            .iter()
            .map(|o| (o.key.as_str(), o.size.max(0) as u64))
            .collect();
        if !deleted.is_empty() {
            // In slices of keys, so no entry outgrows a message.
            let gone: Vec<AuditBackup> = deleted
                .chunks(1000)
                .map(|keys| AuditBackup {
                    id: "(orphans)".into(),
                    reasons: vec![
                        "no catalog record owns these objects (sexton backup orphans --delete)"
                            .into(),
                    ],
                    objects: keys
                        .iter()
                        .map(|key| AuditObject {
                            key: key.clone(),
                            size: sizes.get(key.as_str()).copied(),
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect();
            let audit = deleter.audit();
            let entries = audit.entries(Some(&req.cluster), None, gone, |backups| {
                AuditEvent::ObjectsDeleted { backups }
            });
            let _ = audit.record_by(actor, entries).await;
        }
        reply.deleted = Some(deleted);
        reply.failed = Some(failed);
    }
    reply_value(reply)
}
