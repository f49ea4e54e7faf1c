//! The catalog's changes, pushed to a replica's views by one consumer instead of read back at
//! each use (issue 32, goal 2).
//!
//! A view's catch-up from the leader ([`crate::stream_read::read_changes`]) asks for "the first
//! entry of `<cluster>.*` at or after sequence N". nats-server answers that by scanning the
//! stream forward from N, entry by entry, so a catch-up costs the server every entry stored
//! since the cluster's last use, whichever cluster wrote it: with 2,000 clusters at 60
//! completions/s that is some 10,000 entries per use, and the scans took 41% of nats-server's CPU
//! and held up every other JetStream API request behind them (profiled in
//! docs/decisions/0005-views-fed-by-one-consumer.md).
//!
//! The feed is one ordered consumer per view whose filters are the clusters the view holds
//! (`$KV.sexton-catalog.<cluster>.*`, one each): the server hands it each entry of those
//! clusters as it is stored, and a view's use then costs one request, the cluster's newest
//! revision asked of the leader ([`crate::stream_read::newest_sequence`]), which the server
//! answers from its per-subject index. The use applies what the feed brought up to that
//! revision; the freshness promise is the leader's, as before.
//!
//! The feed is an optimisation only: a cluster it does not cover (new to the view, dropped for
//! overflow, or after the consumer failed) and a feed that has not delivered the newest revision
//! within [`PATIENCE`] are read from the leader as before. What it hands over is exactly what
//! the stream stored for the cluster, in stream order and without gaps (an ordered consumer), from
//! the sequence at which the cluster was first in its filters.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{consumer::DeliverPolicy, kv};
use bytes::Bytes;
use futures::StreamExt as _;
use tokio::sync::{watch, Notify};

use crate::names::ClusterName;

/// How long a use waits for the feed to bring the cluster's newest revision before it reads
/// from the leader instead. The feed is normally a round trip behind the leader.
pub const PATIENCE: Duration = Duration::from_secs(2);

/// Entries held for one cluster until its view's next use; a cluster whose view is not used
/// (its partition went to another replica) stops being fed past this.
const PENDING_PER_CLUSTER: usize = 64;

/// Bytes of entries held for all clusters together.
const PENDING_BYTES: usize = 16 << 20;

/// Past this many clusters the consumer asks for the whole catalog and drops what is not
/// wanted: one filter per cluster would make its definition larger than a NATS message may be.
const MAX_FILTERS: usize = 4096;

/// How long new clusters are gathered before the consumer is made again with them.
const GATHER: Duration = Duration::from_millis(250);

/// One stored entry, owned.
pub struct FedEntry {
    pub subject: String,
    pub headers: Option<async_nats::HeaderMap>,
    pub payload: Bytes,
    pub sequence: u64,
}

impl FedEntry {
    fn bytes(&self) -> usize {
        self.subject.len() + self.payload.len()
    }

    pub fn entry(&self) -> crate::stream_read::Entry<'_> {
        crate::stream_read::Entry {
            subject: &self.subject,
            headers: self.headers.as_ref(),
            payload: &self.payload,
            sequence: self.sequence,
        }
    }
}

#[derive(Default)]
struct State {
    /// Clusters the consumer should ask for.
    wanted: BTreeSet<ClusterName>,
    /// Clusters the running consumer asks for, each with the first stream sequence from which
    /// every entry of it is delivered.
    covered: HashMap<ClusterName, u64>,
    /// Entries delivered and not yet taken, per covered cluster, in stream order.
    pending: HashMap<ClusterName, Vec<FedEntry>>,
    pending_bytes: usize,
    /// Where the next consumer starts so that nothing covered is skipped: just after the last
    /// entry delivered, or where the last consumer started (0: not started, or reset).
    next_start: u64,
}

impl State {
    fn covers(&self, cluster: &ClusterName, from: u64) -> bool {
        self.covered
            .get(cluster)
            .is_some_and(|&start| start <= from)
    }

    fn uncover(&mut self, cluster: &ClusterName) {
        self.covered.remove(cluster);
        if let Some(dropped) = self.pending.remove(cluster) {
            self.pending_bytes -= dropped.iter().map(FedEntry::bytes).sum::<usize>();
        }
    }

    /// Covers nothing and holds nothing (the clusters wanted stay wanted).
    fn uncover_all(&mut self) {
        self.covered.clear();
        self.pending.clear();
        self.pending_bytes = 0;
    }

