//! `metadata.json`: the self-describing, versioned document an executor writes last into each
//! backup's directory. It says everything a catalog record needs (ids, kind, parent, volumes
//! with their keys, times, sizes, checksums, labels, schedule, plan), so that
//!
//! - intake can check an executor's report against what the executor wrote next to the data
//!   (the same objects, sizes and checksums, the same backup), and
//! - `sexton catalog import` can rebuild a lost catalog from the bucket alone (Velero's backup
//!   sync, pgBackRest's reconstruct).
//!
//! The document lists every object of the backup except itself. An executor may keep its own
//! facts under `executor` (say, a database's checkpoint LSN that an incremental needs); Sexton
//! keeps them and never reads them.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};

use crate::names::{BackupId, ClusterName, PlanName, ScheduleName};
use crate::records::BackupKind;
use crate::wire::{ObjectDigest, ReportStatus, ReportVolume};

fn completed() -> ReportStatus {
    ReportStatus::Completed
}

/// The value of `format`, so a stray `metadata.json` of another tool is never taken for ours.
pub const FORMAT: &str = "sexton.backup-metadata";

/// The one schema version this build writes and reads.
pub const METADATA_SCHEMA_VERSION: u32 = 1;

/// The largest `metadata.json` Sexton reads (10 000 objects with checksums fit well below).
pub const MAX_METADATA_BYTES: usize = 4 * 1024 * 1024;

/// File name of the document in a backup's directory.
pub const FILE_NAME: &str = "metadata.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BackupMetadata {
    pub format: String,
    pub schema_version: u32,
    pub backup_id: BackupId,
    pub cluster: ClusterName,
    pub plan: PlanName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleName>,
    pub backup_name: String,
    pub kind: BackupKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<BackupId>,
    /// `completed` (a recovery point, once intake has seen it) or `failed` (the executor
    /// wrote what it had; its objects are only to be cleaned up).
    #[serde(default = "completed")]
    pub status: ReportStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<FixedOffset>>,
    pub completed_at: DateTime<FixedOffset>,
    /// Every object of the backup but this document, with its size and SHA-256.
    pub objects: Vec<ObjectDigest>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<ReportVolume>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The executor's own facts (a checkpoint LSN, a tool version); kept, never read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<serde_json::Value>,
    /// The first and last segment of the binlog (or WAL) archive the backup needs to be
    /// consistent (issue 30), as reported: a catalog import gets it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_range: Option<sexton_retention::LogRange>,
    /// A differential (issue 30), as reported.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub differential: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("metadata.json is {0} bytes, more than the {MAX_METADATA_BYTES} read")]
    TooLarge(usize),
    #[error("metadata.json is not a sexton backup metadata document: {0}")]
    NotOurs(String),
    #[error("metadata.json has schema_version {0}; this build reads version 1")]
    UnsupportedVersion(u64),
    #[error("metadata.json is invalid: {0}")]
    Invalid(String),
}

impl BackupMetadata {
    /// Parses and checks a `metadata.json` body.
    pub fn decode(body: &[u8]) -> Result<BackupMetadata, MetadataError> {
        if body.len() > MAX_METADATA_BYTES {
            return Err(MetadataError::TooLarge(body.len()));
        }
        #[derive(Deserialize)]
        struct Head {
            format: Option<serde_json::Value>,
            schema_version: Option<serde_json::Value>,
        }
        let head: Head =
            serde_json::from_slice(body).map_err(|e| MetadataError::NotOurs(e.to_string()))?;
        if head.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(MetadataError::NotOurs(format!("format is not {FORMAT:?}")));
        }
        match head.schema_version.as_ref().and_then(|v| v.as_u64()) {
            Some(v) if v == METADATA_SCHEMA_VERSION as u64 => {}
            Some(v) => return Err(MetadataError::UnsupportedVersion(v)),
            None => {
                return Err(MetadataError::Invalid(
                    "schema_version must be a number".into(),
                ))
            }
        }
        let metadata: BackupMetadata =
            serde_json::from_slice(body).map_err(|e| MetadataError::Invalid(e.to_string()))?;
        metadata.validate().map_err(MetadataError::Invalid)?;
        Ok(metadata)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("metadata serialises")
    }

    /// What serde cannot check: names, unique keys in the backup's own directory, checksums in
    /// hex, volumes well formed, a parent on an incremental without volumes.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(range) = &self.log_range {
            crate::checks::check_log_range(range)?;
        }
        crate::names::check_name("backup name", &self.backup_name).map_err(|e| e.to_string())?;
        let own = format!("/{}/{}/", self.backup_name, self.backup_id);
        let mut keys = std::collections::BTreeSet::new();
        for object in &self.objects {
            object.validate()?;
            if !object.key.contains(&own) {
                return Err(format!(
                    "object {} is not in the backup's own directory",
                    object.key
                ));
            }
            if object.key.ends_with(&format!("/{FILE_NAME}")) {
                return Err("objects must not list metadata.json itself".into());
            }
            if !keys.insert(object.key.as_str()) {
                return Err(format!("object {} is listed twice", object.key));
            }
        }
        if self.status == ReportStatus::Started {
            return Err("status is completed or failed".into());
        }
        if self.kind == BackupKind::Incremental
            && self.parent.is_none()
            && self.volumes.is_empty()
            && self.status == ReportStatus::Completed
        {
            return Err("an incremental backup needs a parent".into());
        }
        for volume in &self.volumes {
            crate::names::check_name("volume name", &volume.name).map_err(|e| e.to_string())?;
            if let Some(key) = volume.keys.iter().find(|k| !keys.contains(k.as_str())) {
                return Err(format!(
                    "volume {} lists {key}, which objects does not",
                    volume.name
                ));
            }
        }
        if let Some(started) = self.started_at {
            if self.completed_at < started {
                return Err("completed_at is before started_at".into());
            }
        }
        Ok(())
    }

    /// The document describing what `report` reports: its backup, and the objects of
    /// `report.objects` (which should describe every object but `metadata.json`). An executor
    /// uploads the data objects, builds its report, writes this document, then adds its key to
    /// the report's artifacts and publishes the report. `now` is the completion time of a
    /// report that gives none (the caller's clock: this crate reads none).
    pub fn describe(report: &crate::wire::Report, now: DateTime<Utc>) -> BackupMetadata {
        BackupMetadata {
            format: FORMAT.into(),
            schema_version: METADATA_SCHEMA_VERSION,
            backup_id: report.backup_id.clone(),
            cluster: report.cluster.clone(),
            plan: report.plan.clone(),
            schedule: report.schedule.clone(),
            backup_name: report.backup_name.clone(),
            kind: report.kind,
            parent: report.parent.clone(),
            status: match report.status {
                ReportStatus::Failed => ReportStatus::Failed,
                _ => ReportStatus::Completed,
            },
            started_at: report.started_at,
            completed_at: report.completed_at.unwrap_or_else(|| now.fixed_offset()),
            objects: report
                .objects
                .iter()
                .filter(|o| !is_metadata_key(&o.key))
                .cloned()
                .collect(),
            volumes: report.volumes.clone(),
            labels: report.labels.clone(),
            tags: report.tags.clone(),
            executor: None,
            log_range: report.log_range.clone(),
            differential: report.differential,
        }
    }

    /// The object's size and checksum, if the document lists it.
    pub fn object(&self, key: &str) -> Option<&ObjectDigest> {
        self.objects.iter().find(|o| o.key == key)
    }
}

