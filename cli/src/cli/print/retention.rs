//! What `retention preview` says above its table, group by group: a run the circuit breaker
//! holds, copies deleted early, what only Object Locks keep, backups restorable to their own
//! end only, and the recovery window after the plan.

use serde_json::Value;
use sexton_shared::api::PreviewGroup;

use crate::{client::decode_reply, failure::Failure};

/// The lines above the preview's table, each group's in turn.
pub(super) fn print_preview_notes(value: &Value) -> Result<(), Failure> {
    let groups: Vec<PreviewGroup> = decode_reply("retention.preview", value.clone())?;
    for group in groups {
        if let Some(breaker) = &group.breaker {
            crate::output::emit(&format!(
                "{}/{}: {}\n",
                group.cluster,
                group.plan,
                crate::safety::held_lines(breaker).join("\n  ")
            ));
        }
        if !group.early_deletions.is_empty() {
            crate::output::emit(&early_deletion_lines(&group));
        }
        if let Some(line) = locked_only_line(&group) {
            crate::output::emit(&line);
        }
        crate::output::emit(&own_range_lines(&group));
        if let Some(place) = &group.recovery {
            crate::output::emit(&crate::recovery::after_plan_line(
                group.cluster.as_str(),
                place,
            ));
        }
    }
    Ok(())
}

/// What a group keeps only for its Object Locks (issue 29), above the preview's table: the
/// cost of the locks beyond the policy.
fn locked_only_line(group: &PreviewGroup) -> Option<String> {
    let locked = group.locked_only.filter(|locked| locked.backups > 0)?;
    let at = group
        .location
        .as_ref()
        .map_or_else(String::new, |location| format!(" at {location}"));
    Some(format!(
        "{}/{}{at}: {} backup(s) the policy lets go are kept only by their Object Locks \
         (expired, locked until T), {} ({} bytes)\n",
        group.cluster,
        group.plan,
        locked.backups,
        crate::output::size(locked.bytes),
        locked.bytes
    ))
}

/// The kept backups of a group restorable to their own end only (issue 30), above the
/// preview's table: the binlog archive keeps their own ranges, not every segment after them.
fn own_range_lines(group: &PreviewGroup) -> String {
    let Some(plan) = &group.decision else {
        return String::new();
    };
    plan.binlog
        .range_only
        .iter()
        .map(|range| {
            format!(
                "{}/{}: {} is {} ({} binlog segment(s) kept for it)\n",
                group.cluster,
                group.plan,
                range.backup,
                range.reason,
                range.segments.len()
            )
        })
        .collect()
}

/// The copies a location's plan deletes before their class's minimum duration, with what that
/// costs: the days charged for nothing, per copy and in all.
fn early_deletion_lines(group: &PreviewGroup) -> String {
    let at = group
        .location
        .as_ref()
        .map_or_else(String::new, |location| format!(" at {location}"));
    let mut text = format!(
        "{}/{}{at}: {} copy(ies) deleted before their storage class's minimum duration:\n",
        group.cluster,
        group.plan,
        group.early_deletions.len()
    );
    let mut byte_days: u128 = 0;
    for early in &group.early_deletions {
        byte_days += u128::from(early.bytes) * u128::from(early.days_charged());
        text.push_str(&format!(
            "  {}: {} for {} of its {} days; {} more days of {} bytes charged\n",
            early.id,
            early.storage_class,
            early.days_in_class,
            early.minimum_days,
            early.days_charged(),
            early.bytes
        ));
    }
    text.push_str(&format!(
        "  in all {:.3} GiB-months charged for nothing\n",
        byte_days as f64 / (1u64 << 30) as f64 / 30.0
    ));
    text
}

#[cfg(test)]
mod tests {

    #[test]
    fn early_deletions_are_priced_per_copy_and_in_all() {
        let group: sexton_shared::api::PreviewGroup = serde_json::from_value(serde_json::json!({
            "cluster": "c1", "plan": "p", "location": "dr",
            "early_deletions": [{"id": "b1", "storage_class": "GLACIER_IR", "days_in_class": 10,
                                 "minimum_days": 90, "bytes": 1073741824u64}]
        }))
        .unwrap();
        assert_eq!(
            super::early_deletion_lines(&group),
            "c1/p at dr: 1 copy(ies) deleted before their storage class's minimum duration:\n  \
             b1: GLACIER_IR for 10 of its 90 days; 80 more days of 1073741824 bytes charged\n  \
             in all 2.667 GiB-months charged for nothing\n"
        );
    }

    #[test]
    fn backups_restorable_to_their_own_end_are_said_above_the_table() {
        let group: sexton_shared::api::PreviewGroup = serde_json::from_value(serde_json::json!({
            "cluster": "c1", "plan": "p",
            "decision": {"keep": [], "delete": [], "merges": [],
                         "binlog": {"horizon": null, "keep": ["s1"], "delete": [],
                                    "range_only": [{"backup": "b1",
                                                    "reason": "standalone: restorable to its own end only",
                                                    "segments": ["s1"]}]}}
        }))
        .unwrap();
        assert_eq!(
            super::own_range_lines(&group),
            "c1/p: b1 is standalone: restorable to its own end only (1 binlog segment(s) kept \
             for it)\n"
        );
        let none: sexton_shared::api::PreviewGroup =
            serde_json::from_value(serde_json::json!({"cluster": "c1", "plan": "p"})).unwrap();
        assert_eq!(super::own_range_lines(&none), "");
    }

    #[test]
    fn what_only_locks_keep_is_counted_and_priced() {
        let group: sexton_shared::api::PreviewGroup = serde_json::from_value(serde_json::json!({
            "cluster": "c1", "plan": "p",
            "locked_only": {"backups": 2, "bytes": 3221225472u64}
        }))
        .unwrap();
        assert_eq!(
            super::locked_only_line(&group).unwrap(),
            "c1/p: 2 backup(s) the policy lets go are kept only by their Object Locks (expired, \
             locked until T), 3.0GiB (3221225472 bytes)\n"
        );
        let none: sexton_shared::api::PreviewGroup =
            serde_json::from_value(serde_json::json!({"cluster": "c1", "plan": "p"})).unwrap();
        assert_eq!(super::locked_only_line(&none), None);
    }
}
