//! Sexton's own rules and outputs, one behaviour per test: window and duration boundaries,
//! holds, in-progress and failed backups, backups already being deleted, the guard, parent
//! links the catalog gets wrong, the JSON output, and lookups by id.

mod common;

use common::{
    at, catalog, daily_chain, deleted, failed, full, incremental, kept, policy, reasons, run, utc,
    with_status,
};
use sexton_retention::{
    evaluate, plan, BackupRecord, BackupStatus, Catalog, PlanError, Policy, Verdict,
};

#[test]
fn recovery_window_boundaries() {
    let catalog = catalog(vec![
        full("inside", "2024-05-20T00:00:00Z"),
        full("at-start", "2024-05-01T00:00:00Z"),
        full("base", "2024-04-30T23:59:59Z"),
        full("older", "2024-04-29T00:00:00Z"),
    ]);
    let now = "2024-05-31T00:00:00Z";
    let plan = run(&catalog, &policy(r#"{"recovery_window": "30d"}"#), now);
    assert_eq!(kept(&plan), vec!["inside", "at-start", "base"]);
    assert_eq!(reasons(&plan, "at-start"), vec!["recovery_window 30d"]);
    // Weeks are 7 days, months 30 days.
    let plan = run(&catalog, &policy(r#"{"recovery_window": "4w"}"#), now);
    assert_eq!(kept(&plan), vec!["inside", "at-start"]);
    let plan = run(&catalog, &policy(r#"{"recovery_window": "1m"}"#), now);
    assert_eq!(kept(&plan), vec!["inside", "at-start", "base"]);
}

#[test]
fn retention_duration_keeps_exactly_n_days_back() {
    let catalog = catalog(vec![
        full("new", "2024-05-30T00:00:00Z"),
        full("ten-days", "2024-05-21T00:00:00Z"),
        full("ten-days-one-second", "2024-05-20T23:59:59Z"),
    ]);
    let plan = run(
        &catalog,
        &policy(r#"{"retention_duration": 10}"#),
        "2024-05-31T00:00:00Z",
    );
    assert_eq!(kept(&plan), vec!["new", "ten-days"]);
}

#[test]
fn legal_hold_and_in_use_holds_outlive_every_rule_until_released() {
    let mut backups = vec![
        full("new", "2024-05-30T00:00:00Z"),
        full("held", "2020-01-01T00:00:00Z"),
        full("legal", "2019-01-01T00:00:00Z"),
    ];
    backups[1].holds = vec!["restore:abc".to_owned(), "clone:db2".to_owned()];
    backups[2].legal_hold = true;
    let mut catalog = catalog(backups);
    let policy = Policy::keep_last(1);
    let plan = run(&catalog, &policy, "2024-06-01T00:00:00Z");
    assert_eq!(kept(&plan), vec!["new", "held", "legal"]);
    assert_eq!(
        reasons(&plan, "held"),
        vec!["hold restore:abc", "hold clone:db2"]
    );
    assert_eq!(reasons(&plan, "legal"), vec!["legal hold"]);

    catalog.backups[1].holds.clear();
    catalog.backups[2].legal_hold = false;
    let plan = run(&catalog, &policy, "2024-06-01T00:00:00Z");
    assert_eq!(deleted(&plan), vec!["held", "legal"]);
}

#[test]
fn an_in_progress_backup_is_kept_with_everything_it_builds_on() {
    let mut backups = daily_chain("F I I");
    backups.push(BackupRecord {
        id: "running".to_owned(),
        started_at: Some(at("2024-01-04T02:00:00Z")),
        kind: sexton_retention::BackupKind::Incremental,
        parent: Some("d3".to_owned()),
        ..BackupRecord::default()
    });
    backups.push(full("d0", "2023-12-31T02:00:00Z"));
    backups.push(full("newer-full", "2024-01-03T12:00:00Z"));
    let catalog = catalog(backups);
    let plan = run(&catalog, &Policy::keep_last(1), "2024-01-04T03:00:00Z");
    assert_eq!(kept(&plan), vec!["running", "newer-full", "d3", "d2", "d1"]);
    assert_eq!(reasons(&plan, "running"), vec!["in progress"]);
    assert_eq!(reasons(&plan, "d1"), vec!["needed by running"]);
    assert_eq!(deleted(&plan), vec!["d0"]);
}

#[test]
fn failed_backups_wait_for_their_grace_period() {
    let mut no_time = failed("no-time", "2024-01-01T00:00:00Z");
    no_time.completed_at = None;
    let catalog = catalog(vec![
        full("good", "2024-01-01T10:00:00Z"),
        failed("recent", "2024-01-01T11:30:00Z"),
        failed("old", "2024-01-01T09:00:00Z"),
        no_time,
    ]);
    let now = "2024-01-01T12:00:00Z";
    let plan = run(&catalog, &Policy::keep_last(1), now);
    assert_eq!(kept(&plan), vec!["no-time", "recent", "good"]);
    assert_eq!(reasons(&plan, "recent"), vec!["failed, within grace 1h"]);
    assert_eq!(reasons(&plan, "no-time"), vec!["failed, no time recorded"]);
    assert_eq!(reasons(&plan, "old"), vec!["failed"]);
    let plan = run(
        &catalog,
        &policy(r#"{"keep_last": 1, "failed_grace": "3h"}"#),
        now,
    );
    assert_eq!(reasons(&plan, "old"), vec!["failed, within grace 3h"]);
    let plan = run(
        &catalog,
        &policy(r#"{"keep_last": 1, "failed_grace": "0s"}"#),
        now,
    );
    assert_eq!(deleted(&plan), vec!["recent", "old"]);
    // barman never deletes a FAILED backup (issue 30): `never` keeps them all, however old,
    // and they still count for nothing.
    let never = policy(r#"{"keep_last": 1, "failed_grace": "never"}"#);
    assert_eq!(never.failed_grace.to_string(), "never");
    let plan = run(&catalog, &never, "2034-01-01T00:00:00Z");
    assert!(deleted(&plan).is_empty(), "{:?}", deleted(&plan));
    assert_eq!(
        reasons(&plan, "old"),
        vec!["failed, kept: failed_grace is never"]
    );
    // The policy says so when written back, and reads back the same.
    let written = serde_json::to_string(&never).unwrap();
    assert!(written.contains(r#""failed_grace":"never""#), "{written}");
    assert_eq!(policy(&written), never);
    for bad in ["Never", "forever", "never1", "-1h"] {
        let text = format!(r#"{{"keep_last": 1, "failed_grace": "{bad}"}}"#);
        assert!(Policy::from_json(&text).is_err(), "{bad}");
    }
}

#[test]
fn failed_backups_never_count_toward_keep_last() {
    let catalog = catalog(vec![
        failed("f3", "2024-01-03T00:00:00Z"),
        failed("f2", "2024-01-02T00:00:00Z"),
        full("b1", "2024-01-01T00:00:00Z"),
        full("b0", "2023-12-31T00:00:00Z"),
    ]);
    let plan = run(&catalog, &Policy::keep_last(2), "2024-02-01T00:00:00Z");
    assert_eq!(kept(&plan), vec!["b1", "b0"]);
}

#[test]
fn backups_already_being_deleted_stay_deleted_unless_something_protects_them() {
    let mut held = with_status(
        full("held-expiring", "2024-01-01T00:00:00Z"),
        BackupStatus::Expiring,
    );
    held.holds = vec!["restore:r1".to_owned()];
    let catalog = catalog(vec![
        full("new", "2024-02-01T00:00:00Z"),
        with_status(
            full("expiring", "2024-01-04T00:00:00Z"),
            BackupStatus::Expiring,
        ),
        with_status(
            full("deleting", "2024-01-03T00:00:00Z"),
            BackupStatus::Deleting,
        ),
        with_status(
            full("delete-failed", "2024-01-02T00:00:00Z"),
            BackupStatus::DeleteFailed,
        ),
        held,
    ]);
    // keep_last 10 would keep them all if they still counted: they do not.
    let plan = run(&catalog, &Policy::keep_last(10), "2024-02-02T00:00:00Z");
    assert_eq!(kept(&plan), vec!["new", "held-expiring"]);
    assert_eq!(reasons(&plan, "expiring"), vec!["already expiring"]);
    assert_eq!(reasons(&plan, "deleting"), vec!["deletion under way"]);
    assert_eq!(
        reasons(&plan, "delete-failed"),
        vec!["retrying a failed delete"]
    );
    assert_eq!(
        plan.warnings,
        vec!["backup held-expiring: marked expiring but kept by this plan"]
    );
    // The deleter's re-check: the plan recomputed from the current catalog still deletes an
    // expiring backup.
    assert!(plan.deletes("expiring"));
    assert!(!plan.deletes("held-expiring"));
}

#[test]
fn an_expiring_backup_that_a_kept_one_needs_is_kept() {
    let mut backups = daily_chain("F I I");
    backups[0].status = BackupStatus::Expiring;
    backups.push(full("d9", "2024-01-09T02:00:00Z"));
    let catalog = catalog(backups);
    let plan = run(&catalog, &Policy::keep_last(2), "2024-01-10T00:00:00Z");
    assert_eq!(kept(&plan), vec!["d9", "d3", "d2", "d1"]);
    // "needed by" names the kept backup whose chain it is in.
    assert_eq!(reasons(&plan, "d1"), vec!["needed by d3"]);
    assert_eq!(
        plan.warnings,
        vec!["backup d1: marked expiring but kept by this plan"]
    );
}

#[test]
fn the_guard_refuses_a_policy_without_rules_and_a_plan_that_deletes_everything() {
    let catalog = catalog(daily_chain("F I"));
    assert_eq!(
        plan(&catalog, &Policy::default(), utc("2024-02-01T00:00:00Z")).unwrap_err(),
        PlanError::NoRule
    );
    assert_eq!(
        plan(&catalog, &Policy::keep_last(0), utc("2024-02-01T00:00:00Z")).unwrap_err(),
        PlanError::NoRule
    );
    // Incrementals whose full is gone and a rule that keeps none of them: the floor has
    // nothing to hold on to, and the guard refuses.
    let orphans = catalog_of_orphans();
    let error = plan(
        &orphans,
        &policy(r#"{"retention_duration": 1}"#),
        utc("2024-02-01T00:00:00Z"),
    )
    .unwrap_err();
    assert_eq!(error, PlanError::WouldDeleteAll);
    assert_eq!(
        error.to_string(),
        "refusing to delete every completed backup of the group; check the policy and the catalog"
    );
}

fn catalog_of_orphans() -> Catalog {
    catalog(vec![
        incremental("i2", "2024-01-02T00:00:00Z", "gone"),
        incremental("i3", "2024-01-03T00:00:00Z", "i2"),
    ])
}

#[test]
fn broken_and_failed_parent_links_are_warned_about() {
    let orphans = catalog_of_orphans();
    let plan = run(&orphans, &Policy::keep_last(1), "2024-02-01T00:00:00Z");
    assert_eq!(kept(&plan), vec!["i3", "i2"]);
    assert_eq!(
        plan.warnings,
        vec!["backup i2: parent gone is not in the catalog; its chain is broken"]
    );

    let catalog = catalog(vec![
        full("f1", "2024-01-01T00:00:00Z"),
        failed("x2", "2024-01-02T00:00:00Z"),
        incremental("i3", "2024-01-03T00:00:00Z", "x2"),
    ]);
    let plan = run(&catalog, &Policy::keep_last(1), "2024-02-01T00:00:00Z");
    assert_eq!(kept(&plan), vec!["i3", "f1"]);
    assert_eq!(
        plan.warnings,
        vec!["backup i3: parent x2 failed; failed backups are never part of a chain"]
    );
}

#[test]
fn a_parent_far_from_its_child_is_found_and_clock_skew_is_tolerated() {
    // The parent is older than several unrelated backups (another chain interleaved), and
    // one incremental completed "before" its parent.
    let mut backups = vec![full("a0", "2024-01-01T00:00:00Z")];
    for day in 1..=8 {
        backups.push(full(
            &format!("b{day}"),
            &format!("2024-01-{:02}T00:00:00Z", day + 1),
        ));
    }
    backups.push(incremental("a1", "2024-01-20T00:00:00Z", "a0"));
    backups.push(incremental("skewed", "2024-01-19T00:00:00Z", "a1"));
    let catalog = catalog(backups);
    let plan = run(
        &catalog,
        &policy(r#"{"keep_tags": [["x"]], "keep_last": 2}"#),
        "2024-02-01T00:00:00Z",
    );
    assert_eq!(kept(&plan), vec!["a1", "skewed", "b8", "a0"]);
    assert_eq!(reasons(&plan, "a0"), vec!["needed by a1"]);
    assert!(plan.warnings.is_empty());
    // Merge mode resolves every link and checks they do not loop. The oldest kept backup of
    // the chain by time is "skewed", whose parent is kept: nothing is merged, a0 stays.
    let mut merging = policy(r#"{"keep_last": 2}"#);
    merging.chain_mode = sexton_retention::ChainMode::Merge;
    let plan = run(&catalog, &merging, "2024-02-01T00:00:00Z");
    assert!(plan.merges.is_empty());
    assert_eq!(reasons(&plan, "a0"), vec!["needed by a1"]);
}

#[test]
fn parent_loops_are_errors() {
    let catalog = catalog(vec![
        full("f", "2024-01-01T00:00:00Z"),
        incremental("a", "2024-01-02T00:00:00Z", "b"),
        incremental("b", "2024-01-03T00:00:00Z", "a"),
    ]);
    let error = plan(&catalog, &Policy::keep_last(1), utc("2024-02-01T00:00:00Z")).unwrap_err();
    assert!(matches!(error, PlanError::ParentCycle { .. }), "{error}");
    let mut merging = Policy::keep_last(1);
    merging.chain_mode = sexton_retention::ChainMode::Merge;
    let error = plan(&catalog, &merging, utc("2024-02-01T00:00:00Z")).unwrap_err();
    assert!(matches!(error, PlanError::ParentCycle { .. }), "{error}");
}

#[test]
fn the_json_output_has_issue_threes_shape_newest_first() {
    let mut catalog = catalog(daily_chain("F I F"));
    catalog.binlog_segments = vec![common::segment("seg-1", None, Some("2023-12-31T00:00:00Z"))];
    let plan = run(&catalog, &Policy::keep_last(1), "2024-02-01T00:00:00Z");
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "keep": [{"id": "d3", "reasons": ["last snapshot", "floor: newest completed full backup"],
                      "status": "completed", "kind": "full", "completed_at": "2024-01-03T02:00:00Z"}],
            "delete": [
                {"id": "d2", "reasons": ["no rule keeps it"], "status": "completed",
                 "kind": "incremental", "completed_at": "2024-01-02T02:00:00Z"},
                {"id": "d1", "reasons": ["no rule keeps it"], "status": "completed",
                 "kind": "full", "completed_at": "2024-01-01T02:00:00Z"}],
            "merges": [],
            "binlog": {"horizon": "2024-01-03T02:00:00Z", "horizon_backup": "d3",
                       "keep": [], "delete": ["seg-1"]}
        })
    );
    // The plan reads back (the CLI renders plans it receives from the fleet).
    let back: sexton_retention::Plan = serde_json::from_value(json).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn lookups_by_id_agree_between_the_plan_and_the_evaluation() {
    let catalog = catalog(daily_chain("F I I F I X I"));
    let policy = Policy::keep_last(2);
    let now = utc("2024-02-01T00:00:00Z");
    let evaluation = evaluate(&catalog, &policy, now).unwrap();
    let plan = evaluation.to_plan();
    for backup in &catalog.backups {
        let from_plan = plan.decision(&backup.id).map(|(verdict, _)| verdict);
        assert_eq!(evaluation.verdict(&backup.id), from_plan, "{}", backup.id);
        assert_eq!(evaluation.deletes(&backup.id), plan.deletes(&backup.id));
    }
    assert_eq!(evaluation.verdict("nope"), None);
    assert!(!plan.deletes("nope") && !plan.keeps("nope"));
    assert_eq!(plan.decision("d7").map(|(v, _)| v), Some(Verdict::Keep));
    assert_eq!(evaluation.summary(), plan.summary());
    assert_eq!(
        evaluation.n_keep() + evaluation.n_delete(),
        catalog.backups.len()
    );
}

#[test]
fn policies_round_trip_inside_a_stored_record() {
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Schedule {
        name: String,
        retention: Policy,
    }
    let schedule = Schedule {
        name: "nightly".to_owned(),
        retention: policy(
            r#"{"max_backups": "7", "keep_monthly": -1, "keep_within_daily": "1m14d",
                "recovery_window": "4w", "chain_mode": "merge", "failed_grace": "2d"}"#,
        ),
    };
    let text = serde_json::to_string(&schedule).unwrap();
    let back: Schedule = serde_json::from_str(&text).unwrap();
    assert_eq!(back, schedule);
    // Deserialising validates like from_json.
    let error = serde_json::from_str::<Schedule>(r#"{"name": "x", "retention": {}}"#)
        .unwrap_err()
        .to_string();
    assert!(error.contains("policy has no retention rule"), "{error}");
}

#[test]
fn a_full_with_a_parent_depends_on_nothing() {
    let mut synthetic = full("f2", "2024-01-02T00:00:00Z");
    synthetic.parent = Some("f1".to_owned());
    let catalog = catalog(vec![full("f1", "2024-01-01T00:00:00Z"), synthetic]);
    let plan = run(&catalog, &Policy::keep_last(1), "2024-02-01T00:00:00Z");
    assert_eq!(deleted(&plan), vec!["f1"]);
}

/// barman's `minimum_redundancy` (issue 30), as its documentation states it: "Minimum number
/// of backups to be retained" — a recovery window that has passed every backup by still leaves
/// the newest N, and they are marked as kept by the floor, not by the window
/// (https://docs.pgbarman.org/release/latest/user_guide/retention_policies.html).
#[test]
fn minimum_redundancy_keeps_the_newest_n_whatever_the_window_says() {
    let catalog = catalog(vec![
        full("d5", "2024-01-05T00:00:00Z"),
        full("d4", "2024-01-04T00:00:00Z"),
        full("d3", "2024-01-03T00:00:00Z"),
        full("d2", "2024-01-02T00:00:00Z"),
        full("d1", "2024-01-01T00:00:00Z"),
    ]);
    let now = "2024-03-01T00:00:00Z";
    // The window alone keeps its base, d5.
    let plan = run(&catalog, &policy(r#"{"recovery_window": "7d"}"#), now);
    assert_eq!(kept(&plan), vec!["d5"]);
    let plan = run(
        &catalog,
        &policy(r#"{"recovery_window": "7d", "minimum_redundancy": 3}"#),
        now,
    );
    assert_eq!(kept(&plan), vec!["d5", "d4", "d3"]);
    assert_eq!(reasons(&plan, "d4"), vec!["minimum_redundancy 3"]);
    assert_eq!(
        reasons(&plan, "d5"),
        vec![
            "recovery_window 7d: newest before the window",
            "floor: newest completed full backup"
        ]
    );
    assert_eq!(deleted(&plan), vec!["d2", "d1"]);
    // Enough kept by the rules: the floor adds nothing.
    let plan = run(
        &catalog,
        &policy(r#"{"keep_last": 4, "minimum_redundancy": 3}"#),
        now,
    );
    assert_eq!(kept(&plan), vec!["d5", "d4", "d3", "d2"]);
    assert!(plan.keep.iter().all(|d| !d
        .reasons
        .iter()
        .any(|r| r.to_string().starts_with("minimum"))));
}

#[test]
fn minimum_redundancy_keeps_the_newest_n_beside_older_held_ones() {
    let mut held = full("f1", "2024-01-01T00:00:00Z");
    held.holds = vec!["restore:r1".into()];
    let catalog = catalog(vec![
        incremental("i4", "2024-01-04T00:00:00Z", "i3"),
        incremental("i3", "2024-01-03T00:00:00Z", "f2"),
        full("f2", "2024-01-02T00:00:00Z"),
        held,
    ]);
    let now = "2024-03-01T00:00:00Z";
    // The newest 3 stay: i4 (the window's base), i3 (which i4 needs anyway, now a restore
    // point of the floor's) and f2 (the newest full); f1 stays for its hold, and does not stand
    // in for one of them (barman keeps the newest N beside an old keep: backup too).
    let plan = run(
        &catalog,
        &policy(r#"{"recovery_window": "7d", "minimum_redundancy": 3}"#),
        now,
    );
    assert_eq!(kept(&plan), vec!["i4", "i3", "f2", "f1"]);
    assert_eq!(reasons(&plan, "i3"), vec!["minimum_redundancy 3"]);
    // A floor of 1 is i4, which the window keeps: i3 is kept only because i4 needs it.
    let plan = run(
        &catalog,
        &policy(r#"{"recovery_window": "7d", "minimum_redundancy": 1}"#),
        now,
    );
    assert_eq!(reasons(&plan, "i3"), vec!["needed by i4"]);
}

#[test]
fn minimum_redundancy_is_refused_when_it_contradicts_the_policy() {
    for (text, error) in [
        (
            r#"{"keep_last": 2, "minimum_redundancy": 3}"#,
            "minimum_redundancy: 3 is above keep_last 2",
        ),
        (
            r#"{"minimum_redundancy": 3}"#,
            "policy has no retention rule",
        ),
        (
            r#"{"keep_last": 2, "minimum_redundancy": 0}"#,
            "minimum_redundancy",
        ),
        (
            r#"{"keep_last": 2, "minimum_redundancy": -1}"#,
            "minimum_redundancy",
        ),
        (
            r#"{"keep_last": 2, "minimum_redundancy": "two"}"#,
            "minimum_redundancy",
        ),
    ] {
        let refused = Policy::from_json(text).unwrap_err().to_string();
        assert!(refused.starts_with(error), "{text}: {refused}");
    }
    let fine = policy(r#"{"keep_last": 3, "minimum_redundancy": 3}"#);
    let written = serde_json::to_string(&fine).unwrap();
    assert!(written.contains(r#""minimum_redundancy":3"#), "{written}");
    assert_eq!(policy(&written), fine);
}

/// pgBackRest's `repo-retention-full` (type count), as its user guide states it: "When a full
/// backup expires, all differential and incremental backups associated with the full backup
/// will also expire"; the retained fulls keep everything that depends on them
/// (https://pgbackrest.org/user-guide.html#retention/full). barman's `REDUNDANCY 2` keeps the
/// two newest backups, children following their root.
#[test]
fn keep_full_counts_full_chains_not_backups() {
    let catalog = catalog(vec![
        full("F3", "2024-01-07T00:00:00Z"),
        incremental("I2b", "2024-01-06T00:00:00Z", "I2a"),
        incremental("I2a", "2024-01-05T00:00:00Z", "F2"),
        full("F2", "2024-01-04T00:00:00Z"),
        incremental("I1b", "2024-01-03T00:00:00Z", "F1"),
        incremental("I1a", "2024-01-02T00:00:00Z", "F1"),
        full("F1", "2024-01-01T00:00:00Z"),
    ]);
    let now = "2024-01-08T00:00:00Z";
    let plan = run(&catalog, &policy(r#"{"keep_full": 2}"#), now);
    assert_eq!(kept(&plan), vec!["F3", "I2b", "I2a", "F2"]);
    assert_eq!(deleted(&plan), vec!["I1b", "I1a", "F1"]);
    assert_eq!(reasons(&plan, "F2"), vec!["keep_full 2"]);
    assert_eq!(reasons(&plan, "I2b"), vec!["keep_full 2: builds on F2"]);
    // keep_last 2 would have kept F3 and I2b (and I2a, F2 as needed): the same here, but it
    // counts backups, so with one more incremental on F3 it keeps less of F2's chain.
    let mut more = catalog.backups.clone();
    more.insert(0, incremental("I3a", "2024-01-07T12:00:00Z", "F3"));
    let more = sexton_retention::Catalog {
        backups: more,
        ..catalog.clone()
    };
    let by_chains = run(&more, &policy(r#"{"keep_full": 2}"#), now);
    assert_eq!(kept(&by_chains), vec!["I3a", "F3", "I2b", "I2a", "F2"]);
    let by_backups = run(&more, &policy(r#"{"keep_last": 2}"#), now);
    assert_eq!(kept(&by_backups), vec!["I3a", "F3"]);
    // Every full (-1) keeps every chain; a delete-requested full is not counted.
    let plan = run(&catalog, &policy(r#"{"keep_full": -1}"#), now);
    assert!(deleted(&plan).is_empty());
    let mut requested = catalog.clone();
    requested
        .backups
        .iter_mut()
        .find(|b| b.id == "F3")
        .unwrap()
        .delete_requested = true;
    // (F3 itself stays as the floor, deferred: the newest full goes only when forced.)
    let plan = run(&requested, &policy(r#"{"keep_full": 1}"#), now);
    assert_eq!(kept(&plan), vec!["F3", "I2b", "I2a", "F2"]);
    assert_eq!(reasons(&plan, "F2"), vec!["keep_full 1"]);
    // Written back and read again, the same policy.
    let written = serde_json::to_string(&policy(r#"{"keep_full": 2}"#)).unwrap();
    assert!(written.contains(r#""keep_full":2"#), "{written}");
    for bad in [
        r#"{"keep_full": "two"}"#,
        r#"{"keep_full": -2}"#,
        r#"{"keep_full": 1.5}"#,
    ] {
        assert!(Policy::from_json(bad).is_err(), "{bad}");
    }
}
