//! What a due-backup asks for, full or incremental and per volume, from the schedule's backups
//! in the catalog: pure, over `sexton_retention::cadence` ([`ask`]). The loop in [`super`]
//! reads the catalog only for a schedule with cadence ([`Target::has_cadence`]).

use std::collections::BTreeMap;

use sexton_model::{
    names::{BackupId, ClusterName, PlanName, ScheduleName},
    records::{BackupKind, ScheduleRecord},
    wire::DueVolume,
};
use sexton_retention::{FullEvery, KindReason};

/// What a due-backup event names: the schedule and what it backs up.
pub struct Target<'a> {
    pub schedule: &'a ScheduleName,
    pub cluster: &'a ClusterName,
    pub plan: &'a PlanName,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    pub full_every: Option<FullEvery>,
    /// The schedule's policy merges chains (`chain_mode: merge`): a user's deleted middle
    /// backup is consolidated, so a new backup may build on a chain holding it.
    pub merging: bool,
    pub volumes: &'a [String],
    /// Volumes whose latest upload failed (the schedule remembers them after the failed
    /// backup's record is cleaned up): a full.
    pub failed_volumes: &'a [String],
    pub last_backup_failed: bool,
}

impl<'a> From<&'a ScheduleRecord> for Target<'a> {
    fn from(record: &'a ScheduleRecord) -> Target<'a> {
        Target {
            schedule: &record.name,
            cluster: &record.cluster,
            plan: &record.plan,
            labels: &record.labels,
            annotations: &record.annotations,
            full_every: record.full_every,
            merging: merging(record),
            volumes: &record.volumes,
            failed_volumes: &record.status.failed_volumes,
            last_backup_failed: record.status.last_backup_failed,
        }
    }
}

impl Target<'_> {
    /// Whether the kind to take depends on the schedule's earlier backups: it sets
    /// `full_every` or lists volumes. Otherwise every backup is a full and the catalog is not
    /// read (a burst of thousands of database schedules costs no catalog reads).
    pub(super) fn has_cadence(&self) -> bool {
        self.full_every.is_some() || !self.volumes.is_empty()
    }
}

/// What a due-backup event asks for: the backup's kind and parent, and per volume.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub kind: BackupKind,
    pub parent: Option<BackupId>,
    pub kind_reason: Option<String>,
    pub volumes: Vec<DueVolume>,
}

/// The kinds to ask for, from the schedule's backups in the catalog (pure:
/// `sexton_retention::cadence`) and the failures the schedule remembers (a volume whose last
/// upload failed gets a full even after the failed record was cleaned up). A parent that is not
/// a valid id (a catalog edited by hand) makes that volume a full (`chain_broken`): a full is
/// always safe.
pub fn ask(target: &Target<'_>, backups: &[sexton_retention::BackupRecord]) -> Asked {
    let parent_id = |parent: Option<String>| parent.and_then(|p| BackupId::new(p).ok());
    let failed = KindReason::LastAttemptFailed.as_str().to_string();
    if target.volumes.is_empty() {
        let choice = sexton_retention::next_backup_kind(target.full_every, backups);
        if target.last_backup_failed {
            return Asked {
                kind: BackupKind::Full,
                parent: None,
                kind_reason: Some(failed),
                volumes: Vec::new(),
            };
        }
        let parent = parent_id(choice.parent);
        let (kind, reason) = match (choice.kind, &parent) {
            (BackupKind::Incremental, None) => (BackupKind::Full, KindReason::ChainBroken),
            (kind, _) => (kind, choice.reason),
        };
        return Asked {
            kind,
            parent,
            kind_reason: Some(reason.as_str().to_string()),
            volumes: Vec::new(),
        };
    }
    let choices = sexton_retention::next_volume_kinds(target.full_every, backups, target.volumes);
    let volumes: Vec<DueVolume> = choices
        .into_iter()
        .map(|volume| {
            if target.failed_volumes.contains(&volume.name) {
                return DueVolume {
                    name: volume.name,
                    kind: BackupKind::Full,
                    parent: None,
                    reason: Some(failed.clone()),
                };
            }
            let parent = parent_id(volume.choice.parent);
            let (kind, reason) = match (volume.choice.kind, &parent) {
                (BackupKind::Incremental, None) => (BackupKind::Full, KindReason::ChainBroken),
                (kind, _) => (kind, volume.choice.reason),
            };
            DueVolume {
                name: volume.name,
                kind,
                parent,
                reason: Some(reason.as_str().to_string()),
            }
        })
        .collect();
    let kind = if volumes.iter().all(|v| v.kind == BackupKind::Full) {
        BackupKind::Full
    } else {
        BackupKind::Incremental
    };
    Asked {
        kind,
        parent: None,
        kind_reason: None,
        volumes,
    }
}

pub(super) fn merging(record: &ScheduleRecord) -> bool {
    record.policy.chain_mode == sexton_retention::ChainMode::Merge
}

