//! The JSON Schema of the `Schedule` manifest (`docs/schemas/schedule.manifest.schema.json`),
//! which editors use to check manifests as they are typed, against the Rust types that
//! `sexton apply -f` reads them into, as `shared/tests/schemas.rs` checks the executor
//! contract's schemas (with the same validator, `shared/tests/validator/mod.rs`):
//!
//! - manifests built from a Rust `ScheduleSpec` the way `sexton get` writes them
//!   (`manifest::manifest_of`) — one with every optional field set, one with none — and the
//!   spellings a person may write that `sexton get` never does (the old deadline field, numbers
//!   as strings, spans in seconds, Karbor's `max_backups`) validate, and are read by the CLI's
//!   reader (`manifest::parse`, `manifest::schedules`);
//! - every property they carry is declared, and every declared property is carried by one of
//!   them (a spec field added to the code must be documented, and the other way round);
//! - the schema's `examples` validate and the CLI's reader accepts them;
//! - each `enum` lists exactly the Rust enum's values;
//! - manifests the reader refuses (an unknown field, `spec.name`, another apiVersion, a bad
//!   enum value...) fail the schema too;
//! - each `pattern`, compiled as a regular expression, accepts what the Rust parser it stands
//!   for accepts (the validator checks patterns with those parsers, so this is where the
//!   expressions themselves are tested).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use sexton_cli::manifest::{self, ScheduleManifest};
use sexton_model::{
    conditions::BackupOutcome,
    copies::{CopyRule, CopySelect, Transition, STORAGE_CLASSES},
    records::{BackupOwner, OverlapPolicy, SchedulePhase, ScheduleRecord, VerifyPick, VerifySpec},
};
use sexton_retention::{ChainMode, Policy};
use sexton_schedule::{OnBlackout, Span, WindowSpec};
use sexton_shared::{api::ScheduleSpec, breaker::BreakerSpec};

#[path = "../../shared/tests/validator/mod.rs"]
mod validator;
use validator::{check_carrying, enum_matches, schema, Validator};

const NAME: &str = "schedule.manifest";

/// Every declared property is carried by one of the values below.
const NOT_YET_CARRIED: &[&str] = &[];

fn span(text: &str) -> Span {
    Span::parse(text).unwrap()
}

fn policy(json: Value) -> Policy {
    serde_json::from_value(json).unwrap()
}

/// A spec with nothing optional set.
fn least() -> ScheduleSpec {
    ScheduleSpec {
        schema_version: 1,
        name: "nightly".parse().unwrap(),
        cluster: "db1".parse().unwrap(),
        plan: "full".parse().unwrap(),
        cron: "0 3 * * *".into(),
        paused: false,
        skip_immediately: None,
        policy: Policy::keep_last(3),
        labels: BTreeMap::new(),
        remote_cleanup: false,
        overlap_policy: OverlapPolicy::Skip,
        starting_deadline_seconds: None,
        starting_deadline: None,
        full_every: None,
        volumes: Vec::new(),
        backup_owner: BackupOwner::Standalone,
        verify: None,
        jitter: None,
        exclude: Vec::new(),
        on_blackout: OnBlackout::Skip,
        pause_after_failures: None,
        annotations: BTreeMap::new(),
        breaker: None,
        copies: Vec::new(),
        objectives: None,
        confirm: false,
        dry_run: false,
    }
}

