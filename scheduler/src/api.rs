//! The scheduler's half of the request/reply API: schedules and the backup catalog. Requests
//! are answered by a queue group, so any number of replicas share them. Every handler decodes,
//! validates, acts with compare-and-set, and answers with a [`Reply`]; a bad request gets an
//! `invalid` error and changes nothing.

use anyhow::Context as _;
use chrono::Utc;
use futures::StreamExt;
use serde_json::{json, Value};
use sexton_schedule::{Timing, TimingSpec};
use sexton_shared::{
    api::{
        ApiError, BackupRef, ByName, ErrorCode, ListFilter, Reply, ScheduleBackfill, ScheduleSpec,
        ScheduleUpdate, Unpause,
    },
    catalog::Catalog,
    config::Config,
    names::ClusterName,
    records::{
        Backfill, ClusterRecord, SchedulePhase, ScheduleRecord, ScheduleStatus, MAX_BACKFILL_TICKS,
        RECORD_SCHEMA_VERSION,
    },
    topology::{self, Topology},
    wire::{self, Message},
    Shutdown,
};

use crate::timers;

mod backup_delete;
mod backup_describe;
mod backup_hold;
mod backup_verify;
mod catalog_import;
mod cluster_forget;
mod schedule_delete;
mod schedule_guard;
mod trail;

/// What the API reads and writes besides NATS: the bucket (read only) and the restore tests.
pub struct Edges {
    pub store: sexton_shared::object_store::ObjectStore,
    pub verifier: crate::verify::Verifier,
    /// Set once every API subscription exists (the scheduler's /readyz waits for it).
    pub ready: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

pub async fn run(
    client: async_nats::Client,
    topology: Topology,
    clusters_bucket: async_nats::jetstream::kv::Store,
    edges: Edges,
    config: Config,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    mut shutdown: Shutdown,
) -> anyhow::Result<()> {
    let Edges {
        store,
        verifier,
        ready,
    } = edges;
    let requests = futures::stream::select(
        client
            .queue_subscribe(
                topology::api_subject("schedule", "*"),
                topology::API_QUEUE_GROUP.into(),
            )
            .await
            .context("subscribing to the schedule api")?,
        client
            .queue_subscribe(
                topology::api_subject("backup", "*"),
                topology::API_QUEUE_GROUP.into(),
            )
            .await
            .context("subscribing to the backup api")?,
    );
    let requests = futures::stream::select(
        requests,
        client
            .queue_subscribe(
                topology::api_subject("cluster", "*"),
                topology::API_QUEUE_GROUP.into(),
            )
            .await
            .context("subscribing to the cluster api")?,
    );
    // Only this verb of `catalog.*`: the retention-worker answers `catalog.scrub` in the same
    // queue group.
    let mut requests = futures::stream::select(
        requests,
        client
            .queue_subscribe(
                topology::api_subject("catalog", "import"),
                topology::API_QUEUE_GROUP.into(),
            )
            .await
            .context("subscribing to catalog imports")?,
    );
    // The server has the subscriptions once a flush comes back: then a request finds them.
    client
        .flush()
        .await
        .context("flushing the api subscriptions")?;
    ready.store(true, std::sync::atomic::Ordering::Release);
    let api = Api {
        catalog: Catalog::new(topology.catalog.clone()),
        audit: sexton_shared::audit::Audit::new(
            topology.jetstream.clone(),
            "scheduler",
            metrics.audit_entries.clone(),
        ),
        topology,
        clusters_bucket,
        store,
        verifier,
        config,
        metrics,
    };
    loop {
        let request = tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            request = requests.next() => match request {
                Some(request) => request,
                None => anyhow::bail!("the api subscription ended"),
            },
        };
        let Some(reply_to) = request.reply.clone() else {
            continue;
        };
        let verb = request
            .subject
            .strip_prefix(topology::SUBJECT_ROOT)
            .unwrap_or_default()
            .trim_start_matches(".api.")
            .to_string();
        let actor = sexton_shared::audit::Actor::from_headers(request.headers.as_ref());
        let result = api.handle(&verb, &request.payload, &actor).await;
        api.audit_request(
            &verb,
            trail::arguments_of(&request.payload),
            &actor,
            &result,
        )
        .await;
        let reply = Reply::from_result(result);
        let body = serde_json::to_vec(&reply).expect("replies serialise");
        if let Err(err) = client.publish(reply_to, body.into()).await {
            tracing::warn!(error = %err, "could not send an api reply");
        }
    }
}

