//! The scrub: the catalog compared with the bucket, both ways, so that a recovery point whose
//! objects vanished or changed behind Sexton's back stops counting.
//!
//! One pass per cluster lists the cluster's prefix once (not a `HEAD` per key) after reading
//! the catalog, then [`judge`] compares:
//!
//! - a `completed` record whose objects are not all there, or not with the sizes intake saw,
//!   becomes `missing`: not counted by any rule or floor, never a parent, never deleted by
//!   retention without a user's word; an incident and `sexton_missing_backups` say so;
//! - a `missing` record whose objects are all there again as recorded becomes `completed`;
//! - objects no record owns are counted (the orphans report lists and deletes them).
//!
//! Records in any other state are left alone: a backup being deleted loses its objects on
//! purpose, one in progress or failed never counted. Records that are partly being deleted
//! (a volume deletion claimed) are skipped too. A record that changes between the catalog read
//! and the write is left for the next pass (compare-and-set), so a pass never overrides the
//! deleter or a newer report. Records written before intake recorded sizes are checked for
//! existence only, and so is every `metadata.json` (an executor rewrites it when it merges a
//! chain into the backup; the data objects are what a restore reads).
//!
//! On a versioned bucket (Object Lock, issue 29) the recovery point is the version intake
//! recorded. The pass lists every version and delete marker instead: a recorded version that
//! is there with its size counts, whatever was written over it; a current version that is not
//! the recorded one (an overwrite) or a delete marker over it is **tampering**, not loss: the
//! backup keeps counting, and an incident (`backup-tampered`) and
//! `sexton_tampered_backups{cluster}` say so. Only a recorded version gone is loss.
//!
//! The pass runs when the scheduler's sweep of a cluster asks for it (`scrub: true`, at most
//! once per `scheduler.scrub_interval`) and on demand (`sexton catalog scrub`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sexton_model::{
    copies::CopyState,
    metadata,
    names::{ClusterName, LocationName},
    records::{BackupRecord, BackupStatus},
};
use sexton_shared::catalog::Versioned;

/// What the pass found for one backup whose state changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    /// The catalog revision the finding was judged at; the write is conditional on it.
    pub revision: u64,
    /// `missing` (its objects are gone or changed) or `completed` (found again).
    pub becomes: BackupStatus,
    /// What differs, one entry per object; empty for a backup found again.
    pub problems: Vec<String>,
}

/// The result of one pass (or of a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubReport {
    pub cluster: String,
    pub dry_run: bool,
    /// Records compared with the bucket.
    pub checked: usize,
    /// Objects listed under the cluster's prefix.
    pub objects_listed: usize,
    pub findings: Vec<Finding>,
    /// Findings not written because the record changed since it was read (the next pass
    /// judges them again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_meanwhile: Vec<String>,
    /// Objects under the cluster's prefix that no record owns (binlog segments excepted): the
    /// orphans report (`sexton backup orphans`) lists and deletes them.
    pub unowned_objects: usize,
    /// Records that are `missing` after the pass.
    pub missing_after: usize,
    /// Copies at other locations whose state changes (issue 28): each configured location's
    /// copies of the cluster compared with that location's listing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<CopyFinding>,
    /// Locations whose listing failed: their copies were not judged this pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations_unchecked: Vec<String>,
    /// Backups written over or marked deleted behind Sexton's back whose recorded versions
    /// are all still there (a versioned bucket): they keep counting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tampered: Vec<Tampered>,
    /// Records whose objects at primary were written to another store than the fleet's
    /// (issue 54): not judged by this listing, never marked missing by it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub elsewhere: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A backup whose recorded versions are all there but that someone wrote over or put a
/// delete marker on (issue 29): it still counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tampered {
    pub id: String,
    /// Where: absent for primary, else the location whose copy was tampered with (issue 47).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<LocationName>,
    /// One entry per object written over or marked deleted.
    pub problems: Vec<String>,
}

/// A versioned bucket's listing, as the scrub reads it: each version's size, and what each
/// key's newest entry is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Versions {
    /// (key, version id) → size, for versions (not delete markers).
    pub sizes: BTreeMap<(String, String), u64>,
    /// key → its newest entry: `Some(version id)`, or `None` for a delete marker.
    pub latest: BTreeMap<String, Option<String>>,
}

