//! Manifests (issue 31): schedules kept in files, in the shape GitOps tools and editors know.
//!
//! ```yaml
//! apiVersion: sexton.io/v1
//! kind: Schedule
//! metadata:
//!   name: nightly
//!   labels: {team: db}
//! spec:
//!   cluster: db1
//!   plan: full
//!   cron: "0 3 * * *"
//!   policy: {keep_daily: 7}
//! ```
//!
//! `spec` holds the fields `schedule.create` takes, less those `metadata` holds (name, labels,
//! annotations) and the request's own switches (confirm, dry_run). This module is pure: it
//! turns text into checked values, values into text, and says what differs; `crate::apply`
//! talks to the fleet.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sexton_model::{records::ScheduleRecord, wire::Message};
use sexton_shared::api::{LocationSpec, PluginSpec, ScheduleSpec, ScheduleUpdate};

mod diff;
mod from_fleet;

pub use diff::unified_diff;
pub use from_fleet::{
    location_manifest_of, manifest_of, plugin_manifest_of, status_of, to_yaml_documents,
};

/// The one version of the manifests' schema.
pub const API_VERSION: &str = "sexton.io/v1";
pub use sexton_shared::api::{LAST_APPLIED, MANAGED_BY, MANAGER};

/// Kinds issue 31 names that this version does not apply: refused by name (docs/gitops.md
/// says why: there is no cluster policy object to apply).
const LATER_KINDS: &[&str] = &["ClusterPolicy"];

/// The keys of a spec that belong elsewhere, and where.
const NOT_IN_SPEC: &[(&str, &str)] = &[
    ("name", "metadata.name"),
    ("labels", "metadata.labels"),
    ("annotations", "metadata.annotations"),
    ("schema_version", "apiVersion"),
    ("confirm", "the --yes flag"),
    ("dry_run", "the --dry-run flag"),
];

/// One YAML (or JSON) document of a file: where it starts, its text and its value.
#[derive(Debug, Clone)]
pub struct Document {
    pub file: PathBuf,
    /// The first line of the document in its file (1-based).
    pub line: usize,
    text: String,
    pub value: Value,
}

impl Document {
    /// `file:line` of the document's start.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }

    /// `file:line` of the first line of the document that sets `key` (a mapping key at any
    /// depth), else of the document's start: where an error about that key points.
    fn at_key(&self, key: &str) -> String {
        self.at_key_in(None, key)
    }

    /// [`Document::at_key`], looking only below the top-level key `section` when the
    /// document has it (`spec`: a spec's `name`, not metadata's).
    fn at_key_in(&self, section: Option<&str>, key: &str) -> String {
        let start = section
            .and_then(|section| {
                self.text
                    .lines()
                    .position(|line| line.starts_with(&format!("{section}:")))
            })
            .unwrap_or(0);
        let found = self.text.lines().skip(start).position(|line| {
            let line = line.trim_start().trim_start_matches("- ");
            let bare = line.strip_prefix(key);
            let quoted = line
                .strip_prefix(&format!("\"{key}\""))
                .or_else(|| line.strip_prefix(&format!("'{key}'")));
            bare.or(quoted)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        });
        format!(
            "{}:{}",
            self.file.display(),
            self.line + found.map_or(0, |found| start + found)
        )
    }
}

impl Document {
    /// `file:line` of the field at `path` (keys, array indexes as `[n]`): each key looked for
    /// below the line of the one before it, as a mapping key in block (`key:`) or flow
    /// (`{a: 1, key: 2}`) style; the document's start when a key is not found.
    fn at_path(&self, path: &[String]) -> String {
        let lines: Vec<&str> = self.text.lines().collect();
        let mut start = 0;
        let mut found_any = false;
        for key in path.iter().filter(|part| !part.starts_with('[')) {
            let hit = lines.iter().skip(start).position(|line| {
                [
                    format!("{key}:"),
                    format!("\"{key}\":"),
                    format!("'{key}':"),
                ]
                .iter()
                .any(|pattern| {
                    line.match_indices(pattern.as_str()).any(|(at, _)| {
                        at == 0
                            || line[..at]
                                .chars()
                                .last()
                                .is_some_and(|c| c == ' ' || c == '{' || c == ',' || c == '-')
                    })
                })
            });
            match hit {
                Some(offset) => {
                    start += offset;
                    found_any = true;
                }
                None => break,
            }
        }
        let line = if found_any {
            self.line + start
        } else {
            self.line
        };
        format!("{}:{line}", self.file.display())
    }
}

