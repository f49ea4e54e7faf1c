//! Conditional reads and writes for objects that several writers change, such as the binlog
//! index: a read returns the object's ETag, and a write succeeds only if the object is still
//! at that ETag (`If-Match`) or does not exist yet (`If-None-Match: *`). A 412 (or the 409 some
//! stores answer to a concurrent conditional write) becomes [`PutError::Conflict`]: someone else
//! wrote first; re-read, re-apply, retry.

use aws_sdk_s3::{error::ProvideErrorMetadata, primitives::ByteStream};

use super::{body_error, object_error, ObjectError, ObjectStore};

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
}
