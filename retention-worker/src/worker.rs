//! The retention-worker's `Worker` and its consumer side: one `checkpoint-complete` or
//! `retention-sweep` message becomes one retention run of its cluster, unless a run that started
//! after the message was published already covers it; a run that met a compare-and-set conflict
//! asks for another.
//!
//! `impl Worker` is spread over the submodules, one seam each; its methods, by where they live:
//! - here: `new`, `handle` (one event → one run), `stranded` and `hold` (a run held, issue 54),
//!   `note_status` (`sexton-retention-status`), `after_missing_object`, `rerun`, and `covered`
//!   and `ran` (skipping an event a run already covers);
//! - `open`: `open`, the worker's state at start-up (stores checked for Object Lock);
//! - `groups`: `plan_groups` (loading what the plans need: schedules, catalog view, binlog
//!   index; the breaker's verdict on plans that delete) over `plan_primary_groups`,
//!   `plan_location_group` and `location_limits`; and `plan_places`, `plan_cluster`,
//!   `binlog_status` over it. A group's plan itself is pure: [`crate::group_plan`];
//! - `run`: `run_cluster`, a run acting on its groups' plans in order (`run_group`,
//!   `expire_planned`, `unmark_planned`, `trim_planned`, `audit_and_publish`, …);
//! - `copies`: `run_location_group`, a run's work at the other locations (`expire_copy`);
//! - `locks`: `lock_planned` and `lock_segments`, Object Lock on what a run keeps;
//! - `marks`: the catalog writes (`expire`, `expire_volumes`, `unmark_kept_volumes`,
//!   `expire_user_requests`, `record_at`, `written`), each compare-and-set, each followed by
//!   its delete job;
//! - `publish`: the jobs and events a run publishes (`publish_jobs`, `announce`,
//!   `publish_binlog`, `publish_merges`);
//! - `observe`: `observe_recovery`, a run's recovery gauges;
//! - `api`: the request handlers (`serve_previews`, `serve_scrubs`, `serve_approvals`,
//!   `serve_binlog_status`; `preview`, `approve`, the planning half of `retention.approve`) and
//!   the scrub (`scrub`: `judge_primary`, `judge_locations`, `write_copy_findings`,
//!   `report_tampering`, `write_findings`);
//! - `recovery`: `serve_recovery` (`recovery.window`).
//!
//! This module neither plans nor writes the catalog itself.

mod api;
mod copies;
mod groups;
mod locks;
mod marks;
mod observe;
mod open;
mod publish;
mod recovery;
mod run;

use std::{sync::Arc, time::Duration};

use anyhow::Context as _;
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use sexton_model::{
    names::ClusterName,
    records::{RetentionOutcome, RetentionStatus},
    wire::{self},
};
use sexton_shared::{
    catalog::Catalog,
    channels::{self, RetentionEvent},
    config::Config,
    object_store::{ObjectError, ObjectStore},
    outcome::{publish_incident, Outcome},
    topology::{self, Topology},
};

use crate::metrics::Metrics;
use crate::safety::Envelope;
use crate::view::CatalogView;

pub use crate::group_plan::GroupPlan;