/// Every unknown field of a document's spec, at any depth, each `file:line: kind name: unknown
/// field `key`, expected one of …; did you mean …? (at spec.a.b)` (issue 50: every one, where
/// it is, not only serde's first). Keys of the spec that belong elsewhere have their own
/// words (`not_in_spec`) and are left to them.
fn unknown_field_errors(document: &Document, kind: Kind, name: &str) -> Vec<String> {
    let kind_name = match kind {
        Kind::Schedule => "Schedule",
        Kind::DeletePlugin => "DeletePlugin",
        Kind::Location => "Location",
    };
    crate::manifest_fields::unknown_fields(kind_name, &document.value)
        .iter()
        .filter(|unknown| unknown.path.first().map(String::as_str) == Some("spec"))
        .filter(|unknown| {
            !(unknown.path.len() == 2
                && kind
                    .not_in_spec()
                    .iter()
                    .any(|(key, _)| *key == unknown.key()))
        })
        .map(|unknown| {
            let known = unknown.known.iter().map(String::as_str);
            let expected: Vec<String> = unknown.known.iter().map(|k| format!("`{k}`")).collect();
            format!(
                "{}: {} {name}: unknown field `{}`, expected one of {}{} (at {})",
                document.at_path(&unknown.path),
                kind.word(),
                unknown.key(),
                expected.join(", "),
                crate::listing::did_you_mean(unknown.key(), known),
                unknown.dotted()
            )
        })
        .collect()
}