/// Whether `key` names a backup's `metadata.json`.
pub fn is_metadata_key(key: &str) -> bool {
    key.rsplit('/').next() == Some(FILE_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> serde_json::Value {
        serde_json::json!({
            "format": FORMAT, "schema_version": 1, "backup_id": "b1", "cluster": "c1",
            "plan": "full", "backup_name": "s", "kind": "full",
            "completed_at": "2026-01-01T00:00:00Z",
            "objects": [{"key": "backups/c1/s/b1/backup.xbstream", "size": 3,
                         "sha256": crate::digest::sha256_hex(b"abc")}],
            "executor": {"to_lsn": 42},
        })
    }

    #[test]
    fn a_document_round_trips_and_keeps_the_executors_facts() {
        let body = serde_json::to_vec(&sample()).unwrap();
        let metadata = BackupMetadata::decode(&body).unwrap();
        assert_eq!(metadata.executor.as_ref().unwrap()["to_lsn"], 42);
        assert_eq!(
            BackupMetadata::decode(&metadata.encode()).unwrap(),
            metadata
        );
    }

    #[test]
    fn malformed_documents_are_refused_with_a_reason() {
        let cases: Vec<(serde_json::Value, &str)> = vec![
            (
                serde_json::json!({"backup_id": "b1"}),
                "not a sexton backup metadata",
            ),
            (
                {
                    let mut m = sample();
                    m["format"] = "velero".into();
                    m
                },
                "not a sexton",
            ),
            (
                {
                    let mut m = sample();
                    m["schema_version"] = 2.into();
                    m
                },
                "schema_version 2",
            ),
            (
                {
                    let mut m = sample();
                    m["schema_version"] = "1".into();
                    m
                },
                "must be a number",
            ),
            (
                {
                    let mut m = sample();
                    m["objects"][0]["sha256"] = "xyz".into();
                    m
                },
                "sha256",
            ),
            (
                {
                    let mut m = sample();
                    m["objects"][0]["key"] = "backups/c1/s/b2/x".into();
                    m
                },
                "own directory",
            ),
            (
                {
                    let mut m = sample();
                    m["objects"][0]["key"] = "backups/c1/s/b1/metadata.json".into();
                    m
                },
                "itself",
            ),
            (
                {
                    let mut m = sample();
                    m["kind"] = "incremental".into();
                    m
                },
                "needs a parent",
            ),
            (
                {
                    let mut m = sample();
                    m["status"] = "started".into();
                    m
                },
                "completed or failed",
            ),
            (
                {
                    let mut m = sample();
                    m["status"] = "gone".into();
                    m
                },
                "invalid",
            ),
            (
                {
                    let mut m = sample();
                    m["backup_id"] = "../x".into();
                    m
                },
                "invalid",
            ),
            (
                {
                    let mut m = sample();
                    m["completed_at"] = "yesterday".into();
                    m
                },
                "invalid",
            ),
            (
                {
                    let mut m = sample();
                    m["started_at"] = "2026-01-02T00:00:00Z".into();
                    m
                },
                "before started_at",
            ),
            (
                {
                    let mut m = sample();
                    let o = m["objects"][0].clone();
                    m["objects"].as_array_mut().unwrap().push(o);
                    m
                },
                "twice",
            ),
        ];
        for (body, expected) in cases {
            let err = BackupMetadata::decode(&serde_json::to_vec(&body).unwrap())
                .expect_err(&body.to_string())
                .to_string();
            assert!(err.contains(expected), "{body}: {err}");
        }
        assert!(matches!(
            BackupMetadata::decode(b"not json"),
            Err(MetadataError::NotOurs(_))
        ));
        assert!(matches!(
            BackupMetadata::decode(&vec![b' '; MAX_METADATA_BYTES + 1]),
            Err(MetadataError::TooLarge(_))
        ));
    }
}