/// The retention-worker's state, cloned into the consumer and each API task.
#[derive(Clone)]
pub struct Worker {
    topology: Topology,
    catalog: Catalog,
    /// The catalog as runs read it: brought up to date from the stream before each run
    /// ([`crate::view`]).
    view: Arc<CatalogView>,
    /// The schedules as runs read them: brought up to date before each run, like the view.
    schedules: Arc<sexton_shared::schedules_view::SchedulesView>,
    metrics: Arc<Metrics>,
    /// Reads the binlog indexes (never writes them: the deleter does).
    store: ObjectStore,
    /// The other locations this replica can read: the scrub compares each one's copies with
    /// its listing (issue 28). Read keys suffice.
    locations: std::collections::BTreeMap<sexton_model::names::LocationName, ObjectStore>,
    /// Each configured location's default storage class (a copy that names none is in it).
    location_classes: std::collections::BTreeMap<sexton_model::names::LocationName, Option<String>>,
    prefix: String,
    /// When the last successful run of each cluster started (this replica's). A checkpoint or
    /// sweep published well before that is already covered: the run read a catalog that held
    /// the checkpoint's backup (the scheduler records a backup before it publishes the event).
    last_runs: Arc<std::sync::Mutex<std::collections::HashMap<ClusterName, DateTime<Utc>>>>,
    /// The circuit breaker, its approvals and the audit trail (docs/safety.md).
    envelope: Arc<Envelope>,
    /// Object Lock at primary (`[s3.lock]`, issue 29): runs lock what they keep.
    lock: Option<sexton_shared::config::LockConfig>,
    /// Object Lock at each location that has one (`[locations.<name>.lock]`): a location's
    /// runs lock the copies they keep there, with `locations`' client.
    location_locks: std::collections::BTreeMap<
        sexton_model::names::LocationName,
        sexton_shared::config::LockConfig,
    >,
    /// The binlog segments this replica has locked, and until when: a cache (lost on a
    /// restart, which costs one request per segment, once).
    segment_locks: Arc<std::sync::Mutex<std::collections::HashMap<String, DateTime<Utc>>>>,
    /// How each cluster's runs are going (issue 54): written after each run.
    retention_status: async_nats::jetstream::kv::Store,
}

tokio::task_local! {
    /// Compare-and-set conflicts the run in this task met. Runs of different clusters go on
    /// at once (one per partition), so a counter shared by the replica would make one run's
    /// conflict ask for another cluster's rerun.
    static RUN_CONFLICTS: std::cell::Cell<u64>;
}

/// Counts a compare-and-set conflict against the run in this task (and the metric).
pub(crate) fn count_conflict(metrics: &Metrics) {
    metrics.conflicts.inc();
    let _ = RUN_CONFLICTS.try_with(|conflicts| conflicts.set(conflicts.get() + 1));
}

/// A run that decided nothing on purpose (issue 54), and why: carried as the run's error so
/// that every caller of a run (an event, a rerun, a run after a scrub) holds the same way.
#[derive(Debug)]
pub(crate) struct Held(pub String);

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Held {}

