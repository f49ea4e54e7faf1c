//! The channel table (issue 48): every message channel of the fleet declared once, with its
//! payload type, subject, stream, and how its cluster is read; every durable consumer declared
//! once, with what it reads and how it redelivers; and the one receive step every consumer
//! runs (decode, check the subject's cluster against the body's, handle, settle, count).
//!
//! Services name a channel or a durable from this table; none of them builds a subject, a
//! filter or a consumer configuration by hand, and consumers are created here alone
//! ([`Durable::open`]). Tenancy (issue 51) is a change to this table and the connection.
//!
//! The streams, buckets and the subject transforms that partition a stream stay in
//! [`crate::topology`]; a test checks this table against them and against the shipped NATS
//! authorization (`deploy/nats/authorization.conf`).

use std::{future::Future, marker::PhantomData};

use async_nats::jetstream;
use tracing::Instrument as _;

use crate::{
    copies::{CopyDeleteJob, CopyJob},
    names::ClusterName,
    outcome::{settle, Outcome},
    telemetry::ConsumerMetrics,
    topology::{self, SUBJECT_ROOT},
    wire::{
        self, BinlogGcJob, CheckpointComplete, DeleteJob, DueBackup, MergeJob, Report,
        RetentionSweep, Verdict, VerifyDue,
    },
};

mod durables;

pub use durables::{
    consumer_config, open, Durable, Reads, Redelivery, Settings, BINLOG_DURABLE,
    COPY_DELETE_DURABLE, COPY_DURABLE, DEAD_LETTERS_DURABLE, DELETE_DURABLE, DELETE_UNPARTITIONED,
    DURABLES, EXECUTOR_DUE_DURABLE, EXECUTOR_MERGE_DURABLE, EXECUTOR_VERIFY_DURABLE,
    LEGACY_BINLOG_DURABLE, REPORTS_DURABLE, RETENTION_DURABLE, RETENTION_UNPARTITIONED,
    VERDICTS_DURABLE,
};

/// A message whose body names the cluster it is about: its subject must name the same one.
pub trait Addressed: wire::Message {
    fn cluster(&self) -> &ClusterName;
}

macro_rules! addressed {
    ($($payload:ty),* $(,)?) => {
        $(impl Addressed for $payload {
            fn cluster(&self) -> &ClusterName {
                &self.cluster
            }
        })*
    };
}

addressed!(
    DueBackup,
    VerifyDue,
    Verdict,
    Report,
    CheckpointComplete,
    RetentionSweep,
    DeleteJob,
    CopyDeleteJob,
    MergeJob,
    BinlogGcJob,
    CopyJob,
);

/// A role of the fleet, as the shipped NATS authorization names its user
/// (`deploy/nats/authorization.conf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Scheduler,
    RetentionWorker,
    Deleter,
    Copier,
    Executor,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Scheduler,
        Role::RetentionWorker,
        Role::Deleter,
        Role::Copier,
        Role::Executor,
    ];

    /// The user's name in the authorization configuration.
    pub fn user(self) -> &'static str {
        match self {
            Role::Scheduler => "SCHEDULER",
            Role::RetentionWorker => "RETENTION_WORKER",
            Role::Deleter => "DELETER",
            Role::Copier => "COPIER",
            Role::Executor => "EXECUTOR",
        }
    }
}

/// One message channel: messages of `T`, published on `sexton.v1.<kind>.<cluster>` and kept
/// by `stream`. The cluster is the subject's last token as published (a partitioned stream
/// appends the partition when it stores a message; [`topology::published_subject`] takes it
/// off), and it must be the cluster the body names.
pub struct Channel<T> {
    /// What one message is called in logs and refusals (`report`, `delete job`).
    pub noun: &'static str,
    pub stream: &'static str,
    /// The subject's tokens between the root and the cluster.
    pub kind: &'static str,
    /// Who may publish on it (and nobody else).
    pub publishers: &'static [Role],
    payload: PhantomData<fn() -> T>,
}