    fn reset(&mut self) {
        self.uncover_all();
        self.next_start = 0;
    }
}

struct Shared {
    store: kv::Store,
    state: Mutex<State>,
    /// Wakes the task when a cluster is wanted that the consumer does not ask for.
    grown: Notify,
    /// The newest stream sequence any of the feed's consumers delivered, for uses waiting on
    /// it. A use that sees it pass a revision still takes entries only from a consumer that
    /// covers its cluster.
    delivered: watch::Sender<u64>,
}

/// A view's feed. Dropping it stops its consumer.
pub struct Feed {
    shared: Arc<Shared>,
    max_filters: usize,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().expect("feed task").take() {
            task.abort();
        }
    }
}

/// What [`Feed::take`] found.
pub enum Taken {
    /// The feed does not hold every entry of the cluster from the sequence asked for.
    NotCovered,
    /// Every entry delivered from that sequence on, in stream order.
    Entries(Vec<FedEntry>),
}

impl Feed {
    pub fn new(store: kv::Store) -> Feed {
        Self::with_filter_limit(store, MAX_FILTERS)
    }

    /// [`Feed::new`], asking for the whole catalog past `max_filters` clusters (tests use a
    /// small limit to cover that way too).
    pub fn with_filter_limit(store: kv::Store, max_filters: usize) -> Feed {
        Feed {
            max_filters,
            shared: Arc::new(Shared {
                store,
                state: Mutex::default(),
                grown: Notify::new(),
                delivered: watch::Sender::new(0),
            }),
            task: Mutex::new(None),
        }
    }

    /// Asks the feed to carry `cluster`'s changes (the view holds it now). Starts the
    /// consumer's task on first use (it needs a runtime).
    pub fn want(&self, cluster: &ClusterName) {
        let grew = {
            let mut state = self.shared.state.lock().expect("feed state");
            state.wanted.insert(cluster.clone()) && !state.covered.contains_key(cluster)
        };
        let mut task = self.task.lock().expect("feed task");
        if task.is_none() {
            *task = Some(tokio::spawn(run(self.shared.clone(), self.max_filters)));
        }
        if grew {
            self.shared.grown.notify_one();
        }
    }

    /// Stops carrying `cluster` (its view was dropped).
    pub fn forget(&self, cluster: &ClusterName) {
        let mut state = self.shared.state.lock().expect("feed state");
        state.wanted.remove(cluster);
        state.uncover(cluster);
    }

    /// Stops carrying every cluster.
    pub fn forget_all(&self) {
        let mut state = self.shared.state.lock().expect("feed state");
        state.wanted.clear();
        state.uncover_all();
    }

    /// Whether the feed holds every entry of `cluster` stored from stream sequence `from` on
    /// that it has delivered.
    pub fn covers(&self, cluster: &ClusterName, from: u64) -> bool {
        self.shared
            .state
            .lock()
            .expect("feed state")
            .covers(cluster, from)
    }

    /// The entries of `cluster` delivered from stream sequence `from` on, taken out of the
    /// feed; [`Taken::NotCovered`] when the feed cannot vouch for every one of them.
    pub fn take(&self, cluster: &ClusterName, from: u64) -> Taken {
        let mut state = self.shared.state.lock().expect("feed state");
        if !state.covers(cluster, from) {
            return Taken::NotCovered;
        }
        let entries = state.pending.remove(cluster).unwrap_or_default();
        state.pending_bytes -= entries.iter().map(FedEntry::bytes).sum::<usize>();
        Taken::Entries(
            entries
                .into_iter()
                .filter(|entry| entry.sequence >= from)
                .collect(),
        )
    }

    /// Waits until the feed has delivered stream sequence `sequence` (or later), for at most
    /// `patience`; false when it has not.
    pub async fn wait_delivered(&self, sequence: u64, patience: Duration) -> bool {
        let mut delivered = self.shared.delivered.subscribe();
        tokio::time::timeout(patience, delivered.wait_for(|&at| at >= sequence))
            .await
            .is_ok_and(|waited| waited.is_ok())
    }
}