/// The schedule's backups as the cadence reads them. In merge mode a backup a user asked to
/// delete (not forced) does not end its chain: the next backup may build on it, and retention
/// consolidates it into a kept backup before it goes (seed 001: a deleted middle backup is
/// merged, never a reason for a new full). A forced delete goes at once, so it still does.
pub(super) fn cadence_input(
    target: &Target<'_>,
    record: &sexton_model::records::BackupRecord,
) -> sexton_retention::BackupRecord {
    let mut backup = record.to_engine();
    if target.merging
        && record.delete_request.as_ref().is_some_and(|r| !r.force)
        && !record.status.is_being_deleted()
    {
        backup.delete_requested = false;
    }
    backup
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use sexton_retention::{BackupRecord, VolumeArtifact};

    fn at(minute: u32) -> chrono::DateTime<chrono::FixedOffset> {
        format!("2026-01-01T00:{minute:02}:00Z").parse().unwrap()
    }

    /// Merge mode reads a user's (not forced) delete request as no end of the chain; a forced
    /// one, or any request outside merge mode, ends it (the next backup is a full).
    #[test]
    fn merge_mode_builds_on_a_requested_middle_backup_unless_forced() {
        let (schedule, cluster, plan) = (
            "app".parse().unwrap(),
            "c1".parse().unwrap(),
            "p".parse().unwrap(),
        );
        let labels = BTreeMap::new();
        let volumes = vec!["pv1".to_string()];
        let target = |merging| Target {
            schedule: &schedule,
            cluster: &cluster,
            plan: &plan,
            labels: &labels,
            annotations: &labels,
            full_every: None,
            merging,
            volumes: &volumes,
            failed_volumes: &[],
            last_backup_failed: false,
        };
        let record = |id: &str, parent: Option<&str>, minute: i64, force: Option<bool>| {
            let mut record: sexton_model::records::BackupRecord =
                serde_json::from_value(serde_json::json!({
                    "id": id, "uid": format!("u-{id}"), "cluster": "c1", "plan": "p",
                    "schedule": "app", "backup_name": "app", "kind": "full",
                    "status": "completed",
                    "completed_at": format!("2026-01-01T00:{minute:02}:00Z"),
                    "artifacts": [format!("backups/c1/app/{id}/metadata.json")],
                }))
                .unwrap();
            record.volumes = vec![match parent {
                None => VolumeArtifact::full("pv1", vec![format!("backups/c1/app/{id}/pv1")]),
                Some(parent) => VolumeArtifact::incremental(
                    "pv1",
                    parent,
                    vec![format!("backups/c1/app/{id}/pv1")],
                ),
            }];
            record.delete_request = force.map(|force| sexton_model::records::DeleteRequest {
                requested_at: Utc::now(),
                remote: true,
                force,
            });
            record
        };
        for (merging, force, expected) in [
            (true, Some(false), BackupKind::Incremental),
            (true, Some(true), BackupKind::Full),
            (false, Some(false), BackupKind::Full),
            (true, None, BackupKind::Incremental),
        ] {
            let target = target(merging);
            let records = [
                record("d1", None, 1, None),
                record("d2", Some("d1"), 2, force),
                record("d3", Some("d2"), 3, None),
            ];
            let backups: Vec<BackupRecord> =
                records.iter().map(|r| cadence_input(&target, r)).collect();
            let asked = ask(&target, &backups);
            assert_eq!(
                asked.volumes[0].kind, expected,
                "merging {merging}, force {force:?}: {asked:?}"
            );
        }
    }

    #[test]
    fn remembered_failures_and_unusable_parents_ask_for_fulls() {
        let (schedule, cluster, plan) = (
            "app".parse().unwrap(),
            "c1".parse().unwrap(),
            "p".parse().unwrap(),
        );
        let labels = BTreeMap::new();
        let volumes = vec!["pv1".to_string(), "pv2".to_string()];
        let failed = vec!["pv2".to_string()];
        let target = Target {
            schedule: &schedule,
            cluster: &cluster,
            plan: &plan,
            labels: &labels,
            annotations: &labels,
            full_every: None,
            merging: false,
            volumes: &volumes,
            failed_volumes: &failed,
            last_backup_failed: false,
        };
        let d1 = BackupRecord {
            volumes: vec![
                VolumeArtifact::full("pv1", vec!["k1".into()]),
                VolumeArtifact::full("pv2", vec!["k2".into()]),
            ],
            ..BackupRecord::completed_full("d1", at(1))
        };
        let asked = ask(&target, std::slice::from_ref(&d1));
        let got: Vec<(&str, BackupKind, Option<&str>, Option<&str>)> = asked
            .volumes
            .iter()
            .map(|v| {
                (
                    v.name.as_str(),
                    v.kind,
                    v.parent.as_ref().map(|p| p.as_str()),
                    v.reason.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "pv1",
                    BackupKind::Incremental,
                    Some("d1"),
                    Some("chain_continues")
                ),
                ("pv2", BackupKind::Full, None, Some("last_attempt_failed")),
            ]
        );
        assert_eq!(asked.kind, BackupKind::Incremental);
        // A parent id that is not a valid id (edited by hand): a full, chain broken.
        let odd = BackupRecord {
            volumes: vec![VolumeArtifact::full("pv1", vec!["k".into()])],
            ..BackupRecord::completed_full("d/1", at(2))
        };
        let asked = ask(
            &Target {
                failed_volumes: &[],
                ..target
            },
            &[odd],
        );
        assert_eq!(asked.volumes[0].kind, BackupKind::Full);
        assert_eq!(asked.volumes[0].reason.as_deref(), Some("chain_broken"));
        // A failed backup without volumes: a full, whatever full_every says.
        let no_volumes = Target {
            volumes: &[],
            failed_volumes: &[],
            last_backup_failed: true,
            full_every: Some(FullEvery::new(5).unwrap()),
            ..target
        };
        let asked = ask(&no_volumes, &[BackupRecord::completed_full("d1", at(1))]);
        assert_eq!(
            (asked.kind, asked.kind_reason.as_deref()),
            (BackupKind::Full, Some("last_attempt_failed"))
        );
    }
}
