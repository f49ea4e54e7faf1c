//! `schedule.update` and the guard on policy changes (docs/safety.md): a change to a schedule's
//! policy answers with the policy's diff and what the group's plan would delete at once, and a
//! change that deletes anything kept now is refused unless the request says `confirm: true`
//! (`sexton schedule update --yes`). `policy_patch` changes some keys of the stored policy
//! (`--keep-last 5` keeps the weekly and monthly rules); `policy` replaces it whole.
//!
//! The effect is computed by the pure `guard::policy_effect` over the group's records as they
//! are now, with the group's policy before and after (the scheduler plans a group only when
//! its schedules agree on one policy, so adding or changing one schedule can also make a group
//! unplanned, which keeps everything).

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{json, Value};
use sexton_model::{
    copies::{copy_policy, CopyRule},
    names::LocationName,
    records::{BackupRecord, Policy, SchedulePhase, ScheduleRecord},
};
use sexton_shared::{
    api::{ApiError, ScheduleUpdate},
    audit::Actor,
    guard::{self, PolicyEffect},
    planning,
};

use super::{check_timing, describe, five_field_form, invalid, unavailable, Api};
use crate::timers;

impl Api {
    /// What the group of `after` would delete now if `after` replaced the stored schedule of
    /// its name (or joined the group, for a new schedule).
    pub(super) async fn policy_effect(
        &self,
        after: &ScheduleRecord,
    ) -> Result<PolicyEffect, ApiError> {
        let state = planning::load_cluster(&self.topology.schedules, &self.catalog, &after.cluster)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        let mut changed: Vec<ScheduleRecord> = state
            .schedules
            .iter()
            .filter(|s| s.name != after.name)
            .cloned()
            .collect();
        changed.push(after.clone());
        let before_policies = planning::group_policies(&state.schedules);
        let after_policies = planning::group_policies(&changed);
        let before: Result<&Policy, String> = planning::policy_for(&before_policies, &after.plan);
        let after_policy: Result<&Policy, String> =
            planning::policy_for(&after_policies, &after.plan);
        let records: Vec<&BackupRecord> = state
            .records
            .iter()
            .map(|r| &r.value)
            .filter(|r| r.plan == after.plan && r.held_at_primary())
            .collect();
        let now = Utc::now();
        let cannot = |err: sexton_retention::PlanError| {
            unavailable(format!(
                "cannot say what the policy does to the group's backups: {err}"
            ))
        };
        let mut effect = guard::policy_effect(&records, before.clone(), after_policy.clone(), now)
            .map_err(cannot)?;
        let primary = LocationName::primary();
        let segments = self.guard_archive(&changed, after, &primary).await;
        effect.objectives_broken = objectives_broken(
            &records,
            &segments,
            &changed,
            after,
            &primary,
            before,
            after_policy.clone(),
            now,
        )
        .map_err(cannot)?;
        // Would the breaker hold the run that carries the change out? Judged as the
        // retention-worker will: the group's schedules after the change, the server's limits.
        if let (true, Ok(policy)) = (effect.deletes(), after_policy) {
            let group: Vec<&ScheduleRecord> =
                changed.iter().filter(|s| s.plan == after.plan).collect();
            let limits = sexton_shared::breaker::group_limits(&group, &self.config.breaker, now);
            let trips = guard::breaker_trips(&records, policy, &limits, now).map_err(cannot)?;
            if !trips.is_empty() {
                effect.breaker_holds = Some(guard::BreakerForecast {
                    reasons: trips,
                    approve: format!(
                        "sexton retention approve --cluster {} --plan {} --yes",
                        after.cluster, after.plan
                    ),
                });
            }
        }
        Ok(effect)
    }