/// Every document of `paths`: files as given, directories read recursively (their `.yaml`,
/// `.yml` and `.json` files, in name order). A document that is a `List` (what `sexton get -o
/// json` writes) gives its items. Every file is read: the documents that parse, and every
/// problem, `file:line` first.
pub fn read(paths: &[PathBuf]) -> (Vec<Document>, Vec<String>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        collect(path, true, &mut files, &mut errors);
    }
    let mut documents = Vec::new();
    for file in files {
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                let (found, problems) = parse(&file, &text);
                documents.extend(found);
                errors.extend(problems);
            }
            Err(err) => errors.push(format!("{}: cannot read: {err}", file.display())),
        }
    }
    if errors.is_empty() && documents.is_empty() {
        errors.push(format!(
            "no manifest in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    (documents, errors)
}

fn collect(path: &Path, given: bool, files: &mut Vec<PathBuf>, errors: &mut Vec<String>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(path) {
            Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(err) => {
                errors.push(format!("{}: cannot read: {err}", path.display()));
                return;
            }
        };
        entries.sort();
        for entry in entries {
            collect(&entry, false, files, errors);
        }
    } else if given
        || path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
    {
        files.push(path.to_path_buf());
    }
}

/// The documents of one file's text: split at `---` lines, each parsed on its own (so each
/// error names its line in the file).
pub fn parse(file: &Path, text: &str) -> (Vec<Document>, Vec<String>) {
    let mut chunks: Vec<(usize, String)> = vec![(1, String::new())];
    for (index, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line == "..." {
            chunks.push((index + 2, String::new()));
        } else {
            let chunk = &mut chunks.last_mut().expect("one at least").1;
            chunk.push_str(line);
            chunk.push('\n');
        }
    }
    let mut documents = Vec::new();
    let mut errors = Vec::new();
    for (line, chunk) in chunks {
        let blank = chunk
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        if blank {
            continue;
        }
        match serde_norway::from_str::<Value>(&chunk) {
            Ok(value) => {
                let document = Document {
                    file: file.to_path_buf(),
                    line,
                    text: chunk,
                    value,
                };
                documents.extend(items(document));
            }
            Err(err) => {
                let at = err.location().map_or(line, |l| line + l.line() - 1);
                let message = err.to_string();
                let message = message.split(" at line ").next().unwrap_or(&message);
                errors.push(format!("{}:{at}: not YAML: {message}", file.display()));
            }
        }
    }
    (documents, errors)
}

/// A `List`'s items (each its own document, at the list's place), or the document itself.
fn items(document: Document) -> Vec<Document> {
    let is_list = document.value.get("kind").and_then(Value::as_str) == Some("List")
        && document.value.get("items").is_some_and(Value::is_array);
    if !is_list {
        return vec![document];
    }
    let items = document.value["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    items
        .into_iter()
        .map(|value| Document {
            value,
            ..document.clone()
        })
        .collect()
}

/// A schedule as a manifest gives it, checked as `schedule.create` checks its body (the
/// server checks again, with what it alone knows: locations, other schedules).
#[derive(Debug, Clone)]
pub struct ScheduleManifest {
    /// `file:line` of its document.
    pub at: String,
    pub spec: ScheduleSpec,
}

/// A delete plugin as a manifest gives it, checked as `plugin.register` checks its body.
#[derive(Debug, Clone)]
pub struct PluginManifest {
    /// `file:line` of its document.
    pub at: String,
    pub spec: PluginSpec,
}

/// Every object a set of manifests gives, by kind.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub schedules: Vec<ScheduleManifest>,
    pub plugins: Vec<PluginManifest>,
    pub locations: Vec<LocationManifest>,
}

/// A location as a manifest declares it: the fields the fleet's configuration must have.
/// Apply checks them and never changes a location (service configuration).
#[derive(Debug, Clone)]
pub struct LocationManifest {
    /// `file:line` of its document.
    pub at: String,
    pub spec: LocationSpec,
}

/// The kinds this version applies, as manifests spell them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Schedule,
    DeletePlugin,
    Location,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Schedule => "Schedule",
            Kind::DeletePlugin => "DeletePlugin",
            Kind::Location => "Location",
        }
    }

    /// How results and diffs name an object of the kind (`schedule/nightly`).
    pub fn word(self) -> &'static str {
        match self {
            Kind::Schedule => "schedule",
            Kind::DeletePlugin => "deleteplugin",
            Kind::Location => "location",
        }
    }

    /// The keys of a spec of this kind that belong elsewhere, and where.
    fn not_in_spec(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Kind::Schedule => NOT_IN_SPEC,
            Kind::DeletePlugin => PLUGIN_NOT_IN_SPEC,
            Kind::Location => LOCATION_NOT_IN_SPEC,
        }
    }

    /// Whether objects of the kind carry labels and annotations (a location does not: it is
    /// service configuration).
    fn has_metadata(self) -> bool {
        self != Kind::Location
    }
}

/// The keys of a plugin's spec that belong elsewhere, and where.
const PLUGIN_NOT_IN_SPEC: &[(&str, &str)] = &[
    ("name", "metadata.name"),
    ("labels", "metadata.labels"),
    ("annotations", "metadata.annotations"),
    ("schema_version", "apiVersion"),
    ("registered_at", "status (the deleter writes it)"),
];

/// The keys of a location's spec that belong elsewhere, and where.
const LOCATION_NOT_IN_SPEC: &[(&str, &str)] = &[
    ("name", "metadata.name"),
    (
        "access_key_id",
        "the services' configuration only (a manifest never holds credentials)",
    ),
    (
        "secret_access_key",
        "the services' configuration only (a manifest never holds credentials)",
    ),
];

/// The schedules of `documents`, each checked; every problem listed, `file:line` first.
/// Documents of other kinds are checked too, and left out.
pub fn schedules(documents: &[Document]) -> Result<Vec<ScheduleManifest>, Vec<String>> {
    manifests(documents).map(|found| found.schedules)
}

