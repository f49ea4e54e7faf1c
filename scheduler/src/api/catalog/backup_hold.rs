//! `backup.hold` and `backup.release`: a backup in use — a restore, a clone, a bootstrap
//! (seed 003's manual checklist) — is held with the reason (`restore:<id>`) and kept, like a
//! legal hold, by every rule and every deleter until that reason is released. A hold on a
//! backup that retention already marked takes the mark off in the same write, so the catalog
//! says what the plan now says. A backup the deleter has claimed is past holding: refused with
//! the reason. Releasing the last hold asks for a retention sweep of the cluster, so a backup
//! no rule keeps goes promptly.

use serde_json::{json, Value};
use sexton_model::records::{BackupRecord, BackupStatus};
use sexton_shared::{
    api::{ApiError, BackupHold, ErrorCode, MAX_HOLDS},
    catalog::{CasError, Versioned},
};

use crate::api::{backup_not_found, unavailable, Api};

impl Api {
    async fn read_backup(&self, request: &BackupHold) -> Result<Versioned<BackupRecord>, ApiError> {
        self.catalog
            .get(&request.cluster, &request.id)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?
            .ok_or_else(|| backup_not_found(&request.cluster, &request.id))
    }

    pub(in crate::api) async fn backup_hold(&self, request: BackupHold) -> Result<Value, ApiError> {
        for _ in 0..5 {
            let current = self.read_backup(&request).await?;
            let record = &current.value;
            if record.holds.contains(&request.reason) {
                return Ok(hold_reply(&request, record, "already-held"));
            }
            if matches!(record.status, BackupStatus::Deleting) {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "backup {} is being deleted: its objects may be gone already; \
                         hold another backup",
                        record.id
                    ),
                ));
            }
            if record.holds.len() >= MAX_HOLDS {
                return Err(ApiError::new(
                    ErrorCode::Invalid,
                    format!(
                        "backup {} already has {MAX_HOLDS} holds; release one first",
                        record.id
                    ),
                ));
            }
            let mut held = record.clone();
            held.holds.push(request.reason.clone());
            // The plan now keeps it: take retention's marks off (a claimed partial deletion
            // is past that and finishes).
            if held.status == BackupStatus::Expiring {
                held.status = held.expired_from.unwrap_or(BackupStatus::Completed);
                held.expired_from = None;
                held.expiring_revision = None;
                held.delete_reasons.clear();
            }
            if held.volume_deletion.is_none() {
                for volume in &mut held.volumes {
                    volume.expiring = false;
                }
            }
            match self.catalog.update(&held, current.revision).await {
                Ok(_) => {
                    tracing::info!(cluster = %held.cluster, backup = %held.id, reason = %request.reason, "backup held");
                    let mut reply = hold_reply(&request, &held, "held");
                    if let Some(deleting) = &held.volume_deletion {
                        reply["warning"] = json!(format!(
                            "volumes {} of this backup were already being deleted",
                            deleting.volumes.join(", ")
                        ));
                    }
                    return Ok(reply);
                }
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
            }
        }
        Err(ApiError::new(
            ErrorCode::Conflict,
            format!("backup {} kept changing; try again", request.id),
        ))
    }

    pub(in crate::api) async fn backup_release(
        &self,
        request: BackupHold,
    ) -> Result<Value, ApiError> {
        for _ in 0..5 {
            let current = self.read_backup(&request).await?;
            let record = &current.value;
            if !record.holds.contains(&request.reason) {
                return Err(ApiError::new(
                    ErrorCode::NotFound,
                    format!(
                        "backup {} has no hold {:?} (holds: {})",
                        record.id,
                        request.reason,
                        if record.holds.is_empty() {
                            "none".to_string()
                        } else {
                            record.holds.join(", ")
                        }
                    ),
                ));
            }
            let mut released = record.clone();
            released.holds.retain(|hold| *hold != request.reason);
            let revision = match self.catalog.update(&released, current.revision).await {
                Ok(revision) => revision,
                Err(CasError::Conflict) => continue,
                Err(CasError::Other(err)) => return Err(unavailable(format!("{err:#}"))),
            };
            tracing::info!(cluster = %released.cluster, backup = %released.id, reason = %request.reason, "hold released");
            if released.holds.is_empty() {
                self.ask_retention_run(
                    &request.cluster,
                    &format!("release.{}.{revision}", released.uid),
                )
                .await?;
            }
            return Ok(hold_reply(&request, &released, "released"));
        }
        Err(ApiError::new(
            ErrorCode::Conflict,
            format!("backup {} kept changing; try again", request.id),
        ))
    }
}

fn hold_reply(request: &BackupHold, record: &BackupRecord, action: &str) -> Value {
    json!({
        "cluster": request.cluster, "id": request.id, "action": action,
        "reason": request.reason, "holds": record.holds,
    })
}
