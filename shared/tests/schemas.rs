//! The executor contract's JSON Schemas (`docs/schemas/`) against the Rust types they describe,
//! so a schema that drifts from the code fails CI:
//!
//! - values built from the Rust types — one with every optional field set, one with none —
//!   validate against their schema (the schema requires nothing the code may leave out, and
//!   types, enums, patterns and formats agree);
//! - every property those values carry is declared by the schema (a field added to the code
//!   must be documented), and every property the schema declares is carried by one of them (a
//!   field documented must exist in the code);
//! - each schema's own `examples` validate and decode with the decoder the services use;
//! - each `enum` lists exactly the values of the Rust enum behind it.
//!
//! The validator (`validator/mod.rs`, shared with the manifest schema's test in the CLI) is a
//! small one for the subset of JSON Schema these files use; a keyword it does not know fails
//! the test, so a schema cannot rely on a check nobody runs.

use std::collections::BTreeMap;

use serde_json::json;
use sexton_model::{
    metadata::BackupMetadata,
    records::BackupKind,
    wire::{
        self, DueBackup, DueVolume, MergeBackup, MergeDone, MergeJob, ObjectDigest, Report,
        ReportStatus, ReportVolume, Verdict, VerdictOutcome, VerifyBackup, VerifyDue, VerifyObject,
    },
};
use sexton_shared::{
    api::BackupRef,
    binlog::{BinlogIndex, IndexSegment},
};

#[path = "validator/mod.rs"]
mod validator;
use validator::{
    check, enum_matches, examples, Validator, LABEL_KEY_PATTERN, NAME_PATTERN, SPAN_PATTERN,
};

fn at(text: &str) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(text).unwrap()
}

fn name<T: std::str::FromStr>(text: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    text.parse().unwrap()
}

fn digest(key: &str) -> ObjectDigest {
    ObjectDigest {
        key: key.into(),
        size: 42,
        sha256: Some(sexton_model::digest::sha256_hex(key.as_bytes())),
        version_id: None,
    }
}

fn volume(failed: bool) -> ReportVolume {
    ReportVolume {
        name: "pv1".into(),
        kind: BackupKind::Incremental,
        parent: Some(name("b1")),
        keys: vec!["backups/c1/s/b2/pv1/disk.img".into()],
        failed,
        size_bytes: Some(42),
    }
}

#[test]
fn due_backup() {
    let full = DueBackup {
        schema_version: 1,
        schedule: name("s"),
        cluster: name("c1"),
        plan: name("p"),
        tick: at("2026-03-01T03:00:00Z").into(),
        fired_at: at("2026-03-01T03:00:01Z").into(),
        backup_id: name("b2"),
        backup_name: "s".into(),
        object_prefix: "backups/c1/s/b2/".into(),
        kind: BackupKind::Full,
        parent: None,
        kind_reason: None,
        volumes: Vec::new(),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        backfill: None,
    };
    let every = DueBackup {
        kind: BackupKind::Incremental,
        parent: Some(name("b1")),
        kind_reason: Some("chain_continues".into()),
        volumes: vec![DueVolume {
            name: "pv1".into(),
            kind: BackupKind::Incremental,
            parent: Some(name("b1")),
            reason: Some("chain_continues".into()),
        }],
        labels: [("team".to_string(), "db".to_string())].into(),
        annotations: [(
            "sexton.io/executor-holds".to_string(),
            "upgrade:pg16".to_string(),
        )]
        .into(),
        backfill: Some(1_767_225_600_000),
        ..full.clone()
    };
    let root = check("due-backup", &[json!(full), json!(every)]);
    for body in examples(&root) {
        wire::decode::<DueBackup>(&body).expect("the example decodes");
    }
    enum_matches(
        &root["$defs"]["kind"],
        &[BackupKind::Full, BackupKind::Incremental],
    );
}

