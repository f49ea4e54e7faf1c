//! The backup catalog: one key-value entry per backup, keyed `<cluster>.<backup-id>`, changed
//! only with compare-and-set on the entry's revision so two writers never overwrite each other.

use anyhow::Context as _;
use async_nats::jetstream::{
    consumer::DeliverPolicy,
    kv::{self, Operation},
};

use crate::names::{BackupId, ClusterName};
use crate::records::{BackupRecord, BackupStatus};

/// A catalog entry with the revision it was read at.
#[derive(Debug, Clone)]
pub struct Versioned<T> {
    pub value: T,
    pub revision: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum CasError {
    /// Someone else changed the entry first; re-read and decide again.
    #[error("the catalog entry changed since it was read")]
    Conflict,
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// What the catalog holds under one backup's key.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// Nothing was ever written there (or its history aged out).
    Never,
    /// The last operation on the key removed the record: the backup was deleted.
    Removed,
    Live(Box<Versioned<BackupRecord>>),
}

#[derive(Clone)]
pub struct Catalog {
    store: kv::Store,
}

pub fn key(cluster: &ClusterName, id: &BackupId) -> String {
    format!("{cluster}.{id}")
}

impl Catalog {
    pub fn new(store: kv::Store) -> Catalog {
        Catalog { store }
    }

    pub async fn get(
        &self,
        cluster: &ClusterName,
        id: &BackupId,
    ) -> anyhow::Result<Option<Versioned<BackupRecord>>> {
        Ok(match self.lookup(cluster, id).await? {
            Lookup::Live(record) => Some(*record),
            Lookup::Never | Lookup::Removed => None,
        })
    }

    /// The entry of one backup, telling a key never written from one whose record was removed:
    /// a report delivered again after retention deleted its backup must not bring the record
    /// back (its objects are gone).
    pub async fn lookup(&self, cluster: &ClusterName, id: &BackupId) -> anyhow::Result<Lookup> {
        // From the stream's leader: a replica's direct answer can miss an acknowledged write
        // (crate::leader_read), and the deleter decides from this one read.
        let key = key(cluster, id);
        let entry = crate::leader_read::latest(&self.store, &key)
            .await
            .context("reading the catalog")?;
        Ok(match entry {
            None => Lookup::Never,
            Some(entry) if entry.operation != Operation::Put => Lookup::Removed,
            Some(entry) => Lookup::Live(Box::new(Versioned {
                value: decode_record(&entry.value)
                    .with_context(|| format!("catalog entry {key}"))?,
                revision: entry.revision,
            })),
        })
    }

    /// Whether the backup was ever taken, as far as the catalog can tell: a record's status, or
    /// `deleted` when only the marker of its removal is left. An executor asks before taking a
    /// due-backup, so a delivery of one whose backup retention already deleted is not taken
    /// again (its objects would belong to no record).
    pub async fn taken_state(
        &self,
        cluster: &ClusterName,
        id: &BackupId,
    ) -> anyhow::Result<&'static str> {
        Ok(match self.lookup(cluster, id).await? {
            Lookup::Never => "unknown",
            Lookup::Removed => "deleted",
            Lookup::Live(record) => match record.value.status {
                BackupStatus::InProgress => "in-progress",
                _ => "recorded",
            },
        })
    }

    /// Creates the entry; `Err(Conflict)` if it already exists.
    pub async fn create(&self, record: &BackupRecord) -> Result<u64, CasError> {
        let body = serde_json::to_vec(record).context("encoding a catalog record")?;
        self.store
            .create(key(&record.cluster, &record.id), body.into())
            .await
            .map_err(|err| match err.kind() {
                kv::CreateErrorKind::AlreadyExists => CasError::Conflict,
                _ => CasError::Other(anyhow::Error::new(err).context("creating a catalog entry")),
            })
    }

