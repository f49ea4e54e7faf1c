//! The copier's metrics, defined in one place.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

pub struct Metrics {
    pub registry: Registry,
    /// Every metric name this service exports.
    pub names: Vec<String>,
    pub consumer: sexton_shared::telemetry::ConsumerMetrics,
    /// Copy jobs by location and outcome (`copied`, `deferred`, `skipped`, `busy`, `retry`,
    /// `refused`).
    pub copies: IntCounterVec,
    pub bytes: IntCounterVec,
    pub objects: IntCounterVec,
    pub seconds: HistogramVec,
    /// Binlog segments copied (and indexed) at a location.
    pub binlog_segments: IntCounterVec,
    /// Binlog passes by location and outcome (`copied`, `current`, `retry`, `refused`).
    pub binlog_passes: IntCounterVec,
    /// Copies moved to another storage class, by location and outcome (`moved`, `retry`).
    pub transitions: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let (consumer, consumer_collectors) =
            sexton_shared::telemetry::ConsumerMetrics::new("copier");
        let copies = IntCounterVec::new(
            Opts::new(
                "sexton_copier_copies_total",
                "copy jobs handled, by location and outcome (copied, deferred, skipped, busy, retry, \
                 refused)",
            ),
            &["location", "outcome"],
        )
        .expect("valid metric");
        let bytes = IntCounterVec::new(
            Opts::new(
                "sexton_copier_bytes_total",
                "bytes written to a location, each checked against intake's digest",
            ),
            &["location"],
        )
        .expect("valid metric");
        let objects = IntCounterVec::new(
            Opts::new(
                "sexton_copier_objects_total",
                "objects written to a location",
            ),
            &["location"],
        )
        .expect("valid metric");
        let seconds = HistogramVec::new(
            HistogramOpts::new(
                "sexton_copier_copy_seconds",
                "time to copy one backup's objects and record the copy",
            )
            .buckets(vec![0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0, 3600.0]),
            &["location"],
        )
        .expect("valid metric");
        let binlog_segments = IntCounterVec::new(
            Opts::new(
                "sexton_copier_binlog_segments_total",
                "binlog segments copied to a location and listed in its index there",
            ),
            &["location"],
        )
        .expect("valid metric");
        let binlog_passes = IntCounterVec::new(
            Opts::new(
                "sexton_copier_binlog_passes_total",
                "passes over a cluster's binlog archive for a location, by outcome (copied, \
                 current, retry, refused)",
            ),
            &["location", "outcome"],
        )
        .expect("valid metric");
        let transitions = IntCounterVec::new(
            Opts::new(
                "sexton_copier_transitions_total",
                "copies moved to the storage class of their rule's transition, by location and \
                 outcome (moved, retry)",
            ),
            &["location", "outcome"],
        )
        .expect("valid metric");
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(copies.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(bytes.clone()),
            Box::new(objects.clone()),
            Box::new(seconds.clone()),
            Box::new(binlog_segments.clone()),
            Box::new(binlog_passes.clone()),
            Box::new(transitions.clone()),
        ];
        collectors.extend(consumer_collectors);
        let names = sexton_shared::telemetry::register_all(&registry, collectors);
        Metrics {
            registry,
            names,
            consumer,
            copies,
            bytes,
            objects,
            seconds,
            binlog_segments,
            binlog_passes,
            transitions,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