const fn channel<T>(
    noun: &'static str,
    stream: &'static str,
    kind: &'static str,
    publishers: &'static [Role],
) -> Channel<T> {
    Channel {
        noun,
        stream,
        kind,
        publishers,
        payload: PhantomData,
    }
}

/// Scheduler → executors: take a backup now.
pub const DUES: Channel<DueBackup> = channel(
    "due-backup",
    topology::STREAM_DUE,
    "due",
    &[Role::Scheduler],
);
/// Scheduler → executors: run a restore test.
pub const VERIFY_DUES: Channel<VerifyDue> = channel(
    "verify-due",
    topology::STREAM_VERIFY,
    "verify.due",
    &[Role::Scheduler],
);
/// Executors → scheduler: a restore test's verdict.
pub const VERDICTS: Channel<Verdict> = channel(
    "verdict",
    topology::STREAM_VERIFY,
    "verify.verdict",
    &[Role::Executor],
);
/// Executors → scheduler: a backup started, completed or failed.
pub const REPORTS: Channel<Report> = channel(
    "report",
    topology::STREAM_REPORTS,
    "report",
    &[Role::Executor],
);
/// Scheduler → retention-worker: a backup of the cluster completed.
pub const CHECKPOINTS: Channel<CheckpointComplete> = channel(
    "checkpoint",
    topology::STREAM_RETENTION,
    "retention.checkpoint",
    &[Role::Scheduler],
);
/// Scheduler, copier, retention-worker → retention-worker: run the cluster's retention
/// ([`request_sweep`] is the one writer).
pub const SWEEPS: Channel<RetentionSweep> = channel(
    "sweep",
    topology::STREAM_RETENTION,
    "retention.sweep",
    &[Role::Scheduler, Role::RetentionWorker, Role::Copier],
);
/// Retention-worker → deleter: delete a backup.
pub const DELETE_JOBS: Channel<DeleteJob> = channel(
    "delete job",
    topology::STREAM_JOBS,
    "job.delete",
    &[Role::RetentionWorker],
);
/// Retention-worker → deleter: delete a backup's copy at a location.
pub const COPY_DELETE_JOBS: Channel<CopyDeleteJob> = channel(
    "copy delete job",
    topology::STREAM_JOBS,
    "job.copy-delete",
    &[Role::RetentionWorker],
);
/// Retention-worker → executors: merge a chain's expired head into its oldest kept backup.
pub const MERGE_JOBS: Channel<MergeJob> = channel(
    "merge job",
    topology::STREAM_JOBS,
    "job.merge",
    &[Role::RetentionWorker],
);
/// Retention-worker → deleter: collect the cluster's binlog segments.
pub const BINLOG_JOBS: Channel<BinlogGcJob> = channel(
    "binlog gc job",
    topology::STREAM_BINLOG,
    "binlog",
    &[Role::RetentionWorker],
);
/// Binlog jobs published before issue 32, on SEXTON_JOBS: read until it is empty, never
/// published.
pub const LEGACY_BINLOG_JOBS: Channel<BinlogGcJob> =
    channel("binlog gc job", topology::STREAM_JOBS, "job.binlog", &[]);
/// Scheduler → copier: copy a backup to a location.
pub const COPY_JOBS: Channel<CopyJob> = channel(
    "copy job",
    topology::STREAM_COPIES,
    "copy",
    &[Role::Scheduler],
);

/// A channel's facts, without its payload type: for the checks against the topology and the
/// authorization.
#[derive(Debug, Clone, Copy)]
pub struct Declared {
    pub noun: &'static str,
    pub stream: &'static str,
    pub kind: &'static str,
    pub publishers: &'static [Role],
}

impl<T> Channel<T> {
    pub const fn declared(&self) -> Declared {
        Declared {
            noun: self.noun,
            stream: self.stream,
            kind: self.kind,
            publishers: self.publishers,
        }
    }
}

