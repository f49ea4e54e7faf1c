//! barman's own retention tests, restated as Sexton plans (issue 30).
//!
//! Origin: EnterpriseDB/barman, `tests/test_retention_policies.py` (GPL-3.0-or-later), the
//! classes `TestRedundancyRetentionPolicyWithKeepAnnotation` and
//! `TestRecoveryWindowRetentionPolicyWithKeepAnnotation`. Only the cases are taken (which
//! backups exist, the policy, which barman reports VALID, KEEP:*, OBSOLETE* or OBSOLETE); the
//! code is ours. barman's `REDUNDANCY N` is `keep_full N` (its backups are fulls), `RECOVERY
//! WINDOW OF 4 WEEKS` is `recovery_window: 4w`, `minimum_redundancy` is the same, and a
//! `keep:standalone` / `keep:full` annotation is a hold `standalone:<why>` / any other hold.
//! barman keeps VALID, KEEP:* and OBSOLETE* (potentially obsolete: kept by the minimum
//! redundancy) backups, and deletes OBSOLETE ones.

mod common;

use chrono::Duration;
use common::{at, catalog, deleted, kept, policy, run};
use sexton_retention::BackupRecord;

const NOW: &str = "2024-06-01T00:00:00Z";

fn full(id: &str, weeks_ago: i64) -> BackupRecord {
    BackupRecord::completed_full(id, at(NOW) - Duration::weeks(weeks_ago))
}

fn with_hold(mut backups: Vec<BackupRecord>, id: &str, hold: &str) -> Vec<BackupRecord> {
    backups
        .iter_mut()
        .find(|b| b.id == id)
        .unwrap()
        .holds
        .push(hold.to_owned());
    backups
}

/// `REDUNDANCY 2`, `minimum_redundancy = 1`, three backups (barman orders them by id; here
/// a minute apart in that order).
fn redundancy_backups() -> Vec<BackupRecord> {
    let at_minute = |id: &str, minute: i64| {
        BackupRecord::completed_full(id, at(NOW) - Duration::minutes(10 - minute))
    };
    vec![
        at_minute("test_backup3", 3),
        at_minute("test_backup2", 2),
        at_minute("test_backup", 1),
    ]
}

#[test]
fn redundancy_with_keep_annotations() {
    let rules = policy(r#"{"keep_full": 2, "minimum_redundancy": 1}"#);
    // No annotation (test_redundancy_report): the oldest is OBSOLETE.
    let plan = run(&catalog(redundancy_backups()), &rules, NOW);
    assert_eq!(deleted(&plan), vec!["test_backup"]);
    // keep:standalone / keep:full within policy: the same, the newest being the kept one.
    for hold in ["standalone:a", "keep:a"] {
        let backups = with_hold(redundancy_backups(), "test_backup3", hold);
        let plan = run(&catalog(backups), &rules, NOW);
        assert_eq!(deleted(&plan), vec!["test_backup"], "{hold}");
    }
    // Out of policy: the annotated oldest stays, the two newest stay VALID.
    for hold in ["standalone:a", "keep:a"] {
        let backups = with_hold(redundancy_backups(), "test_backup", hold);
        let plan = run(&catalog(backups), &rules, NOW);
        assert!(deleted(&plan).is_empty(), "{hold}");
    }
}

/// `RECOVERY WINDOW OF 4 WEEKS`, `minimum_redundancy = 3`: backups now and 5, 6 and 7 weeks
/// ago. barman: test_backup4 and test_backup3 VALID (the window, and the backup a recovery to
/// its start needs), test_backup2 OBSOLETE* (kept for the minimum redundancy), test_backup
/// OBSOLETE.
fn window_backups() -> Vec<BackupRecord> {
    vec![
        full("test_backup4", 0),
        full("test_backup3", 5),
        full("test_backup2", 6),
        full("test_backup", 7),
    ]
}

#[test]
fn recovery_window_with_keep_annotations_and_minimum_redundancy() {
    let rules = policy(r#"{"recovery_window": "4w", "minimum_redundancy": 3}"#);
    let plan = run(&catalog(window_backups()), &rules, NOW);
    assert_eq!(
        kept(&plan),
        vec!["test_backup4", "test_backup3", "test_backup2"]
    );
    assert_eq!(deleted(&plan), vec!["test_backup"]);
    // test_keep_*_within_policy: the newest annotated, the same report.
    for hold in ["standalone:a", "keep:a"] {
        let plan = run(
            &catalog(with_hold(window_backups(), "test_backup4", hold)),
            &rules,
            NOW,
        );
        assert_eq!(deleted(&plan), vec!["test_backup"], "{hold}");
    }
    // test_keep_*_out_of_policy: the oldest annotated stays, and test_backup2 still stays
    // for the minimum redundancy (an old kept backup does not stand in for a newer one).
    for hold in ["standalone:a", "keep:a"] {
        let plan = run(
            &catalog(with_hold(window_backups(), "test_backup", hold)),
            &rules,
            NOW,
        );
        assert!(deleted(&plan).is_empty(), "{hold}: {:?}", deleted(&plan));
    }
    // test_keep_*_minimum_redundancy: test_backup2 annotated; test_backup OBSOLETE.
    for hold in ["standalone:a", "keep:a"] {
        let plan = run(
            &catalog(with_hold(window_backups(), "test_backup2", hold)),
            &rules,
            NOW,
        );
        assert_eq!(deleted(&plan), vec!["test_backup"], "{hold}");
    }
}
