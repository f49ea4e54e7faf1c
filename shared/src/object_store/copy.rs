//! Copying one object from one store to another through bounded memory (issue 28): the body
//! of a `GetObject` is cut into parts as it arrives, each part hashed and sent on, at most
//! [`UploadSettings::concurrency`] parts in memory at once. An object that fits in one part is
//! written with one `PutObject` only after all of it was read and its size and SHA-256 matched
//! what the caller expects; a larger one is a multipart upload that is completed only after
//! the whole object matched, and aborted otherwise. So a copy never leaves a wrong object, nor a
//! partial one: a process killed mid-object leaves at most an unfinished multipart upload,
//! which is not an object (a bucket lifecycle rule reaps such uploads).

use std::sync::Arc;

use aws_sdk_s3::{
    primitives::ByteStream,
    types::{CompletedMultipartUpload, CompletedPart, StorageClass},
};
use bytes::BytesMut;
use sha2::Digest as _;
use tokio::{sync::Semaphore, task::JoinSet};

use super::{
    object_error,
    transfer::{Buffers, UploadSettings, MAX_PARTS},
    ObjectError, ObjectStore,
};
use crate::wire::ObjectDigest;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CopyError {
    /// The source's bytes are not the ones expected: nothing was written.
    #[error("{key}: the source holds {found_size} bytes with SHA-256 {found_sha256}, not the {expected_size} bytes with SHA-256 {expected_sha256} recorded")]
    Corrupt {
        key: String,
        expected_size: u64,
        expected_sha256: String,
        found_size: u64,
        found_sha256: String,
    },
    /// The object is not at the source.
    #[error("{key}: not at the source")]
    Missing { key: String },
    /// The object is larger than one multipart upload of this part size holds.
    #[error("{key}: more than {MAX_PARTS} parts")]
    TooManyParts { key: String },
    #[error(transparent)]
    Object(#[from] ObjectError),
}

impl CopyError {
    /// Whether trying again may help: a store that did not answer; a corrupt or missing
    /// source stays so until someone mends it, but is tried again too (slowly), since a copy
    /// that gives up would leave the backup waiting at its source for ever.
    pub fn is_transient(&self) -> bool {
        matches!(self, CopyError::Object(err) if !err.permanent)
    }
}

/// The reading side: the source's body, the digest so far and the bytes read.
struct Source {
    body: ByteStream,
    key: String,
    hasher: sha2::Sha256,
    read: u64,
    /// Bytes of the last chunk that did not fit in the part being filled.
    carry: bytes::Bytes,
}

impl Source {
    /// Fills `part` with up to `size` bytes (fewer only at the end of the object).
    async fn next_part(&mut self, mut part: BytesMut, size: usize) -> Result<BytesMut, CopyError> {
        part.clear();
        loop {
            if !self.carry.is_empty() {
                let take = self.carry.len().min(size - part.len());
                let chunk = self.carry.split_to(take);
                self.hasher.update(&chunk);
                self.read += chunk.len() as u64;
                part.extend_from_slice(&chunk);
            }
            if part.len() == size {
                return Ok(part);
            }
            match self.body.next().await {
                None => return Ok(part),
                Some(Ok(chunk)) => self.carry = chunk,
                Some(Err(err)) => {
                    return Err(CopyError::Object(ObjectError {
                        operation: "get",
                        key: self.key.clone(),
                        code: "Body".into(),
                        message: err.to_string(),
                        permanent: false,
                    }))
                }
            }
        }
    }

    fn check(&mut self, expected: &ObjectDigest) -> Result<(), CopyError> {
        let found = crate::digest::hex(&std::mem::take(&mut self.hasher).finalize());
        let sha_matches = expected.sha256.as_deref().is_none_or(|sha| sha == found);
        if self.read != expected.size || !sha_matches {
            return Err(CopyError::Corrupt {
                key: self.key.clone(),
                expected_size: expected.size,
                expected_sha256: expected.sha256.clone().unwrap_or_default(),
                found_size: self.read,
                found_sha256: found,
            });
        }
        Ok(())
    }
}

impl ObjectStore {
    /// Copies the object `expected.key` of this store to `destination_key` of `destination`,
    /// checking that it holds `expected.size` bytes with `expected.sha256` before anything at
    /// the destination counts. Returns the digest as written there (its key at the
    /// destination). `storage_class` is passed to the destination as is.
    pub async fn copy_object_to(
        &self,
        expected: &ObjectDigest,
        destination: &ObjectStore,
        destination_key: &str,
        settings: UploadSettings,
        storage_class: Option<&str>,
    ) -> Result<ObjectDigest, CopyError> {
        use aws_sdk_s3::error::ProvideErrorMetadata as _;
        let key = expected.key.as_str();
        let out = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => out,
            Err(err) if err.code() == Some("NoSuchKey") => {
                return Err(CopyError::Missing {
                    key: key.to_string(),
                })
            }
            Err(err) => return Err(object_error("get", key, err).into()),
        };
        let mut source = Source {
            body: out.body,
            key: key.to_string(),
            hasher: sha2::Sha256::new(),
            read: 0,
            carry: bytes::Bytes::new(),
        };
        let part_size = settings.part_size_for(expected.size);
        let buffers = Arc::new(Buffers {
            free: Default::default(),
            size: part_size as usize,
        });
        let class = storage_class.map(StorageClass::from);
        let first = source.next_part(buffers.take(), part_size as usize).await?;
        if (first.len() as u64) < part_size {
            // The whole object in one part: checked before a byte is written.
            source.check(expected)?;
            destination
                .client
                .put_object()
                .bucket(&destination.bucket)
                .key(destination_key)
                .content_length(first.len() as i64)
                .set_storage_class(class)
                .body(ByteStream::from(first.freeze()))
                .send()
                .await
                .map_err(|err| object_error("put", destination_key, err))?;
        } else {
            let upload_id = destination
                .client
                .create_multipart_upload()
                .bucket(&destination.bucket)
                .key(destination_key)
                .set_storage_class(class)
                .send()
                .await
                .map_err(|err| object_error("create multipart upload", destination_key, err))?
                .upload_id()
                .unwrap_or_default()
                .to_string();
            let sent = destination
                .send_parts(
                    destination_key,
                    &upload_id,
                    &mut source,
                    first,
                    &buffers,
                    settings,
                )
                .await
                .and_then(|parts| source.check(expected).map(|()| parts));
            match sent {
                Ok(parts) => {
                    destination
                        .client
                        .complete_multipart_upload()
                        .bucket(&destination.bucket)
                        .key(destination_key)
                        .upload_id(&upload_id)
                        .multipart_upload(
                            CompletedMultipartUpload::builder()
                                .set_parts(Some(parts))
                                .build(),
                        )
                        .send()
                        .await
                        .map_err(|err| {
                            object_error("complete multipart upload", destination_key, err)
                        })?;
                }
                Err(err) => {
                    if let Err(abort) = destination
                        .client
                        .abort_multipart_upload()
                        .bucket(&destination.bucket)
                        .key(destination_key)
                        .upload_id(&upload_id)
                        .send()
                        .await
                    {
                        tracing::warn!(key = destination_key, error = %object_error("abort multipart upload", destination_key, abort), "multipart upload not aborted");
                    }
                    return Err(err);
                }
            }
        }
        Ok(ObjectDigest {
            key: destination_key.to_string(),
            size: source.read,
            sha256: expected.sha256.clone(),
        })
    }

    /// Sends `first` and the rest of `source` as the parts of `upload_id`, at most
    /// `settings.concurrency` parts in memory at once; the parts in order.
    async fn send_parts(
        &self,
        key: &str,
        upload_id: &str,
        source: &mut Source,
        first: BytesMut,
        buffers: &Arc<Buffers>,
        settings: UploadSettings,
    ) -> Result<Vec<CompletedPart>, CopyError> {
        let part_size = buffers.size;
        let permits = Arc::new(Semaphore::new(settings.concurrency));
        let acquire = || async {
            permits
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed")
        };
        // Dropped on an early return, which aborts the parts still being sent.
        let mut sending: JoinSet<Result<CompletedPart, ObjectError>> = JoinSet::new();
        let mut parts = Vec::new();
        let mut part = first;
        let mut permit = acquire().await;
        let mut number: u64 = 0;
        loop {
            number += 1;
            if number > MAX_PARTS {
                return Err(CopyError::TooManyParts {
                    key: key.to_string(),
                });
            }
            let last = part.len() < part_size;
            let body = std::mem::take(&mut part).freeze();
            let sent = body.clone();
            let request = self
                .client
                .upload_part()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(number as i32)
                .content_length(body.len() as i64)
                .body(ByteStream::from(body));
            let key_for_errors = key.to_string();
            let held = permit;
            let pool = buffers.clone();
            sending.spawn(async move {
                let out = request
                    .send()
                    .await
                    .map_err(|err| object_error("upload part", &key_for_errors, err));
                pool.give(sent);
                drop(held);
                out.map(|out| {
                    CompletedPart::builder()
                        .part_number(number as i32)
                        .set_e_tag(out.e_tag().map(str::to_string))
                        .build()
                })
            });
            while let Some(done) = sending.try_join_next() {
                parts.push(done.expect("an upload task never panics")?);
            }
            if last {
                break;
            }
            permit = acquire().await;
            let next = source.next_part(buffers.take(), part_size).await?;
            if next.is_empty() {
                break;
            }
            part = next;
        }
        while let Some(done) = sending.join_next().await {
            parts.push(done.expect("an upload task never panics")?);
        }
        parts.sort_by_key(|p| p.part_number());
        Ok(parts)
    }

    /// The size of the object at `key`, `None` if there is none.
    pub async fn size_of(&self, key: &str) -> Result<Option<u64>, ObjectError> {
        use aws_sdk_s3::error::ProvideErrorMetadata as _;
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.content_length().unwrap_or(0).max(0) as u64)),
            Err(err) if err.code() == Some("NotFound") || err.code() == Some("NoSuchKey") => {
                Ok(None)
            }
            Err(err) => Err(object_error("head", key, err)),
        }
    }

    /// The prefix objects are kept under (`s3.prefix`, or a location's).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}