struct Api {
    topology: Topology,
    clusters_bucket: async_nats::jetstream::kv::Store,
    /// Read only: `catalog.import` lists the bucket and reads metadata.json documents.
    store: sexton_shared::object_store::ObjectStore,
    /// Asks for restore tests (`backup.verify`).
    verifier: crate::verify::Verifier,
    config: Config,
    catalog: Catalog,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// The audit trail: requests, schedule changes, records removed (docs/safety.md).
    audit: sexton_shared::audit::Audit,
}

fn invalid(err: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Invalid, err.to_string())
}

fn unavailable(err: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, err.to_string())
}

fn backup_not_found(cluster: &ClusterName, id: &sexton_shared::names::BackupId) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("backup {id} of cluster {cluster} not found"),
    )
}

impl Api {
    /// The cluster's schedules and records, and where backup `id` is among the records.
    async fn cluster_with_backup(
        &self,
        cluster: &ClusterName,
        id: &sexton_shared::names::BackupId,
    ) -> Result<(sexton_shared::planning::ClusterState, usize), ApiError> {
        let state =
            sexton_shared::planning::load_cluster(&self.topology.schedules, &self.catalog, cluster)
                .await
                .map_err(|err| unavailable(format!("{err:#}")))?;
        let at = state
            .records
            .iter()
            .position(|r| r.value.id == *id)
            .ok_or_else(|| backup_not_found(cluster, id))?;
        Ok((state, at))
    }
}

fn decode<T: Message>(body: &[u8]) -> Result<T, ApiError> {
    // An empty body means "no parameters" for list requests.
    let body: &[u8] = if body.is_empty() {
        br#"{"schema_version":1}"#
    } else {
        body
    };
    wire::decode(body).map_err(invalid)
}

impl Api {
    #[tracing::instrument(skip_all, fields(verb = %verb))]
    async fn handle(
        &self,
        verb: &str,
        body: &[u8],
        actor: &sexton_shared::audit::Actor,
    ) -> Result<Value, ApiError> {
        match verb {
            "schedule.create" => self.create(decode(body)?, actor).await,
            "schedule.get" => self.get(decode(body)?).await,
            "schedule.describe" => self.describe(decode(body)?).await,
            "schedule.list" => self.list(decode(body)?).await,
            "schedule.delete" => self.delete(decode(body)?, actor).await,
            "schedule.pause" => {
                let req: ByName = decode(body)?;
                self.change(&req.name, actor, |record, _| {
                    record.paused = true;
                    record.status.phase = SchedulePhase::Paused;
                })
                .await
            }
            "schedule.unpause" => {
                let req: Unpause = decode(body)?;
                self.change(&req.name, actor, move |record, _now| {
                    if !record.paused {
                        return;
                    }
                    record.paused = false;
                    record.status.phase = SchedulePhase::Enabled;
                    // Unpausing starts the count of consecutive failures afresh, whoever paused.
                    record.status.consecutive_failures = 0;
                    record.status.last_failed_backup = None;
                    record.status.paused_reason = None;
                    // The request's flag overrides the schedule's own; the next evaluation
                    // resolves it (else the server default), consumes it and resets it.
                    record.skip_immediately = req.skip_immediately.or(record.skip_immediately);
                    record.status.activation_pending = true;
                })
                .await
            }
            "schedule.update" => self.update(decode(body)?, actor).await,
            "schedule.backfill" => self.backfill(decode(body)?, actor).await,
            "backup.create" => self.trigger(decode(body)?).await,
            "backup.list" => self.list_backups(decode(body)?).await,
            "backup.delete" => self.delete_backup(decode(body)?, actor).await,
            "backup.describe" => self.describe_backup(decode(body)?).await,
            "backup.taken" => {
                let request: BackupRef = decode(body)?;
                let state = self
                    .catalog
                    .taken_state(&request.cluster, &request.id)
                    .await
                    .map_err(|err| unavailable(format!("{err:#}")))?;
                Ok(serde_json::json!({
                    "cluster": request.cluster, "id": request.id, "state": state,
                }))
            }
            "backup.hold" => self.hold_backup(decode(body)?).await,
            "backup.verify" => self.verify_backup(decode(body)?).await,
            "backup.release" => self.release_backup(decode(body)?).await,
            "cluster.forget" => self.forget_cluster(decode(body)?, actor).await,
            "catalog.import" => self.import_catalog(decode(body)?).await,
            _ => Err(ApiError::new(
                ErrorCode::Invalid,
                format!("unknown api call {verb:?}"),
            )),
        }
    }

