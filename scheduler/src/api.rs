//! The scheduler's half of the request/reply API: schedules and the backup catalog. Requests
//! are answered by a queue group, so any number of replicas share them, through the shared
//! serve loop ([`Listener`]). Every handler decodes, validates, acts with compare-and-set, and
//! answers with a [`Reply`](sexton_shared::api::Reply); a bad request gets an `invalid` error
//! and changes nothing.
//!
//! One place per verb: verb `<area>.<verb>` is the method `Api::<area>_<verb>` in
//! `api/<area>_<verb>.rs` (the catalog's, `backup.*` and `catalog.*`, in
//! `api/catalog/<area>_<verb>.rs`: [`catalog`]), and [`Api::handle`] is the one `match` from verb
//! to method. A verb's twin lives with it (`backup.release` in `backup_hold.rs`,
//! `schedule.unpause` in `schedule_pause.rs`, `schedule.describe` and `schedule.list` in
//! `schedule_get.rs`). This file keeps what several verbs share: reading a schedule, changing it
//! with compare-and-set, and the errors.

use anyhow::Context as _;
use chrono::Utc;
use serde_json::Value;
use sexton_model::{
    names::ClusterName,
    records::{BackupRecord, ScheduleRecord},
    wire::Message,
};
use sexton_shared::{
    api::{ApiError, ErrorCode, Incoming, Listener},
    audit::Actor,
    catalog::Catalog,
    config::Config,
    topology::Topology,
    Shutdown,
};

use crate::timers;

mod catalog;
mod cluster_forget;
mod location_list;
mod schedule_backfill;
mod schedule_create;
mod schedule_delete;
mod schedule_get;
mod schedule_pause;
mod schedule_update;
mod trail;

use schedule_create::{check_timing, five_field_form};
use schedule_get::describe;

/// What the API reads and writes besides NATS: the bucket (read only) and the restore tests.
pub struct Edges {
    pub store: sexton_shared::object_store::ObjectStore,
    pub verifier: crate::verify::Verifier,
    /// The other locations (issue 28), read only: `catalog.import --from` lists one.
    pub locations: std::collections::BTreeMap<
        sexton_model::names::LocationName,
        sexton_shared::object_store::ObjectStore,
    >,
    /// The issued due-backups: `backup.create` remembers the one it publishes.
    pub dues: async_nats::jetstream::kv::Store,
    /// How each cluster's retention runs are going (issue 54), read by `schedule.get`.
    pub retention_status: async_nats::jetstream::kv::Store,
}

/// Subscribes to the API's subjects and returns once the server has the subscriptions: from
/// then on a request finds a responder, and waits in the listener until [`run`] answers it.
/// The scheduler does this before its timers start, so an executor handed the first
/// due-backup can ask `backup.taken` about it.
pub async fn subscribe(client: &async_nats::Client) -> anyhow::Result<Listener> {
    // Only `import` of `catalog.*`: the retention-worker answers `catalog.scrub` in the same
    // queue group.
    let listener = Listener::subscribe(
        client.clone(),
        &[
            ("schedule", "*"),
            ("backup", "*"),
            ("cluster", "*"),
            ("catalog", "import"),
            ("catalog", "stranded"),
            ("catalog", "adopt"),
            ("location", "list"),
        ],
    )
    .await?;
    // The server has the subscriptions once a flush comes back: then a request finds them.
    client
        .flush()
        .await
        .context("flushing the api subscriptions")?;
    Ok(listener)
}

/// Answers the requests of `listener` ([`subscribe`]) until shutdown.
pub async fn run(
    listener: Listener,
    topology: Topology,
    clusters_bucket: async_nats::jetstream::kv::Store,
    edges: Edges,
    config: Config,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let Edges {
        store,
        verifier,
        locations,
        dues,
        retention_status,
    } = edges;
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
        locations,
        dues,
        retention_status,
        config,
        metrics,
    };
    listener
        .serve(shutdown, |incoming| api.answer(incoming))
        .await
}

struct Api {
    topology: Topology,
    clusters_bucket: async_nats::jetstream::kv::Store,
    /// Read only: `catalog.import` lists the bucket and reads metadata.json documents.
    store: sexton_shared::object_store::ObjectStore,
    /// Asks for restore tests (`backup.verify`).
    verifier: crate::verify::Verifier,
    /// The other locations, read only: `catalog.import --from`.
    locations: std::collections::BTreeMap<
        sexton_model::names::LocationName,
        sexton_shared::object_store::ObjectStore,
    >,
    dues: async_nats::jetstream::kv::Store,
    retention_status: async_nats::jetstream::kv::Store,
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

fn backup_not_found(cluster: &ClusterName, id: &sexton_model::names::BackupId) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("backup {id} of cluster {cluster} not found"),
    )
}

impl Api {
    /// `Err` unless `name` is one of this fleet's locations, naming the ones it has.
    /// The store `place` (`None`: primary) is now, as this fleet's settings name it; `None`
    /// for a location it has none for.
    fn place_store(
        &self,
        place: Option<&sexton_model::names::LocationName>,
    ) -> Option<&sexton_model::keys::StoreRef> {
        match place {
            None => Some(self.store.place()),
            Some(name) => self
                .locations
                .get(name)
                .map(sexton_shared::object_store::ObjectStore::place),
        }
    }

    fn check_location(&self, name: &sexton_model::names::LocationName) -> Result<(), ApiError> {
        if self.config.locations.contains_key(name.as_str()) {
            return Ok(());
        }
        Err(invalid(format!(
            "no such location {name}; this fleet has {}",
            self.config.location_names()
        )))
    }

