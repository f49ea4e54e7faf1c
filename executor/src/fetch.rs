//! Reading a recovery point back exactly as Sexton recorded it (issue 29): the objects of a
//! backup's chain at the versions intake (or the copier) recorded, and the binlog segments at
//! the version whose SHA-256 the archive's index recorded. What restore tests read
//! ([`crate::exec`]) and what `sexton backup fetch` / `sexton binlog fetch` download for a
//! person's restore: one home, so a restore reads what a test proved.
//!
//! Every file is written beside its final name, checked (size, SHA-256), then renamed: a file
//! under its final name is the recorded bytes, whatever lies over them in the bucket.

use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset};
use serde::Serialize;
use sexton_model::{
    names::ClusterName,
    wire::{VerifyBackup, VerifyObject},
};
use sexton_shared::{
    binlog::{self, IndexSegment},
    object_store::{check_backup_key, transfer::TransferError, ObjectStore},
};

/// Why an object read back is not the recovery point recorded.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("object {key} is missing")]
    Missing { key: String },
    #[error("object {key} holds {held} bytes, {recorded} when taken")]
    Size {
        key: String,
        held: u64,
        recorded: u64,
    },
    #[error("object {key} has sha256 {held}, {recorded} when taken")]
    Sha256 {
        key: String,
        held: String,
        recorded: String,
    },
    #[error("reading {key}: {source}")]
    Transfer {
        key: String,
        #[source]
        source: TransferError,
    },
    #[error("{path}: {source}")]
    Local {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl FetchError {
    /// A failure that may pass on a retry (the store or the network), not a verdict on the
    /// object.
    pub fn is_retryable(&self) -> bool {
        match self {
            FetchError::Transfer { source, .. } => source.is_retryable(),
            FetchError::Local { .. } => true,
            _ => false,
        }
    }

    /// The object is not the recorded one (gone, another size, other bytes): a verdict.
    pub fn is_mismatch(&self) -> bool {
        matches!(
            self,
            FetchError::Missing { .. } | FetchError::Size { .. } | FetchError::Sha256 { .. }
        )
    }
}

/// Downloads `object` (at its recorded version, when it has one) to `path` and checks it
/// against what was recorded. On success `path` holds exactly the recorded bytes; on any
/// failure nothing is left at `path`. Returns the bytes read.
pub async fn fetch_object(
    store: &ObjectStore,
    object: &VerifyObject,
    path: &Path,
) -> Result<u64, FetchError> {
    fetch_version(
        store,
        &object.key,
        object.version_id.as_deref(),
        object.size,
        object.sha256.as_deref(),
        path,
    )
    .await
}

/// [`fetch_object`] of `key` at `version` checked against `size` and `sha256` where known.
async fn fetch_version(
    store: &ObjectStore,
    key: &str,
    version: Option<&str>,
    size: Option<u64>,
    sha256: Option<&str>,
    path: &Path,
) -> Result<u64, FetchError> {
    let local = |source: std::io::Error| FetchError::Local {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(local)?;
    }
    let partial = partial_path(path);
    let result = async {
        let held = match store.get_to_file_at(key, version, &partial).await {
            Ok(Some(held)) => held,
            Ok(None) => return Err(FetchError::Missing { key: key.into() }),
            Err(source) => {
                return Err(FetchError::Transfer {
                    key: key.into(),
                    source,
                })
            }
        };
        if let Some(recorded) = size.filter(|recorded| *recorded != held) {
            return Err(FetchError::Size {
                key: key.into(),
                held,
                recorded,
            });
        }
        if let Some(recorded) = sha256 {
            let sha = file_sha256(&partial).map_err(local)?;
            if !sha.eq_ignore_ascii_case(recorded) {
                return Err(FetchError::Sha256 {
                    key: key.into(),
                    held: sha,
                    recorded: recorded.into(),
                });
            }
        }
        std::fs::rename(&partial, path).map_err(local)?;
        Ok(held)
    }
    .await;
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// The SHA-256 of a file in lowercase hex: opened here, at the edge, and hashed by the model's
/// [`digest::reader_sha256`](sexton_model::digest::reader_sha256) in 1 MiB pieces.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    sexton_model::digest::reader_sha256(std::fs::File::open(path)?)
}

fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Where an object of `backup` lands under `into`: `<into>/<backup id>/<its path in the
/// backup's directory>`. `None` for a key outside the backup's own directory or one that
/// would climb out of it ([`check_backup_key`], what every reader of a record's keys checks):
/// never written.
pub fn local_path(
    into: &Path,
    prefix: &str,
    cluster: &ClusterName,
    backup: &VerifyBackup,
    key: &str,
) -> Option<PathBuf> {
    let id = backup.id.as_str();
    check_backup_key(prefix, cluster, &backup.backup_name, id, key).ok()?;
    let own = sexton_shared::object_store::cluster_prefix(prefix, cluster);
    let relative = key.strip_prefix(&format!("{own}{}/{id}/", backup.backup_name))?;
    Some(into.join(id).join(relative))
}

/// One object of a backup, downloaded.
#[derive(Debug, Clone, Serialize)]
pub struct FetchedObject {
    pub backup: String,
    pub key: String,
    /// The version read; absent on a bucket without versions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    pub size: u64,
    /// Whether a recorded SHA-256 was compared (a backup recorded before intake checked
    /// objects has none: only its size was).
    pub sha256_checked: bool,
    pub path: PathBuf,
}

/// Downloads every object of `chain` (oldest first, as `backup.chain` answers) from `store`
/// (the primary, or the location whose copies the chain lists) into `into`, each checked.
/// Stops at the first object that is not the recorded one.
pub async fn fetch_chain(
    store: &ObjectStore,
    cluster: &ClusterName,
    chain: &[VerifyBackup],
    into: &Path,
) -> Result<Vec<FetchedObject>, anyhow::Error> {
    let mut fetched = Vec::new();
    for backup in chain {
        for object in &backup.objects {
            let path = local_path(into, store.prefix(), cluster, backup, &object.key).ok_or_else(
                || {
                    anyhow::anyhow!(
                        "object {} is not under the directory of backup {}: not written",
                        object.key,
                        backup.id
                    )
                },
            )?;
            let size = fetch_object(store, object, &path).await?;
            fetched.push(FetchedObject {
                backup: backup.id.to_string(),
                key: object.key.clone(),
                version_id: object.version_id.clone(),
                size,
                sha256_checked: object.sha256.is_some(),
                path,
            });
        }
    }
    Ok(fetched)
}

/// Whether a segment may hold events of `[since, until]`: one with an unknown end or start is
/// taken (it might).
pub fn segment_wanted(
    segment: &IndexSegment,
    since: Option<DateTime<FixedOffset>>,
    until: Option<DateTime<FixedOffset>>,
) -> bool {
    let ends_before = match (since, segment.last_event) {
        (Some(since), Some(last)) => last < since,
        _ => false,
    };
    let starts_after = match (until, segment.first_event) {
        (Some(until), Some(first)) => first > until,
        _ => false,
    };
    !ends_before && !starts_after
}

/// One binlog segment, downloaded.
#[derive(Debug, Clone, Serialize)]
pub struct FetchedSegment {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_event: Option<DateTime<FixedOffset>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_event: Option<DateTime<FixedOffset>>,
    pub size: u64,
    /// The version read when it is not the current one (someone wrote over the segment or
    /// "deleted" it: the version the index's SHA-256 names was found beneath).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    pub sha256_checked: bool,
    pub path: PathBuf,
}

/// What `sexton binlog fetch` read.
#[derive(Debug, Clone, Serialize)]
pub struct FetchedBinlog {
    /// The index version read when the current one was unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_version: Option<String>,
    pub segments: Vec<FetchedSegment>,
}

/// Downloads the segments of the archive under `prefix` that may hold events of `[since,
/// until]` into `into` (by their file names), each checked against the size and SHA-256 its
/// index entry records. On a versioned bucket a segment whose current version is not the
/// recorded one (written over, "deleted") is read from the version that is. Stops at the
/// first segment no version of which is the recorded one.
pub async fn fetch_binlog(
    store: &ObjectStore,
    prefix: &str,
    cluster: &ClusterName,
    since: Option<DateTime<FixedOffset>>,
    until: Option<DateTime<FixedOffset>>,
    into: &Path,
) -> anyhow::Result<FetchedBinlog> {
    let index_key = binlog::index_key(prefix, cluster);
    let archive = binlog::binlog_prefix(prefix, cluster);
    let (index, index_version) = binlog::store::read_recorded(store, &index_key, &archive).await?;
    let mut segments = Vec::new();
    for segment in index
        .segments
        .iter()
        .filter(|s| segment_wanted(s, since, until))
    {
        // A direct child of the archive: `parse_for` checked every key.
        let name = segment.key.strip_prefix(&archive).unwrap_or(&segment.key);
        let path = into.join(name);
        let (size, sha256) = binlog::segment_digest(segment);
        let (held, version_id) =
            fetch_segment(store, &segment.key, size, sha256.as_deref(), &path).await?;
        segments.push(FetchedSegment {
            key: segment.key.clone(),
            first_event: segment.first_event,
            last_event: segment.last_event,
            size: held,
            version_id,
            sha256_checked: sha256.is_some(),
            path,
        });
    }
    Ok(FetchedBinlog {
        index_version,
        segments,
    })
}

/// The current version of a segment if it is the recorded one, else (versioned bucket, a
/// SHA-256 recorded) the newest older version that is.
async fn fetch_segment(
    store: &ObjectStore,
    key: &str,
    size: Option<u64>,
    sha256: Option<&str>,
    path: &Path,
) -> anyhow::Result<(u64, Option<String>)> {
    let current = match fetch_version(store, key, None, size, sha256, path).await {
        Ok(held) => return Ok((held, None)),
        Err(err) if err.is_mismatch() => err,
        Err(err) => return Err(err.into()),
    };
    if sha256.is_some() {
        for entry in binlog::store::older_versions(store, key).await? {
            if size.is_some_and(|size| size != entry.size) {
                continue;
            }
            match fetch_version(store, key, Some(&entry.version_id), size, sha256, path).await {
                Ok(held) => return Ok((held, Some(entry.version_id))),
                Err(err) if err.is_mismatch() => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }
    Err(anyhow::Error::new(current).context(format!(
        "no version of {key} is the segment the index recorded"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_land_under_their_backup_and_never_outside_it() {
        let into = Path::new("/restore");
        let cluster: ClusterName = "db1".parse().unwrap();
        let backup: VerifyBackup = serde_json::from_value(serde_json::json!({
            "id": "n-1", "uid": "u", "backup_name": "nightly", "kind": "full", "objects": []
        }))
        .unwrap();
        let local_path = |into: &Path, _own: &str, id: &str, key: &str| {
            assert_eq!(id, backup.id.as_str());
            local_path(into, "backups", &cluster, &backup, key)
        };
        let prefix = "backups/db1/nightly/n-1/";
        assert_eq!(
            local_path(into, prefix, "n-1", "backups/db1/nightly/n-1/data/part-0"),
            Some(PathBuf::from("/restore/n-1/data/part-0"))
        );
        for key in [
            "backups/db1/nightly/n-2/backup.xbstream",
            "backups/db1/nightly/n-1/",
            "backups/db1/nightly/n-1/../n-2/x",
            "backups/db1/nightly/n-1/a/../../x",
            "backups/db1/nightly/n-1//etc/passwd",
            "backups/db1/nightly/n-1/./x",
        ] {
            assert_eq!(local_path(into, prefix, "n-1", key), None, "{key}");
        }
    }

    fn segment(first: Option<&str>, last: Option<&str>) -> IndexSegment {
        let at = |t: &str| DateTime::parse_from_rfc3339(t).unwrap();
        IndexSegment::new("k", first.map(at), last.map(at))
    }

    #[test]
    fn segments_overlapping_the_window_are_taken_and_unknown_ends_too() {
        let at = |t: &str| Some(DateTime::parse_from_rfc3339(t).unwrap());
        let since = at("2026-11-28T10:00:00Z");
        let until = at("2026-11-28T12:00:00Z");
        let cases = [
            (
                segment(Some("2026-11-28T08:00:00Z"), Some("2026-11-28T09:59:59Z")),
                false,
            ),
            (
                segment(Some("2026-11-28T08:00:00Z"), Some("2026-11-28T10:00:00Z")),
                true,
            ),
            (
                segment(Some("2026-11-28T11:00:00Z"), Some("2026-11-28T11:30:00Z")),
                true,
            ),
            (
                segment(Some("2026-11-28T12:00:00Z"), Some("2026-11-28T13:00:00Z")),
                true,
            ),
            (
                segment(Some("2026-11-28T12:00:01Z"), Some("2026-11-28T13:00:00Z")),
                false,
            ),
            (segment(None, Some("2026-11-28T09:00:00Z")), false),
            (segment(None, None), true),
            (segment(Some("2026-11-28T13:00:00Z"), None), false),
        ];
        for (n, (segment, wanted)) in cases.iter().enumerate() {
            assert_eq!(segment_wanted(segment, since, until), *wanted, "case {n}");
            assert!(
                segment_wanted(segment, None, None),
                "case {n} without a window"
            );
        }
    }
}