    async fn create(
        &self,
        mut spec: ScheduleSpec,
        actor: &sexton_shared::audit::Actor,
    ) -> Result<Value, ApiError> {
        let now = Utc::now();
        let (cron, converted) = five_field_form(&spec.cron)?;
        spec.cron = cron;
        let mut warnings = check_timing(
            &TimingSpec {
                name: spec.name.as_str(),
                cron: &spec.cron,
                jitter: spec.jitter,
                exclude: &spec.exclude,
                on_blackout: spec.on_blackout,
            },
            now,
        )?;
        warnings.extend(converted);
        let starting_deadline_seconds = spec.deadline_seconds();
        let (confirm, dry_run) = (spec.confirm, spec.dry_run);
        let mut record = ScheduleRecord {
            schema_version: RECORD_SCHEMA_VERSION,
            name: spec.name,
            cluster: spec.cluster,
            plan: spec.plan,
            cron: spec.cron,
            paused: spec.paused,
            skip_immediately: spec.skip_immediately,
            policy: spec.policy,
            labels: spec.labels,
            remote_cleanup: spec.remote_cleanup,
            overlap_policy: spec.overlap_policy,
            starting_deadline_seconds,
            jitter: spec.jitter,
            exclude: spec.exclude,
            on_blackout: spec.on_blackout,
            pause_after_failures: spec.pause_after_failures,
            annotations: spec.annotations,
            full_every: spec.full_every,
            volumes: spec.volumes,
            backup_owner: spec.backup_owner,
            verify: spec.verify,
            breaker: spec.breaker,
            created_at: now,
            status: ScheduleStatus::default(),
        };
        record.status.phase = if record.paused {
            SchedulePhase::Paused
        } else {
            SchedulePhase::Enabled
        };
        // Creation is an activation: skip-immediately is resolved at the first evaluation.
        record.status.activation_pending = true;
        record.status.next_run_time = self.explain(&record, now).next_run_time;
        // What the new policy does to the group's backups now: a first policy over backups
        // kept so far, or one beside another schedule's, may delete at once.
        let effect = self.policy_effect(&record).await?;
        if effect.deletes() && !confirm && !dry_run {
            return Err(ApiError::unconfirmed(
                effect.refusal(&format!("creating schedule {}", record.name)),
                json!(effect),
            ));
        }
        if dry_run {
            let mut reply = describe(&record, 0, self.config.scheduler.skip_immediately_default);
            reply["dry_run"] = json!(true);
            reply["policy_change"] = json!(effect);
            reply["warnings"] = json!(warnings);
            return Ok(reply);
        }
        let body = serde_json::to_vec(&record).map_err(invalid)?;
        self.register_cluster(&record.cluster, now).await?;
        match self
            .topology
            .schedules
            .create(record.name.as_str(), body.into())
            .await
        {
            Ok(revision) => {
                self.audit_schedule(None, Some(&record), actor).await;
                let mut reply = describe(
                    &record,
                    revision,
                    self.config.scheduler.skip_immediately_default,
                );
                reply["warnings"] = json!(warnings);
                reply["policy_change"] = json!(effect);
                Ok(reply)
            }
            Err(err) if err.kind() == async_nats::jetstream::kv::CreateErrorKind::AlreadyExists => {
                Err(ApiError::new(
                    ErrorCode::AlreadyExists,
                    format!("schedule {} already exists", record.name),
                ))
            }
            Err(err) => Err(unavailable(err)),
        }
    }

