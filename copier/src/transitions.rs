//! Storage-class transitions of copies (issue 28): a copy rule's `transitions` move each copy
//! to colder classes as its backup ages (`[{after_days: 30, storage_class: "GLACIER_IR"}]`),
//! as an S3 lifecycle rule would, but decided where the policy and the chains are known.
//!
//! Every `copier.binlog_interval`, for each cluster and location a copy rule names, the copier
//! looks at the copies counted there (`copied`) whose rule has a transition due
//! ([`CopyRule::transition_due`], the one decision), moves each object with a server-side
//! copy onto itself in the new class ([`ObjectStore::change_storage_class`]: the bytes never
//! leave the store, and the object is whole throughout), and then records the class on the
//! record (`copies.<location>.storage_class`, `transitioned_at`) with compare-and-set. A copy
//! marked for deletion meanwhile is left alone (the record's copy must be the one moved); a
//! copier killed midway leaves some objects moved and the record saying the old class, and
//! the next pass moves the rest. Transitions only go forward.

use chrono::{DateTime, Utc};
use sexton_model::{
    copies::CopyState,
    names::{ClusterName, LocationName},
    records::{BackupRecord, ScheduleRecord},
};
use sexton_shared::catalog::CasError;

use crate::{Copier, Location};

/// What one pass did: copies moved, and copies a store refused to move (retried next pass).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub copies: usize,
    pub failed: usize,
}

/// The copies of `cluster` at `name` with a transition due at `now`, and the class each goes to.
pub fn due(
    records: &[BackupRecord],
    schedules: &[ScheduleRecord],
    name: &LocationName,
    now: DateTime<Utc>,
) -> Vec<(BackupRecord, String)> {
    records
        .iter()
        .filter_map(|record| {
            let copy = record.copies.get(name)?;
            if copy.state != CopyState::Copied {
                return None;
            }
            let taken = record
                .started_at
                .or(record.completed_at)?
                .with_timezone(&Utc);
            let rule = sexton_model::records::rule_for(schedules, record, name)?;
            let class = rule.transition_due(taken, now, copy.storage_class.as_deref())?;
            Some((record.clone(), class.to_string()))
        })
        .collect()
}

/// One pass over `cluster`'s copies at `name`. The caller holds the cluster's lock.
pub async fn pass(
    copier: &Copier,
    cluster: &ClusterName,
    name: &LocationName,
    location: &Location,
    schedules: &[ScheduleRecord],
) -> anyhow::Result<Moved> {
    let mut moved = Moved::default();
    // A class change is a copy of the object onto itself: on a bucket that locks (issue 29)
    // it writes a new, unlocked version and leaves the locked one paying in its old class.
    // Classes at such a location belong to the bucket's lifecycle rules.
    if location.locked {
        return Ok(moved);
    }
    let records: Vec<BackupRecord> = copier.views.current_records(cluster).await?;
    for (record, class) in due(&records, schedules, name, Utc::now()) {
        let copy = &record.copies[name];
        let mut failed = None;
        for object in &copy.objects {
            if let Err(err) = location
                .store
                .change_storage_class(&object.key, object.size, &class)
                .await
            {
                failed = Some(err);
                break;
            }
        }
        if let Some(err) = failed {
            tracing::warn!(%cluster, backup = %record.id, location = %name, class, error = %err, "copy not moved to its new storage class; the next pass tries again");
            moved.failed += 1;
            continue;
        }
        if record_class(copier, &record, name, &class).await? {
            tracing::info!(%cluster, backup = %record.id, location = %name, class, "copy moved to a colder storage class");
            moved.copies += 1;
        }
    }
    Ok(moved)
}

/// Records the copy's new class, if the record still holds the copy that was moved.
async fn record_class(
    copier: &Copier,
    moved: &BackupRecord,
    name: &LocationName,
    class: &str,
) -> anyhow::Result<bool> {
    for _ in 0..16 {
        let Some(entry) = copier.catalog.get(&moved.cluster, &moved.id).await? else {
            return Ok(false);
        };
        let mut record = entry.value;
        let Some(copy) = record.copies.get_mut(name) else {
            return Ok(false);
        };
        if record.uid != moved.uid
            || copy.state != CopyState::Copied
            || copy.objects != moved.copies[name].objects
        {
            return Ok(false);
        }
        copy.storage_class = Some(class.to_string());
        copy.transitioned_at = Some(Utc::now());
        record.keep_mark(entry.revision);
        match copier.catalog.update(&record, entry.revision).await {
            Ok(_) => return Ok(true),
            Err(CasError::Conflict) => continue,
            Err(CasError::Other(err)) => return Err(err),
        }
    }
    anyhow::bail!("the record of {} kept changing", moved.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> ScheduleRecord {
        serde_json::from_value(serde_json::json!({
            "name": "db", "cluster": "c1", "plan": "base", "cron": "0 3 * * *",
            "created_at": "2026-01-01T00:00:00Z",
            "policy": {"keep_last": 3},
            "copies": [{"to": "dr", "policy": {"keep_yearly": 7},
                        "transitions": [{"after_days": 30, "storage_class": "STANDARD_IA"}]}]
        }))
        .unwrap()
    }

    fn record(id: &str, started: &str, state: &str, class: Option<&str>) -> BackupRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "uid": "u", "cluster": "c1", "plan": "base", "backup_name": "db",
            "schedule": "db", "kind": "full", "status": "completed",
            "started_at": started, "completed_at": started,
            "copies": {"dr": {"state": state, "copied_at": started, "storage_class": class}}
        }))
        .unwrap()
    }

    #[test]
    fn only_counted_copies_of_a_rule_with_a_transition_due_move() {
        let dr = LocationName::new("dr").unwrap();
        let now: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().unwrap();
        let records = [
            record("old", "2026-01-01T00:00:00Z", "copied", None),
            record(
                "moved",
                "2026-01-01T00:00:00Z",
                "copied",
                Some("STANDARD_IA"),
            ),
            record("young", "2026-02-20T00:00:00Z", "copied", None),
            record("leaving", "2026-01-01T00:00:00Z", "expiring", None),
        ];
        let due = due(&records, &[schedule()], &dr, now);
        assert_eq!(
            due.iter()
                .map(|(r, class)| (r.id.as_str(), class.as_str()))
                .collect::<Vec<_>>(),
            [("old", "STANDARD_IA")]
        );
        // Without the schedule (or its rule), nothing moves.
        assert!(super::due(&records, &[], &dr, now).is_empty());
        let vault = LocationName::new("vault").unwrap();
        assert!(super::due(&records, &[schedule()], &vault, now).is_empty());
    }
}
