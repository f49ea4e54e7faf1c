//! The timer queue: every schedule sits in a `BTreeSet` ordered by the instant it next needs
//! attention, kept current by a watch on the schedules bucket. Nothing scans all schedules on a
//! clock; the loop sleeps until the earliest entry, so idle schedules cost no CPU.
//!
//! Firing a tick is publish-then-record: the `due-backup` event goes out with a message id of
//! schedule + tick, then the schedule's status is compare-and-set. A replica that dies between
//! the two leaves a state from which any replica recomputes the same tick, whose publication the
//! stream drops as a duplicate; a replica that loses the compare-and-set simply waits for the
//! watch to bring it the winner's state.
//!
//! Whoever records a firing records the instant stored in the *first* publication of the tick
//! (read back by sequence when the stream reports a duplicate), not its own clock. So the state
//! after a firing is the same whichever replica records it, and a tick published just before
//! every replica died is followed, after the outage, by one firing for the missed period (the
//! next tick counts from the real firing, not from the moment a survivor noticed it).
//!
//! The queue keeps compact `Facts` per schedule (parsed cron, the decision's state, what a
//! due-backup event carries), not whole records: a few hundred bytes each. When schedules come
//! due together (thousands share a cron tick), every tick is decided and published first, all
//! publications in flight at once; only then is each firing recorded, by reading the record and
//! comparing-and-setting it against the revision the decision was made on. Consumers wait for
//! the publications, nobody waits for the records.
//!
//! A schedule's timing (issue 19) comes from `sexton_schedule::Timing`: the jitter offset and
//! `@daily-random` & co. drawn from its name, its blackout windows. A run is named by its
//! nominal tick (the message id `due.<schedule>.<tick-ms>`), so neither jitter nor a deferral
//! can make a published run look new; its backup id carries the instant it was asked for.
//!
//! A backfill (`sexton schedule backfill`) is a cursor over a list of past ticks on the
//! schedule record. Each step publishes one tick (message id `backfill.<schedule>.<id>.<tick-ms>`)
//! and then moves the cursor by compare-and-set, the same publish-then-record as a firing: a
//! replica killed between the two is followed by one whose publication of the same tick is a
//! duplicate, and which moves the cursor on. With overlap `skip` a step waits until the
//! backup fired before it has reported, so no two backups of the schedule run at once.
//!
//! A schedule with `full_every` or volumes (seed 001) reads its backups from the catalog before
//! publishing, and the event says per volume full or incremental and the parent to build on
//! ([`ask`], over the pure `sexton_retention::cadence`). A catalog that cannot be read delays
//! the firing (retried in a second); it never turns into an incremental on a guess.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use async_nats::jetstream::{
    kv::{Entry, Operation},
    publish::PublishAck,
    stream::Stream,
};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use sexton_retention::{FullEvery, KindReason};
use sexton_schedule::{
    Action, Decision, Explanation, Reason, ScheduleDoc, ScheduleState, Timing, TimingSpec,
};
use sexton_shared::{
    catalog::Catalog,
    config::Config,
    names::{BackupId, ClusterName, PlanName, ScheduleName},
    nats::publish_once_acked,
    object_store::cluster_prefix,
    records::{
        Backfill, BackupKind, InFlight, OverlapPolicy, SchedulePhase, ScheduleRecord,
        IN_FLIGHT_STALE_AFTER,
    },
    topology::{self, Topology},
    wire::{self, DueBackup, DueVolume},
    Shutdown,
};

use crate::metrics::Metrics;

/// The pure state of a stored schedule that `sexton-schedule` evaluates.
pub fn state(record: &ScheduleRecord, now: DateTime<Utc>) -> ScheduleState {
    let in_flight = record.overlap_policy == OverlapPolicy::Skip
        && record
            .status
            .in_flight
            .as_ref()
            .is_some_and(|f| now - f.since < IN_FLIGHT_STALE_AFTER);
    ScheduleState {
        created_at: record.created_at,
        paused: record.paused,
        skip_immediately: record.skip_immediately,
        last_backup: record.status.last_backup,
        last_skipped: record.status.last_skipped,
        in_flight,
        starting_deadline_seconds: record.starting_deadline_seconds,
        activation_pending: record.status.activation_pending,
    }
}

/// The schedule's timing settings.
pub fn timing_spec(record: &ScheduleRecord) -> TimingSpec<'_> {
    TimingSpec {
        name: record.name.as_str(),
        cron: &record.cron,
        jitter: record.jitter,
        exclude: &record.exclude,
        on_blackout: record.on_blackout,
    }
}

/// The schedule as `sexton schedule describe` explains it.
pub fn explain(record: &ScheduleRecord, now: DateTime<Utc>, server_default: bool) -> Explanation {
    let state = state(record, now);
    let doc = ScheduleDoc {
        cron: record.cron.clone(),
        created_at: state.created_at,
        paused: state.paused,
        skip_immediately: state.skip_immediately,
        last_backup: state.last_backup,
        last_skipped: state.last_skipped,
        in_flight: state.in_flight,
        starting_deadline_seconds: state.starting_deadline_seconds,
        activation_pending: state.activation_pending,
        name: Some(record.name.to_string()),
        jitter: record.jitter,
        exclude: record.exclude.clone(),
        on_blackout: record.on_blackout,
    };
    sexton_schedule::explain(&doc, now, server_default)
}

/// How a backup came to be asked for; its id says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// The schedule's own run.
    Scheduled,
    /// A backfill's tick.
    Backfill,
    /// `sexton backup create --from-schedule`.
    Manual,
}

/// The backup id of a firing: the schedule's name and the instant the backup was asked for
/// (to the second), so an id says when the backup was taken, whatever tick it is for. Two
/// firings of one schedule are always in different seconds (the next run comes after the
/// last firing, and runs fall on whole seconds); a backfill's ids add the tick, and a manual
/// trigger's say `manual`, so neither can meet a scheduled firing's id in the same second.
pub fn backup_id_for(
    schedule: &ScheduleName,
    asking: Asking,
    fired_at: DateTime<Utc>,
    tick: DateTime<Utc>,
) -> BackupId {
    let stamp = |t: DateTime<Utc>| t.format("%Y%m%d%H%M%S").to_string();
    let text = match asking {
        Asking::Scheduled => format!("{schedule}-{}", stamp(fired_at)),
        Asking::Backfill => format!("{schedule}-{}-backfill-{}", stamp(fired_at), stamp(tick)),
        Asking::Manual => format!("{schedule}-{}-manual", stamp(fired_at)),
    };
    BackupId::new(text).expect("schedule names are valid ids of at most 63 characters")
}