    /// Makes the cluster known (reports for it are accepted from now on) before its first
    /// schedule exists. A crash between the two writes leaves a known cluster without
    /// schedules, which is harmless.
    async fn register_cluster(
        &self,
        cluster: &ClusterName,
        now: chrono::DateTime<Utc>,
    ) -> Result<(), ApiError> {
        let record = ClusterRecord::new(cluster.clone(), now);
        let body = serde_json::to_vec(&record).map_err(invalid)?;
        match self
            .clusters_bucket
            .create(cluster.as_str(), body.into())
            .await
        {
            Ok(_) => Ok(()),
            Err(err) if err.kind() == async_nats::jetstream::kv::CreateErrorKind::AlreadyExists => {
                Ok(())
            }
            Err(err) => Err(unavailable(err)),
        }
    }

    fn explain(
        &self,
        record: &ScheduleRecord,
        now: chrono::DateTime<Utc>,
    ) -> sexton_schedule::Explanation {
        timers::explain(record, now, self.config.scheduler.skip_immediately_default)
    }

    async fn read(&self, name: &str) -> Result<(ScheduleRecord, u64), ApiError> {
        let entry = sexton_shared::leader_read::latest(&self.topology.schedules, name)
            .await
            .map_err(unavailable)?;
        match entry {
            Some(entry) if entry.operation == async_nats::jetstream::kv::Operation::Put => {
                let record = serde_json::from_slice(&entry.value).map_err(|err| {
                    ApiError::new(
                        ErrorCode::Unavailable,
                        format!("schedule {name} is unreadable: {err}"),
                    )
                })?;
                Ok((record, entry.revision))
            }
            _ => Err(ApiError::new(
                ErrorCode::NotFound,
                format!("schedule {name} not found"),
            )),
        }
    }

    async fn get(&self, req: ByName) -> Result<Value, ApiError> {
        let (record, revision) = self.read(req.name.as_str()).await?;
        Ok(describe(
            &record,
            revision,
            self.config.scheduler.skip_immediately_default,
        ))
    }

    /// `get`, plus the schedule's cluster record (its last retention run).
    async fn describe(&self, req: ByName) -> Result<Value, ApiError> {
        let (record, revision) = self.read(req.name.as_str()).await?;
        let cluster =
            match sexton_shared::leader_read::value(&self.clusters_bucket, record.cluster.as_str())
                .await
            {
                Ok(Some(body)) => serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
                Ok(None) => Value::Null,
                Err(err) => return Err(unavailable(err)),
            };
        let mut described = describe(
            &record,
            revision,
            self.config.scheduler.skip_immediately_default,
        );
        described["cluster"] = cluster;
        Ok(described)
    }

    async fn list(&self, filter: ListFilter) -> Result<Value, ApiError> {
        let mut keys = self.topology.schedules.keys().await.map_err(unavailable)?;
        let mut names = Vec::new();
        while let Some(key) = keys.next().await {
            names.push(key.map_err(unavailable)?);
        }
        names.sort();
        let mut out = Vec::new();
        for name in names {
            let Ok((record, revision)) = self.read(&name).await else {
                continue;
            };
            if filter
                .cluster
                .as_ref()
                .is_some_and(|c| *c != record.cluster)
                || filter.plan.as_ref().is_some_and(|p| *p != record.plan)
            {
                continue;
            }
            out.push(describe(
                &record,
                revision,
                self.config.scheduler.skip_immediately_default,
            ));
        }
        Ok(Value::Array(out))
    }