/// Every channel of the table.
pub const CHANNELS: &[Declared] = &[
    DUES.declared(),
    VERIFY_DUES.declared(),
    VERDICTS.declared(),
    REPORTS.declared(),
    CHECKPOINTS.declared(),
    SWEEPS.declared(),
    DELETE_JOBS.declared(),
    COPY_DELETE_JOBS.declared(),
    MERGE_JOBS.declared(),
    BINLOG_JOBS.declared(),
    LEGACY_BINLOG_JOBS.declared(),
    COPY_JOBS.declared(),
];

impl Declared {
    /// The subject of a message about `cluster`.
    pub fn subject(&self, cluster: &str) -> String {
        format!("{SUBJECT_ROOT}.{}.{cluster}", self.kind)
    }
}

impl<T: Addressed> Channel<T> {
    /// The subject a message about `cluster` is published on.
    pub fn subject(&self, cluster: &ClusterName) -> String {
        format!("{SUBJECT_ROOT}.{}.{cluster}", self.kind)
    }

    /// Every cluster's subject of this channel (`sexton.v1.copy.*`).
    pub fn pattern(&self) -> String {
        format!("{SUBJECT_ROOT}.{}.*", self.kind)
    }

    /// Publishes `message` on its cluster's subject with the de-duplication id `id` (one of
    /// [`ids`]), so a retry or a second replica publishing the same message is dropped by
    /// the stream. Returns the stream's acknowledgement (for a duplicate, the sequence of the
    /// message stored first).
    pub async fn publish(
        &self,
        jetstream: &jetstream::Context,
        message: &T,
        id: &str,
    ) -> anyhow::Result<jetstream::publish::PublishAck> {
        crate::nats::publish_once_acked(
            jetstream,
            self.subject(message.cluster()),
            id,
            wire::encode(message),
        )
        .await
    }

    /// [`Channel::publish`], saying only whether the stream had it already.
    pub async fn publish_once(
        &self,
        jetstream: &jetstream::Context,
        message: &T,
        id: &str,
    ) -> anyhow::Result<bool> {
        Ok(self.publish(jetstream, message, id).await?.duplicate)
    }
}

/// What a durable's messages are read as: one channel's payload, or one of several channels
/// sharing a durable ([`RETENTION_EVENTS`]).
pub trait Receive {
    type Body;

    /// The body of a consumed message, decoded and checked: it must decode as the channel's
    /// payload and name the cluster its subject names (the NATS permissions can scope a user
    /// to its clusters' subjects, and that scope means nothing if the body may name another
    /// cluster). `Err` says why not; such a message can never succeed.
    fn receive(&self, message: &jetstream::Message) -> Result<Self::Body, String>;
}

impl<T: Addressed> Receive for Channel<T> {
    type Body = T;

    fn receive(&self, message: &jetstream::Message) -> Result<T, String> {
        Channel::<T>::receive(self, message)
    }
}

impl<T: Addressed> Channel<T> {
    /// The body of a consumed message, decoded and checked ([`Receive::receive`]).
    pub fn receive(&self, message: &jetstream::Message) -> Result<T, String> {
        let body: T = wire::decode(&message.payload).map_err(|err| err.to_string())?;
        let published = topology::published_subject(&message.subject);
        let expected = self.subject(body.cluster());
        if published != expected {
            return Err(format!(
                "{} for cluster {} arrived on {:?}, not on {expected:?}",
                self.noun,
                body.cluster(),
                published.chars().take(200).collect::<String>()
            ));
        }
        Ok(body)
    }
}

/// The retention-worker's one durable carries two channels: completions and sweeps.
#[derive(Debug)]
pub enum RetentionEvent {
    Checkpoint(CheckpointComplete),
    Sweep(RetentionSweep),
}

impl RetentionEvent {
    pub fn cluster(&self) -> &ClusterName {
        match self {
            RetentionEvent::Checkpoint(event) => &event.cluster,
            RetentionEvent::Sweep(event) => &event.cluster,
        }
    }
}

