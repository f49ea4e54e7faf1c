//! The retention-worker's metrics, defined in one place.

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};

pub struct Metrics {
    pub registry: Registry,
    /// Every metric name this service exports.
    pub names: Vec<String>,
    pub consumer: sexton_shared::telemetry::ConsumerMetrics,
    pub runs: IntCounterVec,
    pub run_duration: Histogram,
    pub decisions: IntCounterVec,
    pub jobs_published: IntCounterVec,
    pub last_run: IntGaugeVec,
    pub newest_backup_age: prometheus::GaugeVec,
    pub recoverable_window: prometheus::GaugeVec,
    /// The same at each location, over the copies there (issue 28).
    pub copies_recoverable_window: prometheus::GaugeVec,
    /// Now minus the newest restorable instant at a place, the log's tail included (issue 47).
    pub recovery_point_age: prometheus::GaugeVec,
    /// 1 while an objective is met at a place, 0 while it is missed.
    pub objective_met: IntGaugeVec,
    /// By how many seconds an objective is missed (0 while met).
    pub objective_short: prometheus::GaugeVec,
    pub policy_window: prometheus::GaugeVec,
    /// Completion time of the newest backup a restore test proved (groups with tests only).
    pub last_verified: prometheus::GaugeVec,
    /// Records the last scrub of a cluster left `missing`.
    pub missing: IntGaugeVec,
    /// When this replica last scrubbed a cluster: the freshest replica's `missing` counts.
    pub last_scrub: IntGaugeVec,
    pub scrubs: IntCounterVec,
    /// Runs the circuit breaker held, by what tripped it (`fraction`, `count`, `stale`).
    pub breaker_trips: IntCounterVec,
    /// 1 while a group's retention is held for a person's approval.
    pub breaker_held: IntGaugeVec,
    /// The breaker holds the plan of a group's copies at a location (1) or not (0).
    pub copies_held: IntGaugeVec,
    /// Audit entries published (`stored`, `failed`).
    pub audit_entries: IntCounterVec,
    /// Completed backups held at their source for a copy still to make, by location.
    pub copies_awaiting: IntGaugeVec,
    /// Age of the oldest of them (0: none awaits).
    pub copy_lag: prometheus::GaugeVec,
    /// Backups whose Object Lock a run set or lengthened (issue 29), by outcome (`set`:
    /// first lock, `extended`, `failed`).
    pub locks: IntCounterVec,
    /// Backups the policy lets go that only an unexpired Object Lock keeps, per group.
    pub locked_only: IntGaugeVec,
    pub locked_only_bytes: IntGaugeVec,
    /// Backups the last scrub found written over or marked deleted, their recorded versions
    /// still there (issue 29).
    pub tampered: IntGaugeVec,
    /// Partitions of the retention stream this replica holds now (issue 32).
    pub partitions: prometheus::IntGauge,
    /// Compare-and-set conflicts met while marking or unmarking records.
    pub conflicts: prometheus::IntCounter,
    /// Runs asked for again because a run met a conflict.
    pub reruns: prometheus::IntCounter,
    /// Runs that met an object the store says is gone, scrubbed the cluster and ran again.
    pub missing_object_runs: prometheus::IntCounter,
    /// Runs per cluster, by outcome (`done`, `failed`): a cluster whose runs keep failing is
    /// visible on its own (issue 54), whichever replica runs it.
    pub cluster_runs: IntCounterVec,
    /// The locations each group's gauges were set for, so a location that no backup awaits
    /// any more reads 0 rather than its last value.
    copy_locations: std::sync::Mutex<
        std::collections::HashMap<(String, String), std::collections::BTreeSet<String>>,
    >,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let (consumer, consumer_collectors) =
            sexton_shared::telemetry::ConsumerMetrics::new("retention-worker");
        let runs = IntCounterVec::new(
            Opts::new(
                "sexton_retention_runs_total",
                "retention runs, by trigger and outcome",
            ),
            &["trigger", "outcome"],
        )
        .expect("valid metric");
        let run_duration = Histogram::with_opts(HistogramOpts::new(
            "sexton_retention_run_duration_seconds",
            "time to load a cluster's catalog, plan and mark",
        ))
        .expect("valid metric");
        let decisions = IntCounterVec::new(
            Opts::new(
                "sexton_retention_decisions_total",
                "retention decisions, by decision and the rule behind it",
            ),
            &["decision", "rule"],
        )
        .expect("valid metric");
        let jobs_published = IntCounterVec::new(
            Opts::new(
                "sexton_delete_jobs_published_total",
                "delete jobs published, by kind",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let last_run = IntGaugeVec::new(
            Opts::new(
                "sexton_retention_last_run_timestamp_seconds",
                "when retention last ran for a cluster and plan",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let newest_backup_age = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_newest_backup_age_seconds",
                "age of the newest completed backup at the last retention run",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let recoverable_window = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_recoverable_window_seconds",
                "now minus the oldest instant primary can restore to, after the run's decisions",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let copies_recoverable_window = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_copies_recoverable_window_seconds",
                "now minus the oldest instant a location can restore to, after the run's decisions",
            ),
            &["cluster", "plan", "location"],
        )
        .expect("valid metric");
        let recovery_point_age = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_recovery_point_age_seconds",
                "now minus the newest instant a place can restore to (the log's tail included)",
            ),
            &["cluster", "plan", "location"],
        )
        .expect("valid metric");
        let objective_met = IntGaugeVec::new(
            Opts::new(
                "sexton_recovery_objective_met",
                "1 while a recovery objective (rpo, window, tested_within) is met at a place",
            ),
            &["cluster", "plan", "location", "objective"],
        )
        .expect("valid metric");
        let objective_short = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_recovery_objective_short_seconds",
                "by how many seconds a recovery objective is missed at a place (0 while met)",
            ),
            &["cluster", "plan", "location", "objective"],
        )
        .expect("valid metric");
        let policy_window = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_retention_policy_window_seconds",
                "the recovery window the policy promises (0 when it promises none)",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let last_verified = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_last_verified_backup_timestamp_seconds",
                "completion time of the newest backup a restore test proved (0: none proven yet)",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let missing = IntGaugeVec::new(
            Opts::new(
                "sexton_missing_backups",
                "backups whose objects the last scrub of the cluster did not find as recorded",
            ),
            &["cluster"],
        )
        .expect("valid metric");
        let last_scrub = IntGaugeVec::new(
            Opts::new(
                "sexton_scrub_last_run_timestamp_seconds",
                "when this replica last compared a cluster's catalog with its bucket",
            ),
            &["cluster"],
        )
        .expect("valid metric");
        let scrubs = IntCounterVec::new(
            Opts::new(
                "sexton_scrubs_total",
                "scrubs of a cluster's catalog against its bucket, by outcome (done, error)",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        let breaker_trips = IntCounterVec::new(
            Opts::new(
                "sexton_retention_breaker_trips_total",
                "retention runs the circuit breaker held, by trigger (fraction, count, stale)",
            ),
            &["trigger"],
        )
        .expect("valid metric");
        let breaker_held = IntGaugeVec::new(
            Opts::new(
                "sexton_retention_breaker_held",
                "1 while the group's last retention run was held for approval, else 0",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let copies_held = IntGaugeVec::new(
            Opts::new(
                "sexton_retention_copies_held",
                "1 while the last retention run of a group's copies at a location was held for \
                 approval, else 0",
            ),
            &["cluster", "plan", "location"],
        )
        .expect("valid metric");
        let audit_entries = sexton_shared::audit::Audit::counter();
        let copies_awaiting = IntGaugeVec::new(
            Opts::new(
                "sexton_copies_awaiting",
                "completed backups held at their source until a copy rule's location holds them",
            ),
            &["cluster", "plan", "location"],
        )
        .expect("valid metric");
        let copy_lag = prometheus::GaugeVec::new(
            Opts::new(
                "sexton_copy_lag_seconds",
                "age of the oldest completed backup still awaiting its copy to the location (0: none)",
            ),
            &["cluster", "plan", "location"],
        )
        .expect("valid metric");
        let locks = IntCounterVec::new(
            Opts::new(
                "sexton_retention_locks_total",
                "backups whose Object Lock a retention run set (first lock) or extended, or \
                 failed to",
            ),
            &["cluster", "outcome"],
        )
        .expect("valid metric");
        let locked_only = IntGaugeVec::new(
            Opts::new(
                "sexton_retention_locked_only",
                "backups the policy lets go that only an unexpired Object Lock keeps",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let locked_only_bytes = IntGaugeVec::new(
            Opts::new(
                "sexton_retention_locked_only_bytes",
                "bytes of the backups the policy lets go that only an unexpired Object Lock \
                 keeps: what the locks cost beyond the policy",
            ),
            &["cluster", "plan"],
        )
        .expect("valid metric");
        let tampered = IntGaugeVec::new(
            Opts::new(
                "sexton_tampered_backups",
                "backups the last scrub found written over or marked deleted behind Sexton's \
                 back, their recorded versions still there",
            ),
            &["cluster"],
        )
        .expect("valid metric");
        let partitions = prometheus::IntGauge::new(
            "sexton_retention_partitions_held",
            "partitions of the retention stream this replica holds and works on",
        )
        .expect("valid metric");
        let conflicts = prometheus::IntCounter::new(
            "sexton_retention_conflicts_total",
            "compare-and-set conflicts met while marking or unmarking catalog records",
        )
        .expect("valid metric");
        let reruns = prometheus::IntCounter::new(
            "sexton_retention_reruns_total",
            "retention runs asked for again because the catalog changed under a run",
        )
        .expect("valid metric");
        let missing_object_runs = prometheus::IntCounter::new(
            "sexton_retention_missing_object_runs_total",
            "retention runs that met an object the store says is gone, scrubbed the cluster and ran again",
        )
        .expect("valid metric");
        let cluster_runs = IntCounterVec::new(
            Opts::new(
                "sexton_retention_cluster_runs_total",
                "retention runs of each cluster, by outcome (done, failed)",
            ),
            &["cluster", "outcome"],
        )
        .expect("valid metric");
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(cluster_runs.clone()),
            Box::new(missing_object_runs.clone()),
            Box::new(partitions.clone()),
            Box::new(conflicts.clone()),
            Box::new(reruns.clone()),
            Box::new(tampered.clone()),
            Box::new(locks.clone()),
            Box::new(locked_only.clone()),
            Box::new(locked_only_bytes.clone()),
            Box::new(runs.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(run_duration.clone()),
            Box::new(decisions.clone()),
            Box::new(jobs_published.clone()),
            Box::new(last_run.clone()),
            Box::new(newest_backup_age.clone()),
            Box::new(recoverable_window.clone()),
            Box::new(copies_recoverable_window.clone()),
            Box::new(recovery_point_age.clone()),
            Box::new(objective_met.clone()),
            Box::new(objective_short.clone()),
            Box::new(policy_window.clone()),
            Box::new(last_verified.clone()),
            Box::new(missing.clone()),
            Box::new(last_scrub.clone()),
            Box::new(scrubs.clone()),
            Box::new(breaker_trips.clone()),
            Box::new(breaker_held.clone()),
            Box::new(copies_held.clone()),
            Box::new(audit_entries.clone()),
            Box::new(copies_awaiting.clone()),
            Box::new(copy_lag.clone()),
        ];
        collectors.extend(consumer_collectors);
        let names = sexton_shared::telemetry::register_all(&registry, collectors);
        Metrics {
            registry,
            names,
            consumer,
            runs,
            run_duration,
            decisions,
            jobs_published,
            last_run,
            newest_backup_age,
            recoverable_window,
            copies_recoverable_window,
            recovery_point_age,
            objective_met,
            objective_short,
            policy_window,
            last_verified,
            missing,
            last_scrub,
            scrubs,
            breaker_trips,
            breaker_held,
            copies_held,
            locks,
            locked_only,
            locked_only_bytes,
            tampered,
            audit_entries,
            copies_awaiting,
            copy_lag,
            partitions,
            conflicts,
            reruns,
            missing_object_runs,
            cluster_runs,
            copy_locations: Default::default(),
        }
    }

    /// Keeps `sexton_retention_partitions_held` at the number of partitions `held` names.
    pub fn partitions_held(&self, held: sexton_shared::partitions::HeldPartitions) {
        held.keep_gauge(self.partitions.clone());
    }

    /// Sets a group's copy gauges: for each location, how many completed backups await their
    /// copy there and the age in seconds of the oldest; locations set before and absent now
    /// read 0.
    pub fn observe_copies(
        &self,
        cluster: &str,
        plan: &str,
        awaiting: &std::collections::BTreeMap<String, (i64, f64)>,
    ) {
        let mut known = self
            .copy_locations
            .lock()
            .expect("the copy gauges' lock is never poisoned");
        let locations = known
            .entry((cluster.to_string(), plan.to_string()))
            .or_default();
        locations.extend(awaiting.keys().cloned());
        for location in locations.iter() {
            let (count, lag) = awaiting.get(location).copied().unwrap_or((0, 0.0));
            self.copies_awaiting
                .with_label_values(&[cluster, plan, location])
                .set(count);
            self.copy_lag
                .with_label_values(&[cluster, plan, location])
                .set(lag);
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
