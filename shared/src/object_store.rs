//! The S3 client Sexton uses, and the key layout: every object of a cluster lies under
//! `<prefix>/<cluster>/`, a backup's under `<prefix>/<cluster>/<backup-name>/<backup-id>/`.
//! Deletion (one path, `delete.rs`) checks the per-key errors of a 200 `DeleteObjects` answer
//! and tells permanent failures (Object Lock, a missing bucket) from transient ones.

use anyhow::Context as _;
use aws_sdk_s3::{
    config::{Credentials, Region, RequestChecksumCalculation, ResponseChecksumValidation},
    error::ProvideErrorMetadata,
    primitives::ByteStream,
    Client,
};

use crate::config::S3Config;

mod conditional;
pub mod copy;
mod delete;
pub mod lock;
pub mod transfer;
use crate::names::ClusterName;
pub use conditional::{Precondition, PutError, Tagged};
pub use delete::{DeleteReport, Requests, Target, DELETE_BATCH};
pub use sexton_model::keys::{
    check_backup_key, check_backup_name, check_key_under, cluster_prefix, KeyError, ObjectInfo,
};

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

/// Codes with which a store says the object (or the version asked for) is not there.
const MISSING_CODES: &[&str] = &["NoSuchKey", "NoSuchVersion", "NotFound"];

impl ObjectError {
    /// Whether the store said the object, or the version asked for, is not there: evidence
    /// about the object, not a transient failure (issue 54). The one place that tells them
    /// apart; a bucket that is gone is not this (`NoSuchBucket` is permanent).
    pub fn is_missing(&self) -> bool {
        MISSING_CODES.contains(&self.code.as_str())
    }

    /// Whether an error chain holds a store's answer that an object is not there.
    pub fn in_chain_missing(err: &anyhow::Error) -> bool {
        err.chain().any(|cause| {
            cause
                .downcast_ref::<ObjectError>()
                .is_some_and(ObjectError::is_missing)
        })
    }
}