impl Versions {
    /// Builds it from a `ListObjectVersions` listing, and the listing of current objects (key
    /// → size) a plain `ListObjectsV2` would give.
    pub fn from_entries(
        entries: &[sexton_shared::object_store::lock::VersionEntry],
    ) -> (Versions, BTreeMap<String, u64>) {
        let mut versions = Versions::default();
        let mut current = BTreeMap::new();
        for entry in entries {
            if !entry.delete_marker {
                versions
                    .sizes
                    .insert((entry.key.clone(), entry.version_id.clone()), entry.size);
            }
            if entry.latest {
                if entry.delete_marker {
                    versions.latest.insert(entry.key.clone(), None);
                } else {
                    versions
                        .latest
                        .insert(entry.key.clone(), Some(entry.version_id.clone()));
                    current.insert(entry.key.clone(), entry.size);
                }
            }
        }
        (versions, current)
    }
}

/// What the pass found for one copy at a location whose state changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyFinding {
    pub id: String,
    pub location: LocationName,
    pub revision: u64,
    /// `missing` (objects of it gone or changed there) or `copied` (whole there again).
    pub becomes: CopyState,
    pub problems: Vec<String>,
}

/// The pure comparison of a cluster's copies at `location` with that location's listing
/// (key → size) and, where the location is versioned (Object Lock), its versions. A copy that
/// counts there (`copied`) with an object gone or of another size becomes `missing`; a
/// `missing` one whose objects are all there as written becomes `copied` again. On a versioned
/// location the version the copier recorded is what counts, as at primary ([`object_problems`],
/// issue 47): one written over or under a delete marker but still there is tampering, pushed to
/// `tampered`, and the copy keeps counting. Copies in other states (being deleted, deleted) are
/// left alone, and so is a copy that lists no objects (nothing to compare).
pub fn judge_copies(
    records: &[Versioned<BackupRecord>],
    location: &LocationName,
    listing: &BTreeMap<String, u64>,
    versions: Option<&Versions>,
    tampered: &mut Vec<Tampered>,
) -> Vec<CopyFinding> {
    let mut findings = Vec::new();
    for record in records {
        let Some(copy) = record.value.copies.get(location) else {
            continue;
        };
        if !matches!(copy.state, CopyState::Copied | CopyState::Missing) || copy.objects.is_empty()
        {
            continue;
        }
        let recorded: BTreeMap<&str, (u64, Option<&str>)> = copy
            .objects
            .iter()
            .map(|o| (o.key.as_str(), (o.size, o.version_id.as_deref())))
            .collect();
        let (problems, tampering) = object_problems(
            copy.objects.iter().map(|o| o.key.clone()),
            &recorded,
            listing,
            versions,
            "copied",
        );
        if !tampering.is_empty() && problems.is_empty() {
            tampered.push(Tampered {
                id: record.value.id.to_string(),
                location: Some(location.clone()),
                problems: tampering,
            });
        }
        let becomes = match (copy.state, problems.is_empty()) {
            (CopyState::Copied, false) => CopyState::Missing,
            (CopyState::Missing, true) => CopyState::Copied,
            _ => continue,
        };
        findings.push(CopyFinding {
            id: record.value.id.to_string(),
            location: location.clone(),
            revision: record.revision,
            becomes,
            problems,
        });
    }
    findings
}

/// The record with a copy finding applied (written with compare-and-set on the finding's
/// revision).
pub fn apply_copy(record: &BackupRecord, finding: &CopyFinding) -> BackupRecord {
    let mut updated = record.clone();
    updated.keep_mark(finding.revision);
    if let Some(copy) = updated.copies.get_mut(&finding.location) {
        copy.state = finding.becomes;
        copy.problems = finding.problems.clone();
    }
    updated
}

