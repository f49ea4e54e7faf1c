//! The retention-worker's metrics, defined in one place: a function per family (runs, recovery,
//! scrubs, safety, locks, copies) makes its metrics, and [`Metrics::new`] registers them all.

use prometheus::{
    core::Collector, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};

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
    pub newest_backup_age: GaugeVec,
    pub recoverable_window: GaugeVec,
    /// The same at each location, over the copies there (issue 28).
    pub copies_recoverable_window: GaugeVec,
    /// Now minus the newest restorable instant at a place, the log's tail included (issue 47).
    pub recovery_point_age: GaugeVec,
    /// 1 while an objective is met at a place, 0 while it is missed.
    pub objective_met: IntGaugeVec,
    /// By how many seconds an objective is missed (0 while met).
    pub objective_short: GaugeVec,
    pub policy_window: GaugeVec,
    /// Completion time of the newest backup a restore test proved (groups with tests only).
    pub last_verified: GaugeVec,
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
    pub copy_lag: GaugeVec,
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
    pub partitions: IntGauge,
    /// Compare-and-set conflicts met while marking or unmarking records.
    pub conflicts: IntCounter,
    /// Runs asked for again because a run met a conflict.
    pub reruns: IntCounter,
    /// Runs that met an object the store says is gone, scrubbed the cluster and ran again.
    pub missing_object_runs: IntCounter,
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
        let mut collectors = Collectors::default();
        let RunMetrics {
            runs,
            run_duration,
            decisions,
            jobs_published,
            last_run,
            partitions,
            conflicts,
            reruns,
            missing_object_runs,
            cluster_runs,
        } = run_metrics(&mut collectors);
        let RecoveryMetrics {
            newest_backup_age,
            recoverable_window,
            copies_recoverable_window,
            recovery_point_age,
            objective_met,
            objective_short,
            policy_window,
            last_verified,
        } = recovery_metrics(&mut collectors);
        let ScrubMetrics {
            missing,
            last_scrub,
            scrubs,
            tampered,
        } = scrub_metrics(&mut collectors);
        let SafetyMetrics {
            breaker_trips,
            breaker_held,
            copies_held,
            audit_entries,
        } = safety_metrics(&mut collectors);
        let LockMetrics {
            locks,
            locked_only,
            locked_only_bytes,
        } = lock_metrics(&mut collectors);
        let CopyMetrics {
            copies_awaiting,
            copy_lag,
        } = copy_metrics(&mut collectors);
        let mut collectors = collectors.0;
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

/// The metrics made so far, registered together once all are made ([`Metrics::new`]).
#[derive(Default)]
struct Collectors(Vec<Box<dyn Collector>>);

impl Collectors {
    /// Keeps `metric` to be registered, and hands it back.
    fn add<M: Collector + Clone + 'static>(&mut self, metric: M) -> M {
        self.0.push(Box::new(metric.clone()));
        metric
    }
}

