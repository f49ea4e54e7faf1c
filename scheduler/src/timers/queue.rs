//! The timer queue's pure half: every schedule this replica knows, parsed once per revision
//! into compact [`Facts`] (a few hundred bytes each, where the whole record is several times
//! that), and ordered in a `BTreeSet` by the instant it next needs attention. What a schedule
//! does at an instant (fire, skip, wait, a backfill step) is decided here on the facts, with
//! `now` a parameter; the loop in [`super`] reads the clock, publishes and records.
//!
//! Also the schedule's pure projections the API shares ([`state`], [`timing_spec`],
//! [`explain`]) and the backup id of a firing ([`backup_id_for`]).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use chrono::{DateTime, Utc};
use sexton_model::{
    names::{BackupId, ClusterName, PlanName, ScheduleName},
    records::{
        Backfill, InFlight, OverlapPolicy, SchedulePhase, ScheduleRecord, IN_FLIGHT_STALE_AFTER,
    },
};
use sexton_retention::FullEvery;
use sexton_schedule::{
    Action, Decision, Explanation, Reason, ScheduleDoc, ScheduleState, Timing, TimingSpec,
};

use super::asking::{merging, Target};
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

/// The clusters that have at least one schedule, as this replica's watch sees them; the
/// retention sweeps read it instead of listing every schedule.
pub type ClusterSet = tokio::sync::watch::Sender<BTreeSet<ClusterName>>;

/// The parts of a schedule its decision depends on, parsed once per revision: a few hundred
/// bytes, where the whole record (policy, labels, status) is several times that. The timer
/// queue keeps these; the record itself is read again when the schedule's time comes.
pub(super) struct Facts {
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
    pub(super) failed_validation: bool,
    /// The backfill's next step, while one runs.
    pub(super) backfill: Option<Box<BackfillStep>>,
}

/// What the next step of a running backfill needs.
#[derive(Debug, Clone)]
pub(super) struct BackfillStep {
    pub(super) id: u64,
    pub(super) tick: DateTime<Utc>,
    pub(super) overlap: OverlapPolicy,
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
    pub(super) fn of(record: &ScheduleRecord) -> Facts {
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
    pub(super) fn target<'a>(
        &'a self,
        schedule: &'a ScheduleName,
        cluster: &'a ClusterName,
    ) -> Target<'a> {
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
    pub(super) fn backfill_ready_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
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

    pub(super) fn decide(
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
    pub(super) fn decided_at_first_firing(
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
pub(super) struct Slot {
    pub(super) facts: Facts,
    pub(super) cluster: ClusterName,
    /// The revision the facts come from: a decision is recorded against it.
    pub(super) revision: u64,
    queued_at: Option<DateTime<Utc>>,
}

/// Every schedule this replica knows, the order in which they need attention, and how many
/// schedules each cluster has. Names are shared between the map and the order.
#[derive(Default)]
pub(super) struct Queue {
    pub(super) slots: HashMap<Arc<str>, Slot>,
    pub(super) order: BTreeSet<(DateTime<Utc>, Arc<str>)>,
    schedules_per_cluster: HashMap<ClusterName, usize>,
    /// The schedules paused after consecutive failures, and their clusters: the gauge
    /// `sexton_schedules_paused_after_failures`.
    paused_after_failures: HashMap<Arc<str>, ClusterName>,
}

impl Queue {
    /// Queues `name` to be attended at `at`, or takes it out of the order (`None`).
    pub(super) fn set(&mut self, name: &str, at: Option<DateTime<Utc>>) {
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
    pub(super) fn pop_due(&mut self, now: DateTime<Utc>) -> Vec<Arc<str>> {
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

    /// Takes in a change of the schedules bucket, as the watch brings it at `now`: the value
    /// of key `name` at `revision`, `None` once deleted. The schedule's facts are parsed once
    /// and it is queued for when it next needs attention.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply_update(
        &mut self,
        name: &str,
        value: Option<&[u8]>,
        revision: u64,
        now: DateTime<Utc>,
        server_default: bool,
        clusters: &ClusterSet,
        metrics: &Metrics,
    ) {
        let Some(value) = value else {
            self.remove(name, clusters);
            self.note_paused_after_failures(name, None, metrics);
            let _ = metrics.schedule_drifted.remove_label_values(&[name]);
            return;
        };
        let record: ScheduleRecord = match serde_json::from_slice(value) {
            Ok(record) => record,
            Err(err) => {
                tracing::error!(schedule = %name, error = %err, "unreadable schedule record; not scheduling it");
                self.remove(name, clusters);
                self.note_paused_after_failures(name, None, metrics);
                return;
            }
        };
        match sexton_shared::api::drifted(&record) {
            Some(drifted) => metrics
                .schedule_drifted
                .with_label_values(&[name])
                .set(i64::from(drifted)),
            None => {
                let _ = metrics.schedule_drifted.remove_label_values(&[name]);
            }
        }
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
            revision,
            queued_at: None,
        };
        let at = slot.facts.attention_at(name, now, server_default);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(second: u32) -> DateTime<Utc> {
        format!("2026-01-01T00:00:{second:02}Z").parse().unwrap()
    }

    fn record(name: &str, cluster: &str) -> Vec<u8> {
        let record: ScheduleRecord = serde_json::from_value(serde_json::json!({
            "name": name, "cluster": cluster, "plan": "p", "cron": "@hourly",
            "created_at": "2026-01-01T00:00:00Z", "policy": {"keep_last": 3},
        }))
        .unwrap();
        serde_json::to_vec(&record).unwrap()
    }

    #[test]
    fn the_queue_pops_what_is_due_in_order_and_only_once() {
        let mut queue = Queue::default();
        for name in ["a", "b", "c"] {
            queue.slots.insert(
                Arc::from(name),
                Slot {
                    facts: Facts::of(&serde_json::from_slice(&record(name, "c1")).unwrap()),
                    cluster: "c1".parse().unwrap(),
                    revision: 1,
                    queued_at: None,
                },
            );
        }
        queue.set("c", Some(t(3)));
        queue.set("a", Some(t(1)));
        queue.set("b", Some(t(2)));
        // Moving an entry replaces its place in the order.
        queue.set("b", Some(t(5)));
        queue.set("unknown", Some(t(0)));
        let due: Vec<String> = queue.pop_due(t(3)).iter().map(|n| n.to_string()).collect();
        assert_eq!(due, ["a", "c"]);
        assert!(queue.pop_due(t(4)).is_empty());
        assert_eq!(queue.pop_due(t(9)).len(), 1);
        assert!(queue.order.is_empty());
    }

    #[test]
    fn clusters_are_counted_in_on_their_first_schedule_and_out_on_their_last() {
        let (clusters, seen) = tokio::sync::watch::channel(BTreeSet::new());
        let metrics = Metrics::new();
        let mut queue = Queue::default();
        let mut update = |name: &str, value: Option<&[u8]>, revision| {
            queue.apply_update(name, value, revision, t(0), false, &clusters, &metrics)
        };
        update("a", Some(&record("a", "c1")), 1);
        update("b", Some(&record("b", "c1")), 2);
        update("c", Some(&record("c", "c2")), 3);
        assert_eq!(seen.borrow().len(), 2);
        // A schedule that moves to another cluster counts there only.
        update("c", Some(&record("c", "c1")), 4);
        assert_eq!(
            seen.borrow().iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            ["c1"]
        );
        update("a", None, 5);
        // An unreadable record is not scheduled.
        update("b", Some(b"{"), 6);
        assert_eq!(queue.slots.len(), 1);
        assert_eq!(seen.borrow().len(), 1);
    }
}
