//! The NATS topology in one place: subject names, the JetStream streams and durable consumers
//! that carry them, and the key-value buckets. Every service calls [`ensure`] at start-up; the
//! calls are idempotent, so any replica may be first.

use std::time::Duration;

use async_nats::jetstream::{
    self, kv,
    stream::{self, RetentionPolicy, StorageType},
};

pub const SUBJECT_ROOT: &str = "sexton.v1";

pub const STREAM_DUE: &str = "SEXTON_DUE";
pub const STREAM_REPORTS: &str = "SEXTON_REPORTS";
pub const STREAM_RETENTION: &str = "SEXTON_RETENTION";
pub const STREAM_JOBS: &str = "SEXTON_JOBS";
pub const STREAM_EVENTS: &str = "SEXTON_EVENTS";
/// Keeps the max-deliveries advisories of the deleter's consumer until a deleter has recorded
/// them, so one raised while no deleter runs is not lost.
pub const STREAM_DEAD_LETTERS: &str = "SEXTON_DEAD_LETTERS";
/// Restore tests (issue 13): verify-due events to executors and their verdicts back, kept a
/// week (several kinds of executor may read the events; the verdicts are an audit trail).
pub const STREAM_VERIFY: &str = "SEXTON_VERIFY";
/// The audit trail (docs/safety.md): append-only, kept `audit.retention` (default a year).
pub const STREAM_AUDIT: &str = "SEXTON_AUDIT";
/// Copy jobs (issue 28): `sexton.v1.copy.<cluster>`, a work queue the copier drains.
pub const STREAM_COPIES: &str = "SEXTON_COPIES";
/// Binlog jobs (issue 32): `sexton.v1.binlog.<cluster>`, a work queue stored by partition
/// ([`binlog_transform`]) so the deleter replica judging a cluster's delete jobs also collects
/// its binlog, with the same catalog view. Jobs published before it went to `SEXTON_JOBS`
/// (`sexton.v1.job.binlog.<cluster>`, durable [`CONSUMER_DELETER_BINLOG`]), still drained.
pub const STREAM_BINLOG: &str = "SEXTON_BINLOG";

pub const BUCKET_SCHEDULES: &str = "sexton-schedules";
pub const BUCKET_CATALOG: &str = "sexton-catalog";
/// Delete plugins (seed 004), key = plugin name; the deleter reads and registers them.
pub const BUCKET_PLUGINS: &str = "sexton-plugins";
/// One key per cluster that a schedule has named: its `last_retention_run`. Only the scheduler
/// uses it, so it is opened by [`clusters_bucket`], not by [`ensure`].
pub const BUCKET_CLUSTERS: &str = "sexton-clusters";
/// The due-backups this fleet issued (issue 29), key = `<cluster>.<backup id>`: what intake
/// judges a report's times against. Only the scheduler uses it, opened by [`dues_bucket`].
pub const BUCKET_DUES: &str = "sexton-dues";
/// How long an issued due-backup is remembered: a report later than this after its due is
/// judged as one that answers none.
pub const DUES_REMEMBERED: std::time::Duration = std::time::Duration::from_secs(14 * 86_400);

/// Which copier replica works on a cluster now (issue 28), key = `<cluster>`: a lease its
/// holder renews while it copies. The scheduler creates it ([`copy_leases_bucket`]); only the
/// copier reads and writes it.
pub const BUCKET_COPY_LEASES: &str = "sexton-copy-leases";

/// How each cluster's retention runs are going (issue 54), key = `<cluster>`: a
/// `RetentionStatus` the retention-worker writes after each run, which `schedule get` and
/// `describe` show. The scheduler creates it ([`retention_status_bucket`]) and reads it.
pub const BUCKET_RETENTION_STATUS: &str = "sexton-retention-status";

/// The circuit breaker's approvals, key = `<cluster>.<plan>`: a held run a person let through,
/// until the run that uses it (docs/safety.md).
pub const BUCKET_BREAKER: &str = "sexton-breaker";