/// The pure comparison of a cluster's records with the listing of its prefix (key → size).
pub fn judge(
    cluster: &ClusterName,
    records: &[Versioned<BackupRecord>],
    listing: &BTreeMap<String, u64>,
    versions: Option<&Versions>,
    binlog_prefix: &str,
) -> ScrubReport {
    let mut report = ScrubReport {
        cluster: cluster.to_string(),
        objects_listed: listing.len(),
        ..ScrubReport::default()
    };
    let mut owned: BTreeSet<&str> = BTreeSet::new();
    for record in records {
        let backup = &record.value;
        // A record whose objects at primary were deleted (its copies elsewhere keep it, issue
        // 28) owns nothing here and is not judged here.
        if !backup.held_at_primary() {
            continue;
        }
        owned.extend(backup.all_keys_iter());
        let judged = matches!(
            backup.status,
            BackupStatus::Completed | BackupStatus::Missing
        ) && backup.volume_deletion.is_none();
        if !judged {
            continue;
        }
        report.checked += 1;
        let (problems, tampering) = problems_of(backup, listing, versions);
        if !tampering.is_empty() && problems.is_empty() {
            report.tampered.push(Tampered {
                id: backup.id.to_string(),
                location: None,
                problems: tampering,
            });
        }
        let becomes = match (backup.status, problems.is_empty()) {
            (BackupStatus::Completed, false) => BackupStatus::Missing,
            (BackupStatus::Missing, true) => BackupStatus::Completed,
            _ => continue,
        };
        report.findings.push(Finding {
            id: backup.id.to_string(),
            revision: record.revision,
            becomes,
            problems,
        });
    }
    report.unowned_objects = listing
        .keys()
        .filter(|key| !owned.contains(key.as_str()) && !key.starts_with(binlog_prefix))
        .count();
    let missing_before = records
        .iter()
        .filter(|r| r.value.status == BackupStatus::Missing)
        .count();
    let newly_missing = report
        .findings
        .iter()
        .filter(|f| f.becomes == BackupStatus::Missing)
        .count();
    let found_again = report.findings.len() - newly_missing;
    report.missing_after = missing_before + newly_missing - found_again;
    report
}

/// Every way the bucket differs from what the record says it holds: the losses (the backup no
/// longer counts), and, on a versioned bucket, the tampering (a recorded version written over
/// or marked deleted, still there: it counts).
pub fn problems_of(
    backup: &BackupRecord,
    listing: &BTreeMap<String, u64>,
    versions: Option<&Versions>,
) -> (Vec<String>, Vec<String>) {
    let recorded: BTreeMap<&str, (u64, Option<&str>)> = backup
        .objects
        .iter()
        .map(|o| (o.key.as_str(), (o.size, o.version_id.as_deref())))
        .collect();
    object_problems(backup.all_keys(), &recorded, listing, versions, "recorded")
}

/// The one judgement of objects against a store, wherever they lie (primary or a location):
/// each of `keys`, with its size and version as `recorded` (by key) when known, against the
/// store's `listing` of current objects and, on a versioned store, its `versions`. A recorded
/// version is judged by that version (a newer one over it, or a delete marker, is tampering:
/// the recovery point is still there); without one, the current object. `metadata.json` is
/// judged by existence only (an executor rewrites it when it merges). `when` words the size
/// recorded ("recorded", "copied"). Returns (losses, tampering).
pub fn object_problems(
    keys: impl IntoIterator<Item = String>,
    recorded: &BTreeMap<&str, (u64, Option<&str>)>,
    listing: &BTreeMap<String, u64>,
    versions: Option<&Versions>,
    when: &str,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut tampering = Vec::new();
    for key in keys {
        let is_metadata = metadata::is_metadata_key(&key);
        let by_version = match (versions, recorded.get(key.as_str())) {
            (Some(versions), Some(&(size, Some(version)))) => Some((versions, size, version)),
            _ => None,
        };
        if let Some((versions, size, version)) = by_version {
            match versions.sizes.get(&(key.clone(), version.to_string())) {
                None => problems.push(format!("object {key} version {version} is gone")),
                Some(found) if *found != size && !is_metadata => problems.push(format!(
                    "object {key} version {version} holds {found} bytes, {size} when {when}"
                )),
                Some(_) => match versions.latest.get(&key) {
                    Some(Some(current)) if current == version => {}
                    Some(Some(current)) => tampering.push(format!(
                        "object {key} was written over (current version {current}; the {when} \
                         version {version} is still there)"
                    )),
                    Some(None) => tampering.push(format!(
                        "object {key} has a delete marker over it (the {when} version \
                         {version} is still there)"
                    )),
                    None => {}
                },
            }
            continue;
        }
        match (listing.get(&key), recorded.get(key.as_str())) {
            (None, _) => problems.push(format!("object {key} is gone")),
            // An executor rewrites metadata.json when it merges a chain into the backup (the
            // only object the contract lets it rewrite): its size is not the backup's data.
            (Some(_), _) if is_metadata => {}
            (Some(found), Some(&(size, _))) if *found != size => problems.push(format!(
                "object {key} holds {found} bytes, {size} when {when}"
            )),
            _ => {}
        }
    }
    (problems, tampering)
}