    /// Read → change → compare-and-set, a few times if another writer races us.
    async fn change(
        &self,
        name: &sexton_shared::names::ScheduleName,
        actor: &sexton_shared::audit::Actor,
        mutate: impl Fn(&mut ScheduleRecord, chrono::DateTime<Utc>),
    ) -> Result<Value, ApiError> {
        for _ in 0..5 {
            let (mut record, revision) = self.read(name.as_str()).await?;
            let before = record.clone();
            let now = Utc::now();
            mutate(&mut record, now);
            record.status.next_run_time = self.explain(&record, now).next_run_time;
            let body = serde_json::to_vec(&record).map_err(invalid)?;
            match self
                .topology
                .schedules
                .update(name.as_str(), body.into(), revision)
                .await
            {
                Ok(revision) => {
                    self.audit_schedule(Some(&before), Some(&record), actor)
                        .await;
                    return Ok(describe(
                        &record,
                        revision,
                        self.config.scheduler.skip_immediately_default,
                    ));
                }
                Err(err)
                    if err.kind()
                        == async_nats::jetstream::kv::UpdateErrorKind::WrongLastRevision =>
                {
                    continue
                }
                Err(err) => return Err(unavailable(err)),
            }
        }
        Err(ApiError::new(
            ErrorCode::Conflict,
            format!("schedule {name} kept changing; try again"),
        ))
    }

    /// `backup create --from-schedule`: a backup now, with the schedule's settings. The
    /// schedule's own timing is untouched (as `velero backup create --from-schedule`).
    async fn trigger(&self, req: ByName) -> Result<Value, ApiError> {
        let (record, _) = self.read(req.name.as_str()).await?;
        // Whole seconds: the backup id carries the instant to the second, and a second
        // request within the same second is the same request (its message id).
        let now = Utc::now();
        let tick = chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now);
        let backup_id = timers::backup_id_for(&record.name, timers::Asking::Manual, tick, tick);
        let request = timers::DueRequest {
            tick,
            fired_at: now,
            backup_id: backup_id.clone(),
            message_id: format!("manual.{}.{}", record.name, tick.timestamp_millis()),
            backfill: None,
        };
        let duplicate = timers::publish_due(
            &self.topology,
            &self.config,
            &(&record).into(),
            &request,
            Some(&self.metrics),
        )
        .await
        .map_err(|err| unavailable(format!("{err:#}")))?
        .duplicate;
        tracing::info!(schedule = %record.name, tick = %tick, duplicate, "manual backup requested");
        Ok(json!({
            "backup_id": backup_id,
            "schedule": record.name,
            "tick": tick,
            "duplicate": duplicate,
        }))
    }

    async fn list_backups(&self, filter: ListFilter) -> Result<Value, ApiError> {
        let records = match &filter.cluster {
            Some(cluster) => self.catalog.list_cluster(cluster).await,
            None => self.catalog.list_all().await,
        }
        .map_err(|err| unavailable(format!("{err:#}")))?;
        let mut records: Vec<_> = records
            .into_iter()
            .map(|v| v.value)
            .filter(|r| filter.plan.as_ref().is_none_or(|p| *p == r.plan))
            .collect();
        records.sort_by(|a, b| {
            (&a.cluster, b.completed_at, &a.id).cmp(&(&b.cluster, a.completed_at, &b.id))
        });
        serde_json::to_value(records).map_err(invalid)
    }
}

fn describe(record: &ScheduleRecord, revision: u64, server_default: bool) -> Value {
    let now = Utc::now();
    let explanation = timers::explain(record, now, server_default);
    json!({
        "schedule": record,
        "revision": revision,
        "explain": explanation,
        "timing": timing_view(record, now),
        "last_skip": last_skip(record),
    })
}

/// How many upcoming runs `describe` shows.
const UPCOMING_RUNS: usize = 5;

/// The schedule's timing in words and its next runs with what each does (fires, skipped or
/// deferred by a blackout), from now on as a prompt scheduler would run them.
fn timing_view(record: &ScheduleRecord, now: chrono::DateTime<Utc>) -> Value {
    match Timing::new(&timers::timing_spec(record)) {
        Err(err) => json!({ "error": err.to_string() }),
        Ok(timing) => {
            let offset = timing.offset().num_seconds();
            json!({
                "zone": timing.cron().zone().map_or("UTC", |tz| tz.name()),
                "cron": timing.cron().as_str(),
                "jitter": record.jitter,
                "offset_seconds": offset,
                "on_blackout": record.on_blackout,
                "settings": timing.describe(),
                "upcoming": timing.upcoming(now, UPCOMING_RUNS),
            })
        }
    }
}

