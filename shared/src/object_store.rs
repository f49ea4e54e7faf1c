//! The S3 client Sexton uses, and the key layout: every object of a cluster lies under
//! `<prefix>/<cluster>/`, a backup's under `<prefix>/<cluster>/<backup-name>/<backup-id>/`.
//! Deletion checks the per-key errors of a 200 `DeleteObjects` answer and tells permanent
//! failures (Object Lock, a missing bucket) from transient ones.

use anyhow::Context as _;
use aws_sdk_s3::{
    config::{Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation},
    error::ProvideErrorMetadata,
    primitives::ByteStream,
    types::{Delete, ObjectIdentifier},
    Client,
};

use crate::config::S3Config;
use crate::names::{check_name, ClusterName};

/// S3's limit of keys in one `DeleteObjects` request.
pub const DELETE_BATCH: usize = 1000;

/// Codes after which retrying cannot help: a human must act.
const PERMANENT_CODES: &[&str] = &[
    "AccessDenied",
    "NoSuchBucket",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AllAccessDisabled",
    "InvalidBucketName",
];

#[derive(Debug, Clone, thiserror::Error)]
#[error("{operation} {key}: {code}: {message}")]
pub struct ObjectError {
    pub operation: &'static str,
    pub key: String,
    pub code: String,
    pub message: String,
    /// True when retrying cannot help (Object Lock, legal hold, a missing bucket).
    pub permanent: bool,
}

#[derive(Clone)]
pub struct ObjectStore {
    client: Client,
    bucket: String,
    prefix: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: i64,
    pub last_modified: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("object key {key:?} {why}")]
pub struct KeyError {
    pub key: String,
    pub why: &'static str,
}

impl ObjectStore {
    pub async fn connect(config: &S3Config) -> anyhow::Result<ObjectStore> {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(Region::new(config.region.clone()));
        if let (Some(id), Some(secret)) = (&config.access_key_id, &config.secret_access_key) {
            loader = loader.credentials_provider(Credentials::new(
                id.clone(),
                secret.clone(),
                None,
                None,
                "sexton-config",
            ));
        }
        let shared = loader.load().await;
        let mut builder = aws_sdk_s3::config::Builder::from(&shared)
            .force_path_style(config.force_path_style)
            // Some S3-compatible stores reject the checksums the SDK adds by default.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        Ok(ObjectStore {
            client: Client::from_conf(builder.build()),
            bucket: config.bucket.clone(),
            prefix: config.prefix.clone(),
        })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// `<prefix>/<cluster>/`
    pub fn cluster_prefix(&self, cluster: &ClusterName) -> String {
        cluster_prefix(&self.prefix, cluster)
    }

    /// `<prefix>/<cluster>/<backup-name>/<backup-id>/`
    pub fn backup_prefix(&self, cluster: &ClusterName, backup_name: &str, id: &str) -> String {
        format!("{}{backup_name}/{id}/", self.cluster_prefix(cluster))
    }

    /// Checks that `key` is a plain key under the cluster's prefix, so a forged job cannot
    /// reach another cluster's objects or climb out with `..`.
    pub fn check_key(&self, cluster: &ClusterName, key: &str) -> Result<(), KeyError> {
        check_key_under(&self.prefix, cluster, key)
    }

    pub async fn put(&self, key: &str, body: bytes::Bytes) -> Result<(), ObjectError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|err| object_error("put", key, err))?;
        Ok(())
    }

    pub async fn get(&self, key: &str) -> Result<Option<bytes::Bytes>, ObjectError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => {
                let body = out.body.collect().await.map_err(|err| ObjectError {
                    operation: "get",
                    key: key.to_string(),
                    code: "Body".into(),
                    message: err.to_string(),
                    permanent: false,
                })?;
                Ok(Some(body.into_bytes()))
            }
            Err(err) if err.code() == Some("NoSuchKey") => Ok(None),
            Err(err) => Err(object_error("get", key, err)),
        }
    }

    /// Deletes `keys` in batches of 1000. Deleting a missing key succeeds (S3 semantics), so a
    /// redelivered job finishes without error. Returns the first failure; a permanent one
    /// (Object Lock, legal hold) is reported over a transient one.
    pub async fn delete_keys(&self, keys: &[String]) -> Result<usize, ObjectError> {
        let mut deleted = 0;
        for batch in keys.chunks(DELETE_BATCH) {
            let objects = batch
                .iter()
                .map(|key| ObjectIdentifier::builder().key(key).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| ObjectError {
                    operation: "delete",
                    key: batch[0].clone(),
                    code: "Build".into(),
                    message: err.to_string(),
                    permanent: true,
                })?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .map_err(|err| ObjectError {
                    operation: "delete",
                    key: batch[0].clone(),
                    code: "Build".into(),
                    message: err.to_string(),
                    permanent: true,
                })?;
            let out = self
                .client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|err| object_error("delete", &batch[0], err))?;
            // A 200 answer can still carry per-key failures.
            let mut failures: Vec<ObjectError> = out
                .errors()
                .iter()
                .map(|e| {
                    let code = e.code().unwrap_or("Unknown").to_string();
                    ObjectError {
                        operation: "delete",
                        key: e.key().unwrap_or_default().to_string(),
                        permanent: PERMANENT_CODES.contains(&code.as_str()),
                        code,
                        message: e.message().unwrap_or_default().to_string(),
                    }
                })
                .collect();
            if !failures.is_empty() {
                failures.sort_by_key(|f| !f.permanent);
                return Err(failures.swap_remove(0));
            }
            deleted += batch.len();
        }
        Ok(deleted)
    }

    /// Lists every object under `prefix`.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, ObjectError> {
        let mut objects = Vec::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|err| object_error("list", prefix, err))?;
            for object in page.contents() {
                objects.push(ObjectInfo {
                    key: object.key().unwrap_or_default().to_string(),
                    size: object.size().unwrap_or(0),
                    last_modified: object
                        .last_modified()
                        .and_then(|t| chrono::DateTime::from_timestamp(t.secs(), t.subsec_nanos())),
                });
            }
        }
        Ok(objects)
    }

    /// Whether the bucket answers; `/readyz` of the deleter uses it.
    pub async fn check_reachable(&self) -> anyhow::Result<()> {
        self.client
            .head_bucket()
            .bucket(&self.bucket)
            .send()
            .await
            .map_err(|err| anyhow::anyhow!(object_error("head", &self.bucket, err)))
            .context("object store not reachable")?;
        Ok(())
    }
}