pub const CONSUMER_REPORTS: &str = "scheduler-reports";
/// The retention-worker's durable on a stream created before issue 32 (without
/// [`retention_transform`]), which every replica reads; a partitioned stream has
/// [`retention_partition_durable`]s instead.
pub const CONSUMER_RETENTION: &str = "retention-worker";
pub const CONSUMER_DELETER: &str = "deleter";
/// The deleter's second durable on SEXTON_JOBS: binlog garbage collection, apart from backup
/// deletions so neither queue waits behind the other.
pub const CONSUMER_DELETER_BINLOG: &str = "deleter-binlog";
/// The deleter's durable for copy delete jobs (`sexton.v1.job.copy-delete.*`).
pub const CONSUMER_DELETER_COPIES: &str = "deleter-copies";
pub const CONSUMER_DEAD_LETTERS: &str = "deleter-dead-letters";
pub const CONSUMER_EXECUTOR: &str = "reference-executor";
/// The reference executor's durable on verify-due events.
pub const CONSUMER_EXECUTOR_VERIFY: &str = "reference-executor-verify";
/// The scheduler's durable on verdicts.
pub const CONSUMER_VERDICTS: &str = "scheduler-verdicts";
pub const CONSUMER_COPIER: &str = "copier";

/// How many partitions the retention-worker's work is cut into (issue 32). SEXTON_RETENTION
/// stores each checkpoint and sweep under its cluster's partition, a token the stream itself
/// appends ([`retention_transform`]); each partition has a durable consumer of its own
/// ([`retention_partition_durable`]), and one replica at a time holds it
/// (`shared::partitions`). Changing the count moves clusters between partitions: it is a
/// migration (docs/operations.md), not a setting.
pub const RETENTION_PARTITIONS: u16 = 16;

/// Which replica holds each partition of a service's work, and which replicas are alive
/// (`shared::partitions`). The scheduler creates it; only the retention-worker reads and writes
/// it.
pub const BUCKET_PARTITIONS: &str = "sexton-partitions";

/// The transform SEXTON_RETENTION applies before it stores a message:
/// `sexton.v1.retention.<kind>.<cluster>` becomes `…<kind>.<cluster>.<partition>`, the
/// partition being nats-server's hash of the cluster token (`partition(n, 2)`), so every event
/// of one cluster lands in one partition whoever publishes it.
pub fn retention_transform() -> stream::SubjectTransform {
    stream::SubjectTransform {
        source: format!("{SUBJECT_ROOT}.retention.*.*"),
        destination: format!(
            "{SUBJECT_ROOT}.retention.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}.{{{{partition({RETENTION_PARTITIONS},2)}}}}"
        ),
    }
}

/// How many partitions the deleter's delete jobs are cut into (issue 32): SEXTON_JOBS stores
/// each delete job under its cluster's partition ([`delete_transform`]), with the same hash and
/// count as [`RETENTION_PARTITIONS`], so a cluster's retention events and delete jobs carry the
/// same partition number. Each partition has a durable ([`delete_partition_durable`]) read by
/// the deleter replica holding it. Binlog, copy delete and merge jobs are not partitioned.
pub const DELETE_PARTITIONS: u16 = RETENTION_PARTITIONS;

/// The transform SEXTON_JOBS applies to delete jobs alone: `sexton.v1.job.delete.<cluster>`
/// becomes `…delete.<cluster>.<partition>`. Other jobs (`binlog`, `copy-delete`, `merge`) do
/// not match its source and are stored as published, so their durables read them as before.
pub fn delete_transform() -> stream::SubjectTransform {
    stream::SubjectTransform {
        source: format!("{SUBJECT_ROOT}.job.delete.*"),
        destination: format!(
            "{SUBJECT_ROOT}.job.delete.{{{{wildcard(1)}}}}.{{{{partition({DELETE_PARTITIONS},1)}}}}"
        ),
    }
}

