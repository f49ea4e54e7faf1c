//! The small JSON Schema validator the schema tests share (`shared/tests/schemas.rs`, the
//! executor contract; `cli/tests/manifest_schemas.rs`, the manifests `sexton apply` reads),
//! included by each with `#[path]`: a folder under `tests/` is no test target of its own.
//!
//! It knows the subset of JSON Schema the files in `docs/schemas/` use; a keyword it does not
//! know fails the test, so a schema cannot rely on a check nobody runs. A `pattern` is checked
//! with the Rust function it stands for ([`patterns`]), not as a regular expression: a string
//! passes exactly when the code accepts it. It also remembers which declared properties the
//! values it checked carried, for the coverage half of [`check`]. (A validator crate would be a
//! large dependency for a few files, and would not do the coverage checks.)

// Each test target uses a part of it.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{json, Value};

/// `docs/schemas/<name>.schema.json`, parsed.
pub fn schema(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/schemas")
        .join(format!("{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub const NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$";
pub const SHA256_PATTERN: &str = "^[0-9a-f]{64}$";
/// `sexton_schedule::Span` as text: `90s`, `15m`, `1h30m`, `2d` (the parser trims spaces).
pub const SPAN_PATTERN: &str = "^\\s*([0-9]+[dhms])+\\s*$";
/// A policy's calendar duration (`keep_within`): `7d`, `1y2m3d4h`, `6mo`, each unit at most
/// once.
pub const CALENDAR_DURATION_PATTERN: &str = "^\\s*([0-9]+(y|mo|m|d|h))+\\s*$";
/// A policy's `recovery_window`: `30d`, `4w`, `1mo` or `1m` (30 days), `12h`, `90min`, `600s`.
pub const RECOVERY_WINDOW_PATTERN: &str = "^[0-9]+(s|min|h|d|w|mo|m)$";
/// A policy's `failed_grace`: `1h`, `30min`, `600s`, `2d` (`m` is refused).
pub const GRACE_PATTERN: &str = "^([0-9]+(s|min|h|d)|never)$";
/// A restore test's `timeout`: one number and one unit, `90s`, `30m`, `2h`, `1d`.
pub const TIMEOUT_PATTERN: &str = "^\\s*[0-9]+[smhd]\\s*$";
/// A positive whole number written as a string (`full_every: "3"`, Karbor's numbers).
pub const DIGITS_PATTERN: &str = "^[0-9]+$";
/// A Kubernetes label key: `[dns-subdomain/]name`.
pub const LABEL_KEY_PATTERN: &str = "^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
/// A Kubernetes label value: empty, or at most 63 letters, digits, `-`, `_`, `.`.
pub const LABEL_VALUE_PATTERN: &str = "^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$";
/// Text without control characters (an annotation's value).
pub const NO_CONTROL_PATTERN: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";
/// A delete plugin's subject: plain tokens under `sexton.v1.plugin.`.
pub const PLUGIN_SUBJECT_PATTERN: &str =
    "^sexton\\.v1\\.plugin\\.[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$";

/// The Rust check a pattern stands for: whether the code takes a string.
pub type Accepts = fn(&str) -> bool;

/// Every pattern a schema may use, with the Rust check it stands for.
pub fn patterns() -> Vec<(&'static str, Accepts)> {
    vec![
        (NAME_PATTERN, |t| {
            sexton_model::names::check_name("name", t).is_ok()
        }),
        (SHA256_PATTERN, sexton_model::digest::is_sha256_hex),
        (SPAN_PATTERN, |t| sexton_schedule::Span::parse(t).is_ok()),
        (CALENDAR_DURATION_PATTERN, |t| {
            sexton_retention::CalendarDuration::parse(t).is_ok()
        }),
        (RECOVERY_WINDOW_PATTERN, |t| {
            sexton_retention::RecoveryWindow::parse(t).is_ok()
        }),
        (GRACE_PATTERN, |t| {
            sexton_retention::GracePeriod::parse(t).is_ok()
        }),
        (TIMEOUT_PATTERN, |t| {
            serde_json::from_value::<sexton_model::records::VerifyTimeout>(json!(t)).is_ok()
        }),
        (DIGITS_PATTERN, |t| {
            sexton_retention::FullEvery::try_from(json!(t)).is_ok()
        }),
        (LABEL_KEY_PATTERN, |t| {
            sexton_shared::api::check_label_key("label", t).is_ok()
        }),
        (LABEL_VALUE_PATTERN, |t| {
            sexton_shared::api::check_label_value("label", t).is_ok()
        }),
        (NO_CONTROL_PATTERN, |t| !t.chars().any(char::is_control)),
        (PLUGIN_SUBJECT_PATTERN, |t| {
            sexton_shared::api::check_plugin_subject(t).is_ok()
        }),
    ]
}

const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "examples",
    "$defs",
    "deprecated",
];

/// Validates values against one schema file and remembers which declared properties it saw.
pub struct Validator {
    root: Value,
    pub seen: BTreeSet<String>,
}

impl Validator {
    pub fn new(root: Value) -> Validator {
        Validator {
            root,
            seen: BTreeSet::new(),
        }
    }

    pub fn check(&mut self, value: &Value) -> Vec<String> {
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
                "anyOf" => {
                    // The first branch that holds wins; a branch that fails leaves no trace in
                    // `seen` (its properties were not carried by a valid value).
                    let mut why = Vec::new();
                    let mut held = false;
                    for (n, branch) in argument
                        .as_array()
                        .expect("anyOf is a list")
                        .iter()
                        .enumerate()
                    {
                        let before = self.seen.clone();
                        let mut branch_errors = Vec::new();
                        self.node(
                            branch,
                            &format!("{at}/anyOf/{n}"),
                            value,
                            path,
                            &mut branch_errors,
                        );
                        if branch_errors.is_empty() {
                            held = true;
                            break;
                        }
                        self.seen = before;
                        why.extend(branch_errors);
                    }
                    if !held {
                        fail(
                            errors,
                            format!("matches no branch of anyOf ({})", why.join("; ")),
                        );
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
                "propertyNames" => {
                    if let Some(object) = value.as_object() {
                        for field in object.keys() {
                            self.node(
                                argument,
                                &format!("{at}/propertyNames"),
                                &Value::String(field.clone()),
                                &format!("{path}.{field} (the name)"),
                                errors,
                            );
                        }
                    }
                }
                "maxProperties" => {
                    if value
                        .as_object()
                        .is_some_and(|o| (o.len() as u64) > argument.as_u64().unwrap())
                    {
                        fail(errors, format!("more than {argument} properties"));
                    }
                }
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
                "minItems" | "maxItems" => {
                    if let Some(items) = value.as_array() {
                        let n = items.len() as u64;
                        let bound = argument.as_u64().unwrap();
                        if (keyword == "minItems" && n < bound)
                            || (keyword == "maxItems" && n > bound)
                        {
                            fail(errors, format!("{n} items break {keyword} {bound}"));
                        }
                    }
                }
                "uniqueItems" => {
                    assert_eq!(
                        argument,
                        &json!(true),
                        "{at}: uniqueItems is true or absent"
                    );
                    if let Some(items) = value.as_array() {
                        for (n, item) in items.iter().enumerate() {
                            if items[..n].contains(item) {
                                fail(errors, format!("{item} is listed twice"));
                            }
                        }
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
                "maximum" => {
                    if value
                        .as_f64()
                        .is_some_and(|n| n > argument.as_f64().unwrap())
                    {
                        fail(errors, format!("{value} is above {argument}"));
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
                    let pattern = argument.as_str().unwrap();
                    let (_, accepts) = patterns()
                        .into_iter()
                        .find(|(known, _)| *known == pattern)
                        .unwrap_or_else(|| panic!("{at}: unsupported pattern {pattern}"));
                    if let Some(text) = value.as_str() {
                        if !accepts(text) {
                            fail(errors, format!("{text:?} does not match {argument}"));
                        }
                    }
                }
                other => panic!("{at}: keyword {other:?} is not supported by this validator"),
            }
        }
    }

    /// Every property the schema declares, as `<location>/properties/<name>`.
    pub fn declared(&self) -> BTreeSet<String> {
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
            if let Some(more) = object.get("additionalProperties") {
                walk(more, &format!("{at}/additionalProperties"), out);
            }
            if let Some(branches) = object.get("anyOf").and_then(Value::as_array) {
                for (n, branch) in branches.iter().enumerate() {
                    walk(branch, &format!("{at}/anyOf/{n}"), out);
                }
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
pub fn check(name: &str, values: &[Value]) -> Value {
    check_carrying(name, values, &[])
}

/// [`check`], where the properties `not_yet_carried` (as `#/properties/...`) may be declared
/// without a value of the Rust type carrying them: fields the format reserves for what the
/// code is still growing. Each must be declared.
pub fn check_carrying(name: &str, values: &[Value], not_yet_carried: &[&str]) -> Value {
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
    let declared = validator.declared();
    for reserved in not_yet_carried {
        assert!(
            declared.contains(*reserved),
            "{name}: {reserved} is not declared"
        );
    }
    let missing: Vec<String> = declared
        .difference(&validator.seen)
        .filter(|path| !not_yet_carried.contains(&path.as_str()))
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

/// The schema's `examples`, each as JSON bytes (what a decoder reads).
pub fn examples(root: &Value) -> Vec<Vec<u8>> {
    root["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| serde_json::to_vec(e).unwrap())
        .collect()
}

/// An `enum` schema lists exactly the serialised values of `variants`.
pub fn enum_matches<T: serde::Serialize + serde::de::DeserializeOwned>(
    schema: &Value,
    variants: &[T],
) {
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
