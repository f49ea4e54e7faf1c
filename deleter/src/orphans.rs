//! `sexton backup orphans`: objects under a cluster's prefix that no catalog record owns — left
//! by a record-only delete (seed 003's default), by an executor that wrote objects and never
//! reported, or by hand. Listed, and deleted only when asked.
//!
//! Never counted as orphans: anything younger than the grace period (an executor may be
//! uploading a backup it has not reported yet), anything under the prefix of a backup in
//! progress, and the binlog archive (`<prefix>/<cluster>/binlog/`), whose segments are owned by
//! its index, not by backup records — while the cluster has a schedule or a backup record. A
//! cluster with neither (forgotten, `sexton cluster forget`) has no backup a segment could
//! serve, so its binlog objects are orphans like any other (issue 26: 43 segments of a
//! forgotten cluster stayed in the bucket with no way to remove them).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sexton_model::{
    names::ClusterName,
    records::{BackupRecord, BackupStatus},
};
use sexton_shared::object_store::{check_key_under, ObjectInfo};

pub use sexton_shared::api::{OrphansRequest, DEFAULT_GRACE};

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OrphanScan {
    pub orphans: Vec<ObjectInfo>,
    /// Unowned, but younger than the grace period.
    pub n_young: usize,
    /// Under the prefix of a backup in progress.
    pub n_in_progress: usize,
    /// Under the binlog archive.
    pub n_binlog: usize,
}

/// Sorts the objects under `cluster_prefix` (`<prefix>/<cluster>/`) into orphans and the
/// rest. `records` are the cluster's catalog records, read before the objects were listed.
/// `binlog_owned`: whether the cluster's binlog archive still serves something (the cluster has
/// a schedule or a record); when not, its objects are judged like any other.
pub fn find_orphans(
    objects: Vec<ObjectInfo>,
    records: &[BackupRecord],
    cluster_prefix: &str,
    grace: chrono::Duration,
    now: DateTime<Utc>,
    binlog_owned: bool,
) -> OrphanScan {
    let owned: HashSet<&str> = records
        .iter()
        .flat_map(|r| r.artifacts.iter().map(String::as_str))
        .collect();
    let in_progress: Vec<String> = records
        .iter()
        .filter(|r| r.status == BackupStatus::InProgress)
        .map(|r| format!("{cluster_prefix}{}/{}/", r.backup_name, r.id))
        .collect();
    let binlog = format!("{cluster_prefix}binlog/");
    let mut scan = OrphanScan::default();
    for object in objects {
        if owned.contains(object.key.as_str()) {
            continue;
        }
        if binlog_owned && object.key.starts_with(&binlog) {
            scan.n_binlog += 1;
        } else if in_progress.iter().any(|p| object.key.starts_with(p)) {
            scan.n_in_progress += 1;
        } else if object.last_modified.is_none_or(|at| at > now - grace) {
            scan.n_young += 1;
        } else {
            scan.orphans.push(object);
        }
    }
    scan
}

/// Why orphans must not be deleted now, if the catalog looks lost: backups with a
/// `metadata.json` in the bucket and none of them in the catalog, or most of the cluster's
/// backup objects without a record. Deleting "orphans" then would delete recovery points a
/// lost or damaged catalog no longer lists; `sexton catalog import` brings their records back.
/// Judged on every object without a record, young or old: a catalog lost a minute ago is lost.
/// `removed_on_purpose`: the backup directories (`<cluster_prefix><name>/<id>/`) whose records
/// the catalog removed (its key's last operation is a removal: a record-only delete, `cluster
/// forget`): their objects are leftovers someone chose to leave, not a sign of a lost catalog,
/// and `catalog import` rightly refuses to bring them back (issue 26: each refusal pointed at
/// the other, a dead end).
pub fn catalog_looks_lost(
    objects: &[ObjectInfo],
    records: &[BackupRecord],
    cluster_prefix: &str,
    cluster: &ClusterName,
    removed_on_purpose: &HashSet<String>,
) -> Option<String> {
    let owned: HashSet<&str> = records.iter().flat_map(|r| r.all_keys_iter()).collect();
    let binlog = format!("{cluster_prefix}binlog/");
    let backup_objects: Vec<&ObjectInfo> = objects
        .iter()
        .filter(|o| !o.key.starts_with(&binlog))
        .collect();
    let unowned: Vec<&&ObjectInfo> = backup_objects
        .iter()
        .filter(|o| !owned.contains(o.key.as_str()))
        .collect();
    let described: HashSet<&str> = unowned
        .iter()
        .filter_map(|o| o.key.strip_suffix(sexton_model::metadata::FILE_NAME))
        .filter(|directory| !removed_on_purpose.contains(*directory))
        .collect();
    if described.is_empty() {
        return None;
    }
    let most = unowned.len() * 2 > backup_objects.len();
    if !records.is_empty() && !most {
        return None;
    }
    Some(format!(
        "refusing to delete orphans of cluster {cluster}: {} backups in the bucket have a \
         metadata.json and no catalog record{}; the catalog looks lost or damaged. Run `sexton \
         catalog import --cluster {cluster}` (--dry-run first) to bring their records back",
        described.len(),
        if records.is_empty() {
            ", and the catalog holds none of the cluster's backups".to_string()
        } else {
            format!(
                ", and {} of {} backup objects have no record",
                unowned.len(),
                backup_objects.len()
            )
        }
    ))
}