/// The durable consumer of one partition of the delete jobs.
pub fn delete_partition_durable(partition: u16) -> String {
    format!("{CONSUMER_DELETER}-p{partition}")
}

/// What the durable of `partition` reads: that partition's delete jobs.
pub fn delete_partition_filter(partition: u16) -> String {
    format!("{SUBJECT_ROOT}.job.delete.*.{partition}")
}

/// The transform SEXTON_BINLOG applies: `sexton.v1.binlog.<cluster>` becomes
/// `…binlog.<cluster>.<partition>`, the partition of the cluster's delete jobs.
pub fn binlog_transform() -> stream::SubjectTransform {
    stream::SubjectTransform {
        source: format!("{SUBJECT_ROOT}.binlog.*"),
        destination: format!(
            "{SUBJECT_ROOT}.binlog.{{{{wildcard(1)}}}}.{{{{partition({DELETE_PARTITIONS},1)}}}}"
        ),
    }
}

/// The durable consumer of one partition of the binlog jobs.
pub fn binlog_partition_durable(partition: u16) -> String {
    format!("{CONSUMER_DELETER_BINLOG}-p{partition}")
}

/// What the durable of `partition` reads: that partition's binlog jobs.
pub fn binlog_partition_filter(partition: u16) -> String {
    format!("{SUBJECT_ROOT}.binlog.*.{partition}")
}

/// Whether `durable` is one of the deleter's durables on delete jobs: the one of a stream
/// created before issue 32, or a partition's.
pub fn is_delete_durable(durable: &str) -> bool {
    durable == CONSUMER_DELETER
        || durable
            .strip_prefix(CONSUMER_DELETER)
            .and_then(|rest| rest.strip_prefix("-p"))
            .and_then(|k| k.parse::<u16>().ok())
            .is_some_and(|k| k < DELETE_PARTITIONS && delete_partition_durable(k) == durable)
}

/// The partition nats-server's `partition(n, …)` transform gives a cluster: FNV-1a (32 bits)
/// of the cluster token, modulo `n`. For tests and tools that must find a cluster's durable;
/// the services never compute it, the stream does.
pub fn partition_of(cluster: &str, partitions: u16) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in cluster.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % u32::from(partitions)) as u16
}

/// The subject a consumed message was published on: SEXTON_RETENTION stores its events, and
/// SEXTON_JOBS its delete jobs, with their partition appended ([`retention_transform`],
/// [`delete_transform`]), which this takes off again. Incidents, logs and the cluster a
/// message names speak of the published subject.
pub fn published_subject(stored: &str) -> &str {
    for (prefix, tokens) in [
        (format!("{SUBJECT_ROOT}.retention."), 2),
        (format!("{SUBJECT_ROOT}.job.delete."), 1),
        (format!("{SUBJECT_ROOT}.binlog."), 1),
    ] {
        let Some(rest) = stored.strip_prefix(&prefix[..]) else {
            continue;
        };
        return match rest.rsplit_once('.') {
            Some((head, partition))
                if head.split('.').count() == tokens
                    && !partition.is_empty()
                    && partition.bytes().all(|b| b.is_ascii_digit()) =>
            {
                &stored[..stored.len() - partition.len() - 1]
            }
            _ => stored,
        };
    }
    stored
}

/// The durable consumer of one partition of SEXTON_RETENTION.
pub fn retention_partition_durable(partition: u16) -> String {
    format!("{CONSUMER_RETENTION}-p{partition}")
}

/// What the durable of `partition` reads: that partition's checkpoints and sweeps.
pub fn retention_partition_filter(partition: u16) -> String {
    format!("{SUBJECT_ROOT}.retention.*.*.{partition}")
}

/// How long JetStream remembers a message id for de-duplication. A replica that publishes a
/// due tick and dies before recording it is replaced well within this window.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(10 * 60);

