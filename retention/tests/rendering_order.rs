//! The owned plan does not depend on how the catalog is stored (issue 17): `to_plan` renders a
//! catalog in time order straight into its lists and a shuffled one in buckets of positions,
//! and a catalog of tens of thousands of backups, several buckets, must come out the same
//! either way, decision for decision.

use chrono::{TimeDelta, TimeZone, Utc};
use sexton_retention::{
    evaluate, plan, BackupKind, BackupRecord, BackupStatus, Catalog, Plan, Policy,
};

const POLICY: &str = r#"{"keep_last": 10, "keep_hourly": 48, "keep_daily": 30, "keep_weekly": 12,
    "keep_monthly": 24, "keep_yearly": -1, "keep_within": "7d", "keep_tags": [["manual"]]}"#;

/// One backup every 5 minutes, a full at midnight, incrementals on the last good one, some
/// failed, a tagged one a week; oldest first.
fn catalog(n_backups: usize) -> Vec<BackupRecord> {
    const PER_DAY: usize = 288;
    let start = Utc.with_ymd_and_hms(2016, 1, 1, 0, 0, 0).unwrap();
    let mut last_good = None;
    (0..n_backups)
        .map(|slot| {
            let failed = slot % 97 == 13;
            let parent = if slot % PER_DAY == 0 { None } else { last_good };
            if !failed {
                last_good = Some(slot);
            }
            BackupRecord {
                id: format!("db1-{slot:08}"),
                completed_at: Some(
                    (start + TimeDelta::minutes(5 * slot as i64 + 4)).fixed_offset(),
                ),
                status: if failed {
                    BackupStatus::Failed
                } else {
                    BackupStatus::Completed
                },
                kind: if parent.is_some() {
                    BackupKind::Incremental
                } else {
                    BackupKind::Full
                },
                parent: parent.map(|parent| format!("db1-{parent:08}")),
                tags: if slot % (7 * PER_DAY) == 100 {
                    vec!["manual".to_owned()]
                } else {
                    Vec::new()
                },
                ..BackupRecord::default()
            }
        })
        .collect()
}

fn assert_same(expected: &Plan, actual: &Plan) {
    assert_eq!(expected.keep.len(), actual.keep.len());
    assert_eq!(expected.delete.len(), actual.delete.len());
    assert_eq!(expected, actual);
    assert_eq!(
        serde_json::to_string(expected).unwrap(),
        serde_json::to_string(actual).unwrap()
    );
}

#[test]
fn shuffled_reversed_and_sorted_catalogs_give_the_same_plan() {
    let n = 20_000;
    let policy = Policy::from_json(POLICY).unwrap();
    let now =
        Utc.with_ymd_and_hms(2016, 1, 1, 0, 0, 0).unwrap() + TimeDelta::minutes(5 * n as i64 + 5);
    let sorted = Catalog {
        backups: catalog(n),
        binlog_segments: Vec::new(),
    };
    let expected = plan(&sorted, &policy, now).unwrap();
    assert!(expected.keep.len() > 100 && expected.delete.len() > 1_000);

    let mut reversed = sorted.clone();
    reversed.backups.reverse();
    assert_same(&expected, &plan(&reversed, &policy, now).unwrap());

    // A fixed shuffle (xorshift), as a key-value listing by id returns the records.
    let mut shuffled = sorted.clone();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        shuffled.backups.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let reordered = plan(&shuffled, &policy, now).unwrap();
    assert_same(&expected, &reordered);

    // And one decision at a time, by index, says the same as the rendered lists.
    let evaluation = evaluate(&shuffled, &policy, now).unwrap();
    for (position, index) in evaluation.newest_first().enumerate().step_by(997) {
        let decision = evaluation.decision_at(index);
        let (_, listed) = reordered.decision(&decision.id).unwrap();
        assert_eq!(&decision, listed, "position {position}");
    }
}
