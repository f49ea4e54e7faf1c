//! What `sexton exec` reports, decided from what happened: pure functions from a due-backup,
//! the command's facts and the uploaded objects to the [`Report`] the scheduler reads (and,
//! through [`BackupMetadata::describe`], to `metadata.json`).
//!
//! The report says what was *taken*: a command that could not build on its parent and took a
//! full (`kind=full` in its facts) is reported as a full without parent; the reverse, an
//! incremental where a full was asked for, is refused, because nothing says what it builds on.
//! With volumes, the files under `<volume>/` of the output are that volume's objects; a volume
//! the command left empty fails the backup and is marked failed, so its next backup is a full.

use chrono::{DateTime, FixedOffset};
use sexton_model::{
    names::BackupId,
    records::BackupKind,
    wire::{self, DueBackup, ObjectDigest, Report, ReportStatus, ReportVolume},
};

/// The kind and parent a backup was taken as, given what was asked and what the command says.
pub fn taken_kind(
    due: &DueBackup,
    said: Option<BackupKind>,
) -> Result<(BackupKind, Option<BackupId>), String> {
    match (due.kind, said) {
        (BackupKind::Full, Some(BackupKind::Incremental)) => Err(
            "the command says it took an incremental where a full was asked for (facts: kind)"
                .into(),
        ),
        (_, Some(BackupKind::Full)) => Ok((BackupKind::Full, None)),
        (kind, _) => Ok((kind, due.parent.clone())),
    }
}

/// The volumes of a completed backup: each volume's objects are the uploaded files under
/// `<volume>/`. `Err` names each volume the command left empty.
pub fn volumes_taken(
    due: &DueBackup,
    objects: &[ObjectDigest],
    all_full: bool,
) -> Result<Vec<ReportVolume>, Vec<String>> {
    let mut volumes = Vec::new();
    let mut empty = Vec::new();
    for asked in &due.volumes {
        let own = format!("{}{}/", due.object_prefix, asked.name);
        let keys: Vec<&ObjectDigest> = objects.iter().filter(|o| o.key.starts_with(&own)).collect();
        if keys.is_empty() {
            empty.push(asked.name.clone());
            continue;
        }
        let (kind, parent) = if all_full {
            (BackupKind::Full, None)
        } else {
            (asked.kind, asked.parent.clone())
        };
        volumes.push(ReportVolume {
            name: asked.name.clone(),
            kind,
            parent,
            keys: keys.iter().map(|o| o.key.clone()).collect(),
            failed: false,
            size_bytes: Some(keys.iter().map(|o| o.size).sum()),
        });
    }
    if empty.is_empty() {
        Ok(volumes)
    } else {
        Err(empty)
    }
}

fn base(due: &DueBackup, status: ReportStatus, started_at: DateTime<FixedOffset>) -> Report {
    Report {
        schema_version: wire::SCHEMA_VERSION,
        backup_id: due.backup_id.clone(),
        cluster: due.cluster.clone(),
        plan: due.plan.clone(),
        schedule: Some(due.schedule.clone()),
        backup_name: due.backup_name.clone(),
        status,
        kind: due.kind,
        parent: due.parent.clone(),
        started_at: Some(started_at),
        completed_at: None,
        artifacts: Vec::new(),
        size_bytes: None,
        labels: due.labels.clone(),
        tags: Vec::new(),
        error: None,
        volumes: Vec::new(),
        holds: Vec::new(),
        merge: None,
        objects: Vec::new(),
        tick: Some(due.tick),
        log_range: None,
        differential: false,
    }
}

/// The `started` report, sent before the command runs: the catalog shows the backup in
/// progress, so nothing cleans up its objects while they are being written.
pub fn started(due: &DueBackup, started_at: DateTime<FixedOffset>) -> Report {
    let mut report = base(due, ReportStatus::Started, started_at);
    report.volumes = due
        .volumes
        .iter()
        .map(|v| ReportVolume {
            name: v.name.clone(),
            kind: v.kind,
            parent: v.parent.clone(),
            keys: Vec::new(),
            failed: false,
            size_bytes: None,
        })
        .collect();
    if !report.volumes.is_empty() {
        report.parent = None;
    }
    report
}

