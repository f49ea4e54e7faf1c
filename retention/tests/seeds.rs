//! The seeds' scenarios, end to end through `plan`: Karbor's max_backups and
//! retention_duration (seed 000), Trilio's chains, merges, deferred deletes, errored and
//! immutable backups (seed 001), cloudnative-mysql's recovery window, floor and binlog
//! garbage collection (seed 003).

mod common;

use common::{
    at, catalog, daily_chain, deleted, full, incremental, kept, policy, reasons, run, segment,
};
use sexton_retention::{BackupKind, BackupRecord, Catalog, Merge, Policy};

// Seed 000: Karbor.

/// Twenty daily backups at 02:00; "now" is day 20 at 03:00.
fn karbor_catalog() -> Catalog {
    catalog(
        (1..=20)
            .map(|day| full(&format!("cp{day}"), &format!("2024-03-{day:02}T02:00:00Z")))
            .collect(),
    )
}

const KARBOR_NOW: &str = "2024-03-20T03:00:00Z";

#[test]
fn karbor_max_backups_three_keeps_the_three_newest() {
    let plan = run(
        &karbor_catalog(),
        &policy(r#"{"max_backups": "3"}"#),
        KARBOR_NOW,
    );
    assert_eq!(kept(&plan), vec!["cp20", "cp19", "cp18"]);
    assert_eq!(plan.delete.len(), 17);
    assert_eq!(reasons(&plan, "cp18"), vec!["last snapshot"]);
    assert_eq!(reasons(&plan, "cp17"), vec!["no rule keeps it"]);
}

#[test]
fn karbor_retention_duration_ten_days_keeps_what_is_at_most_ten_days_old() {
    let plan = run(
        &karbor_catalog(),
        &policy(r#"{"retention_duration": "10"}"#),
        KARBOR_NOW,
    );
    // cp11 is 9 days 1 hour old, cp10 is 10 days 1 hour old.
    assert_eq!(kept(&plan).len(), 10);
    assert_eq!(kept(&plan).last(), Some(&"cp11"));
    assert_eq!(reasons(&plan, "cp11"), vec!["retention_duration 10d"]);
    assert_eq!(deleted(&plan).first(), Some(&"cp10"));
}

#[test]
fn karbor_both_parameters_keep_the_union() {
    // Karbor deletes what either parameter rejects; Sexton keeps what either rule keeps.
    let plan = run(
        &karbor_catalog(),
        &policy(r#"{"max_backups": 3, "retention_duration": 10}"#),
        KARBOR_NOW,
    );
    assert_eq!(kept(&plan).len(), 10);
    assert_eq!(
        reasons(&plan, "cp20"),
        vec![
            "last snapshot",
            "retention_duration 10d",
            "floor: newest completed full backup"
        ]
    );
    // With max_backups 12 the count rule reaches further back than ten days.
    let plan = run(
        &karbor_catalog(),
        &policy(r#"{"max_backups": "12", "retention_duration": "10"}"#),
        KARBOR_NOW,
    );
    assert_eq!(kept(&plan).len(), 12);
    assert_eq!(reasons(&plan, "cp9"), vec!["last snapshot"]);
}

#[test]
fn karbor_retention_never_deletes_the_last_backup_of_a_stopped_schedule() {
    // The schedule stopped a month ago: Karbor would delete every checkpoint.
    let plan = run(
        &karbor_catalog(),
        &policy(r#"{"retention_duration": "10"}"#),
        "2024-04-20T00:00:00Z",
    );
    assert_eq!(kept(&plan), vec!["cp20"]);
    assert_eq!(
        reasons(&plan, "cp20"),
        vec!["floor: newest completed full backup"]
    );
}

// Seed 001: Trilio.

const TRILIO_NOW: &str = "2024-02-01T00:00:00Z";

fn merge(chain: &str, target: &str, sources: &[&str], new_parent: Option<&str>) -> Merge {
    Merge {
        chain: chain.to_owned(),
        target: target.to_owned(),
        sources: sources.iter().map(|s| (*s).to_owned()).collect(),
        new_parent: new_parent.map(str::to_owned),
    }
}

fn merge_mode(json: &str) -> Policy {
    let mut policy = policy(json);
    policy.chain_mode = sexton_retention::ChainMode::Merge;
    policy
}

/// What the scheduler records when the executor reports a merge done.
fn apply_merge(catalog: &mut Catalog, merge: &Merge) {
    let target = catalog
        .backups
        .iter_mut()
        .find(|b| b.id == merge.target)
        .unwrap();
    target.parent = merge.new_parent.clone();
    if merge.new_parent.is_none() {
        target.kind = BackupKind::Full;
    }
}

#[test]
fn trilio_keep_three_forever_incremental_keeps_the_chain() {
    let catalog = catalog(daily_chain("F I I I"));
    let plan = run(&catalog, &Policy::keep_last(3), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d4", "d3", "d2", "d1"]);
    assert!(plan.delete.is_empty());
    // d1 is the only full: the floor keeps it, and d2 needs it anyway.
    assert_eq!(
        reasons(&plan, "d1"),
        vec!["floor: newest completed full backup"]
    );
    assert!(plan.merges.is_empty());
}

#[test]
fn trilio_keep_three_forever_incremental_merges_day_one_into_day_two() {
    let mut catalog = catalog(daily_chain("F I I I"));
    let policy = merge_mode(r#"{"keep_last": 3}"#);
    let plan = run(&catalog, &policy, TRILIO_NOW);
    assert_eq!(plan.merges, vec![merge("d1", "d2", &["d1"], None)]);
    // Until the merge is reported, d1 stays.
    assert_eq!(kept(&plan), vec!["d4", "d3", "d2", "d1"]);
    assert_eq!(reasons(&plan, "d1"), vec!["merge into d2 pending"]);

    // The executor reports the merge: d2 is now a synthetic full and d1 can go.
    apply_merge(&mut catalog, &plan.merges[0]);
    let plan = run(&catalog, &policy, TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d4", "d3", "d2"]);
    assert_eq!(deleted(&plan), vec!["d1"]);
    assert!(plan.merges.is_empty());
    assert_eq!(
        reasons(&plan, "d2"),
        vec!["last snapshot", "floor: newest completed full backup"]
    );

    // Day 5: the next merge folds d2 into d3.
    catalog
        .backups
        .push(incremental("d5", "2024-01-05T02:00:00Z", "d4"));
    catalog.backups.retain(|b| b.id != "d1");
    let plan = run(&catalog, &policy, TRILIO_NOW);
    assert_eq!(plan.merges, vec![merge("d2", "d3", &["d2"], None)]);
}

#[test]
fn trilio_keep_three_with_a_full_every_two_backups() {
    let catalog = catalog(daily_chain("F I F I F"));
    let plan = run(&catalog, &Policy::keep_last(3), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d5", "d4", "d3"]);
    assert_eq!(deleted(&plan), vec!["d2", "d1"]);
    let plan = run(&catalog, &merge_mode(r#"{"keep_last": 3}"#), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d5", "d4", "d3"]);
    assert!(plan.merges.is_empty());
}

#[test]
fn trilio_keep_three_with_a_full_every_three_backups() {
    // F ← I ← I  F ← I: keeping d5, d4 and d3 needs d3's whole chain.
    let catalog = catalog(daily_chain("F I I F I"));
    let plan = run(&catalog, &Policy::keep_last(3), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d5", "d4", "d3", "d2", "d1"]);
    assert_eq!(reasons(&plan, "d2"), vec!["needed by d3"]);
    assert_eq!(reasons(&plan, "d1"), vec!["needed by d3"]);
    let plan = run(&catalog, &merge_mode(r#"{"keep_last": 3}"#), TRILIO_NOW);
    assert_eq!(plan.merges, vec![merge("d1", "d3", &["d1", "d2"], None)]);
    assert_eq!(reasons(&plan, "d1"), vec!["merge into d3 pending"]);
}

#[test]
fn trilio_an_errored_backup_counts_for_nothing_and_joins_no_chain() {
    // d3 failed; d4 was taken against d2, the last good backup.
    let catalog = catalog(daily_chain("F I X I I"));
    let plan = run(&catalog, &Policy::keep_last(3), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d5", "d4", "d2", "d1"]);
    assert_eq!(deleted(&plan), vec!["d3"]);
    assert_eq!(reasons(&plan, "d3"), vec!["failed"]);
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);

    let plan = run(&catalog, &merge_mode(r#"{"keep_last": 3}"#), TRILIO_NOW);
    assert_eq!(plan.merges, vec![merge("d1", "d2", &["d1"], None)]);

    // Within the grace period the failed backup's artifacts are left alone.
    let plan = run(&catalog, &Policy::keep_last(3), "2024-01-03T02:30:00Z");
    assert_eq!(reasons(&plan, "d3"), vec!["failed, within grace 1h"]);
}

#[test]
fn trilio_a_deleted_backup_that_others_need_is_deferred_then_deleted() {
    let mut backups = daily_chain("F I I I F");
    backups[0].delete_requested = true;
    let mut catalog = catalog(backups);
    let plan = run(&catalog, &Policy::keep_last(4), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d5", "d4", "d3", "d2", "d1"]);
    assert_eq!(
        reasons(&plan, "d1"),
        vec!["needed by d2", "delete requested, deferred"]
    );

    // Once nothing kept needs it, the requested delete goes through.
    catalog.backups.push(full("d6", "2024-01-06T02:00:00Z"));
    let plan = run(&catalog, &Policy::keep_last(2), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d6", "d5"]);
    assert_eq!(reasons(&plan, "d1"), vec!["delete requested"]);
    assert_eq!(reasons(&plan, "d2"), vec!["no rule keeps it"]);
}

#[test]
fn trilio_a_deleted_first_backup_is_consolidated_into_the_next() {
    // Seed 001: the user deletes day 1; with retention four, day 2 is committed into day 1
    // (a merge of d1 into d2), then d1 goes.
    let mut backups = daily_chain("F I I I");
    backups[0].delete_requested = true;
    let catalog = catalog(backups);
    let plan = run(&catalog, &merge_mode(r#"{"keep_last": 4}"#), TRILIO_NOW);
    assert_eq!(plan.merges, vec![merge("d1", "d2", &["d1"], None)]);
    assert_eq!(
        reasons(&plan, "d1"),
        vec!["merge into d2 pending", "delete requested, deferred"]
    );
}

fn immutable_chains() -> Catalog {
    let mut backups = daily_chain("F I I F I I");
    for backup in &mut backups {
        backup.immutable = true;
    }
    catalog(backups)
}

#[test]
fn trilio_immutable_chains_expire_together_and_only_lose_their_records() {
    let catalog = immutable_chains();
    let plan = run(&catalog, &Policy::keep_last(2), TRILIO_NOW);
    assert_eq!(kept(&plan), vec!["d6", "d5", "d4"]);
    assert_eq!(deleted(&plan), vec!["d3", "d2", "d1"]);
    for decision in &plan.delete {
        assert!(
            !decision.remove_objects,
            "{} keeps its objects",
            decision.id
        );
        assert_eq!(
            decision.reasons,
            vec!["no rule keeps it", "immutable: catalog record only"]
        );
    }
    assert_eq!(plan.summary().n_delete_record_only, 3);

    // While the first chain's last incremental is kept, the whole chain is.
    let plan = run(&catalog, &Policy::keep_last(4), TRILIO_NOW);
    assert_eq!(kept(&plan).len(), 6);
    assert_eq!(reasons(&plan, "d1"), vec!["immutable chain kept with d3"]);
}

#[test]
fn trilio_immutable_chain_keeps_members_newer_than_a_kept_one() {
    let mut catalog = immutable_chains();
    catalog.backups[1].tags = vec!["audit".to_owned()];
    let plan = run(
        &catalog,
        &policy(r#"{"keep_last": 1, "keep_tags": [["audit"]]}"#),
        TRILIO_NOW,
    );
    assert_eq!(kept(&plan).len(), 6);
    assert_eq!(reasons(&plan, "d2"), vec!["has tags [audit]"]);
    assert_eq!(reasons(&plan, "d3"), vec!["immutable chain kept with d2"]);
    assert_eq!(reasons(&plan, "d1"), vec!["immutable chain kept with d2"]);
    // Immutable objects cannot be rewritten: no merge either.
    let mut merging = policy(r#"{"keep_last": 1, "keep_tags": [["audit"]]}"#);
    merging.chain_mode = sexton_retention::ChainMode::Merge;
    assert!(run(&catalog, &merging, TRILIO_NOW).merges.is_empty());
}

// Seed 003: cloudnative-mysql.

/// Base backups every day at 00:00 (started 23:30 the day before) from January 1, and a binlog
/// segment per day.
fn mysql_catalog(n_days: u32) -> Catalog {
    let start = at("2024-01-01T00:00:00Z");
    let mut catalog = Catalog::default();
    for day in 0..n_days {
        let completed = start + chrono::TimeDelta::days(i64::from(day));
        catalog.backups.push(BackupRecord {
            started_at: Some(completed - chrono::TimeDelta::minutes(30)),
            ..BackupRecord::completed_full(format!("base-{day:03}"), completed)
        });
        let first = completed - chrono::TimeDelta::hours(1);
        catalog.binlog_segments.push(segment(
            &format!("binlog/mysql-bin.{day:06}"),
            Some(&first.to_rfc3339()),
            Some(&(first + chrono::TimeDelta::days(1)).to_rfc3339()),
        ));
    }
    catalog
}

#[test]
fn mysql_recovery_window_keeps_the_window_and_the_base_before_it() {
    let catalog = mysql_catalog(60);
    // Now: day 59 (Feb 29) 12:00; the window starts day 29 (Jan 30) 12:00.
    let plan = run(
        &catalog,
        &policy(r#"{"recovery_window": "30d"}"#),
        "2024-02-29T12:00:00Z",
    );
    assert_eq!(kept(&plan).len(), 31);
    assert_eq!(kept(&plan).last(), Some(&"base-029"));
    assert_eq!(reasons(&plan, "base-030"), vec!["recovery_window 30d"]);
    assert_eq!(
        reasons(&plan, "base-029"),
        vec!["recovery_window 30d: newest before the window"]
    );
    // The horizon is the start of the oldest kept base: day 29 at 00:00 minus 30 minutes.
    assert_eq!(plan.binlog.horizon, Some(at("2024-01-29T23:30:00Z")));
    assert_eq!(plan.binlog.horizon_backup.as_deref(), Some("base-029"));
    // Segment k covers [day k − 1h, day k + 1 − 1h]: segment 28 ends at day 29 − 1h, before
    // the horizon; segment 29 reaches past it.
    assert_eq!(plan.binlog.delete.len(), 29);
    assert_eq!(
        plan.binlog.delete.first().map(String::as_str),
        Some("binlog/mysql-bin.000028")
    );
    assert_eq!(
        plan.binlog.keep.last().map(String::as_str),
        Some("binlog/mysql-bin.000029")
    );
}

#[test]
fn mysql_the_newest_base_is_kept_when_the_window_is_empty() {
    let catalog = mysql_catalog(10);
    let plan = run(
        &catalog,
        &policy(r#"{"recovery_window": "1m"}"#),
        "2024-06-01T00:00:00Z",
    );
    assert_eq!(kept(&plan), vec!["base-009"]);
    assert_eq!(
        reasons(&plan, "base-009"),
        vec![
            "recovery_window 1m: newest before the window",
            "floor: newest completed full backup"
        ]
    );
    assert_eq!(plan.binlog.horizon, Some(at("2024-01-09T23:30:00Z")));
}

#[test]
fn mysql_binlog_keeps_segments_of_unknown_end_and_those_ending_at_the_horizon() {
    let mut catalog = mysql_catalog(3);
    catalog.binlog_segments = vec![
        segment(
            "old",
            Some("2023-12-01T00:00:00Z"),
            Some("2023-12-02T00:00:00Z"),
        ),
        segment("unknown-end", Some("2023-11-01T00:00:00Z"), None),
        segment(
            "ends-at-horizon",
            Some("2024-01-02T00:00:00Z"),
            Some("2024-01-02T23:30:00Z"),
        ),
        segment("ends-just-before", None, Some("2024-01-02T23:29:59.999Z")),
    ];
    let plan = run(&catalog, &Policy::keep_last(1), "2024-01-04T00:00:00Z");
    assert_eq!(kept(&plan), vec!["base-002"]);
    assert_eq!(plan.binlog.horizon, Some(at("2024-01-02T23:30:00Z")));
    assert_eq!(plan.binlog.keep, vec!["unknown-end", "ends-at-horizon"]);
    assert_eq!(plan.binlog.delete, vec!["ends-just-before", "old"]);
}

#[test]
fn mysql_without_a_kept_base_no_segment_is_deleted() {
    let mut catalog = Catalog::default();
    catalog.backups.push(BackupRecord {
        id: "running".to_owned(),
        started_at: Some(at("2024-01-05T00:00:00Z")),
        ..BackupRecord::default()
    });
    catalog.binlog_segments = vec![segment("old", None, Some("2020-01-01T00:00:00Z"))];
    let plan = run(&catalog, &Policy::keep_last(3), "2024-01-05T01:00:00Z");
    assert_eq!(kept(&plan), vec!["running"]);
    assert_eq!(plan.binlog.horizon, None);
    assert_eq!(plan.binlog.keep, vec!["old"]);
    assert!(plan.binlog.delete.is_empty());
}