/// [`CHECKPOINTS`] and [`SWEEPS`], as the retention-worker's durable reads them: by the
/// subject's kind, each checked as its channel checks it.
pub struct RetentionEvents;

pub const RETENTION_EVENTS: RetentionEvents = RetentionEvents;

impl Receive for RetentionEvents {
    type Body = RetentionEvent;

    fn receive(&self, message: &jetstream::Message) -> Result<RetentionEvent, String> {
        let checkpoint = format!("{SUBJECT_ROOT}.{}.", CHECKPOINTS.kind);
        if topology::published_subject(&message.subject).starts_with(&checkpoint) {
            CHECKPOINTS.receive(message).map(RetentionEvent::Checkpoint)
        } else {
            SWEEPS.receive(message).map(RetentionEvent::Sweep)
        }
    }
}

/// Handles one consumed message of `channel`: receives it ([`Channel::receive`]; a message
/// that cannot succeed is poison), hands the body to `handle`, settles the outcome (ack, nak
/// with a delay, term with an incident) and counts it, all in the message's span. The one
/// step every consumer of a channel runs.
pub async fn deliver<R, F, Fut>(
    channel: &R,
    service: &str,
    jetstream: &jetstream::Context,
    metrics: Option<&ConsumerMetrics>,
    message: &jetstream::Message,
    handle: F,
) -> Outcome
where
    R: Receive,
    F: FnOnce(R::Body) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let outcome = async {
        let outcome = match channel.receive(message) {
            Ok(body) => handle(body).await,
            Err(why) => Outcome::Poison(why),
        };
        settle(jetstream, service, message, &outcome).await;
        outcome
    }
    .instrument(crate::telemetry::message_span(message))
    .await;
    if let Some(metrics) = metrics {
        metrics.observe(&outcome);
    }
    outcome
}

/// Why a cluster's retention is asked to run outside its schedule's sweeps: the one home of a
/// sweep's de-duplication id, so that the same cause asked twice (a retry, a second replica)
/// is one run.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepCause {
    /// The scheduler's throttled pass; `previous`: the cluster's last run it follows, in
    /// milliseconds (one sweep per interval, whichever replica asks).
    Scheduled { previous: i64 },
    /// A merge was recorded (its result's uid).
    MergeRecorded { uid: String },
    /// A restore test's verdict came (its request).
    Verdict { request_id: String },
    /// A catalog import brought records back, at this instant (micros).
    Import { at_micros: i64 },
    /// A schedule was deleted; `id` names the deletion.
    ScheduleDeleted { id: String },
    /// Asked through the API (`id` given by the caller).
    Asked { id: String },
    /// A run that could not finish asks for another (when it started, micros).
    Rerun { started_micros: i64 },
    /// A copy was recorded or given up; `id` names it.
    Copied { id: String },
    /// A copy was refused because its source looks tampered or gone: scrub (the backup's id).
    CopyRefused { backup: String },
}

impl SweepCause {
    /// The sweep's de-duplication id.
    pub fn id(&self, cluster: &ClusterName) -> String {
        match self {
            SweepCause::Scheduled { previous } => format!("sweep.{cluster}.{previous}"),
            SweepCause::MergeRecorded { uid } => format!("merge-recorded.{cluster}.{uid}"),
            SweepCause::Verdict { request_id } => format!("verdict.{cluster}.{request_id}"),
            SweepCause::Import { at_micros } => format!("import.{cluster}.{at_micros}"),
            SweepCause::Rerun { started_micros } => format!("rerun.{cluster}.{started_micros}"),
            SweepCause::CopyRefused { backup } => format!("scrub.copy-refused.{cluster}.{backup}"),
            SweepCause::ScheduleDeleted { id }
            | SweepCause::Asked { id }
            | SweepCause::Copied { id } => id.clone(),
        }
    }
}

