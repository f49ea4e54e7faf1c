//! The durables of the channel table: every durable consumer of the fleet declared once, with
//! the stream it reads, what of it, its partitions, how it redelivers and whose it is; and
//! [`open`], where every consumer is created.

use std::time::Duration;

use async_nats::jetstream::{
    self,
    consumer::{pull, AckPolicy, PullConsumer},
};

use super::Role;
use crate::topology::{self, SUBJECT_ROOT};

/// How a durable's messages come back after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivery {
    /// The server's growing delays ([`consumer_config`]), [`topology::MAX_DELIVER`]
    /// deliveries.
    Backoff,
    /// No backoff: JetStream applies it to acknowledgement timeouts too, so a long job would be
    /// delivered again; the handler naks with delays of its own and keeps a long job with
    /// progress acks. At most `max_deliver` deliveries (`-1`: until done: a copy waits out an
    /// outage of its destination however long it lasts; poison is terminated at once).
    Own { max_deliver: i64 },
}

/// What a durable reads of its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The whole stream, unfiltered (nats-server counts a durable filtered on a work queue's
    /// own subjects as unfiltered, and would keep what the others acknowledged).
    Stream,
    /// The subjects `sexton.v1.<pattern>`.
    Subjects(&'static str),
}

/// One durable consumer. A partitioned durable is one per partition: `<name>-p<k>`, reading
/// `sexton.v1.<pattern>.<k>` (the stream's transform appends a cluster's partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durable {
    /// Whose durable it is.
    pub reader: Role,
    pub name: &'static str,
    pub stream: &'static str,
    pub reads: Reads,
    pub partitions: Option<u16>,
    pub redelivery: Redelivery,
}

/// What a durable's service sets at run time: its ack wait, and how many messages it may hold
/// unacknowledged (`None`: the server's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub ack_wait: Duration,
    pub max_ack_pending: Option<i64>,
}

impl Settings {
    pub const fn ack_wait(ack_wait: Duration) -> Settings {
        Settings {
            ack_wait,
            max_ack_pending: None,
        }
    }
}

const fn durable(
    reader: Role,
    name: &'static str,
    stream: &'static str,
    reads: Reads,
    partitions: Option<u16>,
    redelivery: Redelivery,
) -> Durable {
    Durable {
        reader,
        name,
        stream,
        reads,
        partitions,
        redelivery,
    }
}

