//! `schedule.get`, `schedule.describe` and `schedule.list`, and the view of a schedule every
//! schedule verb answers with: the record, its revision, what it does now (`explain`), its
//! timing in words with the next runs, and why the last due run did not fire.

use chrono::Utc;
use futures::StreamExt as _;
use serde_json::{json, Value};
use sexton_model::records::{RetentionStatus, ScheduleRecord};
use sexton_schedule::Timing;
use sexton_shared::api::{ApiError, ByName, LastSkip, ListFilter, ScheduleDescription, TimingView};

use super::{unavailable, Api};
use crate::timers;

impl Api {
    pub(super) async fn schedule_get(&self, req: ByName) -> Result<Value, ApiError> {
        let (record, revision) = self.read(req.name.as_str()).await?;
        let mut described = describe(
            &record,
            revision,
            self.config.scheduler.skip_immediately_default,
        );
        self.with_retention(&mut described, &record.cluster).await?;
        Ok(described)
    }

    /// Adds how the cluster's retention runs are going (issue 54) to a schedule's view.
    async fn with_retention(
        &self,
        described: &mut Value,
        cluster: &sexton_model::names::ClusterName,
    ) -> Result<(), ApiError> {
        if let Some(status) = self.retention_status(cluster).await? {
            described["retention"] = json!(status);
        }
        Ok(())
    }

    /// The retention-worker's last word on `cluster`'s runs; one it cannot read is left out
    /// (said in the log), not made up.
    async fn retention_status(
        &self,
        cluster: &sexton_model::names::ClusterName,
    ) -> Result<Option<RetentionStatus>, ApiError> {
        let body = sexton_shared::leader_read::value(&self.retention_status, cluster.as_str())
            .await
            .map_err(unavailable)?;
        Ok(body.and_then(|body| {
            serde_json::from_slice::<RetentionStatus>(&body)
                .inspect_err(|err| {
                    tracing::warn!(%cluster, error = %err, "unreadable retention status; left out")
                })
                .ok()
        }))
    }

    /// `get`, plus the schedule's cluster record (its last retention run).
    pub(super) async fn schedule_describe(&self, req: ByName) -> Result<Value, ApiError> {
        let (record, revision) = self.read(req.name.as_str()).await?;
        let cluster =
            match sexton_shared::leader_read::value(&self.clusters_bucket, record.cluster.as_str())
                .await
            {
                Ok(Some(body)) => serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
                Ok(None) => Value::Null,
                Err(err) => return Err(unavailable(err)),
            };
        let mut described = describe(
            &record,
            revision,
            self.config.scheduler.skip_immediately_default,
        );
        described["cluster"] = cluster;
        self.with_retention(&mut described, &record.cluster).await?;
        Ok(described)
    }

    pub(super) async fn schedule_list(&self, filter: ListFilter) -> Result<Value, ApiError> {
        let mut keys = self.topology.schedules.keys().await.map_err(unavailable)?;
        let mut names = Vec::new();
        while let Some(key) = keys.next().await {
            names.push(key.map_err(unavailable)?);
        }
        names.sort();
        let mut out = Vec::new();
        // One read per cluster, however many schedules name it.
        let mut statuses = std::collections::BTreeMap::new();
        for name in names {
            let Ok((record, revision)) = self.read(&name).await else {
                continue;
            };
            if filter
                .cluster
                .as_ref()
                .is_some_and(|c| *c != record.cluster)
                || filter.plan.as_ref().is_some_and(|p| *p != record.plan)
            {
                continue;
            }
            let mut described = describe(
                &record,
                revision,
                self.config.scheduler.skip_immediately_default,
            );
            if !statuses.contains_key(&record.cluster) {
                let status = self.retention_status(&record.cluster).await?;
                statuses.insert(record.cluster.clone(), status);
            }
            if let Some(Some(status)) = statuses.get(&record.cluster) {
                described["retention"] = json!(status);
            }
            out.push(described);
        }
        Ok(Value::Array(out))
    }
}

pub(super) fn describe(record: &ScheduleRecord, revision: u64, server_default: bool) -> Value {
    let now = Utc::now();
    let explanation = timers::explain(record, now, server_default);
    let description = ScheduleDescription {
        schedule: record.clone(),
        revision,
        explain: json!(explanation),
        timing: timing_view(record, now),
        last_skip: last_skip(record),
        retention: None,
    };
    json!(description)
}

/// How many upcoming runs `describe` shows.
const UPCOMING_RUNS: usize = 5;

/// The schedule's timing in words and its next runs with what each does (fires, skipped or
/// deferred by a blackout), as a prompt scheduler would run them from the schedule's last run.
fn timing_view(record: &ScheduleRecord, now: chrono::DateTime<Utc>) -> TimingView {
    match Timing::new(&timers::timing_spec(record)) {
        Err(err) => TimingView::Error {
            error: err.to_string(),
        },
        Ok(timing) => TimingView::Parsed {
            zone: timing
                .cron()
                .zone()
                .map_or("UTC", |tz| tz.name())
                .to_string(),
            cron: timing.cron().as_str().to_string(),
            jitter: record.jitter,
            offset_seconds: timing.offset().num_seconds(),
            on_blackout: record.on_blackout,
            settings: timing.describe(),
            upcoming: json!(timing.upcoming_for(&timers::state(record, now), now, UPCOMING_RUNS)),
        },
    }
}

/// Why the last due tick did not fire, in a sentence: what `describe` shows next to the
/// explanation of what happens now.
fn last_skip(record: &ScheduleRecord) -> Option<LastSkip> {
    let (Some(at), Some(code)) = (
        record.status.last_skipped,
        record.status.last_skip_reason.as_deref(),
    ) else {
        return None;
    };
    let why = match code {
        "skip_immediately" => {
            "skip-immediately applied when the schedule was created or unpaused".to_string()
        }
        "in_flight" => {
            "a backup from this schedule was still in progress (overlap policy skip)".to_string()
        }
        "starting_deadline_exceeded" => format!(
            "every missed run was older than the starting deadline of {}",
            record
                .starting_deadline_seconds
                .and_then(|s| sexton_schedule::Span::from_seconds(s).ok())
                .map_or_else(|| "0s".to_string(), |s| s.to_string())
        ),
        "blackout" => "it was due inside a blackout window".to_string(),
        other => other.to_string(),
    };
    Some(LastSkip {
        at,
        reason: code.to_string(),
        explanation: format!("the run due before {} did not fire: {why}", at.to_rfc3339()),
    })
}
