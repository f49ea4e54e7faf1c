//! Every unknown field of a manifest, at any depth, each with the fields that exist there and
//! the closest of them (issue 50: serde names only the first, and a nested one was placed at
//! the document's first line). The fields that exist are read from the manifests' JSON
//! Schemas (`docs/schemas/*.manifest.schema.json`), which the tests hold to the decoders
//! (`cli/tests/manifest_schemas.rs`): one list of fields, not a second one here.

use serde_json::{Map, Value};

const SCHEDULE: &str = include_str!("../../docs/schemas/schedule.manifest.schema.json");
const DELETE_PLUGIN: &str = include_str!("../../docs/schemas/delete-plugin.manifest.schema.json");
const LOCATION: &str = include_str!("../../docs/schemas/location.manifest.schema.json");

/// One field a manifest sets that its kind does not have at that place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    /// The keys leading to it, array indexes as `[n]`: `["spec", "copies", "[0]", "polcy"]`.
    pub path: Vec<String>,
    /// The fields that exist there.
    pub known: Vec<String>,
}

impl Unknown {
    /// `spec.copies[0].polcy`
    pub fn dotted(&self) -> String {
        let mut out = String::new();
        for part in &self.path {
            if !part.starts_with('[') && !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
        out
    }

    /// The field itself.
    pub fn key(&self) -> &str {
        self.path.last().map_or("", String::as_str)
    }
}

/// The schema of the manifests of `kind` (`Schedule`, `DeletePlugin`, `Location`).
fn schema_of(kind: &str) -> Option<Value> {
    let text = match kind {
        "Schedule" => SCHEDULE,
        "DeletePlugin" => DELETE_PLUGIN,
        "Location" => LOCATION,
        _ => return None,
    };
    Some(serde_json::from_str(text).expect("the manifest schemas are JSON"))
}

/// Every unknown field of `manifest`, a manifest of `kind`, in the order met.
pub fn unknown_fields(kind: &str, manifest: &Value) -> Vec<Unknown> {
    let Some(root) = schema_of(kind) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    walk(&root, &root, manifest, &mut Vec::new(), &mut found);
    found
}

/// `schema` with its `$ref` (into the root's `$defs`) followed.
fn resolved<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut schema = schema;
    for _ in 0..16 {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
            break;
        };
        let Some(name) = reference.strip_prefix("#/$defs/") else {
            break;
        };
        match root.pointer(&format!("/$defs/{name}")) {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

/// The object schemas `schema` stands for: itself, and each branch of its `anyOf` / `oneOf` /
/// `allOf`.
fn branches<'a>(root: &'a Value, schema: &'a Value) -> Vec<&'a Value> {
    let schema = resolved(root, schema);
    let mut out = vec![schema];
    for keyword in ["anyOf", "oneOf", "allOf"] {
        if let Some(list) = schema.get(keyword).and_then(Value::as_array) {
            for branch in list {
                out.extend(branches(root, branch));
            }
        }
    }
    out
}

fn walk(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &mut Vec<String>,
    found: &mut Vec<Unknown>,
) {
    let schemas = branches(root, schema);
    match value {
        Value::Object(object) => {
            let mut properties: Map<String, Value> = Map::new();
            let mut closed = false;
            let mut open: Option<&Value> = None;
            for schema in &schemas {
                if let Some(declared) = schema.get("properties").and_then(Value::as_object) {
                    for (key, sub) in declared {
                        properties.entry(key.clone()).or_insert_with(|| sub.clone());
                    }
                }
                match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => closed = true,
                    Some(more @ Value::Object(_)) => open = Some(more),
                    _ => {}
                }
            }
            for (key, sub_value) in object {
                path.push(key.clone());
                match (properties.get(key), open) {
                    (Some(sub), _) => walk(root, sub, sub_value, path, found),
                    (None, Some(more)) => walk(root, more, sub_value, path, found),
                    (None, None) if closed && !properties.is_empty() => found.push(Unknown {
                        path: path.clone(),
                        known: properties.keys().cloned().collect(),
                    }),
                    (None, None) => {}
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            let item_schema = schemas.iter().find_map(|s| s.get("items"));
            if let Some(item_schema) = item_schema {
                for (n, item) in items.iter().enumerate() {
                    path.push(format!("[{n}]"));
                    walk(root, item_schema, item, path, found);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_unknown_field_at_every_depth_is_found_with_what_exists_there() {
        let manifest = json!({
            "apiVersion": "sexton.io/v1", "kind": "Schedule",
            "metadata": {"name": "n", "lables": {"a": "b"}},
            "spec": {
                "cluster": "c", "plan": "p", "cron": "@daily",
                "policy": {"keep_last": 3},
                "copies": [{"to": "dr", "polcy": {"keep_last": 1}}, {"to": "x", "policy": {}}],
                "verfy": {"cron": "@daily"},
            },
        });
        let found = unknown_fields("Schedule", &manifest);
        let dotted: Vec<String> = found.iter().map(Unknown::dotted).collect();
        assert_eq!(
            dotted,
            ["metadata.lables", "spec.copies[0].polcy", "spec.verfy"],
            "{found:?}"
        );
        let copy = &found[1];
        assert_eq!(copy.key(), "polcy");
        assert!(copy.known.contains(&"policy".to_string()), "{copy:?}");
        assert_eq!(
            crate::listing::closest(copy.key(), copy.known.iter().map(String::as_str)),
            Some("policy")
        );
        // A valid manifest has none; labels' own keys are free.
        let fine = json!({
            "apiVersion": "sexton.io/v1", "kind": "Schedule",
            "metadata": {"name": "n", "labels": {"anything": "b"}},
            "spec": {"cluster": "c", "plan": "p", "cron": "@daily", "policy": {"keep_last": 3}},
        });
        assert!(unknown_fields("Schedule", &fine).is_empty());
        assert!(unknown_fields("Nonsense", &fine).is_empty());
    }
}