/// Asks for a retention run of `cluster` (with a scrub of its catalog first when `scrub`):
/// the one writer of [`SWEEPS`]. Returns whether the stream had this cause's sweep already.
pub async fn request_sweep(
    jetstream: &jetstream::Context,
    cluster: &ClusterName,
    now: chrono::DateTime<chrono::Utc>,
    scrub: bool,
    cause: &SweepCause,
) -> anyhow::Result<bool> {
    let sweep = RetentionSweep {
        schema_version: wire::SCHEMA_VERSION,
        cluster: cluster.clone(),
        requested_at: now,
        scrub,
    };
    SWEEPS
        .publish_once(jetstream, &sweep, &cause.id(cluster))
        .await
}

/// The de-duplication ids of the other channels' messages, each in one place.
pub mod ids {
    use crate::wire::{MergeJob, Report, ReportStatus};

    /// An executor's report: one per backup and status.
    pub fn report(report: &Report) -> String {
        let status = match report.status {
            ReportStatus::Started => "started",
            ReportStatus::Completed => "completed",
            ReportStatus::Failed => "failed",
        };
        format!("report.{}.{}.{status}", report.cluster, report.backup_id)
    }

    /// A schedule's due-backup at `tick`: one per schedule and tick, however many replicas
    /// fire it.
    pub fn due(schedule: &str, tick: chrono::DateTime<chrono::Utc>) -> String {
        format!("due.{schedule}.{}", tick.timestamp_millis())
    }

    /// A backfill's due-backup: one per schedule, backfill and tick.
    pub fn due_backfill(
        schedule: &str,
        backfill: &str,
        tick: chrono::DateTime<chrono::Utc>,
    ) -> String {
        format!("backfill.{schedule}.{backfill}.{}", tick.timestamp_millis())
    }

    /// A manual backup: one per schedule and second (a second request within the same second
    /// is the same request).
    pub fn due_manual(schedule: &str, tick: chrono::DateTime<chrono::Utc>) -> String {
        format!("manual.{schedule}.{}", tick.timestamp_millis())
    }

    /// A restore test: one per request.
    pub fn verify_due(request_id: &str) -> String {
        format!("verify.{request_id}")
    }

    /// A restore test's verdict: one per request.
    pub fn verdict(request_id: &str) -> String {
        format!("verdict.{request_id}")
    }

    /// A backup's delete job: its uid and the revision of its mark, so a job published again
    /// for the same mark is a no-op.
    pub fn delete_job(job: &crate::wire::DeleteJob) -> String {
        format!("del.{}.{}", job.uid, job.revision)
    }

    /// The delete job of a backup's copy: its uid, the location and the mark.
    pub fn copy_delete_job(job: &crate::copies::CopyDeleteJob) -> String {
        format!("cdel.{}.{}.{}", job.uid, job.location, job.revision)
    }

    /// A backup's completion, for retention: one per backup.
    pub fn checkpoint(event: &crate::wire::CheckpointComplete) -> String {
        format!("ckpt.{}.{}", event.cluster, event.backup_id)
    }

    /// A copy of a backup (by its uid) to a location: one per copy.
    pub fn copy_job(job: &crate::copies::CopyJob) -> String {
        format!("copy.{}.{}", job.uid, job.location)
    }

    /// The report of a merge's result: one per target (uid) and volume.
    pub fn merge_report(job: &MergeJob) -> String {
        format!(
            "merge.{}.{}.{}.{}",
            job.cluster,
            job.target.id,
            job.target.uid,
            job.volume.as_deref().unwrap_or("")
        )
    }

