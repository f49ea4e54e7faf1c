//! `backup.describe`: one backup as the catalog holds it, and what retention decides about it
//! now and why: kept (by which rule), partial (which volumes stay, `needed by` which backup,
//! and which go), or deleted. The plan is made the way the retention-worker and the deleter
//! make it ([`planning`]), so the three cannot disagree.

use chrono::Utc;
use serde_json::Value;
use sexton_retention::Reason;
use sexton_shared::{
    api::{reply_value, ApiError, BackupDescription, BackupRef, RetentionVerdict, VolumeFate},
    planning,
};

use super::Api;

impl Api {
    pub(super) async fn backup_describe(&self, request: BackupRef) -> Result<Value, ApiError> {
        let (state, at) = self
            .cluster_with_backup(&request.cluster, &request.id)
            .await?;
        let current = &state.records[at];
        let record = &current.value;
        let policies = planning::group_policies(&state.schedules);
        let group: Vec<_> = state
            .records
            .iter()
            .filter(|r| r.value.plan == record.plan)
            .map(|r| r.value.to_engine())
            .collect();
        let (verdict, reasons, volumes_keep, volumes_delete) =
            match planning::policy_for(&policies, &record.plan) {
                Err(reason) => ("keep", vec![reason], Vec::new(), Vec::new()),
                Ok(policy) => {
                    let catalog = sexton_retention::Catalog {
                        backups: group,
                        binlog_segments: Vec::new(),
                    };
                    match sexton_retention::plan(&catalog, policy, Utc::now()) {
                        Err(err) => (
                            "keep",
                            vec![format!(
                                "retention refused to plan: {err}; keeping everything"
                            )],
                            Vec::new(),
                            Vec::new(),
                        ),
                        Ok(plan) => match plan.decision(record.id.as_str()) {
                            None => ("keep", Vec::new(), Vec::new(), Vec::new()),
                            Some((verdict, decision)) => (
                                match verdict {
                                    sexton_retention::Verdict::Keep => "keep",
                                    sexton_retention::Verdict::Partial => "partial",
                                    sexton_retention::Verdict::Delete => "delete",
                                },
                                Reason::texts(&decision.reasons),
                                decision.volumes_keep.clone(),
                                decision.volumes_delete.clone(),
                            ),
                        },
                    }
                }
            };
        // One row per volume still in the record: kept or going, and why.
        let volumes: Vec<VolumeFate> = record
            .volumes
            .iter()
            .map(|volume| {
                let kept = volumes_keep.iter().find(|v| v.name == volume.name);
                let going = volumes_delete.iter().find(|v| v.name == volume.name);
                let deleting = record
                    .volume_deletion
                    .as_ref()
                    .is_some_and(|d| d.volumes.contains(&volume.name));
                let (state, why) = match (kept, going) {
                    _ if deleting => ("deleting", going.map(|v| Reason::texts(&v.reasons))),
                    (Some(kept), _) => ("kept", Some(Reason::texts(&kept.reasons))),
                    (None, Some(going)) => ("expiring", Some(Reason::texts(&going.reasons))),
                    (None, None) => ("kept", None),
                };
                VolumeFate {
                    name: volume.name.clone(),
                    kind: volume.kind,
                    parent: volume.parent.clone(),
                    keys: volume.keys.clone(),
                    state: state.to_string(),
                    reasons: why.unwrap_or_else(|| reasons.clone()),
                }
            })
            .collect();
        reply_value(BackupDescription {
            backup: record.clone(),
            revision: current.revision,
            retention: RetentionVerdict {
                verdict: verdict.to_string(),
                reasons,
            },
            volumes,
        })
    }
}