    /// What the copy rules of `after` do to the copies of its group at each location, if
    /// `after` replaced the stored schedule of its name (or joined the group): per location a
    /// rule names before or after, the effect of the plan's copy policy there changing (issue
    /// 28). A location left without a rule keeps every copy.
    pub(super) async fn copies_effect(
        &self,
        after: &ScheduleRecord,
    ) -> Result<BTreeMap<LocationName, PolicyEffect>, ApiError> {
        let state = planning::load_cluster(&self.topology.schedules, &self.catalog, &after.cluster)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        let of_plan = |schedules: &[ScheduleRecord]| -> Vec<CopyRule> {
            schedules
                .iter()
                .filter(|s| s.plan == after.plan)
                .flat_map(|s| s.copies.iter().cloned())
                .collect()
        };
        let before_rules = of_plan(&state.schedules);
        let mut changed: Vec<ScheduleRecord> = state
            .schedules
            .iter()
            .filter(|s| s.name != after.name)
            .cloned()
            .collect();
        changed.push(after.clone());
        let after_rules = of_plan(&changed);
        let records: Vec<&BackupRecord> = state
            .records
            .iter()
            .map(|r| &r.value)
            .filter(|r| r.plan == after.plan)
            .collect();
        let now = Utc::now();
        let mut effects = BTreeMap::new();
        let locations: std::collections::BTreeSet<&LocationName> = before_rules
            .iter()
            .chain(&after_rules)
            .map(|rule| &rule.to)
            .collect();
        for location in locations {
            let before = copy_policy(&before_rules, location);
            let after_policy = copy_policy(&after_rules, location);
            if before.is_ok() && before == after_policy {
                continue;
            }
            let cannot = |err: sexton_retention::PlanError| {
                unavailable(format!(
                    "cannot say what the copy rule does to the copies at {location}: {err}"
                ))
            };
            let mut effect = guard::copy_policy_effect(
                &records,
                location,
                before.clone(),
                after_policy.clone(),
                now,
            )
            .map_err(cannot)?;
            let segments = self.guard_archive(&changed, after, location).await;
            effect.objectives_broken = objectives_broken(
                &records,
                &segments,
                &changed,
                after,
                location,
                before,
                after_policy,
                now,
            )
            .map_err(cannot)?;
            effects.insert(location.clone(), effect);
        }
        Ok(effects)
    }

