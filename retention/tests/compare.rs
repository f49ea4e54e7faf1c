//! `compare_policies`: what replacing one policy with another deletes at once, keeps more, or
//! trims per volume, checked case by case through one helper.

mod common;

use common::*;
use sexton_retention::{compare_policies, BackupRecord, Catalog, VolumeArtifact};

/// Five daily fulls, newest last in the list.
fn five_days() -> Catalog {
    catalog(
        (1..=5)
            .map(|day| full(&format!("d{day}"), &format!("2026-03-0{day}T03:00:00Z")))
            .collect(),
    )
}

/// Compares `current` with `proposed` at `now` and checks the ids each list names and the
/// whole-keep counts.
fn check(
    catalog: &Catalog,
    current: &str,
    proposed: &str,
    now: &str,
    expected_deleted: &[&str],
    expected_kept: &[&str],
    expected_counts: (usize, usize),
) {
    let change = compare_policies(catalog, &policy(current), &policy(proposed), utc(now))
        .unwrap_or_else(|error| panic!("{current} -> {proposed}: {error}"));
    let ids = |list: &[sexton_retention::ChangedBackup]| {
        list.iter().map(|c| c.id.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&change.deleted),
        expected_deleted,
        "{current} -> {proposed}: deleted"
    );
    assert_eq!(
        ids(&change.kept),
        expected_kept,
        "{current} -> {proposed}: kept"
    );
    assert_eq!(
        (change.n_keep_current, change.n_keep_proposed),
        expected_counts,
        "{current} -> {proposed}: counts"
    );
    assert_eq!(
        change.narrows(),
        !expected_deleted.is_empty(),
        "{current} -> {proposed}"
    );
}

#[test]
fn narrowing_widening_and_equal_policies() {
    let backups = five_days();
    let now = "2026-03-05T12:00:00Z";
    // Narrowing: the two oldest of the four go, newest first.
    check(
        &backups,
        r#"{"keep_last": 4}"#,
        r#"{"keep_last": 2}"#,
        now,
        &["d3", "d2"],
        &[],
        (4, 2),
    );
    // Widening: what the current policy lets go, the proposed one keeps.
    check(
        &backups,
        r#"{"keep_last": 2}"#,
        r#"{"keep_last": 4}"#,
        now,
        &[],
        &["d3", "d2"],
        (2, 4),
    );
    // A different rule that keeps the same backups changes nothing.
    check(
        &backups,
        r#"{"keep_last": 3}"#,
        r#"{"keep_daily": 3}"#,
        now,
        &[],
        &[],
        (3, 3),
    );
    // The floor keeps the newest full whatever the proposed window says.
    check(
        &backups,
        r#"{"keep_last": 2}"#,
        r#"{"retention_duration": 1}"#,
        "2026-03-09T12:00:00Z",
        &["d4"],
        &[],
        (2, 1),
    );
}

#[test]
fn reasons_of_both_plans_come_with_a_deleted_backup() {
    let change = compare_policies(
        &five_days(),
        &policy(r#"{"keep_last": 3}"#),
        &policy(r#"{"keep_last": 1}"#),
        utc("2026-03-05T12:00:00Z"),
    )
    .unwrap();
    let d4 = &change.deleted[0];
    assert_eq!(d4.id, "d4");
    assert_eq!(d4.current_reasons, ["last snapshot"]);
    assert_eq!(d4.proposed_reasons, ["no rule keeps it"]);
}

#[test]
fn a_volume_only_the_proposed_policy_deletes_is_named() {
    // pv1 is incremental on d1 in d2 and d3; pv2 is a full in each. Keeping the newest only,
    // d2's pv1 is still needed by d3, its pv2 is not; keeping two, d2 stays whole.
    let vol_full = |name: &str| VolumeArtifact::full(name, vec![format!("k/{name}")]);
    let backup = |id: &str, day: u32, pv1_parent: Option<&str>| BackupRecord {
        volumes: vec![
            match pv1_parent {
                Some(parent) => VolumeArtifact::incremental("pv1", parent, vec!["k".into()]),
                None => vol_full("pv1"),
            },
            vol_full("pv2"),
        ],
        ..full(id, &format!("2026-03-0{day}T03:00:00Z"))
    };
    let backups = catalog(vec![
        backup("d1", 1, None),
        backup("d2", 2, Some("d1")),
        backup("d3", 3, Some("d2")),
    ]);
    let change = compare_policies(
        &backups,
        &policy(r#"{"keep_last": 2}"#),
        &policy(r#"{"keep_last": 1}"#),
        utc("2026-03-03T12:00:00Z"),
    )
    .unwrap();
    assert!(change.deleted.is_empty(), "{change:?}");
    assert_eq!(change.volumes_deleted.len(), 1, "{change:?}");
    assert_eq!(
        (
            change.volumes_deleted[0].id.as_str(),
            change.volumes_deleted[0].volume.as_str()
        ),
        ("d2", "pv2")
    );
    assert!(change.narrows());
}
