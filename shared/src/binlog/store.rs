//! The binlog index in the object store: read it with its ETag, and change it with a
//! conditional write that retries on a lost race. Every writer (executors appending, the
//! deleter removing) goes through [`update`], so none can overwrite another's change: a write
//! based on a stale read fails with 412, and the writer re-reads and re-applies its own change
//! to what is there now.

use std::time::Duration;

use crate::object_store::{lock::VersionEntry, ObjectError, ObjectStore, Precondition, PutError};

use super::{BinlogIndex, IndexError};

/// Lost races before [`update`] gives up (the caller retries the whole job later).
pub const MAX_ATTEMPTS: u32 = 200;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The index exists but cannot be read: a human must look. Nothing may be rewritten.
    #[error("{key}: {error}")]
    Malformed { key: String, error: IndexError },
    #[error(transparent)]
    Object(#[from] ObjectError),
    #[error("binlog index {key}: gave up after losing {attempts} conditional writes in a row")]
    Contention { key: String, attempts: u32 },
}

impl StoreError {
    /// Whether retrying later may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Malformed { .. } => false,
            StoreError::Object(err) => !err.permanent,
            StoreError::Contention { .. } => true,
        }
    }
}

/// The index as read, with the ETag a conditional write must match.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub index: BinlogIndex,
    /// `None`: there is no index yet (`index` is empty); the first write creates it.
    pub etag: Option<String>,
}

/// Reads the index at `key` and checks every key lies in `binlog_prefix`.
pub async fn read(
    store: &ObjectStore,
    key: &str,
    binlog_prefix: &str,
) -> Result<Snapshot, StoreError> {
    match store.get_tagged(key).await? {
        None => Ok(Snapshot {
            index: BinlogIndex::empty(),
            etag: None,
        }),
        Some(tagged) => {
            let index = BinlogIndex::parse_for(&tagged.body, binlog_prefix).map_err(|error| {
                StoreError::Malformed {
                    key: key.to_string(),
                    error,
                }
            })?;
            Ok(Snapshot {
                index,
                etag: Some(tagged.etag),
            })
        }
    }
}

/// What [`update`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    /// False when the change was already in place (nothing written).
    pub written: bool,
    /// The index's ETag after the update (`None` if the index does not exist).
    pub etag: Option<String>,
    pub generation: u64,
    /// Conditional writes lost to other writers on the way.
    pub conflicts: u32,
}

/// Reads the index, applies `change` to it, and writes it back only if nobody wrote in
/// between (`If-Match` on the ETag read, `If-None-Match: *` when creating it). On a lost race
/// it re-reads and calls `change` again on the new index, so `change` must express the
/// writer's intent ("append these", "remove these"), not a finished index. `change` returns
/// whether it changed anything; if not, nothing is written.
pub async fn update<F>(
    store: &ObjectStore,
    key: &str,
    binlog_prefix: &str,
    mut change: F,
) -> Result<Updated, StoreError>
where
    F: FnMut(&mut BinlogIndex) -> bool,
{
    let mut conflicts = 0;
    loop {
        let Snapshot { mut index, etag } = read(store, key, binlog_prefix).await?;
        if !change(&mut index) {
            return Ok(Updated {
                written: false,
                etag,
                generation: index.generation,
                conflicts,
            });
        }
        index
            .check_keys(binlog_prefix)
            .map_err(|error| StoreError::Malformed {
                key: key.to_string(),
                error,
            })?;
        index.generation += 1;
        let condition = match etag {
            Some(etag) => Precondition::IfMatch(etag),
            None => Precondition::IfAbsent,
        };
        match store
            .put_conditional(key, index.to_json().into(), &condition)
            .await
        {
            Ok(etag) => {
                return Ok(Updated {
                    written: true,
                    etag: Some(etag).filter(|e| !e.is_empty()),
                    generation: index.generation,
                    conflicts,
                })
            }
            Err(PutError::Conflict { .. }) => {
                conflicts += 1;
                if conflicts >= MAX_ATTEMPTS {
                    return Err(StoreError::Contention {
                        key: key.to_string(),
                        attempts: conflicts,
                    });
                }
                tokio::time::sleep(backoff(conflicts)).await;
            }
            Err(PutError::Object(err)) => return Err(err.into()),
        }
    }
}

/// A short, growing, jittered pause after the `n`-th lost race, so two writers that keep
/// colliding drift apart.
fn backoff(n: u32) -> Duration {
    let ceiling_ms = (2u64 << n.min(7)).min(200);
    let jitter = u64::from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0),
    );
    Duration::from_millis(1 + jitter % ceiling_ms)
}

/// Reads the archive's index as restores read it (issue 29): the current version, or on a
/// versioned bucket where that is gone or unreadable (a delete marker, bytes written over it),
/// the newest version that reads as an index. `Err` when none does.
pub async fn read_recorded(
    store: &ObjectStore,
    index_key: &str,
    archive: &str,
) -> anyhow::Result<(BinlogIndex, Option<String>)> {
    // Read as every reader of the index reads it: each key a segment of this archive.
    let parse = |body: &[u8]| BinlogIndex::parse_for(body, archive);
    let why = match store.get(index_key).await?.as_deref().map(parse) {
        Some(Ok(index)) => return Ok((index, None)),
        Some(Err(err)) => format!("its current version does not read: {err}"),
        None => "there is none".to_string(),
    };
    for entry in older_versions(store, index_key).await? {
        let Some(body) = store.get_at(index_key, Some(&entry.version_id)).await? else {
            continue;
        };
        if let Ok(index) = parse(&body) {
            return Ok((index, Some(entry.version_id)));
        }
    }
    anyhow::bail!("the binlog index {index_key} cannot be read: {why}")
}

/// [`read_recorded`], where an archive that never had an index (no version of it at all) is
/// `None`: a place without a log archive, not a damaged one.
pub async fn read_recorded_if_any(
    store: &ObjectStore,
    index_key: &str,
    archive: &str,
) -> anyhow::Result<Option<(BinlogIndex, Option<String>)>> {
    if store.get(index_key).await?.is_none()
        && (!store.is_versioned().await?
            || store
                .list_versions(index_key)
                .await?
                .iter()
                .all(|entry| entry.key != index_key))
    {
        return Ok(None);
    }
    read_recorded(store, index_key, archive).await.map(Some)
}

/// The versions of `key` beneath its current one, newest first (none on a bucket without
/// versions): where a recovery point written over or "deleted" still lies.
pub async fn older_versions(store: &ObjectStore, key: &str) -> anyhow::Result<Vec<VersionEntry>> {
    if !store.is_versioned().await? {
        return Ok(Vec::new());
    }
    Ok(store
        .list_versions(key)
        .await?
        .into_iter()
        .filter(|entry| entry.key == key && !entry.delete_marker && !entry.latest)
        .collect())
}