/// A record's new state after a finding: `missing` with why, or `completed` again.
pub fn apply(
    record: &BackupRecord,
    finding: &Finding,
    now: chrono::DateTime<chrono::Utc>,
) -> BackupRecord {
    let mut updated = record.clone();
    updated.status = finding.becomes;
    match finding.becomes {
        BackupStatus::Missing => {
            updated.last_error = Some(format!(
                "missing since {}: {}",
                now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                finding.problems.join("; ")
            ));
        }
        _ => {
            updated.last_error = None;
            updated.seen_at = Some(now);
        }
    }
    updated
}

#[cfg(test)]
mod tests {
    use super::*;
    use sexton_model::wire::ObjectDigest;

    fn record(
        id: &str,
        status: BackupStatus,
        sizes: &[(&str, Option<u64>)],
    ) -> Versioned<BackupRecord> {
        let keys: Vec<String> = sizes
            .iter()
            .map(|(name, _)| format!("b/c1/s/{id}/{name}"))
            .collect();
        let mut value: BackupRecord = serde_json::from_value(serde_json::json!({
            "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p", "backup_name": "s",
            "kind": "full", "status": status, "artifacts": keys,
        }))
        .unwrap();
        value.objects = sizes
            .iter()
            .zip(&keys)
            .filter_map(|((_, size), key)| {
                size.map(|size| ObjectDigest {
                    key: key.clone(),
                    size,
                    sha256: None,
                    version_id: None,
                })
            })
            .collect();
        Versioned { value, revision: 7 }
    }

