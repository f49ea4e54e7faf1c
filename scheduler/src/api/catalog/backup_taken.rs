//! `backup.taken`: whether the catalog holds a backup, and in which state (an executor asks
//! before it takes a backup whose due-backup came again).

use serde_json::Value;
use sexton_shared::api::{reply_value, ApiError, BackupRef, BackupTaken};

use crate::api::{unavailable, Api};

impl Api {
    pub(in crate::api) async fn backup_taken(&self, request: BackupRef) -> Result<Value, ApiError> {
        let state = self
            .catalog
            .taken_state(&request.cluster, &request.id)
            .await
            .map_err(|err| unavailable(format!("{err:#}")))?;
        reply_value(BackupTaken {
            cluster: request.cluster,
            id: request.id,
            state: state.to_string(),
        })
    }
}
