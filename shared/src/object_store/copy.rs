//! Copying one object from one store to another through bounded memory (issue 28): the body
//! of a `GetObject` is the [`PartSource`] of an upload to the destination
//! ([`ObjectStore::upload_from`], the one `put_file` uses), each part hashed on the way. The
//! whole object's size and SHA-256 are checked before anything at the destination counts: an
//! object that fits in one part is written only after the check, a larger one is a multipart
//! upload completed only after it (and aborted otherwise). So a copy never leaves a wrong
//! object, nor a partial one: a process killed mid-object leaves at most an unfinished
//! multipart upload, which is not an object (a bucket lifecycle rule reaps such uploads).

use aws_sdk_s3::primitives::ByteStream;
use bytes::BytesMut;
use sha2::Digest as _;

use super::{
    body_error,
    transfer::{PartSource, UploadSettings, MAX_PARTS},
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

/// The reading side: the source's body, the digest so far and the bytes read.
struct Source {
    body: ByteStream,
    key: String,
    hasher: sha2::Sha256,
    read: u64,
    /// Bytes of the last chunk that did not fit in the part being filled.
    carry: bytes::Bytes,
}

impl PartSource for Source {
    type Error = CopyError;

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
                Some(Err(err)) => return Err(body_error(&self.key, err).into()),
            }
        }
    }

    fn too_many_parts(&self, key: &str, _part_size: u64) -> CopyError {
        CopyError::TooManyParts {
            key: key.to_string(),
        }
    }
}

impl Source {
    /// The whole object read: is it what `expected` says?
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
        let key = expected.key.as_str();
        // The version intake recorded, on a versioned source: what was written over it since
        // is not the backup (issue 29).
        let Some(out) = self.open_at(key, expected.version_id.as_deref()).await? else {
            return Err(CopyError::Missing {
                key: key.to_string(),
            });
        };
        let mut source = Source {
            body: out.body,
            key: key.to_string(),
            hasher: sha2::Sha256::new(),
            read: 0,
            carry: bytes::Bytes::new(),
        };
        let version_id = destination
            .upload_from(
                destination_key,
                &mut source,
                settings.part_size_for(expected.size),
                settings,
                storage_class,
                |source| source.check(expected),
            )
            .await?;
        Ok(ObjectDigest {
            key: destination_key.to_string(),
            size: source.read,
            sha256: expected.sha256.clone(),
            version_id,
        })
    }

    /// The prefix objects are kept under (`s3.prefix`, or a location's).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// The largest object one `CopyObject` copies; a larger one is copied in parts
/// (`UploadPartCopy`).
pub const MAX_COPY_OBJECT: u64 = 5 * 1024 * 1024 * 1024;

/// The part size of a multipart server-side copy.
const COPY_PART: u64 = 512 * 1024 * 1024;

impl ObjectStore {
    /// Moves the object at `key` (`size` bytes) to `storage_class` without its bytes leaving
    /// the store: a server-side copy onto itself with the new class (`CopyObject`, or
    /// `UploadPartCopy` parts of 512 MiB above 5 GiB). Its metadata and content type are read
    /// first and written again (`REPLACE`): a store may refuse a copy onto itself whose
    /// metadata directive is `COPY` (SeaweedFS does, whatever the class). The object is whole
    /// throughout: the store swaps it when the copy completes.
    pub async fn change_storage_class(
        &self,
        key: &str,
        size: u64,
        storage_class: &str,
    ) -> Result<(), ObjectError> {
        use aws_sdk_s3::types::{CompletedPart, MetadataDirective, StorageClass};
        let source = format!("{}/{}", self.bucket, copy_source_key(key));
        let class = StorageClass::from(storage_class);
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|err| super::object_error("head", key, err))?;
        let metadata = head.metadata().cloned();
        let content_type = head.content_type().map(str::to_string);
        if size <= MAX_COPY_OBJECT {
            self.client
                .copy_object()
                .bucket(&self.bucket)
                .key(key)
                .copy_source(&source)
                .metadata_directive(MetadataDirective::Replace)
                .set_metadata(metadata)
                .set_content_type(content_type)
                .storage_class(class)
                .send()
                .await
                .map_err(|err| super::object_error("copy", key, err))?;
            return Ok(());
        }
        let upload_id = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .set_metadata(metadata)
            .set_content_type(content_type)
            .storage_class(class)
            .send()
            .await
            .map_err(|err| super::object_error("create multipart upload", key, err))?
            .upload_id()
            .unwrap_or_default()
            .to_string();
        let mut parts = Vec::new();
        let mut failed = None;
        let mut start = 0;
        while start < size {
            let end = (start + COPY_PART).min(size) - 1;
            let number = parts.len() as i32 + 1;
            match self
                .client
                .upload_part_copy()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(&upload_id)
                .part_number(number)
                .copy_source(&source)
                .copy_source_range(format!("bytes={start}-{end}"))
                .send()
                .await
            {
                Ok(out) => parts.push(
                    CompletedPart::builder()
                        .part_number(number)
                        .set_e_tag(
                            out.copy_part_result()
                                .and_then(|r| r.e_tag().map(str::to_string)),
                        )
                        .build(),
                ),
                Err(err) => {
                    failed = Some(super::object_error("copy part", key, err));
                    break;
                }
            }
            start = end + 1;
        }
        let completed = match failed {
            Some(err) => Err(err),
            None => self.complete_upload(key, &upload_id, parts).await,
        };
        if completed.is_err() {
            // The object itself is untouched until the upload completes.
            self.abort_upload(key, &upload_id).await;
        }
        completed.map(|_| ())
    }

    /// The storage class the store reports for `key` (`None`: its default, which S3 leaves
    /// out of the answer, or no such object).
    pub async fn storage_class_of(&self, key: &str) -> Result<Option<String>, ObjectError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(out.storage_class().map(|class| class.as_str().to_string())),
            Err(err) => {
                let err = super::object_error("head", key, err);
                if err.code == "NotFound" || err.code == "NoSuchKey" {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }
}

/// A key as `x-amz-copy-source` wants it: each path segment percent-encoded, the `/`s kept.
fn copy_source_key(key: &str) -> String {
    key.split('/')
        .map(|segment| {
            segment
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod copy_source_tests {
    #[test]
    fn copy_sources_are_percent_encoded_per_segment() {
        assert_eq!(
            super::copy_source_key("dr/c1/s/b 1/meta+data.json"),
            "dr/c1/s/b%201/meta%2Bdata.json"
        );
        assert_eq!(super::copy_source_key("a/\u{e9}"), "a/%C3%A9");
    }
}
