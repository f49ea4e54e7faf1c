//! `backup.list` (`sexton backup list [--cluster C] [--plan P]`): catalog records, per
//! cluster newest first.

use serde_json::Value;
use sexton_shared::api::{ApiError, ListFilter};

use crate::api::{invalid, unavailable, Api};

impl Api {
    pub(in crate::api) async fn backup_list(&self, filter: ListFilter) -> Result<Value, ApiError> {
        let records = match &filter.cluster {
            Some(cluster) => self.catalog.list_cluster(cluster).await,
            None => self.catalog.list_all().await,
        }
        .map_err(|err| unavailable(format!("{err:#}")))?;
        let mut records: Vec<_> = records
            .into_iter()
            .map(|v| v.value)
            .filter(|r| filter.plan.as_ref().is_none_or(|p| *p == r.plan))
            .filter(|r| filter.id.as_ref().is_none_or(|id| *id == r.id))
            .collect();
        records.sort_by(|a, b| {
            (&a.cluster, b.completed_at, &a.id).cmp(&(&b.cluster, a.completed_at, &b.id))
        });
        serde_json::to_value(records).map_err(invalid)
    }
}