/// Every object of `documents`, each checked; every problem listed, `file:line` first (a
/// name given twice within a kind is one).
pub fn manifests(documents: &[Document]) -> Result<Manifests, Vec<String>> {
    let mut found = Manifests::default();
    let mut errors = Vec::new();
    for document in documents {
        let header = match header(document) {
            Ok(header) => header,
            Err(error) => {
                errors.push(error);
                continue;
            }
        };
        let added = match header.kind {
            Kind::Schedule => schedule(document, header).and_then(|manifest| {
                add(
                    &mut found.schedules,
                    manifest,
                    "schedule",
                    |m| m.spec.name.as_str(),
                    |m| m.at.as_str(),
                )
            }),
            Kind::Location => location(document, header).and_then(|manifest| {
                add(
                    &mut found.locations,
                    manifest,
                    "location",
                    |m| m.spec.name.as_str(),
                    |m| m.at.as_str(),
                )
            }),
            Kind::DeletePlugin => plugin(document, header).and_then(|manifest| {
                add(
                    &mut found.plugins,
                    manifest,
                    "delete plugin",
                    |m| m.spec.name.as_str(),
                    |m| m.at.as_str(),
                )
            }),
        };
        if let Err(error) = added {
            // One line per problem (every unknown field of a document is one each).
            errors.extend(error.lines().map(str::to_string));
        }
    }
    if errors.is_empty() {
        Ok(found)
    } else {
        Err(errors)
    }
}

/// Adds `manifest` (of kind `what`) to `list`, unless one of the same name (`name_of`) is
/// there already: then the error names both places (`at_of`).
fn add<T>(
    list: &mut Vec<T>,
    manifest: T,
    what: &str,
    name_of: impl for<'m> Fn(&'m T) -> &'m str,
    at_of: impl for<'m> Fn(&'m T) -> &'m str,
) -> Result<(), String> {
    if let Some(first) = list.iter().find(|m| name_of(m) == name_of(&manifest)) {
        return Err(format!(
            "{}: {what} {} is given twice (first at {})",
            at_of(&manifest),
            name_of(&manifest),
            at_of(first)
        ));
    }
    list.push(manifest);
    Ok(())
}

/// What every manifest has, checked: its kind, its name, and its spec as the API's body
/// (metadata's name, labels and annotations moved in).
struct Header {
    at: String,
    kind: Kind,
    name: String,
    body: Map<String, Value>,
}

fn header(document: &Document) -> Result<Header, String> {
    let at = document.at();
    let Value::Object(top) = &document.value else {
        return Err(format!(
            "{at}: a manifest is a mapping with apiVersion, kind, metadata and spec"
        ));
    };
    for key in top.keys() {
        if !matches!(
            key.as_str(),
            "apiVersion" | "kind" | "metadata" | "spec" | "status"
        ) {
            return Err(format!(
                "{}: unknown field {key:?}: a manifest has apiVersion, kind, metadata, spec \
                 (and status, which apply ignores)",
                document.at_key(key)
            ));
        }
    }
    match top.get("apiVersion").and_then(Value::as_str) {
        Some(API_VERSION) => {}
        Some(other) => {
            return Err(format!(
                "{}: apiVersion {other:?} is not one this version knows; use {API_VERSION}",
                document.at_key("apiVersion")
            ))
        }
        None => return Err(format!("{at}: apiVersion is missing; use {API_VERSION}")),
    }
    let kind = match top.get("kind").and_then(Value::as_str) {
        Some("Schedule") => Kind::Schedule,
        Some("DeletePlugin") => Kind::DeletePlugin,
        Some("Location") => Kind::Location,
        Some(kind) if LATER_KINDS.contains(&kind) => {
            return Err(format!(
                "{}: kind {kind} cannot be applied by this version (Schedule, DeletePlugin and \
                 Location can; docs/gitops.md says why); nothing was applied",
                document.at_key("kind")
            ))
        }
        Some(kind) => {
            return Err(format!(
                "{}: unknown kind {kind:?}{}; this version applies Schedule, DeletePlugin and \
                 Location",
                document.at_key("kind"),
                crate::listing::did_you_mean(kind, ["Schedule", "DeletePlugin", "Location"])
            ))
        }
        None => {
            return Err(format!(
                "{at}: kind is missing (Schedule, DeletePlugin or Location)"
            ))
        }
    };
    let metadata = match top.get("metadata") {
        Some(Value::Object(metadata)) => metadata,
        _ => return Err(format!("{at}: metadata with a name is missing")),
    };
    for key in metadata.keys() {
        // `generation` is what `sexton get` writes: the fleet's count, ignored as status is.
        if !matches!(
            key.as_str(),
            "name" | "labels" | "annotations" | "generation"
        ) {
            return Err(format!(
                "{}: unknown field metadata.{key}: metadata has name, labels and annotations \
                 (and generation, which apply ignores)",
                document.at_key_in(Some("metadata"), key)
            ));
        }
    }
    let Some(name) = metadata.get("name").and_then(Value::as_str) else {
        return Err(format!("{at}: metadata.name is missing or not a string"));
    };
    let word = kind.word();
    let mut body = match top.get("spec") {
        Some(Value::Object(spec)) => spec.clone(),
        _ => {
            return Err(format!(
                "{at}: {word} {name}: spec is missing or not a mapping"
            ))
        }
    };
    for (key, home) in kind.not_in_spec() {
        if body.contains_key(*key) {
            return Err(format!(
                "{}: {word} {name}: spec.{key} is not a field of a manifest; it goes in {home}",
                document.at_key_in(Some("spec"), key)
            ));
        }
    }
    body.insert("name".into(), Value::String(name.into()));
    if !kind.has_metadata() {
        if let Some(key) = ["labels", "annotations"]
            .into_iter()
            .find(|key| metadata.contains_key(*key))
        {
            return Err(format!(
                "{}: {word} {name}: a location has no metadata.{key}: it is the services' \
                 configuration, which apply checks and never changes",
                document.at_key_in(Some("metadata"), key)
            ));
        }
        return Ok(Header {
            at,
            kind,
            name: name.into(),
            body,
        });
    }
    for key in ["labels", "annotations"] {
        if let Some(value) = metadata.get(key) {
            body.insert(key.into(), value.clone());
        }
    }
    let annotations = body
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(annotations) = annotations {
        annotations.insert(MANAGED_BY.into(), Value::String(MANAGER.into()));
    }
    Ok(Header {
        at,
        kind,
        name: name.into(),
        body,
    })
}

