//! The timer loop: every schedule sits in a queue ordered by the instant it next needs
//! attention ([`queue`], pure), kept current by a watch on the schedules bucket. Nothing scans
//! all schedules on a clock; the loop sleeps until the earliest entry, so idle schedules cost no
//! CPU. This module is the I/O half: the watch, the clock, publishing and recording; what to
//! do is decided in [`queue`] and what to ask for in [`asking`], both without I/O.
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

mod asking;
mod queue;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream::{kv::Operation, publish::PublishAck, stream::Stream};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use sexton_model::{
    names::{BackupId, ScheduleName},
    records::{BackupKind, OverlapPolicy, SchedulePhase, ScheduleRecord},
    wire::{self, DueBackup},
};
use sexton_schedule::{Action, Decision};
use sexton_shared::{
    catalog::Catalog,
    channels,
    config::Config,
    object_store::cluster_prefix,
    topology::{self, Topology},
    Shutdown,
};

pub use asking::{ask, Asked, Target};
pub use queue::{backup_id_for, explain, state, timing_spec, Asking, ClusterSet};

use asking::cadence_input;
use queue::{Queue, Slot};

use crate::metrics::Metrics;

/// How many due ticks one replica publishes at once when thousands of schedules share a cron
/// tick: all of a burst's publications are pipelined on the connection (async-nats allows 5,000
/// unacknowledged publications).
const PUBLISH_CONCURRENCY: usize = 1024;
/// How many compare-and-sets one replica has in flight while it records a burst; nobody waits
/// for these, so they leave the server room.
const RECORD_CONCURRENCY: usize = 256;

/// What attending a schedule needs besides the schedule.
struct Firing<'a> {
    topology: &'a Topology,
    dues: &'a async_nats::jetstream::kv::Store,
    config: &'a Config,
    metrics: &'a Metrics,
    due_stream: &'a Stream,
}

pub async fn run(
    topology: Topology,
    dues: async_nats::jetstream::kv::Store,
    config: Config,
    metrics: Arc<Metrics>,
    clusters: ClusterSet,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let server_default = config.scheduler.skip_immediately_default;
    let mut queue = Queue::default();
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
                    let value = (entry.operation == Operation::Put).then_some(&entry.value[..]);
                    queue.apply_update(&entry.key, value, entry.revision, Utc::now(), server_default, &clusters, &metrics);
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
                    dues: &dues,
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
                message_id: channels::ids::due(schedule.as_str(), tick),
                backfill: None,
            };
            let published = publish_due(
                firing.topology,
                firing.dues,
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
        message_id: channels::ids::due_backfill(schedule.as_str(), &step.id.to_string(), step.tick),
        backfill: Some(step.id),
    };
    let ack = match publish_due(
        firing.topology,
        firing.dues,
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
    let mut updated = match sexton_shared::leader_read::latest(schedules, name).await {
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
    dues: &async_nats::jetstream::kv::Store,
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
    // Remembered before it is sent (issue 29): intake judges the report against it.
    crate::dues::remember(
        dues,
        target.cluster,
        &event.backup_id,
        &crate::dues::IssuedDue {
            schedule: event.schedule.clone(),
            plan: event.plan.clone(),
            tick: event.tick,
            fired_at: event.fired_at,
        },
    )
    .await?;
    let ack = channels::DUES
        .publish(&topology.jetstream, &event, &request.message_id)
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
