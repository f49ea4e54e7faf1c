//! The floors of the workspace, checked from the manifests and the sources (issue 27;
//! ARCHITECTURE.md, "Crates and their boundaries"):
//! - the model crate (`sexton-model`) and the pure cores (`sexton-retention`, `sexton-schedule`)
//!   do no I/O: none of them depends, directly or through another crate of the workspace, on
//!   an async runtime, NATS, S3, an HTTP server, a CLI parser or the metrics registry, nor on
//!   `sexton-shared`, the I/O edges;
//! - no two modules of `sexton-model` or `sexton-shared` need each other, directly or around a
//!   circle: a module uses only modules below it.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

/// Crates that do I/O (or parse a command line), which no pure crate may depend on.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "async-nats",
    "aws-sdk-s3",
    "aws-config",
    "axum",
    "clap",
    "prometheus",
    "sexton-shared",
];

/// The crates that must stay pure.
const PURE: &[&str] = &["sexton-model", "sexton-retention", "sexton-schedule"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lies in the workspace")
        .to_path_buf()
}

/// Each workspace package's normal and build dependencies (not its dev-dependencies: a test
/// may start a server), by package name.
fn workspace_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    let mut out = BTreeMap::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let deps = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|dep| dep["kind"].as_str() != Some("dev"))
            .map(|dep| dep["name"].as_str().expect("a name").to_string())
            .collect();
        out.insert(package["name"].as_str().expect("a name").to_string(), deps);
    }
    out
}

/// The forbidden crates `package` reaches through its own dependencies and those of the
/// workspace crates it depends on, each with the path that reaches it.
fn forbidden_reached(deps: &BTreeMap<String, BTreeSet<String>>, package: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    let mut stack = vec![vec![package.to_string()]];
    while let Some(path) = stack.pop() {
        let here = path.last().expect("a path is never empty").clone();
        if !seen.insert(here.clone()) {
            continue;
        }
        for dep in deps.get(&here).into_iter().flatten() {
            let mut next = path.clone();
            next.push(dep.clone());
            if FORBIDDEN.contains(&dep.as_str()) {
                found.push(next.join(" -> "));
            } else if deps.contains_key(dep) {
                stack.push(next);
            }
        }
    }
    found
}

#[test]
fn the_model_and_the_cores_do_no_io() {
    let deps = workspace_dependencies();
    let mut broken = Vec::new();
    for package in PURE {
        assert!(
            deps.contains_key(*package),
            "{package} is not in the workspace"
        );
        broken.extend(forbidden_reached(&deps, package));
    }
    assert!(
        broken.is_empty(),
        "a pure crate depends on an I/O crate (ARCHITECTURE.md, \"Crates and their \
         boundaries\"):\n{}",
        broken.join("\n")
    );
}

/// The top-level modules of the crate whose sources are in `src` (`foo.rs` with its `foo/`),
/// each with the modules of the same crate it names as `crate::x` or in `crate::{x, ...}`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(module) = name.strip_suffix(".rs") {
            if module != "lib" && module != "main" {
                graph.insert(module.to_string(), BTreeSet::new());
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (module, uses) in &mut graph {
        let mut files = vec![src.join(format!("{module}.rs"))];
        let mut dirs = vec![src.join(module.as_str())];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path);
                }
            }
        }
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a source file");
            for line in fold_use_blocks(&text).lines() {
                for named in crate_paths(line) {
                    if named != *module && modules.contains(&named) {
                        uses.insert(named);
                    }
                }
            }
        }
    }
    graph
}

/// The first segments after `crate::` on a line: `crate::x::y` names `x`, `crate::{x, y::z}`
/// names `x` and `y`.
fn crate_paths(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        out.push(ident(&group[j..]));
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest));
        }
    }
    out
}

/// Comments dropped, and each `crate::{` block that runs over several lines (`use crate::{` then
/// `    audit::Actor,` ...) folded onto one line, for [`crate_paths`].
fn fold_use_blocks(text: &str) -> String {
    let mut out = String::new();
    let mut open = false;
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or_default();
        if open {
            out.push(' ');
            out.push_str(code.trim());
            if code.contains("};") {
                open = false;
                out.push('\n');
            }
        } else {
            out.push_str(code);
            if code.trim_end().ends_with("crate::{") {
                open = true;
            } else {
                out.push('\n');
            }
        }
    }
    out
}

/// A circle of modules, if the graph has one: `a -> b -> a`.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in &graph[node] {
            if let Some(circle) = visit(graph, next, done, path) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(circle) = visit(graph, node, &mut done, &mut Vec::new()) {
            return Some(circle);
        }
    }
    None
}

#[test]
fn no_two_modules_need_each_other() {
    for krate in ["model", "shared"] {
        let src = repo_root().join(krate).join("src");
        let graph = module_graph(&src);
        assert!(
            graph.len() > 5,
            "{krate}: only {} modules found",
            graph.len()
        );
        if let Some(circle) = circle(&graph) {
            panic!(
                "{krate}/src: modules in a circle: {} (make them one module, or move the \
                 shared part down a floor)",
                circle.join(" -> ")
            );
        }
    }
}