/// The report of a backup whose objects are all uploaded (`metadata.json` is added by the
/// caller once written).
pub fn completed(
    due: &DueBackup,
    started_at: DateTime<FixedOffset>,
    completed_at: DateTime<FixedOffset>,
    (kind, parent): (BackupKind, Option<BackupId>),
    volumes: Vec<ReportVolume>,
    objects: Vec<ObjectDigest>,
) -> Report {
    let mut report = base(due, ReportStatus::Completed, started_at);
    report.completed_at = Some(completed_at);
    if volumes.is_empty() {
        report.kind = kind;
        report.parent = parent;
    } else {
        report.kind = if volumes.iter().all(|v| v.kind == BackupKind::Full) {
            BackupKind::Full
        } else {
            BackupKind::Incremental
        };
        report.parent = None;
    }
    report.volumes = volumes;
    report.artifacts = objects.iter().map(|o| o.key.clone()).collect();
    report.size_bytes = Some(objects.iter().map(|o| o.size).sum());
    report.objects = objects;
    report
}

/// The most characters of a failure's reason a report carries.
pub const MAX_REASON_CHARS: usize = 2000;

/// The report of a backup that failed. `uploaded` are the objects written before the failure
/// (listed, so they are cleaned up with the failed backup); `failed_volumes` the volumes at
/// fault (`None`: all of them, the whole command failed).
pub fn failed(
    due: &DueBackup,
    started_at: DateTime<FixedOffset>,
    completed_at: DateTime<FixedOffset>,
    reason: &str,
    uploaded: Vec<ObjectDigest>,
    failed_volumes: Option<&[String]>,
) -> Report {
    let mut report = base(due, ReportStatus::Failed, started_at);
    report.completed_at = Some(completed_at);
    report.error = Some(if reason.chars().count() > MAX_REASON_CHARS {
        let mut cut: String = reason.chars().take(MAX_REASON_CHARS).collect();
        cut.push('…');
        cut
    } else {
        reason.to_string()
    });
    report.volumes = due
        .volumes
        .iter()
        .map(|v| {
            let keys: Vec<String> = uploaded
                .iter()
                .filter(|o| {
                    o.key
                        .starts_with(&format!("{}{}/", due.object_prefix, v.name))
                })
                .map(|o| o.key.clone())
                .collect();
            ReportVolume {
                name: v.name.clone(),
                kind: v.kind,
                parent: v.parent.clone(),
                failed: failed_volumes.is_none_or(|names| names.contains(&v.name)),
                size_bytes: None,
                keys,
            }
        })
        .collect();
    if !report.volumes.is_empty() {
        report.parent = None;
    }
    report.artifacts = uploaded.iter().map(|o| o.key.clone()).collect();
    report.size_bytes = Some(uploaded.iter().map(|o| o.size).sum());
    report.objects = uploaded;
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use sexton_model::wire::Message as _;

    fn due(kind: &str, parent: Option<&str>, volumes: serde_json::Value) -> DueBackup {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "schedule": "s", "cluster": "c1", "plan": "p",
            "tick": "2026-01-01T00:00:00Z", "fired_at": "2026-01-01T00:00:00Z",
            "backup_id": "b2", "backup_name": "s", "object_prefix": "backups/c1/s/b2/",
            "kind": kind, "parent": parent, "volumes": volumes,
        }))
        .unwrap()
    }

    fn object(name: &str, size: u64) -> ObjectDigest {
        ObjectDigest {
            key: format!("backups/c1/s/b2/{name}"),
            size,
            sha256: Some(sexton_model::digest::sha256_hex(name.as_bytes())),
            version_id: None,
        }
    }

    fn at(text: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(text).unwrap()
    }

    #[test]
    fn the_kind_taken_is_what_the_command_says_within_reason() {
        let inc = due("incremental", Some("b1"), serde_json::json!([]));
        assert_eq!(
            taken_kind(&inc, None).unwrap(),
            (BackupKind::Incremental, Some("b1".parse().unwrap()))
        );
        assert_eq!(
            taken_kind(&inc, Some(BackupKind::Full)).unwrap(),
            (BackupKind::Full, None)
        );
        let full = due("full", None, serde_json::json!([]));
        assert_eq!(taken_kind(&full, None).unwrap(), (BackupKind::Full, None));
        assert!(taken_kind(&full, Some(BackupKind::Incremental))
            .unwrap_err()
            .contains("full was asked"));
    }

    #[test]
    fn a_completed_report_is_valid_and_lists_every_object() {
        let inc = due("incremental", Some("b1"), serde_json::json!([]));
        let objects = vec![object("backup.xbstream", 10), object("extra/x", 2)];
        let report = completed(
            &inc,
            at("2026-01-01T00:00:01Z"),
            at("2026-01-01T00:00:05Z"),
            taken_kind(&inc, None).unwrap(),
            Vec::new(),
            objects.clone(),
        );
        assert_eq!(report.validate(), Ok(()));
        assert_eq!(report.size_bytes, Some(12));
        assert_eq!(report.artifacts.len(), 2);
        assert_eq!(report.parent.as_ref().map(|p| p.as_str()), Some("b1"));
        assert_eq!(
            sexton_shared::channels::ids::report(&report),
            "report.c1.b2.completed"
        );
    }

    #[test]
    fn volumes_are_the_files_under_their_directories() {
        let with_volumes = due(
            "incremental",
            None,
            serde_json::json!([{"name": "pv1", "kind": "incremental", "parent": "b1"},
                               {"name": "pv2", "kind": "full"}]),
        );
        let objects = vec![
            object("pv1/disk.img", 5),
            object("pv2/a", 1),
            object("pv2/b", 2),
        ];
        let volumes = volumes_taken(&with_volumes, &objects, false).unwrap();
        assert_eq!(volumes[0].keys, ["backups/c1/s/b2/pv1/disk.img"]);
        assert_eq!(volumes[1].size_bytes, Some(3));
        let report = completed(
            &with_volumes,
            at("2026-01-01T00:00:01Z"),
            at("2026-01-01T00:00:05Z"),
            (BackupKind::Incremental, None),
            volumes,
            objects.clone(),
        );
        assert_eq!(report.validate(), Ok(()));
        assert_eq!(report.kind, BackupKind::Incremental);
        // All full when the command says so.
        let volumes = volumes_taken(&with_volumes, &objects, true).unwrap();
        assert!(volumes
            .iter()
            .all(|v| v.kind == BackupKind::Full && v.parent.is_none()));
        // A volume left empty fails.
        let missing = volumes_taken(&with_volumes, &objects[..1], false).unwrap_err();
        assert_eq!(missing, ["pv2"]);
        let report = failed(
            &with_volumes,
            at("2026-01-01T00:00:01Z"),
            at("2026-01-01T00:00:05Z"),
            "volume pv2: empty",
            Vec::new(),
            Some(&missing),
        );
        assert_eq!(report.validate(), Ok(()));
        assert!(!report.volumes[0].failed && report.volumes[1].failed);
    }

    #[test]
    fn a_failed_report_is_valid_whatever_happened() {
        let inc = due("incremental", Some("b1"), serde_json::json!([]));
        let report = failed(
            &inc,
            at("2026-01-01T00:00:01Z"),
            at("2026-01-01T00:00:05Z"),
            &"x".repeat(5000),
            vec![object("part", 3)],
            None,
        );
        assert_eq!(report.validate(), Ok(()));
        assert_eq!(report.status, ReportStatus::Failed);
        assert!(report.error.as_ref().unwrap().chars().count() <= MAX_REASON_CHARS + 1);
        assert_eq!(report.artifacts, ["backups/c1/s/b2/part"]);
        assert_eq!(
            sexton_shared::channels::ids::report(&report),
            "report.c1.b2.failed"
        );
        let started = started(&inc, at("2026-01-01T00:00:01Z"));
        assert_eq!(started.validate(), Ok(()));
        assert_eq!(
            sexton_shared::channels::ids::report(&started),
            "report.c1.b2.started"
        );
    }
}
