//! Bad policies and bad catalogs get clear errors: lowercase, naming the field or the backup,
//! saying what to write instead. Never a plan that guesses.

mod common;

use common::{at, catalog, full, incremental, utc};
use sexton_retention::{
    plan, BackupRecord, BackupStatus, Catalog, CatalogError, PlanError, Policy, PolicyError,
};

/// Every policy here is refused with a message containing `expected`.
#[test]
fn malformed_policies_are_refused_with_the_field_named() {
    let cases: &[(&str, &str)] = &[
        ("{}", "policy has no retention rule"),
        (r#"{"keep_last": 0}"#, "policy has no retention rule"),
        (r#"{"chain_mode": "merge"}"#, "policy has no retention rule"),
        (
            "[]",
            "policy is not valid: expected a json object of rules, got []",
        ),
        (
            "[3]",
            "policy is not valid: expected a json object of rules",
        ),
        ("{", "policy is not valid: EOF while parsing"),
        (r#"{"keep_forever": 1}"#, "unknown field `keep_forever`"),
        (
            r#"{"keep_last": "3"}"#,
            "keep_last: expected a whole number",
        ),
        (
            r#"{"keep_daily": 1.5}"#,
            "keep_daily: expected a whole number",
        ),
        (
            r#"{"keep_weekly": -2}"#,
            "keep_weekly: -2 is negative; use -1 for unlimited",
        ),
        (
            r#"{"keep_monthly": 99999999999}"#,
            "keep_monthly: 99999999999 is too large",
        ),
        (r#"{"keep_within": "4w"}"#, "keep_within: unknown unit 'w'"),
        (
            r#"{"keep_within": "-1d"}"#,
            "keep_within: expected a number",
        ),
        (
            r#"{"keep_within": "1d2d"}"#,
            "keep_within: unit 'd' appears twice",
        ),
        (
            r#"{"keep_within": "0d"}"#,
            "keep_within: duration \"0d\" is zero",
        ),
        (
            r#"{"keep_within": "7"}"#,
            "keep_within: missing unit after 7",
        ),
        (r#"{"keep_within": ""}"#, "keep_within: empty duration"),
        (
            r#"{"keep_within_daily": 7}"#,
            "keep_within_daily: expected a duration string",
        ),
        (
            r#"{"keep_tags": ["a"]}"#,
            "keep_tags: expected a list of tag lists",
        ),
        (r#"{"keep_tags": [[]]}"#, "keep_tags: a tag list is empty"),
        (
            r#"{"keep_tags": [[1]]}"#,
            "keep_tags: expected a list of tag lists",
        ),
        (
            r#"{"retention_duration": "three"}"#,
            "retention_duration: expected a number of days, got \"three\"",
        ),
        (
            r#"{"retention_duration": "-1"}"#,
            "retention_duration: must be a positive whole number of days, got \"-1\"",
        ),
        (
            r#"{"retention_duration": "0"}"#,
            "retention_duration: must be a positive whole number of days, got \"0\"",
        ),
        (
            r#"{"retention_duration": 0}"#,
            "retention_duration: must be a positive whole number of days, got 0",
        ),
        (
            r#"{"retention_duration": -1}"#,
            "retention_duration: must be a positive whole number of days",
        ),
        (
            r#"{"retention_duration": 1.5}"#,
            "retention_duration: must be a positive whole number of days",
        ),
        (
            r#"{"retention_duration": "1.5"}"#,
            "retention_duration: expected a number of days",
        ),
        (
            r#"{"retention_duration": true}"#,
            "retention_duration: expected a number of days",
        ),
        (
            r#"{"max_backups": "three"}"#,
            "max_backups: expected a number of backups, got \"three\"",
        ),
        (
            r#"{"max_backups": "0"}"#,
            "max_backups: must be a positive whole number of backups",
        ),
        (
            r#"{"max_backups": "-1"}"#,
            "max_backups: must be a positive whole number of backups",
        ),
        (
            r#"{"max_backups": 3, "keep_last": 3}"#,
            "max_backups: max_backups and keep_last are the same rule",
        ),
        (
            r#"{"recovery_window": "30"}"#,
            "recovery_window: expected <n>d, <n>w or <n>mo",
        ),
        (
            r#"{"recovery_window": "1y"}"#,
            "recovery_window: expected <n>d, <n>w or <n>mo",
        ),
        (
            r#"{"recovery_window": "30 d"}"#,
            "recovery_window: expected <n>d, <n>w or <n>mo",
        ),
        (
            r#"{"recovery_window": "-30d"}"#,
            "recovery_window: expected <n>d, <n>w or <n>mo",
        ),
        (
            r#"{"recovery_window": "0d"}"#,
            "recovery_window: window \"0d\" is zero",
        ),
        (
            r#"{"recovery_window": 30}"#,
            "recovery_window: expected a string like \"30d\"",
        ),
        (
            r#"{"keep_last": 1, "failed_grace": "5m"}"#,
            "failed_grace: unit \"m\" in \"5m\" is ambiguous",
        ),
        (
            r#"{"keep_last": 1, "failed_grace": "1 h"}"#,
            "failed_grace: expected <n>s, <n>min, <n>h, <n>d or never",
        ),
        (
            r#"{"keep_last": 1, "chain_mode": "squash"}"#,
            "chain_mode: expected \"keep\" or \"merge\", got \"squash\"",
        ),
    ];
    let mut failures = Vec::new();
    for (json, expected) in cases {
        match Policy::from_json(json) {
            Ok(policy) => failures.push(format!("{json} was accepted: {policy:?}")),
            Err(error) => {
                let message = error.to_string();
                if !message.contains(expected) {
                    failures.push(format!("{json}: {message:?} lacks {expected:?}"));
                }
                if message.starts_with(char::is_uppercase) || message.ends_with('.') {
                    failures.push(format!("{json}: {message:?} is not a lowercase clause"));
                }
                assert!(!error.is_retryable());
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn karbor_numbers_are_accepted_as_numbers_or_numeric_strings() {
    for json in [
        r#"{"max_backups": 3, "retention_duration": 10}"#,
        r#"{"max_backups": "3", "retention_duration": "10"}"#,
    ] {
        let policy = Policy::from_json(json).unwrap();
        assert_eq!(policy.keep_last, Policy::keep_last(3).keep_last);
        assert_eq!(policy.retention_duration.map(|d| d.0.get()), Some(10));
    }
    assert_eq!(
        Policy::from_json(r#"{"keep_daily": "unlimited"}"#)
            .unwrap()
            .keep_daily,
        Some(sexton_retention::KeepCount::Unlimited)
    );
    assert!(matches!(
        Policy::from_json(r#"{"keep_daily": 0, "keep_weekly": 2}"#),
        Ok(Policy {
            keep_daily: None,
            ..
        })
    ));
}

#[test]
fn policy_errors_are_typed() {
    assert_eq!(Policy::from_json("{}"), Err(PolicyError::NoRule));
    assert!(matches!(
        Policy::from_json(r#"{"keep_within": "4w"}"#),
        Err(PolicyError::Field {
            field: "keep_within",
            ..
        })
    ));
    assert!(matches!(
        Policy::from_json(r#"{"bogus": 1}"#),
        Err(PolicyError::Syntax(_))
    ));
}

fn plan_error(catalog: &Catalog) -> String {
    plan(catalog, &Policy::keep_last(1), utc("2024-02-01T00:00:00Z"))
        .unwrap_err()
        .to_string()
}

#[test]
fn malformed_catalogs_are_refused_with_the_backup_named() {
    let completed_without_time = BackupRecord {
        id: "b1".to_owned(),
        status: BackupStatus::Completed,
        ..BackupRecord::default()
    };
    assert_eq!(
        plan_error(&catalog(vec![completed_without_time])),
        "backup b1: completed backup has no completed_at"
    );
    let mut no_parent = incremental("i1", "2024-01-01T00:00:00Z", "x");
    no_parent.parent = None;
    assert_eq!(
        plan_error(&catalog(vec![no_parent])),
        "backup i1: incremental backup has no parent"
    );
    assert_eq!(
        plan_error(&catalog(vec![incremental(
            "i1",
            "2024-01-01T00:00:00Z",
            "i1"
        )])),
        "backup i1: backup is its own parent"
    );
    assert_eq!(
        plan_error(&catalog(vec![
            full("same", "2024-01-01T00:00:00Z"),
            full("same", "2024-01-02T00:00:00Z"),
        ])),
        "backup same: duplicate id"
    );
    assert_eq!(
        plan_error(&catalog(vec![full("", "2024-01-01T00:00:00Z")])),
        "backup at position 0: id is empty"
    );
    let mut far_future = full("far", "2024-01-01T00:00:00Z");
    far_future.completed_at = Some(at("2300-01-01T00:00:00Z"));
    assert_eq!(
        plan_error(&catalog(vec![far_future])),
        "backup far: time is outside the supported range (years 1678 to 2261)"
    );
    let mut segments = catalog(vec![full("f", "2024-01-01T00:00:00Z")]);
    segments.binlog_segments = vec![common::segment(
        "s",
        Some("2024-01-02T00:00:00Z"),
        Some("2024-01-01T00:00:00Z"),
    )];
    assert_eq!(
        plan_error(&segments),
        "binlog segment s: first_event is after last_event"
    );
    segments.binlog_segments = vec![
        common::segment("s", None, None),
        common::segment("s", None, None),
    ];
    assert_eq!(plan_error(&segments), "binlog segment s: duplicate key");
}

#[test]
fn catalog_files_that_do_not_parse_say_where() {
    let cases: &[(&str, &str)] = &[
        ("{}", "missing field `backups`"),
        (
            r#"{"backups": [{"id": "a", "status": "done"}]}"#,
            "unknown variant `done`",
        ),
        (
            r#"{"backups": [{"id": "a", "status": "completed", "completed_at": "2024-01-01 00:00"}]}"#,
            "catalog is not valid: ",
        ),
        (
            r#"{"backups": [{"id": "a", "status": "completed", "kind": "differential"}]}"#,
            "unknown variant `differential`",
        ),
    ];
    for (json, expected) in cases {
        let error = Catalog::from_json(json).unwrap_err();
        let CatalogError::Syntax(message) = &error;
        assert!(
            error.to_string().contains(expected),
            "{json}: {message} lacks {expected}"
        );
    }
}

#[test]
fn catalog_files_tolerate_unknown_fields_and_read_issue_threes_format() {
    let catalog = Catalog::from_json(
        r#"{"backups": [
              {"id": "b1", "completed_at": "2024-01-01T02:00:00+02:00", "status": "completed",
               "volumes": [{"name": "pv1"}], "future_field": true},
              {"id": "b2", "completed_at": "2024-01-02T02:00:00+02:00", "status": "completed",
               "kind": "incremental", "parent": "b1", "tags": ["x"], "legal_hold": false,
               "immutable": false},
              {"id": "b3", "started_at": "2024-01-03T02:00:00Z", "status": "in-progress"},
              {"id": "b4", "status": "delete-failed", "completed_at": "2023-01-01T00:00:00Z",
               "holds": ["restore:r1"], "delete_requested": true}],
            "binlog_segments": [{"key": "k1", "last_event": "2024-01-01T00:00:00Z"}, {"key": "k2"}]}"#,
    )
    .unwrap();
    assert_eq!(catalog.backups.len(), 4);
    assert_eq!(
        catalog.backups[0]
            .completed_at
            .unwrap()
            .offset()
            .local_minus_utc(),
        7200
    );
    assert_eq!(catalog.backups[3].status, BackupStatus::DeleteFailed);
    assert!(plan(&catalog, &Policy::keep_last(1), utc("2024-02-01T00:00:00Z")).is_ok());
    // Writing it back and reading it again changes nothing.
    let again = Catalog::from_json(&serde_json::to_string(&catalog).unwrap()).unwrap();
    assert_eq!(again, catalog);
}

#[test]
fn plan_errors_are_lowercase_and_not_retryable() {
    let error = PlanError::NoRule;
    assert!(!error.is_retryable());
    assert!(error.to_string().starts_with(char::is_lowercase));
}

#[test]
fn karbor_parameters_in_other_spellings_are_clear_errors() {
    // Issue 8: Karbor's shapes are numbers or numeric strings; anything else says what to
    // write. The cases the issue names are in `malformed_policies_are_refused_with_the_field_named`;
    // these are the spellings in between.
    let cases = [
        (
            r#"{"max_backups": 0}"#,
            "max_backups: must be a positive whole number of backups, got 0",
        ),
        (
            r#"{"max_backups": -1}"#,
            "max_backups: must be a positive whole number of backups, got -1",
        ),
        (
            r#"{"max_backups": 1.5}"#,
            "max_backups: must be a positive whole number of backups",
        ),
        (
            r#"{"max_backups": " 3"}"#,
            "max_backups: expected a number of backups, got \" 3\"",
        ),
        (
            r#"{"max_backups": "+3"}"#,
            "max_backups: expected a number of backups, got \"+3\"",
        ),
        (
            r#"{"max_backups": "3.0"}"#,
            "max_backups: expected a number of backups",
        ),
        (
            r#"{"max_backups": "1e1"}"#,
            "max_backups: expected a number of backups",
        ),
        (
            r#"{"max_backups": ""}"#,
            "max_backups: expected a number of backups",
        ),
        (
            // null is "not set", and a policy without a rule says so.
            r#"{"max_backups": null}"#,
            "policy has no retention rule",
        ),
        (
            r#"{"max_backups": "99999999999"}"#,
            "max_backups: 99999999999 is too large",
        ),
        (
            r#"{"retention_duration": "10d"}"#,
            "retention_duration: expected a number of days, got \"10d\"",
        ),
        (
            r#"{"retention_duration": "-0"}"#,
            "retention_duration: must be a positive whole number of days",
        ),
        (
            r#"{"retention_duration": [10]}"#,
            "retention_duration: expected a number of days",
        ),
    ];
    for (json, expected) in cases {
        let error = Policy::from_json(json).expect_err(json).to_string();
        assert!(
            error.starts_with(expected),
            "{json}: {error:?} does not start with {expected:?}"
        );
    }
    // Leading zeros are still numbers.
    let policy =
        Policy::from_json(r#"{"max_backups": "03", "retention_duration": "010"}"#).unwrap();
    assert_eq!(policy.keep_last, Policy::keep_last(3).keep_last);
    assert_eq!(policy.retention_duration.map(|d| d.0.get()), Some(10));
}