/// A spec with every optional field set (and every policy rule, across its two policies).
fn every() -> ScheduleSpec {
    ScheduleSpec {
        name: "orders-volumes".parse().unwrap(),
        paused: true,
        policy: policy(json!({
            "keep_last": 3, "keep_hourly": 24, "keep_daily": 7, "keep_weekly": 5,
            "keep_monthly": -1, "keep_yearly": 2, "keep_within": "2d",
            "keep_within_hourly": "1d12h", "keep_within_daily": "7d",
            "keep_within_weekly": "1m", "keep_within_monthly": "1y", "keep_within_yearly": "5y",
            "keep_tags": [["release"], ["manual", "pinned"]], "retention_duration": 30,
            "recovery_window": "14d", "keep_verified": 2, "keep_full": 2, "keep_diff": 1, "minimum_redundancy": 2, "pitr_full": 1,
            "failed_grace": "6h",
            "chain_mode": "merge",
        })),
        labels: [("team".to_string(), "orders".to_string())].into(),
        remote_cleanup: true,
        overlap_policy: OverlapPolicy::Allow,
        starting_deadline: Some(span("2h")),
        full_every: Some(sexton_retention::FullEvery::new(7).unwrap()),
        volumes: vec!["data".into(), "wal".into()],
        backup_owner: BackupOwner::Schedule,
        verify: Some(VerifySpec {
            cron: "0 6 * * 0".into(),
            pick: VerifyPick::OldestKept,
            timeout: serde_json::from_value(json!("2h")).unwrap(),
            location: Some("dr".parse().unwrap()),
        }),
        jitter: Some(span("15m")),
        exclude: vec![
            WindowSpec {
                cron: Some("0 8 * * 1-5".into()),
                duration: Some(span("10h")),
                zone: Some("Europe/Berlin".into()),
                ..WindowSpec::default()
            },
            WindowSpec {
                from: Some("2026-12-24".into()),
                to: Some("2026-12-27".into()),
                ..WindowSpec::default()
            },
            WindowSpec {
                from: Some("2026-06-01T22:00".into()),
                duration: Some(span("4h")),
                zone: Some("Europe/Berlin".into()),
                ..WindowSpec::default()
            },
        ],
        on_blackout: OnBlackout::Defer,
        pause_after_failures: Some(3),
        annotations: [(
            "example.com/runbook".to_string(),
            "https://wiki.example.com/orders".to_string(),
        )]
        .into(),
        breaker: Some(
            serde_json::from_value::<BreakerSpec>(json!({
                "enabled": true, "max_delete_fraction": 0.3, "max_delete_count": 20,
                "stale_after": "2d",
            }))
            .unwrap(),
        ),
        copies: vec![CopyRule {
            to: "dr".parse().unwrap(),
            policy: policy(json!({"keep_monthly": 24})),
            select: CopySelect::Fulls,
            delay: Some(span("1d")),
            storage_class: Some("STANDARD_IA".into()),
            transitions: vec![Transition {
                after_days: 90,
                storage_class: "GLACIER_IR".into(),
            }],
            objectives: Some(
                serde_json::from_value(json!({"window": "365d", "tested_within": "30d"})).unwrap(),
            ),
        }],
        objectives: Some(
            serde_json::from_value(json!({"rpo": "1h", "window": "14d", "tested_within": "7d"}))
                .unwrap(),
        ),
        ..least()
    }
}

/// The manifest `sexton get schedules -o yaml` writes for a schedule created from `spec`.
fn as_got(spec: &ScheduleSpec) -> Value {
    let mut record = serde_json::to_value(spec).unwrap();
    let object = record.as_object_mut().unwrap();
    for key in ["confirm", "dry_run", "starting_deadline"] {
        object.remove(key);
    }
    object.insert(
        "starting_deadline_seconds".into(),
        json!(spec.deadline_seconds()),
    );
    object.insert("created_at".into(), json!("2026-03-01T00:00:00Z"));
    let record: ScheduleRecord = serde_json::from_value(record).unwrap();
    manifest::manifest_of(&record, None)
}

/// The manifest `sexton get schedules` writes with its status, for a schedule of `spec`
/// whose status sets every field a status shows.
fn as_got_with_status(spec: &ScheduleSpec) -> Value {
    let mut record = serde_json::to_value(spec).unwrap();
    let object = record.as_object_mut().unwrap();
    for key in ["confirm", "dry_run", "starting_deadline"] {
        object.remove(key);
    }
    object.insert("created_at".into(), json!("2026-03-01T00:00:00Z"));
    object.insert("generation".into(), json!(3));
    object.insert(
        "status".into(),
        json!({
            "phase": "enabled", "observed_generation": 3,
            "last_backup": "2026-03-02T03:00:00Z", "last_completed": "2026-03-01T03:04:00Z",
            "next_run_time": "2026-03-03T03:00:00Z", "last_skipped": "2026-03-01T04:00:00Z",
            "last_skip_reason": "in_flight", "consecutive_failures": 2,
            "last_failed_backup": "b9", "last_backup_failed": true,
        }),
    );
    let record: ScheduleRecord = serde_json::from_value(record).unwrap();
    let now = "2026-03-02T12:00:00Z".parse().unwrap();
    manifest::manifest_of(&record, Some(now))
}

