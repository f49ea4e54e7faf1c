//! The reference executor's merge jobs: the synthetic full a merge writes, the report that
//! says the target no longer needs its ancestors, and the target's rewritten `metadata.json`.

use async_nats::jetstream;
use chrono::Utc;
use sexton_model::{
    metadata::{self, BackupMetadata},
    records::BackupKind,
    wire::{self, MergeDone, MergeJob, ObjectDigest, Report, ReportStatus, ReportVolume},
};
use sexton_shared::{channels, object_store::ObjectStore};

use super::put_digested;

/// The object a merge writes in the target's directory: the whole chain's data.
pub const SYNTHETIC_FULL: &str = "synthetic-full.xbstream";

/// The object a volume merge writes in the target's directory: that volume's chain, whole.
pub fn synthetic_volume(volume: &str) -> String {
    format!("vol-{volume}.synthetic-full.img")
}

/// Every key of a merge job lies in its own backup's directory of the job's cluster: a forged
/// job must not consolidate another cluster's (or another backup's) objects into this one.
pub fn check_merge_keys(prefix: &str, job: &MergeJob) -> Result<(), String> {
    for backup in job.sources.iter().chain([&job.target]) {
        for key in &backup.artifacts {
            sexton_shared::object_store::check_backup_key(
                prefix,
                &job.cluster,
                &backup.backup_name,
                backup.id.as_str(),
                key,
            )
            .map_err(|err| format!("backup {}: {err}", backup.id))?;
        }
    }
    Ok(())
}

/// A merge job names an object of its chain that is not in the bucket: no retry brings it.
#[derive(Debug)]
pub(super) struct MissingObject(String);

impl std::fmt::Display for MissingObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MissingObject {}

/// Performs a merge job (Trilio's consolidation) in its smallest honest form: writes a
/// synthetic full in the target's own directory ([`SYNTHETIC_FULL`], or
/// [`synthetic_volume`] for a volume merge) holding the data objects of the sources (oldest
/// first) and of the target, so the target no longer needs its ancestors; then reports the
/// target (or its volume) as a full with no parent, listing its old objects and the new one.
/// The sources are not touched: retention deletes them once the scheduler has recorded the
/// merge. Idempotent: a redelivered job rewrites the same object and reports the same thing.
pub(super) async fn merge_chain(
    js: &jetstream::Context,
    store: &ObjectStore,
    job: &MergeJob,
) -> anyhow::Result<()> {
    let started_at = Utc::now();
    let target = &job.target;
    let directory = store.backup_prefix(&job.cluster, &target.backup_name, target.id.as_str());
    let object_name = match &job.volume {
        None => SYNTHETIC_FULL.to_owned(),
        Some(volume) => synthetic_volume(volume),
    };
    let synthetic_key = format!("{directory}{object_name}");
    let mut body: Vec<u8> = Vec::new();
    for backup in job.sources.iter().chain([target]) {
        // A source that is itself a synthetic full (an earlier merge) holds its whole chain.
        let own_synthetic = backup
            .artifacts
            .iter()
            .find(|k| k.ends_with(&format!("/{}/{object_name}", backup.id)));
        let keys: Vec<&String> = match own_synthetic {
            Some(key) => vec![key],
            None => backup
                .artifacts
                .iter()
                .filter(|k| !sexton_model::records::BackupRecord::is_metadata_key(k))
                .collect(),
        };
        for key in keys {
            if *key == synthetic_key {
                continue;
            }
            // A missing object of the chain means the chain cannot be consolidated: refuse the
            // job (as `sexton exec` does) rather than report a synthetic full that lacks data,
            // or wait for an object the job named but nothing will write (issue 26).
            let data = store.get(key).await?.ok_or_else(|| {
                MissingObject(format!(
                    "object {key} of backup {} is missing; the chain cannot be merged",
                    backup.id
                ))
            })?;
            body.extend_from_slice(&data);
        }
    }
    let synthetic = put_digested(store, &synthetic_key, body).await?;
    // metadata.json is rewritten to describe the target as it now is, so a catalog rebuilt
    // from the bucket sees the merge too.
    let metadata_key = format!("{directory}{}", metadata::FILE_NAME);
    let rewritten = rewrite_metadata(
        store,
        &metadata_key,
        job,
        std::slice::from_ref(&synthetic),
        None,
    )
    .await?;
    let report = merge_report(
        job,
        &metadata_key,
        vec![synthetic],
        rewritten,
        started_at.fixed_offset(),
    );
    let volume = job.volume.as_deref().unwrap_or("");
    channels::REPORTS
        .publish_once(js, &report, &channels::ids::merge_report(job))
        .await?;
    tracing::info!(cluster = %job.cluster, target = %target.id, volume, sources = job.sources.len(), "merge done and reported");
    Ok(())
}

