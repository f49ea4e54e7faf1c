//! A run's recovery gauges (issue 47): each group's recovery value at its place as the run
//! leaves it ([`sexton_shared::recovery::judge_place`] over the group's records less what the
//! run deletes, with the place's own log archive), and each recovery objective checked.

use chrono::{DateTime, Utc};
use sexton_model::names::LocationName;
use sexton_retention::{BinlogSegment, Catalog};
use sexton_shared::recovery::PassedTest;

use super::Worker;
use crate::decisions::RunDecision;
use crate::group_plan::GroupPlan;

/// The group's catalog once the run's decisions are carried out: what it deletes whole gone,
/// the volumes a partial decision deletes gone from their backups, the binlog segments it
/// collects gone, and the place's archive (`segments`) as the log. Without a decision (no
/// policy: everything kept) the catalog as it is.
pub(super) fn kept_catalog(
    engine: &Catalog,
    run: Option<&RunDecision>,
    segments: &[BinlogSegment],
) -> Catalog {
    let mut catalog = Catalog {
        backups: engine.backups.clone(),
        binlog_segments: segments.to_vec(),
    };
    let Some(run) = run else {
        return catalog;
    };
    let mut gone = vec![false; catalog.backups.len()];
    for (index, _) in &run.delete {
        if let Some(flag) = gone.get_mut(*index) {
            *flag = true;
        }
    }
    for (index, decision) in &run.partial {
        if let Some(backup) = catalog.backups.get_mut(*index) {
            backup
                .volumes
                .retain(|v| !decision.volumes_delete.iter().any(|d| d.name == v.name));
        }
    }
    let mut flags = gone.into_iter();
    catalog.backups.retain(|_| !flags.next().unwrap_or(false));
    let collected: std::collections::HashSet<&str> =
        run.binlog.delete.iter().map(String::as_str).collect();
    catalog
        .binlog_segments
        .retain(|segment| !collected.contains(segment.key.as_str()));
    catalog
}

/// The group's recovery value at its place over `catalog` (the group as some plan leaves it,
/// with the place's archive), its objectives checked, and the newest restore test that passed
/// there among the members `counted` lets count.
pub(super) fn place_value(
    group: &GroupPlan,
    catalog: &Catalog,
    promised_window: Option<String>,
    counted: impl Fn(&str) -> bool,
    now: DateTime<Utc>,
) -> sexton_shared::recovery::PlaceRecovery {
    let location = group.location.clone().unwrap_or_else(LocationName::primary);
    let passed = group
        .members
        .entries
        .iter()
        .zip(&group.members.engine.backups)
        .filter(|(_, backup)| counted(&backup.id))
        .filter_map(|(entry, backup)| {
            entry.passed_test_at.map(|at| PassedTest {
                id: backup.id.clone(),
                at,
            })
        })
        .max_by_key(|test| test.at);
    sexton_shared::recovery::judge_place(
        &location,
        &group.plan,
        catalog,
        promised_window,
        group.objectives.as_ref(),
        passed,
        now,
    )
}

impl Worker {
    /// Sets the group's recovery gauges at its place: the recoverable window (now minus the
    /// oldest restorable instant), the recovery point age (now minus the newest; nothing
    /// restorable: seconds since the epoch, so an rpo alert fires), and each objective.
    pub(super) fn observe_recovery(
        &self,
        group: &GroupPlan,
        segments: &[BinlogSegment],
        now: DateTime<Utc>,
    ) {
        let location = group.location.clone().unwrap_or_else(LocationName::primary);
        let catalog = kept_catalog(&group.members.engine, group.run.as_ref(), segments);
        let place = place_value(group, &catalog, None, |_| true, now);
        let (cluster, plan) = (group.cluster.as_str(), group.plan.as_str());
        if let Some(oldest) = place.recovery.oldest() {
            let seconds = (now - oldest).num_milliseconds() as f64 / 1e3;
            match &group.location {
                None => self
                    .metrics
                    .recoverable_window
                    .with_label_values(&[cluster, plan])
                    .set(seconds),
                Some(location) => self
                    .metrics
                    .copies_recoverable_window
                    .with_label_values(&[cluster, plan, location.as_str()])
                    .set(seconds),
            }
        }
        let age = place.point_age_seconds.unwrap_or_else(|| now.timestamp());
        self.metrics
            .recovery_point_age
            .with_label_values(&[cluster, plan, location.as_str()])
            .set(age as f64);
        for check in &place.objectives {
            let labels = [cluster, plan, location.as_str(), check.objective.as_str()];
            self.metrics
                .objective_met
                .with_label_values(&labels)
                .set(i64::from(check.met));
            self.metrics
                .objective_short
                .with_label_values(&labels)
                .set(check.short_seconds as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_catalog_leaves_out_what_the_run_deletes() {
        let catalog: Catalog = serde_json::from_value(serde_json::json!({
            "backups": [
                {"id": "a", "status": "completed", "kind": "full",
                 "completed_at": "2026-01-01T01:00:00Z"},
                {"id": "b", "status": "completed", "kind": "full",
                 "completed_at": "2026-01-01T02:00:00Z"}
            ],
        }))
        .unwrap();
        let segments: Vec<BinlogSegment> = serde_json::from_value(serde_json::json!([
            {"key": "bin.000001"}, {"key": "bin.000002"}
        ]))
        .unwrap();
        let kept = kept_catalog(&catalog, None, &segments);
        assert_eq!(kept.backups.len(), 2);
        assert_eq!(kept.binlog_segments.len(), 2);
        let decision = sexton_retention::Decision {
            id: "a".into(),
            reasons: Default::default(),
            remove_objects: true,
            status: sexton_retention::BackupStatus::Completed,
            kind: sexton_retention::BackupKind::Full,
            completed_at: None,
            volumes_keep: Vec::new(),
            volumes_delete: Vec::new(),
        };
        let mut run = RunDecision::default();
        run.delete.push((0, decision));
        run.binlog.delete.push("bin.000001".into());
        let kept = kept_catalog(&catalog, Some(&run), &segments);
        let ids: Vec<&str> = kept.backups.iter().map(|b| b.id.as_str()).collect();
        assert_eq!(ids, ["b"]);
        let keys: Vec<&str> = kept
            .binlog_segments
            .iter()
            .map(|s| s.key.as_str())
            .collect();
        assert_eq!(keys, ["bin.000002"]);
    }
}