    /// The cluster's records, and the index of backup `id` among them once it can be restored
    /// at `location` (`None`: primary; [`BackupRecord::restorable_at`]): `Err` when it is not
    /// in the catalog, or that place does not hold it whole, saying which places do. A backup
    /// only `dr` still keeps is `what` (tested, restored) at `dr`.
    async fn restorable_backup(
        &self,
        cluster: &ClusterName,
        id: &sexton_model::names::BackupId,
        location: Option<&sexton_model::names::LocationName>,
        what: &str,
    ) -> Result<(Vec<sexton_shared::catalog::Versioned<BackupRecord>>, usize), ApiError> {
        let records = self
            .catalog
            .list_cluster(cluster)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        let Some(index) = records.iter().position(|r| r.value.id == *id) else {
            return Err(backup_not_found(cluster, id));
        };
        records[index]
            .value
            .restorable_at(location)
            .map_err(|why| {
                ApiError::new(ErrorCode::Conflict, format!("{why}: it cannot be {what}"))
            })?;
        Ok((records, index))
    }

    /// The cluster's schedules and records, and where backup `id` is among the records.
    async fn cluster_with_backup(
        &self,
        cluster: &ClusterName,
        id: &sexton_model::names::BackupId,
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
    sexton_shared::api::decode_request(body)
}

impl Api {
    /// Asks the retention-worker for a run of `cluster` now, so a user's request (a delete, a
    /// released hold) is acted on without waiting for the next sweep. Published once per
    /// `message_id`.
    pub(super) async fn ask_retention_run(
        &self,
        cluster: &ClusterName,
        message_id: &str,
    ) -> Result<(), ApiError> {
        sexton_shared::channels::request_sweep(
            &self.topology.jetstream,
            cluster,
            chrono::Utc::now(),
            false,
            &sexton_shared::channels::SweepCause::Asked {
                id: message_id.to_string(),
            },
        )
        .await
        .map_err(|err| unavailable(format!("{err:#}")))?;
        Ok(())
    }

    /// One request: handled, then audited (with who asked and how it ended) before the reply
    /// goes, so a client that reads the audit after an answer finds its request there.
    async fn answer(&self, incoming: Incoming) -> Result<Value, ApiError> {
        let Incoming {
            verb,
            payload,
            actor,
        } = incoming;
        let result = self.handle(&verb, &payload, &actor).await;
        self.audit_request(
            &verb,
            sexton_shared::audit::request_arguments(&payload),
            &actor,
            &result,
        )
        .await;
        result
    }

    /// The one dispatch of the scheduler's verbs: verb `<area>.<verb>` is
    /// `Api::<area>_<verb>` in `api/<area>_<verb>.rs`.
    #[tracing::instrument(skip_all, fields(verb = %verb))]
    async fn handle(&self, verb: &str, body: &[u8], actor: &Actor) -> Result<Value, ApiError> {
        match verb {
            "schedule.create" => self.schedule_create(decode(body)?, actor).await,
            "schedule.get" => self.schedule_get(decode(body)?).await,
            "schedule.describe" => self.schedule_describe(decode(body)?).await,
            "schedule.list" => self.schedule_list(decode(body)?).await,
            "schedule.delete" => self.schedule_delete(decode(body)?, actor).await,
            "schedule.pause" => self.schedule_pause(decode(body)?, actor).await,
            "schedule.unpause" => self.schedule_unpause(decode(body)?, actor).await,
            "schedule.update" => self.schedule_update(decode(body)?, actor).await,
            "schedule.backfill" => self.schedule_backfill(decode(body)?, actor).await,
            "backup.create" => self.backup_create(decode(body)?).await,
            "backup.list" => self.backup_list(decode(body)?).await,
            "backup.delete" => self.backup_delete(decode(body)?, actor).await,
            "backup.describe" => self.backup_describe(decode(body)?).await,
            "backup.taken" => self.backup_taken(decode(body)?).await,
            "backup.hold" => self.backup_hold(decode(body)?).await,
            "backup.verify" => self.backup_verify(decode(body)?).await,
            "backup.drill" => self.backup_drill(decode(body)?).await,
            "backup.chain" => self.backup_chain(decode(body)?).await,
            "backup.release" => self.backup_release(decode(body)?).await,
            "cluster.forget" => self.cluster_forget(decode(body)?, actor).await,
            "catalog.import" => self.catalog_import(decode(body)?).await,
            "catalog.stranded" => self.catalog_stranded(decode(body)?).await,
            "catalog.adopt" => self.catalog_adopt(decode(body)?).await,
            "location.list" => self.location_list(decode(body)?).await,
            _ => Err(ApiError::new(
                ErrorCode::Invalid,
                format!("unknown api call {verb:?}"),
            )),
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

    /// Read → change → compare-and-set, a few times if another writer races us.
    async fn change(
        &self,
        name: &sexton_model::names::ScheduleName,
        actor: &Actor,
        mutate: impl Fn(&mut ScheduleRecord, chrono::DateTime<Utc>),
    ) -> Result<Value, ApiError> {
        for _ in 0..5 {
            let (mut record, revision) = self.read(name.as_str()).await?;
            let before = record.clone();
            let now = Utc::now();
            mutate(&mut record, now);
            // A change of what a manifest declares is a new generation, planned in this
            // same write (pausing is an operation, not a change of the declared spec).
            if sexton_shared::api::ScheduleSpec::of_record(&before).compared()
                != sexton_shared::api::ScheduleSpec::of_record(&record).compared()
            {
                record.generation = before.generation.max(1) + 1;
            }
            record.status.observed_generation = record.generation;
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
}
