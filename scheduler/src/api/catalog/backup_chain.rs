//! `backup.chain` (`sexton backup fetch ID --cluster C [--location L]`): what a restore of one
//! backup reads, worked out as a restore test's is ([`crate::verify::chain_of`]): its chain
//! oldest first, each object with the size, SHA-256 and version intake (or the copier)
//! recorded. Read-only: the caller downloads and checks.

use serde_json::Value;
use sexton_model::records::BackupRecord;
use sexton_shared::api::{ApiError, ChainRequest, ErrorCode, RestoreChain};
use std::collections::BTreeMap;

use crate::api::{invalid, Api};

impl Api {
    pub(in crate::api) async fn backup_chain(&self, req: ChainRequest) -> Result<Value, ApiError> {
        let location = req.location.as_ref().filter(|name| !name.is_primary());
        if let Some(name) = location {
            self.check_location(name)?;
        }
        let (records, index) = self
            .restorable_backup(&req.cluster, &req.id, location, "restored")
            .await?;
        let target = &records[index].value;
        let by_id: BTreeMap<&str, &BackupRecord> = records
            .iter()
            .map(|r| (r.value.id.as_str(), &r.value))
            .collect();
        let chain =
            crate::verify::restore_chain(&by_id, target, location, self.place_store(location))
                .map_err(|why| ApiError::new(ErrorCode::Conflict, format!("{}: {why}", req.id)))?;
        let answer = RestoreChain {
            cluster: req.cluster.clone(),
            id: req.id.clone(),
            location: location.cloned(),
            chain: chain
                .iter()
                .map(|r| crate::verify::verify_backup(r, location))
                .collect(),
        };
        serde_json::to_value(answer).map_err(invalid)
    }
}