/// The consumer's task: made with the wanted clusters' filters, made again when more are
/// wanted, and after a failure (then nothing is vouched for until it runs again).
async fn run(shared: Arc<Shared>, max_filters: usize) {
    loop {
        let (asked, start) = {
            let state = shared.state.lock().expect("feed state");
            let asked: Vec<ClusterName> = state.wanted.iter().cloned().collect();
            (asked, state.next_start)
        };
        let filters: Vec<String> = if asked.len() > max_filters {
            vec![format!("{}>", shared.store.prefix)]
        } else {
            asked
                .iter()
                .map(|cluster| format!("{}{cluster}.*", shared.store.prefix))
                .collect()
        };
        if filters.is_empty() {
            shared.grown.notified().await;
            continue;
        }
        let start = if start > 0 {
            start
        } else {
            match first_unstored(&shared.store).await {
                Ok(start) => start,
                Err(err) => {
                    tracing::warn!(
                        error = format!("{err:#}"),
                        "the catalog feed cannot start; views read from the leader meanwhile"
                    );
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
        };
        if let Err(err) = feed(&shared, &asked, filters, start).await {
            tracing::warn!(
                error = format!("{err:#}"),
                "the catalog feed stopped; views read from the leader until it runs again"
            );
            shared.state.lock().expect("feed state").reset();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// The sequence the stream will give its next entry.
async fn first_unstored(store: &kv::Store) -> anyhow::Result<u64> {
    let mut stream = store.stream.clone();
    Ok(stream.info().await?.state.last_sequence + 1)
}

/// Runs one consumer, filtered on the `asked` clusters (`filters`), until more clusters are
/// wanted (Ok) or it fails (Err).
async fn feed(
    shared: &Shared,
    asked: &[ClusterName],
    filters: Vec<String>,
    start: u64,
) -> anyhow::Result<()> {
    let (consumer, _delete) = crate::stream_read::ordered(
        &shared.store.stream,
        filters,
        DeliverPolicy::ByStartSequence {
            start_sequence: start,
        },
    )
    .await?;
    {
        // Only the clusters this consumer asks for are covered: one wanted while it was being
        // made is covered by the next one. Those asked for before keep the sequence they are
        // covered from: this consumer starts just after the last entry the previous one
        // delivered.
        let asked: BTreeSet<&ClusterName> = asked.iter().collect();
        let mut state = shared.state.lock().expect("feed state");
        let State {
            wanted,
            covered,
            next_start,
            ..
        } = &mut *state;
        *next_start = start;
        covered.retain(|cluster, _| asked.contains(cluster));
        for &cluster in &asked {
            if wanted.contains(cluster) {
                covered.entry(cluster.clone()).or_insert(start);
            }
        }
    }
    let mut messages = consumer.messages().await?;
    loop {
        tokio::select! {
            next = messages.next() => {
                let message = match next {
                    Some(Ok(message)) => message,
                    Some(Err(err)) => return Err(err.into()),
                    None => anyhow::bail!("the consumer ended"),
                };
                let sequence = message
                    .info()
                    .map_err(|err| anyhow::anyhow!("entry metadata: {err}"))?
                    .stream_sequence;
                deliver(shared, message, sequence);
            }
            _ = shared.grown.notified() => {
                // Gather what else is wanted, then ask for all of it.
                tokio::time::sleep(GATHER).await;
                return Ok(());
            }
        }
    }
}

fn deliver(shared: &Shared, message: async_nats::jetstream::Message, sequence: u64) {
    let cluster = message
        .subject
        .strip_prefix(shared.store.prefix.as_str())
        .and_then(|key| key.split_once('.'))
        .and_then(|(cluster, _)| ClusterName::new(cluster).ok());
    let mut state = shared.state.lock().expect("feed state");
    if let Some(cluster) = cluster.filter(|cluster| state.covered.contains_key(cluster)) {
        let held = state.pending.get(&cluster).map_or(0, Vec::len);
        let bytes = message.subject.len() + message.payload.len();
        if held >= PENDING_PER_CLUSTER || state.pending_bytes + bytes > PENDING_BYTES {
            // Not used for a while: read from the leader at its next use, if it has one.
            state.wanted.remove(&cluster);
            state.uncover(&cluster);
        } else {
            let message = message.message;
            state.pending.entry(cluster).or_default().push(FedEntry {
                subject: message.subject.to_string(),
                headers: message.headers,
                payload: message.payload,
                sequence,
            });
            state.pending_bytes += bytes;
        }
    }
    state.next_start = state.next_start.max(sequence + 1);
    drop(state);
    shared.delivered.send_if_modified(|delivered| {
        let newer = sequence > *delivered;
        *delivered = (*delivered).max(sequence);
        newer
    });
}