/// `header`'s body decoded as `T`, the error pointing at the field serde names.
fn decode_spec<T: serde::de::DeserializeOwned>(
    document: &Document,
    header: Header,
) -> Result<T, String> {
    let Header {
        at,
        kind,
        name,
        body,
    } = header;
    serde_json::from_value(Value::Object(body)).map_err(|err| {
        let message = spec_fields_only(kind, &err.to_string());
        // serde names the first unknown field it met; every one is said, each where it is.
        if message.starts_with("unknown field") {
            let all = unknown_field_errors(document, kind, &name);
            if !all.is_empty() {
                return all.join("\n");
            }
        }
        // Point at the field serde names, when it names one.
        let key = message
            .split('`')
            .nth(1)
            .filter(|_| message.starts_with("unknown field") || message.starts_with("missing"))
            .map(str::to_owned);
        let place = match key {
            Some(key) if message.starts_with("unknown field") => {
                document.at_key_in(Some("spec"), &key)
            }
            _ => at.clone(),
        };
        format!("{place}: {} {name}: {message}", kind.word())
    })
}

fn schedule(document: &Document, header: Header) -> Result<ScheduleManifest, String> {
    let at = header.at.clone();
    let mut spec: ScheduleSpec = decode_spec(document, header)?;
    let name = spec.name.clone();
    spec.validate()
        .map_err(|why| format!("{at}: schedule {name}: {why}"))?;
    // What apply applies, to tell later whether someone changed it by other means.
    let digest = spec.applied_digest();
    spec.annotations.insert(LAST_APPLIED.into(), digest);
    Ok(ScheduleManifest { at, spec })
}

fn plugin(document: &Document, header: Header) -> Result<PluginManifest, String> {
    let at = header.at.clone();
    let spec: PluginSpec = decode_spec(document, header)?;
    spec.validate()
        .map_err(|why| format!("{at}: deleteplugin {}: {why}", spec.name))?;
    Ok(PluginManifest { at, spec })
}

fn location(document: &Document, header: Header) -> Result<LocationManifest, String> {
    let at = header.at.clone();
    let spec: LocationSpec = decode_spec(document, header)?;
    spec.validate()
        .map_err(|why| format!("{at}: location {}: {why}", spec.name))?;
    Ok(LocationManifest { at, spec })
}

