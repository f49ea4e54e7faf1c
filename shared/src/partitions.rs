//! A service's work cut into partitions, each worked on by one replica at a time (issue 32).
//!
//! The stream puts every message of one cluster in one partition (a subject transform, see
//! `topology::retention_transform`), and each partition has a durable consumer of its own.
//! Which replica reads which partition is decided here, with leases in the KV bucket
//! `sexton-partitions` and nothing else:
//!
//! - `<service>.members`: the live replicas, each with the moment its claim to be alive ends.
//!   Every replica renews its own line every [`TICK`] (compare-and-set on the entry).
//! - `<service>.p<k>`: which replica holds partition `k`, until when. Its holder renews it every
//!   [`TICK`]; it lapses [`TTL`] after the last renewal.
//!
//! Each tick a replica counts the live replicas `n`, and holds `⌈partitions / n⌉` partitions at
//! most: it takes free ones up to that share and lets go of those beyond it, preferring
//! partitions by a hash of its name (unique per process) and the partition's number, so
//! replicas go for different ones. A replica
//! lets go of a partition by stopping its consumer, waiting for the message in hand, and only
//! then deleting the lease: the next holder never reads the partition while the last one still
//! works on it. A replica that is killed keeps nothing: its leases lapse after [`TTL`], the
//! next tick of another replica takes them, and the messages it had in hand come back after
//! the consumer's ack wait, so a partition is taken over within the ack wait (60 s for the
//! retention-worker) when `TTL + TICK` is shorter.
//!
//! A lease, like every value read from NATS, is a claim: one whose end lies further away than
//! [`TTL`] (a forged entry, a clock far ahead) counts as free, and an entry that does not
//! decode counts as nothing. That keeps a bad entry from stopping a partition for longer than
//! a lease lasts. The members' entry is a claim too, and no replica can check another's line:
//! lines of replicas that do not exist (forged, or renewed by a process that no longer works)
//! shrink every share, and the partitions beyond the real replicas' shares would go unread. So
//! a partition a replica sees free at [`OVERDUE_AFTER`] of its ticks in a row, while no
//! replica at work has room for it ([`overdue`]), is taken whatever the share
//! ([`Moves::rescue`]), and kept for [`RESCUE_KEPT`] before the share may ask for it back:
//! a forged line slows a partition down (it is let go of and taken again about once
//! every [`RESCUE_KEPT`]), it never stops it. What a lease cannot do is make two replicas'
//! work impossible: a replica cut off from NATS for longer than [`TTL`] still finishes the
//! message in hand after another took its partition over. The work itself stays safe by
//! compare-and-set, as it was when any replica took any message; the lease only makes it rare.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::shutdown::{Shutdown, ShutdownTrigger};

/// How long a lease or a member's line lasts unless renewed.
pub const TTL: Duration = Duration::from_secs(15);

/// How often a replica renews its leases and its line, and looks for partitions to take.
pub const TICK: Duration = Duration::from_secs(5);

/// At how many of its ticks in a row a replica must see a partition free, while no other
/// replica at work has room for it, before it takes it beyond its share ([`overdue`]).
pub const OVERDUE_AFTER: u32 = 2;

/// At how many of its ticks in a row a replica takes a free partition beyond its share even
/// though another replica at work seems to have room for it: that one has let it lie for a
/// minute, whatever the reason.
pub const STARVED_AFTER: u32 = 12;

/// How long a partition taken beyond the share (rescued) is kept before the share may ask
/// for it back, unless a replica at work has room for it ([`room_elsewhere`]).
pub const RESCUE_KEPT: Duration = Duration::from_secs(60);

/// One lease's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Held {
    holder: String,
    until: DateTime<Utc>,
}

/// The members' entry: each live replica and when its claim ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Members {
    members: BTreeMap<String, DateTime<Utc>>,
}

/// Whether a claim that ends at `until` stands at `now`: not over, and not reaching further
/// than a lease is ever taken for, give or take [`SKEW`].
fn stands(until: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    until > now && until <= now + ttl() + chrono::TimeDelta::from_std(SKEW).expect("seconds")
}

/// How far ahead of this replica's clock another's may run before its claims count as
/// forged. Without it a renewal written a moment after this replica read the clock looked
/// like a lease reaching beyond [`TTL`], and a partition its holder had just renewed was taken
/// from it (two replicas on one partition until the holder's next tick: the forged-members
/// test in tests/tests/partitions.rs saw it).
const SKEW: Duration = Duration::from_secs(5);

fn ttl() -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(TTL).expect("seconds")
}