/// Why a cluster is held: each place whose backups name another store than the place's
/// settings, how many, the first of them, and the command that moves them.
fn stranded_reason(cluster: &ClusterName, elsewhere: &[crate::view::Stranded]) -> String {
    let stores = elsewhere
        .iter()
        .map(|s| {
            let first: Vec<&str> = s.first.iter().map(|id| id.as_str()).collect();
            let place = s.place.as_ref().map_or("primary", |l| l.as_str());
            format!(
                "at {place}, {} in {} ({}{}) while {place} is {}",
                s.count,
                s.store,
                first.join(", "),
                if s.count > first.len() { ", ..." } else { "" },
                s.here
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let commands = elsewhere
        .iter()
        .map(|s| {
            let mut command = format!("sexton catalog migrate --cluster {cluster}");
            if let Some(location) = &s.place {
                command.push_str(&format!(" --location {location}"));
            }
            command.push_str(&format!(" --from-bucket {}", s.store.bucket));
            if s.store.prefix != s.here.prefix {
                command.push_str(&format!(" --from-prefix '{}'", s.store.prefix));
            }
            if s.store.endpoint != s.here.endpoint {
                if let Some(endpoint) = &s.store.endpoint {
                    command.push_str(&format!(" --from-endpoint {endpoint}"));
                }
            }
            format!("`{command}`")
        })
        .collect::<Vec<_>>()
        .join(", then ");
    format!(
        "backups of {cluster} are recorded in another store than their place's: {stores}. \
         Retention is held: nothing of {cluster} is decided, locked, marked missing or deleted \
         until they are moved with {commands} (docs/immutability.md), or the place is given \
         that store again"
    )
}

/// How much earlier than a run's start an event must have been published to count as covered
/// by it: room for the clocks of the NATS server and this host to disagree. Skew beyond it only
/// makes an event run again, or (the other way) wait for the next event or sweep: retention
/// then keeps a backup longer, never deletes one sooner.
const COVERED_MARGIN: chrono::Duration = chrono::Duration::seconds(1);

/// Whether a run that started at `last_run` (if any) covers an event published at `published`.
fn is_covered(last_run: Option<DateTime<Utc>>, published: DateTime<Utc>) -> bool {
    last_run.is_some_and(|started| started >= published + COVERED_MARGIN)
}

impl Worker {
    pub fn new(
        topology: Topology,
        config: Config,
        metrics: Arc<Metrics>,
        store: ObjectStore,
        locations: std::collections::BTreeMap<sexton_model::names::LocationName, ObjectStore>,
        retention_status: async_nats::jetstream::kv::Store,
    ) -> Worker {
        let envelope = Arc::new(Envelope::new(
            topology.jetstream.clone(),
            topology.breaker.clone(),
            config.breaker.clone(),
            metrics.clone(),
        ));
        Worker {
            catalog: Catalog::new(topology.catalog.clone()),
            view: Arc::new(CatalogView::fed(topology.catalog.clone())),
            schedules: Arc::new(sexton_shared::schedules_view::SchedulesView::new(
                topology.schedules.clone(),
            )),
            topology,
            metrics,
            store,
            locations,
            location_classes: config
                .locations
                .iter()
                .filter_map(|(name, location)| {
                    Some((
                        sexton_model::names::LocationName::new(name).ok()?,
                        location.storage_class.clone(),
                    ))
                })
                .collect(),
            lock: config.s3.lock.clone(),
            segment_locks: Arc::default(),
            retention_status,
            location_locks: config
                .locations
                .iter()
                .filter_map(|(name, location)| {
                    Some((
                        sexton_model::names::LocationName::new(name).ok()?,
                        location.s3.lock.clone()?,
                    ))
                })
                .collect(),
            prefix: config.s3.prefix,
            last_runs: Arc::default(),
            envelope,
        }
    }

    /// Whether a successful run of `cluster` started after `published` (with the margin).
    fn covered(&self, cluster: &ClusterName, published: DateTime<Utc>) -> bool {
        let last_runs = self.last_runs.lock().expect("last runs");
        is_covered(last_runs.get(cluster).copied(), published)
    }

    fn ran(&self, cluster: &ClusterName, started: DateTime<Utc>) {
        let mut last_runs = self.last_runs.lock().expect("last runs");
        let entry = last_runs.entry(cluster.clone()).or_insert(started);
        *entry = (*entry).max(started);
    }

    /// Handles one `checkpoint-complete` or `retention-sweep` event, received from `message`
    /// (`channels::RETENTION_EVENTS`: the body names the cluster its subject names, so the run
    /// is of a cluster of the partition this replica holds).
    pub async fn handle(&self, event: RetentionEvent, message: &jetstream::Message) -> Outcome {
        let (trigger, cluster, scrub) = match event {
            RetentionEvent::Checkpoint(event) => ("checkpoint", event.cluster, false),
            RetentionEvent::Sweep(event) => ("sweep", event.cluster, event.scrub),
        };
        // The scheduler's sweep asks for the cluster's scrub once per scrub interval: the
        // bucket first, so this very run counts only what is there. A bucket that cannot be
        // listed costs this scrub, not the run (the next interval scrubs again).
        if scrub {
            if let Err(err) = self.scrub(&cluster, false).await {
                tracing::warn!(%cluster, error = format!("{err:#}"), "scrub failed; retention runs on the catalog as it is");
            }
        }
        // Under a burst of completions the queue holds many checkpoints of one cluster; one run
        // covers every one published before it started.
        let published = message.info().ok().and_then(|info| {
            DateTime::from_timestamp(info.published.unix_timestamp(), info.published.nanosecond())
        });
        if published.is_some_and(|published| self.covered(&cluster, published)) {
            self.metrics
                .runs
                .with_label_values(&[trigger, "covered"])
                .inc();
            return Outcome::Done;
        }
        let started = Utc::now();
        let timer = self.metrics.run_duration.start_timer();
        let (result, conflicted) = RUN_CONFLICTS
            .scope(std::cell::Cell::new(0), async {
                let result = self.run_cluster(&cluster, started).await;
                (result, RUN_CONFLICTS.with(|conflicts| conflicts.get()) > 0)
            })
            .await;
        timer.observe_duration();
        let result = match result {
            Ok(()) if conflicted => {
                self.metrics.reruns.inc();
                self.rerun(&cluster, started).await
            }
            Err(err) if ObjectError::in_chain_missing(&err) => {
                self.after_missing_object(&cluster, err).await
            }
            other => other,
        };
        // Backups recorded in a store the place was not given (issue 54): the run decided
        // nothing on purpose, which is not a failure to retry.
        if let Some(Held(reason)) = result.as_ref().err().and_then(|err| err.downcast_ref()) {
            let reason = reason.clone();
            return self.hold(trigger, &cluster, reason, message).await;
        }
        match result {
            Ok(()) => {
                self.ran(&cluster, started);
                self.note_status(&cluster, RetentionOutcome::Decided, None)
                    .await;
                self.metrics
                    .runs
                    .with_label_values(&[trigger, "done"])
                    .inc();
                self.metrics
                    .cluster_runs
                    .with_label_values(&[cluster.as_str(), "done"])
                    .inc();
                Outcome::Done
            }
            Err(err) => {
                self.metrics
                    .cluster_runs
                    .with_label_values(&[cluster.as_str(), "failed"])
                    .inc();
                self.note_status(&cluster, RetentionOutcome::Failed, Some(format!("{err:#}")))
                    .await;
                let delivered = message.info().map(|info| info.delivered).unwrap_or(0);
                if delivered >= topology::MAX_DELIVER {
                    // The last delivery: said, not dropped in silence. The cluster's next
                    // sweep runs it again; until one passes, nothing of it is decided.
                    tracing::error!(%cluster, error = format!("{err:#}"), delivered, "retention run failed on its last delivery; the next sweep tries again");
                    self.metrics
                        .runs
                        .with_label_values(&[trigger, "abandoned"])
                        .inc();
                    publish_incident(
                        &self.topology.jetstream,
                        wire::Incident {
                            schema_version: wire::SCHEMA_VERSION,
                            service: "retention-worker".into(),
                            kind: "retention-failing".into(),
                            cluster: Some(cluster.to_string()),
                            backup_id: None,
                            subject: message.subject.to_string(),
                            reason: format!(
                                "the {trigger} run failed {delivered} times, the last: {err:#}; \
                                 nothing of the cluster is decided until a run passes (the next \
                                 sweep tries again)"
                            ),
                            at: Utc::now(),
                        },
                    )
                    .await;
                    return Outcome::Done;
                }
                tracing::warn!(%cluster, error = format!("{err:#}"), "retention run failed; will retry");
                self.metrics
                    .runs
                    .with_label_values(&[trigger, "retry"])
                    .inc();
                Outcome::RetryAfter(Duration::from_secs(5))
            }
        }
    }

    /// Why `cluster`'s retention is held, when some of its backups are recorded in another
    /// store than the one their place's settings name (issue 54): the stores, how many backups
    /// name each, and the way out. Read from the view the run plans on (no catalog request of
    /// its own).
    pub(super) fn stranded(
        &self,
        cluster: &ClusterName,
        places: &crate::view::ClusterPlaces,
    ) -> Option<Held> {
        let elsewhere = places.stores.elsewhere(|place| match place {
            None => Some(self.store.place()),
            Some(name) => self.locations.get(name).map(ObjectStore::place),
        });
        (!elsewhere.is_empty()).then(|| Held(stranded_reason(cluster, &elsewhere)))
    }

    /// A run held on purpose ([`Worker::stranded`]): said in the status on every run, and in
    /// an incident when the hold begins or its reason changes.
    async fn hold(
        &self,
        trigger: &str,
        cluster: &ClusterName,
        reason: String,
        message: &jetstream::Message,
    ) -> Outcome {
        tracing::warn!(%cluster, reason, "retention held");
        self.metrics
            .runs
            .with_label_values(&[trigger, "held"])
            .inc();
        self.metrics
            .cluster_runs
            .with_label_values(&[cluster.as_str(), "held"])
            .inc();
        let status = self
            .note_status(cluster, RetentionOutcome::Held, Some(reason.clone()))
            .await;
        if status.is_new_hold() {
            publish_incident(
                &self.topology.jetstream,
                wire::Incident {
                    schema_version: wire::SCHEMA_VERSION,
                    service: "retention-worker".into(),
                    kind: "store-moved".into(),
                    cluster: Some(cluster.to_string()),
                    backup_id: None,
                    subject: message.subject.to_string(),
                    reason,
                    at: Utc::now(),
                },
            )
            .await;
        }
        Outcome::Done
    }

    /// Writes how this run of `cluster` ended to the retention status bucket, carrying on the
    /// count of runs that ended alike ([`RetentionStatus::after`]); returns the status. A
    /// status that cannot be read or written is said in the log: it never fails the run.
    pub(crate) async fn note_status(
        &self,
        cluster: &ClusterName,
        outcome: RetentionOutcome,
        reason: Option<String>,
    ) -> RetentionStatus {
        let previous = match sexton_shared::leader_read::value(
            &self.retention_status,
            cluster.as_str(),
        )
        .await
        {
            Ok(body) => body.and_then(|body| serde_json::from_slice(&body).ok()),
            Err(err) => {
                tracing::warn!(%cluster, error = format!("{err:#}"), "reading the retention status failed");
                None
            }
        };
        let status =
            RetentionStatus::after(previous.as_ref(), cluster, outcome, reason, Utc::now());
        let body = serde_json::to_vec(&status).expect("a status serialises");
        if let Err(err) = self
            .retention_status
            .put(cluster.as_str(), body.into())
            .await
        {
            tracing::warn!(%cluster, error = %err, "writing the retention status failed");
        }
        status
    }

    /// A run met an object the store says is not there (locking a kept backup, issue 54):
    /// evidence, not a transient error. The cluster is scrubbed now, which marks what is gone
    /// `missing` at the place it is gone from (with an incident and an audit entry), and the
    /// run is done once more over what is there, deciding and locking the others. A run that
    /// meets it again (the scrub found nothing gone) fails as before and is retried.
    async fn after_missing_object(
        &self,
        cluster: &ClusterName,
        err: anyhow::Error,
    ) -> anyhow::Result<()> {
        tracing::warn!(%cluster, error = format!("{err:#}"), "an object of a kept backup is not in the store; scrubbing the cluster and running again");
        self.metrics.missing_object_runs.inc();
        let report = self.scrub(cluster, false).await.map_err(|scrub| {
            err.context(format!("and the scrub it asked for failed: {scrub:#}"))
        })?;
        tracing::info!(%cluster, findings = report.findings.len(), copies = report.copies.len(), "scrubbed after a missing object");
        self.run_cluster(cluster, Utc::now()).await
    }

    /// Asks for another run of `cluster`: this one met a record that changed under it, and
    /// what it left undecided must not wait for the next hourly sweep (a backup whose deleter
    /// took a partial mark off while this run marked it whole would stay). The event is
    /// published after this run started, so this run does not cover it; its message id names
    /// the run's start, so a redelivery of this run asks once.
    async fn rerun(&self, cluster: &ClusterName, started: DateTime<Utc>) -> anyhow::Result<()> {
        tracing::info!(%cluster, "the catalog changed under the run; another run asked for");
        channels::request_sweep(
            &self.topology.jetstream,
            cluster,
            Utc::now(),
            false,
            &channels::SweepCause::Rerun {
                started_micros: started.timestamp_micros(),
            },
        )
        .await
        .context("asking for another retention run")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_covered_only_by_a_run_that_started_well_after_it() {
        let at: DateTime<Utc> = "2026-03-01T12:00:00Z".parse().unwrap();
        let ms = chrono::Duration::milliseconds;
        assert!(!is_covered(None, at), "no run yet");
        assert!(!is_covered(Some(at - ms(5)), at), "a run before the event");
        assert!(!is_covered(Some(at), at), "a run at the same instant");
        assert!(
            !is_covered(Some(at + ms(999)), at),
            "inside the clock margin"
        );
        assert!(is_covered(Some(at + ms(1000)), at));
        assert!(is_covered(Some(at + ms(60_000)), at));
    }
}