pub const CONSUMER_EXECUTOR_MERGE: &str = "reference-executor-merge";
/// Where JetStream announces that a delete job ran out of deliveries on the deleter's durable
/// of a stream created before issue 32. The work-queue stream keeps such a message; the
/// deleter reads it by sequence, records the failure and removes it.
pub const DELETER_MAX_DELIVERIES_ADVISORY: &str =
    "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.SEXTON_JOBS.deleter";

/// Every subject on which JetStream announces a delete job that ran out of deliveries: the
/// durable of a stream created before issue 32 and each partition's
/// ([`delete_partition_durable`]). SEXTON_DEAD_LETTERS keeps them all, and no other consumer's.
pub fn deleter_max_deliveries_advisories() -> Vec<String> {
    std::iter::once(DELETER_MAX_DELIVERIES_ADVISORY.to_string())
        .chain((0..DELETE_PARTITIONS).map(|k| {
            format!(
                "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{STREAM_JOBS}.{}",
                delete_partition_durable(k)
            )
        }))
        .collect()
}
/// Delete plugins answer requests on subjects under this prefix (seed 004); the model checks a
/// plugin's subject against it.
pub use sexton_model::api::PLUGIN_SUBJECT_PREFIX;
/// `kind` is one of a small fixed set: `retention`, `incident`.
pub fn event_subject(kind: &str, cluster: &str) -> String {
    format!("{SUBJECT_ROOT}.event.{kind}.{cluster}")
}
/// Request/reply API subjects, answered by the scheduler's queue group.
pub fn api_subject(resource: &str, verb: &str) -> String {
    format!("{SUBJECT_ROOT}.api.{resource}.{verb}")
}
pub const API_QUEUE_GROUP: &str = "sexton-api";

/// How long the audit stream keeps an entry unless configured otherwise (`audit.retention`).
pub const AUDIT_RETENTION: Duration = Duration::from_secs(365 * 86_400);

/// The audit stream's definition: limits (never a work queue: entries are not consumed), kept
/// `retention`, and refusing message deletes and purges whoever asks.
pub fn audit_stream_config(replicas: usize, retention: Duration) -> stream::Config {
    stream::Config {
        name: STREAM_AUDIT.to_string(),
        subjects: vec![format!("{SUBJECT_ROOT}.audit.>")],
        retention: RetentionPolicy::Limits,
        max_age: retention,
        storage: StorageType::File,
        num_replicas: replicas,
        duplicate_window: DUPLICATE_WINDOW,
        deny_delete: true,
        deny_purge: true,
        ..Default::default()
    }
}

/// One stream's definition.
pub fn stream_configs(replicas: usize) -> Vec<stream::Config> {
    let base = |name: &str, subjects: Vec<String>, retention, max_age| stream::Config {
        name: name.to_string(),
        subjects,
        retention,
        max_age,
        storage: StorageType::File,
        num_replicas: replicas,
        duplicate_window: DUPLICATE_WINDOW,
        ..Default::default()
    };
    let week = Duration::from_secs(7 * 86_400);
    vec![
        // Executors of several kinds may each read due-backups, so it is not a work queue.
        base(
            STREAM_DUE,
            vec![format!("{SUBJECT_ROOT}.due.*")],
            RetentionPolicy::Limits,
            week,
        ),
        base(
            STREAM_REPORTS,
            vec![format!("{SUBJECT_ROOT}.report.*")],
            RetentionPolicy::WorkQueue,
            Duration::ZERO,
        ),
        stream::Config {
            subject_transform: Some(retention_transform()),
            ..base(
                STREAM_RETENTION,
                vec![format!("{SUBJECT_ROOT}.retention.*.*")],
                RetentionPolicy::WorkQueue,
                Duration::ZERO,
            )
        },
        stream::Config {
            subject_transform: Some(delete_transform()),
            ..base(
                STREAM_JOBS,
                vec![format!("{SUBJECT_ROOT}.job.*.*")],
                RetentionPolicy::WorkQueue,
                Duration::ZERO,
            )
        },
        base(
            STREAM_EVENTS,
            vec![format!("{SUBJECT_ROOT}.event.*.*")],
            RetentionPolicy::Limits,
            week,
        ),
        base(
            STREAM_DEAD_LETTERS,
            deleter_max_deliveries_advisories(),
            RetentionPolicy::WorkQueue,
            week,
        ),
        base(
            STREAM_VERIFY,
            vec![format!("{SUBJECT_ROOT}.verify.*.*")],
            RetentionPolicy::Limits,
            week,
        ),
        base(
            STREAM_COPIES,
            vec![format!("{SUBJECT_ROOT}.copy.*")],
            RetentionPolicy::WorkQueue,
            Duration::ZERO,
        ),
        stream::Config {
            subject_transform: Some(binlog_transform()),
            ..base(
                STREAM_BINLOG,
                vec![format!("{SUBJECT_ROOT}.binlog.*")],
                RetentionPolicy::WorkQueue,
                Duration::ZERO,
            )
        },
        audit_stream_config(replicas, AUDIT_RETENTION),
    ]
}