/// The manifest a person writes for `spec` as it is (with `skip_immediately` and the old
/// `starting_deadline_seconds`, which `sexton get` never writes).
fn as_written(spec: &ScheduleSpec) -> Value {
    let Value::Object(mut body) = serde_json::to_value(spec).unwrap() else {
        unreachable!("a spec is an object");
    };
    for key in ["schema_version", "confirm", "dry_run"] {
        body.remove(key);
    }
    let mut metadata = serde_json::Map::new();
    for key in ["name", "labels", "annotations"] {
        if let Some(value) = body.remove(key) {
            metadata.insert(key.into(), value);
        }
    }
    json!({"apiVersion": "sexton.io/v1", "kind": "Schedule", "metadata": metadata, "spec": body})
}

/// What the CLI's reader makes of `manifest` (as `sexton apply -f` reads a JSON file).
fn read(manifest: &Value) -> Result<ScheduleManifest, Vec<String>> {
    let text = serde_json::to_string_pretty(manifest).unwrap();
    let (documents, errors) = manifest::parse(Path::new("manifest.json"), &text);
    if !errors.is_empty() {
        return Err(errors);
    }
    manifest::schedules(&documents).map(|mut found| found.remove(0))
}

/// Spellings a person may write that no serialised Rust value carries, each read by the CLI.
fn spellings() -> Vec<Value> {
    let mut karbor = as_got(&least());
    karbor["spec"]["policy"] = json!({
        "max_backups": "5", "retention_duration": "30", "keep_daily": "unlimited",
    });
    karbor["spec"]["full_every"] = json!("7");
    karbor["spec"]["jitter"] = json!(900);
    karbor["spec"]["starting_deadline"] = json!(" 1h30m ");
    karbor["status"] = json!({});
    let mut numbers = as_got(&least());
    numbers["spec"]["policy"] = json!({"max_backups": 5, "keep_weekly": 0});
    numbers["spec"]["breaker"] = json!({"enabled": false, "stale_after": "off"});
    vec![karbor, numbers]
}

