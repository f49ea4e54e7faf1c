//! The floors of the workspace, checked from the manifests and the sources (issue 27;
//! ARCHITECTURE.md, "Crates and their boundaries"):
//! - the model crate (`sexton-model`) and the pure cores (`sexton-retention`, `sexton-schedule`)
//!   do no I/O: none of them depends, directly or through another crate of the workspace, on
//!   an async runtime, NATS, S3, an HTTP server, a CLI parser or the metrics registry, nor on
//!   `sexton-shared`, the I/O edges;
//! - those crates and `sexton-simulate` read no clock, no file, no environment and no network,
//!   and their `clippy.toml` makes a call that does a lint error: each must carry one listing
//!   every such method (issue 48);
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

/// The crates that read no clock, no file, no environment and no network (the values and the
/// pure cores, and the simulator over them), by directory. Each carries a `clippy.toml` that
/// makes a call to one of [`GUARDED_METHODS`] a lint error: clippy reads the file from the
/// crate's own directory, so a crate without one is not guarded at all.
const GUARDED: &[&str] = &["model", "retention", "schedule", "simulate"];

/// What each guarded crate's `clippy.toml` must forbid: the clock, the file system, the
/// environment, the network and other processes.
const GUARDED_METHODS: &[&str] = &[
    "chrono::Utc::now",
    "chrono::Local::now",
    "std::time::SystemTime::now",
    "std::time::Instant::now",
    "std::fs::read",
    "std::fs::read_to_string",
    "std::fs::read_dir",
    "std::fs::metadata",
    "std::fs::write",
    "std::fs::create_dir_all",
    "std::fs::remove_file",
    "std::fs::rename",
    "std::fs::File::open",
    "std::fs::File::create",
    "std::fs::OpenOptions::open",
    "std::env::var",
    "std::env::var_os",
    "std::env::vars",
    "std::env::args",
    "std::env::current_dir",
    "std::net::TcpStream::connect",
    "std::net::TcpListener::bind",
    "std::net::UdpSocket::bind",
    "std::net::ToSocketAddrs::to_socket_addrs",
    "std::process::Command::new",
];

/// The `path`s of the `disallowed-methods` array of a `clippy.toml`, comments dropped (none of
/// the paths or reasons holds a `#`).
fn disallowed_methods(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let Some(start) = code.find("disallowed-methods") else {
        return Vec::new();
    };
    let rest = &code[start..];
    let Some(open) = rest.find('[') else {
        return Vec::new();
    };
    // The array ends at the first `]` outside a string (paths and reasons hold none).
    let body = &rest[open + 1..];
    let body = &body[..body.find(']').unwrap_or(body.len())];
    let mut out = Vec::new();
    for (i, _) in body.match_indices("path") {
        let after = body[i + "path".len()..].trim_start();
        let Some(value) = after.strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        if let Some(quoted) = value.strip_prefix('"') {
            if let Some(end) = quoted.find('"') {
                out.push(quoted[..end].to_string());
            }
        }
    }
    out
}

/// Issue 48: the model and the cores do not merely happen to read no clock and no file; their
/// `clippy.toml` makes it a lint error (`cargo clippy -- -D warnings`), and this test fails when
/// that guard is removed or thinned, or when a crate's own code opts out of it (a test or a
/// benchmark of the crate may, with its reason; the crate's `src/` may not).
#[test]
fn the_pure_crates_forbid_themselves_the_clock_and_the_file_system() {
    let mut broken = Vec::new();
    for krate in GUARDED {
        let path = repo_root().join(krate).join("clippy.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            broken.push(format!("{}: missing", path.display()));
            continue;
        };
        let listed = disallowed_methods(&text);
        for method in GUARDED_METHODS {
            if !listed.iter().any(|path| path == method) {
                broken.push(format!(
                    "{krate}/clippy.toml: disallowed-methods does not list {method}"
                ));
            }
        }
        let mut dirs = vec![repo_root().join(krate).join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("a source directory") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).expect("a source file");
                    if text.contains("clippy::disallowed_methods") {
                        broken.push(format!(
                            "{}: allows a disallowed method (a test in src/ takes a fixed \
                             instant and its bytes instead)",
                            path.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "the pure crates' guard against the clock and I/O (ARCHITECTURE.md, \"Crates and their \
         boundaries\"):\n{}",
        broken.join("\n")
    );
}

#[test]
fn a_clippy_toml_is_read_for_its_paths_only() {
    let text = r#"
# { path = "std::fs::read", reason = "commented out" },
disallowed-methods = [
    { path = "chrono::Utc::now", reason = "no clock" },
    # { path = "std::env::var", reason = "commented out" },
    { path = "std::fs::write", reason = "no file" },
]
other = ["path = \"x\""]
"#;
    assert_eq!(
        disallowed_methods(text),
        ["chrono::Utc::now", "std::fs::write"]
    );
}