#[test]
fn report() {
    let started = Report {
        schema_version: 1,
        backup_id: name("b2"),
        cluster: name("c1"),
        plan: name("p"),
        schedule: None,
        backup_name: "s".into(),
        status: ReportStatus::Started,
        kind: BackupKind::Full,
        parent: None,
        started_at: None,
        completed_at: None,
        artifacts: Vec::new(),
        size_bytes: None,
        labels: BTreeMap::new(),
        tags: Vec::new(),
        error: None,
        volumes: Vec::new(),
        holds: Vec::new(),
        merge: None,
        objects: Vec::new(),
        tick: None,
        log_range: None,
        differential: false,
    };
    let merged = Report {
        schedule: Some(name("s")),
        status: ReportStatus::Completed,
        started_at: Some(at("2026-03-01T03:00:00Z")),
        completed_at: Some(at("2026-03-01T03:04:00Z")),
        artifacts: vec![
            "backups/c1/s/b2/pv1/disk.img".into(),
            "backups/c1/s/b2/metadata.json".into(),
        ],
        size_bytes: Some(84),
        labels: [("team".to_string(), "db".to_string())].into(),
        tags: vec!["synthetic-full:pv1".into()],
        volumes: vec![ReportVolume {
            kind: BackupKind::Full,
            parent: None,
            ..volume(false)
        }],
        holds: vec!["restore:r-42".into()],
        merge: Some(MergeDone {
            target_uid: "u2".into(),
            sources: vec![name("b1")],
            volume: Some("pv1".into()),
        }),
        objects: vec![digest("backups/c1/s/b2/pv1/disk.img")],
        tick: Some(at("2026-03-01T03:00:00Z").into()),
        ..started.clone()
    };
    let failed = Report {
        status: ReportStatus::Failed,
        kind: BackupKind::Incremental,
        parent: Some(name("b1")),
        completed_at: Some(at("2026-03-01T03:04:00Z")),
        error: Some("the command exited with status 3".into()),
        volumes: vec![volume(true)],
        ..started.clone()
    };
    let root = check("report", &[json!(started), json!(merged), json!(failed)]);
    for body in examples(&root) {
        wire::decode::<Report>(&body).expect("the example decodes");
    }
    enum_matches(
        &root["properties"]["status"],
        &[
            ReportStatus::Started,
            ReportStatus::Completed,
            ReportStatus::Failed,
        ],
    );
}

#[test]
fn verify_due() {
    let backup =
        |id: &str, kind: BackupKind, parent: Option<&str>, object: VerifyObject| VerifyBackup {
            id: name(id),
            uid: format!("u-{id}"),
            backup_name: "s".into(),
            kind,
            parent: parent.map(name),
            objects: vec![object],
        };
    let bare = VerifyObject {
        key: "backups/c1/s/b1/backup.xbstream".into(),
        size: None,
        sha256: None,
        version_id: None,
    };
    let least = VerifyDue {
        schema_version: 1,
        request_id: "manual-20260301060000-a1b2c3".into(),
        cluster: name("c1"),
        plan: name("p"),
        schedule: None,
        backup_id: name("b1"),
        uid: "u-b1".into(),
        requested_at: at("2026-03-01T06:00:00Z").into(),
        deadline: at("2026-03-01T07:00:00Z").into(),
        chain: vec![backup("b1", BackupKind::Full, None, bare.clone())],
        location: None,
        replay: None,
    };
    let every = VerifyDue {
        request_id: "s-20260301060000".into(),
        schedule: Some(name("s")),
        backup_id: name("b2"),
        uid: "u-b2".into(),
        chain: vec![
            backup("b1", BackupKind::Full, None, bare),
            backup(
                "b2",
                BackupKind::Incremental,
                Some("b1"),
                VerifyObject {
                    key: "backups/c1/s/b2/backup.xbstream".into(),
                    size: Some(42),
                    sha256: Some(sexton_model::digest::sha256_hex(b"b2")),
                    version_id: Some("3sL4kqtJlcpXroDTDmJ-rmSpXd3dIbrHY".into()),
                },
            ),
        ],
        location: Some(sexton_model::names::LocationName::new("dr").unwrap()),
        replay: Some(sexton_model::wire::VerifyReplay {
            since: at("2026-03-01T02:00:00Z").into(),
            until: at("2026-03-01T05:30:00Z").into(),
        }),
        ..least.clone()
    };
    let root = check("verify-due", &[json!(least), json!(every)]);
    for body in examples(&root) {
        wire::decode::<VerifyDue>(&body).expect("the example decodes");
    }
    enum_matches(
        &root["$defs"]["kind"],
        &[BackupKind::Full, BackupKind::Incremental],
    );
}