/// CloudNativePG's 6-field spec (seconds first, seconds 0) as the 5-field spec the schedule
/// stores, with a warning that says so; other specs unchanged.
fn five_field_form(cron: &str) -> Result<(String, Option<String>), ApiError> {
    let form = sexton_schedule::CronSpec::five_field_form(cron)
        .map_err(|err| invalid(format!("invalid cron {cron:?}: {err}")))?;
    let converted = (form != cron).then(|| {
        format!("read the 6-field (CloudNativePG) spec {cron:?} as {form:?}: seconds 0 dropped")
    });
    Ok((form.into_owned(), converted))
}

/// The door for a schedule's timing as a user enters it: the refusals and warnings of
/// `Timing::check_input`, with the messages the API answers.
fn check_timing(
    spec: &TimingSpec<'_>,
    now: chrono::DateTime<Utc>,
) -> Result<Vec<String>, ApiError> {
    Timing::check_input(spec, now)
        .map(|(_, warnings)| warnings)
        .map_err(|err| match err {
            sexton_schedule::TimingError::Window { .. } => invalid(err),
            err => invalid(format!("invalid cron {:?}: {err}", spec.cron)),
        })
}

/// `schedule.update`'s changes to a record: every field the request gives. Fails only when a
/// policy patch makes an invalid policy.
fn apply_update(record: &mut ScheduleRecord, req: &ScheduleUpdate) -> Result<(), String> {
    if let Some(cron) = &req.cron {
        record.cron = cron.clone();
        // A valid spec clears the marks of a spec that stopped parsing.
        if record.status.phase == SchedulePhase::FailedValidation {
            record.status.phase = if record.paused {
                SchedulePhase::Paused
            } else {
                SchedulePhase::Enabled
            };
            record.status.validation_errors.clear();
        }
    }
    if let Some(policy) = &req.policy {
        record.policy = policy.clone();
    }
    if let Some(patch) = &req.policy_patch {
        record.policy = sexton_shared::guard::merge_policy(&record.policy, patch)?;
    }
    if let Some(breaker) = &req.breaker {
        record.breaker = breaker.clone();
    }
    if let Some(labels) = &req.labels {
        record.labels = labels.clone();
    }
    if let Some(annotations) = &req.annotations {
        record.annotations = annotations.clone();
    }
    if let Some(remote_cleanup) = req.remote_cleanup {
        record.remote_cleanup = remote_cleanup;
    }
    if let Some(overlap) = req.overlap_policy {
        record.overlap_policy = overlap;
    }
    if req.starting_deadline_seconds.is_some() {
        record.starting_deadline_seconds = req.starting_deadline_seconds;
    }
    if let Some(deadline) = req.starting_deadline {
        record.starting_deadline_seconds = deadline.map(sexton_schedule::Span::seconds);
    }
    if let Some(jitter) = req.jitter {
        record.jitter = jitter;
    }
    if let Some(exclude) = &req.exclude {
        record.exclude = exclude.clone();
    }
    if let Some(on_blackout) = req.on_blackout {
        record.on_blackout = on_blackout;
    }
    if let Some(pause_after) = req.pause_after_failures {
        record.pause_after_failures = pause_after;
    }
    if let Some(verify) = &req.verify {
        record.verify = verify.clone();
    }
    if let Some(full_every) = req.full_every {
        record.full_every = full_every;
    }
    if let Some(volumes) = &req.volumes {
        record.volumes = volumes.clone();
    }
    if let Some(owner) = req.backup_owner {
        record.backup_owner = owner;
    }
    Ok(())
}

