//! The retention engine's input, made from the catalog's values: the one place a
//! [`BackupRecord`] (at primary, or as its copy at a location), a copy's state and the binlog
//! index become the engine's `BackupRecord`, `BinlogSegment` and `Catalog`, and the judgement's
//! `Member` and `Asked`.
//!
//! A value adaptation only: nothing here plans, judges or reads the clock. What runs the engine
//! over these forms is `sexton_shared::planning` (and `guard`, `recovery`) and the services;
//! they all build their groups from these functions, so every place that decides sees a record
//! in the same form. The engine cannot do it itself: it knows nothing of the catalog's records.

use sexton_retention::judge;

use crate::binlog::{BinlogIndex, IndexSegment};
use crate::copies::CopyState;
use crate::names::LocationName;
use crate::records::{BackupRecord, BackupStatus, VerificationState};

impl BackupRecord {
    /// The retention engine's view of this record.
    pub fn to_engine(&self) -> sexton_retention::BackupRecord {
        sexton_retention::BackupRecord {
            id: self.id.to_string(),
            completed_at: self.completed_at,
            started_at: self.started_at,
            status: self.status,
            kind: self.kind,
            parent: self.parent.as_ref().map(|p| p.to_string()),
            tags: self.tags.clone(),
            legal_hold: self.legal_hold,
            holds: self.holds_with_copies(),
            immutable: self.immutable,
            delete_requested: self.delete_requested || self.delete_request.is_some(),
            locked_until: self.locked_until,
            volumes: self.volumes.clone(),
            verification: self
                .verification
                .as_ref()
                .map_or(VerificationState::Unverified, |v| v.state),
            log_range: self.log_range.clone(),
            differential: self.differential,
        }
    }

    /// The retention engine's view of this backup's copy at `location`, if the location holds
    /// one or awaits one: the source's id, times, kind, parent, tags, volumes and verification
    /// (a copy is the same bytes, checked against intake's digests), the record's holds, and
    /// the status of the copy there. A copy awaited (the location is in `copy_to`, no copy
    /// yet) is `in-progress` there: never counted, never deleted, and its ancestors' copies
    /// are kept for it, so a location never lets a parent go that a copy on its way needs.
    /// Not the holds that only the source carries (copies awaited), nor a user's delete
    /// request (it asks for the backup at its source).
    pub fn to_engine_at(&self, location: &LocationName) -> Option<sexton_retention::BackupRecord> {
        let delete_requested = self
            .copies
            .get(location)
            .is_some_and(|copy| copy.delete_requested_at.is_some());
        let status = match self.copies.get(location) {
            Some(copy) => copy.state.engine_status()?,
            None if self.copy_to.contains(location) && self.held_at_primary() => {
                BackupStatus::InProgress
            }
            None => return None,
        };
        let mut volumes = self.volumes.clone();
        for volume in &mut volumes {
            volume.expiring = false;
        }
        Some(sexton_retention::BackupRecord {
            id: self.id.to_string(),
            completed_at: self.completed_at,
            started_at: self.started_at,
            status,
            kind: self.kind,
            parent: self.parent.as_ref().map(|p| p.to_string()),
            tags: self.tags.clone(),
            legal_hold: self.legal_hold,
            holds: self.holds.clone(),
            immutable: self.immutable,
            delete_requested,
            locked_until: self.copies.get(location).and_then(|copy| copy.locked_until),
            volumes,
            verification: self
                .verification
                .as_ref()
                .map_or(VerificationState::Unverified, |v| v.state),
            log_range: self.log_range.clone(),
            differential: self.differential,
        })
    }

    /// The judgement's view of this record at primary: the engine's, and the status it had
    /// before its mark.
    pub fn to_member(&self) -> judge::Member {
        judge::Member {
            record: self.to_engine(),
            expired_from: self.expired_from,
        }
    }

    /// The judgement's view of this backup's copy at `location` ([`BackupRecord::to_engine_at`]):
    /// a copy's mark has no earlier status to restore.
    pub fn to_member_at(&self, location: &LocationName) -> Option<judge::Member> {
        Some(judge::Member {
            record: self.to_engine_at(location)?,
            expired_from: None,
        })
    }

    /// How this record's deletion was asked for: its user's request, else retention's mark.
    pub fn delete_asked(&self) -> judge::Asked {
        match &self.delete_request {
            Some(request) if request.force => judge::Asked::ForcedUser,
            Some(_) => judge::Asked::User,
            None if self.delete_requested => judge::Asked::User,
            None => judge::Asked::Retention,
        }
    }

    /// Only what [`judge::protection`] reads (id, status, legal hold, the record's own holds):
    /// asked of every record of a group, so it copies no more.
    pub fn to_protection_form(&self) -> sexton_retention::BackupRecord {
        sexton_retention::BackupRecord {
            id: self.id.to_string(),
            status: self.status,
            legal_hold: self.legal_hold,
            holds: self.holds.clone(),
            ..sexton_retention::BackupRecord::default()
        }
    }
}