    /// A merge job: its cluster, target and (for a volume) volume, and its sources, which are
    /// one chain ending at the target's parent (validated): the first and the last with their
    /// count name it.
    pub fn merge_job(job: &MergeJob) -> String {
        let first = job.sources.first().map_or("", |s| s.uid.as_str());
        let last = job.sources.last().map_or("", |s| s.uid.as_str());
        match &job.volume {
            None => format!(
                "merge.{}.{}.{first}.{last}.{}",
                job.cluster,
                job.target.uid,
                job.sources.len()
            ),
            Some(volume) => format!(
                "merge.{}.{}.{volume}.{first}.{last}.{}",
                job.cluster,
                job.target.uid,
                job.sources.len()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use async_nats::jetstream::consumer::pull;

    use super::*;

    #[test]
    fn every_channel_is_on_its_streams_subjects() {
        let streams = topology::stream_configs(1);
        let covered = |stream: &str, subject: &str| {
            streams
                .iter()
                .find(|s| s.name == stream)
                .unwrap_or_else(|| panic!("no stream {stream}"))
                .subjects
                .iter()
                .any(|pattern| matches(pattern, subject))
        };
        let cluster = ClusterName::new("db-1").unwrap();
        for (stream, subject) in [
            (DUES.stream, DUES.subject(&cluster)),
            (VERIFY_DUES.stream, VERIFY_DUES.subject(&cluster)),
            (VERDICTS.stream, VERDICTS.subject(&cluster)),
            (REPORTS.stream, REPORTS.subject(&cluster)),
            (CHECKPOINTS.stream, CHECKPOINTS.subject(&cluster)),
            (SWEEPS.stream, SWEEPS.subject(&cluster)),
            (DELETE_JOBS.stream, DELETE_JOBS.subject(&cluster)),
            (COPY_DELETE_JOBS.stream, COPY_DELETE_JOBS.subject(&cluster)),
            (MERGE_JOBS.stream, MERGE_JOBS.subject(&cluster)),
            (BINLOG_JOBS.stream, BINLOG_JOBS.subject(&cluster)),
            (
                LEGACY_BINLOG_JOBS.stream,
                LEGACY_BINLOG_JOBS.subject(&cluster),
            ),
            (COPY_JOBS.stream, COPY_JOBS.subject(&cluster)),
        ] {
            assert!(
                covered(stream, &subject),
                "{subject} is not kept by {stream}"
            );
        }
    }

    /// Whether NATS subject `subject` matches the pattern `pattern` (`*` one token, `>` the
    /// rest).
    pub(crate) fn matches(pattern: &str, subject: &str) -> bool {
        let mut subject = subject.split('.');
        for token in pattern.split('.') {
            match (token, subject.next()) {
                (">", Some(_)) => return true,
                ("*", Some(_)) => {}
                (token, Some(s)) if token == s => {}
                _ => return false,
            }
        }
        subject.next().is_none()
    }

    #[test]
    fn the_durables_read_what_they_did_before_the_table() {
        // The configurations the services created by hand before issue 48, kept exactly.
        let wait = Duration::from_secs(30);
        let set = Settings::ack_wait(wait);
        assert_eq!(
            REPORTS_DURABLE.config(None, set),
            consumer_config("scheduler-reports", None, wait)
        );
        assert_eq!(
            VERDICTS_DURABLE.config(None, set),
            consumer_config(
                "scheduler-verdicts",
                Some("sexton.v1.verify.verdict.*".into()),
                wait
            )
        );
        assert_eq!(
            RETENTION_DURABLE.config(Some(5), set),
            consumer_config(
                &topology::retention_partition_durable(5),
                Some(topology::retention_partition_filter(5)),
                wait
            )
        );
        assert_eq!(
            BINLOG_DURABLE.config(Some(3), set),
            consumer_config(
                &topology::binlog_partition_durable(3),
                Some(topology::binlog_partition_filter(3)),
                wait
            )
        );
        let deleter = Settings {
            ack_wait: wait,
            max_ack_pending: Some(64),
        };
        assert_eq!(
            DELETE_DURABLE.config(Some(7), deleter),
            pull::Config {
                max_ack_pending: 64,
                backoff: Vec::new(),
                ..consumer_config(
                    &topology::delete_partition_durable(7),
                    Some(topology::delete_partition_filter(7)),
                    wait
                )
            }
        );
        assert_eq!(
            COPY_DURABLE.config(None, deleter),
            pull::Config {
                max_deliver: -1,
                backoff: Vec::new(),
                max_ack_pending: 64,
                ..consumer_config("copier", Some("sexton.v1.copy.*".into()), wait)
            }
        );
        // Every partitioned durable's names are the ones the advisories and pollers use.
        assert_eq!(
            DELETE_DURABLE.names(),
            (0..topology::DELETE_PARTITIONS)
                .map(topology::delete_partition_durable)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_sweeps_id_is_its_cause() {
        let c2 = ClusterName::new("c2").unwrap();
        assert_eq!(SWEEPS.subject(&c2), "sexton.v1.retention.sweep.c2");
        assert_eq!(SweepCause::Scheduled { previous: 4 }.id(&c2), "sweep.c2.4");
        assert_eq!(
            SweepCause::Verdict {
                request_id: "r1".into()
            }
            .id(&c2),
            "verdict.c2.r1"
        );
        assert_eq!(
            SweepCause::CopyRefused {
                backup: "b1".into()
            }
            .id(&c2),
            "scrub.copy-refused.c2.b1"
        );
    }

    /// What each user of the shipped authorization may publish (the quoted subjects of its
    /// `publish.allow`).
    fn publish_rights() -> std::collections::BTreeMap<String, Vec<String>> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/nats/authorization.conf"
        );
        let text = std::fs::read_to_string(path).expect("the shipped authorization");
        let mut rights = std::collections::BTreeMap::new();
        let mut user: Option<String> = None;
        let mut publishing = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(name) = line
                .strip_prefix("    ")
                .and_then(|rest| rest.strip_suffix(" = {"))
                .filter(|name| name.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            {
                user = Some(name.to_string());
                publishing = false;
            } else if trimmed.starts_with("publish = {") {
                publishing = true;
            } else if trimmed.starts_with("subscribe = {") {
                publishing = false;
            } else if let (Some(user), true) = (&user, publishing) {
                if let Some(subject) = trimmed
                    .strip_prefix('"')
                    .and_then(|rest| rest.split('"').next())
                {
                    rights
                        .entry(user.clone())
                        .or_insert_with(Vec::new)
                        .push(subject.to_string());
                }
            }
        }
        rights
    }

    #[test]
    fn the_shipped_authorization_lets_each_role_do_what_the_table_says_and_no_more() {
        let rights = publish_rights();
        let may = |role: Role, subject: &str| {
            rights
                .get(role.user())
                .unwrap_or_else(|| panic!("no user {} in the authorization", role.user()))
                .iter()
                .any(|allowed| matches(allowed, subject))
        };
        let mut wrong = Vec::new();
        for channel in CHANNELS {
            let subject = channel.subject("db-1");
            for role in Role::ALL {
                let expected = channel.publishers.contains(&role);
                if may(role, &subject) != expected {
                    wrong.push(format!(
                        "{} {} publish {} ({})",
                        role.user(),
                        if expected { "cannot" } else { "may" },
                        subject,
                        channel.noun
                    ));
                }
            }
        }
        for durable in DURABLES {
            let partitions: Vec<Option<u16>> = match durable.partitions {
                Some(n) => (0..n).map(Some).collect(),
                None => vec![None],
            };
            for partition in partitions {
                let name = durable.name_of(partition);
                let stream = durable.stream;
                let create = match durable.filter(partition) {
                    Some(filter) => format!("$JS.API.CONSUMER.CREATE.{stream}.{name}.{filter}"),
                    None => format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
                };
                for subject in [
                    create,
                    format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}"),
                    format!("$JS.ACK.{stream}.{name}.1.1.1.1.1.1.1"),
                ] {
                    for role in Role::ALL {
                        let expected = role == durable.reader;
                        if may(role, &subject) != expected {
                            wrong.push(format!(
                                "{} {} {subject}",
                                role.user(),
                                if expected { "cannot" } else { "may" }
                            ));
                        }
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