/// The id a tick's backup had before ids carried the firing instant (`<schedule>-<tick>`):
/// an in-flight backup started before an upgrade is still recognised by it.
fn legacy_backup_id_text(schedule: &str, tick: DateTime<Utc>) -> String {
    format!("{schedule}-{}", tick.format("%Y%m%d%H%M%S"))
}

/// How many due ticks one replica publishes at once when thousands of schedules share a cron
/// tick: all of a burst's publications are pipelined on the connection (async-nats allows 5,000
/// unacknowledged publications).
const PUBLISH_CONCURRENCY: usize = 1024;
/// How many compare-and-sets one replica has in flight while it records a burst; nobody waits
/// for these, so they leave the server room.
const RECORD_CONCURRENCY: usize = 256;

/// The clusters that have at least one schedule, as this replica's watch sees them; the
/// retention sweeps read it instead of listing every schedule.
pub type ClusterSet = tokio::sync::watch::Sender<BTreeSet<ClusterName>>;

/// The parts of a schedule its decision depends on, parsed once per revision: a few hundred
/// bytes, where the whole record (policy, labels, status) is several times that. The timer
/// queue keeps these; the record itself is read again when the schedule's time comes.
struct Facts {
    /// `Err` holds the message for an invalid spec or window.
    timing: Result<Timing, String>,
    /// What a due-backup event carries besides name and cluster.
    plan: PlanName,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    full_every: Option<FullEvery>,
    merging: bool,
    volumes: Vec<String>,
    failed_volumes: Vec<String>,
    last_backup_failed: bool,
    /// The stored state; `in_flight` is decided at evaluation time from the fields below.
    state: ScheduleState,
    overlap_policy: OverlapPolicy,
    in_flight: Option<Box<InFlight>>,
    failed_validation: bool,
    /// The backfill's next step, while one runs.
    backfill: Option<Box<BackfillStep>>,
}

/// What the next step of a running backfill needs.
#[derive(Debug, Clone)]
struct BackfillStep {
    id: u64,
    tick: DateTime<Utc>,
    overlap: OverlapPolicy,
    /// With overlap `skip`: the backup the step before fired, until it reports, and since when.
    waiting_for: Option<(BackupId, DateTime<Utc>)>,
}

impl BackfillStep {
    fn of(backfill: &Backfill) -> Option<BackfillStep> {
        Some(BackfillStep {
            id: backfill.id,
            tick: backfill.next_tick()?,
            overlap: backfill.overlap,
            waiting_for: backfill.waiting_for.clone().zip(backfill.waiting_since),
        })
    }
}

impl Facts {
    fn of(record: &ScheduleRecord) -> Facts {
        Facts {
            timing: Timing::new(&timing_spec(record)).map_err(|err| err.to_string()),
            plan: record.plan.clone(),
            labels: record.labels.clone(),
            annotations: record.annotations.clone(),
            full_every: record.full_every,
            merging: merging(record),
            volumes: record.volumes.clone(),
            failed_volumes: record.status.failed_volumes.clone(),
            last_backup_failed: record.status.last_backup_failed,
            state: ScheduleState {
                in_flight: false,
                ..state(record, record.created_at)
            },
            overlap_policy: record.overlap_policy,
            in_flight: record.status.in_flight.clone().map(Box::new),
            failed_validation: record.status.phase == SchedulePhase::FailedValidation,
            backfill: record
                .status
                .backfill
                .as_ref()
                .and_then(BackfillStep::of)
                .map(Box::new),
        }
    }