/// A partition's standing, as one replica sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Nobody holds it.
    Free,
    /// This replica holds it.
    Mine,
    /// Another replica holds it.
    Theirs,
}

/// What a replica does this tick. Pure output of [`moves`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Moves {
    /// Free partitions to take, within its share.
    pub take: Vec<u16>,
    /// Free partitions to take beyond its share: nobody took them for [`OVERDUE_AFTER`] ticks.
    pub rescue: Vec<u16>,
    /// Partitions of its own to let go of (beyond its share).
    pub release: Vec<u16>,
}

/// A replica's share of `partitions` among `replicas` live ones: ⌈partitions / replicas⌉.
pub fn share(partitions: usize, replicas: usize) -> usize {
    partitions.div_ceil(replicas.max(1))
}

/// The free partitions a replica may take beyond its share, from the ticks in a row at which it
/// saw each free (`free_for`) and whether another replica at work has room
/// ([`room_elsewhere`]). Pure.
///
/// While some replica at work holds fewer than its share, it takes a free partition at its
/// next tick, so none is overdue before [`STARVED_AFTER`] ticks. Counting ticks alone was not
/// enough: replicas started together tick in step, and one that let go of a partition (seeing
/// it free in that very tick) saw it free again at its next tick, a moment before the others'
/// next ticks, whose reads had come just before the lease went. It took the partition back
/// beyond its share and kept it for [`RESCUE_KEPT`], and the replica with room lost the race
/// to take it: `fault_partition_takeover` found the partitions settled a minute late, or not
/// within its 90 s, and the services' logs showed the rescue. Forged lines in the members'
/// entry still cannot keep a partition unread: the real replicas then all hold their (small)
/// shares, and nobody at work has room. A replica that holds nothing yet shows no room either;
/// what is rescued before it takes its first partition is kept only until it has
/// ([`room_elsewhere`], in the tick), then let go of by the share.
pub fn overdue(free_for: &BTreeMap<u16, u32>, room_elsewhere: bool) -> BTreeSet<u16> {
    free_for
        .iter()
        .filter(|(_, ticks)| {
            **ticks >= STARVED_AFTER || (**ticks >= OVERDUE_AFTER && !room_elsewhere)
        })
        .map(|(partition, _)| *partition)
        .collect()
}

/// Whether another replica at work (`others`: holders of standing leases, with how many each
/// holds; a line in the members' entry alone proves no work) holds fewer partitions than its
/// share: it takes a free one at its next tick.
pub fn room_elsewhere(others: &BTreeMap<String, usize>, share: usize) -> bool {
    others.values().any(|held| *held < share)
}

/// The partitions `me` takes and lets go of, given each partition's standing (`leases[k]` for
/// partition `k`), how many replicas are live, `me` included, which free partitions are
/// overdue (seen free at [`OVERDUE_AFTER`] ticks in a row) and which of its own it keeps
/// whatever the share (rescued less than [`RESCUE_KEPT`] ago). Pure.
pub fn moves(
    me: &str,
    leases: &[Standing],
    replicas: usize,
    overdue: &BTreeSet<u16>,
    kept: &BTreeSet<u16>,
) -> Moves {
    let share = share(leases.len(), replicas);
    let mut order: Vec<u16> = (0..leases.len() as u16).collect();
    order.sort_by_key(|k| (preference(me, *k), *k));
    // Partitions it keeps whatever the share do not count against it.
    let mine: Vec<u16> = order
        .iter()
        .copied()
        .filter(|k| leases[*k as usize] == Standing::Mine && !kept.contains(k))
        .collect();
    let free = order
        .iter()
        .copied()
        .filter(|k| leases[*k as usize] == Standing::Free);
    let mut moves = Moves::default();
    if mine.len() > share {
        moves.release = mine[share..].to_vec();
    } else {
        moves.take = free.clone().take(share - mine.len()).collect();
    }
    moves.rescue = free
        .filter(|k| overdue.contains(k) && !moves.take.contains(k))
        .collect();
    moves
}