/// The scheduler's executor reports.
pub const REPORTS_DURABLE: Durable = durable(
    Role::Scheduler,
    topology::CONSUMER_REPORTS,
    topology::STREAM_REPORTS,
    Reads::Stream,
    None,
    Redelivery::Backoff,
);
/// The scheduler's restore-test verdicts.
pub const VERDICTS_DURABLE: Durable = durable(
    Role::Scheduler,
    topology::CONSUMER_VERDICTS,
    topology::STREAM_VERIFY,
    Reads::Subjects("verify.verdict.*"),
    None,
    Redelivery::Backoff,
);
/// The retention-worker's checkpoints and sweeps, one durable per partition.
pub const RETENTION_DURABLE: Durable = durable(
    Role::RetentionWorker,
    topology::CONSUMER_RETENTION,
    topology::STREAM_RETENTION,
    Reads::Subjects("retention.*.*"),
    Some(topology::RETENTION_PARTITIONS),
    Redelivery::Backoff,
);
/// The retention events of a stream created before issue 32 (no partitions): every replica
/// reads the one durable.
pub const RETENTION_UNPARTITIONED: Durable = durable(
    Role::RetentionWorker,
    topology::CONSUMER_RETENTION,
    topology::STREAM_RETENTION,
    Reads::Stream,
    None,
    Redelivery::Backoff,
);
/// The deleter's delete jobs, one durable per partition.
pub const DELETE_DURABLE: Durable = durable(
    Role::Deleter,
    topology::CONSUMER_DELETER,
    topology::STREAM_JOBS,
    Reads::Subjects("job.delete.*"),
    Some(topology::DELETE_PARTITIONS),
    Redelivery::Own {
        max_deliver: topology::MAX_DELIVER,
    },
);
/// The delete jobs of a stream created before issue 32 (no partitions).
pub const DELETE_UNPARTITIONED: Durable = durable(
    Role::Deleter,
    topology::CONSUMER_DELETER,
    topology::STREAM_JOBS,
    Reads::Subjects("job.delete.*"),
    None,
    Redelivery::Own {
        max_deliver: topology::MAX_DELIVER,
    },
);
/// The deleter's binlog jobs, one durable per partition.
pub const BINLOG_DURABLE: Durable = durable(
    Role::Deleter,
    topology::CONSUMER_DELETER_BINLOG,
    topology::STREAM_BINLOG,
    Reads::Subjects("binlog.*"),
    Some(topology::DELETE_PARTITIONS),
    Redelivery::Backoff,
);
/// Binlog jobs published before issue 32 on SEXTON_JOBS.
pub const LEGACY_BINLOG_DURABLE: Durable = durable(
    Role::Deleter,
    topology::CONSUMER_DELETER_BINLOG,
    topology::STREAM_JOBS,
    Reads::Subjects("job.binlog.*"),
    None,
    Redelivery::Backoff,
);
/// The deleter's copy delete jobs: a location down for hours delays its deletions that long.
pub const COPY_DELETE_DURABLE: Durable = durable(
    Role::Deleter,
    topology::CONSUMER_DELETER_COPIES,
    topology::STREAM_JOBS,
    Reads::Subjects("job.copy-delete.*"),
    None,
    Redelivery::Own { max_deliver: -1 },
);
/// The deleter's max-deliveries advisories of delete jobs.
pub const DEAD_LETTERS_DURABLE: Durable = durable(
    Role::Deleter,
    topology::CONSUMER_DEAD_LETTERS,
    topology::STREAM_DEAD_LETTERS,
    Reads::Stream,
    None,
    Redelivery::Backoff,
);
/// The copier's copy jobs: a copy waits out an outage of its destination.
pub const COPY_DURABLE: Durable = durable(
    Role::Copier,
    topology::CONSUMER_COPIER,
    topology::STREAM_COPIES,
    Reads::Subjects("copy.*"),
    None,
    Redelivery::Own { max_deliver: -1 },
);
/// The reference executor's due-backups.
pub const EXECUTOR_DUE_DURABLE: Durable = durable(
    Role::Executor,
    topology::CONSUMER_EXECUTOR,
    topology::STREAM_DUE,
    Reads::Stream,
    None,
    Redelivery::Backoff,
);
/// The reference executor's restore tests.
pub const EXECUTOR_VERIFY_DURABLE: Durable = durable(
    Role::Executor,
    topology::CONSUMER_EXECUTOR_VERIFY,
    topology::STREAM_VERIFY,
    Reads::Subjects("verify.due.*"),
    None,
    Redelivery::Backoff,
);
/// The reference executor's merge jobs.
pub const EXECUTOR_MERGE_DURABLE: Durable = durable(
    Role::Executor,
    topology::CONSUMER_EXECUTOR_MERGE,
    topology::STREAM_JOBS,
    Reads::Subjects("job.merge.*"),
    None,
    Redelivery::Backoff,
);

/// Every durable of the table, for the checks against the topology and the authorization.
pub const DURABLES: &[Durable] = &[
    REPORTS_DURABLE,
    VERDICTS_DURABLE,
    RETENTION_DURABLE,
    RETENTION_UNPARTITIONED,
    DELETE_DURABLE,
    DELETE_UNPARTITIONED,
    BINLOG_DURABLE,
    LEGACY_BINLOG_DURABLE,
    COPY_DELETE_DURABLE,
    DEAD_LETTERS_DURABLE,
    COPY_DURABLE,
    EXECUTOR_DUE_DURABLE,
    EXECUTOR_VERIFY_DURABLE,
    EXECUTOR_MERGE_DURABLE,
];

