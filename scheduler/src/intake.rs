//! Intake: a `completed` report becomes a recovery point only after Sexton has seen its objects.
//!
//! An executor's word is not enough: a report of objects that were never uploaded (a bug that
//! reports after a failed upload, or a forged message) would otherwise count for `keep_last`
//! and the floor, and make retention delete real backups. So before a completed backup is
//! recorded, the scheduler lists the backup's directory (one `ListObjectsV2`, not a `HEAD` per
//! key) and reads its `metadata.json`, and [`judge`] checks that
//!
//! - every object the report lists is in the bucket, with the size the report gives;
//! - `metadata.json` is Sexton's versioned document and describes the same backup (id,
//!   cluster, plan, kind, parent, completion time, volumes) and exactly the same objects, with
//!   the sizes the bucket shows and the checksums the report gives.
//!
//! If anything is wrong the backup is recorded `failed`, with every problem in its
//! `last_error`: it never counts for a rule or the floor, never becomes a parent, and its
//! partial objects are cleaned up like any failed backup's. An unreadable bucket is a
//! transient failure (the report is retried); Sexton never guesses.
//!
//! Intake proves existence, size and the executor's consistency; it does not read the data
//! back. Content is proven by verification, which recomputes the checksums recorded here.
//!
//! A merge report (the executor consolidated a chain into its target) lists the target's old
//! objects and the new one: all must be there with the reported sizes, and a `metadata.json`
//! it lists must name the target as the full it now is.

use std::collections::BTreeMap;

use sexton_model::{
    digest,
    metadata::{self, BackupMetadata},
    records::BackupKind,
    wire::{ObjectDigest, Report, ReportStatus},
};
use sexton_shared::object_store::{ObjectError, ObjectStore};

/// What intake needs at run time: the bucket, its counter, and where to tell operators.
#[derive(Clone)]
pub struct Intake {
    pub store: ObjectStore,
    /// The due-backups this fleet issued ([`crate::dues`]).
    pub dues: async_nats::jetstream::kv::Store,
    /// `sexton_intake_checks_total{outcome}`.
    pub metrics: prometheus::IntCounterVec,
    pub jetstream: async_nats::jetstream::Context,
}

impl Intake {
    /// Tells operators that a completed report was recorded failed, and why.
    pub async fn refused(&self, report: &Report) {
        let reason = report.error.clone().unwrap_or_default();
        tracing::warn!(cluster = %report.cluster, backup = %report.backup_id, %reason, "intake refused a completed report; the backup is recorded failed");
        sexton_shared::outcome::publish_incident(
            &self.jetstream,
            sexton_model::wire::Incident {
                schema_version: sexton_model::wire::SCHEMA_VERSION,
                service: "scheduler".into(),
                kind: "intake-refused".into(),
                cluster: Some(report.cluster.to_string()),
                backup_id: Some(report.backup_id.to_string()),
                subject: sexton_shared::channels::REPORTS.subject(&report.cluster),
                reason,
                at: chrono::Utc::now(),
            },
        )
        .await;
    }
}

/// What intake concluded about a completed report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every object is in the bucket as reported: the record's `objects`, as seen.
    Seen(Vec<ObjectDigest>),
    /// What is wrong, one entry per problem. Nothing of it counts.
    Refused(Vec<String>),
}

impl Verdict {
    /// The problems in one line, for a record's `last_error` and an incident.
    pub fn reason(problems: &[String]) -> String {
        const SHOWN: usize = 10;
        let mut text = problems
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if problems.len() > SHOWN {
            text.push_str(&format!("; and {} more", problems.len() - SHOWN));
        }
        format!("not recorded as completed: {text}")
    }
}