    /// What the schedule's due-backups name.
    fn target<'a>(&'a self, schedule: &'a ScheduleName, cluster: &'a ClusterName) -> Target<'a> {
        Target {
            schedule,
            cluster,
            plan: &self.plan,
            labels: &self.labels,
            annotations: &self.annotations,
            full_every: self.full_every,
            merging: self.merging,
            volumes: &self.volumes,
            failed_volumes: &self.failed_volumes,
            last_backup_failed: self.last_backup_failed,
        }
    }

    /// Whether a backup of the schedule is in progress at `now` (a stale one no longer counts).
    fn in_flight_at(&self, now: DateTime<Utc>) -> bool {
        self.in_flight
            .as_ref()
            .is_some_and(|f| now - f.since < IN_FLIGHT_STALE_AFTER)
    }

    /// When the backfill's next step may run: now, unless with overlap `skip` it waits for a
    /// backup (the report that ends the wait changes the record, and the watch brings it; the
    /// instant returned is when the wait gives up on a silent executor). `None` without a
    /// running backfill.
    fn backfill_ready_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let step = self.backfill.as_ref()?;
        if step.overlap == OverlapPolicy::Allow {
            return Some(now);
        }
        let mut ready = now;
        if let Some((_, since)) = &step.waiting_for {
            ready = ready.max(*since + IN_FLIGHT_STALE_AFTER);
        }
        if let Some(in_flight) = self.in_flight.as_ref().filter(|_| self.in_flight_at(now)) {
            ready = ready.max(in_flight.since + IN_FLIGHT_STALE_AFTER);
        }
        Some(ready)
    }

    /// The state as [`state`] computes it from the record, at `now`.
    fn state_at(&self, now: DateTime<Utc>) -> ScheduleState {
        ScheduleState {
            in_flight: self.overlap_policy == OverlapPolicy::Skip && self.in_flight_at(now),
            ..self.state
        }
    }

    fn decide(
        &self,
        name: &str,
        now: DateTime<Utc>,
        server_default: bool,
    ) -> Result<Decision, String> {
        let timing = self.timing.as_ref().map_err(Clone::clone)?;
        let mut state = self.state_at(now);
        let decision = timing.evaluate(&state, now, server_default);
        // The backup "in flight" may be this very tick's: the tick was published and the
        // executor's `started` report changed the schedule before the firing was recorded. That
        // is the same firing, not an overlap; deciding again without it records it as fired.
        if decision.action == Action::Skip
            && decision.reason == Reason::InFlight
            && self.in_flight_is_tick(name, &decision)
        {
            state.in_flight = false;
            return Ok(timing.evaluate(&state, now, server_default));
        }
        Ok(decision)
    }

    /// Whether the backup in flight was taken for the decision's tick: its report named that
    /// tick; or, from an executor that does not say, its id is the tick's old-style id or it
    /// started after the run was due (a backup started before cannot be for this run).
    fn in_flight_is_tick(&self, name: &str, decision: &Decision) -> bool {
        let (Some(in_flight), Some(tick)) = (&self.in_flight, decision.tick) else {
            return false;
        };
        match in_flight.tick {
            Some(reported) => reported == tick,
            None => {
                in_flight.backup_id.as_str() == legacy_backup_id_text(name, tick)
                    || decision
                        .next_run_time
                        .is_some_and(|due| in_flight.since >= due)
            }
        }
    }

    /// The decision the first publisher of `decision`'s tick made at `fired_at`: the same
    /// firing, with `fired_at` as the last backup. Falls back to `decision` when evaluating at
    /// `fired_at` does not give that firing (replicas' clocks disagree, or a manual trigger
    /// happened to share the tick).
    fn decided_at_first_firing(
        &self,
        name: &str,
        decision: Decision,
        fired_at: DateTime<Utc>,
        server_default: bool,
    ) -> Decision {
        match self.decide(name, fired_at, server_default) {
            Ok(first) if first.action == Action::Fire && first.tick == decision.tick => first,
            _ => decision,
        }
    }

    /// When the schedule next needs attention: now if it must fire, skip or be marked invalid;
    /// at its next run (or the end of the blackout it waits for) otherwise; never while paused.
    /// A running backfill asks for attention too, paused or not.
    fn attention_at(
        &self,
        name: &str,
        now: DateTime<Utc>,
        server_default: bool,
    ) -> Option<DateTime<Utc>> {
        let own = if self.state.paused {
            None
        } else {
            match self.decide(name, now, server_default) {
                Err(_) => (!self.failed_validation).then_some(now),
                Ok(decision) => match decision.action {
                    Action::Fire | Action::Skip | Action::Invalid => Some(now),
                    Action::Wait => decision.next_run_after,
                    Action::Paused => None,
                },
            }
        };
        match (own, self.backfill_ready_at(now)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// One schedule in the timer queue.
struct Slot {
    facts: Facts,
    cluster: ClusterName,
    /// The revision the facts come from: a decision is recorded against it.
    revision: u64,
    queued_at: Option<DateTime<Utc>>,
}

/// Every schedule this replica knows, the order in which they need attention, and how many
/// schedules each cluster has. Names are shared between the map and the order.
struct Queue {
    slots: HashMap<Arc<str>, Slot>,
    order: BTreeSet<(DateTime<Utc>, Arc<str>)>,
    schedules_per_cluster: HashMap<ClusterName, usize>,
    /// The schedules paused after consecutive failures, and their clusters: the gauge
    /// `sexton_schedules_paused_after_failures`.
    paused_after_failures: HashMap<Arc<str>, ClusterName>,
}

impl Queue {
    fn set(&mut self, name: &str, at: Option<DateTime<Utc>>) {
        let Some((key, slot)) = self.slots.get_key_value(name) else {
            return;
        };
        let key = key.clone();
        if let Some(old) = slot.queued_at {
            self.order.remove(&(old, key.clone()));
        }
        if let Some(at) = at {
            self.order.insert((at, key));
        }
        if let Some(slot) = self.slots.get_mut(name) {
            slot.queued_at = at;
        }
    }

    /// Takes every schedule whose time has come out of the order.
    fn pop_due(&mut self, now: DateTime<Utc>) -> Vec<Arc<str>> {
        let mut due = Vec::new();
        while self.order.first().is_some_and(|(at, _)| *at <= now) {
            let (_, name) = self.order.pop_first().expect("not empty");
            if let Some(slot) = self.slots.get_mut(&name) {
                slot.queued_at = None;
            }
            due.push(name);
        }
        due
    }

    fn remove(&mut self, name: &str, clusters: &ClusterSet) {
        self.set(name, None);
        if let Some(slot) = self.slots.remove(name) {
            self.count(&slot.cluster, false, clusters);
        }
    }

    /// Counts a schedule in or out of its cluster; the shared set changes only when a cluster
    /// gains its first schedule or loses its last.
    fn count(&mut self, cluster: &ClusterName, add: bool, clusters: &ClusterSet) {
        if add {
            let n = self
                .schedules_per_cluster
                .entry(cluster.clone())
                .or_default();
            *n += 1;
            if *n == 1 {
                clusters.send_modify(|set| {
                    set.insert(cluster.clone());
                });
            }
        } else if let Some(n) = self.schedules_per_cluster.get_mut(cluster) {
            *n -= 1;
            if *n == 0 {
                self.schedules_per_cluster.remove(cluster);
                clusters.send_modify(|set| {
                    set.remove(cluster);
                });
            }
        }
    }

    /// Counts `name` in or out of the schedules paused after failures, and sets the gauge of
    /// the clusters concerned.
    fn note_paused_after_failures(
        &mut self,
        name: &str,
        cluster: Option<&ClusterName>,
        metrics: &Metrics,
    ) {
        let before = match cluster {
            Some(cluster) => self
                .paused_after_failures
                .insert(Arc::from(name), cluster.clone()),
            None => self.paused_after_failures.remove(name),
        };
        for cluster in before.iter().chain(cluster) {
            let n = self
                .paused_after_failures
                .values()
                .filter(|c| *c == cluster)
                .count();
            metrics
                .schedules_paused_after_failures
                .with_label_values(&[cluster.as_str()])
                .set(n as i64);
        }
    }

    fn apply_update(
        &mut self,
        entry: Entry,
        server_default: bool,
        clusters: &ClusterSet,
        metrics: &Metrics,
    ) {
        let name = entry.key.as_str();
        if entry.operation != Operation::Put {
            self.remove(name, clusters);
            self.note_paused_after_failures(name, None, metrics);
            return;
        }
        let record: ScheduleRecord = match serde_json::from_slice(&entry.value) {
            Ok(record) => record,
            Err(err) => {
                tracing::error!(schedule = %name, error = %err, "unreadable schedule record; not scheduling it");
                self.remove(name, clusters);
                self.note_paused_after_failures(name, None, metrics);
                return;
            }
        };
        let paused_after_failures = record.paused && record.status.paused_reason.is_some();
        if paused_after_failures || self.paused_after_failures.contains_key(name) {
            self.note_paused_after_failures(
                name,
                paused_after_failures.then_some(&record.cluster),
                metrics,
            );
        }
        self.set(name, None);
        let slot = Slot {
            facts: Facts::of(&record),
            cluster: record.cluster,
            revision: entry.revision,
            queued_at: None,
        };
        let at = slot.facts.attention_at(name, Utc::now(), server_default);
        self.count(&slot.cluster, true, clusters);
        let key: Arc<str> = match self.slots.get_key_value(name) {
            Some((key, _)) => key.clone(),
            None => Arc::from(name),
        };
        if let Some(old) = self.slots.insert(key, slot) {
            self.count(&old.cluster, false, clusters);
        }
        self.set(name, at);
    }
}

/// What attending a schedule needs besides the schedule.
struct Firing<'a> {
    topology: &'a Topology,
    config: &'a Config,
    metrics: &'a Metrics,
    due_stream: &'a Stream,
}

pub async fn run(
    topology: Topology,
    config: Config,
    metrics: Arc<Metrics>,
    clusters: ClusterSet,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let server_default = config.scheduler.skip_immediately_default;
    let mut queue = Queue {
        slots: HashMap::new(),
        order: BTreeSet::new(),
        schedules_per_cluster: HashMap::new(),
        paused_after_failures: HashMap::new(),
    };
    let due_stream = topology
        .jetstream
        .get_stream(topology::STREAM_DUE)
        .await
        .context("opening the due-backup stream")?;
    let mut watch = topology
        .schedules
        .watch_with_history(">")
        .await
        .context("watching the schedules bucket")?;
    let mut last_revision = 0;
    loop {
        let now = Utc::now();
        let sleep_for = match queue.order.first() {
            Some((at, _)) => (*at - now).to_std().unwrap_or(Duration::ZERO),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            update = watch.next() => match update {
                Some(Ok(entry)) => {
                    last_revision = entry.revision;
                    queue.apply_update(entry, server_default, &clusters, &metrics);
                    metrics.schedules_loaded.set(queue.slots.len() as i64);
                }
                other => {
                    if let Some(Err(err)) = other {
                        tracing::warn!(error = %err, "schedule watch failed; resuming");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    watch = topology
                        .schedules
                        .watch_all_from_revision(last_revision + 1)
                        .await
                        .context("re-watching the schedules bucket")?;
                }
            },
            _ = tokio::time::sleep(sleep_for) => {
                let due = queue.pop_due(Utc::now());
                let firing = Firing {
                    topology: &topology,
                    config: &config,
                    metrics: &metrics,
                    due_stream: &due_stream,
                };
                // First publish every due tick, then record them: the publications, which
                // consumers wait for, do not queue behind the compare-and-sets of a burst.
                let slots = &queue.slots;
                let firing = &firing;
                let decided: Vec<(Arc<str>, Step)> = futures::stream::iter(due)
                    .map(|name| async move {
                        let step = match slots.get(&name) {
                            Some(slot) => decide_and_publish(firing, &name, slot).await,
                            None => Step::Requeue(None),
                        };
                        (name, step)
                    })
                    .buffer_unordered(PUBLISH_CONCURRENCY)
                    .collect()
                    .await;
                let attended: Vec<(Arc<str>, Option<DateTime<Utc>>)> = futures::stream::iter(decided)
                    .map(|(name, step)| async move {
                        let next = match (step, slots.get(&name)) {
                            (Step::Requeue(at), _) => at,
                            (step, Some(slot)) => record(firing, &name, slot.revision, step).await,
                            (_, None) => None,
                        };
                        (name, next)
                    })
                    .buffer_unordered(RECORD_CONCURRENCY)
                    .collect()
                    .await;
                for (name, next) in attended {
                    queue.set(&name, next);
                }
            }
        }
    }
}

/// What [`record`] writes: the schedule's own outcome, or a backfill's step.
enum Recorded {
    Decision(Result<Decision, String>),
    Backfill {
        id: u64,
        tick: DateTime<Utc>,
        backup_id: BackupId,
        overlap: OverlapPolicy,
    },
}

/// What the first, latency-critical step decided for a due schedule.
enum Step {
    /// Nothing to record: attend it again at this instant, or when the watch brings news.
    Requeue(Option<DateTime<Utc>>),
    /// Record this outcome: a skip, a firing (its tick already published), or a spec that
    /// stopped parsing.
    Record(Result<Decision, String>),
    /// Record a firing whose tick is published; `duplicate` if someone published it first.
    Fired {
        decision: Decision,
        duplicate: bool,
        backup_id: BackupId,
    },
    /// Move backfill `id` past `tick`, whose due-backup is published (by us, or first by
    /// someone else: `duplicate`) for `backup_id`.
    Backfilled {
        id: u64,
        tick: DateTime<Utc>,
        duplicate: bool,
        backup_id: BackupId,
        overlap: OverlapPolicy,
    },
}

/// Decides on the queue's facts (no I/O) and, for a firing or a backfill step, publishes the
/// tick. The schedule's own run comes first; a backfill step is taken when the schedule has
/// nothing of its own to do at this instant.
#[tracing::instrument(skip_all, fields(schedule = %name))]
async fn decide_and_publish(firing: &Firing<'_>, name: &str, slot: &Slot) -> Step {
    let now = Utc::now();
    let own = decide_own(firing, name, slot, now).await;
    match own {
        Step::Requeue(at) => match slot.facts.backfill_ready_at(now) {
            Some(ready) if ready <= now => backfill_step(firing, name, slot, now).await,
            Some(ready) => Step::Requeue(Some(at.map_or(ready, |at| at.min(ready)))),
            None => Step::Requeue(at),
        },
        step => step,
    }
}

/// The schedule's own run: decide, and publish a firing.
async fn decide_own(firing: &Firing<'_>, name: &str, slot: &Slot, now: DateTime<Utc>) -> Step {
    let server_default = firing.config.scheduler.skip_immediately_default;
    let facts = &slot.facts;
    let mut decision = match facts.decide(name, now, server_default) {
        Err(_) if facts.failed_validation => return Step::Requeue(None),
        Err(error) => return Step::Record(Err(error)),
        Ok(decision) => decision,
    };
    match decision.action {
        Action::Paused | Action::Invalid => Step::Requeue(None),
        // Woken exactly at the due instant: due means strictly after it. A deferred run waits
        // for the end of its blackout.
        Action::Wait => Step::Requeue(
            decision
                .next_run_after
                .map(|next| next.max(now + chrono::Duration::milliseconds(1))),
        ),
        Action::Skip => Step::Record(Ok(decision)),
        Action::Fire => {
            let Some(tick) = decision.tick else {
                return Step::Requeue(None);
            };
            let Ok(schedule) = name.parse::<ScheduleName>() else {
                return Step::Requeue(None);
            };
            let target = facts.target(&schedule, &slot.cluster);
            let asking = DueRequest {
                tick,
                fired_at: now,
                backup_id: backup_id_for(&schedule, Asking::Scheduled, now, tick),
                message_id: format!("due.{}.{}", schedule, tick.timestamp_millis()),
                backfill: None,
            };
            let published = publish_due(
                firing.topology,
                firing.config,
                &target,
                &asking,
                Some(firing.metrics),
            )
            .await;
            let ack = match published {
                Ok(ack) => ack,
                Err(err) => {
                    tracing::warn!(
                        error = format!("{err:#}"),
                        "could not publish a due backup; retrying"
                    );
                    return Step::Requeue(Some(now + chrono::Duration::seconds(1)));
                }
            };
            let mut backup_id = asking.backup_id;
            if ack.duplicate {
                firing.metrics.due_duplicates.inc();
                // Published before and not (yet) recorded: record the first publication's
                // instant, as its publisher would have.
                match first_publication(firing.due_stream, ack.sequence, &schedule, tick).await {
                    Ok(first) => {
                        decision = facts.decided_at_first_firing(
                            name,
                            decision,
                            first.fired_at,
                            server_default,
                        );
                        backup_id = first.backup_id;
                    }
                    Err(err) => {
                        tracing::warn!(
                            error = format!("{err:#}"),
                            "cannot read the first publication of a tick; retrying"
                        );
                        return Step::Requeue(Some(now + chrono::Duration::seconds(1)));
                    }
                }
            } else {
                let due_at = decision.next_run_time.unwrap_or(tick);
                let lateness = (now - due_at).num_microseconds().unwrap_or(0) as f64 / 1e6;
                firing.metrics.fire_lateness.observe(lateness.max(0.0));
                firing.metrics.due_published.inc();
            }
            Step::Fired {
                decision,
                duplicate: ack.duplicate,
                backup_id,
            }
        }
    }
}

/// Publishes the backfill's next tick.
async fn backfill_step(firing: &Firing<'_>, name: &str, slot: &Slot, now: DateTime<Utc>) -> Step {
    let Some(step) = slot.facts.backfill.as_deref() else {
        return Step::Requeue(None);
    };
    let Ok(schedule) = name.parse::<ScheduleName>() else {
        return Step::Requeue(None);
    };
    let target = slot.facts.target(&schedule, &slot.cluster);
    let asking = DueRequest {
        tick: step.tick,
        fired_at: now,
        backup_id: backup_id_for(&schedule, Asking::Backfill, now, step.tick),
        message_id: format!(
            "backfill.{}.{}.{}",
            schedule,
            step.id,
            step.tick.timestamp_millis()
        ),
        backfill: Some(step.id),
    };
    let ack = match publish_due(
        firing.topology,
        firing.config,
        &target,
        &asking,
        Some(firing.metrics),
    )
    .await
    {
        Ok(ack) => ack,
        Err(err) => {
            tracing::warn!(
                error = format!("{err:#}"),
                "could not publish a backfill tick; retrying"
            );
            return Step::Requeue(Some(now + chrono::Duration::seconds(1)));
        }
    };
    let mut backup_id = asking.backup_id;
    if ack.duplicate {
        firing.metrics.due_duplicates.inc();
        match first_publication(firing.due_stream, ack.sequence, &schedule, step.tick).await {
            Ok(first) => backup_id = first.backup_id,
            Err(err) => {
                tracing::warn!(
                    error = format!("{err:#}"),
                    "cannot read the first publication of a backfill tick; retrying"
                );
                return Step::Requeue(Some(now + chrono::Duration::seconds(1)));
            }
        }
    } else {
        firing.metrics.due_published.inc();
        firing.metrics.backfill_ticks.inc();
    }
    Step::Backfilled {
        id: step.id,
        tick: step.tick,
        duplicate: ack.duplicate,
        backup_id,
        overlap: step.overlap,
    }
}

/// Records a step's outcome on the schedule with a compare-and-set against `revision`, the
/// revision it was decided on. Returns when the schedule next needs attention: `None` when the
/// watch brings the new revision (ours, or whoever changed it first).
#[tracing::instrument(skip_all, fields(schedule = %name))]
async fn record(
    firing: &Firing<'_>,
    name: &str,
    revision: u64,
    step: Step,
) -> Option<DateTime<Utc>> {
    let now = Utc::now();
    let outcome = match step {
        Step::Requeue(at) => return at,
        Step::Record(outcome) => Recorded::Decision(outcome),
        Step::Fired {
            decision,
            duplicate,
            backup_id,
        } => {
            // Logged here rather than at publication, where a burst's latency counts.
            let tick = decision.tick.unwrap_or_default();
            if duplicate {
                tracing::info!(tick = %tick, backup = %backup_id, "due backup already published");
            } else {
                tracing::info!(tick = %tick, backup = %backup_id, "due backup published");
            }
            Recorded::Decision(Ok(decision))
        }
        Step::Backfilled {
            id,
            tick,
            duplicate,
            backup_id,
            overlap,
        } => {
            if duplicate {
                tracing::info!(tick = %tick, backup = %backup_id, backfill = id, "backfill tick already published");
            } else {
                tracing::info!(tick = %tick, backup = %backup_id, backfill = id, "due backup published");
            }
            Recorded::Backfill {
                id,
                tick,
                backup_id,
                overlap,
            }
        }
    };
    let schedules = &firing.topology.schedules;
    let mut updated = match schedules.entry(name).await {
        Ok(Some(entry)) if entry.operation == Operation::Put && entry.revision == revision => {
            match serde_json::from_slice::<ScheduleRecord>(&entry.value) {
                Ok(record) => record,
                Err(_) => return None,
            }
        }
        // Changed (another replica recorded this tick, or someone changed the schedule) or
        // deleted: the watch brings the new revision, and with it a new decision. A tick
        // published here and not recorded is published again as a duplicate and recorded then.
        Ok(_) => return None,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read a due schedule; retrying");
            return Some(now + chrono::Duration::seconds(1));
        }
    };
    match outcome {
        Recorded::Backfill {
            id,
            tick,
            backup_id,
            overlap,
        } => {
            let backfill = updated.status.backfill.as_mut()?;
            // Another replica moved the cursor (or a new backfill replaced this one): the
            // watch brings it.
            if backfill.id != id || backfill.next_tick() != Some(tick) {
                return None;
            }
            backfill.done += 1;
            backfill.fired += 1;
            // Wait for this backup's report, unless it came already.
            if overlap == OverlapPolicy::Skip && backfill.last_reported.as_ref() != Some(&backup_id)
            {
                backfill.waiting_for = Some(backup_id);
                backfill.waiting_since = Some(now);
            }
            if backfill.next_tick().is_none() {
                backfill.finished_at = Some(now);
                tracing::info!(backfill = id, fired = backfill.fired, "backfill done");
            }
        }
        Recorded::Decision(Err(error)) => {
            updated.status.phase = SchedulePhase::FailedValidation;
            updated.status.validation_errors = vec![error];
            updated.status.next_run_time = None;
        }
        Recorded::Decision(Ok(decision)) => {
            match decision.action {
                Action::Skip => {
                    firing
                        .metrics
                        .ticks_skipped
                        .with_label_values(&[decision.reason.as_str()])
                        .inc();
                    updated.status.last_skip_reason = Some(decision.reason.as_str().to_string());
                }
                Action::Fire => {
                    updated.status.last_fired_tick = decision.tick;
                    updated.status.last_skip_reason = None;
                }
                Action::Wait | Action::Paused | Action::Invalid => return None,
            }
            updated.status.phase = SchedulePhase::Enabled;
            updated.status.validation_errors.clear();
            updated.status.last_backup = decision.last_backup_after;
            updated.status.last_skipped = decision.last_skipped_after;
            updated.skip_immediately = decision.skip_immediately_after;
            updated.status.activation_pending = decision.activation_pending_after;
            updated.status.next_run_time = decision.next_run_after;
        }
    }
    let body = match serde_json::to_vec(&updated) {
        Ok(body) => body,
        Err(err) => {
            tracing::error!(error = %err, "cannot encode a schedule");
            return None;
        }
    };
    match schedules.update(name, body.into(), revision).await {
        // The watch brings the new revision and requeues the schedule.
        Ok(_) => None,
        Err(err) => {
            // Another replica recorded this tick first, or the bucket is unreachable: either
            // way the watch (or this retry) brings the truth.
            tracing::debug!(error = %err, "schedule status not recorded");
            Some(now + chrono::Duration::seconds(1))
        }
    }
}

/// What the first publication of a tick said.
struct FirstPublication {
    fired_at: DateTime<Utc>,
    backup_id: BackupId,
}

/// The stored due-backup at `sequence`, which must be `schedule`'s `tick`.
async fn first_publication(
    due_stream: &Stream,
    sequence: u64,
    schedule: &ScheduleName,
    tick: DateTime<Utc>,
) -> anyhow::Result<FirstPublication> {
    let message = due_stream
        .get_raw_message(sequence)
        .await
        .with_context(|| format!("reading due-backup {sequence}"))?;
    let event: DueBackup = wire::decode(&message.payload)
        .with_context(|| format!("decoding due-backup {sequence}"))?;
    anyhow::ensure!(
        event.schedule == *schedule && event.tick == tick,
        "due-backup {sequence} is {} at {}, not this tick",
        event.schedule,
        event.tick
    );
    Ok(FirstPublication {
        fired_at: event.fired_at,
        backup_id: event.backup_id,
    })
}

/// What a due-backup event names: the schedule and what it backs up.
pub struct Target<'a> {
    pub schedule: &'a ScheduleName,
    pub cluster: &'a ClusterName,
    pub plan: &'a PlanName,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    pub full_every: Option<FullEvery>,
    /// The schedule's policy merges chains (`chain_mode: merge`): a user's deleted middle
    /// backup is consolidated, so a new backup may build on a chain holding it.
    pub merging: bool,
    pub volumes: &'a [String],
    /// Volumes whose latest upload failed (the schedule remembers them after the failed
    /// backup's record is cleaned up): a full.
    pub failed_volumes: &'a [String],
    pub last_backup_failed: bool,
}

