//! S3 Object Lock (issue 29): whether a bucket enforces it, setting a version's retain-until
//! date, reading it back, and the versions a backup's objects are at. Sexton only ever asks
//! for a date later than the one set; the store refuses a shorter one anyway.

use std::collections::BTreeMap;

use aws_sdk_s3::{
    error::ProvideErrorMetadata,
    types::{ObjectLockEnabled, ObjectLockRetention, ObjectLockRetentionMode},
};
use chrono::{DateTime, Utc};
use sexton_retention::lock::LockMode;

use super::{object_error, ObjectError, ObjectStore};

/// A version's lock as the store holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// `GOVERNANCE` or `COMPLIANCE`, as the store says it.
    pub mode: String,
    pub until: DateTime<Utc>,
}

impl ObjectStore {
    /// Whether the bucket has Object Lock enabled: locks can be set on its versions. `false`
    /// when it has no lock configuration at all.
    pub async fn object_lock_enabled(&self) -> Result<bool, ObjectError> {
        match self
            .client
            .get_object_lock_configuration()
            .bucket(&self.bucket)
            .send()
            .await
        {
            Ok(out) => Ok(out
                .object_lock_configuration()
                .and_then(|c| c.object_lock_enabled())
                == Some(&ObjectLockEnabled::Enabled)),
            Err(err)
                if err.code() == Some("ObjectLockConfigurationNotFoundError")
                    || err.code() == Some("ObjectLockConfigurationNotFound") =>
            {
                Ok(false)
            }
            Err(err) => Err(object_error("lock configuration", &self.bucket, err)),
        }
    }

    /// Locks `key` (that very `version` when known, else the current one) until `until` in
    /// `mode`. The store refuses to shorten a lock (`AccessDenied`); callers ask for later
    /// dates only.
    pub async fn lock_version(
        &self,
        key: &str,
        version: Option<&str>,
        mode: LockMode,
        until: DateTime<Utc>,
    ) -> Result<(), ObjectError> {
        let retention = ObjectLockRetention::builder()
            .mode(ObjectLockRetentionMode::from(mode.as_s3()))
            .retain_until_date(aws_sdk_s3::primitives::DateTime::from_secs(
                until.timestamp(),
            ))
            .build();
        self.client
            .put_object_retention()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version.map(str::to_string))
            .retention(retention)
            .send()
            .await
            .map_err(|err| object_error("lock", key, err))?;
        Ok(())
    }

    /// The lock on `key` (that `version`, else the current one): `None` when it has none.
    pub async fn retention_of(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<Retention>, ObjectError> {
        match self
            .client
            .get_object_retention()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version.map(str::to_string))
            .send()
            .await
        {
            Ok(out) => Ok(out.retention().and_then(|r| {
                let until = r.retain_until_date()?;
                Some(Retention {
                    mode: r.mode().map(|m| m.as_str().to_string()).unwrap_or_default(),
                    until: DateTime::from_timestamp(until.secs(), until.subsec_nanos())?,
                })
            })),
            Err(err)
                if matches!(
                    err.code(),
                    Some("NoSuchObjectLockConfiguration" | "ObjectLockConfigurationNotFoundError")
                ) =>
            {
                Ok(None)
            }
            Err(err) => Err(object_error("lock of", key, err)),
        }
    }

    /// The current version of every object under `prefix` (key → version id), leaving out
    /// keys whose newest entry is a delete marker. On a bucket without versioning: empty.
    pub async fn current_versions(
        &self,
        prefix: &str,
    ) -> Result<BTreeMap<String, String>, ObjectError> {
        Ok(self
            .list_versions(prefix)
            .await?
            .into_iter()
            // "null" is the version of an object written before versioning.
            .filter(|entry| entry.latest && !entry.delete_marker && entry.version_id != "null")
            .map(|entry| (entry.key, entry.version_id))
            .collect())
    }
}

/// One entry of a versioned listing: a version of a key, or a delete marker over it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionEntry {
    pub key: String,
    pub version_id: String,
    /// 0 for a delete marker.
    pub size: u64,
    /// The key's newest entry: what a plain GET reads (or, for a marker, why it finds nothing).
    pub latest: bool,
    pub delete_marker: bool,
}

impl ObjectStore {
    /// Every version and delete marker under `prefix` (`ListObjectVersions`): what the scrub of
    /// a versioned bucket compares the recorded versions with.
    pub async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>, ObjectError> {
        let mut entries = Vec::new();
        let mut key_marker: Option<String> = None;
        let mut version_marker: Option<String> = None;
        loop {
            let page = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.clone())
                .set_version_id_marker(version_marker.clone())
                .send()
                .await
                .map_err(|err| object_error("list versions", prefix, err))?;
            for version in page.versions() {
                if let (Some(key), Some(id)) = (version.key(), version.version_id()) {
                    entries.push(VersionEntry {
                        key: key.to_string(),
                        version_id: id.to_string(),
                        size: version.size().unwrap_or(0).max(0) as u64,
                        latest: version.is_latest() == Some(true),
                        delete_marker: false,
                    });
                }
            }
            for marker in page.delete_markers() {
                if let (Some(key), Some(id)) = (marker.key(), marker.version_id()) {
                    entries.push(VersionEntry {
                        key: key.to_string(),
                        version_id: id.to_string(),
                        size: 0,
                        latest: marker.is_latest() == Some(true),
                        delete_marker: true,
                    });
                }
            }
            if page.is_truncated() != Some(true) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_string);
            version_marker = page.next_version_id_marker().map(str::to_string);
            if key_marker.is_none() {
                break;
            }
        }
        Ok(entries)
    }
}