/// How long one pull request of a service's consumer waits on the server. A waiting pull
/// request lives on the node that leads the consumer and dies with it; async-nats asks again
/// only after the expiry plus 5 s. With the default 30 s the deleter stopped for 35 s when the
/// leader of its consumer was killed (fault_nats_cluster, soak); 5 s bounds that to 10 s.
pub const PULL_EXPIRES: Duration = Duration::from_secs(5);

/// How many times a durable consumer delivers one message before giving up on it.
pub const MAX_DELIVER: i64 = 20;

pub fn bucket_configs(replicas: usize) -> Vec<kv::Config> {
    vec![
        kv::Config {
            bucket: BUCKET_SCHEDULES.into(),
            description: "sexton schedules".into(),
            history: 5,
            num_replicas: replicas,
            storage: StorageType::File,
            ..Default::default()
        },
        kv::Config {
            bucket: BUCKET_CATALOG.into(),
            description: "sexton backup catalog".into(),
            history: 5,
            num_replicas: replicas,
            storage: StorageType::File,
            ..Default::default()
        },
        kv::Config {
            bucket: BUCKET_PLUGINS.into(),
            description: "sexton delete plugins".into(),
            history: 5,
            num_replicas: replicas,
            storage: StorageType::File,
            ..Default::default()
        },
        kv::Config {
            bucket: BUCKET_BREAKER.into(),
            description: "sexton circuit breaker approvals".into(),
            history: 5,
            num_replicas: replicas,
            storage: StorageType::File,
            ..Default::default()
        },
    ]
}

/// The clusters bucket's definition.
pub fn clusters_bucket_config(replicas: usize) -> kv::Config {
    kv::Config {
        bucket: BUCKET_CLUSTERS.into(),
        description: "sexton clusters: last retention run".into(),
        history: 1,
        num_replicas: replicas,
        storage: StorageType::File,
        ..Default::default()
    }
}

/// The issued due-backups' bucket's definition: entries expire after [`DUES_REMEMBERED`].
pub fn dues_bucket_config(replicas: usize) -> kv::Config {
    kv::Config {
        bucket: BUCKET_DUES.into(),
        description: "sexton due-backups issued, for intake".into(),
        history: 1,
        max_age: DUES_REMEMBERED,
        num_replicas: replicas,
        storage: StorageType::File,
        ..Default::default()
    }
}

/// The copy leases' bucket's definition: one small entry per cluster; entries of clusters no
/// copier has touched for a day go.
pub fn copy_leases_bucket_config(replicas: usize) -> kv::Config {
    leases_bucket_config(
        BUCKET_COPY_LEASES,
        "sexton copier leases, one per cluster",
        replicas,
    )
}

/// A bucket of leases: small entries, one version each, gone a day after their last renewal.
fn leases_bucket_config(bucket: &str, description: &str, replicas: usize) -> kv::Config {
    kv::Config {
        bucket: bucket.into(),
        description: description.into(),
        history: 1,
        max_age: Duration::from_secs(86_400),
        num_replicas: replicas,
        storage: StorageType::File,
        ..Default::default()
    }
}