impl<'a> From<&'a ScheduleRecord> for Target<'a> {
    fn from(record: &'a ScheduleRecord) -> Target<'a> {
        Target {
            schedule: &record.name,
            cluster: &record.cluster,
            plan: &record.plan,
            labels: &record.labels,
            annotations: &record.annotations,
            full_every: record.full_every,
            merging: merging(record),
            volumes: &record.volumes,
            failed_volumes: &record.status.failed_volumes,
            last_backup_failed: record.status.last_backup_failed,
        }
    }
}

impl Target<'_> {
    /// Whether the kind to take depends on the schedule's earlier backups: it sets
    /// `full_every` or lists volumes. Otherwise every backup is a full and the catalog is not
    /// read (a burst of thousands of database schedules costs no catalog reads).
    fn has_cadence(&self) -> bool {
        self.full_every.is_some() || !self.volumes.is_empty()
    }
}

/// What a due-backup event asks for: the backup's kind and parent, and per volume.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub kind: BackupKind,
    pub parent: Option<BackupId>,
    pub kind_reason: Option<String>,
    pub volumes: Vec<DueVolume>,
}

/// The kinds to ask for, from the schedule's backups in the catalog (pure:
/// `sexton_retention::cadence`) and the failures the schedule remembers (a volume whose last
/// upload failed gets a full even after the failed record was cleaned up). A parent that is not
/// a valid id (a catalog edited by hand) makes that volume a full (`chain_broken`): a full is
/// always safe.
pub fn ask(target: &Target<'_>, backups: &[sexton_retention::BackupRecord]) -> Asked {
    let parent_id = |parent: Option<String>| parent.and_then(|p| BackupId::new(p).ok());
    let failed = KindReason::LastAttemptFailed.as_str().to_string();
    if target.volumes.is_empty() {
        let choice = sexton_retention::next_backup_kind(target.full_every, backups);
        if target.last_backup_failed {
            return Asked {
                kind: BackupKind::Full,
                parent: None,
                kind_reason: Some(failed),
                volumes: Vec::new(),
            };
        }
        let parent = parent_id(choice.parent);
        let (kind, reason) = match (choice.kind, &parent) {
            (BackupKind::Incremental, None) => (BackupKind::Full, KindReason::ChainBroken),
            (kind, _) => (kind, choice.reason),
        };
        return Asked {
            kind,
            parent,
            kind_reason: Some(reason.as_str().to_string()),
            volumes: Vec::new(),
        };
    }
    let choices = sexton_retention::next_volume_kinds(target.full_every, backups, target.volumes);
    let volumes: Vec<DueVolume> = choices
        .into_iter()
        .map(|volume| {
            if target.failed_volumes.contains(&volume.name) {
                return DueVolume {
                    name: volume.name,
                    kind: BackupKind::Full,
                    parent: None,
                    reason: Some(failed.clone()),
                };
            }
            let parent = parent_id(volume.choice.parent);
            let (kind, reason) = match (volume.choice.kind, &parent) {
                (BackupKind::Incremental, None) => (BackupKind::Full, KindReason::ChainBroken),
                (kind, _) => (kind, volume.choice.reason),
            };
            DueVolume {
                name: volume.name,
                kind,
                parent,
                reason: Some(reason.as_str().to_string()),
            }
        })
        .collect();
    let kind = if volumes.iter().all(|v| v.kind == BackupKind::Full) {
        BackupKind::Full
    } else {
        BackupKind::Incremental
    };
    Asked {
        kind,
        parent: None,
        kind_reason: None,
        volumes,
    }
}

