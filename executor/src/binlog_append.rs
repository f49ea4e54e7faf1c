//! `sexton binlog append`: ships closed log files (MariaDB/MySQL binlogs, or any file such as a
//! PostgreSQL WAL segment) into a cluster's binlog archive, so no script edits `_index.json`
//! by hand. For each file: its event times (read from the binlog's headers, or for a plain
//! file its modification time), the object uploaded first (streaming, never whole in memory),
//! then its entry appended to the index with a conditional write that retries on a lost race
//! (`binlog::store::update`). Idempotent: a file already indexed is skipped, and so is one
//! that ends before the oldest segment the index lists (retention already collected that far;
//! shipping it again would only bring it back for the next collection). Files are therefore
//! shipped oldest first, as a server lists them; a server keeps closed binlogs until it purges
//! them, so the shipping script offers them all every time.

use std::path::Path;

use chrono::{DateTime, FixedOffset, TimeDelta};
use serde::Serialize;
use sexton_model::names::ClusterName;
use sexton_shared::{
    binlog::{self, store, BinlogIndex, IndexSegment},
    object_store::{transfer::UploadSettings, ObjectStore},
};

use crate::binlog_file::{self, EventTimes};

/// How a file's event times are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentFormat {
    /// A MySQL/MariaDB binlog: times from its event headers.
    Binlog,
    /// Any other closed log file (a WAL segment): it ends at its modification time and starts
    /// where the newest indexed segment ends.
    File,
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shipped {
    pub file: String,
    pub key: String,
    pub action: Action,
    pub first_event: Option<DateTime<FixedOffset>>,
    pub last_event: Option<DateTime<FixedOffset>>,
    pub size: Option<u64>,
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Appended,
    AlreadyIndexed,
    /// Ends before the oldest indexed segment starts: already collected.
    SkippedCollected,
}

/// The pure decision for one segment against the index as read.
pub fn decide(
    index: &BinlogIndex,
    key: &str,
    last_event: Option<DateTime<FixedOffset>>,
) -> Option<Action> {
    if index.contains(key) {
        return Some(Action::AlreadyIndexed);
    }
    // A segment's end is rounded up to the next whole second (`binlog_file`), and a server
    // opens its next binlog in the second it closed the last one: so a file that ends at most
    // one second after the archive's oldest segment starts lies wholly before it.
    if let (Some(last), Some(oldest)) = (last_event, index.oldest_first_event()) {
        if last <= oldest + TimeDelta::seconds(1) {
            return Some(Action::SkippedCollected);
        }
    }
    None
}

/// The times of a plain file: it ends at the end of the second of its modification time.
pub fn file_times(modified: std::time::SystemTime) -> DateTime<FixedOffset> {
    let at: DateTime<chrono::Utc> = modified.into();
    let whole = DateTime::from_timestamp(at.timestamp(), 0).unwrap_or(at);
    (whole + TimeDelta::seconds(1)).fixed_offset()
}

/// Ships `path` to the archive of `cluster`.
pub async fn append(
    store: &ObjectStore,
    prefix: &str,
    cluster: &ClusterName,
    path: &Path,
    format: SegmentFormat,
    allow_in_use: bool,
    settings: UploadSettings,
) -> anyhow::Result<Shipped> {
    use anyhow::Context as _;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{}: no usable file name", path.display()))?;
    let folder = binlog::binlog_prefix(prefix, cluster);
    let key = format!("{folder}{name}");
    binlog::check_segment_key(&folder, &key)
        .map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))?;
    let metadata =
        std::fs::symlink_metadata(path).with_context(|| format!("{}", path.display()))?;
    if !metadata.is_file() {
        anyhow::bail!("{}: not a regular file", path.display());
    }
    let (first_event, last_event) = match format {
        SegmentFormat::Binlog => {
            let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
            let EventTimes {
                first_event,
                last_event,
                in_use,
                ..
            } = binlog_file::event_times(std::io::BufReader::new(file), metadata.len())
                .with_context(|| format!("{}", path.display()))?;
            if in_use && !allow_in_use {
                return Err(binlog_file::BinlogFileError::InUse)
                    .with_context(|| format!("{}", path.display()));
            }
            (Some(first_event), last_event)
        }
        SegmentFormat::File => (None, file_times(metadata.modified()?)),
    };
    let index_key = binlog::index_key(prefix, cluster);
    let snapshot = store::read(store, &index_key, &folder).await?;
    let mut shipped = Shipped {
        file: path.display().to_string(),
        key: key.clone(),
        action: Action::Appended,
        first_event,
        last_event: Some(last_event),
        size: None,
        sha256: None,
    };
    if let Some(action) = decide(&snapshot.index, &key, Some(last_event)) {
        shipped.action = action;
        return Ok(shipped);
    }
    // The object first, its entry after: the index never lists a missing object.
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let digest = store
        .put_file(
            &key,
            file,
            &path.display().to_string(),
            metadata.len(),
            settings,
        )
        .await?;
    shipped.size = Some(digest.size);
    shipped.sha256 = digest.sha256.clone();
    let mut action = Action::Appended;
    store::update(store, &index_key, &folder, |index| {
        if let Some(already) = decide(index, &key, Some(last_event)) {
            action = already;
            return false;
        }
        action = Action::Appended;
        // A plain file starts where the newest indexed segment ends.
        let first = first_event.or_else(|| index.newest_last_event().filter(|n| *n <= last_event));
        let mut segment = IndexSegment::new(key.clone(), first, Some(last_event));
        if let Some(sha256) = &digest.sha256 {
            segment
                .extra
                .insert("sha256".into(), serde_json::Value::String(sha256.clone()));
        }
        segment
            .extra
            .insert("size".into(), serde_json::Value::from(digest.size));
        index.apply_appends(&[segment]) > 0
    })
    .await?;
    shipped.action = action;
    Ok(shipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(text).unwrap()
    }

    #[test]
    fn a_segment_is_appended_once_and_never_below_the_archive() {
        let mut index = BinlogIndex::empty();
        assert_eq!(
            decide(
                &index,
                "b/c/binlog/m.000002",
                Some(at("2026-01-01T01:00:00Z"))
            ),
            None
        );
        index.apply_appends(&[IndexSegment::new(
            "b/c/binlog/m.000002",
            Some(at("2026-01-01T00:30:00Z")),
            Some(at("2026-01-01T01:00:00Z")),
        )]);
        assert_eq!(
            decide(
                &index,
                "b/c/binlog/m.000002",
                Some(at("2026-01-01T01:00:00Z"))
            ),
            Some(Action::AlreadyIndexed)
        );
        assert_eq!(
            decide(
                &index,
                "b/c/binlog/m.000001",
                Some(at("2026-01-01T00:10:00Z"))
            ),
            Some(Action::SkippedCollected)
        );
        // The file just before the oldest one: closed in the second the next one opened, its
        // end rounded up by a second.
        assert_eq!(
            decide(
                &index,
                "b/c/binlog/m.000001",
                Some(at("2026-01-01T00:30:01Z"))
            ),
            Some(Action::SkippedCollected)
        );
        assert_eq!(
            decide(
                &index,
                "b/c/binlog/m.000003",
                Some(at("2026-01-01T00:30:02Z"))
            ),
            None
        );
        assert_eq!(
            decide(
                &index,
                "b/c/binlog/m.000003",
                Some(at("2026-01-01T02:00:00Z"))
            ),
            None
        );
    }

    #[test]
    fn a_plain_file_ends_at_the_end_of_its_modification_second() {
        let modified = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_000_500);
        assert_eq!(file_times(modified).timestamp(), 1_001);
    }
}
