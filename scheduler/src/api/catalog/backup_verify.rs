//! `backup.verify` (`sexton backup verify ID --cluster C [--timeout 30m] [--wait]`): a restore
//! test of one backup now, outside any schedule's `verify` cron. The same path as a scheduled
//! test ([`crate::verify::Verifier::ask`]): the event with its chain, the backup held until the
//! verdict or the deadline. Refused for a backup the place tested does not hold whole
//! ([`sexton_model::records::BackupRecord::restorable_at`]), or one already under test.

use chrono::Utc;
use serde_json::Value;
use sexton_shared::api::{ApiError, ErrorCode, VerifyAsked};

use crate::api::{invalid, unavailable, Api};

pub use sexton_shared::api::VerifyRequest;

impl Api {
    pub(in crate::api) async fn backup_verify(
        &self,
        req: VerifyRequest,
    ) -> Result<Value, ApiError> {
        // A test at a location reads the copy there: the location must be this fleet's, and
        // the backup's copy there must count, whatever primary did with it.
        let location = req.location.as_ref().filter(|name| !name.is_primary());
        if let Some(name) = location {
            self.check_location(name)?;
        }
        let (records, index) = self
            .restorable_backup(&req.cluster, &req.id, location, "tested")
            .await?;
        let target = &records[index].value;
        if let Some(pending) = target
            .verification
            .as_ref()
            .and_then(|v| v.pending.as_ref())
        {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!(
                    "backup {} is already under test ({}, until {})",
                    req.id, pending.request_id, pending.deadline
                ),
            ));
        }
        let now = Utc::now();
        let request_id = asked_request_id("manual", now);
        let timeout = req.timeout.unwrap_or_default().as_delta();
        let asked = self
            .verifier
            .ask(
                &records,
                target,
                crate::verify::TestRequest {
                    request_id: &request_id,
                    timeout,
                    now,
                    location,
                    replay: None,
                },
            )
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        serde_json::to_value(answer(asked, request_id, &req.id)).map_err(invalid)
    }
}

/// The id of a test asked for through the API at `now`: `<kind>-<YYYYMMDDhhmmss>-<6 hex>`.
pub(super) fn asked_request_id(kind: &str, now: chrono::DateTime<Utc>) -> String {
    format!(
        "{kind}-{}-{}",
        now.format("%Y%m%d%H%M%S"),
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    )
}

/// What asking for a test of backup `id` came to, as `backup.verify` and `backup.drill`
/// answer it: the test asked for, or, for a chain that cannot be restored, recorded failed at
/// once (with the reason, on the backup).
pub(super) fn answer(
    asked: Option<crate::verify::Asked>,
    request_id: String,
    id: &sexton_model::names::BackupId,
) -> VerifyAsked {
    match asked {
        Some(asked) => VerifyAsked {
            request_id: asked.request_id,
            backup_id: asked.backup_id,
            deadline: Some(asked.deadline),
            duplicate: Some(asked.duplicate),
            recorded: None,
        },
        None => VerifyAsked {
            request_id,
            backup_id: id.to_string(),
            deadline: None,
            duplicate: None,
            recorded: Some("failed".into()),
        },
    }
}