/// Opens the copy leases' bucket, creating it if missing (the scheduler, at start-up). A
/// service whose user may not create it (the copier) waits up to [`ENSURE_PATIENCE`] for it.
pub async fn copy_leases_bucket(
    jetstream: &jetstream::Context,
    replicas: usize,
) -> anyhow::Result<kv::Store> {
    open_or_await(
        jetstream,
        copy_leases_bucket_config(replicas),
        "the copy leases' bucket is not there: the scheduler creates it at start-up",
    )
    .await
}

/// Opens a bucket, creating it if missing; one this service's user may not create is waited
/// for, up to [`ENSURE_PATIENCE`], then `missing` says why it is not there.
async fn open_or_await(
    jetstream: &jetstream::Context,
    config: kv::Config,
    missing: &'static str,
) -> anyhow::Result<kv::Store> {
    let deadline = tokio::time::Instant::now() + ENSURE_PATIENCE;
    loop {
        match open_or_create(jetstream, config.clone()).await {
            Ok(store) => return Ok(store),
            Err(err) if tokio::time::Instant::now() >= deadline => return Err(err.context(missing)),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The retention status bucket's definition: one small entry per cluster, the latest only.
pub fn retention_status_bucket_config(replicas: usize) -> kv::Config {
    kv::Config {
        bucket: BUCKET_RETENTION_STATUS.into(),
        description: "sexton retention runs, how each cluster's are going".into(),
        history: 1,
        num_replicas: replicas,
        storage: StorageType::File,
        ..Default::default()
    }
}

/// Opens the retention status bucket, creating it if missing (the scheduler, at start-up). A
/// service whose user may not create it (the retention-worker) waits up to
/// [`ENSURE_PATIENCE`] for it.
pub async fn retention_status_bucket(
    jetstream: &jetstream::Context,
    replicas: usize,
) -> anyhow::Result<kv::Store> {
    open_or_await(
        jetstream,
        retention_status_bucket_config(replicas),
        "the retention status bucket is not there: the scheduler creates it at start-up",
    )
    .await
}

/// The partitions' bucket's definition: a few small entries per service (one per partition,
/// one naming the live replicas); entries no replica renewed for a day go.
pub fn partitions_bucket_config(replicas: usize) -> kv::Config {
    leases_bucket_config(
        BUCKET_PARTITIONS,
        "sexton partitions of work among replicas",
        replicas,
    )
}

/// Opens the partitions' bucket, creating it if missing (the scheduler, at start-up). A
/// service whose user may not create it (the retention-worker) waits up to
/// [`ENSURE_PATIENCE`] for it.
pub async fn partitions_bucket(
    jetstream: &jetstream::Context,
    replicas: usize,
) -> anyhow::Result<kv::Store> {
    open_or_await(
        jetstream,
        partitions_bucket_config(replicas),
        "the partitions' bucket is not there: the scheduler creates it at start-up",
    )
    .await
}

/// Opens the clusters bucket, creating it if missing (any replica may be first).
pub async fn clusters_bucket(
    jetstream: &jetstream::Context,
    replicas: usize,
) -> anyhow::Result<kv::Store> {
    open_or_create(jetstream, clusters_bucket_config(replicas)).await
}

/// Opens the issued due-backups' bucket, creating it if missing (any replica may be first).
pub async fn dues_bucket(
    jetstream: &jetstream::Context,
    replicas: usize,
) -> anyhow::Result<kv::Store> {
    open_or_create(jetstream, dues_bucket_config(replicas)).await
}

async fn open_or_create(
    jetstream: &jetstream::Context,
    config: kv::Config,
) -> anyhow::Result<kv::Store> {
    use anyhow::Context as _;
    let name = config.bucket.clone();
    if let Ok(store) = jetstream.get_key_value(&name).await {
        return Ok(store);
    }
    match jetstream.create_key_value(config).await {
        Ok(store) => Ok(store),
        Err(_) => jetstream
            .get_key_value(&name)
            .await
            .with_context(|| format!("opening bucket {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_retention_subject_loses_its_partition_and_nothing_else() {
        assert_eq!(
            published_subject("sexton.v1.retention.checkpoint.db1.5"),
            "sexton.v1.retention.checkpoint.db1"
        );
        assert_eq!(
            published_subject("sexton.v1.retention.sweep.db-2.15"),
            "sexton.v1.retention.sweep.db-2"
        );
        assert_eq!(
            published_subject("sexton.v1.job.delete.db1.5"),
            "sexton.v1.job.delete.db1"
        );
        assert_eq!(
            published_subject("sexton.v1.binlog.db1.12"),
            "sexton.v1.binlog.db1"
        );
        // Already as published, or another stream's: unchanged.
        for subject in [
            "sexton.v1.retention.checkpoint.db1",
            "sexton.v1.retention.checkpoint.7",
            "sexton.v1.report.db1",
            "sexton.v1.job.delete.db1",
            "sexton.v1.job.delete.7",
            "sexton.v1.job.binlog.db1.5",
            "sexton.v1.job.delete.db1.x5",
            "sexton.v1.job.delete.db1.2.5",
            "sexton.v1.retention.checkpoint.db1.x5",
            "sexton.v1.retention.checkpoint.db1.",
            "",
        ] {
            assert_eq!(published_subject(subject), subject);
        }
    }

    #[test]
    fn only_the_deleters_own_durables_are_delete_durables() {
        assert!(is_delete_durable("deleter"));
        assert!(is_delete_durable("deleter-p0"));
        assert!(is_delete_durable("deleter-p15"));
        for other in [
            "deleter-p16",
            "deleter-p01",
            "deleter-p",
            "deleter-binlog",
            "deleter-copies",
            "deleter-p1x",
            "reference-executor-merge",
            "",
        ] {
            assert!(!is_delete_durable(other), "{other}");
        }
        let advisories = deleter_max_deliveries_advisories();
        assert_eq!(advisories.len(), 1 + usize::from(DELETE_PARTITIONS));
        assert!(advisories
            .iter()
            .all(|a| is_delete_durable(a.rsplit('.').next().unwrap())));
    }

    #[test]
    fn partitions_are_nats_servers_fnv_1a() {
        // nats-server's own figure, seen in a stream: the local fleet's `demo` cluster is
        // stored under partition 6 of 16 (docs/semantics.md#partitions).
        assert_eq!(partition_of("demo", 16), 6);
        // FNV-1a 32 of the empty string is its offset basis, 0x811c9dc5.
        assert_eq!(partition_of("", 16), (0x811c_9dc5_u32 % 16) as u16);
        assert!((0..200).all(|i| partition_of(&format!("c{i}"), 16) < 16));
    }
}

#[derive(Clone)]
pub struct Topology {
    pub jetstream: jetstream::Context,
    pub schedules: kv::Store,
    pub catalog: kv::Store,
    pub plugins: kv::Store,
    /// Approvals of held retention runs (the retention-worker reads and writes them).
    pub breaker: kv::Store,
}

/// How long [`ensure`] waits for streams and buckets that this service may not create itself
/// (with least-privilege NATS users only the scheduler and operators create them).
pub const ENSURE_PATIENCE: Duration = Duration::from_secs(120);

/// Creates what is missing and returns handles; safe to call from every replica at once. A
/// service whose user may not create streams waits for them to appear.
pub async fn ensure(jetstream: &jetstream::Context, replicas: usize) -> anyhow::Result<Topology> {
    ensure_with(jetstream, replicas, AUDIT_RETENTION).await
}

/// Waits until every stream and bucket [`ensure`] creates exists, and creates nothing: for the
/// executors (`sexton exec`, the reference executor), whose NATS user may look streams up but
/// never create them or read the account's limits (deploy/nats/authorization.conf). Creating a
/// missing bucket reads the account's limits first (`$JS.API.INFO`), so an executor that found
/// the scheduler half-way through creating the topology (the catalog there, the breaker's
/// bucket not yet) asked for what its user is denied: only on a machine slow enough to show
/// that moment (issue 26). Waits at most [`ENSURE_PATIENCE`], then names what is missing.
pub async fn await_created(jetstream: &jetstream::Context) -> anyhow::Result<()> {
    let names: Vec<String> = stream_configs(1)
        .into_iter()
        .map(|config| config.name)
        .chain(
            bucket_configs(1)
                .into_iter()
                .map(|c| format!("KV_{}", c.bucket)),
        )
        .collect();
    let deadline = tokio::time::Instant::now() + ENSURE_PATIENCE;
    loop {
        let mut missing = Vec::new();
        for name in &names {
            if jetstream.get_stream(name).await.is_err() {
                missing.push(name.as_str());
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "the NATS topology is not there after {ENSURE_PATIENCE:?} (missing: {}): the \
                 scheduler creates it at start-up, or an operator does (deploy/README.md)",
                missing.join(", ")
            );
        }
        tracing::info!(
            missing = missing.join(","),
            "waiting for the scheduler to create the nats topology"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// [`ensure`] for a service: the replicas and the audit stream's retention of its config.
pub async fn ensure_for(
    jetstream: &jetstream::Context,
    config: &crate::config::Config,
) -> anyhow::Result<Topology> {
    ensure_with(jetstream, config.nats.replicas, config.audit.retention).await
}

/// [`ensure`], creating the audit stream (if missing) to keep entries `audit_retention`.
pub async fn ensure_with(
    jetstream: &jetstream::Context,
    replicas: usize,
    audit_retention: Duration,
) -> anyhow::Result<Topology> {
    let deadline = tokio::time::Instant::now() + ENSURE_PATIENCE;
    loop {
        match try_ensure(jetstream, replicas, audit_retention).await {
            Ok(topology) => return Ok(topology),
            Err(err) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(
                    error = format!("{err:#}"),
                    "nats topology not ready; retrying"
                );
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(err) => return Err(err),
        }
    }
}

async fn try_ensure(
    jetstream: &jetstream::Context,
    replicas: usize,
    audit_retention: Duration,
) -> anyhow::Result<Topology> {
    use anyhow::Context as _;
    for mut config in stream_configs(replicas) {
        let name = config.name.clone();
        if let Ok(stream) = jetstream.get_stream(&name).await {
            if name == STREAM_AUDIT {
                let kept = stream.cached_info().config.max_age;
                if kept != audit_retention {
                    tracing::warn!(
                        stream = STREAM_AUDIT,
                        kept_seconds = kept.as_secs(),
                        configured_seconds = audit_retention.as_secs(),
                        "the audit stream keeps entries for another time than audit.retention; \
                         an administrator changes it (nats stream edit), no Sexton user may"
                    );
                }
            }
            continue;
        }
        if name == STREAM_AUDIT {
            config.max_age = audit_retention;
        }
        jetstream
            .get_or_create_stream(config)
            .await
            .with_context(|| format!("creating stream {name}"))?;
    }
    let mut stores = Vec::new();
    for config in bucket_configs(replicas) {
        let name = config.bucket.clone();
        let store = match jetstream.get_key_value(&name).await {
            Ok(store) => store,
            Err(_) => match jetstream.create_key_value(config).await {
                Ok(store) => store,
                // Another replica created it between our two calls.
                Err(_) => jetstream
                    .get_key_value(&name)
                    .await
                    .with_context(|| format!("opening bucket {name}"))?,
            },
        };
        stores.push(store);
    }
    let breaker = stores.pop().expect("four buckets");
    let plugins = stores.pop().expect("four buckets");
    let catalog = stores.pop().expect("four buckets");
    let schedules = stores.pop().expect("four buckets");
    Ok(Topology {
        jetstream: jetstream.clone(),
        schedules,
        catalog,
        plugins,
        breaker,
    })
}
