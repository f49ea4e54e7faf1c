//! The deleter's metrics, defined in one place.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry};

pub struct Metrics {
    pub registry: Registry,
    /// Every metric name this service exports.
    pub names: Vec<String>,
    pub consumer: sexton_shared::telemetry::ConsumerMetrics,
    pub jobs: IntCounterVec,
    pub objects_deleted: IntCounter,
    pub delete_duration: Histogram,
    pub delete_failures: IntCounterVec,
    pub backups_deleted: IntCounter,
    pub bytes_deleted: IntCounter,
    pub plugin_calls: IntCounterVec,
    pub batch_jobs: Histogram,
    /// Audit entries published (`stored`, `failed`).
    pub audit_entries: IntCounterVec,
    /// Copy delete jobs handled, by location and outcome (issue 28).
    pub copy_deletions: IntCounterVec,
    /// Objects of copies removed at other locations, by location.
    pub copy_objects_deleted: IntCounterVec,
    /// Binlog segments removed from a location's archive and index, by location.
    pub location_binlog_segments_deleted: IntCounterVec,
    /// Objects no index listed removed from a location's binlog archive, by location.
    pub location_binlog_orphans_deleted: IntCounterVec,
    /// Passes over a location's binlog archive after a copy deletion, by location and outcome
    /// (collected, nothing, refused, failed).
    pub location_binlog_passes: IntCounterVec,
    /// Partitions of the delete jobs this replica holds (issue 32).
    pub partitions: prometheus::IntGauge,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let (consumer, consumer_collectors) =
            sexton_shared::telemetry::ConsumerMetrics::new("deleter");
        let jobs = IntCounterVec::new(
            Opts::new(
                "sexton_delete_jobs_total",
                "delete jobs handled, by outcome",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let objects_deleted = IntCounter::new(
            "sexton_objects_deleted_total",
            "objects removed from the object store",
        )
        .expect("valid metric");
        let delete_duration = Histogram::with_opts(HistogramOpts::new(
            "sexton_delete_duration_seconds",
            "time from claiming a backup to removing its record",
        ))
        .expect("valid metric");
        let delete_failures = IntCounterVec::new(
            Opts::new(
                "sexton_delete_failures_total",
                "backups that could not be deleted, by kind of failure",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let backups_deleted = IntCounter::new(
            "sexton_backups_deleted_total",
            "backups whose deletion this replica finished (record removed)",
        )
        .expect("valid metric");
        let bytes_deleted = IntCounter::new(
            "sexton_bytes_deleted_total",
            "bytes of the backups whose deletion this replica finished, as their executors \
             reported them",
        )
        .expect("valid metric");
        let plugin_calls = IntCounterVec::new(
            Opts::new(
                "sexton_plugin_calls_total",
                "delete plugin calls, by outcome (ok, error, timeout)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let batch_jobs = Histogram::with_opts(
            HistogramOpts::new(
                "sexton_delete_batch_jobs",
                "delete jobs taken in one batch (their objects share DeleteObjects requests)",
            )
            .buckets(vec![1.0, 2.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0]),
        )
        .expect("valid metric");
        for outcome in ["ok", "error", "timeout"] {
            plugin_calls.with_label_values(&[outcome]);
        }
        for kind in ["permanent", "max-deliveries"] {
            delete_failures.with_label_values(&[kind]);
        }
        let audit_entries = sexton_shared::audit::Audit::counter();
        let copy_deletions = IntCounterVec::new(
            Opts::new(
                "sexton_copy_deletions_total",
                "copy delete jobs handled, by location and outcome (deleted, refused, retry)",
            ),
            &["location", "outcome"],
        )
        .expect("valid metric");
        let copy_objects_deleted = IntCounterVec::new(
            Opts::new(
                "sexton_copy_objects_deleted_total",
                "objects of copies removed at other locations, by location",
            ),
            &["location"],
        )
        .expect("valid metric");
        let location_binlog_segments_deleted = IntCounterVec::new(
            Opts::new(
                "sexton_location_binlog_segments_deleted_total",
                "binlog segments removed from a location's archive and index, by location",
            ),
            &["location"],
        )
        .expect("valid metric");
        let location_binlog_orphans_deleted = IntCounterVec::new(
            Opts::new(
                "sexton_location_binlog_orphans_deleted_total",
                "objects no index listed removed from a location's binlog archive, by location",
            ),
            &["location"],
        )
        .expect("valid metric");
        let location_binlog_passes = IntCounterVec::new(
            Opts::new(
                "sexton_location_binlog_gc_passes_total",
                "passes over a location's binlog archive after a copy deletion, by location and \
                 outcome (collected, nothing, refused, failed)",
            ),
            &["location", "outcome"],
        )
        .expect("valid metric");
        let partitions = prometheus::IntGauge::new(
            "sexton_deleter_partitions_held",
            "partitions of the delete jobs this replica holds and works on",
        )
        .expect("valid metric");
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(jobs.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(partitions.clone()),
            Box::new(objects_deleted.clone()),
            Box::new(delete_duration.clone()),
            Box::new(delete_failures.clone()),
            Box::new(backups_deleted.clone()),
            Box::new(bytes_deleted.clone()),
            Box::new(plugin_calls.clone()),
            Box::new(batch_jobs.clone()),
            Box::new(audit_entries.clone()),
            Box::new(copy_deletions.clone()),
            Box::new(copy_objects_deleted.clone()),
            Box::new(location_binlog_segments_deleted.clone()),
            Box::new(location_binlog_orphans_deleted.clone()),
            Box::new(location_binlog_passes.clone()),
        ];
        collectors.extend(consumer_collectors);
        let names = sexton_shared::telemetry::register_all(&registry, collectors);
        Metrics {
            registry,
            names,
            consumer,
            jobs,
            objects_deleted,
            delete_duration,
            delete_failures,
            backups_deleted,
            bytes_deleted,
            plugin_calls,
            batch_jobs,
            audit_entries,
            copy_deletions,
            copy_objects_deleted,
            location_binlog_segments_deleted,
            location_binlog_orphans_deleted,
            location_binlog_passes,
            partitions,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