    fn listing(entries: &[(&str, u64)]) -> BTreeMap<String, u64> {
        entries.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    /// One case: records, the listing, and the expected (id, becomes, problem fragments).
    fn check(
        records: &[Versioned<BackupRecord>],
        listing: &BTreeMap<String, u64>,
        expected: &[(&str, BackupStatus, &[&str])],
    ) -> ScrubReport {
        let report = judge(
            &"c1".parse().unwrap(),
            records,
            listing,
            None,
            "b/c1/binlog/",
        );
        let found: Vec<(&str, BackupStatus)> = report
            .findings
            .iter()
            .map(|f| (f.id.as_str(), f.becomes))
            .collect();
        let want: Vec<(&str, BackupStatus)> = expected.iter().map(|(id, s, _)| (*id, *s)).collect();
        assert_eq!(found, want, "{report:#?}");
        for (finding, (_, _, fragments)) in report.findings.iter().zip(expected) {
            let text = finding.problems.join("; ");
            for fragment in *fragments {
                assert!(text.contains(fragment), "{text} lacks {fragment}");
            }
        }
        report
    }

    #[test]
    fn on_a_versioned_bucket_the_recorded_version_counts_and_what_covers_it_is_tampering() {
        use sexton_shared::object_store::lock::VersionEntry;
        let with_versions = |id: &str| {
            let mut r = record(
                id,
                BackupStatus::Completed,
                &[("data", Some(3)), ("metadata.json", Some(9))],
            );
            for (n, object) in r.value.objects.iter_mut().enumerate() {
                object.version_id = Some(format!("v{n}-{id}"));
            }
            r
        };
        let entry = |id: &str, name: &str, version: &str, size: u64, latest: bool, marker: bool| {
            VersionEntry {
                key: format!("b/c1/s/{id}/{name}"),
                version_id: version.into(),
                size,
                latest,
                delete_marker: marker,
            }
        };
        let records = [
            with_versions("intact"),
            with_versions("covered"),
            with_versions("lost"),
        ];
        let entries = vec![
            entry("intact", "data", "v0-intact", 3, true, false),
            entry("intact", "metadata.json", "v1-intact", 9, true, false),
            // Written over, then a delete marker on the other object: both still there.
            entry("covered", "data", "v0-covered", 3, false, false),
            entry("covered", "data", "evil", 5, true, false),
            entry("covered", "metadata.json", "v1-covered", 9, false, false),
            entry("covered", "metadata.json", "marker", 0, true, true),
            // The recorded data version itself is gone (deleted by its id).
            entry("lost", "data", "other", 3, true, false),
            entry("lost", "metadata.json", "v1-lost", 9, true, false),
        ];
        let (versions, listing) = Versions::from_entries(&entries);
        let report = judge(
            &"c1".parse().unwrap(),
            &records,
            &listing,
            Some(&versions),
            "b/c1/binlog/",
        );
        let missing: Vec<&str> = report.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(missing, ["lost"], "{report:#?}");
        assert!(report.findings[0].problems[0].contains("version v0-lost is gone"));
        assert_eq!(report.tampered.len(), 1, "{report:#?}");
        assert_eq!(report.tampered[0].id, "covered");
        let text = report.tampered[0].problems.join("; ");
        assert!(
            text.contains("written over (current version evil"),
            "{text}"
        );
        assert!(text.contains("delete marker over it"), "{text}");
        // Without the versions, the same bucket reads as loss: the current listing lacks the
        // marked object.
        let plain = judge(
            &"c1".parse().unwrap(),
            &records,
            &listing,
            None,
            "b/c1/binlog/",
        );
        assert!(plain.findings.iter().any(|f| f.id == "covered"));
    }

    #[test]
    fn a_completed_backup_whose_object_is_gone_or_resized_becomes_missing() {
        use BackupStatus::*;
        let records = [
            record(
                "ok",
                Completed,
                &[("data", Some(3)), ("metadata.json", Some(9))],
            ),
            record(
                "gone",
                Completed,
                &[("data", Some(3)), ("metadata.json", Some(9))],
            ),
            record(
                "resized",
                Completed,
                &[("data", Some(3)), ("metadata.json", Some(9))],
            ),
            // Written before intake recorded sizes: existence only.
            record("legacy", Completed, &[("data", None)]),
        ];
        let bucket = listing(&[
            ("b/c1/s/ok/data", 3),
            // Rewritten by a merge: existence only.
            ("b/c1/s/ok/metadata.json", 12),
            ("b/c1/s/gone/metadata.json", 9),
            ("b/c1/s/resized/data", 4),
            ("b/c1/s/resized/metadata.json", 9),
            ("b/c1/s/legacy/data", 1234),
            ("b/c1/s/orphan/data", 1),
            ("b/c1/binlog/seg-1", 1),
        ]);
        let report = check(
            &records,
            &bucket,
            &[
                ("gone", Missing, &["object b/c1/s/gone/data is gone"]),
                ("resized", Missing, &["holds 4 bytes, 3 when recorded"]),
            ],
        );
        assert_eq!(report.checked, 4);
        assert_eq!(
            report.unowned_objects, 1,
            "the orphan, not the binlog segment"
        );
        assert_eq!(report.missing_after, 2);
    }

    #[test]
    fn a_missing_backup_found_again_is_completed_and_other_states_are_left_alone() {
        use BackupStatus::*;
        let mut claimed = record("claimed", Completed, &[("vol", Some(1))]);
        claimed.value.volume_deletion = Some(sexton_model::records::VolumeDeletion {
            revision: 3,
            volumes: vec!["v".into()],
        });
        let records = [
            record("back", Missing, &[("data", Some(3))]),
            record("still", Missing, &[("data", Some(3))]),
            record("deleting", Deleting, &[("data", Some(3))]),
            record("expiring", Expiring, &[("data", Some(3))]),
            record("running", InProgress, &[]),
            record("failed", Failed, &[("data", Some(3))]),
            claimed,
        ];
        let bucket = listing(&[("b/c1/s/back/data", 3)]);
        let report = check(&records, &bucket, &[("back", Completed, &[])]);
        assert_eq!(report.checked, 2, "the claimed one is not judged");
        assert_eq!(report.missing_after, 1);
    }

    #[test]
    fn applying_a_finding_says_why_and_since_when() {
        let now: chrono::DateTime<chrono::Utc> = "2026-11-23T10:00:00Z".parse().unwrap();
        let backup = record("b", BackupStatus::Completed, &[("data", Some(3))]);
        let finding = Finding {
            id: "b".into(),
            revision: 7,
            becomes: BackupStatus::Missing,
            problems: vec!["object x is gone".into()],
        };
        let missing = apply(&backup.value, &finding, now);
        assert_eq!(missing.status, BackupStatus::Missing);
        assert_eq!(
            missing.last_error.as_deref(),
            Some("missing since 2026-11-23T10:00:00Z: object x is gone")
        );
        let back = apply(
            &missing,
            &Finding {
                becomes: BackupStatus::Completed,
                problems: vec![],
                ..finding
            },
            now,
        );
        assert_eq!(back.status, BackupStatus::Completed);
        assert_eq!(back.last_error, None);
        assert_eq!(back.seen_at, Some(now));
    }

    #[test]
    fn a_copy_gone_at_a_location_goes_missing_there_and_comes_back_whole() {
        let dr = LocationName::new("dr").unwrap();
        let with_copy = |id: &str, state: &str| -> Versioned<BackupRecord> {
            let mut record: BackupRecord = serde_json::from_value(serde_json::json!({
                "id": id, "uid": "u", "cluster": "c1", "plan": "p", "backup_name": "s",
                "kind": "full", "status": "completed",
            }))
            .unwrap();
            record.copies.insert(
                dr.clone(),
                serde_json::from_value(serde_json::json!({
                    "state": state, "copied_at": "2026-01-01T00:00:00Z",
                    "objects": [{"key": format!("dr/c1/s/{id}/data"), "size": 10},
                                {"key": format!("dr/c1/s/{id}/metadata.json"), "size": 3}]
                }))
                .unwrap(),
            );
            Versioned {
                value: record,
                revision: 7,
            }
        };
        let listing = |entries: &[(&str, u64)]| -> BTreeMap<String, u64> {
            entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let whole = listing(&[("dr/c1/s/b1/data", 10), ("dr/c1/s/b1/metadata.json", 3)]);
        let copied = with_copy("b1", "copied");
        assert!(judge_copies(
            std::slice::from_ref(&copied),
            &dr,
            &whole,
            None,
            &mut Vec::new()
        )
        .is_empty());
        let shrunk = listing(&[("dr/c1/s/b1/data", 9), ("dr/c1/s/b1/metadata.json", 3)]);
        let found = judge_copies(
            std::slice::from_ref(&copied),
            &dr,
            &shrunk,
            None,
            &mut Vec::new(),
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].becomes, CopyState::Missing);
        assert_eq!(found[0].revision, 7);
        assert!(found[0].problems[0].contains("holds 9 bytes"), "{found:?}");
        let gone = listing(&[("dr/c1/s/b1/metadata.json", 3)]);
        let found = judge_copies(
            std::slice::from_ref(&copied),
            &dr,
            &gone,
            None,
            &mut Vec::new(),
        );
        assert!(found[0].problems[0].contains("is gone"));
        let applied = apply_copy(&copied.value, &found[0]);
        assert_eq!(applied.copies[&dr].state, CopyState::Missing);
        assert_eq!(applied.copies[&dr].problems, found[0].problems);
        // Back whole: copied again; a copy being deleted is never judged; another location's
        // listing says nothing about dr.
        let missing = with_copy("b1", "missing");
        let found = judge_copies(
            std::slice::from_ref(&missing),
            &dr,
            &whole,
            None,
            &mut Vec::new(),
        );
        assert_eq!(found[0].becomes, CopyState::Copied);
        assert!(found[0].problems.is_empty());
        let leaving = with_copy("b1", "deleting");
        assert!(judge_copies(
            std::slice::from_ref(&leaving),
            &dr,
            &gone,
            None,
            &mut Vec::new()
        )
        .is_empty());
        let vault = LocationName::new("vault").unwrap();
        assert!(judge_copies(
            std::slice::from_ref(&copied),
            &vault,
            &gone,
            None,
            &mut Vec::new()
        )
        .is_empty());
    }

    /// Issue 47: at a location with Object Lock, the version the copier wrote is what counts.
    /// One written over (or under a delete marker) but still there is tampering, not loss: the
    /// copy keeps counting, and the report says so with the location. A recorded version gone
    /// is loss, as at primary.
    #[test]
    fn at_a_versioned_location_the_copied_version_counts_and_what_covers_it_is_tampering() {
        use sexton_shared::object_store::lock::VersionEntry;
        let dr = LocationName::new("dr").unwrap();
        let mut record: BackupRecord = serde_json::from_value(serde_json::json!({
            "id": "b1", "uid": "u", "cluster": "c1", "plan": "p", "backup_name": "s",
            "kind": "full", "status": "deleting",
            "primary_deleted_at": "2026-01-02T00:00:00Z",
        }))
        .unwrap();
        record.copies.insert(
            dr.clone(),
            serde_json::from_value(serde_json::json!({
                "state": "copied", "copied_at": "2026-01-01T00:00:00Z",
                "objects": [{"key": "dr/c1/s/b1/data", "size": 85, "version_id": "v1"},
                            {"key": "dr/c1/s/b1/metadata.json", "size": 3, "version_id": "m1"}]
            }))
            .unwrap(),
        );
        let records = [Versioned {
            value: record,
            revision: 9,
        }];
        let entry =
            |key: &str, version: &str, size: u64, latest: bool, marker: bool| VersionEntry {
                key: key.into(),
                version_id: version.into(),
                size,
                latest,
                delete_marker: marker,
            };
        let judged = |entries: &[VersionEntry]| {
            let (versions, listing) = Versions::from_entries(entries);
            let mut tampered = Vec::new();
            let findings = judge_copies(&records, &dr, &listing, Some(&versions), &mut tampered);
            (findings, tampered)
        };
        let metadata = entry("dr/c1/s/b1/metadata.json", "m1", 3, true, false);
        // Written over with 7 bytes: the copied version is there, so tampering only.
        let (findings, tampered) = judged(&[
            entry("dr/c1/s/b1/data", "v2", 7, true, false),
            entry("dr/c1/s/b1/data", "v1", 85, false, false),
            metadata.clone(),
        ]);
        assert!(findings.is_empty(), "{findings:?}");
        assert_eq!(tampered.len(), 1, "{tampered:?}");
        assert_eq!(tampered[0].location.as_ref(), Some(&dr));
        assert!(
            tampered[0].problems[0]
                .contains("written over (current version v2; the copied version v1"),
            "{tampered:?}"
        );
        // A delete marker over it: tampering again.
        let (findings, tampered) = judged(&[
            entry("dr/c1/s/b1/data", "d1", 0, true, true),
            entry("dr/c1/s/b1/data", "v1", 85, false, false),
            metadata.clone(),
        ]);
        assert!(findings.is_empty());
        assert!(
            tampered[0].problems[0].contains("delete marker"),
            "{tampered:?}"
        );
        // The copied version itself gone: loss, the copy stops counting there.
        let (findings, tampered) =
            judged(&[entry("dr/c1/s/b1/data", "v2", 7, true, false), metadata]);
        assert!(tampered.is_empty());
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].becomes, CopyState::Missing);
        assert!(
            findings[0].problems[0].contains("version v1 is gone"),
            "{findings:?}"
        );
        // Judged by the current listing only (no versions), the same overwrite is a loss: what
        // the scrub did before issue 47.
        let (_, listing) = Versions::from_entries(&[
            entry("dr/c1/s/b1/data", "v2", 7, true, false),
            entry("dr/c1/s/b1/data", "v1", 85, false, false),
            entry("dr/c1/s/b1/metadata.json", "m1", 3, true, false),
        ]);
        let lost = judge_copies(&records, &dr, &listing, None, &mut Vec::new());
        assert_eq!(lost.len(), 1);
        assert!(
            lost[0].problems[0].contains("holds 7 bytes, 85 when copied"),
            "{lost:?}"
        );
    }
}
