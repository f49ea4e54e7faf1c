//! `recovery.window` (`sexton recovery window`, issue 47): what each place can restore of a
//! cluster now, the I/O around [`sexton_shared::recovery::places`]: the cluster's records read
//! whole (a restore test's time is not in the view's engine form), its schedules, and each
//! place's log archive (primary's index, and each location's own copy of it).

use std::collections::BTreeMap;

use chrono::Utc;
use sexton_model::names::LocationName;
use sexton_shared::{
    api::{ApiError, ErrorCode, RecoveryRequest},
    Shutdown,
};

use super::Worker;
use crate::binlog;

impl Worker {
    async fn recovery_window(&self, req: &RecoveryRequest) -> Result<serde_json::Value, ApiError> {
        let unavailable =
            |err: anyhow::Error| ApiError::new(ErrorCode::Unavailable, format!("{err:#}"));
        if let Some(location) = req.location.as_ref().filter(|l| !l.is_primary()) {
            if !self.locations.contains_key(location) {
                let known: Vec<&str> = self.locations.keys().map(|l| l.as_str()).collect();
                return Err(ApiError::new(
                    ErrorCode::Invalid,
                    format!(
                        "no such location {location}; this fleet has primary{}{}",
                        if known.is_empty() { "" } else { ", " },
                        known.join(", ")
                    ),
                ));
            }
        }
        let cluster = &req.cluster;
        let schedules = self
            .schedules
            .of_cluster(cluster)
            .await
            .map_err(unavailable)?;
        let records = self
            .catalog
            .list_cluster(cluster)
            .await
            .map_err(unavailable)?;
        let wanted = |name: &LocationName| req.location.as_ref().is_none_or(|only| only == name);
        let mut segments = BTreeMap::new();
        let primary = LocationName::primary();
        if wanted(&primary) {
            let archive = binlog::load(&self.store, &self.prefix, cluster).await;
            segments.insert(primary, archive.segments());
        }
        for (name, store) in &self.locations {
            if wanted(name) {
                let archive = binlog::load(store, store.prefix(), cluster).await;
                segments.insert(name.clone(), archive.segments());
            }
        }
        let values: Vec<&sexton_model::records::BackupRecord> =
            records.iter().map(|r| &r.value).collect();
        let places = sexton_shared::recovery::places(
            &values,
            &schedules,
            &segments,
            req.plan.as_ref(),
            req.location.as_ref(),
            Utc::now(),
        );
        sexton_shared::api::reply_value(places)
    }

    /// Answers `recovery.window` requests until shutdown.
    pub async fn serve_recovery(
        self,
        client: async_nats::Client,
        shutdown: Shutdown,
    ) -> anyhow::Result<()> {
        sexton_shared::api::serve_requests(
            client,
            "recovery",
            "window",
            shutdown,
            |req: RecoveryRequest, _| {
                let worker = self.clone();
                async move { worker.recovery_window(&req).await }
            },
        )
        .await
    }
}
