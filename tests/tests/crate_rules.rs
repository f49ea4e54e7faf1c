//! Which crate may depend on which (ARCHITECTURE.md, "Crates and their boundaries"), checked
//! against the manifests as `cargo metadata` reads them, so that a forbidden edge fails here
//! rather than in a review: the arrows run from the edges to the cores, nothing depends on the
//! `sexton` command but the test harness, the executor side knows neither the CLI nor the
//! services, and the pure cores depend on nothing that could read the clock or do I/O.

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
};

use serde_json::Value;

/// Every workspace crate and the workspace crates it may depend on (any kind of dependency:
/// a dev-dependency pointing up is still an arrow pointing up). A new crate fails the test
/// until it has a line here and in ARCHITECTURE.md.
const MAY_DEPEND_ON: &[(&str, &[&str])] = &[
    ("sexton-schedule", &[]),
    ("sexton-retention", &[]),
    (
        "sexton-simulate",
        &["sexton-retention", "sexton-schedule", "sexton-model"],
    ),
    ("sexton-model", &["sexton-retention", "sexton-schedule"]),
    (
        "sexton-shared",
        &["sexton-model", "sexton-retention", "sexton-schedule"],
    ),
    (
        "sexton-scheduler",
        &[
            "sexton-model",
            "sexton-shared",
            "sexton-retention",
            "sexton-schedule",
        ],
    ),
    (
        "sexton-retention-worker",
        &[
            "sexton-model",
            "sexton-shared",
            "sexton-retention",
            "sexton-schedule",
        ],
    ),
    (
        "sexton-deleter",
        &[
            "sexton-model",
            "sexton-shared",
            "sexton-retention",
            "sexton-schedule",
        ],
    ),
    (
        "sexton-executor",
        &[
            "sexton-model",
            "sexton-shared",
            "sexton-retention",
            "sexton-schedule",
        ],
    ),
    ("sexton-copier", &["sexton-model", "sexton-shared"]),
    (
        "sexton-cli",
        &[
            "sexton-model",
            "sexton-shared",
            "sexton-retention",
            "sexton-schedule",
            "sexton-simulate",
            "sexton-scheduler",
            "sexton-retention-worker",
            "sexton-deleter",
            "sexton-copier",
            "sexton-executor",
        ],
    ),
    (
        "sexton-tests",
        &[
            "sexton-model",
            "sexton-shared",
            "sexton-retention",
            "sexton-schedule",
            "sexton-simulate",
            "sexton-scheduler",
            "sexton-retention-worker",
            "sexton-deleter",
            "sexton-copier",
            "sexton-executor",
            "sexton-cli",
        ],
    ),
];

/// The pure crates and every crate they may use outside the workspace (normal and build
/// dependencies; their tests may use more): calendar arithmetic and (de)serialisation, so no
/// async runtime, NATS, S3, HTTP or argument parsing can come in.
const PURE: &[(&str, &[&str])] = &[
    (
        "sexton-schedule",
        &["chrono", "chrono-tz", "serde", "serde_json", "thiserror"],
    ),
    (
        "sexton-retention",
        &["chrono", "serde", "serde_json", "thiserror"],
    ),
    (
        "sexton-simulate",
        &["chrono", "chrono-tz", "serde", "serde_json", "thiserror"],
    ),
];

/// Crates the executor side does without: it takes plain options, the CLI parses them.
const EXECUTOR_WITHOUT: &[&str] = &["clap", "clap_complete"];

/// Each workspace crate's dependencies as (name, kind), from `cargo metadata`.
fn workspace() -> BTreeMap<String, Vec<(String, String)>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .args(["--manifest-path", manifest])
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|package| {
            let dependencies = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|dependency| {
                    let name = dependency["name"].as_str().expect("a name").to_string();
                    let kind = dependency["kind"].as_str().unwrap_or("normal").to_string();
                    (name, kind)
                })
                .collect();
            let name = package["name"].as_str().expect("a name").to_string();
            (name, dependencies)
        })
        .collect()
}

/// Every broken rule, in words.
fn violations(crates: &BTreeMap<String, Vec<(String, String)>>) -> Vec<String> {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = MAY_DEPEND_ON
        .iter()
        .map(|(name, may)| (*name, may.iter().copied().collect()))
        .collect();
    let mut broken = Vec::new();
    for (name, dependencies) in crates {
        let Some(may) = allowed.get(name.as_str()) else {
            broken.push(format!(
                "{name} is not in MAY_DEPEND_ON: give it a line there and in ARCHITECTURE.md"
            ));
            continue;
        };
        for (dependency, kind) in dependencies {
            if crates.contains_key(dependency) && !may.contains(dependency.as_str()) {
                broken.push(format!("{name} may not depend on {dependency} ({kind})"));
            }
        }
    }
    for (name, may_use) in PURE {
        for (dependency, kind) in crates.get(*name).into_iter().flatten() {
            let outside = !crates.contains_key(dependency);
            if outside && kind != "dev" && !may_use.contains(&dependency.as_str()) {
                broken.push(format!(
                    "{name} is pure and may not depend on {dependency} ({kind})"
                ));
            }
        }
    }
    for (dependency, kind) in crates.get("sexton-executor").into_iter().flatten() {
        if kind != "dev" && EXECUTOR_WITHOUT.contains(&dependency.as_str()) {
            broken.push(format!(
                "sexton-executor may not depend on {dependency} ({kind}): the CLI parses arguments"
            ));
        }
    }
    broken
}

#[test]
fn crates_depend_only_downwards() {
    let crates = workspace();
    for (name, _) in MAY_DEPEND_ON {
        assert!(
            crates.contains_key(*name),
            "{name} is no workspace crate any more: drop its line"
        );
    }
    let broken = violations(&crates);
    assert!(
        broken.is_empty(),
        "forbidden dependencies (ARCHITECTURE.md, \"Crates and their boundaries\"):\n  {}",
        broken.join("\n  ")
    );
}
