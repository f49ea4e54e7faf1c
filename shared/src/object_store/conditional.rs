//! Conditional reads and writes for objects that several writers change, such as the binlog
//! index: a read returns the object's ETag, and a write succeeds only if the object is still
//! at that ETag (`If-Match`) or does not exist yet (`If-None-Match: *`). A 412 (or the 409 some
//! stores answer to a concurrent conditional write) becomes [`PutError::Conflict`]: someone else
//! wrote first; re-read, re-apply, retry. Also a deletion that reports each key's failure.

use aws_sdk_s3::{
    error::ProvideErrorMetadata,
    primitives::ByteStream,
    types::{Delete, ObjectIdentifier},
};

use super::{body_error, object_error, ObjectError, ObjectStore, DELETE_BATCH, PERMANENT_CODES};

/// An object's body with the ETag it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    pub body: bytes::Bytes,
    pub etag: String,
}

/// The condition of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// The object must still have this ETag.
    IfMatch(String),
    /// The object must not exist.
    IfAbsent,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum PutError {
    /// The precondition failed: another writer changed (or created, or removed) the object.
    #[error("conditional write of {key} lost to another writer")]
    Conflict { key: String },
    #[error(transparent)]
    Object(#[from] ObjectError),
}

/// What a deletion did to each key.
#[derive(Debug, Clone, Default)]
pub struct DeleteReport {
    /// Keys deleted, or already absent.
    pub deleted: Vec<String>,
    pub failed: Vec<ObjectError>,
}

impl ObjectStore {
    /// Reads an object with its ETag; `None` if it does not exist.
    pub async fn get_tagged(&self, key: &str) -> Result<Option<Tagged>, ObjectError> {
        let Some(out) = self.open(key).await? else {
            return Ok(None);
        };
        let etag = out.e_tag().unwrap_or_default().to_string();
        let body = out
            .body
            .collect()
            .await
            .map_err(|err| body_error(key, err))?;
        if etag.is_empty() {
            // Without an ETag no conditional write can follow this read.
            return Err(ObjectError {
                operation: "get",
                key: key.to_string(),
                code: "NoETag".into(),
                message: "the object store returned no ETag".into(),
                permanent: true,
            });
        }
        Ok(Some(Tagged {
            body: body.into_bytes(),
            etag,
        }))
    }

    /// Writes `body` at `key` if `condition` holds; returns the new ETag (empty if the store
    /// did not say).
    pub async fn put_conditional(
        &self,
        key: &str,
        body: bytes::Bytes,
        condition: &Precondition,
    ) -> Result<String, PutError> {
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/json")
            .body(ByteStream::from(body));
        let request = match condition {
            Precondition::IfMatch(etag) => request.if_match(etag),
            Precondition::IfAbsent => request.if_none_match("*"),
        };
        match request.send().await {
            Ok(out) => Ok(out.e_tag().unwrap_or_default().to_string()),
            Err(err) => {
                let status = err.raw_response().map(|r| r.status().as_u16());
                let code = err.code();
                if matches!(status, Some(412) | Some(409))
                    || matches!(
                        code,
                        Some("PreconditionFailed") | Some("ConditionalRequestConflict")
                    )
                {
                    Err(PutError::Conflict {
                        key: key.to_string(),
                    })
                } else {
                    Err(PutError::Object(object_error("put", key, err)))
                }
            }
        }
    }

    /// Deletes `keys` in batches of 1000 and says which went and which failed (the per-key
    /// errors of a 200 `DeleteObjects` answer). A request that fails as a whole is an `Err`.
    /// On a versioned bucket every version and delete marker of each key is deleted (a key
    /// delete there only adds a marker and keeps the bytes): a key went when all of them did,
    /// and a version under a lock refuses (issue 29).
    pub async fn delete_keys_each(&self, keys: &[String]) -> Result<DeleteReport, ObjectError> {
        if self.is_versioned().await? {
            return self.delete_every_version(keys).await;
        }
        let mut report = DeleteReport::default();
        for batch in keys.chunks(DELETE_BATCH) {
            let build_error = |message: String| ObjectError {
                operation: "delete",
                key: batch[0].clone(),
                code: "Build".into(),
                message,
                permanent: true,
            };
            let objects = batch
                .iter()
                .map(|key| ObjectIdentifier::builder().key(key).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| build_error(err.to_string()))?;
            let delete = Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .map_err(|err| build_error(err.to_string()))?;
            let out = self
                .client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|err| object_error("delete", &batch[0], err))?;
            let mut failed_keys = std::collections::HashSet::new();
            // An error that names no key could be about any of them: none counts as deleted.
            let mut unattributed = false;
            for error in out.errors() {
                unattributed |= error.key().is_none_or(str::is_empty);
                let code = error.code().unwrap_or("Unknown").to_string();
                let key = error.key().unwrap_or_default().to_string();
                failed_keys.insert(key.clone());
                report.failed.push(ObjectError {
                    operation: "delete",
                    key,
                    permanent: PERMANENT_CODES.contains(&code.as_str()),
                    code,
                    message: error.message().unwrap_or_default().to_string(),
                });
            }
            if unattributed {
                continue;
            }
            report.deleted.extend(
                batch
                    .iter()
                    .filter(|key| !failed_keys.contains(key.as_str()))
                    .cloned(),
            );
        }
        Ok(report)
    }

    /// [`ObjectStore::delete_keys_each`] on a versioned bucket.
    async fn delete_every_version(&self, keys: &[String]) -> Result<DeleteReport, ObjectError> {
        let mut report = DeleteReport::default();
        let versions: Vec<(String, Option<String>)> = self
            .versions_of(keys)
            .await?
            .into_iter()
            .map(|(key, version)| (key, Some(version)))
            .collect();
        let mut failed_keys = std::collections::HashSet::new();
        let mut unattributed = false;
        for batch in versions.chunks(DELETE_BATCH) {
            for failure in self.delete_versions(batch).await? {
                unattributed |= failure.key.is_empty();
                failed_keys.insert(failure.key.clone());
                report.failed.push(failure);
            }
        }
        // An error that names no key could be about any of them: none counts as deleted.
        if !unattributed {
            report.deleted = keys
                .iter()
                .filter(|key| !failed_keys.contains(key.as_str()))
                .cloned()
                .collect();
        }
        Ok(report)
    }
}