    pub(super) async fn schedule_update(
        &self,
        mut req: ScheduleUpdate,
        actor: &Actor,
    ) -> Result<Value, ApiError> {
        // CloudNativePG's 6-field form (seconds 0) is stored as the 5 fields it means.
        let converted = match &req.cron {
            Some(cron) => {
                let (cron, converted) = five_field_form(cron)?;
                req.cron = Some(cron);
                converted
            }
            None => None,
        };
        // The timing is checked as it will be, with the schedule's name (random descriptors
        // and jitter are drawn from it) and its stored settings.
        let (current, revision) = self.read(req.name.as_str()).await?;
        let mut preview = current.clone();
        apply_update(&mut preview, &req).map_err(invalid)?;
        if preview.copies != current.copies || preview.cron != current.cron {
            self.check_copies(&preview)?;
        }
        let timing_changed = preview.cron != current.cron
            || preview.jitter != current.jitter
            || preview.exclude != current.exclude;
        let mut warnings = if timing_changed {
            check_timing(&timers::timing_spec(&preview), Utc::now())?
        } else {
            Vec::new()
        };
        warnings.extend(converted);
        let objectives_changed = preview.objectives != current.objectives
            || preview
                .copies
                .iter()
                .map(|r| &r.objectives)
                .ne(current.copies.iter().map(|r| &r.objectives));
        if objectives_changed {
            warnings.extend(unmeetable_objectives(&preview, Utc::now()));
        }
        if preview.policy != current.policy {
            warnings.extend(preview.policy.month_readings());
            if let Some(lock) = &self.config.s3.lock {
                warnings.extend(sexton_retention::lock::tier_warnings(
                    &preview.policy,
                    &lock.tiers,
                ));
            }
        }
        let effect = if preview.policy != current.policy {
            Some(self.policy_effect(&preview).await?)
        } else {
            None
        };
        if let Some(effect) = effect.as_ref().filter(|e| e.needs_confirmation()) {
            if !req.confirm && !req.dry_run {
                return Err(ApiError::unconfirmed(
                    effect.refusal(&format!("changing the policy of schedule {}", req.name)),
                    json!(effect),
                ));
            }
        }
        let copy_changes = if preview.copies != current.copies {
            self.copies_effect(&preview).await?
        } else {
            BTreeMap::new()
        };
        if let Some((location, effect)) = copy_changes.iter().find(|(_, e)| e.needs_confirmation())
        {
            if !req.confirm && !req.dry_run {
                return Err(ApiError::unconfirmed(
                    effect.refusal(&format!(
                        "changing the copy rules of schedule {} (copies at {location})",
                        req.name
                    )),
                    json!(copy_changes),
                ));
            }
        }
        if req.dry_run {
            let mut reply = describe(
                &preview,
                revision,
                self.config.scheduler.skip_immediately_default,
            );
            reply["dry_run"] = json!(true);
            reply["policy_change"] = json!(effect);
            if !copy_changes.is_empty() {
                reply["copy_changes"] = json!(copy_changes);
            }
            reply["warnings"] = json!(warnings);
            return Ok(reply);
        }
        let mut reply = self
            .change(&req.name, actor, |record, _now| {
                // Checked on the preview; a record changed meanwhile that no longer takes the
                // patch keeps its policy.
                let _ = apply_update(record, &req);
            })
            .await?;
        reply["warnings"] = json!(warnings);
        reply["policy_change"] = json!(effect);
        if !copy_changes.is_empty() {
            reply["copy_changes"] = json!(copy_changes);
        }
        Ok(reply)
    }
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
    if let Some(objectives) = &req.objectives {
        record.objectives = objectives.clone();
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
    if let Some(copies) = &req.copies {
        record.copies = copies.clone();
    }
    Ok(())
}

impl Api {
    /// The log archive the guard judges a place's objectives with: read only where `after`'s
    /// plan states objectives there. One that cannot be read is left out, said in the log:
    /// the objectives are then judged over the backups alone, as a place without an archive.
    async fn guard_archive(
        &self,
        changed: &[ScheduleRecord],
        after: &ScheduleRecord,
        location: &LocationName,
    ) -> Vec<sexton_retention::BinlogSegment> {
        if sexton_shared::recovery::objectives_for(changed, &after.plan, location).is_none() {
            return Vec::new();
        }
        let at = (!location.is_primary()).then_some(location);
        match self.verifier.log_archive(&after.cluster, at).await {
            Ok(segments) => segments,
            Err(err) => {
                tracing::warn!(cluster = %after.cluster, %location, error = format!("{err:#}"), "the policy-change guard judges objectives without the log archive");
                Vec::new()
            }
        }
    }
}

/// The recovery objectives `after` states for its plan at `location` that the policy change
/// there (`before` to `after_policy`) breaks, over the group's `records` as that place holds
/// them and its log archive `segments` ([`sexton_shared::recovery::objectives_broken`]); none
/// when it states none there.
#[allow(clippy::too_many_arguments)]
fn objectives_broken(
    records: &[&BackupRecord],
    segments: &[sexton_retention::BinlogSegment],
    changed: &[ScheduleRecord],
    after: &ScheduleRecord,
    location: &LocationName,
    before: Result<&Policy, String>,
    after_policy: Result<&Policy, String>,
    now: chrono::DateTime<Utc>,
) -> Result<Vec<String>, sexton_retention::PlanError> {
    let Some(objectives) = sexton_shared::recovery::objectives_for(changed, &after.plan, location)
    else {
        return Ok(Vec::new());
    };
    let (mut catalog, passed) = sexton_shared::recovery::place_catalog(records, location);
    catalog.binlog_segments = segments.to_vec();
    let mut broken = sexton_shared::recovery::objectives_broken(
        &catalog,
        before.as_ref().ok().copied(),
        after_policy.as_ref().ok().copied(),
        &objectives,
        passed.map(|test| test.at),
        location,
        now,
    )?;
    // And what the new policy can never meet, whatever is taken, that the old one could.
    if let Ok(policy) = after_policy {
        let interval = sexton_shared::breaker::schedule_interval(after, now)
            .map(|interval| interval.num_seconds() as f64 / 86_400.0);
        let already = before.map_or_else(
            |_| Vec::new(),
            |p| sexton_shared::recovery::unmeetable(&objectives, p, interval, location),
        );
        broken.extend(
            sexton_shared::recovery::unmeetable(&objectives, policy, interval, location)
                .into_iter()
                .filter(|why| !already.contains(why)),
        );
    }
    Ok(broken)
}

/// What `record`'s objectives ask that its policies can never meet, at primary and at each
/// copy rule's location: said as warnings when objectives are written.
pub(super) fn unmeetable_objectives(
    record: &ScheduleRecord,
    now: chrono::DateTime<Utc>,
) -> Vec<String> {
    let interval = sexton_shared::breaker::schedule_interval(record, now)
        .map(|interval| interval.num_seconds() as f64 / 86_400.0);
    let mut out = Vec::new();
    if let Some(objectives) = &record.objectives {
        out.extend(sexton_shared::recovery::unmeetable(
            objectives,
            &record.policy,
            interval,
            &LocationName::primary(),
        ));
    }
    for rule in &record.copies {
        if let Some(objectives) = &rule.objectives {
            out.extend(sexton_shared::recovery::unmeetable(
                objectives,
                &rule.policy,
                interval,
                &rule.to,
            ));
        }
    }
    out
}