impl Api {
    /// `schedule.backfill`: the ticks of `[from, to)` (nominal cron times; jitter and blackout
    /// windows are about when runs start, and a backfill starts now), stored on the schedule
    /// as a cursor that the timer queues of all replicas advance, one tick at a time. Runs
    /// whether the schedule is paused or not (a backfill is an explicit request); one at a
    /// time per schedule.
    async fn backfill(
        &self,
        req: ScheduleBackfill,
        actor: &sexton_shared::audit::Actor,
    ) -> Result<Value, ApiError> {
        let now = Utc::now();
        if req.to > now {
            return Err(invalid(format!(
                "backfill to {} is in the future; a backfill fires past ticks (the schedule \
                 fires the coming ones)",
                req.to.to_rfc3339()
            )));
        }
        let (current, _) = self.read(req.name.as_str()).await?;
        if let Some(running) = current
            .status
            .backfill
            .as_ref()
            .filter(|b| b.next_tick().is_some())
        {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "schedule {} is still backfilling {} to {} ({} of {} ticks done); wait for it",
                    req.name,
                    running.from.to_rfc3339(),
                    running.to.to_rfc3339(),
                    running.done,
                    running.ticks.len()
                ),
            ));
        }
        let timing = Timing::new(&timers::timing_spec(&current))
            .map_err(|err| invalid(format!("schedule {}: {err}", req.name)))?;
        let ticks = timing
            .ticks_between(req.from, req.to, MAX_BACKFILL_TICKS)
            .map_err(|_| {
                invalid(format!(
                    "{} to {} holds more than {MAX_BACKFILL_TICKS} ticks of {:?}; backfill a \
                     shorter interval at a time",
                    req.from.to_rfc3339(),
                    req.to.to_rfc3339(),
                    current.cron
                ))
            })?;
        if ticks.is_empty() {
            return Err(invalid(format!(
                "{:?} has no tick from {} to {}: nothing to backfill",
                current.cron,
                req.from.to_rfc3339(),
                req.to.to_rfc3339()
            )));
        }
        let overlap = req.overlap.unwrap_or(current.overlap_policy);
        let backfill = Backfill {
            id: u64::try_from(now.timestamp_millis()).unwrap_or_default(),
            from: req.from,
            to: req.to,
            overlap,
            requested_at: now,
            ticks,
            done: 0,
            fired: 0,
            waiting_for: None,
            waiting_since: None,
            last_reported: None,
            finished_at: None,
        };
        let n_ticks = backfill.ticks.len();
        let started = std::sync::Mutex::new(false);
        let mut reply = self
            .change(&req.name, actor, |record, _now| {
                // Another backfill may have started since the read: it stays.
                if record
                    .status
                    .backfill
                    .as_ref()
                    .is_none_or(|b| b.next_tick().is_none())
                {
                    record.status.backfill = Some(backfill.clone());
                    *started.lock().expect("not poisoned") = true;
                }
            })
            .await?;
        if !started.into_inner().expect("not poisoned") {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("schedule {} started another backfill meanwhile", req.name),
            ));
        }
        tracing::info!(schedule = %req.name, ticks = n_ticks, overlap = ?overlap, "backfill requested");
        reply["backfill"] = json!({
            "id": backfill.id,
            "ticks": n_ticks,
            "first": backfill.ticks.first(),
            "last": backfill.ticks.last(),
            "overlap": overlap,
        });
        Ok(reply)
    }
}

/// Why the last due tick did not fire, in a sentence: what `describe` shows next to the
/// explanation of what happens now.
fn last_skip(record: &ScheduleRecord) -> Value {
    let (Some(at), Some(code)) = (
        record.status.last_skipped,
        record.status.last_skip_reason.as_deref(),
    ) else {
        return Value::Null;
    };
    let why = match code {
        "skip_immediately" => {
            "skip-immediately applied when the schedule was created or unpaused".to_string()
        }
        "in_flight" => {
            "a backup from this schedule was still in progress (overlap policy skip)".to_string()
        }
        "starting_deadline_exceeded" => format!(
            "every missed run was older than the starting deadline of {}",
            record
                .starting_deadline_seconds
                .and_then(|s| sexton_schedule::Span::from_seconds(s).ok())
                .map_or_else(|| "0s".to_string(), |s| s.to_string())
        ),
        "blackout" => "it was due inside a blackout window".to_string(),
        other => other.to_string(),
    };
    json!({ "at": at, "reason": code, "explanation": format!("the run due before {} did not fire: {why}", at.to_rfc3339()) })
}