#[test]
fn verdict() {
    let least = Verdict {
        schema_version: 1,
        request_id: "s-20260301060000".into(),
        cluster: name("c1"),
        backup_id: name("b2"),
        uid: "u-b2".into(),
        outcome: VerdictOutcome::VerifyFailed,
        reason: None,
        duration_ms: 0,
        chain: Vec::new(),
        checked: Vec::new(),
        bytes_read: 0,
    };
    let every = Verdict {
        outcome: VerdictOutcome::Verified,
        reason: Some("restored".into()),
        duration_ms: 5230,
        chain: vec![name("b1"), name("b2")],
        checked: vec!["backups/c1/s/b2/backup.xbstream".into()],
        bytes_read: 42,
        ..least.clone()
    };
    let root = check("verdict", &[json!(least), json!(every)]);
    for body in examples(&root) {
        wire::decode::<Verdict>(&body).expect("the example decodes");
    }
    enum_matches(
        &root["properties"]["outcome"],
        &[VerdictOutcome::Verified, VerdictOutcome::VerifyFailed],
    );
}

#[test]
fn merge_job() {
    let backup = |id: &str, parent: Option<&str>| MergeBackup {
        id: name(id),
        uid: format!("u-{id}"),
        backup_name: "s".into(),
        parent: parent.map(name),
        artifacts: vec![format!("backups/c1/s/{id}/backup.xbstream")],
    };
    let whole = MergeJob {
        schema_version: 1,
        cluster: name("c1"),
        plan: name("p"),
        target: backup("b2", Some("b1")),
        sources: vec![backup("b1", None)],
        volume: None,
    };
    let of_volume = MergeJob {
        volume: Some("pv1".into()),
        ..whole.clone()
    };
    let root = check("merge-job", &[json!(whole), json!(of_volume)]);
    for body in examples(&root) {
        wire::decode::<MergeJob>(&body).expect("the example decodes");
    }
}

#[test]
fn backup_metadata() {
    let least = BackupMetadata {
        format: sexton_model::metadata::FORMAT.into(),
        schema_version: 1,
        backup_id: name("b2"),
        cluster: name("c1"),
        plan: name("p"),
        schedule: None,
        backup_name: "s".into(),
        kind: BackupKind::Full,
        parent: None,
        status: ReportStatus::Completed,
        started_at: None,
        completed_at: at("2026-03-01T03:04:00Z"),
        objects: Vec::new(),
        volumes: Vec::new(),
        labels: BTreeMap::new(),
        tags: Vec::new(),
        executor: None,
        log_range: None,
        differential: false,
    };
    let every = BackupMetadata {
        schedule: Some(name("s")),
        kind: BackupKind::Incremental,
        parent: Some(name("b1")),
        status: ReportStatus::Failed,
        started_at: Some(at("2026-03-01T03:00:00Z")),
        objects: vec![digest("backups/c1/s/b2/pv1/disk.img")],
        volumes: vec![volume(true)],
        labels: [("team".to_string(), "db".to_string())].into(),
        tags: vec!["synthetic-full".into()],
        executor: Some(json!({"to_lsn": "44894"})),
        ..least.clone()
    };
    let root = check("backup-metadata", &[json!(least), json!(every)]);
    for body in examples(&root) {
        BackupMetadata::decode(&body).expect("the example decodes");
    }
    // `started` is a report status, never a document's: the schema leaves it out and the
    // decoder refuses it.
    let statuses: Vec<&str> = root["properties"]["status"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "failed"]);
    let mut started = serde_json::to_value(&least).unwrap();
    started["status"] = json!("started");
    assert!(BackupMetadata::decode(&serde_json::to_vec(&started).unwrap()).is_err());
}

