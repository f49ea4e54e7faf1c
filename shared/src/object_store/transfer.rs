//! Streaming transfers between local files of any size and objects. Uploads compute the
//! file's SHA-256 on the way: what an executor does with a backup tool's output (`sexton
//! exec`) and a log shipper with a binlog file (`sexton binlog append`). Downloads write an
//! object to a file as it arrives (the inputs of a merge).
//!
//! A file is read in parts of [`UploadSettings::part_size`] bytes; a file that fits in one part
//! is one `PutObject`, a larger one a multipart upload with at most
//! [`UploadSettings::concurrency`] parts in memory at once, counting the one being read. So
//! memory is bounded by `part_size × concurrency` whatever the file's size, and the file is
//! read once: the digest is updated as each part is read, before it is sent. A failed multipart
//! upload is aborted, so no half-written object or stray parts stay behind.

use std::{io::Read, sync::Arc};

use bytes::{Bytes, BytesMut};

use aws_sdk_s3::{
    primitives::ByteStream,
    types::{CompletedMultipartUpload, CompletedPart, StorageClass},
};
use sha2::Digest as _;
use tokio::{sync::Semaphore, task::JoinSet};

use super::{body_error, object_error, ObjectError, ObjectStore};
use crate::wire::ObjectDigest;

/// S3's smallest part (every part but the last) and its largest.
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
pub const MAX_PART_SIZE: u64 = 5 * 1024 * 1024 * 1024;
/// S3's most parts in one multipart upload.
pub const MAX_PARTS: u64 = 10_000;

/// How a file is cut and sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadSettings {
    /// Bytes per part, [`MIN_PART_SIZE`] to [`MAX_PART_SIZE`]. Raised for a file that would
    /// otherwise need more than [`MAX_PARTS`] parts.
    pub part_size: u64,
    /// Parts in memory at once (being read or being sent), at least 1.
    pub concurrency: usize,
}

impl Default for UploadSettings {
    /// 8 MiB parts, 4 at once: awscli's part size, at most 32 MiB of buffers.
    fn default() -> Self {
        UploadSettings {
            part_size: 8 * 1024 * 1024,
            concurrency: 4,
        }
    }
}

impl UploadSettings {
    /// Checks the bounds; the message names what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(MIN_PART_SIZE..=MAX_PART_SIZE).contains(&self.part_size) {
            return Err(format!(
                "part size {} is outside S3's {MIN_PART_SIZE} to {MAX_PART_SIZE} bytes",
                self.part_size
            ));
        }
        if !(1..=64).contains(&self.concurrency) {
            return Err(format!(
                "upload concurrency {} is outside 1 to 64",
                self.concurrency
            ));
        }
        Ok(())
    }

    /// The part size for a file of `size` bytes: the configured one, or the smallest whole
    /// number of MiB that keeps the file within [`MAX_PARTS`] parts.
    pub fn part_size_for(&self, size: u64) -> u64 {
        const MIB: u64 = 1024 * 1024;
        let needed = size.div_ceil(MAX_PARTS).div_ceil(MIB) * MIB;
        self.part_size.max(needed).min(MAX_PART_SIZE)
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum TransferError {
    /// The local file could not be read or written: retrying cannot help.
    #[error("local file {path}: {message}")]
    Local { path: String, message: String },
    /// The file grew past what one multipart upload can hold at this part size.
    #[error(
        "{key}: more than {MAX_PARTS} parts of {part_size} bytes; the file grew while it was read"
    )]
    TooManyParts { key: String, part_size: u64 },
    #[error(transparent)]
    Object(#[from] ObjectError),
}

impl TransferError {
    /// Whether trying again later may help (a store that did not answer, a throttled request).
    pub fn is_retryable(&self) -> bool {
        match self {
            TransferError::Object(err) => !err.permanent,
            TransferError::Local { .. } | TransferError::TooManyParts { .. } => false,
        }
    }
}

/// The reading side: a file, the digest so far, and how many bytes were read.
struct Reader {
    file: std::fs::File,
    path: String,
    hasher: sha2::Sha256,
    read: u64,
}

impl Reader {
    /// Reads up to `size` bytes into `part` (fewer only at the end of the file) and adds them
    /// to the digest.
    fn next_part(
        mut self,
        mut part: BytesMut,
        size: usize,
    ) -> Result<(Reader, BytesMut), TransferError> {
        part.clear();
        part.resize(size, 0);
        let mut filled = 0;
        while filled < size {
            match self.file.read(&mut part[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    return Err(TransferError::Local {
                        path: self.path.clone(),
                        message: err.to_string(),
                    })
                }
            }
        }
        part.truncate(filled);
        self.hasher.update(&part);
        self.read += filled as u64;
        Ok((self, part))
    }
}

