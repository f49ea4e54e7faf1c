//! `catalog.import` (`sexton catalog import --cluster C [--dry-run]`): rebuilds the records a
//! cluster's catalog lacks from the bucket, as Velero's backup sync and pgBackRest's
//! reconstruct do. Every backup directory `<prefix>/<cluster>/<name>/<id>/` holding a
//! `metadata.json` of Sexton's format is a candidate:
//!
//! - a backup the catalog holds is left alone (`known`);
//! - one whose record was removed on purpose (the key's last operation is a removal, say a
//!   record-only `backup delete`) is not brought back, unless asked (`include_removed`: a
//!   mistaken delete undone);
//! - one whose document is unreadable, names another backup or cluster, or whose objects are
//!   not all there with the sizes it gives, is skipped with the reason (a broken backup is no
//!   recovery point; its objects stay for `sexton backup orphans`);
//! - the others become records exactly as the document describes them (kind, parent, volumes,
//!   times, tags, labels, schedule, plan, objects with sizes and checksums), with a new unique
//!   id. Holds are catalog state, not part of the document: they do not survive a catalog
//!   loss (S3 Object Lock is the durable legal hold).
//!
//! Then a retention sweep of the cluster is asked for, so the next run decides over the whole
//! catalog again. The judgement of one directory is pure ([`record_from`]).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sexton_model::{
    copies::{CopyState, LocationCopy},
    digest,
    metadata::{self, BackupMetadata},
    names::{BackupId, ClusterName, LocationName},
    records::{BackupRecord, BackupStatus, RECORD_SCHEMA_VERSION},
    wire::{ObjectDigest, ReportStatus},
};
use sexton_shared::{
    api::ApiError,
    catalog::{CasError, Lookup},
    channels,
    object_store::ObjectStore,
};

use crate::api::{invalid, unavailable, Api};

pub use sexton_shared::api::ImportRequest;