/// serde's "expected one of" list without the fields a manifest of `kind` keeps elsewhere.
fn spec_fields_only(kind: Kind, message: &str) -> String {
    let Some((head, fields)) = message.split_once(", expected one of ") else {
        return message.to_string();
    };
    let kept: Vec<&str> = fields
        .split(", ")
        .filter(|field| {
            !kind
                .not_in_spec()
                .iter()
                .any(|(key, _)| field.trim_matches('`') == *key)
        })
        .collect();
    format!("{head}, expected one of {}", kept.join(", "))
}

/// Why a live schedule cannot become `desired` in place, if it cannot (`schedule.update`
/// changes neither cluster nor plan).
pub fn immutable_change(live: &ScheduleRecord, desired: &ScheduleSpec) -> Option<String> {
    let mut changed = Vec::new();
    if live.cluster != desired.cluster {
        changed.push(format!("cluster {} → {}", live.cluster, desired.cluster));
    }
    if live.plan != desired.plan {
        changed.push(format!("plan {} → {}", live.plan, desired.plan));
    }
    (!changed.is_empty()).then(|| {
        format!(
            "schedule {}: {} cannot change in place; delete the schedule (its backups stay \
             with their cluster) and apply again",
            desired.name,
            changed.join(", ")
        )
    })
}