#[derive(Clone)]
pub struct ObjectStore {
    client: Client,
    bucket: String,
    prefix: String,
    /// Endpoint, bucket and prefix: the place records name (issue 54).
    place: sexton_model::keys::StoreRef,
    /// Whether the bucket keeps versions, asked once.
    versioned: std::sync::Arc<tokio::sync::OnceCell<bool>>,
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
            place: config.place(),
            versioned: Default::default(),
        })
    }

    /// The place this client reads and writes: what a record written through it names.
    pub fn place(&self) -> &sexton_model::keys::StoreRef {
        &self.place
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// A client per configured location (issue 28), each built from that location's settings
    /// alone: no credentials of another location (nor the primary's) reach it.
    pub async fn connect_locations(
        config: &crate::config::Config,
    ) -> anyhow::Result<std::collections::BTreeMap<crate::names::LocationName, ObjectStore>> {
        let mut locations = std::collections::BTreeMap::new();
        for (name, location) in &config.locations {
            let name = crate::names::LocationName::new(name.as_str())
                .map_err(|err| anyhow::anyhow!("location {name:?}: {err}"))?;
            let store = ObjectStore::connect(&location.s3)
                .await
                .map_err(|err| anyhow::anyhow!("the client of location {name}: {err:#}"))?;
            locations.insert(name, store);
        }
        Ok(locations)
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

    /// `GetObject` at `key`, its body not read yet: `None` when there is no such object. Every
    /// read of an object starts here.
    pub(crate) async fn open(
        &self,
        key: &str,
    ) -> Result<Option<aws_sdk_s3::operation::get_object::GetObjectOutput>, ObjectError> {
        self.open_at(key, None).await
    }

    /// Like [`ObjectStore::open`], of that very `version` when one is given (issue 29: a
    /// recovery point on a versioned bucket is the version intake saw, whatever was written
    /// over it since). A version that is not there is `None`, like a missing key.
    pub(crate) async fn open_at(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<aws_sdk_s3::operation::get_object::GetObjectOutput>, ObjectError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version.map(str::to_string))
            .send()
            .await
        {
            Ok(out) => Ok(Some(out)),
            Err(err)
                if matches!(err.code(), Some("NoSuchKey" | "NoSuchVersion"))
                    || (version.is_some()
                        && err
                            .raw_response()
                            .is_some_and(|raw| raw.status().as_u16() == 404)) =>
            {
                Ok(None)
            }
            Err(err) => Err(object_error("get", key, err)),
        }
    }

    pub async fn get(&self, key: &str) -> Result<Option<bytes::Bytes>, ObjectError> {
        self.get_at(key, None).await
    }

    /// [`ObjectStore::get`] of that very `version` when one is given.
    pub async fn get_at(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<bytes::Bytes>, ObjectError> {
        let Some(out) = self.open_at(key, version).await? else {
            return Ok(None);
        };
        let body = out
            .body
            .collect()
            .await
            .map_err(|err| body_error(key, err))?;
        Ok(Some(body.into_bytes()))
    }

    /// Reads `key` back in a stream (never whole in memory) and returns its size and SHA-256
    /// in hex; `None` when there is no such object. What verification recomputes.
    pub async fn digest(&self, key: &str) -> Result<Option<(u64, String)>, ObjectError> {
        self.digest_at(key, None).await
    }

    /// [`ObjectStore::digest`] of that very `version` when one is given.
    pub async fn digest_at(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<(u64, String)>, ObjectError> {
        use sha2::Digest as _;
        let Some(out) = self.open_at(key, version).await? else {
            return Ok(None);
        };
        let mut body = out.body;
        let mut hasher = sha2::Sha256::new();
        let mut size = 0u64;
        loop {
            match body.try_next().await {
                Ok(Some(chunk)) => {
                    size += chunk.len() as u64;
                    hasher.update(&chunk);
                }
                Ok(None) => break,
                Err(err) => return Err(body_error(key, err)),
            }
        }
        Ok(Some((size, crate::digest::hex(&hasher.finalize()))))
    }

    /// Whether the bucket keeps versions (versioning enabled or suspended; Object Lock implies
    /// it). Deleting a key there only adds a delete marker and keeps the data, so the deleter
    /// deletes every version instead — and a version under legal hold or retention refuses.
    pub async fn is_versioned(&self) -> Result<bool, ObjectError> {
        self.versioned
            .get_or_try_init(|| async {
                let out = self
                    .client
                    .get_bucket_versioning()
                    .bucket(&self.bucket)
                    .send()
                    .await
                    .map_err(|err| object_error("versioning", &self.bucket, err))?;
                Ok(out.status().is_some())
            })
            .await
            .copied()
    }

    /// Every version and delete marker of `keys`, as (key, version id). Keys are listed by
    /// their directory (one listing for a backup's objects), then filtered to exact matches.
    pub async fn versions_of(&self, keys: &[String]) -> Result<Vec<(String, String)>, ObjectError> {
        let wanted: std::collections::HashSet<&str> = keys.iter().map(String::as_str).collect();
        let mut directories: Vec<&str> = keys
            .iter()
            .map(|key| key.rfind('/').map_or("", |i| &key[..=i]))
            .collect();
        directories.sort_unstable();
        directories.dedup();
        let mut out = Vec::new();
        for directory in directories {
            for entry in self.list_versions(directory).await? {
                if wanted.contains(entry.key.as_str()) {
                    out.push((entry.key, entry.version_id));
                }
            }
        }
        Ok(out)
    }

    /// Whether `key` exists (`HeadObject`).
    pub async fn exists(&self, key: &str) -> Result<bool, ObjectError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(err) if err.code() == Some("NotFound") || err.code() == Some("NoSuchKey") => {
                Ok(false)
            }
            Err(err)
                if err
                    .raw_response()
                    .is_some_and(|raw| raw.status().as_u16() == 404) =>
            {
                Ok(false)
            }
            Err(err) => Err(object_error("head", key, err)),
        }
    }

    /// The size and version of `key` (that very `version` when one is given, else the current
    /// one), `None` when there is none (`HeadObject`).
    pub async fn head_at(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Option<(u64, Option<String>)>, ObjectError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version.map(str::to_string))
            .send()
            .await
        {
            Ok(out) => Ok(Some((
                out.content_length()
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0),
                out.version_id().map(str::to_string),
            ))),
            Err(err)
                if err.code() == Some("NotFound")
                    || err.code() == Some("NoSuchKey")
                    || err.code() == Some("NoSuchVersion")
                    || err
                        .raw_response()
                        .is_some_and(|raw| raw.status().as_u16() == 404) =>
            {
                Ok(None)
            }
            Err(err) => Err(object_error("head", key, err)),
        }
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

/// A body that broke off while it was read: worth another try.
fn body_error(key: &str, err: impl std::fmt::Display) -> ObjectError {
    ObjectError {
        operation: "get",
        key: key.to_string(),
        code: "Body".into(),
        message: err.to_string(),
        permanent: false,
    }
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
