//! `schedule.create`: a new schedule as the user writes it, its timing checked at the door
//! (CloudNativePG's 6-field spec read as 5 fields, with a warning), its cluster made known, and
//! the guard on what its policy deletes at once (`confirm`, `dry_run`).

use chrono::Utc;
use serde_json::{json, Value};
use sexton_model::{
    names::ClusterName,
    records::{
        ClusterRecord, SchedulePhase, ScheduleRecord, ScheduleStatus, RECORD_SCHEMA_VERSION,
    },
};
use sexton_schedule::{Timing, TimingSpec};
use sexton_shared::{
    api::{ApiError, ErrorCode, ScheduleSpec},
    audit::Actor,
    guard::PolicyEffect,
};

use super::{describe, invalid, unavailable, Api};

impl Api {
    pub(super) async fn schedule_create(
        &self,
        mut spec: ScheduleSpec,
        actor: &Actor,
    ) -> Result<Value, ApiError> {
        let now = Utc::now();
        let mut warnings = self.check_spec(&mut spec, now)?;
        let (confirm, dry_run) = (spec.confirm, spec.dry_run);
        let mut record = new_record(spec, now);
        self.check_copies(&record)?;
        warnings.extend(super::schedule_update::unmeetable_objectives(
            &record,
            Utc::now(),
        ));
        warnings.extend(self.first_status(&mut record, now).await?);
        let effect = self.creation_effect(&record, confirm || dry_run).await?;
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

    /// Checks the spec's timing (its cron put in the 5-field form) and returns the warnings
    /// the spec earns: a converted cron, month readings of its policy, lock tiers.
    fn check_spec(
        &self,
        spec: &mut ScheduleSpec,
        now: chrono::DateTime<Utc>,
    ) -> Result<Vec<String>, ApiError> {
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
        warnings.extend(spec.policy.month_readings());
        if let Some(lock) = &self.config.s3.lock {
            warnings.extend(sexton_retention::lock::tier_warnings(
                &spec.policy,
                &lock.tiers,
            ));
        }
        Ok(warnings)
    }

    /// The new schedule's first status: its phase, whether it awaits its activation, its next
    /// run. Returns the warning a replacement earns.
    async fn first_status(
        &self,
        record: &mut ScheduleRecord,
        now: chrono::DateTime<Utc>,
    ) -> Result<Option<String>, ApiError> {
        // Replaced: deleted, then created again with the same name (a GitOps tool's prune and
        // re-apply, a Helm upgrade that recreates it; velero#4093). It keeps the status it had,
        // so it neither fires at once nor waits a whole period for nothing.
        let replaced = self.replaced(record).await?;
        let mut warning = None;
        if let Some(previous) = &replaced {
            record.status.carry_over(&previous.status);
            warning = Some(format!(
                "schedule {} replaces the one of that name deleted earlier: it keeps its status \
                 (last backup {}), and runs at its next tick after it",
                record.name,
                previous
                    .status
                    .last_backup
                    .map_or_else(|| "none".to_string(), |t| t.to_rfc3339())
            ));
        }
        record.status.phase = if record.paused {
            SchedulePhase::Paused
        } else {
            SchedulePhase::Enabled
        };
        // Creation is an activation: skip-immediately is resolved at the first evaluation. A
        // replacement is not: it goes on from the status it kept.
        record.status.activation_pending = replaced.is_none();
        record.status.next_run_time = self.explain(record, now).next_run_time;
        Ok(warning)
    }

    /// What the new policy does to the group's backups now: a first policy over backups
    /// kept so far, or one beside another schedule's, may delete at once; so may its copy rules
    /// beside another schedule's of the plan. Refused unless `confirmed` (or a dry run).
    async fn creation_effect(
        &self,
        record: &ScheduleRecord,
        confirmed: bool,
    ) -> Result<PolicyEffect, ApiError> {
        let effect = self.policy_effect(record).await?;
        if effect.deletes() && !confirmed {
            return Err(ApiError::unconfirmed(
                effect.refusal(&format!("creating schedule {}", record.name)),
                json!(effect),
            ));
        }
        let copy_changes = if record.copies.is_empty() {
            Default::default()
        } else {
            self.copies_effect(record).await?
        };
        if let Some((location, effect)) = copy_changes.iter().find(|(_, e)| e.deletes()) {
            if !confirmed {
                return Err(ApiError::unconfirmed(
                    effect.refusal(&format!(
                        "creating schedule {} (copies at {location})",
                        record.name
                    )),
                    json!(copy_changes),
                ));
            }
        }
        Ok(effect)
    }

    /// Makes the cluster known (reports for it are accepted from now on) before its first
    /// schedule exists. A crash between the two writes leaves a known cluster without
    /// schedules, which is harmless.
    /// The schedule `record` replaces: the last record the deleted key of its name held, when
    /// it was of the same cluster and plan (another's status would mislead). `None` for a name
    /// never used, or whose history has aged out.
    async fn replaced(&self, record: &ScheduleRecord) -> Result<Option<ScheduleRecord>, ApiError> {
        use futures::StreamExt as _;
        let schedules = &self.topology.schedules;
        let entry = schedules
            .entry(record.name.as_str())
            .await
            .map_err(|err| unavailable(format!("reading schedule {}: {err}", record.name)))?;
        if !entry.is_some_and(|entry| entry.operation != async_nats::jetstream::kv::Operation::Put)
        {
            return Ok(None);
        }
        let mut history = schedules
            .history(record.name.as_str())
            .await
            .map_err(|err| {
                unavailable(format!("reading schedule {}'s history: {err}", record.name))
            })?;
        let mut last = None;
        while let Some(entry) = history.next().await {
            let Ok(entry) = entry else { break };
            if entry.operation == async_nats::jetstream::kv::Operation::Put {
                // An unreadable old revision tells nothing; a newer one may.
                if let Ok(previous) = serde_json::from_slice::<ScheduleRecord>(&entry.value) {
                    last = Some(previous);
                }
            }
        }
        Ok(last
            .filter(|previous| previous.cluster == record.cluster && previous.plan == record.plan))
    }

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
}

impl Api {
    /// A schedule's copy rules against this configuration: each names a configured location
    /// (not `primary`), keeps something, and, given the schedule's interval, a storage class
    /// whose minimum duration the policy outlasts (docs/copies.md).
    pub(super) fn check_copies(&self, record: &ScheduleRecord) -> Result<(), ApiError> {
        for rule in &record.copies {
            if !rule.to.is_primary() && !self.config.locations.contains_key(rule.to.as_str()) {
                let known: Vec<&str> = self.config.locations.keys().map(String::as_str).collect();
                return Err(invalid(format!(
                    "copy rule to {}: no such location; this fleet has {}",
                    rule.to,
                    if known.is_empty() {
                        "none besides primary (configure [locations.<name>])".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        }
        let interval_days = sexton_shared::breaker::schedule_interval(record, Utc::now())
            .map(|interval| interval.num_seconds() as f64 / 86_400.0);
        sexton_model::copies::validate_copy_rules(&record.copies, interval_days)
            .map_err(invalid)?;
        if let Some(location) = record.verify.as_ref().and_then(|v| v.location.as_ref()) {
            if !record.copies.iter().any(|rule| rule.to == *location) {
                return Err(invalid(format!(
                    "verify: location {location}: no copy rule of this schedule copies there, \
                     so there is nothing of it to test there"
                )));
            }
        }
        Ok(())
    }
}

/// The record of a new schedule, as the user wrote it, at its first generation.
fn new_record(spec: ScheduleSpec, now: chrono::DateTime<Utc>) -> ScheduleRecord {
    let starting_deadline_seconds = spec.deadline_seconds();
    ScheduleRecord {
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
        copies: spec.copies,
        objectives: spec.objectives,
        created_at: now,
        generation: 1,
        status: ScheduleStatus {
            observed_generation: 1,
            ..ScheduleStatus::default()
        },
    }
}

/// CloudNativePG's 6-field spec (seconds first, seconds 0) as the 5-field spec the schedule
/// stores, with a warning that says so; other specs unchanged.
pub(super) fn five_field_form(cron: &str) -> Result<(String, Option<String>), ApiError> {
    let form = sexton_schedule::CronSpec::five_field_form(cron)
        .map_err(|err| invalid(format!("invalid cron {cron:?}: {err}")))?;
    let converted = (form != cron).then(|| {
        format!("read the 6-field (CloudNativePG) spec {cron:?} as {form:?}: seconds 0 dropped")
    });
    Ok((form.into_owned(), converted))
}

/// The door for a schedule's timing as a user enters it: the refusals and warnings of
/// `Timing::check_input`, with the messages the API answers.
pub(super) fn check_timing(
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
