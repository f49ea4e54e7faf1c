//! Copies of the binlog archive (issue 28): point-in-time recovery from a location alone.
//!
//! A cluster's archive at a location is a binlog folder of its own,
//! `<location prefix>/<cluster>/binlog/`, with its own `_index.json` in the primary's format
//! (`sexton_model::binlog`). The copier keeps it up to date after every backup it copies to the
//! location and every `copier.binlog_interval` for each (cluster, location) a copy rule names:
//!
//! 1. the segments the location needs are those that end at or after the start of the oldest
//!    full backup whose copy the location holds or awaits
//!    ([`sexton_model::binlog::location_horizon`]; the deleter collects the location's archive
//!    by the same horizon, so what it removed is never copied back), closed (with a
//!    `last_event`), and not in the location's index yet ([`segments_to_copy`]);
//! 2. each is copied in the source index's order through bounded memory, checked against the
//!    size and SHA-256 `sexton binlog append` recorded (segments shipped without them: the size
//!    the source lists), and then seen listed at the location with that size;
//! 3. the location's index is written **last**, with a conditional write that appends what
//!    was copied to whatever is there ([`store::update`]).
//!
//! A copier killed midway leaves objects no index lists (the next pass copies them again and
//! lists them, or the deleter's collection removes them once older than the horizon); an
//! index at a location only ever lists segments that are whole there. A segment the source
//! index lists but cannot serve whole (missing, another size or digest) stops the pass at that
//! segment with an incident: the location's index never has a hole the source's has not.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Utc;
use sexton_model::{
    names::{ClusterName, LocationName},
    records::BackupRecord,
    wire::{self, Incident, ObjectDigest},
};
use sexton_shared::{
    binlog::{self, location_horizon, segment_digest, segments_to_copy, store, LocationHorizon},
    channels,
    object_store::copy::CopyError,
    outcome::publish_incident,
};

use crate::{report::ask_retention_run, Copier, Location};

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    pub segments: usize,
    pub bytes: u64,
}

/// Why a pass stopped.
#[derive(Debug)]
pub enum SyncError {
    /// A store or the catalog did not answer: the next pass tries again.
    Retry(anyhow::Error),
    /// The source cannot serve a segment whole, or an index is unreadable: news for a person.
    Bad { kind: &'static str, reason: String },
}

impl From<anyhow::Error> for SyncError {
    fn from(err: anyhow::Error) -> SyncError {
        SyncError::Retry(err)
    }
}

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyncError::Retry(err) => write!(f, "{err:#}"),
            SyncError::Bad { reason, .. } => f.write_str(reason),
        }
    }
}