/// How much `replica` wants `partition`: lower first. FNV-1a, so the order is the same in every
/// build and on every machine.
fn preference(replica: &str, partition: u16) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in replica.bytes().chain(partition.to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The live members in an entry's value at `now` (`None`: no entry). A value that does not
/// decode counts as no members; lines that do not stand are dropped.
fn live_members(value: Option<&[u8]>, now: DateTime<Utc>) -> Members {
    let mut members = value
        .and_then(|value| serde_json::from_slice::<Members>(value).ok())
        .unwrap_or_default();
    members.members.retain(|_, until| stands(*until, now));
    members
}

/// A lease entry's holder at `now`, if the lease stands (`None` for a value: no entry or a
/// deleted one).
fn holder(value: Option<&[u8]>, now: DateTime<Utc>) -> Option<String> {
    value
        .and_then(|value| serde_json::from_slice::<Held>(value).ok())
        .filter(|held| stands(held.until, now))
        .map(|held| held.holder)
}

/// A lease entry's standing for `me` given its [`holder`].
fn standing(holder: Option<&str>, me: &str) -> Standing {
    match holder {
        Some(holder) if holder == me => Standing::Mine,
        Some(_) => Standing::Theirs,
        None => Standing::Free,
    }
}

fn held_value(me: &str, now: DateTime<Utc>) -> bytes::Bytes {
    serde_json::to_vec(&Held {
        holder: me.to_string(),
        until: now + ttl(),
    })
    .expect("plain data")
    .into()
}

/// A partition this replica holds: its lease's revision and end, and the task working on it.
struct Holding {
    revision: u64,
    until: DateTime<Utc>,
    stop: ShutdownTrigger,
    work: tokio::task::JoinHandle<()>,
    /// Let go of: its work was asked to stop; the lease goes once the work has.
    releasing: bool,
    /// Taken beyond the share ([`Moves::rescue`]): kept whatever the share until then.
    kept_until: Option<tokio::time::Instant>,
}

/// What a tick read of every lease: by partition, its standing and revision (`None`: no
/// entry); and the other replicas at work, with how many partitions each holds.
struct Survey {
    standings: Vec<Standing>,
    revisions: Vec<Option<u64>>,
    others: BTreeMap<String, usize>,
}

/// What taking partitions needs of its tick: when it began, the replicas live, and each
/// lease's revision as read.
struct Round {
    now: DateTime<Utc>,
    replicas: usize,
    revisions: Vec<Option<u64>>,
}

/// The rescued partitions still kept: only while nobody at work has room for them (`room`).
/// One that shows room now (it took its first partition) gets them back by the share.
fn kept(holdings: &BTreeMap<u16, Holding>, room: bool) -> BTreeSet<u16> {
    holdings
        .iter()
        .filter(|(_, holding)| {
            !room
                && holding
                    .kept_until
                    .is_some_and(|until| tokio::time::Instant::now() < until)
        })
        .map(|(partition, _)| *partition)
        .collect()
}

/// One replica's side of a service's partitions.
pub struct Partitioner<F> {
    store: kv::Store,
    service: String,
    me: String,
    count: u16,
    work: F,
    held: HeldPartitions,
    /// How many replicas the last members' entry it wrote named.
    replicas: std::sync::atomic::AtomicUsize,
}

/// Which partitions a replica holds now, for its metrics, and how many it took beyond its
/// share ([`Moves::rescue`]).
#[derive(Clone, Default)]
pub struct HeldPartitions {
    held: Arc<Mutex<BTreeSet<u16>>>,
    rescues: Arc<std::sync::atomic::AtomicU64>,
}

impl HeldPartitions {
    pub fn get(&self) -> BTreeSet<u16> {
        self.held.lock().expect("held partitions").clone()
    }

    /// Partitions taken beyond the share since the replica started: none while every line in
    /// the members' entry is a replica at work.
    pub fn rescues(&self) -> u64 {
        self.rescues.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn set(&self, held: BTreeSet<u16>) {
        *self.held.lock().expect("held partitions") = held;
    }

    /// Keeps `gauge` at the number of partitions held, read every second, for as long as the
    /// process runs.
    pub fn keep_gauge(self, gauge: prometheus::IntGauge) {
        tokio::spawn(async move {
            loop {
                gauge.set(self.get().len() as i64);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
}

impl<F, Fut> Partitioner<F>
where
    F: Fn(u16, Shutdown) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    /// `work(k, stop)` works on partition `k` until `stop` trips, finishing the message in
    /// hand; it is started when this replica takes `k`.
    pub fn new(store: kv::Store, service: &str, me: &str, count: u16, work: F) -> Self {
        Partitioner {
            store,
            service: service.to_string(),
            me: me.to_string(),
            count,
            work,
            held: HeldPartitions::default(),
            replicas: std::sync::atomic::AtomicUsize::new(1),
        }
    }

    pub fn held(&self) -> HeldPartitions {
        self.held.clone()
    }

    fn key(&self, partition: u16) -> String {
        format!("{}.p{partition}", self.service)
    }

    /// Takes, renews and lets go of partitions every [`TICK`] until `shutdown` trips; then
    /// stops every partition's work, waits for it and deletes the leases, so the other
    /// replicas take them over at their next tick rather than after [`TTL`].
    pub async fn run(self, mut shutdown: Shutdown) -> anyhow::Result<()> {
        let mut holdings: BTreeMap<u16, Holding> = BTreeMap::new();
        // Per partition, at how many ticks in a row this replica saw it free.
        let mut free_for: BTreeMap<u16, u32> = BTreeMap::new();
        loop {
            if let Err(err) = self.tick(&mut holdings, &mut free_for).await {
                tracing::warn!(service = %self.service, error = format!("{err:#}"), "cannot renew or balance partitions; trying again");
            }
            self.held.set(holdings.keys().copied().collect());
            tokio::select! {
                _ = shutdown.wait() => break,
                _ = tokio::time::sleep(TICK) => {}
            }
        }
        for holding in holdings.values() {
            holding.stop.trigger();
        }
        for (partition, holding) in holdings {
            let _ = holding.work.await;
            let _ = self
                .store
                .delete_expect_revision(self.key(partition), Some(holding.revision))
                .await;
        }
        self.held.set(BTreeSet::new());
        let _ = self.leave().await;
        Ok(())
    }

    /// One round: the member line, each lease's standing, renewals, then the moves.
    async fn tick(
        &self,
        holdings: &mut BTreeMap<u16, Holding>,
        free_for: &mut BTreeMap<u16, u32>,
    ) -> anyhow::Result<()> {
        let replicas = self.replicas().await;
        let now = Utc::now();
        let survey = self.survey(holdings, now).await?;
        for (partition, standing) in (0..self.count).zip(&survey.standings) {
            if *standing == Standing::Free {
                *free_for.entry(partition).or_default() += 1;
            } else {
                free_for.remove(&partition);
            }
        }
        let room = room_elsewhere(&survey.others, share(usize::from(self.count), replicas));
        let overdue = overdue(free_for, room);
        let kept = kept(holdings, room);
        let moves = moves(&self.me, &survey.standings, replicas, &overdue, &kept);
        self.release(holdings, moves.release, replicas);
        let round = Round {
            now,
            replicas,
            revisions: survey.revisions,
        };
        self.take(&round, moves.take, moves.rescue, holdings, free_for)
            .await;
        Ok(())
    }

    /// How many replicas are live, by this replica's line in the members' entry. A members'
    /// entry that cannot be written this tick must not stop the renewals: the count of the
    /// last tick stands in.
    async fn replicas(&self) -> usize {
        match self.heartbeat().await {
            Ok(replicas) => {
                self.replicas
                    .store(replicas, std::sync::atomic::Ordering::Relaxed);
                replicas
            }
            Err(err) => {
                tracing::warn!(service = %self.service, error = format!("{err:#}"), "cannot renew this replica's line among the members");
                self.replicas.load(std::sync::atomic::Ordering::Relaxed)
            }
        }
    }

    /// Each lease read: its standing and revision, the other replicas at work; the leases this
    /// replica holds renewed, let go of (once their work has stopped) or given up as lost.
    async fn survey(
        &self,
        holdings: &mut BTreeMap<u16, Holding>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Survey> {
        let mut survey = Survey {
            standings: Vec::with_capacity(self.count as usize),
            revisions: Vec::with_capacity(self.count as usize),
            others: BTreeMap::new(),
        };
        for partition in 0..self.count {
            let key = self.key(partition);
            let entry = self.store.entry(key.clone()).await?;
            let revision = entry.as_ref().map(|entry| entry.revision);
            let value = entry
                .as_ref()
                .filter(|entry| entry.operation == kv::Operation::Put)
                .map(|entry| entry.value.as_ref());
            // Judged by the clock as it is after the read, not at the tick's start.
            let holder = holder(value, Utc::now());
            let mut standing = standing(holder.as_deref(), &self.me);
            if let (Standing::Theirs, Some(holder)) = (standing, holder) {
                *survey.others.entry(holder).or_default() += 1;
            }
            if holdings.contains_key(&partition) {
                standing = self
                    .renew(partition, &key, standing, revision, holdings, now)
                    .await?;
            }
            // Partitions being let go of still count as this replica's until they are free.
            survey.standings.push(standing);
            survey.revisions.push(revision);
        }
        Ok(survey)
    }

    /// One held partition's lease, as read with `standing` at `revision`: renewed (its work
    /// started again if it ended on its own), deleted once let go of and its work stopped, or
    /// given up when another replica may hold it. Returns the partition's standing after.
    async fn renew(
        &self,
        partition: u16,
        key: &str,
        mut standing: Standing,
        revision: Option<u64>,
        holdings: &mut BTreeMap<u16, Holding>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<Standing> {
        let holding = holdings.get_mut(&partition).expect("held");
        if let (Standing::Mine, Some(revision)) = (standing, revision) {
            // A renewal that landed though its answer was lost leaves the entry this
            // replica's at a newer revision: names are unique, so it is still ours.
            holding.revision = revision;
        }
        if standing != Standing::Mine {
            // The lease lapsed (NATS out of reach for longer than it lasts), and
            // another replica may hold it now. Stop at once; it is not ours to delete.
            tracing::warn!(service = %self.service, partition, "partition lease lost; stopping its work");
            let lost = holdings.remove(&partition).expect("held");
            lost.stop.trigger();
        } else if holding.releasing && holding.work.is_finished() {
            let holding = holdings.remove(&partition).expect("held");
            self.store
                .delete_expect_revision(key, Some(holding.revision))
                .await?;
            tracing::info!(service = %self.service, partition, "partition let go of");
            standing = Standing::Free;
        } else {
            match self
                .store
                .update(key, held_value(&self.me, now), holding.revision)
                .await
            {
                Ok(revision) => {
                    holding.revision = revision;
                    holding.until = now + ttl();
                    // Work ends only when asked to; one that ended on its own
                    // panicked. A held partition nobody reads would wait for ever.
                    if !holding.releasing && holding.work.is_finished() {
                        tracing::error!(service = %self.service, partition, "a partition's work ended on its own; starting it again");
                        let (stop, stopped) = Shutdown::new();
                        holding.stop = stop;
                        holding.work = tokio::spawn((self.work)(partition, stopped));
                    }
                }
                Err(err) if holding.until <= Utc::now() => {
                    tracing::warn!(service = %self.service, partition, error = %err, "partition lease lapsed; stopping its work");
                    let lost = holdings.remove(&partition).expect("held");
                    lost.stop.trigger();
                    standing = Standing::Free;
                }
                Err(err) => return Err(err.into()),
            }
        }
        Ok(standing)
    }

    /// Asks the work of each partition in `release` to stop; its lease goes once it has.
    fn release(&self, holdings: &mut BTreeMap<u16, Holding>, release: Vec<u16>, replicas: usize) {
        for partition in release {
            if let Some(holding) = holdings.get_mut(&partition) {
                if !holding.releasing {
                    tracing::info!(service = %self.service, partition, replicas, "letting go of a partition beyond this replica's share");
                    holding.releasing = true;
                    holding.stop.trigger();
                }
            }
        }
    }

    /// Takes the free partitions of `take` and `rescue` (the latter beyond this replica's
    /// share, kept a while), each with a compare-and-set on its lease, and starts their work.
    async fn take(
        &self,
        round: &Round,
        take: Vec<u16>,
        rescue: Vec<u16>,
        holdings: &mut BTreeMap<u16, Holding>,
        free_for: &mut BTreeMap<u16, u32>,
    ) {
        let (now, replicas) = (round.now, round.replicas);
        let rescued: BTreeSet<u16> = rescue.iter().copied().collect();
        if !rescued.is_empty() {
            tracing::warn!(service = %self.service, partitions = ?rescued, replicas, "taking partitions nobody took for two ticks, beyond this replica's share: the members' entry names replicas that do no work (one that just died, or forged lines)");
        }
        for partition in take.into_iter().chain(rescue) {
            let key = self.key(partition);
            let value = held_value(&self.me, now);
            let taken = match round.revisions[partition as usize] {
                None => self.store.create(&key, value).await.ok(),
                Some(revision) => self.store.update(&key, value, revision).await.ok(),
            };
            // Another replica took it at the same moment: its turn.
            let Some(revision) = taken else { continue };
            let (stop, stopped) = Shutdown::new();
            let work = tokio::spawn((self.work)(partition, stopped));
            tracing::info!(service = %self.service, partition, replicas, "partition taken");
            if rescued.contains(&partition) {
                self.held
                    .rescues
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            free_for.remove(&partition);
            holdings.insert(
                partition,
                Holding {
                    revision,
                    until: now + ttl(),
                    stop,
                    work,
                    releasing: false,
                    kept_until: rescued
                        .contains(&partition)
                        .then(|| tokio::time::Instant::now() + RESCUE_KEPT),
                },
            );
        }
    }

    fn members_key(&self) -> String {
        format!("{}.members", self.service)
    }

    /// Renews this replica's line in the members' entry; returns how many replicas are live.
    async fn heartbeat(&self) -> anyhow::Result<usize> {
        let key = self.members_key();
        for _ in 0..5 {
            let now = Utc::now();
            let entry = self.store.entry(key.clone()).await?;
            let value = entry
                .as_ref()
                .filter(|entry| entry.operation == kv::Operation::Put)
                .map(|entry| entry.value.as_ref());
            let mut members = live_members(value, now);
            members.members.insert(self.me.clone(), now + ttl());
            let bytes: bytes::Bytes = serde_json::to_vec(&members).expect("plain data").into();
            let written = match &entry {
                None => self.store.create(&key, bytes).await.is_ok(),
                Some(entry) => self.store.update(&key, bytes, entry.revision).await.is_ok(),
            };
            if written {
                return Ok(members.members.len());
            }
        }
        anyhow::bail!("the members' entry kept changing under this replica")
    }

    /// Takes this replica's line out of the members' entry (best effort: it lapses anyway).
    async fn leave(&self) -> anyhow::Result<()> {
        let key = self.members_key();
        let Some(entry) = self.store.entry(key.clone()).await? else {
            return Ok(());
        };
        let value = (entry.operation == kv::Operation::Put).then_some(entry.value.as_ref());
        let mut members = live_members(value, Utc::now());
        members.members.remove(&self.me);
        let bytes: bytes::Bytes = serde_json::to_vec(&members).expect("plain data").into();
        self.store.update(&key, bytes, entry.revision).await?;
        Ok(())
    }
}

/// Reads one partition's durable for the replica holding it, in whole pulls (issue 32).
///
/// A partition's work reads pull after pull, each to its end, so that letting go of the
/// partition leaves nothing pulled and unread behind: with a continuous pull, the messages the
/// client had already received waited out the ack wait before the next holder got them (the
/// first scaling bench: a p99 of 10 s with three replicas). Messages a pull brings after `stop`
/// tripped, and those the work hands back, are naked only once the pull has ended: naked while
/// it is open, a message came straight back to it, spending a delivery each time (a stopping
/// deleter used up all 20 of a job's deliveries in milliseconds, and `fault_replica_kills`
/// found it dead-lettered).
pub struct PartitionReader {
    jetstream: async_nats::jetstream::Context,
    durable: &'static crate::channels::Durable,
    partition: u16,
    settings: crate::channels::Settings,
    wait: Duration,
    consumer: Option<async_nats::jetstream::consumer::PullConsumer>,
}

impl PartitionReader {
    /// A reader of `partition`'s durable of `durable` (the channel table's), opened on first
    /// use; each pull waits at most `wait` for its messages.
    pub fn new(
        jetstream: async_nats::jetstream::Context,
        durable: &'static crate::channels::Durable,
        partition: u16,
        settings: crate::channels::Settings,
        wait: Duration,
    ) -> Self {
        PartitionReader {
            jetstream,
            durable,
            partition,
            settings,
            wait,
            consumer: None,
        }
    }

    /// The next pull of up to `max` messages, or `None` once `stop` has tripped. A consumer that
    /// cannot be opened or read is tried again after a pause; the partition stays held.
    pub async fn pull(&mut self, max: usize, stop: &mut Shutdown) -> Option<Pull> {
        use anyhow::Context as _;
        let durable = self.durable.name_of(Some(self.partition));
        while !stop.is_triggered() {
            let pulled = async {
                if self.consumer.is_none() {
                    self.consumer = Some(
                        self.durable
                            .open(&self.jetstream, Some(self.partition), self.settings)
                            .await?,
                    );
                }
                self.consumer
                    .as_ref()
                    .expect("opened above")
                    .batch()
                    .max_messages(max.max(1))
                    .expires(self.wait)
                    .messages()
                    .await
                    .with_context(|| format!("pulling from {durable}"))
            }
            .await;
            match pulled {
                Ok(batch) => {
                    return Some(Pull {
                        batch,
                        durable,
                        hand_back: Vec::new(),
                    })
                }
                Err(err) => {
                    self.consumer = None;
                    tracing::warn!(
                        durable,
                        error = format!("{err:#}"),
                        "cannot read a partition; trying again"
                    );
                    tokio::select! {
                        _ = stop.wait() => {}
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
        None
    }
}

/// One pull of a partition, read to its end ([`PartitionReader`]).
pub struct Pull {
    batch: async_nats::jetstream::consumer::pull::Batch,
    durable: String,
    hand_back: Vec<async_nats::jetstream::Message>,
}

impl Pull {
    /// The next message to work on, or `None` at the pull's end. Once `stop` has tripped, the
    /// rest of the pull is kept to hand back.
    pub async fn next(&mut self, stop: &Shutdown) -> Option<async_nats::jetstream::Message> {
        use futures::StreamExt as _;
        loop {
            match self.batch.next().await? {
                Ok(message) if stop.is_triggered() => self.hand_back.push(message),
                Ok(message) => return Some(message),
                Err(err) => {
                    tracing::warn!(durable = self.durable, error = %err, "reading a partition");
                    return None;
                }
            }
        }
    }

    /// Keeps a message this replica will not work on, to hand back when the pull has ended.
    pub fn hand_back(&mut self, message: async_nats::jetstream::Message) {
        self.hand_back.push(message);
    }

    /// Reads the pull to its end, then hands back (naks) what was kept, so the next holder
    /// gets it at once.
    pub async fn finish(mut self) {
        use futures::StreamExt as _;
        while let Some(next) = self.batch.next().await {
            if let Ok(message) = next {
                self.hand_back.push(message);
            }
        }
        for message in self.hand_back {
            let _ = message
                .ack_with(async_nats::jetstream::AckKind::Nak(None))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Standing::*;

    fn none() -> BTreeSet<u16> {
        BTreeSet::new()
    }

    #[test]
    fn an_overdue_partition_is_taken_beyond_the_share_and_kept() {
        // Forged lines make 50 members: a share is 1. Two real replicas hold one each; the
        // other 14 partitions are free.
        let mut leases = [Free; 16];
        leases[0] = Mine;
        leases[1] = Theirs;
        // Free for one tick only: nothing beyond the share.
        let fresh = moves("a", &leases, 50, &none(), &none());
        assert!(fresh.take.is_empty() && fresh.rescue.is_empty() && fresh.release.is_empty());
        // Overdue: every free one is rescued, whatever the share.
        let overdue: BTreeSet<u16> = (2..16).collect();
        let rescued = moves("a", &leases, 50, &overdue, &none());
        assert_eq!(
            rescued.rescue.iter().copied().collect::<BTreeSet<_>>(),
            overdue
        );
        assert!(rescued.take.is_empty() && rescued.release.is_empty());
        // Holding them, it lets go of none it keeps, and of the others down to its share.
        let mut holding = [Mine; 16];
        holding[1] = Theirs;
        let kept: BTreeSet<u16> = (2..16).collect();
        let keeping = moves("a", &holding, 50, &none(), &kept);
        assert!(keeping.release.is_empty(), "{keeping:?}");
        let after = moves("a", &holding, 50, &none(), &none());
        assert_eq!(after.release.len(), 14);
        // An overdue partition within the share is taken, not rescued.
        let within = moves("a", &[Free; 16], 1, &(0..16).collect(), &none());
        assert_eq!(within.take.len(), 16);
        assert!(within.rescue.is_empty());
    }

    #[test]
    fn a_lone_replica_takes_every_free_partition() {
        let moves = moves("a", &[Free; 16], 1, &none(), &none());
        assert_eq!(moves.take.len(), 16);
        assert!(moves.release.is_empty());
        let unique: BTreeSet<u16> = moves.take.iter().copied().collect();
        assert_eq!(unique.len(), 16);
    }

    #[test]
    fn replicas_take_their_share_and_no_more() {
        let mut leases = [Mine; 16];
        leases[..6].fill(Theirs);
        // Three live replicas: a share is 6; this one holds 10, so it lets 4 go.
        let three = moves("a", &leases, 3, &none(), &none());
        assert_eq!(three.release.len(), 4);
        assert!(three.take.is_empty());
        assert!(three.release.iter().all(|k| leases[*k as usize] == Mine));
        // A newcomer with nothing finds nothing free and waits for the others to let go.
        let newcomer = moves("c", &[Theirs; 16], 3, &none(), &none());
        assert_eq!(newcomer, Moves::default());
        // Free partitions are taken up to the share only.
        let mut some_free = [Theirs; 16];
        some_free[10..].fill(Free);
        let taken = moves("c", &some_free, 3, &none(), &none());
        assert_eq!(taken.take.len(), 6);
        assert!(taken.take.iter().all(|k| *k >= 10));
    }

    #[test]
    fn three_replicas_taking_in_turn_cover_every_partition_once() {
        // Replicas tick one after another from an empty bucket, all three alive.
        let mut owner: [Option<&str>; 16] = [None; 16];
        for _ in 0..3 {
            for me in ["a", "b", "c"] {
                let leases: Vec<Standing> = owner
                    .iter()
                    .map(|o| match o {
                        None => Free,
                        Some(o) if *o == me => Mine,
                        Some(_) => Theirs,
                    })
                    .collect();
                let moves = moves(me, &leases, 3, &none(), &none());
                for k in moves.release {
                    owner[k as usize] = None;
                }
                for k in moves.take {
                    owner[k as usize] = Some(me);
                }
            }
        }
        assert!(owner.iter().all(Option::is_some), "{owner:?}");
        for me in ["a", "b", "c"] {
            let n = owner.iter().filter(|o| **o == Some(me)).count();
            // ⌈16 / 3⌉ = 6 at most; the last to tick gets what is left (6, 6, 4).
            assert!((4..=6).contains(&n), "{me} holds {n}: {owner:?}");
        }
    }

    #[test]
    fn the_preferred_order_differs_between_replicas() {
        let order = |me: &str| {
            let mut order: Vec<u16> = (0..16).collect();
            order.sort_by_key(|k| preference(me, *k));
            order
        };
        assert_ne!(order("retention-worker-a"), order("retention-worker-b"));
        assert_eq!(order("x"), order("x"), "stable");
    }

    #[test]
    fn a_lease_is_a_claim_checked_against_the_clock() {
        let now: DateTime<Utc> = "2026-11-29T12:00:00Z".parse().unwrap();
        let value = |holder: &str, until: DateTime<Utc>| {
            serde_json::to_vec(&Held {
                holder: holder.into(),
                until,
            })
            .unwrap()
        };
        let s = chrono::TimeDelta::seconds;
        let standing =
            |value: Option<&[u8]>, me: &str, now| standing(holder(value, now).as_deref(), me);
        assert_eq!(standing(None, "a", now), Free);
        assert_eq!(standing(Some(&value("a", now + s(10))), "a", now), Mine);
        assert_eq!(standing(Some(&value("b", now + s(10))), "a", now), Theirs);
        assert_eq!(standing(Some(&value("b", now)), "a", now), Free, "over");
        assert_eq!(
            standing(Some(&value("b", now + s(3600))), "a", now),
            Free,
            "a claim reaching further than a lease lasts"
        );
        assert_eq!(standing(Some(b"{not json"), "a", now), Free);
        assert_eq!(standing(Some(b""), "a", now), Free);
    }

    #[test]
    fn a_free_partition_is_overdue_only_when_no_replica_at_work_has_room_for_it() {
        let free_for: BTreeMap<u16, u32> = [(3, 1), (4, OVERDUE_AFTER), (5, STARVED_AFTER)].into();
        let others = |held: &[(&str, usize)]| -> BTreeMap<String, usize> {
            held.iter().map(|(n, h)| (n.to_string(), *h)).collect()
        };
        // Three replicas, share 6: the others hold theirs whole. Seen free twice is overdue.
        let full = others(&[("b", 6), ("c", 6)]);
        assert_eq!(overdue(&free_for, room_elsewhere(&full, 6)), [4, 5].into());
        // One of them holds 4: it takes the partition at its next tick; only a partition it let
        // lie for STARVED_AFTER ticks is overdue. The releaser that started the race
        // (fault_partition_takeover) no longer takes back what it let go of.
        let room = others(&[("b", 6), ("c", 4)]);
        assert_eq!(overdue(&free_for, room_elsewhere(&room, 6)), [5].into());
        // Forged lines: 50 members make a share of 1, and the real replicas hold theirs.
        let forged = others(&[("b", 1)]);
        assert_eq!(
            overdue(&free_for, room_elsewhere(&forged, 1)),
            [4, 5].into()
        );
        // Nobody else at work (the others' leases lapsed): as before.
        assert_eq!(
            overdue(&free_for, room_elsewhere(&BTreeMap::new(), 8)),
            [4, 5].into()
        );
        assert_eq!(share(16, 3), 6);
        assert_eq!(share(16, 0), 16);
    }

    #[test]
    fn members_are_counted_only_while_their_lines_stand() {
        let now: DateTime<Utc> = "2026-11-29T12:00:00Z".parse().unwrap();
        let s = chrono::TimeDelta::seconds;
        let members = Members {
            members: [
                ("a".to_string(), now + s(10)),
                ("gone".to_string(), now - s(1)),
                ("forged".to_string(), now + s(86_400)),
            ]
            .into(),
        };
        let live = live_members(Some(&serde_json::to_vec(&members).unwrap()), now);
        assert_eq!(live.members.keys().collect::<Vec<_>>(), ["a"]);
        assert!(live_members(Some(b"[1,2"), now).members.is_empty());
        assert!(live_members(Some(br#"{"members":{"a":"yesterday"}}"#), now)
            .members
            .is_empty());
        assert!(live_members(None, now).members.is_empty());
    }
}