fn merging(record: &ScheduleRecord) -> bool {
    record.policy.chain_mode == sexton_retention::ChainMode::Merge
}

/// The schedule's backups as the cadence reads them. In merge mode a backup a user asked to
/// delete (not forced) does not end its chain: the next backup may build on it, and retention
/// consolidates it into a kept backup before it goes (seed 001: a deleted middle backup is
/// merged, never a reason for a new full). A forced delete goes at once, so it still does.
fn cadence_input(
    target: &Target<'_>,
    record: &sexton_shared::records::BackupRecord,
) -> sexton_retention::BackupRecord {
    let mut backup = record.to_engine();
    if target.merging
        && record.delete_request.as_ref().is_some_and(|r| !r.force)
        && !record.status.is_being_deleted()
    {
        backup.delete_requested = false;
    }
    backup
}

/// Reads the schedule's backups and decides what to ask for; a schedule without cadence takes
/// a full without reading anything.
async fn asked(topology: &Topology, target: &Target<'_>) -> anyhow::Result<Asked> {
    if !target.has_cadence() {
        return Ok(Asked {
            kind: BackupKind::Full,
            parent: None,
            kind_reason: None,
            volumes: Vec::new(),
        });
    }
    let records = Catalog::new(topology.catalog.clone())
        .list_cluster(target.cluster)
        .await
        .context("reading the schedule's backups to choose full or incremental")?;
    let backups: Vec<sexton_retention::BackupRecord> = records
        .iter()
        .filter(|r| r.value.schedule.as_ref() == Some(target.schedule))
        .map(|r| cadence_input(target, &r.value))
        .collect();
    Ok(ask(target, &backups))
}

