//! `backup.drill` (`sexton recovery drill --cluster C --at T [--location L] [--wait]`, issue
//! 47): a restore test to a point in time. What a restore to `at` reads is the retention core's
//! decision ([`sexton_retention::drill`]), over the place's records and log archive as the
//! verifier reads them ([`crate::verify::Verifier::place_catalog`]), as a scheduled drill
//! (`verify.pick: point`) does. The test
//! then goes the way of every restore test ([`crate::verify::Verifier::ask`]): the event with
//! the chain and the replay, the base held until the verdict, the verdict recorded on the base
//! with the instant it recovered to.

use chrono::Utc;
use serde_json::Value;
use sexton_model::{
    names::{LocationName, PlanName},
    records::BackupRecord,
    wire::VerifyReplay,
};
use sexton_shared::api::{ApiError, DrillAsked, DrillRequest, ErrorCode};

use crate::api::{invalid, unavailable, Api};

impl Api {
    pub(in crate::api) async fn backup_drill(&self, req: DrillRequest) -> Result<Value, ApiError> {
        let location = req.location.as_ref().filter(|name| !name.is_primary());
        if let Some(name) = location {
            self.check_location(name)?;
        }
        let records = self
            .catalog
            .list_cluster(&req.cluster)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        if records.is_empty() {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                format!("cluster {} has no backups in the catalog", req.cluster),
            ));
        }
        let plan = self.drill_plan(&req, &records)?;
        let place = location.cloned().unwrap_or_else(LocationName::primary);
        let catalog = self
            .verifier
            .place_catalog(&records, &plan, location)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        let now = Utc::now();
        let drill = sexton_retention::drill(&catalog, now, req.at).map_err(|why| {
            ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "{} cannot be recovered to {} at {place}: {why}",
                    req.cluster,
                    req.at.to_rfc3339()
                ),
            )
        })?;
        let target = records
            .iter()
            .find(|r| r.value.id.as_str() == drill.base.id)
            .map(|r| &r.value)
            .ok_or_else(|| invalid(format!("backup {} left the catalog", drill.base.id)))?;
        if let Some(pending) = target
            .verification
            .as_ref()
            .and_then(|v| v.pending.as_ref())
        {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "backup {}, which a restore to {} reads, is already under test ({}, until {})",
                    target.id,
                    req.at.to_rfc3339(),
                    pending.request_id,
                    pending.deadline
                ),
            ));
        }
        let replay = drill.replay.map(|r| VerifyReplay {
            since: r.since,
            until: r.until,
        });
        let request_id = super::backup_verify::asked_request_id("drill", now);
        let asked = self
            .verifier
            .ask(
                &records,
                target,
                crate::verify::TestRequest {
                    request_id: &request_id,
                    timeout: req.timeout.unwrap_or_default().as_delta(),
                    now,
                    location,
                    replay,
                },
            )
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        serde_json::to_value(DrillAsked {
            asked: super::backup_verify::answer(asked, request_id, &target.id),
            at: req.at,
            chain: drill.base.chain,
            replay,
            location: location.cloned(),
        })
        .map_err(invalid)
    }

    /// The plan a drill reads: the one asked for, or the cluster's only one.
    fn drill_plan(
        &self,
        req: &DrillRequest,
        records: &[sexton_shared::catalog::Versioned<BackupRecord>],
    ) -> Result<PlanName, ApiError> {
        let mut plans: Vec<&PlanName> = records.iter().map(|r| &r.value.plan).collect();
        plans.sort();
        plans.dedup();
        let list = || {
            plans
                .iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match &req.plan {
            Some(plan) if plans.contains(&plan) => Ok(plan.clone()),
            Some(plan) => Err(ApiError::new(
                ErrorCode::NotFound,
                format!(
                    "cluster {} has no backups of plan {plan}; its plans: {}",
                    req.cluster,
                    list()
                ),
            )),
            None if plans.len() == 1 => Ok(plans[0].clone()),
            None => Err(invalid(format!(
                "cluster {} has backups of {} plans ({}): name one with --plan",
                req.cluster,
                plans.len(),
                list()
            ))),
        }
    }
}