/// The part buffers of one upload, used again and again: allocating and freeing a part-sized
/// buffer per part made glibc keep freed buffers in its heap (its mmap threshold rises to the
/// size of a freed buffer), which cost about 16 MiB of resident memory on top of the parts in
/// flight.
struct Buffers {
    free: std::sync::Mutex<Vec<BytesMut>>,
    size: usize,
}

impl Buffers {
    fn take(&self) -> BytesMut {
        self.free
            .lock()
            .expect("the buffer pool's lock is never poisoned")
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(self.size))
    }

    /// Takes a sent part's buffer back, if the client kept no reference to it.
    fn give(&self, sent: Bytes) {
        if let Ok(buffer) = sent.try_into_mut() {
            self.free
                .lock()
                .expect("the buffer pool's lock is never poisoned")
                .push(buffer);
        }
    }
}

/// Where an upload's parts come from: a local file ([`ObjectStore::put_file`]) or another
/// object's body (`copy::copy_object_to`). A source adds each part to its digest as it reads it.
pub(super) trait PartSource: Send {
    type Error: From<ObjectError> + Send;
    /// Fills `part` with up to `size` bytes, fewer only at the end (none: nothing is left).
    async fn next_part(&mut self, part: BytesMut, size: usize) -> Result<BytesMut, Self::Error>;
    /// The error of a source longer than one multipart upload holds.
    fn too_many_parts(&self, key: &str, part_size: u64) -> Self::Error;
}

/// A file as a [`PartSource`]: each part is read on the blocking pool.
struct FileParts(Option<Reader>);

impl PartSource for FileParts {
    type Error = TransferError;

    async fn next_part(&mut self, part: BytesMut, size: usize) -> Result<BytesMut, TransferError> {
        let reader = self.0.take().expect("a file is read one part at a time");
        let (reader, part) = tokio::task::spawn_blocking(move || reader.next_part(part, size))
            .await
            .expect("reading a part never panics")?;
        self.0 = Some(reader);
        Ok(part)
    }

    fn too_many_parts(&self, key: &str, part_size: u64) -> TransferError {
        TransferError::TooManyParts {
            key: key.to_string(),
            part_size,
        }
    }
}

impl ObjectStore {
    /// Uploads an open file to `key`, reading it once from its current position to its end,
    /// and returns the key, the bytes read and their SHA-256. `size_hint` (the size the caller
    /// saw) only chooses the part size; the digest's `size` is what was actually read, so a
    /// caller that must upload exactly what it saw compares the two.
    pub async fn put_file(
        &self,
        key: &str,
        file: std::fs::File,
        path: &str,
        size_hint: u64,
        settings: UploadSettings,
    ) -> Result<ObjectDigest, TransferError> {
        let mut source = FileParts(Some(Reader {
            file,
            path: path.to_string(),
            hasher: sha2::Sha256::new(),
            read: 0,
        }));
        self.upload_from(
            key,
            &mut source,
            settings.part_size_for(size_hint),
            settings,
            None,
            |_| Ok(()),
        )
        .await?;
        let reader = source
            .0
            .expect("the file's reader is back after the upload");
        Ok(finish(key, reader))
    }

    /// Writes `source` at `key`: one `PutObject` when it fits in one part, else a multipart
    /// upload with at most `settings.concurrency` parts in memory at once (counting the one
    /// being read), so memory is bounded by `part_size × concurrency` whatever the size.
    /// `check` judges the whole source once it is read: before the `PutObject`, or before the
    /// multipart upload is completed; its error leaves nothing at `key`. A failed multipart
    /// upload is aborted, so no half-written object or stray parts stay behind.
    pub(super) async fn upload_from<S: PartSource>(
        &self,
        key: &str,
        source: &mut S,
        part_size: u64,
        settings: UploadSettings,
        storage_class: Option<&str>,
        check: impl FnOnce(&mut S) -> Result<(), S::Error> + Send,
    ) -> Result<Option<String>, S::Error> {
        let class = storage_class.map(StorageClass::from);
        let buffers = Arc::new(Buffers {
            free: Default::default(),
            size: part_size as usize,
        });
        let first = source.next_part(buffers.take(), part_size as usize).await?;
        if (first.len() as u64) < part_size {
            // The whole source in one part: judged before a byte is written.
            check(source)?;
            let out = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .content_length(first.len() as i64)
                .set_storage_class(class)
                .body(ByteStream::from(first.freeze()))
                .send()
                .await
                .map_err(|err| object_error("put", key, err))?;
            return Ok(out.version_id().map(str::to_string));
        }
        let upload_id = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .set_storage_class(class)
            .send()
            .await
            .map_err(|err| object_error("create multipart upload", key, err))?
            .upload_id()
            .unwrap_or_default()
            .to_string();
        let sent = match self
            .upload_parts(key, &upload_id, source, first, &buffers, settings)
            .await
        {
            Ok(parts) => check(source).map(|()| parts),
            Err(err) => Err(err),
        };
        match sent {
            Ok(parts) => Ok(self.complete_upload(key, &upload_id, parts).await?),
            Err(err) => {
                self.abort_upload(key, &upload_id).await;
                Err(err)
            }
        }
    }