impl Durable {
    /// The durable's name: of `partition`'s durable where it is partitioned.
    pub fn name_of(&self, partition: Option<u16>) -> String {
        match (self.partitions, partition) {
            (Some(_), Some(k)) => format!("{}-p{k}", self.name),
            _ => self.name.to_string(),
        }
    }

    /// What the durable (of `partition`) reads; `None`: the whole stream.
    pub fn filter(&self, partition: Option<u16>) -> Option<String> {
        match (self.reads, self.partitions, partition) {
            (Reads::Stream, ..) => None,
            (Reads::Subjects(pattern), Some(_), Some(k)) => {
                Some(format!("{SUBJECT_ROOT}.{pattern}.{k}"))
            }
            (Reads::Subjects(pattern), ..) => Some(format!("{SUBJECT_ROOT}.{pattern}")),
        }
    }

    /// The consumer's configuration.
    pub fn config(&self, partition: Option<u16>, settings: Settings) -> pull::Config {
        let name = self.name_of(partition);
        let mut config = consumer_config(&name, self.filter(partition), settings.ack_wait);
        if let Redelivery::Own { max_deliver } = self.redelivery {
            config.backoff = Vec::new();
            config.max_deliver = max_deliver;
        }
        if let Some(max) = settings.max_ack_pending {
            config.max_ack_pending = max;
        }
        config
    }

    /// Opens the durable (of `partition`), creating it where it is missing: the one place a
    /// service's consumer is created. An existing durable keeps the configuration it was
    /// created with.
    pub async fn open(
        &self,
        jetstream: &jetstream::Context,
        partition: Option<u16>,
        settings: Settings,
    ) -> anyhow::Result<PullConsumer> {
        open(jetstream, self.stream, self.config(partition, settings)).await
    }

    /// Every durable name this declaration stands for (each partition's).
    pub fn names(&self) -> Vec<String> {
        match self.partitions {
            Some(n) => (0..n).map(|k| self.name_of(Some(k))).collect(),
            None => vec![self.name.to_string()],
        }
    }
}

/// A durable pull consumer with redelivery settings: explicit acks, `ack_wait`, growing delays
/// between the [`topology::MAX_DELIVER`] deliveries of a message that keeps failing.
pub fn consumer_config(durable: &str, filter: Option<String>, ack_wait: Duration) -> pull::Config {
    pull::Config {
        durable_name: Some(durable.to_string()),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        max_deliver: topology::MAX_DELIVER,
        filter_subject: filter.unwrap_or_default(),
        // Growing delays between redeliveries of a message that keeps failing. nats-server
        // (measured on 2.15) replaces ack_wait with the first entry, and waits
        // `backoff[n-1] - ack_wait + delay` before delivery n+1 of a message Nak'd with a
        // delay. So the list starts at ack_wait (a list starting at 1 s redelivered every
        // message still being handled, or waiting in a prefetch buffer, after one second), and
        // a handler's `RetryAfter(d)` comes back after d, d+5 s, d+15 s, d+30 s, then d+60 s:
        // the 20 deliveries last about 17 minutes of continuous failure.
        backoff: [0, 5, 15, 30, 60]
            .into_iter()
            .map(|extra| ack_wait + Duration::from_secs(extra))
            .collect(),
        ..Default::default()
    }
}

/// Opens the durable `config` names on `stream`, creating it where it is missing. Every
/// consumer of the fleet is created through here: the table's ([`Durable::open`]) and an
/// executor's own, named and filtered by its operator (`sexton exec`).
pub async fn open(
    jetstream: &jetstream::Context,
    stream: &str,
    config: pull::Config,
) -> anyhow::Result<PullConsumer> {
    use anyhow::Context as _;
    let durable = config.durable_name.clone().unwrap_or_default();
    jetstream
        .get_stream(stream)
        .await
        .with_context(|| format!("opening the stream {stream}"))?
        .get_or_create_consumer(&durable, config)
        .await
        .with_context(|| format!("creating the durable consumer {durable} on {stream}"))
}