/// The directories of backups with a `metadata.json` that no record owns, each with the backup
/// id its directory names (`<cluster_prefix><name>/<id>/`): the ones whose catalog entries
/// [`catalog_looks_lost`] needs to know.
pub fn unowned_described(
    objects: &[ObjectInfo],
    records: &[BackupRecord],
) -> Vec<(String, String)> {
    let owned: HashSet<&str> = records.iter().flat_map(|r| r.all_keys_iter()).collect();
    objects
        .iter()
        .filter(|o| !owned.contains(o.key.as_str()))
        .filter_map(|o| o.key.strip_suffix(sexton_model::metadata::FILE_NAME))
        .filter_map(|directory| {
            let id = directory.strip_suffix('/')?.rsplit('/').next()?;
            Some((directory.to_string(), id.to_string()))
        })
        .collect()
}

/// The orphans that may be deleted: plain keys under the cluster's prefix.
pub fn deletable(
    scan: &OrphanScan,
    prefix: &str,
    cluster: &ClusterName,
) -> (Vec<String>, Vec<String>) {
    scan.orphans
        .iter()
        .map(|o| o.key.clone())
        .partition(|key| check_key_under(prefix, cluster, key).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_that_looks_lost_stops_orphan_deletion() {
        let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
        let cluster: ClusterName = "c1".parse().unwrap();
        let objects =
            |keys: &[&str]| -> Vec<ObjectInfo> { keys.iter().map(|k| object(k, 1, now)).collect() };
        let record: BackupRecord = serde_json::from_value(serde_json::json!({
            "id": "b9", "uid": "u", "cluster": "c1", "plan": "p", "backup_name": "s",
            "kind": "full", "status": "completed",
            "artifacts": ["b/c1/s/b9/data", "b/c1/s/b9/metadata.json"],
        }))
        .unwrap();
        let lost = ["b/c1/s/b1/data", "b/c1/s/b1/metadata.json"];
        let none = HashSet::new();
        // No record at all: refused (young objects too), naming the way out.
        let why = catalog_looks_lost(&objects(&lost), &[], "b/c1/", &cluster, &none).unwrap();
        assert!(why.contains("catalog import --cluster c1"), "{why}");
        assert!(why.contains("1 backups"), "{why}");
        // One stray backup among many recorded ones: a record-only delete; allowed.
        let mut many: Vec<String> = lost.iter().map(|k| k.to_string()).collect();
        for n in 0..20 {
            many.push(format!("b/c1/s/r{n}/data"));
        }
        let mut records = vec![record.clone()];
        for n in 0..20 {
            let mut r = record.clone();
            r.artifacts = vec![format!("b/c1/s/r{n}/data")];
            records.push(r);
        }
        let many_refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            catalog_looks_lost(&objects(&many_refs), &records, "b/c1/", &cluster, &none),
            None
        );
        // Most objects unowned: refused even with some records.
        let mut few = lost.to_vec();
        few.push("b/c1/s/b9/data");
        assert!(catalog_looks_lost(
            &objects(&few),
            std::slice::from_ref(&record),
            "b/c1/",
            &cluster,
            &none
        )
        .is_some());
        // Objects without a metadata.json (an upload that never reported): allowed.
        assert_eq!(
            catalog_looks_lost(&objects(&["b/c1/s/b1/data"]), &[], "b/c1/", &cluster, &none),
            None
        );
        // A backup whose record was removed on purpose (cluster forget, a record-only delete):
        // leftovers, not a lost catalog; orphan deletion may take them (issue 26).
        assert_eq!(
            unowned_described(&objects(&lost), &[]),
            [("b/c1/s/b1/".to_string(), "b1".to_string())]
        );
        let removed: HashSet<String> = ["b/c1/s/b1/".to_string()].into();
        assert_eq!(
            catalog_looks_lost(&objects(&lost), &[], "b/c1/", &cluster, &removed),
            None
        );
    }

    fn object(key: &str, minutes_ago: i64, now: DateTime<Utc>) -> ObjectInfo {
        ObjectInfo {
            key: key.into(),
            size: 1,
            last_modified: Some(now - chrono::Duration::minutes(minutes_ago)),
        }
    }

    #[test]
    fn only_old_unowned_objects_outside_binlog_and_running_backups_are_orphans() {
        let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
        let record = |id: &str, status: &str, artifacts: &[&str]| -> BackupRecord {
            serde_json::from_value(serde_json::json!({
                "id": id, "uid": id, "cluster": "c1", "plan": "p", "backup_name": "s",
                "kind": "full", "status": status, "artifacts": artifacts,
            }))
            .unwrap()
        };
        let records = vec![
            record(
                "b1",
                "completed",
                &["pre/c1/s/b1/backup.xbstream", "pre/c1/s/b1/metadata.json"],
            ),
            record("b2", "in-progress", &[]),
        ];
        let objects = vec![
            object("pre/c1/s/b1/backup.xbstream", 600, now),
            object("pre/c1/s/b1/metadata.json", 600, now),
            object("pre/c1/s/b0/backup.xbstream", 600, now),
            object("pre/c1/s/b0/metadata.json", 600, now),
            object("pre/c1/s/b2/part-1", 600, now),
            object("pre/c1/s/b3/backup.xbstream", 5, now),
            object("pre/c1/binlog/_index.json", 600, now),
            object("pre/c1/binlog/seg-1", 600, now),
        ];
        let scan = find_orphans(
            objects,
            &records,
            "pre/c1/",
            chrono::Duration::hours(1),
            now,
            true,
        );
        let keys: Vec<&str> = scan.orphans.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(
            keys,
            ["pre/c1/s/b0/backup.xbstream", "pre/c1/s/b0/metadata.json"]
        );
        assert_eq!((scan.n_young, scan.n_in_progress, scan.n_binlog), (1, 1, 2));
    }

    /// A forgotten cluster (no schedule, no record): its binlog objects serve no backup and
    /// are orphans like any other, the young ones still spared.
    #[test]
    fn a_forgotten_clusters_binlog_objects_are_orphans() {
        let now: DateTime<Utc> = "2026-01-02T00:00:00Z".parse().unwrap();
        let objects = vec![
            object("pre/c1/binlog/_index.json", 600, now),
            object("pre/c1/binlog/seg-1", 600, now),
            object("pre/c1/binlog/seg-2", 5, now),
        ];
        let scan = find_orphans(
            objects,
            &[],
            "pre/c1/",
            chrono::Duration::hours(1),
            now,
            false,
        );
        let keys: Vec<&str> = scan.orphans.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["pre/c1/binlog/_index.json", "pre/c1/binlog/seg-1"]);
        assert_eq!((scan.n_young, scan.n_binlog), (1, 0));
    }

    #[test]
    fn requests_are_validated() {
        let ok = r#"{"schema_version":1,"cluster":"c1","grace":"2h"}"#;
        let req = sexton_model::wire::decode::<OrphansRequest>(ok.as_bytes()).unwrap();
        assert_eq!(req.grace_period().unwrap().as_secs(), 7200);
        for (body, needle) in [
            (ok.replace("2h", "0s"), "at least 1s"),
            (ok.replace("2h", "soon"), "grace"),
            (ok.replace("c1", "../c2"), "invalid cluster"),
            (ok.replace("grace", "grase"), "unknown field"),
        ] {
            let err = sexton_model::wire::decode::<OrphansRequest>(body.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{body}: {err}");
        }
    }
}