    /// Completes multipart upload `upload_id` of `key` with `parts`; returns the version it
    /// made, on a versioned bucket.
    pub(super) async fn complete_upload(
        &self,
        key: &str,
        upload_id: &str,
        parts: Vec<aws_sdk_s3::types::CompletedPart>,
    ) -> Result<Option<String>, ObjectError> {
        let out = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|err| object_error("complete multipart upload", key, err))?;
        Ok(out.version_id().map(str::to_string))
    }

    /// Aborts multipart upload `upload_id` of `key`, best effort: a store that kept the parts
    /// charges for them until aborted (a bucket lifecycle rule reaps what is left).
    pub(super) async fn abort_upload(&self, key: &str, upload_id: &str) {
        if let Err(abort) = self
            .client
            .abort_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .send()
            .await
        {
            tracing::warn!(key, error = %object_error("abort multipart upload", key, abort), "multipart upload not aborted");
        }
    }

    /// Sends `first` and every further part of `source` (parts of `buffers.size` bytes) as
    /// parts of `upload_id`, at most `settings.concurrency` in memory at once, and returns the
    /// parts in order.
    async fn upload_parts<S: PartSource>(
        &self,
        key: &str,
        upload_id: &str,
        source: &mut S,
        first: BytesMut,
        buffers: &Arc<Buffers>,
        settings: UploadSettings,
    ) -> Result<Vec<CompletedPart>, S::Error> {
        let part_size = buffers.size as u64;
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
        // A permit stands for one part's buffer, from before it is read until it is sent.
        let mut permit = acquire().await;
        let mut number: u64 = 0;
        loop {
            number += 1;
            if number > MAX_PARTS {
                return Err(source.too_many_parts(key, part_size));
            }
            let last = (part.len() as u64) < part_size;
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
            // A part that failed ends the upload at once: it is lost anyway.
            while let Some(done) = sending.try_join_next() {
                parts.push(done.expect("an upload task never panics")?);
            }
            if last {
                break;
            }
            permit = acquire().await;
            let next = source.next_part(buffers.take(), part_size as usize).await?;
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
}

fn finish(key: &str, reader: Reader) -> ObjectDigest {
    ObjectDigest {
        key: key.to_string(),
        size: reader.read,
        sha256: Some(crate::digest::hex(&reader.hasher.finalize())),
        version_id: None,
    }
}

impl ObjectStore {
    /// Writes the object at `key` to a new file at `path` as it arrives, never holding more
    /// than a network buffer. `Ok(None)` if the object does not exist (no file is created).
    pub async fn get_to_file(
        &self,
        key: &str,
        path: &std::path::Path,
    ) -> Result<Option<u64>, TransferError> {
        self.get_to_file_at(key, None, path).await
    }

    /// [`ObjectStore::get_to_file`] of that very `version` when one is given (issue 29).
    pub async fn get_to_file_at(
        &self,
        key: &str,
        version: Option<&str>,
        path: &std::path::Path,
    ) -> Result<Option<u64>, TransferError> {
        let Some(out) = self.open_at(key, version).await? else {
            return Ok(None);
        };
        let local = |err: std::io::Error| TransferError::Local {
            path: path.display().to_string(),
            message: err.to_string(),
        };
        let mut file = tokio::fs::File::create(path).await.map_err(local)?;
        let mut body = out.body.into_async_read();
        let written = tokio::io::copy(&mut body, &mut file)
            .await
            .map_err(|err| body_error(key, err))?;
        tokio::io::AsyncWriteExt::flush(&mut file)
            .await
            .map_err(local)?;
        Ok(Some(written))
    }
}
