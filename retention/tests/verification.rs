//! Proven recovery points (issue 13): `keep_verified` keeps the newest N backups a restore
//! test proved, with what they build on, and the verified floor keeps the newest proven one
//! while no newer one is proven. A failed verification deletes nothing by itself; it only stops
//! the backup counting as proven. Missing backups (the scrub) are kept and never counted.

mod common;

use common::{catalog, deleted, full, incremental, kept, policy, reasons, run};
use sexton_retention::{BackupStatus, VerificationState};

fn verified(mut backup: sexton_retention::BackupRecord) -> sexton_retention::BackupRecord {
    backup.verification = VerificationState::Verified;
    backup
}

fn failed_verification(
    mut backup: sexton_retention::BackupRecord,
) -> sexton_retention::BackupRecord {
    backup.verification = VerificationState::Failed;
    backup
}

#[test]
fn the_newest_verified_backup_outlives_every_rule_until_a_newer_one_is_verified() {
    let now = "2024-06-01T00:00:00Z";
    let mut backups = vec![
        failed_verification(full("b5", "2024-05-31T00:00:00Z")),
        failed_verification(full("b4", "2024-05-30T00:00:00Z")),
        failed_verification(full("b3", "2024-05-29T00:00:00Z")),
        full("b2", "2024-05-28T00:00:00Z"),
        verified(full("b1", "2024-05-27T00:00:00Z")),
    ];
    let rules = policy(r#"{"keep_last": 2, "keep_verified": 1}"#);
    let plan = run(&catalog(backups.clone()), &rules, now);
    assert_eq!(kept(&plan), vec!["b5", "b4", "b1"]);
    assert_eq!(
        reasons(&plan, "b1"),
        vec!["keep_verified 1", "floor: newest verified"]
    );
    assert_eq!(deleted(&plan), vec!["b3", "b2"]);
    // Without keep_verified the floor alone keeps it.
    let plan = run(
        &catalog(backups.clone()),
        &policy(r#"{"keep_last": 2}"#),
        now,
    );
    assert_eq!(reasons(&plan, "b1"), vec!["floor: newest verified"]);
    // A newer backup verifies: the old proof goes.
    backups[0] = verified(full("b5", "2024-05-31T00:00:00Z"));
    let plan = run(&catalog(backups), &rules, now);
    assert_eq!(kept(&plan), vec!["b5", "b4"]);
    assert_eq!(
        reasons(&plan, "b5"),
        vec![
            "last snapshot",
            "floor: newest completed full backup",
            "keep_verified 1",
            "floor: newest verified"
        ]
    );
}

#[test]
fn keep_verified_counts_only_proven_backups_and_keeps_their_chains() {
    let backups = vec![
        full("f3", "2024-05-31T00:00:00Z"),
        verified(incremental("i2", "2024-05-30T00:00:00Z", "f1")),
        failed_verification(full("f2", "2024-05-29T12:00:00Z")),
        verified(full("f1", "2024-05-29T00:00:00Z")),
        verified(full("f0", "2024-05-28T00:00:00Z")),
    ];
    let plan = run(
        &catalog(backups),
        &policy(r#"{"keep_last": 1, "keep_verified": 2}"#),
        "2024-06-01T00:00:00Z",
    );
    // i2 and f1 are the newest two proven; f1 is also what i2 builds on. f2 failed its test.
    assert_eq!(kept(&plan), vec!["f3", "i2", "f1"]);
    assert_eq!(deleted(&plan), vec!["f2", "f0"]);
}

#[test]
fn a_backup_asked_to_be_deleted_is_not_the_verified_floor() {
    let mut newest = verified(full("b2", "2024-05-31T00:00:00Z"));
    newest.delete_requested = true;
    let backups = vec![
        newest,
        verified(full("b1", "2024-05-30T00:00:00Z")),
        full("b0", "2024-05-29T00:00:00Z"),
    ];
    let plan = run(
        &catalog(backups),
        &policy(r#"{"keep_last": 1}"#),
        "2024-06-01T00:00:00Z",
    );
    // The requested b2 is not counted: b1 is the last snapshot and the newest proven one.
    assert_eq!(
        reasons(&plan, "b1"),
        vec!["last snapshot", "floor: newest verified"]
    );
}

#[test]
fn a_missing_backup_is_kept_not_counted_and_goes_only_when_a_user_asks() {
    let mut missing = full("m", "2024-05-31T00:00:00Z");
    missing.status = BackupStatus::Missing;
    let backups = vec![
        missing.clone(),
        full("b2", "2024-05-30T00:00:00Z"),
        full("b1", "2024-05-29T00:00:00Z"),
    ];
    let rules = policy(r#"{"keep_last": 2}"#);
    let plan = run(&catalog(backups.clone()), &rules, "2024-06-01T00:00:00Z");
    // keep_last 2 counts b2 and b1: the missing newest does not take a place.
    assert_eq!(kept(&plan), vec!["m", "b2", "b1"]);
    assert!(
        reasons(&plan, "m")[0].starts_with("missing:"),
        "{:?}",
        reasons(&plan, "m")
    );
    missing.delete_requested = true;
    let plan = run(
        &catalog(vec![missing, backups[1].clone(), backups[2].clone()]),
        &rules,
        "2024-06-01T00:00:00Z",
    );
    assert_eq!(deleted(&plan), vec!["m"]);
    assert_eq!(reasons(&plan, "m"), vec!["missing", "delete requested"]);
}

#[test]
fn plan_files_give_verification_as_a_word_or_the_catalogs_object() {
    for entry in [
        r#""verification": "verified""#,
        r#""verification": {"state": "verified", "at": "2024-05-30T00:00:00Z", "history": []}"#,
    ] {
        let text = format!(
            r#"{{"backups": [
                {{"id": "new", "status": "completed", "completed_at": "2024-05-31T00:00:00Z"}},
                {{"id": "old", "status": "completed", "completed_at": "2024-05-01T00:00:00Z", {entry}}}
            ]}}"#
        );
        let catalog = sexton_retention::Catalog::from_json(&text).unwrap();
        let plan = run(
            &catalog,
            &policy(r#"{"keep_last": 1}"#),
            "2024-06-01T00:00:00Z",
        );
        assert_eq!(kept(&plan), vec!["new", "old"], "{entry}");
    }
    assert!(sexton_retention::Catalog::from_json(
        r#"{"backups": [{"id": "x", "status": "completed", "completed_at": "2024-05-31T00:00:00Z", "verification": "proven"}]}"#
    )
    .is_err());
}