#[test]
fn binlog_index() {
    let mut index = BinlogIndex::empty();
    let mut every = index.clone();
    let mut segment = IndexSegment::new(
        "backups/c1/binlog/mysql-bin.000001",
        Some(at("2026-03-01T00:00:00Z")),
        Some(at("2026-03-01T01:00:00Z")),
    );
    segment.extra.insert("size".into(), json!(1078));
    segment.extra.insert(
        "sha256".into(),
        json!(sexton_model::digest::sha256_hex(b"x")),
    );
    every.apply_appends(&[segment]);
    every.generation = 3;
    index.apply_appends(&[IndexSegment::new(
        "backups/c1/binlog/mysql-bin.000002",
        None,
        None,
    )]);
    let root = check(
        "binlog-index",
        &[
            serde_json::from_slice(&index.to_json()).unwrap(),
            serde_json::from_slice(&every.to_json()).unwrap(),
        ],
    );
    for body in examples(&root) {
        BinlogIndex::parse(&body).expect("the example parses");
    }
}

#[test]
fn backup_taken_request() {
    let request = BackupRef {
        schema_version: 1,
        cluster: name("c1"),
        id: name("b2"),
    };
    let root = check("backup-taken-request", &[json!(request)]);
    for body in examples(&root) {
        wire::decode::<BackupRef>(&body).expect("the example decodes");
    }
}

/// The validator itself refuses what it should, so a passing schema test means something.
#[test]
fn the_validator_catches_drift() {
    let root = json!({
        "type": "object", "required": ["a"],
        "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"$ref": "#/$defs/n"}},
        "$defs": {"n": {"type": "string", "pattern": NAME_PATTERN}},
    });
    let mut validator = Validator::new(root);
    assert!(validator.check(&json!({"a": 1, "b": "x"})).is_empty());
    for (bad, why) in [
        (json!({"b": "x"}), "required \"a\""),
        (json!({"a": -1}), "below"),
        (json!({"a": "1"}), "string where"),
        (json!({"a": 1, "b": "../x"}), "does not match"),
        (json!({"a": 1, "c": 2}), "not declared"),
    ] {
        let errors = validator.check(&bad).join("\n");
        assert!(errors.contains(why), "{bad}: {errors}");
    }

    // The keywords the manifest schema added (cli/tests/manifest_schemas.rs).
    let root = json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "n": {"anyOf": [
                {"type": "integer", "minimum": -1, "maximum": 9},
                {"const": "unlimited"},
            ]},
            "l": {"type": "array", "maxItems": 2, "uniqueItems": true, "items": {"type": "string"}},
            "m": {
                "type": "object", "maxProperties": 1,
                "propertyNames": {"pattern": LABEL_KEY_PATTERN},
                "additionalProperties": {"type": "string", "pattern": SPAN_PATTERN},
            },
        },
    });
    let mut validator = Validator::new(root);
    for good in [
        json!({"n": 9, "l": ["a", "b"], "m": {"example.com/app": "1h30m"}}),
        json!({"n": "unlimited"}),
    ] {
        assert_eq!(validator.check(&good), Vec::<String>::new(), "{good}");
    }
    for (bad, why) in [
        (json!({"n": 10}), "above 9"),
        (json!({"n": "all"}), "no branch of anyOf"),
        (json!({"l": ["a", "b", "c"]}), "break maxItems"),
        (json!({"l": ["a", "a"]}), "listed twice"),
        (
            json!({"m": {"a": "1m", "b": "2m"}}),
            "more than 1 properties",
        ),
        (
            json!({"m": {"Not a key": "1m"}}),
            "(the name): \"Not a key\" does not match",
        ),
        (json!({"m": {"app": "90"}}), "\"90\" does not match"),
        (json!({"x": 1}), "not allowed"),
    ] {
        let errors = validator.check(&bad).join("\n");
        assert!(errors.contains(why), "{bad}: {errors}");
    }
    // A branch of anyOf that fails leaves no property behind as carried.
    let root = json!({"anyOf": [
        {
            "type": "object", "required": ["q"],
            "properties": {"p": {"type": "string"}, "q": {"type": "integer"}},
        },
        {"type": "object"},
    ]});
    let mut validator = Validator::new(root);
    assert!(validator.check(&json!({"p": "x"})).is_empty());
    assert!(validator.seen.is_empty(), "{:?}", validator.seen);
    assert!(validator.check(&json!({"p": "x", "q": 1})).is_empty());
    assert_eq!(
        validator.seen.iter().collect::<Vec<_>>(),
        ["#/anyOf/0/properties/p", "#/anyOf/0/properties/q"]
    );
}