/// What an import did (or would do).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ImportReport {
    pub cluster: String,
    pub dry_run: bool,
    /// Backup directories found under the cluster's prefix.
    pub directories: usize,
    /// Backups the catalog already holds.
    pub known: usize,
    pub imported: Vec<Imported>,
    /// Importing from a location: backups the catalog holds whose copy there the record had
    /// lost, attached again (their objects there as the record lists them, sizes equal).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached: Vec<String>,
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Imported {
    pub id: String,
    pub status: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub completed_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Skipped {
    /// The backup's directory.
    pub directory: String,
    pub why: String,
}

/// One backup directory of the listing: its objects (key → size).
#[derive(Debug, Default)]
pub struct Directory {
    pub backup_name: String,
    pub backup_id: String,
    pub objects: BTreeMap<String, u64>,
}

/// Groups a listing of `<prefix>/<cluster>/` into backup directories (`<name>/<id>/`),
/// leaving out the binlog folder and anything not at that depth.
pub fn directories(
    cluster_prefix: &str,
    binlog_prefix: &str,
    listing: impl IntoIterator<Item = (String, u64)>,
) -> BTreeMap<String, Directory> {
    let mut out: BTreeMap<String, Directory> = BTreeMap::new();
    for (key, size) in listing {
        if key.starts_with(binlog_prefix) {
            continue;
        }
        let Some(rest) = key.strip_prefix(cluster_prefix) else {
            continue;
        };
        let mut parts = rest.splitn(3, '/');
        let (Some(name), Some(id), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if name.is_empty() || id.is_empty() || file.is_empty() {
            continue;
        }
        let directory = format!("{cluster_prefix}{name}/{id}/");
        let entry = out.entry(directory).or_insert_with(|| Directory {
            backup_name: name.to_string(),
            backup_id: id.to_string(),
            ..Directory::default()
        });
        entry.objects.insert(key, size);
    }
    out
}

/// The record a directory's `metadata.json` describes, or why it cannot be imported. Pure.
pub fn record_from(
    cluster: &ClusterName,
    directory: &Directory,
    metadata_key: &str,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<BackupRecord, String> {
    let document = BackupMetadata::decode(body).map_err(|err| err.to_string())?;
    if document.cluster != *cluster
        || document.backup_id.as_str() != directory.backup_id
        || document.backup_name != directory.backup_name
    {
        return Err(format!(
            "metadata.json describes {}/{}/{}, not this directory",
            document.cluster, document.backup_name, document.backup_id
        ));
    }
    let mut problems = Vec::new();
    for object in &document.objects {
        match directory.objects.get(&object.key) {
            None => problems.push(format!("object {} is not in the bucket", object.key)),
            Some(&size) if size != object.size => problems.push(format!(
                "object {} holds {size} bytes, metadata.json says {}",
                object.key, object.size
            )),
            Some(_) => {}
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    // A version id in the document is a claim, not something Sexton saw: left out.
    let mut objects: Vec<ObjectDigest> = document
        .objects
        .iter()
        .map(|object| ObjectDigest {
            version_id: None,
            ..object.clone()
        })
        .collect();
    objects.push(ObjectDigest {
        key: metadata_key.to_string(),
        size: body.len() as u64,
        sha256: Some(digest::sha256_hex(body)),
        version_id: None,
    });
    let mut artifacts: Vec<String> = document
        .objects
        .iter()
        .map(|o| o.key.clone())
        .filter(|key| !document.volumes.iter().any(|v| v.keys.contains(key)))
        .collect();
    for key in document.volumes.iter().flat_map(|v| &v.keys) {
        if !artifacts.contains(key) {
            artifacts.push(key.clone());
        }
    }
    artifacts.push(metadata_key.to_string());
    Ok(BackupRecord {
        schema_version: RECORD_SCHEMA_VERSION,
        id: document.backup_id.clone(),
        uid: uuid::Uuid::new_v4().simple().to_string(),
        cluster: cluster.clone(),
        plan: document.plan.clone(),
        schedule: document.schedule.clone(),
        backup_name: document.backup_name.clone(),
        kind: document.kind,
        parent: document.parent.clone(),
        status: match document.status {
            ReportStatus::Failed => BackupStatus::Failed,
            _ => BackupStatus::Completed,
        },
        started_at: document.started_at,
        completed_at: Some(document.completed_at),
        tick: None,
        artifacts,
        size_bytes: Some(objects.iter().map(|o| o.size).sum()),
        objects,
        seen_at: Some(now),
        volumes: sexton_model::records::volume_artifacts(&document.volumes),
        labels: document.labels.clone(),
        tags: document.tags.clone(),
        legal_hold: false,
        holds: Vec::new(),
        immutable: false,
        remote_cleanup: false,
        delete_requested: false,
        expiring_revision: None,
        delete_reasons: Vec::new(),
        delete_policy: None,
        last_error: None,
        expired_from: None,
        delete_request: None,
        plugin_errors: Vec::new(),
        volume_deletion: None,
        verification: Default::default(),
        copy_to: Vec::new(),
        copies: Default::default(),
        primary_deleted_at: None,
        locked_until: None,
        log_range: document.log_range.clone(),
        differential: document.differential,
        store: None,
    })
}

impl Api {
    pub(in crate::api) async fn catalog_import(
        &self,
        req: ImportRequest,
    ) -> Result<Value, ApiError> {
        let store = self.import_store(&req)?;
        let found = self.found_directories(&req, store).await?;
        let mut import = Import {
            versions: current_versions(store, &store.cluster_prefix(&req.cluster)).await?,
            report: ImportReport {
                cluster: req.cluster.to_string(),
                dry_run: req.dry_run,
                directories: found.len(),
                ..ImportReport::default()
            },
            now: Utc::now(),
            req: &req,
            store,
        };
        for (path, directory) in &found {
            self.import_directory(&mut import, path, directory).await?;
        }
        let (cluster, now, report) = (&req.cluster, import.now, import.report);
        if !req.dry_run && !report.imported.is_empty() {
            tracing::info!(%cluster, imported = report.imported.len(), "catalog import: records recreated from the bucket");
            channels::request_sweep(
                &self.topology.jetstream,
                cluster,
                now,
                false,
                &channels::SweepCause::Import {
                    at_micros: now.timestamp_micros(),
                },
            )
            .await
            .map_err(|err| unavailable(format!("asking for a retention run: {err:#}")))?;
        }
        serde_json::to_value(report).map_err(invalid)
    }

    /// The store the import reads: primary's, or the location's it names.
    fn import_store(&self, req: &ImportRequest) -> Result<&ObjectStore, ApiError> {
        match &req.from {
            None => Ok(&self.store),
            Some(location) => self.locations.get(location).ok_or_else(|| {
                invalid(format!(
                    "no location {location} in this scheduler's configuration; it has {}",
                    self.config.location_names()
                ))
            }),
        }
    }

    /// The backup directories of the cluster in `store`, keyed by their primary path.
    async fn found_directories(
        &self,
        req: &ImportRequest,
        store: &ObjectStore,
    ) -> Result<BTreeMap<String, Directory>, ApiError> {
        let primary_prefix = self.config.s3.prefix.as_str();
        let cluster = &req.cluster;
        let cluster_prefix = store.cluster_prefix(cluster);
        let binlog_prefix = sexton_shared::binlog::binlog_prefix(store.prefix(), cluster);
        let listing = store
            .list(&cluster_prefix)
            .await
            .map_err(|err| unavailable(format!("listing {cluster_prefix}: {err}")))?;
        // At a location, a copy lies under the primary's key below the location's prefix: the
        // directories are judged under the primary's keys (the ones metadata.json names).
        let to_primary = |key: String| match &req.from {
            None => Some(key),
            Some(_) => sexton_model::copies::destination_key(store.prefix(), primary_prefix, &key),
        };
        Ok(directories(
            &self.store.cluster_prefix(cluster),
            &sexton_shared::binlog::binlog_prefix(primary_prefix, cluster),
            listing
                .into_iter()
                .filter(|o| !o.key.starts_with(&binlog_prefix))
                .filter_map(|o| Some((to_primary(o.key)?, o.size.max(0) as u64))),
        ))
    }

    /// Judges one backup directory: known (and its copy attached, from a location), skipped
    /// with the reason, or imported.
    async fn import_directory(
        &self,
        import: &mut Import<'_>,
        path: &str,
        directory: &Directory,
    ) -> Result<(), ApiError> {
        let metadata_key = format!("{path}{}", metadata::FILE_NAME);
        if !directory.objects.contains_key(&metadata_key) {
            import.skip(path, "no metadata.json".into());
            return Ok(());
        }
        let Ok(id) = BackupId::new(directory.backup_id.clone()) else {
            import.skip(path, "not a valid backup id".into());
            return Ok(());
        };
        let read_key = self.read_key(import, &metadata_key)?;
        if !self.unknown(import, path, directory, &id).await? {
            return Ok(());
        }
        let document = (metadata_key.as_str(), read_key.as_str());
        let Some(mut record) = self
            .read_document(import, path, directory, document)
            .await?
        else {
            return Ok(());
        };
        if let Some(location) = &import.req.from {
            if !self
                .held_at(import, path, &mut record, &metadata_key, location)
                .await?
            {
                return Ok(());
            }
        } else {
            for object in &mut record.objects {
                object.version_id = import.versions.get(&object.key).cloned();
            }
        }
        if !import.req.dry_run {
            match self.catalog.create(&record).await {
                Ok(_) => {}
                // Recorded meanwhile (a report, another import): it is known now.
                Err(CasError::Conflict) => {
                    import.report.known += 1;
                    return Ok(());
                }
                Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
            }
        }
        import.report.imported.push(Imported {
            id: record.id.to_string(),
            status: record.status_text().to_string(),
            kind: record.kind.as_str().to_string(),
            parent: record.parent.as_ref().map(|p| p.to_string()),
            completed_at: record
                .completed_at
                .map(|t| t.to_rfc3339())
                .unwrap_or_default(),
        });
        Ok(())
    }

    /// Whether the backup `id` is one to import: not held by the catalog (from a location, its
    /// copy is attached instead), nor removed on purpose unless the request includes those.
    async fn unknown(
        &self,
        import: &mut Import<'_>,
        path: &str,
        directory: &Directory,
        id: &BackupId,
    ) -> Result<bool, ApiError> {
        match self.catalog.lookup(&import.req.cluster, id).await {
            Err(err) => Err(unavailable(format!("{err:#}"))),
            Ok(Lookup::Live(live)) => {
                import.report.known += 1;
                if let Some(location) = &import.req.from {
                    let listed = Listed {
                        prefix: import.store.prefix(),
                        versions: &import.versions,
                    };
                    let (dry_run, now) = (import.req.dry_run, import.now);
                    match self
                        .attach_copy(*live, location, listed, directory, dry_run, now)
                        .await?
                    {
                        Ok(true) => import.report.attached.push(id.to_string()),
                        Ok(false) => {}
                        Err(why) => import.skip(path, why),
                    }
                }
                Ok(false)
            }
            Ok(Lookup::Removed) if !import.req.include_removed => {
                import.skip(
                    path,
                    "its record was removed from the catalog on purpose; not brought back \
                     (--include-removed brings it back)"
                        .into(),
                );
                Ok(false)
            }
            Ok(Lookup::Removed) => Ok(true),
            Ok(Lookup::Never) => Ok(true),
        }
    }

    /// Where the document `metadata_key` lies in the store read (the location's key for a
    /// copy).
    fn read_key(&self, import: &Import<'_>, metadata_key: &str) -> Result<String, ApiError> {
        match &import.req.from {
            None => Ok(metadata_key.to_string()),
            Some(_) => sexton_model::copies::destination_key(
                &self.config.s3.prefix,
                import.store.prefix(),
                metadata_key,
            )
            .ok_or_else(|| unavailable(format!("{metadata_key}: not under the prefix"))),
        }
    }

    /// Reads the directory's `metadata.json` (`document`: its primary key, and its key in the
    /// store read) and the record it describes ([`record_from`]); `None` when the directory is
    /// skipped.
    async fn read_document(
        &self,
        import: &mut Import<'_>,
        path: &str,
        directory: &Directory,
        document: (&str, &str),
    ) -> Result<Option<BackupRecord>, ApiError> {
        let (metadata_key, read_key) = document;
        if directory.objects[metadata_key] as usize > metadata::MAX_METADATA_BYTES {
            import.skip(path, "metadata.json is too large to read".into());
            return Ok(None);
        }
        let body = match import.store.get(read_key).await {
            Ok(Some(body)) => body,
            Ok(None) => {
                import.skip(path, "metadata.json vanished while importing".into());
                return Ok(None);
            }
            Err(err) => return Err(unavailable(format!("reading {metadata_key}: {err}"))),
        };
        let cluster = &import.req.cluster;
        match record_from(cluster, directory, metadata_key, &body, import.now) {
            Ok(record) => Ok(Some(BackupRecord {
                store: Some(self.store.place().clone()),
                ..record
            })),
            Err(why) => {
                import.skip(path, why);
                Ok(None)
            }
        }
    }

    /// Makes a record read at `location` one held there only ([`held_only_at`]); `false` when
    /// the directory is skipped: a failed backup, or one at primary too.
    async fn held_at(
        &self,
        import: &mut Import<'_>,
        path: &str,
        record: &mut BackupRecord,
        metadata_key: &str,
        location: &LocationName,
    ) -> Result<bool, ApiError> {
        if record.status != BackupStatus::Completed {
            import.skip(
                path,
                "a failed backup at a location is no recovery point".into(),
            );
            return Ok(false);
        }
        // Held at primary too: the record must say so, or the primary's retention
        // would never see it there.
        match self.store.exists(metadata_key).await {
            Ok(false) => {}
            Ok(true) => {
                import.skip(
                    path,
                    format!(
                        "it is at primary too: import from primary first, then from \
                         {location} to attach its copy"
                    ),
                );
                return Ok(false);
            }
            Err(err) => return Err(unavailable(format!("reading {metadata_key}: {err}"))),
        }
        let primary_prefix = self.config.s3.prefix.as_str();
        let (location_prefix, now) = (import.store.prefix(), import.now);
        held_only_at(
            record,
            location,
            location_prefix,
            primary_prefix,
            &import.versions,
            now,
        );
        Ok(true)
    }

    /// A backup the catalog holds whose record lost its copy at `location` (or never had it,
    /// a catalog rebuilt from primary): the copy counts again when every object the record
    /// lists lies at the location with the size the record gives. `Ok(true)`: attached.
    async fn attach_copy(
        &self,
        live: sexton_shared::catalog::Versioned<BackupRecord>,
        location: &LocationName,
        listed: Listed<'_>,
        directory: &Directory,
        dry_run: bool,
        now: DateTime<Utc>,
    ) -> Result<Result<bool, String>, ApiError> {
        let mut record = live.value;
        if record
            .copies
            .get(location)
            .is_some_and(LocationCopy::is_held)
        {
            return Ok(Ok(false));
        }
        if record.objects.is_empty() {
            return Ok(Err(format!(
                "backup {} has no sizes recorded: its copy at {location} cannot be checked",
                record.id
            )));
        }
        for object in &record.objects {
            match directory.objects.get(&object.key) {
                Some(&size) if size == object.size => {}
                Some(&size) => {
                    return Ok(Err(format!(
                        "the copy of {} at {location} holds {size} bytes, the record {}",
                        object.key, object.size
                    )))
                }
                None => {
                    return Ok(Err(format!(
                        "the copy of backup {} at {location} lacks {}",
                        record.id, object.key
                    )))
                }
            }
        }
        if dry_run {
            return Ok(Ok(true));
        }
        record.keep_mark(live.revision);
        let primary_prefix = self.config.s3.prefix.clone();
        let held = record.primary_deleted_at;
        held_only_at(
            &mut record,
            location,
            listed.prefix,
            &primary_prefix,
            listed.versions,
            now,
        );
        record.primary_deleted_at = held;
        match self.catalog.update(&record, live.revision).await {
            Ok(_) => Ok(Ok(true)),
            Err(CasError::Conflict) => Ok(Err(format!(
                "backup {} changed while its copy at {location} was attached; import again",
                record.id
            ))),
            Err(CasError::Other(err)) => Err(unavailable(format!("{err:#}"))),
        }
    }
}

/// One import under way: what it was asked, the store it reads, the versions listed there,
/// its instant, and what it has found so far.
struct Import<'a> {
    req: &'a ImportRequest,
    store: &'a ObjectStore,
    versions: BTreeMap<String, String>,
    now: DateTime<Utc>,
    report: ImportReport,
}

impl Import<'_> {
    /// Leaves the backup directory `directory` out, saying why.
    fn skip(&mut self, directory: &str, why: String) {
        self.report.skipped.push(Skipped {
            directory: directory.to_string(),
            why,
        })
    }
}

/// On a versioned bucket the recovery point is the versions listed now (issue 29), as intake
/// records them: locks, restores and the deleter name them exactly. Empty on a bucket without
/// versions.
async fn current_versions(
    store: &ObjectStore,
    cluster_prefix: &str,
) -> Result<BTreeMap<String, String>, ApiError> {
    match store.is_versioned().await {
        Ok(false) => Ok(std::collections::BTreeMap::new()),
        Ok(true) => store
            .current_versions(cluster_prefix)
            .await
            .map_err(|err| unavailable(format!("listing versions of {cluster_prefix}: {err}"))),
        Err(err) => Err(unavailable(format!(
            "reading the bucket's versioning: {err}"
        ))),
    }
}

/// Where a location's copies were found: its prefix, and the current version of each key
/// listed there (empty on a bucket without versions).
#[derive(Clone, Copy)]
struct Listed<'a> {
    prefix: &'a str,
    versions: &'a std::collections::BTreeMap<String, String>,
}

/// Makes `record` (built from a document at `location`) one whose backup is held at
/// `location`: its copy there counts, with the objects under the location's keys; it is not at
/// primary. [`Api::attach_copy`] keeps the record's own word on primary.
fn held_only_at(
    record: &mut BackupRecord,
    location: &LocationName,
    location_prefix: &str,
    primary_prefix: &str,
    versions: &std::collections::BTreeMap<String, String>,
    now: DateTime<Utc>,
) {
    let objects = record
        .objects
        .iter()
        .filter_map(|object| {
            let key = sexton_model::copies::destination_key(
                primary_prefix,
                location_prefix,
                &object.key,
            )?;
            Some(ObjectDigest {
                size: object.size,
                version_id: versions.get(&key).cloned(),
                sha256: object.sha256.clone(),
                key,
            })
        })
        .collect();
    let mut copy = LocationCopy::new(CopyState::Copied, now);
    copy.objects = objects;
    record.copies.insert(location.clone(), copy);
    if !record.copy_to.contains(location) {
        record.copy_to.push(location.clone());
    }
    record.primary_deleted_at = Some(now);
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "backups/c1/";

    fn directory(id: &str, objects: &[(&str, u64)]) -> Directory {
        Directory {
            backup_name: "s".into(),
            backup_id: id.into(),
            objects: objects
                .iter()
                .map(|(name, size)| (format!("{PREFIX}s/{id}/{name}"), *size))
                .collect(),
        }
    }

    fn document(id: &str, objects: &[(&str, u64)]) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "format": metadata::FORMAT, "schema_version": 1, "backup_id": id, "cluster": "c1",
            "plan": "full", "schedule": "s", "backup_name": "s", "kind": "incremental",
            "parent": "b0", "started_at": "2026-01-01T00:00:00Z",
            "completed_at": "2026-01-01T00:05:00Z", "tags": ["manual"],
            "objects": objects.iter().map(|(name, size)| serde_json::json!({
                "key": format!("{PREFIX}s/{id}/{name}"), "size": size,
            })).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn a_listing_groups_into_backup_directories_without_the_binlog() {
        let listing = [
            ("backups/c1/s/b1/data", 1),
            ("backups/c1/s/b1/metadata.json", 2),
            ("backups/c1/t/b2/data", 3),
            ("backups/c1/binlog/seg-1", 4),
            ("backups/c1/binlog/_index.json", 5),
            ("backups/c1/stray", 6),
        ]
        .map(|(k, s)| (k.to_string(), s));
        let found = directories(PREFIX, "backups/c1/binlog/", listing);
        assert_eq!(
            found.keys().collect::<Vec<_>>(),
            ["backups/c1/s/b1/", "backups/c1/t/b2/"]
        );
        assert_eq!(found["backups/c1/s/b1/"].objects.len(), 2);
        assert_eq!(found["backups/c1/t/b2/"].backup_id, "b2");
    }

    #[test]
    fn a_document_whose_objects_are_there_becomes_the_record_it_describes() {
        let cluster: ClusterName = "c1".parse().unwrap();
        let body = document("b1", &[("data", 3)]);
        let dir = directory("b1", &[("data", 3), ("metadata.json", body.len() as u64)]);
        let key = format!("{PREFIX}s/b1/metadata.json");
        let now = Utc::now();
        let record = record_from(&cluster, &dir, &key, &body, now).unwrap();
        assert_eq!(record.kind, sexton_model::records::BackupKind::Incremental);
        assert_eq!(record.parent.as_ref().map(|p| p.as_str()), Some("b0"));
        assert_eq!(record.status, BackupStatus::Completed);
        assert_eq!(record.tags, ["manual"]);
        assert_eq!(record.schedule.as_ref().map(|s| s.as_str()), Some("s"));
        assert_eq!(
            record.artifacts,
            [format!("{PREFIX}s/b1/data"), key.clone()]
        );
        assert_eq!(record.objects.len(), 2);
        assert_eq!(record.size_bytes, Some(3 + body.len() as u64));
        assert_eq!(record.seen_at, Some(now));
    }

    #[test]
    fn documents_that_do_not_match_the_bucket_are_not_imported() {
        let cluster: ClusterName = "c1".parse().unwrap();
        let key = format!("{PREFIX}s/b1/metadata.json");
        let check = |dir: Directory, body: Vec<u8>, expected: &str| {
            let why = record_from(&cluster, &dir, &key, &body, Utc::now()).unwrap_err();
            assert!(why.contains(expected), "{why} lacks {expected}");
        };
        check(
            directory("b1", &[]),
            document("b1", &[("data", 3)]),
            "is not in the bucket",
        );
        check(
            directory("b1", &[("data", 2)]),
            document("b1", &[("data", 3)]),
            "holds 2 bytes, metadata.json says 3",
        );
        check(
            directory("b1", &[("data", 3)]),
            document("b2", &[]),
            "not this directory",
        );
        check(
            directory("b1", &[]),
            b"{}".to_vec(),
            "not a sexton backup metadata",
        );
    }
}
