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
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(jobs.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(objects_deleted.clone()),
            Box::new(delete_duration.clone()),
            Box::new(delete_failures.clone()),
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
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