/// The report of a merge job done: the target (or its volume) is a full without parent, with
/// its old objects and `new` (the objects the merge wrote into its directory). `rewritten`:
/// the target's `metadata.json` (at `metadata_key`) was rewritten to say so.
pub fn merge_report(
    job: &MergeJob,
    metadata_key: &str,
    new: Vec<ObjectDigest>,
    rewritten: bool,
    started_at: chrono::DateTime<chrono::FixedOffset>,
) -> Report {
    let target = &job.target;
    let mut keys = target.artifacts.clone();
    for object in &new {
        if !keys.contains(&object.key) {
            keys.push(object.key.clone());
        }
    }
    let size: u64 = new.iter().map(|o| o.size).sum();
    let (artifacts, volumes) = match &job.volume {
        None => (keys, Vec::new()),
        // A completed report lists its objects; a volume merge's are the volume's (and the
        // backup's metadata.json, rewritten).
        Some(volume) => {
            let mut artifacts = keys.clone();
            if rewritten {
                artifacts.push(metadata_key.to_string());
            }
            (
                artifacts,
                vec![ReportVolume {
                    name: volume.clone(),
                    kind: BackupKind::Full,
                    parent: None,
                    keys,
                    failed: false,
                    size_bytes: Some(size),
                }],
            )
        }
    };
    Report {
        schema_version: wire::SCHEMA_VERSION,
        backup_id: target.id.clone(),
        cluster: job.cluster.clone(),
        plan: job.plan.clone(),
        schedule: None,
        backup_name: target.backup_name.clone(),
        status: ReportStatus::Completed,
        kind: BackupKind::Full,
        parent: None,
        // When the merge ran; the catalog keeps the backup's own times (its recovery point).
        started_at: Some(started_at),
        completed_at: Some(Utc::now().fixed_offset()),
        tick: None,
        artifacts,
        size_bytes: Some(size),
        labels: Default::default(),
        tags: Vec::new(),
        error: None,
        volumes,
        holds: Vec::new(),
        merge: Some(MergeDone {
            target_uid: target.uid.clone(),
            sources: job.sources.iter().map(|b| b.id.clone()).collect(),
            volume: job.volume.clone(),
        }),
        objects: new,
        log_range: None,
        differential: false,
    }
}

/// Rewrites the target's `metadata.json` after a merge: the backup (or the merged volume) is a
/// full without parent now, and holds the `merged` objects. `executor` facts, if any, are
/// added to the document's own (a merge's tool may record what it did). `false` when the
/// target has no metadata document of ours (written by an older executor): it is left as it is.
pub async fn rewrite_metadata(
    store: &ObjectStore,
    key: &str,
    job: &MergeJob,
    merged: &[ObjectDigest],
    executor: Option<&serde_json::Map<String, serde_json::Value>>,
) -> anyhow::Result<bool> {
    let Some(body) = store.get(key).await? else {
        return Ok(false);
    };
    let Ok(mut document) = BackupMetadata::decode(&body) else {
        tracing::warn!(
            key,
            "the merge target's metadata.json is not a sexton document; left as is"
        );
        return Ok(false);
    };
    for object in merged {
        document.objects.retain(|o| o.key != object.key);
        document.objects.push(object.clone());
    }
    let tag = match &job.volume {
        None => {
            document.kind = BackupKind::Full;
            document.parent = None;
            "synthetic-full".to_string()
        }
        Some(name) => {
            if let Some(volume) = document.volumes.iter_mut().find(|v| &v.name == name) {
                volume.kind = BackupKind::Full;
                volume.parent = None;
                for object in merged {
                    if !volume.keys.contains(&object.key) {
                        volume.keys.push(object.key.clone());
                    }
                }
            }
            if document.volumes.iter().all(|v| v.kind == BackupKind::Full) {
                document.kind = BackupKind::Full;
            }
            format!("synthetic-full:{name}")
        }
    };
    if !document.tags.contains(&tag) {
        document.tags.push(tag);
    }
    if let Some(facts) = executor.filter(|facts| !facts.is_empty()) {
        let mut own = match document.executor.take() {
            Some(serde_json::Value::Object(own)) => own,
            _ => serde_json::Map::new(),
        };
        own.extend(facts.clone());
        document.executor = Some(serde_json::Value::Object(own));
    }
    store.put(key, document.encode().into()).await?;
    Ok(true)
}
