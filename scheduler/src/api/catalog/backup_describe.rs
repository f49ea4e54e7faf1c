//! `backup.describe`: one backup as the catalog holds it, and what retention decides about it
//! now and why: kept (by which rule), partial (which volumes stay, `needed by` which backup,
//! and which go), or deleted. The plan is made the way the retention-worker and the deleter
//! make it ([`planning`]), so the three cannot disagree.

use chrono::Utc;
use serde_json::Value;
use sexton_model::names::LocationName;
use sexton_retention::Reason;
use sexton_shared::{
    api::{
        reply_value, ApiError, BackupDescription, BackupRef, RestorablePlace, RetentionVerdict,
        VolumeFate,
    },
    planning,
};

use crate::api::Api;

impl Api {
    pub(in crate::api) async fn backup_describe(
        &self,
        request: BackupRef,
    ) -> Result<Value, ApiError> {
        let (state, at) = self
            .cluster_with_backup(&request.cluster, &request.id)
            .await?;
        let current = &state.records[at];
        let record = &current.value;
        let policies = planning::group_policies(&state.schedules);
        let now = Utc::now();
        // The primary's group: the backups whose objects are still there.
        let group: Vec<_> = state
            .records
            .iter()
            .filter(|r| r.value.plan == record.plan && r.value.held_at_primary())
            .map(|r| r.value.to_engine())
            .collect();
        let (verdict, reasons, volumes_keep, volumes_delete) = if record.held_at_primary() {
            verdict_of(
                record,
                group,
                planning::policy_for(&policies, &record.plan),
                now,
            )
        } else {
            (
                "gone",
                vec![format!(
                    "deleted at primary{}; the record stays for its copies elsewhere",
                    record
                        .primary_deleted_at
                        .map(|at| format!(
                            " {}",
                            at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                        ))
                        .unwrap_or_default()
                )],
                Vec::new(),
                Vec::new(),
            )
        };
        // What each location holding a copy decides about it (issue 28), over its own copies.
        let rules: Vec<_> = state
            .schedules
            .iter()
            .filter(|s| s.plan == record.plan)
            .flat_map(|s| s.copies.iter())
            .collect();
        let mut copies_retention = std::collections::BTreeMap::new();
        for (location, copy) in record.copies.iter().filter(|(_, copy)| copy.is_held()) {
            let group: Vec<_> = state
                .records
                .iter()
                .filter(|r| r.value.plan == record.plan)
                .filter_map(|r| r.value.to_engine_at(location))
                .collect();
            let policy = sexton_model::copies::copy_policy(rules.iter().copied(), location);
            let (verdict, reasons, _, _) = verdict_of(record, group, policy, now);
            let (verdict, reasons) = match copy.state {
                sexton_model::copies::CopyState::Copied => (verdict, reasons),
                state => (state.as_str(), copy.delete_reasons.clone()),
            };
            copies_retention.insert(
                location.clone(),
                RetentionVerdict {
                    verdict: verdict.to_string(),
                    reasons,
                },
            );
        }
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
        // Where a restore can read it: the backup and every link of its chain whole there.
        let by_id: std::collections::BTreeMap<&str, &sexton_model::records::BackupRecord> = state
            .records
            .iter()
            .map(|r| (r.value.id.as_str(), &r.value))
            .collect();
        let places = std::iter::once(None).chain(
            record
                .copies
                .iter()
                .filter(|(_, copy)| copy.is_held())
                .map(|(location, _)| Some(location)),
        );
        let restorable = places
            .map(|place| {
                let why = record.restorable_at(place).and_then(|()| {
                    crate::verify::restore_chain(&by_id, record, place, self.place_store(place))
                        .map(|_| ())
                });
                RestorablePlace {
                    location: place.cloned().unwrap_or_else(LocationName::primary),
                    restorable: why.is_ok(),
                    reason: why.err(),
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
            copies_retention,
            restorable,
        })
    }
}

/// The verdict of the plan `policy` (or why there is none) makes over `group` about `record`:
/// the verdict word, the reasons, the volumes kept and deleted.
fn verdict_of(
    record: &sexton_model::records::BackupRecord,
    group: Vec<sexton_retention::BackupRecord>,
    policy: Result<&sexton_model::records::Policy, String>,
    now: chrono::DateTime<Utc>,
) -> (
    &'static str,
    Vec<String>,
    Vec<sexton_retention::VolumeDecision>,
    Vec<sexton_retention::VolumeDecision>,
) {
    let policy = match policy {
        Err(reason) => return ("keep", vec![reason], Vec::new(), Vec::new()),
        Ok(policy) => policy,
    };
    let catalog = sexton_retention::Catalog {
        backups: group,
        binlog_segments: Vec::new(),
    };
    match sexton_retention::plan(&catalog, policy, now) {
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
