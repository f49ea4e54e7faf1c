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
//! The validator is a small one for the subset of JSON Schema these files use; a keyword it
//! does not know fails the test, so a schema cannot rely on a check nobody runs. (A validator
//! crate would be a large dependency for six files, and would not do the coverage checks.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{json, Value};
use sexton_shared::{
    api::BackupRef,
    binlog::{BinlogIndex, IndexSegment},
    metadata::BackupMetadata,
    records::BackupKind,
    wire::{
        self, DueBackup, DueVolume, MergeBackup, MergeDone, MergeJob, ObjectDigest, Report,
        ReportStatus, ReportVolume, Verdict, VerdictOutcome, VerifyBackup, VerifyDue, VerifyObject,
    },
};

fn schema(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schemas")
        .join(format!("{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$";
const SHA256_PATTERN: &str = "^[0-9a-f]{64}$";
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "examples",
    "$defs",
];

/// Validates values against one schema file and remembers which declared properties it saw.
struct Validator {
    root: Value,
    seen: BTreeSet<String>,
}

impl Validator {
    fn new(root: Value) -> Validator {
        Validator {
            root,
            seen: BTreeSet::new(),
        }
    }

    fn check(&mut self, value: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        let root = self.root.clone();
        self.node(&root, "#", value, "$", &mut errors);
        errors
    }

    fn node(
        &mut self,
        schema: &Value,
        at: &str,
        value: &Value,
        path: &str,
        errors: &mut Vec<String>,
    ) {
        let Some(schema) = schema.as_object() else {
            errors.push(format!("{at}: a schema must be an object"));
            return;
        };
        if let Some(target) = schema.get("$ref") {
            let target = target.as_str().expect("$ref is a string");
            let name = target
                .strip_prefix("#/$defs/")
                .unwrap_or_else(|| panic!("{at}: only #/$defs/ references are supported"));
            let resolved = self.root["$defs"][name].clone();
            assert!(!resolved.is_null(), "{at}: {target} does not exist");
            self.node(&resolved, target, value, path, errors);
        }
        for (keyword, argument) in schema {
            let fail =
                |errors: &mut Vec<String>, what: String| errors.push(format!("{path}: {what}"));
            match keyword.as_str() {
                "$ref" => {}
                k if ANNOTATIONS.contains(&k) => {}
                "const" => {
                    if value != argument {
                        fail(errors, format!("{value} is not {argument}"));
                    }
                }
                "enum" => {
                    if !argument.as_array().expect("enum is a list").contains(value) {
                        fail(errors, format!("{value} is not one of {argument}"));
                    }
                }
                "type" => {
                    let allowed: Vec<&str> = match argument {
                        Value::String(one) => vec![one.as_str()],
                        Value::Array(many) => many.iter().map(|t| t.as_str().unwrap()).collect(),
                        _ => panic!("{at}: bad type"),
                    };
                    let actual = match value {
                        Value::Null => "null",
                        Value::Bool(_) => "boolean",
                        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
                        Value::Number(_) => "number",
                        Value::String(_) => "string",
                        Value::Array(_) => "array",
                        Value::Object(_) => "object",
                    };
                    let ok = allowed.contains(&actual)
                        || (actual == "integer" && allowed.contains(&"number"));
                    if !ok {
                        fail(errors, format!("{actual} where {allowed:?} is expected"));
                    }
                }
                "required" => {
                    if let Some(object) = value.as_object() {
                        for field in argument.as_array().unwrap() {
                            let field = field.as_str().unwrap();
                            if !object.contains_key(field) {
                                fail(errors, format!("required {field:?} is missing"));
                            }
                        }
                    }
                }
                "properties" => {
                    let declared = argument.as_object().unwrap();
                    if let Some(object) = value.as_object() {
                        for (field, item) in object {
                            match declared.get(field) {
                                Some(sub) => {
                                    self.seen.insert(format!("{at}/properties/{field}"));
                                    self.node(
                                        sub,
                                        &format!("{at}/properties/{field}"),
                                        item,
                                        &format!("{path}.{field}"),
                                        errors,
                                    );
                                }
                                None if schema
                                    .get("additionalProperties")
                                    .is_some_and(|a| a.is_object()) => {}
                                None => {
                                    fail(errors, format!("{field:?} is not declared by the schema"))
                                }
                            }
                        }
                    }
                }
                "additionalProperties" => match argument {
                    Value::Bool(false) => {
                        let declared = schema.get("properties").and_then(Value::as_object);
                        if let Some(object) = value.as_object() {
                            for field in object.keys() {
                                if !declared.is_some_and(|d| d.contains_key(field)) {
                                    fail(errors, format!("{field:?} is not allowed"));
                                }
                            }
                        }
                    }
                    Value::Object(_) => {
                        let declared = schema.get("properties").and_then(Value::as_object);
                        if let Some(object) = value.as_object() {
                            for (field, item) in object {
                                if !declared.is_some_and(|d| d.contains_key(field)) {
                                    self.node(
                                        argument,
                                        &format!("{at}/additionalProperties"),
                                        item,
                                        &format!("{path}.{field}"),
                                        errors,
                                    );
                                }
                            }
                        }
                    }
                    _ => panic!("{at}: additionalProperties is false or a schema"),
                },
                "items" => {
                    if let Some(items) = value.as_array() {
                        for (n, item) in items.iter().enumerate() {
                            self.node(
                                argument,
                                &format!("{at}/items"),
                                item,
                                &format!("{path}[{n}]"),
                                errors,
                            );
                        }
                    }
                }
                "minItems" => {
                    if value
                        .as_array()
                        .is_some_and(|a| (a.len() as u64) < argument.as_u64().unwrap())
                    {
                        fail(errors, format!("fewer than {argument} items"));
                    }
                }
                "minLength" | "maxLength" => {
                    if let Some(text) = value.as_str() {
                        let n = text.chars().count() as u64;
                        let bound = argument.as_u64().unwrap();
                        if (keyword == "minLength" && n < bound)
                            || (keyword == "maxLength" && n > bound)
                        {
                            fail(errors, format!("length {n} breaks {keyword} {bound}"));
                        }
                    }
                }
                "minimum" => {
                    if value
                        .as_f64()
                        .is_some_and(|n| n < argument.as_f64().unwrap())
                    {
                        fail(errors, format!("{value} is below {argument}"));
                    }
                }
                "format" => {
                    assert_eq!(
                        argument, "date-time",
                        "{at}: only the date-time format is supported"
                    );
                    if let Some(text) = value.as_str() {
                        if chrono::DateTime::parse_from_rfc3339(text).is_err() {
                            fail(errors, format!("{text:?} is not an RFC 3339 date-time"));
                        }
                    }
                }
                "pattern" => {
                    let ok = |text: &str| match argument.as_str().unwrap() {
                        NAME_PATTERN => sexton_shared::names::check_name("name", text).is_ok(),
                        SHA256_PATTERN => sexton_shared::digest::is_sha256_hex(text),
                        other => panic!("{at}: unsupported pattern {other}"),
                    };
                    if let Some(text) = value.as_str() {
                        if !ok(text) {
                            fail(errors, format!("{text:?} does not match {argument}"));
                        }
                    }
                }
                other => panic!("{at}: keyword {other:?} is not supported by this validator"),
            }
        }
    }

    /// Every property the schema declares, as `<location>/properties/<name>`.
    fn declared(&self) -> BTreeSet<String> {
        fn walk(schema: &Value, at: &str, out: &mut BTreeSet<String>) {
            let Some(object) = schema.as_object() else {
                return;
            };
            if let Some(properties) = object.get("properties").and_then(Value::as_object) {
                for (name, sub) in properties {
                    let here = format!("{at}/properties/{name}");
                    out.insert(here.clone());
                    walk(sub, &here, out);
                }
            }
            if let Some(items) = object.get("items") {
                walk(items, &format!("{at}/items"), out);
            }
            if let Some(defs) = object.get("$defs").and_then(Value::as_object) {
                for (name, sub) in defs {
                    walk(sub, &format!("#/$defs/{name}"), out);
                }
            }
        }
        let mut out = BTreeSet::new();
        walk(&self.root, "#", &mut out);
        out
    }
}

/// Checks `values` (built from the Rust type) against the schema `name`: all valid, and
/// together they carry every declared property. Returns the schema for further checks.
fn check(name: &str, values: &[Value]) -> Value {
    let root = schema(name);
    let mut validator = Validator::new(root.clone());
    for value in values {
        let errors = validator.check(value);
        assert!(
            errors.is_empty(),
            "{name}: a value of the Rust type fails its schema:\n{}\n{value:#}",
            errors.join("\n")
        );
    }
    let missing: Vec<String> = validator
        .declared()
        .difference(&validator.seen)
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "{name}: the schema declares properties no value of the Rust type carries: {missing:?}"
    );
    for example in root["examples"]
        .as_array()
        .expect("every schema has examples")
    {
        let errors = Validator::new(root.clone()).check(example);
        assert!(
            errors.is_empty(),
            "{name}: its own example fails it:\n{}",
            errors.join("\n")
        );
    }
    root
}

fn examples(root: &Value) -> Vec<Vec<u8>> {
    root["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| serde_json::to_vec(e).unwrap())
        .collect()
}

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
        sha256: Some(sexton_shared::digest::sha256_hex(key.as_bytes())),
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
                    sha256: Some(sexton_shared::digest::sha256_hex(b"b2")),
                    version_id: Some("3sL4kqtJlcpXroDTDmJ-rmSpXd3dIbrHY".into()),
                },
            ),
        ],
        location: Some(sexton_shared::names::LocationName::new("dr").unwrap()),
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
        format: sexton_shared::metadata::FORMAT.into(),
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
        json!(sexton_shared::digest::sha256_hex(b"x")),
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

/// An `enum` schema lists exactly the serialised values of `variants`.
fn enum_matches<T: serde::Serialize + serde::de::DeserializeOwned>(schema: &Value, variants: &[T]) {
    let listed: BTreeSet<String> = schema["enum"]
        .as_array()
        .expect("an enum")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let rust: BTreeSet<String> = variants
        .iter()
        .map(|v| {
            serde_json::to_value(v)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(listed, rust);
    for value in &listed {
        serde_json::from_value::<T>(json!(value)).expect("each listed value decodes");
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
}
