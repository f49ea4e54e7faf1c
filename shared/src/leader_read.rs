//! Key-value reads answered by the bucket stream's leader, so a read sees every acknowledged
//! write.
//!
//! async-nats reads a key with a *direct get* when the bucket's stream allows it (every bucket
//! it creates does). On a replicated stream any replica answers a direct get, including one that
//! has not applied the latest writes yet: measured on a three-node nats-server 2.15 cluster
//! under load, 9 of 300 reads made right after an acknowledged update returned the previous
//! revision (tests/tests/fault_catalog_reads.rs). The deleter decides from one catalog read
//! whether a job may run, is already done, or must be refused, so a stale answer loses a job.
//! The stream's message-get API is answered by the leader, which applied a write before it was
//! acknowledged. It costs one JetStream API request, like the direct get; during a leader
//! election it fails instead of answering from an old copy, and callers retry.
//!
//! Changing the buckets' `allow_direct` instead would need stream-edit rights that the
//! least-privilege users (deploy/nats/authorization.conf) rightly do not have.

use anyhow::Context as _;
use async_nats::jetstream::{
    kv::{self, Operation},
    stream::LastRawMessageErrorKind,
};
use bytes::Bytes;

/// The last operation on a key, as the stream's leader has it.
#[derive(Debug, Clone)]
pub struct LeaderEntry {
    pub value: Bytes,
    pub revision: u64,
    pub operation: Operation,
}

/// The latest entry of `key`, or `None` when the key was never written (or its history aged
/// out). A delete or purge marker is returned as an entry with that operation.
pub async fn latest(store: &kv::Store, key: &str) -> anyhow::Result<Option<LeaderEntry>> {
    let subject = format!("{}{}", store.prefix, key);
    let message = match store.stream.get_last_raw_message_by_subject(&subject).await {
        Ok(message) => message,
        Err(err) if err.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
        Err(err) => {
            return Err(err).with_context(|| format!("reading {key} from bucket {}", store.name))
        }
    };
    let operation = operation(&message.headers)
        .with_context(|| format!("entry {key} of bucket {}", store.name))?;
    Ok(Some(LeaderEntry {
        value: message.payload,
        revision: message.sequence,
        operation,
    }))
}

/// The value of `key`, or `None` when it was never written or its last operation removed it
/// (the leader's answer to what `kv::Store::get` asks a replica).
pub async fn value(store: &kv::Store, key: &str) -> anyhow::Result<Option<Bytes>> {
    Ok(latest(store, key)
        .await?
        .filter(|entry| entry.operation == Operation::Put)
        .map(|entry| entry.value))
}

/// Whether a message read from a bucket's stream (a listing, a watch, a catch-up) removes its
/// key rather than writing it: a delete or purge marker, or the server's removal marker.
pub fn is_removal(headers: Option<&async_nats::HeaderMap>) -> bool {
    headers.is_some_and(|headers| {
        headers.get("KV-Operation").is_some() || headers.get("Nats-Marker-Reason").is_some()
    })
}

/// The key-value operation a stream message carries (its `KV-Operation` header, or the server's
/// marker for a removal by age or purge), as async-nats reads it.
fn operation(headers: &async_nats::HeaderMap) -> anyhow::Result<Operation> {
    if let Some(op) = headers.get("KV-Operation") {
        return op
            .as_str()
            .parse()
            .map_err(|_| anyhow::anyhow!("unknown KV-Operation {:?}", op.as_str()));
    }
    if let Some(reason) = headers.get("Nats-Marker-Reason") {
        return match reason.as_str() {
            "MaxAge" | "Purge" => Ok(Operation::Purge),
            "Remove" => Ok(Operation::Delete),
            other => anyhow::bail!("unknown marker reason {other:?}"),
        };
    }
    Ok(Operation::Put)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_read_from_the_headers_as_async_nats_writes_them() {
        let mut headers = async_nats::HeaderMap::new();
        assert!(matches!(operation(&headers).unwrap(), Operation::Put));
        headers.insert("KV-Operation", "DEL");
        assert!(matches!(operation(&headers).unwrap(), Operation::Delete));
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("KV-Operation", "PURGE");
        assert!(matches!(operation(&headers).unwrap(), Operation::Purge));
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Marker-Reason", "Remove");
        assert!(matches!(operation(&headers).unwrap(), Operation::Delete));
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("KV-Operation", "SHRUG");
        assert!(
            operation(&headers).is_err(),
            "an unknown operation is an error, not a put"
        );
    }
}