/// A counter by `labels`.
fn counters(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// An integer gauge by `labels`.
fn int_gauges(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// A gauge by `labels`.
fn gauges(name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    GaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

/// How runs go: by trigger, by cluster, how long, what they decided and published, and the
/// conflicts and reruns they met; and the partitions this replica runs for.
struct RunMetrics {
    runs: IntCounterVec,
    run_duration: Histogram,
    decisions: IntCounterVec,
    jobs_published: IntCounterVec,
    last_run: IntGaugeVec,
    partitions: IntGauge,
    conflicts: IntCounter,
    reruns: IntCounter,
    missing_object_runs: IntCounter,
    cluster_runs: IntCounterVec,
}

/// Makes the [`RunMetrics`], each kept in `collectors`.
fn run_metrics(collectors: &mut Collectors) -> RunMetrics {
    let run_duration = Histogram::with_opts(HistogramOpts::new(
        "sexton_retention_run_duration_seconds",
        "time to load a cluster's catalog, plan and mark",
    ))
    .expect("valid metric");
    let partitions = IntGauge::new(
        "sexton_retention_partitions_held",
        "partitions of the retention stream this replica holds and works on",
    )
    .expect("valid metric");
    let conflicts = IntCounter::new(
        "sexton_retention_conflicts_total",
        "compare-and-set conflicts met while marking or unmarking catalog records",
    )
    .expect("valid metric");
    let reruns = IntCounter::new(
        "sexton_retention_reruns_total",
        "retention runs asked for again because the catalog changed under a run",
    )
    .expect("valid metric");
    let missing_object_runs = IntCounter::new(
        "sexton_retention_missing_object_runs_total",
        "retention runs that met an object the store says is gone, scrubbed the cluster and ran again",
    )
    .expect("valid metric");
    RunMetrics {
        runs: collectors.add(counters(
            "sexton_retention_runs_total",
            "retention runs, by trigger and outcome",
            &["trigger", "outcome"],
        )),
        run_duration: collectors.add(run_duration),
        decisions: collectors.add(counters(
            "sexton_retention_decisions_total",
            "retention decisions, by decision and the rule behind it",
            &["decision", "rule"],
        )),
        jobs_published: collectors.add(counters(
            "sexton_delete_jobs_published_total",
            "delete jobs published, by kind",
            &["kind"],
        )),
        last_run: collectors.add(int_gauges(
            "sexton_retention_last_run_timestamp_seconds",
            "when retention last ran for a cluster and plan",
            &["cluster", "plan"],
        )),
        partitions: collectors.add(partitions),
        conflicts: collectors.add(conflicts),
        reruns: collectors.add(reruns),
        missing_object_runs: collectors.add(missing_object_runs),
        cluster_runs: collectors.add(counters(
            "sexton_retention_cluster_runs_total",
            "retention runs of each cluster, by outcome (done, failed)",
            &["cluster", "outcome"],
        )),
    }
}

/// What each place can restore, after a run's decisions, against what is promised.
struct RecoveryMetrics {
    newest_backup_age: GaugeVec,
    recoverable_window: GaugeVec,
    copies_recoverable_window: GaugeVec,
    recovery_point_age: GaugeVec,
    objective_met: IntGaugeVec,
    objective_short: GaugeVec,
    policy_window: GaugeVec,
    last_verified: GaugeVec,
}

/// Makes the [`RecoveryMetrics`], each kept in `collectors`.
fn recovery_metrics(collectors: &mut Collectors) -> RecoveryMetrics {
    RecoveryMetrics {
        newest_backup_age: collectors.add(gauges(
            "sexton_newest_backup_age_seconds",
            "age of the newest completed backup at the last retention run",
            &["cluster", "plan"],
        )),
        recoverable_window: collectors.add(gauges(
            "sexton_recoverable_window_seconds",
            "now minus the oldest instant primary can restore to, after the run's decisions",
            &["cluster", "plan"],
        )),
        copies_recoverable_window: collectors.add(gauges(
            "sexton_copies_recoverable_window_seconds",
            "now minus the oldest instant a location can restore to, after the run's decisions",
            &["cluster", "plan", "location"],
        )),
        recovery_point_age: collectors.add(gauges(
            "sexton_recovery_point_age_seconds",
            "now minus the newest instant a place can restore to (the log's tail included)",
            &["cluster", "plan", "location"],
        )),
        objective_met: collectors.add(int_gauges(
            "sexton_recovery_objective_met",
            "1 while a recovery objective (rpo, window, tested_within) is met at a place",
            &["cluster", "plan", "location", "objective"],
        )),
        objective_short: collectors.add(gauges(
            "sexton_recovery_objective_short_seconds",
            "by how many seconds a recovery objective is missed at a place (0 while met)",
            &["cluster", "plan", "location", "objective"],
        )),
        policy_window: collectors.add(gauges(
            "sexton_retention_policy_window_seconds",
            "the recovery window the policy promises (0 when it promises none)",
            &["cluster", "plan"],
        )),
        last_verified: collectors.add(gauges(
            "sexton_last_verified_backup_timestamp_seconds",
            "completion time of the newest backup a restore test proved (0: none proven yet)",
            &["cluster", "plan"],
        )),
    }
}

/// What the scrubs found: backups missing or tampered with, and when they ran.
struct ScrubMetrics {
    missing: IntGaugeVec,
    last_scrub: IntGaugeVec,
    scrubs: IntCounterVec,
    tampered: IntGaugeVec,
}

/// Makes the [`ScrubMetrics`], each kept in `collectors`.
fn scrub_metrics(collectors: &mut Collectors) -> ScrubMetrics {
    ScrubMetrics {
        missing: collectors.add(int_gauges(
            "sexton_missing_backups",
            "backups whose objects the last scrub of the cluster did not find as recorded",
            &["cluster"],
        )),
        last_scrub: collectors.add(int_gauges(
            "sexton_scrub_last_run_timestamp_seconds",
            "when this replica last compared a cluster's catalog with its bucket",
            &["cluster"],
        )),
        scrubs: collectors.add(counters(
            "sexton_scrubs_total",
            "scrubs of a cluster's catalog against its bucket, by outcome (done, error)",
            &["outcome"],
        )),
        tampered: collectors.add(int_gauges(
            "sexton_tampered_backups",
            "backups the last scrub found written over or marked deleted behind Sexton's \
             back, their recorded versions still there",
            &["cluster"],
        )),
    }
}

/// The circuit breaker's holds, and the audit trail of what runs decided.
struct SafetyMetrics {
    breaker_trips: IntCounterVec,
    breaker_held: IntGaugeVec,
    copies_held: IntGaugeVec,
    audit_entries: IntCounterVec,
}

/// Makes the [`SafetyMetrics`], each kept in `collectors`.
fn safety_metrics(collectors: &mut Collectors) -> SafetyMetrics {
    SafetyMetrics {
        breaker_trips: collectors.add(counters(
            "sexton_retention_breaker_trips_total",
            "retention runs the circuit breaker held, by trigger (fraction, count, stale)",
            &["trigger"],
        )),
        breaker_held: collectors.add(int_gauges(
            "sexton_retention_breaker_held",
            "1 while the group's last retention run was held for approval, else 0",
            &["cluster", "plan"],
        )),
        copies_held: collectors.add(int_gauges(
            "sexton_retention_copies_held",
            "1 while the last retention run of a group's copies at a location was held for \
             approval, else 0",
            &["cluster", "plan", "location"],
        )),
        audit_entries: collectors.add(sexton_shared::audit::Audit::counter()),
    }
}

/// Object Lock (issue 29): the locks runs set, and what the locks keep beyond the policy.
struct LockMetrics {
    locks: IntCounterVec,
    locked_only: IntGaugeVec,
    locked_only_bytes: IntGaugeVec,
}

/// Makes the [`LockMetrics`], each kept in `collectors`.
fn lock_metrics(collectors: &mut Collectors) -> LockMetrics {
    LockMetrics {
        locks: collectors.add(counters(
            "sexton_retention_locks_total",
            "backups whose Object Lock a retention run set (first lock) or extended, or \
             failed to",
            &["cluster", "outcome"],
        )),
        locked_only: collectors.add(int_gauges(
            "sexton_retention_locked_only",
            "backups the policy lets go that only an unexpired Object Lock keeps",
            &["cluster", "plan"],
        )),
        locked_only_bytes: collectors.add(int_gauges(
            "sexton_retention_locked_only_bytes",
            "bytes of the backups the policy lets go that only an unexpired Object Lock \
             keeps: what the locks cost beyond the policy",
            &["cluster", "plan"],
        )),
    }
}

/// Backups held at their source until a copy rule's location holds them.
struct CopyMetrics {
    copies_awaiting: IntGaugeVec,
    copy_lag: GaugeVec,
}

/// Makes the [`CopyMetrics`], each kept in `collectors`.
fn copy_metrics(collectors: &mut Collectors) -> CopyMetrics {
    CopyMetrics {
        copies_awaiting: collectors.add(int_gauges(
            "sexton_copies_awaiting",
            "completed backups held at their source until a copy rule's location holds them",
            &["cluster", "plan", "location"],
        )),
        copy_lag: collectors.add(gauges(
            "sexton_copy_lag_seconds",
            "age of the oldest completed backup still awaiting its copy to the location (0: none)",
            &["cluster", "plan", "location"],
        )),
    }
}