    /// Replaces the entry if it is still at `revision`.
    pub async fn update(&self, record: &BackupRecord, revision: u64) -> Result<u64, CasError> {
        let body = serde_json::to_vec(record).context("encoding a catalog record")?;
        self.store
            .update(key(&record.cluster, &record.id), body.into(), revision)
            .await
            .map_err(|err| match err.kind() {
                kv::UpdateErrorKind::WrongLastRevision => CasError::Conflict,
                _ => CasError::Other(anyhow::Error::new(err).context("updating a catalog entry")),
            })
    }

    /// Removes the entry if it is still at `revision`.
    pub async fn remove(
        &self,
        cluster: &ClusterName,
        id: &BackupId,
        revision: u64,
    ) -> Result<(), CasError> {
        self.store
            .delete_expect_revision(key(cluster, id), Some(revision))
            .await
            .map_err(|err| match err.kind() {
                kv::DeleteErrorKind::WrongLastRevision => CasError::Conflict,
                _ => CasError::Other(anyhow::Error::new(err).context("removing a catalog entry")),
            })
    }

    /// The last record a removed backup had, from the key's history (`None` when the history
    /// holds none: it aged out, or the key never held a record). Tells a report of the backup
    /// that was deleted (the same times) from a new backup that re-uses its id.
    pub async fn removed_record(
        &self,
        cluster: &ClusterName,
        id: &BackupId,
    ) -> anyhow::Result<Option<BackupRecord>> {
        let mut last = None;
        crate::stream_read::read_ordered(
            &self.store.stream,
            vec![format!("{}{}", self.store.prefix, key(cluster, id))],
            DeliverPolicy::All,
            "a catalog history",
            |entry| {
                // An unreadable old revision tells nothing; the newer ones may.
                if !entry.is_removal() {
                    if let Ok(record) = decode_record(entry.payload) {
                        last = Some(record);
                    }
                }
                Ok(())
            },
        )
        .await?;
        Ok(last)
    }

    /// Every live record of one cluster, read as one consistent sweep of the bucket's stream.
    pub async fn list_cluster(
        &self,
        cluster: &ClusterName,
    ) -> anyhow::Result<Vec<Versioned<BackupRecord>>> {
        self.list_subjects(format!("{}{cluster}.*", self.store.prefix))
            .await
    }

    /// Every live record in the catalog.
    pub async fn list_all(&self) -> anyhow::Result<Vec<Versioned<BackupRecord>>> {
        self.list_subjects(format!("{}>", self.store.prefix)).await
    }

    async fn list_subjects(&self, filter: String) -> anyhow::Result<Vec<Versioned<BackupRecord>>> {
        let mut records: Vec<Option<Versioned<BackupRecord>>> = Vec::new();
        let mut seen: std::collections::HashMap<String, usize> = Default::default();
        crate::stream_read::list_last_per_key(&self.store, &filter, "a catalog listing", |entry| {
            let deleted = entry.is_removal();
            // A record written while the listing runs arrives again, newer: it replaces the
            // one read before (or removes it, when deleted). Two versions of one backup would
            // make retention refuse the whole group ("duplicate id").
            let slot = match seen.get(entry.subject) {
                Some(&slot) => slot,
                None if deleted => return Ok(()),
                None => {
                    seen.insert(entry.subject.to_string(), records.len());
                    records.push(None);
                    records.len() - 1
                }
            };
            if deleted {
                records[slot] = None;
                return Ok(());
            }
            // One unreadable entry fails the whole listing: retention over a partial view could
            // delete the parent of a backup it cannot see. Keeping everything is the safe answer.
            let value = decode_record(entry.payload)
                .with_context(|| format!("catalog entry {}", entry.subject))?;
            records[slot] = Some(Versioned {
                value,
                revision: entry.sequence,
            });
            Ok(())
        })
        .await?;
        Ok(records.into_iter().flatten().collect())
    }
}

/// Decodes one stored catalog record, refusing another schema version.
pub fn decode_record(body: &[u8]) -> anyhow::Result<BackupRecord> {
    let record: BackupRecord = serde_json::from_slice(body).context("decoding a catalog record")?;
    anyhow::ensure!(
        record.schema_version == crate::records::RECORD_SCHEMA_VERSION,
        "catalog record has schema_version {}, this build reads 1",
        record.schema_version
    );
    Ok(record)
}