/// The `schedule.update` that makes a live schedule `desired`: every field replaced.
pub fn update_of(desired: &ScheduleSpec, confirm: bool, dry_run: bool) -> ScheduleUpdate {
    ScheduleUpdate {
        schema_version: sexton_model::wire::SCHEMA_VERSION,
        name: desired.name.clone(),
        cron: Some(desired.cron.clone()),
        policy: Some(desired.policy.clone()),
        labels: Some(desired.labels.clone()),
        remote_cleanup: Some(desired.remote_cleanup),
        overlap_policy: Some(desired.overlap_policy),
        starting_deadline_seconds: None,
        full_every: Some(desired.full_every),
        volumes: Some(desired.volumes.clone()),
        backup_owner: Some(desired.backup_owner),
        starting_deadline: Some(desired.starting_deadline.or_else(|| {
            desired
                .starting_deadline_seconds
                .and_then(|seconds| sexton_schedule::Span::from_seconds(seconds).ok())
        })),
        jitter: Some(desired.jitter),
        exclude: Some(desired.exclude.clone()),
        on_blackout: Some(desired.on_blackout),
        pause_after_failures: Some(desired.pause_after_failures),
        annotations: Some(desired.annotations.clone()),
        verify: Some(desired.verify.clone()),
        policy_patch: None,
        breaker: Some(desired.breaker.clone()),
        copies: Some(desired.copies.clone()),
        objectives: Some(desired.objectives.clone()),
        confirm,
        dry_run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(text: &str) -> Result<Vec<Document>, Vec<String>> {
        match parse(Path::new("s.yaml"), text) {
            (documents, errors) if errors.is_empty() => Ok(documents),
            (_, errors) => Err(errors),
        }
    }

    const NIGHTLY: &str = "apiVersion: sexton.io/v1
kind: Schedule
metadata:
  name: nightly
  labels:
    team: db
spec:
  cluster: db1
  plan: full
  cron: '0 3 * * *'
  policy:
    keep_daily: 7
";

    #[test]
    fn a_schedule_manifest_is_the_api_body_with_metadata_apart() {
        let documents = docs(NIGHTLY).unwrap();
        let found = schedules(&documents).unwrap();
        assert_eq!(found.len(), 1);
        let spec = &found[0].spec;
        assert_eq!(spec.name.as_str(), "nightly");
        assert_eq!(spec.labels["team"], "db");
        assert_eq!(spec.annotations[MANAGED_BY], MANAGER);
        assert_eq!(found[0].at, "s.yaml:1");
    }

    const SNAPSHOTS: &str = "apiVersion: sexton.io/v1
kind: DeletePlugin
metadata:
  name: snapshots
  labels: {team: db}
spec:
  subject: sexton.v1.plugin.snapshots
  selector: {tier: gold}
  timeout_seconds: 5
";

    #[test]
    fn a_delete_plugin_manifest_is_the_register_body_with_metadata_apart() {
        let documents = docs(&format!("{NIGHTLY}---\n{SNAPSHOTS}")).unwrap();
        let found = manifests(&documents).unwrap();
        assert_eq!(found.schedules.len(), 1);
        let plugin = &found.plugins[0];
        assert_eq!(plugin.at, "s.yaml:14");
        assert_eq!(plugin.spec.name, "snapshots");
        assert_eq!(plugin.spec.labels["team"], "db");
        assert_eq!(plugin.spec.selector["tier"], "gold");
        assert_eq!(plugin.spec.timeout_seconds, Some(5));
        assert_eq!(plugin.spec.annotations[MANAGED_BY], MANAGER);
        // What get writes applies back as the same spec.
        let written = plugin_manifest_of(&plugin.spec, false);
        assert!(
            written["metadata"].get("annotations").is_none(),
            "{written}"
        );
        let text = crate::output::to_yaml(&written);
        let again = manifests(&docs(&text).unwrap()).unwrap();
        assert_eq!(again.plugins[0].spec.compared(), plugin.spec.compared());
    }

    #[test]
    fn bad_delete_plugin_manifests_are_refused_with_their_file_and_line() {
        let cases: &[(String, &str)] = &[
            (
                SNAPSHOTS.replace("  timeout_seconds: 5\n", "  timeout_seconds: 5\n  retries: 3\n"),
                "s.yaml:10: deleteplugin snapshots: unknown field `retries`, expected one of `selector`, `subject`, `timeout_seconds` (at spec.retries)",
            ),
            (
                SNAPSHOTS.replace("  timeout_seconds: 5\n", "  registered_at: 2026-01-01T00:00:00Z\n"),
                "s.yaml:9: deleteplugin snapshots: spec.registered_at is not a field of a manifest; it goes in status",
            ),
            (
                SNAPSHOTS.replace("timeout_seconds: 5", "timeout_seconds: 0"),
                "s.yaml:1: deleteplugin snapshots: timeout_seconds must be between 1 and 600",
            ),
            (
                SNAPSHOTS.replace("  subject: sexton.v1.plugin.snapshots\n", ""),
                "s.yaml:1: deleteplugin snapshots: missing field `subject`",
            ),
            (
                SNAPSHOTS.replace("sexton.v1.plugin.snapshots", "sexton.v1.plugin.>"),
                "s.yaml:1: deleteplugin snapshots: plugin subject",
            ),
            (
                SNAPSHOTS.replace("{team: db}", "{\"bad key!\": db}"),
                "s.yaml:1: deleteplugin snapshots: label",
            ),
            (
                format!("{SNAPSHOTS}---\n{SNAPSHOTS}"),
                "s.yaml:11: delete plugin snapshots is given twice (first at s.yaml:1)",
            ),
        ];
        for (text, expected) in cases {
            let errors = match docs(text) {
                Err(errors) => errors,
                Ok(documents) => manifests(&documents).unwrap_err(),
            };
            assert!(
                errors.iter().any(|e| e.starts_with(expected)),
                "{text}\nexpected {expected:?}, got {errors:?}"
            );
        }
    }

    #[test]
    fn a_location_is_a_declaration_named_once_without_labels() {
        let dr =
            "apiVersion: sexton.io/v1\nkind: Location\nmetadata: {name: dr}\nspec: {bucket: b}\n";
        let found = manifests(&docs(dr).unwrap()).unwrap();
        assert_eq!(found.locations[0].spec.bucket.as_deref(), Some("b"));
        let errors = manifests(&docs(&format!("{dr}---\n{dr}")).unwrap()).unwrap_err();
        assert_eq!(
            errors,
            ["s.yaml:6: location dr is given twice (first at s.yaml:1)"]
        );
        let labelled = dr.replace("{name: dr}", "\n  name: dr\n  labels: {a: b}");
        let errors = manifests(&docs(&labelled).unwrap()).unwrap_err();
        assert!(
            errors[0].starts_with("s.yaml:5: location dr: a location has no metadata.labels"),
            "{errors:?}"
        );
    }

    #[test]
    fn several_documents_and_lists_and_json_are_read_with_their_lines() {
        let two = format!(
            "{NIGHTLY}---\n# a comment\n{}",
            NIGHTLY.replace("nightly", "weekly")
        );
        let documents = docs(&two).unwrap();
        assert_eq!(
            documents.iter().map(Document::at).collect::<Vec<_>>(),
            ["s.yaml:1", "s.yaml:14"]
        );
        let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "sexton.io/v1", "kind": "Schedule", "metadata": {"name": "a"},
             "spec": {"cluster": "c", "plan": "p", "cron": "@daily", "policy": {"keep_last": 3}}}]}"#;
        let found = schedules(&docs(list).unwrap()).unwrap();
        assert_eq!(found[0].spec.name.as_str(), "a");
    }

    #[test]
    fn bad_manifests_are_refused_with_their_file_and_line() {
        let cases: &[(String, &str)] = &[
            ("kind: [\n".into(), "s.yaml:2: not YAML"),
            (
                NIGHTLY.replace("sexton.io/v1", "sexton.io/v2"),
                "s.yaml:1: apiVersion \"sexton.io/v2\" is not one",
            ),
            (NIGHTLY.replace("Schedule", "Cronjob"), "s.yaml:2: unknown kind"),
            (
                NIGHTLY.replace("kind: Schedule", "kind: Schedul"),
                "s.yaml:2: unknown kind \"Schedul\"; did you mean Schedule?",
            ),
            (
                NIGHTLY.replace("Schedule", "ClusterPolicy"),
                "s.yaml:2: kind ClusterPolicy cannot be applied by this version (",
            ),
            (
                NIGHTLY.replace("  plan: full\n", "  plan: full\n  colour: red\n"),
                "s.yaml:10: schedule nightly: unknown field `colour`, expected one of `backup_owner`, `breaker`, `cluster`",
            ),
            // Every unknown field, at any depth, each at its own line, with the closest name.
            (
                NIGHTLY.replace("  plan: full\n", "  plan: full\n  polcy: {keep_last: 1}\n  verify: {cron: '@daily', timout: 1h}\n"),
                "s.yaml:10: schedule nightly: unknown field `polcy`, expected one of `backup_owner`",
            ),
            (
                NIGHTLY.replace("  plan: full\n", "  plan: full\n  polcy: {keep_last: 1}\n  verify: {cron: '@daily', timout: 1h}\n"),
                "s.yaml:11: schedule nightly: unknown field `timout`",
            ),
            (
                NIGHTLY.replace("  plan: full\n", "  plan: full\n  name: other\n"),
                "s.yaml:10: schedule nightly: spec.name is not a field of a manifest; it goes in metadata.name",
            ),
            (
                NIGHTLY.replace("  plan: full\n", ""),
                "s.yaml:1: schedule nightly: missing field `plan`",
            ),
            (
                NIGHTLY.replace("keep_daily: 7", "keep_daily: -7"),
                "s.yaml:1: schedule nightly:",
            ),
            (
                NIGHTLY.replace("  name: nightly\n", ""),
                "s.yaml:1: metadata.name is missing",
            ),
            (
                NIGHTLY.replace("kind: Schedule\n", "kind: Schedule\nextra: 1\n"),
                "s.yaml:3: unknown field \"extra\"",
            ),
            ("- just\n- a list\n".into(), "s.yaml:1: a manifest is a mapping"),
            (
                format!("{NIGHTLY}---\n{NIGHTLY}"),
                "s.yaml:14: schedule nightly is given twice (first at s.yaml:1)",
            ),
        ];
        for (text, expected) in cases {
            let errors = match docs(text) {
                Err(errors) => errors,
                Ok(documents) => schedules(&documents).unwrap_err(),
            };
            assert!(
                errors.iter().any(|e| e.starts_with(expected)),
                "{text}\nexpected {expected:?}, got {errors:?}"
            );
        }
    }

    #[test]
    fn a_diff_shows_removed_and_added_lines_and_nothing_when_equal() {
        assert_eq!(unified_diff("a", "b", "x\ny\n", "x\ny\n"), "");
        assert_eq!(
            unified_diff("live", "manifest", "a\nb\nc\n", "a\nB\nc\nd\n"),
            "--- live\n+++ manifest\n a\n-b\n+B\n c\n+d\n"
        );
    }
}