/// One due-backup to publish: which tick, asked for when, under which id and message id.
pub struct DueRequest {
    pub tick: DateTime<Utc>,
    pub fired_at: DateTime<Utc>,
    pub backup_id: BackupId,
    /// The stream's de-duplication key: `due.<schedule>.<tick-ms>` for a run (and a manual
    /// trigger, whose tick is its second), `backfill.<schedule>.<id>.<tick-ms>` for a backfill.
    pub message_id: String,
    pub backfill: Option<u64>,
}

/// Publishes a `due-backup` event, de-duplicated by its message id. For a duplicate, the
/// acknowledgement names the sequence of the first publication. The caller logs. With
/// `metrics`, a first publication counts the artifacts it asks for, by kind and reason.
pub async fn publish_due(
    topology: &Topology,
    config: &Config,
    target: &Target<'_>,
    request: &DueRequest,
    metrics: Option<&Metrics>,
) -> anyhow::Result<PublishAck> {
    let backup_id = request.backup_id.clone();
    let object_prefix = format!(
        "{}{}/{}/",
        cluster_prefix(&config.s3.prefix, target.cluster),
        target.schedule,
        backup_id
    );
    let asked = asked(topology, target).await?;
    let counted: Vec<(BackupKind, String)> = if asked.volumes.is_empty() {
        asked
            .kind_reason
            .iter()
            .map(|reason| (asked.kind, reason.clone()))
            .collect()
    } else {
        asked
            .volumes
            .iter()
            .map(|v| (v.kind, v.reason.clone().unwrap_or_default()))
            .collect()
    };
    let event = DueBackup {
        schema_version: wire::SCHEMA_VERSION,
        schedule: target.schedule.clone(),
        cluster: target.cluster.clone(),
        plan: target.plan.clone(),
        tick: request.tick,
        fired_at: request.fired_at,
        backup_id,
        backup_name: target.schedule.to_string(),
        object_prefix,
        kind: asked.kind,
        parent: asked.parent,
        kind_reason: asked.kind_reason,
        volumes: asked.volumes,
        labels: target.labels.clone(),
        annotations: target.annotations.clone(),
        backfill: request.backfill,
    };
    let ack = publish_once_acked(
        &topology.jetstream,
        topology::due_subject(target.cluster),
        &request.message_id,
        wire::encode(&event),
    )
    .await?;
    if let (Some(metrics), false) = (metrics, ack.duplicate) {
        for (kind, reason) in counted {
            let kind = match kind {
                BackupKind::Full => "full",
                BackupKind::Incremental => "incremental",
            };
            metrics
                .due_artifact_kinds
                .with_label_values(&[kind, &reason])
                .inc();
        }
    }
    Ok(ack)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sexton_retention::{BackupRecord, VolumeArtifact};

    fn at(minute: u32) -> chrono::DateTime<chrono::FixedOffset> {
        format!("2026-01-01T00:{minute:02}:00Z").parse().unwrap()
    }

    /// Merge mode reads a user's (not forced) delete request as no end of the chain; a forced
    /// one, or any request outside merge mode, ends it (the next backup is a full).
    #[test]
    fn merge_mode_builds_on_a_requested_middle_backup_unless_forced() {
        let (schedule, cluster, plan) = (
            "app".parse().unwrap(),
            "c1".parse().unwrap(),
            "p".parse().unwrap(),
        );
        let labels = BTreeMap::new();
        let volumes = vec!["pv1".to_string()];
        let target = |merging| Target {
            schedule: &schedule,
            cluster: &cluster,
            plan: &plan,
            labels: &labels,
            annotations: &labels,
            full_every: None,
            merging,
            volumes: &volumes,
            failed_volumes: &[],
            last_backup_failed: false,
        };
        let record = |id: &str, parent: Option<&str>, minute: i64, force: Option<bool>| {
            let mut record: sexton_shared::records::BackupRecord =
                serde_json::from_value(serde_json::json!({
                    "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
                    "schedule": "app", "backup_name": "app", "kind": "full",
                    "status": "completed",
                    "completed_at": format!("2026-01-01T00:{minute:02}:00Z"),
                    "artifacts": [format!("backups/c1/app/{id}/metadata.json")],
                }))
                .unwrap();
            record.volumes = vec![match parent {
                None => VolumeArtifact::full("pv1", vec![format!("backups/c1/app/{id}/pv1")]),
                Some(parent) => VolumeArtifact::incremental(
                    "pv1",
                    parent,
                    vec![format!("backups/c1/app/{id}/pv1")],
                ),
            }];
            record.delete_request = force.map(|force| sexton_shared::records::DeleteRequest {
                requested_at: Utc::now(),
                remote: true,
                force,
            });
            record
        };
        for (merging, force, expected) in [
            (true, Some(false), BackupKind::Incremental),
            (true, Some(true), BackupKind::Full),
            (false, Some(false), BackupKind::Full),
            (true, None, BackupKind::Incremental),
        ] {
            let target = target(merging);
            let records = [
                record("d1", None, 1, None),
                record("d2", Some("d1"), 2, force),
                record("d3", Some("d2"), 3, None),
            ];
            let backups: Vec<BackupRecord> =
                records.iter().map(|r| cadence_input(&target, r)).collect();
            let asked = ask(&target, &backups);
            assert_eq!(
                asked.volumes[0].kind, expected,
                "merging {merging}, force {force:?}: {asked:?}"
            );
        }
    }

    #[test]
    fn remembered_failures_and_unusable_parents_ask_for_fulls() {
        let (schedule, cluster, plan) = (
            "app".parse().unwrap(),
            "c1".parse().unwrap(),
            "p".parse().unwrap(),
        );
        let labels = BTreeMap::new();
        let volumes = vec!["pv1".to_string(), "pv2".to_string()];
        let failed = vec!["pv2".to_string()];
        let target = Target {
            schedule: &schedule,
            cluster: &cluster,
            plan: &plan,
            labels: &labels,
            annotations: &labels,
            full_every: None,
            merging: false,
            volumes: &volumes,
            failed_volumes: &failed,
            last_backup_failed: false,
        };
        let d1 = BackupRecord {
            volumes: vec![
                VolumeArtifact::full("pv1", vec!["k1".into()]),
                VolumeArtifact::full("pv2", vec!["k2".into()]),
            ],
            ..BackupRecord::completed_full("d1", at(1))
        };
        let asked = ask(&target, std::slice::from_ref(&d1));
        let got: Vec<(&str, BackupKind, Option<&str>, Option<&str>)> = asked
            .volumes
            .iter()
            .map(|v| {
                (
                    v.name.as_str(),
                    v.kind,
                    v.parent.as_ref().map(|p| p.as_str()),
                    v.reason.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "pv1",
                    BackupKind::Incremental,
                    Some("d1"),
                    Some("chain_continues")
                ),
                ("pv2", BackupKind::Full, None, Some("last_attempt_failed")),
            ]
        );
        assert_eq!(asked.kind, BackupKind::Incremental);
        // A parent id that is not a valid id (edited by hand): a full, chain broken.
        let odd = BackupRecord {
            volumes: vec![VolumeArtifact::full("pv1", vec!["k".into()])],
            ..BackupRecord::completed_full("d/1", at(2))
        };
        let asked = ask(
            &Target {
                failed_volumes: &[],
                ..target
            },
            &[odd],
        );
        assert_eq!(asked.volumes[0].kind, BackupKind::Full);
        assert_eq!(asked.volumes[0].reason.as_deref(), Some("chain_broken"));
        // A failed backup without volumes: a full, whatever full_every says.
        let no_volumes = Target {
            volumes: &[],
            failed_volumes: &[],
            last_backup_failed: true,
            full_every: Some(FullEvery::new(5).unwrap()),
            ..target
        };
        let asked = ask(&no_volumes, &[BackupRecord::completed_full("d1", at(1))]);
        assert_eq!(
            (asked.kind, asked.kind_reason.as_deref()),
            (BackupKind::Full, Some("last_attempt_failed"))
        );
    }
}