pub fn cluster_prefix(prefix: &str, cluster: &ClusterName) -> String {
    if prefix.is_empty() {
        format!("{cluster}/")
    } else {
        format!("{prefix}/{cluster}/")
    }
}

/// See [`ObjectStore::check_key`].
pub fn check_key_under(prefix: &str, cluster: &ClusterName, key: &str) -> Result<(), KeyError> {
    let fail = |why| {
        Err(KeyError {
            key: key.chars().take(200).collect(),
            why,
        })
    };
    let Some(rest) = key.strip_prefix(&cluster_prefix(prefix, cluster)) else {
        return fail("is not under the cluster's prefix");
    };
    if rest.is_empty() {
        return fail("names the cluster's prefix itself");
    }
    for segment in rest.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return fail("has an empty, '.' or '..' segment");
        }
        if segment.chars().any(|c| c.is_control() || c == '\\') {
            return fail("has a control character or a backslash");
        }
    }
    Ok(())
}

/// Checks that `key` lies under the backup's own directory,
/// `<prefix>/<cluster>/<backup-name>/<backup-id>/`, so one backup's record can never name (and
/// have deleted) the objects of another backup of the same cluster.
pub fn check_backup_key(
    prefix: &str,
    cluster: &ClusterName,
    backup_name: &str,
    backup_id: &str,
    key: &str,
) -> Result<(), KeyError> {
    check_key_under(prefix, cluster, key)?;
    let own = format!(
        "{}{backup_name}/{backup_id}/",
        cluster_prefix(prefix, cluster)
    );
    if !key.starts_with(&own) {
        return Err(KeyError {
            key: key.chars().take(200).collect(),
            why: "is not under the backup's own <backup-name>/<backup-id>/ directory",
        });
    }
    Ok(())
}

/// Checks the `<backup-name>` segment of a key.
pub fn check_backup_name(name: &str) -> Result<(), crate::names::NameError> {
    check_name("backup name", name)
}

fn object_error<E, R>(
    operation: &'static str,
    key: &str,
    err: aws_sdk_s3::error::SdkError<E, R>,
) -> ObjectError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let code = err.code().unwrap_or("Transport").to_string();
    let message = match err.message() {
        Some(m) => m.to_string(),
        None => aws_sdk_s3::error::DisplayErrorContext(&err).to_string(),
    };
    ObjectError {
        operation,
        key: key.to_string(),
        permanent: PERMANENT_CODES.contains(&code.as_str()),
        code,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_must_stay_under_the_cluster_prefix() {
        let c = ClusterName::new("c1").unwrap();
        check_key_under("backups", &c, "backups/c1/s/b1/backup.xbstream").unwrap();
        check_key_under("", &c, "c1/s/b1/metadata.json").unwrap();
        for bad in [
            "backups/c2/s/b1/backup.xbstream",
            "backups/c1/../c2/s/b1/x",
            "backups/c1/s/../../c2/x",
            "/backups/c1/s/b1/x",
            "backups/c1/",
            "backups/c1//x",
            "backups/c1/./x",
            "backups/c10/s/b1/x",
            "backups/c1/s\u{0}/x",
            "other/backups/c1/x",
        ] {
            assert!(check_key_under("backups", &c, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn backup_keys_must_stay_under_their_own_directory() {
        let c = ClusterName::new("c1").unwrap();
        check_backup_key("backups", &c, "s", "b1", "backups/c1/s/b1/backup.xbstream").unwrap();
        for bad in [
            "backups/c1/s/b2/backup.xbstream",
            "backups/c1/s/b10/backup.xbstream",
            "backups/c1/t/b1/backup.xbstream",
            "backups/c1/s/b1/../b2/x",
            "backups/c2/s/b1/backup.xbstream",
            "backups/c1/s/b1/",
        ] {
            assert!(
                check_backup_key("backups", &c, "s", "b1", bad).is_err(),
                "{bad}"
            );
        }
    }
}