impl CopyState {
    /// The status the retention engine sees for a copy in this state; `None` once deleted
    /// (the location's groups hold it no more).
    pub fn engine_status(self) -> Option<sexton_retention::BackupStatus> {
        match self {
            CopyState::Copied => Some(sexton_retention::BackupStatus::Completed),
            CopyState::Expiring => Some(sexton_retention::BackupStatus::Expiring),
            CopyState::Deleting => Some(sexton_retention::BackupStatus::Deleting),
            CopyState::Deleted | CopyState::Skipped => None,
            CopyState::Missing => Some(sexton_retention::BackupStatus::Missing),
        }
    }
}

impl IndexSegment {
    /// The retention engine's view of this segment.
    pub fn to_engine(&self) -> sexton_retention::BinlogSegment {
        sexton_retention::BinlogSegment {
            key: self.key.clone(),
            first_event: self.first_event,
            last_event: self.last_event,
        }
    }
}

impl BinlogIndex {
    /// The engine's view of every segment the index lists, in its order.
    pub fn to_engine(&self) -> Vec<sexton_retention::BinlogSegment> {
        self.segments.iter().map(IndexSegment::to_engine).collect()
    }
}

/// `records` (a group's, at primary) as the engine's catalog, without binlog segments.
pub fn catalog(records: &[&BackupRecord]) -> sexton_retention::Catalog {
    sexton_retention::Catalog {
        backups: records.iter().map(|r| r.to_engine()).collect(),
        binlog_segments: Vec::new(),
    }
}

/// The copies at `location` of `records` (a group's) as the engine's catalog there
/// ([`BackupRecord::to_engine_at`]), without binlog segments.
pub fn catalog_at(records: &[&BackupRecord], location: &LocationName) -> sexton_retention::Catalog {
    sexton_retention::Catalog {
        backups: records
            .iter()
            .filter_map(|r| r.to_engine_at(location))
            .collect(),
        binlog_segments: Vec::new(),
    }
}

/// A group's copies at `location` as they will be once every copy awaited there is made: what
/// the location holds, and each completed backup still awaiting its copy there counted as
/// copied (the view a `select: kept` copy rule is judged over).
pub fn view_with_awaited_at(
    group: &[&BackupRecord],
    location: &LocationName,
) -> Vec<sexton_retention::BackupRecord> {
    group
        .iter()
        .filter_map(|record| {
            let mut engine = record.to_engine_at(location)?;
            let awaited = record.awaiting_copy().any(|awaited| awaited == location);
            if awaited && record.status == BackupStatus::Completed {
                engine.status = sexton_retention::BackupStatus::Completed;
            }
            Some(engine)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_seen_at_its_location_in_its_own_state() {
        let dr = LocationName::new("dr").unwrap();
        let mut record: BackupRecord = serde_json::from_value(serde_json::json!({
            "id": "b1", "uid": "u1", "cluster": "c1", "plan": "p", "backup_name": "s",
            "kind": "full", "status": "expiring", "holds": ["case-7"],
            "completed_at": "2026-01-01T00:00:00Z", "delete_requested": true,
        }))
        .unwrap();
        assert_eq!(record.to_engine_at(&dr), None, "not copied, not awaited");
        record.copy_to = vec![dr.clone()];
        let awaited = record.to_engine_at(&dr).unwrap();
        assert_eq!(awaited.status, BackupStatus::InProgress);
        assert_eq!(
            record.holds_with_copies(),
            ["case-7", "awaiting copy to dr"]
        );
        // Copied: completed there whatever the source's status, the record's own holds and
        // not the source's wait, no user request.
        record.copies.insert(
            dr.clone(),
            serde_json::from_value(serde_json::json!({
                "state": "copied", "copied_at": "2026-01-01T01:00:00Z"
            }))
            .unwrap(),
        );
        let copy = record.to_engine_at(&dr).unwrap();
        assert_eq!(copy.status, BackupStatus::Completed);
        assert_eq!(copy.holds, ["case-7"]);
        assert!(!copy.delete_requested);
        assert!(record.held_elsewhere());
        for (state, seen) in [
            (
                crate::copies::CopyState::Expiring,
                Some(BackupStatus::Expiring),
            ),
            (
                crate::copies::CopyState::Deleting,
                Some(BackupStatus::Deleting),
            ),
            (crate::copies::CopyState::Deleted, None),
        ] {
            record.copies.get_mut(&dr).unwrap().state = state;
            assert_eq!(
                record.to_engine_at(&dr).map(|e| e.status),
                seen,
                "{state:?}"
            );
        }
        assert!(!record.held_elsewhere(), "a deleted copy holds nothing");
        assert!(
            record.awaiting_copy().next().is_none(),
            "served, not awaited"
        );
        assert_eq!(record.status_text(), "expiring");
        record.primary_deleted_at = Some("2026-01-03T00:00:00Z".parse().unwrap());
        assert_eq!(record.status_text(), "copies-only");
    }
}