/// Lists the backup's directory, reads its `metadata.json` and judges the report. `Err` when
/// the bucket could not be read: retry later, never guess.
pub async fn examine(store: &ObjectStore, report: &Report) -> Result<Verdict, ObjectError> {
    let directory = store.backup_prefix(
        &report.cluster,
        &report.backup_name,
        report.backup_id.as_str(),
    );
    let listing: BTreeMap<String, u64> = store
        .list(&directory)
        .await?
        .into_iter()
        .map(|object| (object.key, object.size.max(0) as u64))
        .collect();
    let metadata_key = report_keys(report)
        .into_iter()
        .find(|key| metadata::is_metadata_key(key));
    let metadata_body = match metadata_key {
        Some(key)
            if listing
                .get(&key)
                .is_some_and(|size| *size as usize <= metadata::MAX_METADATA_BYTES) =>
        {
            // Listed a moment ago; gone now means deleted under us, which judge reports.
            store.get(&key).await?
        }
        _ => None,
    };
    let mut verdict = judge(report, &listing, metadata_body.as_deref());
    if let Verdict::Seen(objects) = &mut verdict {
        // On a versioned bucket the recovery point is the versions seen now (issue 29):
        // locks, restore tests and the deleter name them exactly.
        if store.is_versioned().await? {
            let versions = store.current_versions(&directory).await?;
            for object in objects.iter_mut() {
                object.version_id = versions.get(&object.key).cloned();
            }
        }
    }
    Ok(verdict)
}

/// Why a completed report is refused for the times it claims, if it is: against the due it
/// answers ([`crate::dues::judge`]), then by how late it was published ([`judge_delay`]).
pub fn judge_times(
    report: &Report,
    due: Option<&crate::dues::IssuedDue>,
    published: Option<chrono::DateTime<chrono::Utc>>,
    settings: &sexton_shared::config::SchedulerConfig,
) -> Option<String> {
    crate::dues::judge(report, due, settings.require_due).or_else(|| {
        published.and_then(|published| judge_delay(report, published, settings.max_report_delay))
    })
}

/// Why a completed report is refused for how long after its claimed completion it was
/// published (`published`, the NATS server's clock), if it is: more than `max_delay` (issue
/// 29, restic#22057). A merge report keeps its backup's old completion time and is not judged.
pub fn judge_delay(
    report: &Report,
    published: chrono::DateTime<chrono::Utc>,
    max_delay: std::time::Duration,
) -> Option<String> {
    if max_delay.is_zero() || report.merge.is_some() {
        return None;
    }
    let completed = report.completed_at?.with_timezone(&chrono::Utc);
    let allowed = chrono::Duration::from_std(max_delay).ok()?;
    let late = published - completed;
    (late > allowed).then(|| {
        format!(
            "completed_at {} is {} before the report was published ({}), more than \
             scheduler.max_report_delay ({}): a backdated report is not counted",
            completed.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            spoken(late.to_std().unwrap_or_default()),
            published.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            spoken(max_delay)
        )
    })
}

