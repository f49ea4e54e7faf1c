//! Binlog (or WAL) garbage collection: the PITR horizon is the start of the oldest kept full
//! backup; a segment that ends before it can no longer be replayed onto any kept backup.
//! Conservative by construction: an unknown end, or no kept full, deletes nothing.

use std::collections::HashSet;

use chrono::{DateTime, FixedOffset};

use crate::catalog::{BackupStatus, Catalog};
use crate::error::PlanError;
use crate::flags::{status_of, FACT_FULL, KEEP_ANY};

pub(crate) type BinlogDecisions = (Option<(DateTime<FixedOffset>, u32)>, Vec<u32>, Vec<u32>);

/// The PITR horizon is the start of the oldest kept full backup; segments whose last event is
/// before it go, segments at or after it or of unknown end stay. No kept full: nothing goes.
pub(crate) fn plan_binlog(
    catalog: &Catalog,
    order: &[u32],
    flags: &[u32],
    warnings: &mut Vec<String>,
) -> Result<BinlogDecisions, PlanError> {
    let mut horizon: Option<(DateTime<FixedOffset>, u32)> = None;
    let mut unknown_start = None;
    for &index in order {
        let bits = flags[index as usize];
        let restorable = !matches!(
            status_of(bits),
            BackupStatus::Failed | BackupStatus::InProgress
        );
        if bits & KEEP_ANY == 0 || bits & FACT_FULL == 0 || !restorable {
            continue;
        }
        let backup = &catalog.backups[index as usize];
        match backup.started_at.or(backup.completed_at) {
            Some(start) => {
                if horizon.is_none_or(|(earliest, _)| start < earliest) {
                    horizon = Some((start, index));
                }
            }
            None => unknown_start = Some(index),
        }
    }
    if let Some(index) = unknown_start {
        warnings.push(format!(
            "backup {}: kept full backup has no start time; no binlog segment is deleted",
            catalog.backups[index as usize].id
        ));
        horizon = None;
    }

    let segments = &catalog.binlog_segments;
    let mut seen: HashSet<&str> = HashSet::with_capacity(segments.len());
    for segment in segments {
        if segment.key.is_empty() {
            return Err(PlanError::InvalidSegment {
                key: "\"\"".to_owned(),
                message: "key is empty".to_owned(),
            });
        }
        if !seen.insert(segment.key.as_str()) {
            return Err(PlanError::InvalidSegment {
                key: segment.key.clone(),
                message: "duplicate key".to_owned(),
            });
        }
        if let (Some(first), Some(last)) = (segment.first_event, segment.last_event) {
            if first > last {
                return Err(PlanError::InvalidSegment {
                    key: segment.key.clone(),
                    message: "first_event is after last_event".to_owned(),
                });
            }
        }
    }
    let mut segment_order: Vec<u32> = (0..segments.len() as u32).collect();
    segment_order.sort_by(|&a, &b| {
        let (a, b) = (&segments[a as usize], &segments[b as usize]);
        newest_first(a.last_event, b.last_event)
            .then_with(|| newest_first(a.first_event, b.first_event))
            .then_with(|| a.key.cmp(&b.key))
    });
    let mut keep = Vec::new();
    let mut delete = Vec::new();
    for index in segment_order {
        let segment = &segments[index as usize];
        let expired = match (horizon, segment.last_event) {
            (Some((horizon, _)), Some(last_event)) => last_event < horizon,
            _ => false,
        };
        if expired {
            delete.push(index);
        } else {
            keep.push(index);
        }
    }
    Ok((horizon, keep, delete))
}

/// Newest first, an unknown time counting as newer than any known one.
fn newest_first(
    a: Option<DateTime<FixedOffset>>,
    b: Option<DateTime<FixedOffset>>,
) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}