/// Brings `name`'s copy of `cluster`'s binlog archive up to date. The caller holds the
/// cluster's lock.
pub async fn sync(
    copier: &Copier,
    cluster: &ClusterName,
    name: &LocationName,
    location: &Location,
) -> Result<Synced, SyncError> {
    let records: Vec<BackupRecord> = copier.views.current_records(cluster).await?;
    let horizon = location_horizon(&records, name);
    if horizon == LocationHorizon::NoFull {
        return Ok(Synced::default());
    }
    let source = &copier.source;
    let source_folder = binlog::binlog_prefix(source.prefix(), cluster);
    let source_index = read(source, cluster, "primary").await?;
    if source_index.segments.is_empty() {
        return Ok(Synced::default());
    }
    let there = &location.store;
    let folder = binlog::binlog_prefix(there.prefix(), cluster);
    let index_key = binlog::index_key(there.prefix(), cluster);
    let index = read(there, cluster, name.as_str()).await?;
    let todo = segments_to_copy(
        &source_index,
        &index,
        source.prefix(),
        there.prefix(),
        &horizon,
    );
    if todo.is_empty() {
        return Ok(Synced::default());
    }
    // Sizes of segments shipped without one: what the source lists.
    let listed: BTreeMap<String, i64> = if todo
        .iter()
        .any(|(from, _)| segment_digest(from).0.is_none())
    {
        source
            .list(&source_folder)
            .await
            .map_err(|err| SyncError::Retry(err.into()))?
            .into_iter()
            .map(|info| (info.key, info.size))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut copied = Vec::new();
    let mut written = Vec::new();
    let mut stopped = None;
    for (from, to) in &todo {
        let (size, sha256) = segment_digest(from);
        let Some(size) = size.or_else(|| {
            listed
                .get(&from.key)
                .and_then(|size| u64::try_from(*size).ok())
        }) else {
            stopped = Some(SyncError::Bad {
                kind: "copy-binlog-missing",
                reason: format!(
                    "binlog segment {} of {cluster} is in the primary's index but not in its \
                     bucket: the archive at {name} stops before it",
                    from.key
                ),
            });
            break;
        };
        let expected = ObjectDigest {
            key: from.key.clone(),
            size,
            sha256,
            version_id: None,
        };
        match source
            .copy_object_to(
                &expected,
                there,
                &to.key,
                copier.settings,
                location.storage_class.as_deref(),
            )
            .await
        {
            Ok(digest) => {
                written.push(digest);
                copied.push(to.clone());
            }
            Err(err @ (CopyError::Corrupt { .. } | CopyError::Missing { .. })) => {
                stopped = Some(SyncError::Bad {
                    kind: "copy-binlog-refused",
                    reason: format!(
                        "binlog segment {} of {cluster} not copied to {name}: {err}; the \
                         archive there stops before it",
                        from.key
                    ),
                });
                break;
            }
            Err(err) => {
                stopped = Some(SyncError::Retry(anyhow::anyhow!("{err}")));
                break;
            }
        }
    }
    let synced = if copied.is_empty() {
        Synced::default()
    } else {
        // Seen there with the sizes written, then listed in the location's index: last.
        let there_now: BTreeMap<String, i64> = there
            .list(&folder)
            .await
            .map_err(|err| SyncError::Retry(err.into()))?
            .into_iter()
            .map(|info| (info.key, info.size))
            .collect();
        let unseen: BTreeSet<&str> = written
            .iter()
            .filter(|digest| there_now.get(&digest.key) != Some(&(digest.size as i64)))
            .map(|digest| digest.key.as_str())
            .collect();
        if !unseen.is_empty() {
            return Err(SyncError::Bad {
                kind: "copy-not-seen",
                reason: format!(
                    "binlog segments of {cluster} written to {name} but not listed there with \
                     the size written: {unseen:?}; not indexed there"
                ),
            });
        }
        store::update(there, &index_key, &folder, |index| {
            index.apply_appends(&copied) > 0
        })
        .await
        .map_err(|err| index_error(err, cluster, name.as_str()))?;
        let synced = Synced {
            segments: copied.len(),
            bytes: written.iter().map(|digest| digest.size).sum(),
        };
        tracing::info!(%cluster, location = %name, segments = synced.segments, bytes = synced.bytes, "binlog segments copied and indexed");
        synced
    };
    match stopped {
        Some(err) => Err(err),
        None => Ok(synced),
    }
}

async fn read(
    store_: &sexton_shared::object_store::ObjectStore,
    cluster: &ClusterName,
    place: &str,
) -> Result<binlog::BinlogIndex, SyncError> {
    let folder = binlog::binlog_prefix(store_.prefix(), cluster);
    let key = binlog::index_key(store_.prefix(), cluster);
    store::read(store_, &key, &folder)
        .await
        .map(|snapshot| snapshot.index)
        .map_err(|err| index_error(err, cluster, place))
}

fn index_error(err: store::StoreError, cluster: &ClusterName, place: &str) -> SyncError {
    match err {
        store::StoreError::Malformed { .. } => SyncError::Bad {
            kind: "copy-binlog-index-unreadable",
            reason: format!(
                "the binlog index of {cluster} at {place} cannot be read ({err}); no segment is \
                 copied and the index is not rewritten"
            ),
        },
        err => SyncError::Retry(err.into()),
    }
}

/// One binlog pass, its metrics, and an incident when a new problem stops it.
pub(crate) async fn pass(
    copier: &Copier,
    cluster: &ClusterName,
    name: &LocationName,
    location: &Location,
) {
    let result = sync(copier, cluster, name, location).await;
    let outcome = match &result {
        Ok(synced) if synced.segments > 0 => "copied",
        Ok(_) => "current",
        Err(SyncError::Retry(_)) => "retry",
        Err(SyncError::Bad { .. }) => "refused",
    };
    copier
        .metrics
        .binlog_passes
        .with_label_values(&[name.as_str(), outcome])
        .inc();
    let key = (cluster.clone(), name.clone());
    match result {
        Ok(synced) => {
            copier
                .metrics
                .binlog_segments
                .with_label_values(&[name.as_str()])
                .inc_by(synced.segments as u64);
            copier
                .metrics
                .bytes
                .with_label_values(&[name.as_str()])
                .inc_by(synced.bytes);
            copier
                .binlog_reported
                .lock()
                .expect("not poisoned")
                .remove(&key);
            // Segments that landed where copies are locked are locked by the next run there.
            if synced.segments > 0 && location.locked {
                let message_id = format!(
                    "binlog-copied-{cluster}-{name}-{}",
                    Utc::now().timestamp_micros()
                );
                ask_retention_run(copier, cluster, name, &message_id).await;
            }
        }
        Err(SyncError::Retry(err)) => {
            tracing::warn!(%cluster, location = %name, error = format!("{err:#}"), "binlog archive not copied; the next pass tries again");
        }
        Err(SyncError::Bad { kind, reason }) => {
            tracing::error!(%cluster, location = %name, "{reason}");
            let new = copier
                .binlog_reported
                .lock()
                .expect("not poisoned")
                .insert(key, reason.clone())
                .as_ref()
                != Some(&reason);
            if new {
                publish_incident(
                    &copier.topology.jetstream,
                    Incident {
                        schema_version: wire::SCHEMA_VERSION,
                        service: "copier".into(),
                        kind: kind.into(),
                        cluster: Some(cluster.to_string()),
                        backup_id: None,
                        subject: channels::COPY_JOBS.subject(cluster),
                        reason,
                        at: Utc::now(),
                    },
                )
                .await;
            }
        }
    }
}
