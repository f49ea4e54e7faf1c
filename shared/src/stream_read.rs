//! The two reads every view of a key-value bucket is built from (the catalog's per cluster,
//! [`crate::catalog_view`]; the schedules', [`crate::schedules_view`]): a listing of the last
//! entry of every key, once, and then the changes stored after the newest entry applied.
//!
//! The listing goes through an ordered consumer: one consumer for a whole bucket or cluster,
//! read in bulk. The changes go through the stream's message-get API ("the first entry matching
//! the filter at or after sequence N"), answered by the stream's leader: one request per change
//! and one more that finds nothing, and no consumer. A view used many times between changes
//! costs one request per use (issue 32: an ordered consumer per use made the server create and
//! retire a consumer for every retention run and every deleter batch on every replica; under a
//! steady load they piled up to the account's consumer limit, and jobs waited out retries).
//!
//! The leader applied every write before it was acknowledged, so once it answers that nothing
//! follows, the view holds every write acknowledged before that answer. A listing answered by a
//! replica behind its leader misses the newest writes, but those come after every entry it
//! delivered, and the changes are read from just after its newest entry: a change already
//! listed is applied again, in stream order, which changes nothing.

use std::time::Duration;

use anyhow::Context as _;
use async_nats::jetstream::{
    consumer::{pull::OrderedConfig, Consumer, DeliverPolicy},
    kv,
    stream::{RawMessageErrorKind, Stream},
};
use futures::StreamExt as _;

/// How long a listing may wait for the next entry it knows is pending.
const STALL: Duration = Duration::from_secs(10);

/// An ordered consumer on `stream`, filtered on `filters`, from `deliver`: the one place
/// outside the channel table's durables ([`crate::channels::Durable::open`]) that makes a
/// consumer. Every read of a whole bucket, a key's history or the audit trail goes through
/// it. The guard deletes the consumer when dropped, so reads never pile consumers up to the
/// account's limit (issue 32).
pub async fn ordered(
    stream: &Stream,
    filters: Vec<String>,
    deliver: DeliverPolicy,
) -> anyhow::Result<(Consumer<OrderedConfig>, crate::nats::EphemeralConsumer)> {
    let mut config = OrderedConfig {
        deliver_policy: deliver,
        ..Default::default()
    };
    match <[String; 1]>::try_from(filters) {
        Ok([one]) => config.filter_subject = one,
        Err(many) => config.filter_subjects = many,
    }
    let consumer = stream
        .create_consumer(config)
        .await
        .map_err(|err| anyhow::anyhow!(err))?;
    let guard = crate::nats::EphemeralConsumer::new(stream, &consumer.cached_info().name);
    Ok((consumer, guard))
}

/// One stored entry of a bucket: a put, or a removal ([`crate::leader_read::is_removal`]).
pub struct Entry<'a> {
    /// The stream subject: the bucket's prefix and the key.
    pub subject: &'a str,
    pub headers: Option<&'a async_nats::HeaderMap>,
    pub payload: &'a [u8],
    /// The stream sequence: the entry's revision.
    pub sequence: u64,
}

impl Entry<'_> {
    pub fn is_removal(&self) -> bool {
        crate::leader_read::is_removal(self.headers)
    }

    /// Its subject's and payload's bytes.
    pub fn size(&self) -> u64 {
        (self.subject.len() + self.payload.len()) as u64
    }
}