#[test]
fn schedule_manifest() {
    let mut old_spelling = every();
    old_spelling.starting_deadline = None;
    old_spelling.starting_deadline_seconds = Some(7_200);
    old_spelling.skip_immediately = Some(true);
    let mut values = vec![
        as_got(&least()),
        as_got(&every()),
        as_got_with_status(&least()),
        as_got_with_status(&every()),
        as_written(&least()),
        as_written(&old_spelling),
    ];
    values.extend(spellings());
    for value in &values {
        read(value).unwrap_or_else(|errors| panic!("the reader refuses {value:#}: {errors:?}"));
    }
    // The maximal spec is one the server takes too, not only the reader.
    sexton_schedule::Window::parse_all(&every().exclude).unwrap();
    sexton_model::copies::validate_copy_rules(&every().copies, Some(1.0)).unwrap();

    let root = check_carrying(NAME, &values, NOT_YET_CARRIED);
    for example in root["examples"].as_array().unwrap() {
        let read = read(example).unwrap_or_else(|e| panic!("an example is refused: {e:?}"));
        sexton_schedule::Window::parse_all(&read.spec.exclude).unwrap();
        sexton_model::copies::validate_copy_rules(&read.spec.copies, Some(1.0)).unwrap();
    }

    let status = &root["properties"]["status"]["properties"];
    enum_matches(
        &status["phase"],
        &[
            SchedulePhase::New,
            SchedulePhase::Enabled,
            SchedulePhase::Paused,
            SchedulePhase::FailedValidation,
        ],
    );
    enum_matches(
        &status["lastBackupOutcome"],
        &[
            BackupOutcome::Running,
            BackupOutcome::Failed,
            BackupOutcome::Completed,
            BackupOutcome::Unreported,
        ],
    );
    let spec = &root["properties"]["spec"]["properties"];
    enum_matches(
        &spec["overlap_policy"],
        &[OverlapPolicy::Skip, OverlapPolicy::Allow],
    );
    enum_matches(
        &spec["backup_owner"],
        &[
            BackupOwner::Schedule,
            BackupOwner::Cluster,
            BackupOwner::Standalone,
        ],
    );
    enum_matches(&spec["on_blackout"], &[OnBlackout::Skip, OnBlackout::Defer]);
    enum_matches(
        &spec["verify"]["properties"]["pick"],
        &[
            VerifyPick::Latest,
            VerifyPick::Random,
            VerifyPick::OldestKept,
            VerifyPick::Each,
            VerifyPick::Point,
        ],
    );
    enum_matches(
        &spec["copies"]["items"]["properties"]["select"],
        &[CopySelect::All, CopySelect::Fulls, CopySelect::Kept],
    );
    enum_matches(
        &root["$defs"]["policy"]["properties"]["chain_mode"],
        &[ChainMode::Keep, ChainMode::Merge],
    );
    let classes: Vec<&str> = root["$defs"]["storage_class"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let known: Vec<&str> = STORAGE_CLASSES.iter().map(|c| c.name).collect();
    assert_eq!(classes, known);
}

/// The spec's properties are exactly `ScheduleSpec`'s fields less those a manifest keeps
/// elsewhere, and the schema's `spec` description keeps saying which those are.
#[test]
fn spec_is_schedule_create_less_metadata_and_switches() {
    let root = schema(NAME);
    let declared: Vec<&String> = root["properties"]["spec"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    let mut fields: Vec<String> = serde_json::to_value(every())
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .filter(|key| {
            !matches!(
                key.as_str(),
                "name" | "labels" | "annotations" | "schema_version" | "confirm" | "dry_run"
            )
        })
        .cloned()
        .collect();
    // Never serialised when unset; `every` leaves them unset.
    fields.extend([
        "skip_immediately".into(),
        "starting_deadline_seconds".into(),
    ]);
    let mut declared: Vec<String> = declared.into_iter().cloned().collect();
    declared.sort();
    fields.sort();
    assert_eq!(declared, fields);
}

/// Manifests the reader refuses fail the schema too (an editor marks them before apply does).
#[test]
fn malformed_manifests_fail_the_schema() {
    let good = as_got(&every());
    let mut validator = Validator::new(schema(NAME));
    assert!(validator.check(&good).is_empty());
    type Change = fn(&mut Value);
    // (what, the change, whether the CLI's reader refuses it as well: some checks are the
    // server's, which knows the windows' zones and the locations)
    let cases: &[(&str, Change, bool)] = &[
        (
            "unknown spec field",
            |m| m["spec"]["colour"] = json!("red"),
            true,
        ),
        ("spec.name", |m| m["spec"]["name"] = json!("other"), true),
        ("spec.labels", |m| m["spec"]["labels"] = json!({}), true),
        ("spec.confirm", |m| m["spec"]["confirm"] = json!(true), true),
        (
            "apiVersion",
            |m| m["apiVersion"] = json!("sexton.io/v2"),
            true,
        ),
        ("kind", |m| m["kind"] = json!("Location"), true),
        ("top-level field", |m| m["extra"] = json!(1), true),
        (
            "metadata field",
            |m| m["metadata"]["owner"] = json!("x"),
            true,
        ),
        (
            "no metadata.name",
            |m| {
                m["metadata"].as_object_mut().unwrap().remove("name");
            },
            true,
        ),
        (
            "long name",
            |m| m["metadata"]["name"] = json!("n".repeat(64)),
            true,
        ),
        (
            "no cron",
            |m| {
                m["spec"].as_object_mut().unwrap().remove("cron");
            },
            true,
        ),
        (
            "bad enum",
            |m| m["spec"]["overlap_policy"] = json!("sometimes"),
            true,
        ),
        (
            "bad pick",
            |m| m["spec"]["verify"]["pick"] = json!("newest"),
            true,
        ),
        (
            "bad select",
            |m| m["spec"]["copies"][0]["select"] = json!("some"),
            true,
        ),
        (
            "span without unit",
            |m| m["spec"]["jitter"] = json!("90"),
            true,
        ),
        ("zero span", |m| m["spec"]["jitter"] = json!(0), true),
        (
            "policy without rule",
            |m| m["spec"]["policy"] = json!({"failed_grace": "1h"}),
            true,
        ),
        (
            "unknown policy rule",
            |m| m["spec"]["policy"] = json!({"keep_dayly": 7}),
            true,
        ),
        (
            "negative count",
            |m| m["spec"]["policy"] = json!({"keep_daily": -7}),
            true,
        ),
        (
            "grace in m",
            |m| m["spec"]["policy"] = json!({"keep_last": 1, "failed_grace": "5m"}),
            true,
        ),
        (
            "empty tag list",
            |m| m["spec"]["policy"] = json!({"keep_tags": [[]]}),
            true,
        ),
        (
            "label value",
            |m| m["metadata"]["labels"] = json!({"team": "db team"}),
            true,
        ),
        (
            "label key",
            |m| m["metadata"]["labels"] = json!({"-team": "db"}),
            true,
        ),
        (
            "volume twice",
            |m| m["spec"]["volumes"] = json!(["data", "data"]),
            true,
        ),
        (
            "fraction",
            |m| m["spec"]["breaker"]["max_delete_fraction"] = json!(1.5),
            true,
        ),
        (
            "stale_after",
            |m| m["spec"]["breaker"]["stale_after"] = json!("never"),
            true,
        ),
        (
            "timeout",
            |m| m["spec"]["verify"]["timeout"] = json!("1h30m"),
            true,
        ),
        (
            "pause_after_failures",
            |m| m["spec"]["pause_after_failures"] = json!(0),
            true,
        ),
        (
            "copy field",
            |m| m["spec"]["copies"][0]["bucket"] = json!("x"),
            true,
        ),
        (
            "window field",
            |m| m["spec"]["exclude"][0]["days"] = json!(2),
            true,
        ),
        // The reader leaves these to the server.
        (
            "cron window without duration",
            |m| m["spec"]["exclude"] = json!([{"cron": "0 8 * * *"}]),
            false,
        ),
        (
            "storage class",
            |m| m["spec"]["copies"][0]["storage_class"] = json!("COLD"),
            false,
        ),
        (
            "negative generation",
            |m| m["metadata"]["generation"] = json!(-1),
            false,
        ),
    ];
    for (what, change, reader_refuses) in cases {
        let mut bad = good.clone();
        change(&mut bad);
        assert!(
            !validator.check(&bad).is_empty(),
            "{what}: the schema takes {bad:#}"
        );
        if *reader_refuses {
            assert!(read(&bad).is_err(), "{what}: the reader takes it");
        }
    }
}

/// Each pattern, as a regular expression, against the parser it stands for: what the parser
/// takes it matches, what it does not match the parser refuses, and what it matches that the
/// parser still refuses is listed (bounds a pattern cannot say).
#[test]
fn patterns_say_what_the_parsers_take() {
    use validator::*;
    let long = "a".repeat(129);
    let long_label = format!("a{}", "b".repeat(63));
    // (pattern, taken by both, refused by both, matched but refused by the parser)
    type Texts<'a> = &'a [&'a str];
    let cases: &[(&str, Texts, Texts, Texts)] = &[
        (
            NAME_PATTERN,
            &["a", "db-1", "Prod_2", "0abc"],
            &["", "-a", "_a", "a.b", "a/b", "a b", &long],
            &[],
        ),
        (
            SHA256_PATTERN,
            &[&"0a".repeat(32)],
            &["", &"0A".repeat(32), &"0a".repeat(31)],
            &[],
        ),
        (
            SPAN_PATTERN,
            &["90s", "15m", "1h30m", "2d", "1d12h", " 45s ", "1s1s"],
            &["", "90", "1.5h", "500ms", "3w", "-5m", "m", "1h 30m"],
            &["0s", "0h0m", "4000d", "99999999999999999999s"],
        ),
        (
            CALENDAR_DURATION_PATTERN,
            &["7d", "1y2m3d4h", "3d1y", " 2d "],
            &["", "7", "7w", "1.5d", "30min", "d"],
            &["0d", "1d1d", "5000000000d"],
        ),
        (
            RECOVERY_WINDOW_PATTERN,
            &["30d", "4w", "1m", "12h", "90min", "600s"],
            &["", "d", "30", "30 d", " 30d", "1y", "1h30m"],
            &["0d", "5000000000d"],
        ),
        (
            GRACE_PATTERN,
            &["1h", "30min", "600s", "2d", "0h", "never"],
            &["", "5m", "h", "1w", " 1h", "1h30min", "Never", "forever"],
            &["5000000000h"],
        ),
        (
            TIMEOUT_PATTERN,
            &["90s", "30m", "2h", "1d", " 7d "],
            &["", "1h30m", "2", "h", "1w"],
            &["30s", "8d", "99999999999999999999s"],
        ),
        (
            DIGITS_PATTERN,
            &["1", "7", "0007"],
            &["", "-1", "+1", "1.0", " 1", "x"],
            &["0", "5000000000"],
        ),
        (
            LABEL_KEY_PATTERN,
            &["app", "example.com/tier", "a.b_c-d", "x/Y"],
            &[
                "",
                "-a",
                "a-",
                "Example.com/a",
                "/a",
                "a/",
                "a/b/c",
                &long_label,
            ],
            &[],
        ),
        (
            LABEL_VALUE_PATTERN,
            &["", "db", "v1.2_3-x"],
            &["db team", "-db", "db-", &long_label],
            &[],
        ),
        (
            NO_CONTROL_PATTERN,
            &["", "any text: é, ü, 🙂", "https://x/y?z=1"],
            &["a\nb", "tab\there", "\u{7f}", "\u{85}"],
            &[],
        ),
        (
            PLUGIN_SUBJECT_PATTERN,
            &["sexton.v1.plugin.a", "sexton.v1.plugin.snap-shots.v_2"],
            &[
                "",
                "sexton.v1.plugin.",
                "sexton.v1.plugin.*",
                "sexton.v1.plugin.>",
                "sexton.v1.plugin.a..b",
                "sexton.v1.plugin.a.",
                "sexton.v1.plugins.a",
                "other.a",
            ],
            &[],
        ),
    ];
    for (pattern, accepts) in patterns() {
        let (_, both, neither, beyond) = cases
            .iter()
            .find(|(p, ..)| *p == pattern)
            .unwrap_or_else(|| panic!("pattern {pattern} has no cases here"));
        let regex = regex::Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        for text in *both {
            assert!(regex.is_match(text), "{pattern} does not match {text:?}");
            assert!(accepts(text), "the parser of {pattern} refuses {text:?}");
        }
        for text in *neither {
            assert!(!regex.is_match(text), "{pattern} matches {text:?}");
            assert!(!accepts(text), "the parser of {pattern} takes {text:?}");
        }
        for text in *beyond {
            assert!(regex.is_match(text), "{pattern} does not match {text:?}");
            assert!(!accepts(text), "the parser of {pattern} takes {text:?}");
        }
    }
}

const PLUGIN: &str = "delete-plugin.manifest";

/// What `sexton get deleteplugins` writes for a plugin registered as `spec` says.
fn plugin_as_got(spec: serde_json::Value, with_status: bool) -> Value {
    let spec: sexton_shared::api::PluginSpec = serde_json::from_value(spec).unwrap();
    manifest::plugin_manifest_of(&spec, with_status)
}

/// What the CLI's reader makes of a plugin manifest.
fn read_plugin(manifest: &Value) -> Result<manifest::PluginManifest, Vec<String>> {
    let text = serde_json::to_string_pretty(manifest).unwrap();
    let (documents, errors) = manifest::parse(Path::new("plugin.json"), &text);
    if !errors.is_empty() {
        return Err(errors);
    }
    manifest::manifests(&documents).map(|mut found| found.plugins.remove(0))
}

#[test]
fn delete_plugin_manifest() {
    let least = json!({"name": "p", "subject": "sexton.v1.plugin.p"});
    let every = json!({
        "name": "snapshots", "subject": "sexton.v1.plugin.snapshots.v2",
        "selector": {"tier": "gold", "example.com/app": "db"}, "timeout_seconds": 600,
        "labels": {"team": "db"}, "annotations": {"owner": "dba team"},
        "registered_at": "2026-03-01T00:00:00Z",
    });
    let mut values = vec![
        plugin_as_got(least.clone(), false),
        plugin_as_got(least, true),
        plugin_as_got(every.clone(), false),
        plugin_as_got(every, true),
    ];
    // What a person may add that get never writes: a generation (ignored), an empty status.
    let mut written = values[2].clone();
    written["metadata"]["generation"] = json!(2);
    written["status"] = json!({});
    values.push(written);
    for value in &values {
        read_plugin(value)
            .unwrap_or_else(|errors| panic!("the reader refuses {value:#}: {errors:?}"));
    }
    let root = check_carrying(PLUGIN, &values, &[]);
    for example in root["examples"].as_array().unwrap() {
        read_plugin(example).unwrap_or_else(|e| panic!("an example is refused: {e:?}"));
    }
    // The spec's properties are exactly plugin.register's fields less metadata's and the
    // deleter's own.
    let declared: Vec<&str> = root["properties"]["spec"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let every_field = serde_json::to_value(sexton_shared::api::PluginSpec {
        schema_version: 1,
        name: "p".into(),
        subject: "sexton.v1.plugin.p".into(),
        selector: BTreeMap::from([("a".to_string(), "b".to_string())]),
        timeout_seconds: Some(1),
        labels: BTreeMap::from([("a".to_string(), "b".to_string())]),
        annotations: BTreeMap::from([("a".to_string(), "b".to_string())]),
        registered_at: Some(chrono::Utc::now()),
    })
    .unwrap();
    let mut fields: Vec<&str> = every_field
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|f| {
            ![
                "schema_version",
                "name",
                "labels",
                "annotations",
                "registered_at",
            ]
            .contains(f)
        })
        .collect();
    fields.sort();
    let mut declared = declared;
    declared.sort();
    assert_eq!(declared, fields);

    // Malformed plugin manifests fail the schema, and the reader refuses them too.
    let good = values[2].clone();
    type Break = fn(&mut Value);
    let broken: &[(&str, Break)] = &[
        ("unknown spec field", |m| m["spec"]["retries"] = json!(3)),
        ("spec.name", |m| m["spec"]["name"] = json!("x")),
        ("registered_at in spec", |m| {
            m["spec"]["registered_at"] = json!("2026-03-01T00:00:00Z")
        }),
        ("a wildcard subject", |m| {
            m["spec"]["subject"] = json!("sexton.v1.plugin.>")
        }),
        ("a subject elsewhere", |m| {
            m["spec"]["subject"] = json!("other.p")
        }),
        ("timeout 0", |m| m["spec"]["timeout_seconds"] = json!(0)),
        ("timeout 601", |m| m["spec"]["timeout_seconds"] = json!(601)),
        ("no subject", |m| {
            m["spec"].as_object_mut().unwrap().remove("subject");
        }),
        ("a selector label with a control character", |m| {
            m["spec"]["selector"] = json!({"tier\n": "x"})
        }),
        ("an empty selector key", |m| {
            m["spec"]["selector"] = json!({"": "x"})
        }),
        ("a selector value too long", |m| {
            m["spec"]["selector"] = json!({"tier": "x".repeat(254)})
        }),
        ("kind", |m| m["kind"] = json!("Plugin")),
        ("apiVersion", |m| m["apiVersion"] = json!("sexton.io/v2")),
        ("metadata.uid", |m| m["metadata"]["uid"] = json!("x")),
    ];
    let mut validator = Validator::new(schema(PLUGIN));
    for (what, breaks) in broken {
        let mut bad = good.clone();
        breaks(&mut bad);
        assert!(
            !validator.check(&bad).is_empty(),
            "the schema takes {what}: {bad:#}"
        );
        assert!(
            read_plugin(&bad).is_err(),
            "the reader takes {what}: {bad:#}"
        );
    }
}

const LOCATION: &str = "location.manifest";

/// What the CLI's reader makes of a location manifest.
fn read_location(manifest: &Value) -> Result<manifest::LocationManifest, Vec<String>> {
    let text = serde_json::to_string_pretty(manifest).unwrap();
    let (documents, errors) = manifest::parse(Path::new("location.json"), &text);
    if !errors.is_empty() {
        return Err(errors);
    }
    manifest::manifests(&documents).map(|mut found| found.locations.remove(0))
}

#[test]
fn location_manifest() {
    use sexton_shared::api::{LocationLock, LocationSpec};
    let least = LocationSpec {
        name: "dr".into(),
        ..LocationSpec::default()
    };
    let every = LocationSpec {
        name: "dr".into(),
        endpoint: Some("http://127.0.0.1:9000".into()),
        region: Some("us-east-1".into()),
        bucket: Some("sexton-dr".into()),
        prefix: Some("sexton".into()),
        force_path_style: Some(true),
        storage_class: Some("STANDARD_IA".into()),
        lock: Some(LocationLock {
            mode: "compliance".into(),
            tiers: "min=1d,daily=35d".into(),
        }),
    };
    let mut values = vec![
        manifest::location_manifest_of(&least),
        manifest::location_manifest_of(&every),
    ];
    let mut written = values[1].clone();
    written["metadata"]["generation"] = json!(1);
    written["status"] = json!({});
    values.push(written);
    for value in &values {
        read_location(value)
            .unwrap_or_else(|errors| panic!("the reader refuses {value:#}: {errors:?}"));
    }
    let root = check_carrying(LOCATION, &values, &[]);
    for example in root["examples"].as_array().unwrap() {
        read_location(example).unwrap_or_else(|e| panic!("an example is refused: {e:?}"));
    }
    // The spec's properties are exactly LocationSpec's fields less the name.
    let mut declared: Vec<&str> = root["properties"]["spec"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    declared.sort();
    let every_value = serde_json::to_value(&every).unwrap();
    let mut fields: Vec<&str> = every_value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|f| *f != "name")
        .collect();
    fields.sort();
    assert_eq!(declared, fields);

    let good = values[1].clone();
    type Break = fn(&mut Value);
    let broken: &[(&str, Break)] = &[
        ("credentials", |m| {
            m["spec"]["secret_access_key"] = json!("x")
        }),
        ("an access key", |m| m["spec"]["access_key_id"] = json!("x")),
        ("labels", |m| m["metadata"]["labels"] = json!({"a": "b"})),
        ("annotations", |m| {
            m["metadata"]["annotations"] = json!({"a": "b"})
        }),
        ("a lock mode", |m| {
            m["spec"]["lock"]["mode"] = json!("forever")
        }),
        ("a control character", |m| {
            m["spec"]["bucket"] = json!("a\nb")
        }),
        ("spec.name", |m| m["spec"]["name"] = json!("x")),
        ("force_path_style as text", |m| {
            m["spec"]["force_path_style"] = json!("yes")
        }),
    ];
    let mut validator = Validator::new(schema(LOCATION));
    for (what, breaks) in broken {
        let mut bad = good.clone();
        breaks(&mut bad);
        assert!(
            !validator.check(&bad).is_empty(),
            "the schema takes {what}: {bad:#}"
        );
        assert!(
            read_location(&bad).is_err(),
            "the reader takes {what}: {bad:#}"
        );
    }
}