/// A duration in the largest whole unit that fits (`3d`, `90m`, `45s`).
fn spoken(duration: std::time::Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Every object key of a report, once each, in the report's order.
pub fn report_keys(report: &Report) -> Vec<String> {
    let mut keys = report.artifacts.clone();
    for key in report.volumes.iter().flat_map(|v| &v.keys) {
        if !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// The pure judgement of a completed report against the listing of its directory (key →
/// size) and the body of its `metadata.json` (`None` when it was not in the listing or too
/// large to read).
pub fn judge(
    report: &Report,
    listing: &BTreeMap<String, u64>,
    metadata_body: Option<&[u8]>,
) -> Verdict {
    let keys = report_keys(report);
    let reported: BTreeMap<&str, &ObjectDigest> =
        report.objects.iter().map(|o| (o.key.as_str(), o)).collect();
    let mut problems = Vec::new();
    for key in &keys {
        match listing.get(key) {
            None => problems.push(format!("object {key} is not in the bucket")),
            Some(&size) => {
                if let Some(claimed) = reported.get(key.as_str()) {
                    if claimed.size != size {
                        problems.push(format!(
                            "object {key} holds {size} bytes in the bucket, the report says {}",
                            claimed.size
                        ));
                    }
                }
            }
        }
    }
    let metadata_key = keys.iter().find(|key| metadata::is_metadata_key(key));
    let described = match (metadata_key, metadata_body) {
        (None, _) if report.merge.is_none() => {
            problems.push("the report lists no metadata.json".into());
            None
        }
        (None, _) => None,
        (Some(key), None) => {
            if let Some(size) = listing.get(key) {
                problems.push(format!(
                    "{key} holds {size} bytes, more than the {} read",
                    metadata::MAX_METADATA_BYTES
                ));
            }
            // A missing metadata.json was reported above.
            None
        }
        (Some(_), Some(body)) => match BackupMetadata::decode(body) {
            Ok(document) => Some(document),
            // A merge target recorded before metadata.json was Sexton's document keeps the
            // one it has; the merged objects are still checked above.
            Err(_) if report.merge.is_some() => None,
            Err(err) => {
                problems.push(err.to_string());
                None
            }
        },
    };
    if let Some(document) = &described {
        if report.merge.is_some() {
            check_merged_metadata(report, document, &mut problems);
        } else {
            check_metadata(report, document, &keys, listing, &reported, &mut problems);
        }
    }
    if !problems.is_empty() {
        return Verdict::Refused(problems);
    }
    let seen = keys
        .iter()
        .map(|key| {
            let sha256 = if metadata::is_metadata_key(key) {
                metadata_body.map(digest::sha256_hex)
            } else {
                reported
                    .get(key.as_str())
                    .and_then(|o| o.sha256.clone())
                    .or_else(|| {
                        described
                            .as_ref()
                            .and_then(|d| d.object(key))
                            .and_then(|o| o.sha256.clone())
                    })
            };
            ObjectDigest {
                key: key.clone(),
                size: listing[key],
                sha256,
                version_id: None,
            }
        })
        .collect();
    Verdict::Seen(seen)
}

/// `metadata.json` of an ordinary completed backup describes exactly what the report does.
fn check_metadata(
    report: &Report,
    document: &BackupMetadata,
    keys: &[String],
    listing: &BTreeMap<String, u64>,
    reported: &BTreeMap<&str, &ObjectDigest>,
    problems: &mut Vec<String>,
) {
    let mut differs = |field: &str, ours: String, theirs: String| {
        if ours != theirs {
            problems.push(format!(
                "metadata.json says {field} {theirs}, the report {ours}"
            ));
        }
    };
    differs(
        "backup_id",
        report.backup_id.to_string(),
        document.backup_id.to_string(),
    );
    differs(
        "cluster",
        report.cluster.to_string(),
        document.cluster.to_string(),
    );
    differs("plan", report.plan.to_string(), document.plan.to_string());
    differs(
        "backup_name",
        report.backup_name.clone(),
        document.backup_name.clone(),
    );
    differs(
        "kind",
        format!("{:?}", report.kind),
        format!("{:?}", document.kind),
    );
    differs(
        "parent",
        format!("{:?}", report.parent),
        format!("{:?}", document.parent),
    );
    differs(
        "completed_at",
        format!("{:?}", report.completed_at),
        format!("{:?}", Some(document.completed_at)),
    );
    if document.status != ReportStatus::Completed {
        problems.push("metadata.json says the backup failed".into());
    }
    let volumes = |list: &[sexton_model::wire::ReportVolume]| {
        let mut shape: Vec<(String, BackupKind, Option<String>, Vec<String>)> = list
            .iter()
            .map(|v| {
                let mut keys = v.keys.clone();
                keys.sort();
                (
                    v.name.clone(),
                    v.kind,
                    v.parent.as_ref().map(|p| p.to_string()),
                    keys,
                )
            })
            .collect();
        shape.sort();
        shape
    };
    if volumes(&report.volumes) != volumes(&document.volumes) {
        problems.push("metadata.json's volumes differ from the report's".into());
    }
    for key in keys.iter().filter(|k| !metadata::is_metadata_key(k)) {
        let Some(object) = document.object(key) else {
            problems.push(format!("metadata.json does not describe {key}"));
            continue;
        };
        if let Some(&size) = listing.get(key) {
            if object.size != size {
                problems.push(format!(
                    "metadata.json says {key} holds {} bytes, the bucket {size}",
                    object.size
                ));
            }
        }
        let claimed = reported.get(key.as_str()).and_then(|o| o.sha256.as_ref());
        if let (Some(claimed), Some(written)) = (claimed, &object.sha256) {
            if claimed != written {
                problems.push(format!(
                    "{key}: the report's sha256 {claimed} is not metadata.json's {written}"
                ));
            }
        }
    }
    for object in &document.objects {
        if !keys.contains(&object.key) {
            problems.push(format!(
                "metadata.json describes {}, which the report does not list",
                object.key
            ));
        }
    }
}

/// A merge report's `metadata.json` describes the target as the full it now is.
fn check_merged_metadata(report: &Report, document: &BackupMetadata, problems: &mut Vec<String>) {
    if document.backup_id != report.backup_id || document.cluster != report.cluster {
        problems.push(format!(
            "metadata.json describes {}/{}, not the merge target {}/{}",
            document.cluster, document.backup_id, report.cluster, report.backup_id
        ));
    }
    let whole = report.merge.as_ref().is_some_and(|m| m.volume.is_none());
    if whole && (document.kind != BackupKind::Full || document.parent.is_some()) {
        problems
            .push("metadata.json of a merged target must describe a full without parent".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "backups/c1/s/b1/";

    fn key(name: &str) -> String {
        format!("{DIR}{name}")
    }

    fn metadata(objects: &[(&str, u64, &[u8])]) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "format": metadata::FORMAT, "schema_version": 1, "backup_id": "b1",
            "cluster": "c1", "plan": "full", "backup_name": "s", "kind": "full",
            "completed_at": "2026-01-01T01:00:00Z",
            "objects": objects.iter().map(|(name, size, body)| serde_json::json!({
                "key": key(name), "size": size, "sha256": digest::sha256_hex(body),
            })).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    fn report(objects: &[(&str, u64, &[u8])]) -> Report {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "backup_id": "b1", "cluster": "c1", "plan": "full",
            "backup_name": "s", "status": "completed", "kind": "full",
            "completed_at": "2026-01-01T01:00:00Z",
            "artifacts": objects.iter().map(|(name, _, _)| key(name))
                .chain([key("metadata.json")]).collect::<Vec<_>>(),
            "objects": objects.iter().map(|(name, size, body)| serde_json::json!({
                "key": key(name), "size": size, "sha256": digest::sha256_hex(body),
            })).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    fn listing(entries: &[(&str, u64)]) -> BTreeMap<String, u64> {
        entries
            .iter()
            .map(|(name, size)| (key(name), *size))
            .collect()
    }

    fn refused(verdict: Verdict) -> String {
        match verdict {
            Verdict::Refused(problems) => problems.join("; "),
            Verdict::Seen(seen) => panic!("seen: {seen:?}"),
        }
    }

    #[test]
    fn a_backup_whose_objects_are_there_as_reported_is_seen() {
        let data: &[(&str, u64, &[u8])] = &[("backup.xbstream", 3, b"abc")];
        let body = metadata(data);
        let verdict = judge(
            &report(data),
            &listing(&[("backup.xbstream", 3), ("metadata.json", body.len() as u64)]),
            Some(&body),
        );
        let Verdict::Seen(seen) = verdict else {
            panic!("{verdict:?}")
        };
        assert_eq!(seen.len(), 2);
        assert_eq!(
            seen[0].sha256.as_deref(),
            Some(digest::sha256_hex(b"abc").as_str())
        );
        assert_eq!(
            seen[1].sha256.as_deref(),
            Some(digest::sha256_hex(&body).as_str())
        );
    }

    #[test]
    fn phantoms_partial_uploads_and_wrong_sizes_are_refused_with_every_key_named() {
        let data: &[(&str, u64, &[u8])] = &[("a.xb", 3, b"abc"), ("b.xb", 4, b"abcd")];
        let body = metadata(data);
        let meta_size = body.len() as u64;
        // Nothing uploaded (the outside test's phantom).
        let why = refused(judge(&report(data), &listing(&[]), None));
        assert!(
            why.contains(&format!("object {} is not in the bucket", key("a.xb"))),
            "{why}"
        );
        assert!(
            why.contains(&format!(
                "object {} is not in the bucket",
                key("metadata.json")
            )),
            "{why}"
        );
        // One object missing.
        let why = refused(judge(
            &report(data),
            &listing(&[("a.xb", 3), ("metadata.json", meta_size)]),
            Some(&body),
        ));
        assert!(
            why.contains(&key("b.xb")) && !why.contains(&format!("{} is not", key("a.xb"))),
            "{why}"
        );
        // A wrong size (a truncated upload).
        let why = refused(judge(
            &report(data),
            &listing(&[("a.xb", 3), ("b.xb", 2), ("metadata.json", meta_size)]),
            Some(&body),
        ));
        assert!(
            why.contains("holds 2 bytes in the bucket, the report says 4"),
            "{why}"
        );
    }

    #[test]
    fn metadata_json_must_be_ours_and_agree_with_the_report() {
        let data: &[(&str, u64, &[u8])] = &[("a.xb", 3, b"abc")];
        let all = |meta: &[u8]| listing(&[("a.xb", 3), ("metadata.json", meta.len() as u64)]);
        let check = |meta: Vec<u8>, expected: &str| {
            let why = refused(judge(&report(data), &all(&meta), Some(&meta)));
            assert!(why.contains(expected), "{expected}: {why}");
        };
        check(b"{}".to_vec(), "not a sexton backup metadata");
        check(metadata(&[]), "does not describe");
        check(metadata(&[("a.xb", 3, b"abd")]), "is not metadata.json's");
        check(metadata(&[("a.xb", 4, b"abc")]), "metadata.json says");
        check(
            metadata(&[("a.xb", 3, b"abc"), ("z.xb", 1, b"z")]),
            "which the report does not list",
        );
        let mut other: serde_json::Value = serde_json::from_slice(&metadata(data)).unwrap();
        other["completed_at"] = "2026-01-01T02:00:00Z".into();
        check(serde_json::to_vec(&other).unwrap(), "completed_at");
        other["kind"] = "incremental".into();
        other["parent"] = "b0".into();
        check(serde_json::to_vec(&other).unwrap(), "parent");
        // No metadata.json listed at all.
        let mut bare = report(data);
        bare.artifacts.pop();
        let why = refused(judge(&bare, &listing(&[("a.xb", 3)]), None));
        assert!(why.contains("lists no metadata.json"), "{why}");
    }

    #[test]
    fn a_report_published_longer_after_its_completion_than_allowed_is_refused() {
        let mut report = report(&[("backup.xbstream", 4, b"data"), ("metadata.json", 0, b"")]);
        let at = |text: &str| {
            chrono::DateTime::parse_from_rfc3339(text)
                .unwrap()
                .with_timezone(&chrono::Utc)
        };
        report.completed_at = Some(at("2026-03-01T03:00:00Z").fixed_offset());
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(judge_delay(&report, at("2026-03-01T03:59:59Z"), hour), None);
        assert_eq!(judge_delay(&report, at("2026-03-01T04:00:00Z"), hour), None);
        let why = judge_delay(&report, at("2026-03-03T03:00:00Z"), hour).expect("refused");
        assert!(
            why.contains("is 2d before the report was published"),
            "{why}"
        );
        assert!(why.contains("scheduler.max_report_delay (1h)"), "{why}");
        // Off, or a merge (its backup completed long ago): never judged.
        assert_eq!(
            judge_delay(
                &report,
                at("2030-01-01T00:00:00Z"),
                std::time::Duration::ZERO
            ),
            None
        );
        report.merge = Some(sexton_model::wire::MergeDone {
            target_uid: "u".into(),
            sources: Vec::new(),
            volume: None,
        });
        assert_eq!(judge_delay(&report, at("2030-01-01T00:00:00Z"), hour), None);
    }

    #[test]
    fn the_reason_names_the_first_problems_and_counts_the_rest() {
        let problems: Vec<String> = (0..12).map(|n| format!("p{n}")).collect();
        let reason = Verdict::reason(&problems);
        assert!(reason.contains("p9") && !reason.contains("p10") && reason.ends_with("and 2 more"));
    }
}