/// Lists the last entry of every key matching `filter` (a stream subject: the bucket's prefix
/// and a key pattern) through an ordered consumer, handing each to `apply` in stream order, so
/// no second copy is ever held. Returns the newest sequence delivered (0: nothing). `what`
/// names the listing in errors. A listing that stalls fails instead of waiting for ever.
pub async fn list_last_per_key(
    store: &kv::Store,
    filter: &str,
    what: &str,
    apply: impl FnMut(Entry<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    read_ordered(
        &store.stream,
        vec![filter.to_string()],
        DeliverPolicy::LastPerSubject,
        what,
        apply,
    )
    .await
}

/// Reads what an ordered consumer on `stream`, filtered on `filters`, delivers from `deliver`
/// up to the newest message stored when it was made, handing each to `apply` in stream order.
/// Returns the newest sequence delivered (0: nothing). `what` names the read in errors. The
/// one read loop of every whole-stream read (listings, a key's history, the audit): one that
/// stalls fails instead of waiting for ever.
pub async fn read_ordered(
    stream: &Stream,
    filters: Vec<String>,
    deliver: DeliverPolicy,
    what: &str,
    mut apply: impl FnMut(Entry<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let (consumer, _delete) = ordered(stream, filters, deliver)
        .await
        .with_context(|| format!("reading {what}"))?;
    let mut pending = consumer.cached_info().num_pending;
    let mut newest = 0;
    if pending == 0 {
        return Ok(newest);
    }
    let mut messages = consumer
        .messages()
        .await
        .with_context(|| format!("reading {what}"))?;
    while pending > 0 {
        let message = tokio::time::timeout(STALL, messages.next())
            .await
            .map_err(|_| {
                anyhow::anyhow!("{what} stalled: nothing within {STALL:?} with {pending} pending")
            })?
            .with_context(|| format!("{what} ended early"))?
            .with_context(|| format!("reading {what}"))?;
        let info = message
            .info()
            .map_err(|err| anyhow::anyhow!("{what}: entry metadata: {err}"))?;
        pending = info.pending;
        newest = newest.max(info.stream_sequence);
        apply(Entry {
            subject: &message.subject,
            headers: message.headers.as_ref(),
            payload: &message.payload,
            sequence: info.stream_sequence,
        })?;
    }
    Ok(newest)
}

/// What [`read_changes`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// The first sequence not read: where the next catch-up starts.
    pub next_sequence: u64,
    /// Entries read and handed on.
    pub count: u64,
    /// Their subjects' and payloads' bytes.
    pub bytes: u64,
}

/// Reads every entry matching `filter` stored at or after sequence `from`, from the stream's
/// leader, one message-get request per entry, until it answers that nothing follows; hands each
/// to `apply` in stream order. Opens no consumer. A failed request (a leader election, a
/// timeout) fails the read: the caller retries rather than decide on an older view.
pub async fn read_changes(
    store: &kv::Store,
    filter: &str,
    from: u64,
    what: &str,
    mut apply: impl FnMut(Entry<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<Changes> {
    let mut changes = Changes {
        next_sequence: from.max(1),
        ..Changes::default()
    };
    loop {
        let asked = changes.next_sequence;
        let message = match store
            .stream
            .raw_message_builder()
            .sequence(asked)
            .next_by_subject(filter)
            .send()
            .await
        {
            Ok(message) => message,
            Err(err) if err.kind() == RawMessageErrorKind::NoMessageFound => return Ok(changes),
            Err(err) => return Err(err).with_context(|| format!("reading {what}")),
        };
        // The leader answers with the first entry at or after the sequence asked for; an
        // older one would be read again for ever.
        anyhow::ensure!(
            message.sequence >= asked,
            "reading {what}: asked for {filter} from sequence {asked}, the server answered \
             sequence {}",
            message.sequence
        );
        changes.next_sequence = message.sequence + 1;
        let entry = Entry {
            subject: &message.subject,
            headers: Some(&message.headers),
            payload: &message.payload,
            sequence: message.sequence,
        };
        changes.count += 1;
        changes.bytes += entry.size();
        apply(entry)?;
    }
}

/// The sequence of the newest entry matching `filter` (0: none), asked of the stream's leader,
/// which applied every acknowledged write. The server answers it from its per-subject index,
/// without the forward scan a [`read_changes`] costs (issue 32: the feed's freshness check).
pub async fn newest_sequence(store: &kv::Store, filter: &str, what: &str) -> anyhow::Result<u64> {
    match store
        .stream
        .raw_message_builder()
        .last_by_subject(filter)
        .send()
        .await
    {
        Ok(message) => Ok(message.sequence),
        Err(err) if err.kind() == RawMessageErrorKind::NoMessageFound => Ok(0),
        Err(err) => Err(err).with_context(|| format!("reading {what}")),
    }
}
