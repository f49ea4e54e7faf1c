//! The scheduler's metrics, defined in one place. Labels come from small fixed sets.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, Opts, Registry};

pub struct Metrics {
    pub registry: Registry,
    /// Every metric name this service exports.
    pub names: Vec<String>,
    pub consumer: sexton_shared::telemetry::ConsumerMetrics,
    pub due_published: IntCounter,
    pub due_duplicates: IntCounter,
    pub fire_lateness: Histogram,
    pub ticks_skipped: IntCounterVec,
    pub reports: IntCounterVec,
    pub sweeps_published: IntCounter,
    pub schedules_loaded: prometheus::IntGauge,
    /// Artifacts asked for by due-backups of schedules with a cadence (`full_every` or
    /// volumes): one per volume, or one per backup without volumes.
    pub due_artifact_kinds: IntCounterVec,
    /// Completed reports checked against the bucket before they count: `seen`, `refused`
    /// (recorded failed), `retry` (the bucket could not be read).
    pub intake_checks: IntCounterVec,
    /// Restore-test verdicts by outcome (`verified`, `failed`, `timeout`).
    pub verifications: IntCounterVec,
    /// Restore tests asked for (scheduled or on demand), duplicates excluded.
    pub verify_requests: IntCounter,
    /// Ticks published by backfills (duplicates excluded).
    pub backfill_ticks: IntCounter,
    /// Schedules the scheduler paused after `pause_after_failures` consecutive failed backups,
    /// per cluster, as this replica's timer queue sees them (every replica sees them all).
    pub schedules_paused_after_failures: prometheus::IntGaugeVec,
    /// `sexton_schedule_drifted{schedule}`: 1 when a schedule `sexton apply` applied has been
    /// changed since by other means (issue 31); 0 when it is as applied; no series for a
    /// schedule apply never applied.
    pub schedule_drifted: prometheus::IntGaugeVec,
    /// Audit entries published (`stored`, `failed`).
    pub audit_entries: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let (consumer, consumer_collectors) =
            sexton_shared::telemetry::ConsumerMetrics::new("scheduler");
        let due_published = IntCounter::new(
            "sexton_due_backups_published_total",
            "due-backup events published (duplicates dropped by the stream excluded)",
        )
        .expect("valid metric");
        let due_duplicates = IntCounter::new(
            "sexton_due_backups_deduplicated_total",
            "due-backup publications the stream recognised as duplicates",
        )
        .expect("valid metric");
        let fire_lateness = Histogram::with_opts(
            HistogramOpts::new(
                "sexton_fire_lateness_seconds",
                "how long after its due instant a tick was published",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
            ]),
        )
        .expect("valid metric");
        let ticks_skipped = IntCounterVec::new(
            Opts::new(
                "sexton_ticks_skipped_total",
                "due ticks not fired, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let reports = IntCounterVec::new(
            Opts::new(
                "sexton_executor_reports_total",
                "executor reports handled, by outcome",
            ),
            &["status", "outcome"],
        )
        .expect("valid metric");
        let sweeps_published = IntCounter::new(
            "sexton_retention_sweeps_published_total",
            "retention-sweep events published",
        )
        .expect("valid metric");
        let schedules_loaded = prometheus::IntGauge::new(
            "sexton_schedules",
            "schedules this replica holds in its timer queue",
        )
        .expect("valid metric");
        let due_artifact_kinds = IntCounterVec::new(
            Opts::new(
                "sexton_due_artifact_kinds_total",
                "artifacts due-backups asked for, by kind (full, incremental) and why",
            ),
            &["kind", "reason"],
        )
        .expect("valid metric");
        let intake_checks = IntCounterVec::new(
            Opts::new(
                "sexton_intake_checks_total",
                "completed reports checked against the bucket, by outcome (seen, refused, retry)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let verifications = IntCounterVec::new(
            Opts::new(
                "sexton_verifications_total",
                "restore-test verdicts recorded, by outcome (verified, failed, timeout)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let verify_requests = IntCounter::new(
            "sexton_verify_requests_total",
            "restore tests asked for (verify-due events published, duplicates excluded)",
        )
        .expect("valid metric");
        let backfill_ticks = IntCounter::new(
            "sexton_backfill_ticks_published_total",
            "due-backup events published by backfills (duplicates excluded)",
        )
        .expect("valid metric");
        let schedules_paused_after_failures = prometheus::IntGaugeVec::new(
            Opts::new(
                "sexton_schedules_paused_after_failures",
                "schedules paused by the scheduler after consecutive failed backups",
            ),
            &["cluster"],
        )
        .expect("valid metric");
        let schedule_drifted = prometheus::IntGaugeVec::new(
            Opts::new(
                "sexton_schedule_drifted",
                "1 when a schedule sexton apply applied was changed since by other means \
                 (its spec differs from the last applied one), else 0",
            ),
            &["schedule"],
        )
        .expect("valid metric");
        let audit_entries = sexton_shared::audit::Audit::counter();
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(due_published.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(due_duplicates.clone()),
            Box::new(fire_lateness.clone()),
            Box::new(ticks_skipped.clone()),
            Box::new(reports.clone()),
            Box::new(sweeps_published.clone()),
            Box::new(schedules_loaded.clone()),
            Box::new(due_artifact_kinds.clone()),
            Box::new(intake_checks.clone()),
            Box::new(verifications.clone()),
            Box::new(verify_requests.clone()),
            Box::new(backfill_ticks.clone()),
            Box::new(schedules_paused_after_failures.clone()),
            Box::new(schedule_drifted.clone()),
            Box::new(audit_entries.clone()),
        ];
        collectors.extend(consumer_collectors);
        let names = sexton_shared::telemetry::register_all(&registry, collectors);
        Metrics {
            registry,
            names,
            consumer,
            due_published,
            due_duplicates,
            fire_lateness,
            ticks_skipped,
            reports,
            sweeps_published,
            schedules_loaded,
            due_artifact_kinds,
            intake_checks,
            verifications,
            verify_requests,
            backfill_ticks,
            schedules_paused_after_failures,
            schedule_drifted,
            audit_entries,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
