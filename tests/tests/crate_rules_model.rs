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

/// A token of Rust source, as far as module paths need: comments, literals and whitespace are
/// dropped, `::` is one token.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// The tokens of `text`: identifiers, `::` and single punctuation; comments, string, byte and
/// char literals and numbers dropped (so `"crate::x"` in a message names nothing).
fn tokens(text: &str) -> Vec<Tok> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_string(&chars, i + 1);
        } else if (c == 'r' || c == 'b')
            && matches!(next, Some('"') | Some('#') | Some('r') | Some('\''))
            && raw_or_byte_literal(&chars, i).is_some()
        {
            i = raw_or_byte_literal(&chars, i).expect("checked above");
        } else if c == '\'' {
            // A char literal (`'x'`, `'\n'`, `'\u{..}'`) or a lifetime (`'a`).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (ident_char(chars[i]) || chars[i] == '.') {
                if chars[i] == '.' && chars.get(i + 1) == Some(&'.') {
                    break;
                }
                i += 1;
            }
        } else if ident_char(c) {
            let start = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else if c == ':' && next == Some(':') {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// The index after a `"..."` literal whose body starts at `i`.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index after a raw string (`r"..."`, `r#"..."#`), byte string or byte char starting at
/// `i`, if one starts there.
fn raw_or_byte_literal(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars[j] == 'b' {
        j += 1;
        match chars.get(j) {
            Some('"') => return Some(skip_string(chars, j + 1)),
            Some('\'') => {
                let mut k = j + 1;
                if chars.get(k) == Some(&'\\') {
                    k += 1;
                }
                k += 1;
                while k < chars.len() && chars[k] != '\'' {
                    k += 1;
                }
                return Some(k + 1);
            }
            Some('r') => {}
            _ => return None,
        }
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && (1..=hashes).all(|h| chars.get(j + h) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(j)
}

/// The index of the token that closes the bracket opened at `open`.
fn closing(toks: &[Tok], open: usize) -> usize {
    let (o, c) = match toks[open] {
        Tok::Punct('{') => ('{', '}'),
        Tok::Punct('[') => ('[', ']'),
        Tok::Punct('(') => ('(', ')'),
        _ => return open,
    };
    let mut depth = 0;
    for (i, tok) in toks.iter().enumerate().skip(open) {
        if *tok == Tok::Punct(o) {
            depth += 1;
        } else if *tok == Tok::Punct(c) {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    toks.len()
}

/// The index after the item that starts at `i`: a `use` runs to its `;`, anything else to its
/// first `;` or to the `}` closing its first brace outside parentheses.
fn item_end(toks: &[Tok], mut i: usize) -> usize {
    let is_use = toks[i..]
        .iter()
        .take_while(|t| !matches!(t, Tok::Punct(';') | Tok::Punct('{')))
        .any(|t| *t == Tok::Ident("use".into()));
    while i < toks.len() {
        match toks[i] {
            Tok::Punct(';') => return i + 1,
            Tok::Punct('(') | Tok::Punct('[') => i = closing(toks, i) + 1,
            Tok::Punct('{') if is_use => i = closing(toks, i) + 1,
            Tok::Punct('{') => return closing(toks, i) + 1,
            _ => i += 1,
        }
    }
    i
}

/// The paths of a path or use tree starting at `i` (`a::b::{c, d::e}` is `a::b::c` and
/// `a::b::d::e`), and the index after it.
fn path_tree(toks: &[Tok], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    loop {
        match toks.get(i) {
            Some(Tok::Ident(name)) => {
                prefix.push(name.clone());
                i += 1;
            }
            Some(Tok::Punct('{')) => {
                let end = closing(toks, i);
                let mut out = Vec::new();
                let mut j = i + 1;
                while j < end {
                    let (paths, after) = path_tree(toks, j);
                    out.extend(paths.into_iter().map(|p| [prefix.clone(), p].concat()));
                    j = after.max(j + 1);
                    while j < end && toks[j] != Tok::Punct(',') {
                        j += 1;
                    }
                    j += 1;
                }
                return (out, end + 1);
            }
            _ => return (vec![prefix], i),
        }
        if toks.get(i) == Some(&Tok::PathSep) {
            i += 1;
        } else {
            return (vec![prefix], i);
        }
    }
}

/// One module of a crate: its path from the crate root, the absolute paths its code names
/// (`crate::`, `super::` and `self::` paths, outside `#[cfg(test)]` items) and the names it
/// re-exports with `pub use`, each with the absolute path it stands for.
#[derive(Default)]
struct Module {
    names: Vec<Vec<String>>,
    reexports: BTreeMap<String, Vec<String>>,
}

/// `path` made absolute from inside `module`, if it starts with `crate`, `super` or `self` (or
/// with a child module of `module`, given in `children`); `self` segments dropped.
fn absolute(
    module: &[String],
    path: &[String],
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = module.to_vec();
    let mut rest = &path[1..];
    match first.as_str() {
        "crate" => base.clear(),
        "self" => {}
        "super" => {
            base.pop()?;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        name if children.contains(name) => rest = path,
        _ => return None,
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// Reads the module `path` (code in `toks`) and the modules it declares, whose files lie in
/// `dir`, into `modules`.
fn read_module(
    toks: &[Tok],
    path: Vec<String>,
    dir: &Path,
    modules: &mut BTreeMap<Vec<String>, Module>,
) {
    // The child modules first, so that a `pub use child::X` is known for a re-export.
    let mut children = BTreeSet::new();
    let mut i = 0;
    let mut test_only = false;
    let mut uses = Vec::new();
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('#') if toks.get(i + 1) == Some(&Tok::Punct('[')) => {
                let end = closing(toks, i + 1);
                let cfg_test = [
                    Tok::Ident("cfg".into()),
                    Tok::Punct('('),
                    Tok::Ident("test".into()),
                    Tok::Punct(')'),
                ];
                test_only |= toks[i + 2..end] == cfg_test;
                i = end + 1;
            }
            Tok::Punct('#') if toks.get(i + 1) == Some(&Tok::Punct('!')) => {
                i = closing(toks, i + 2) + 1;
            }
            _ if test_only => {
                i = item_end(toks, i);
                test_only = false;
            }
            Tok::Ident(kw) if kw == "mod" => {
                let Some(Tok::Ident(name)) = toks.get(i + 1) else {
                    i += 1;
                    continue;
                };
                let child = [path.clone(), vec![name.clone()]].concat();
                children.insert(name.clone());
                match toks.get(i + 2) {
                    Some(Tok::Punct('{')) => {
                        let end = closing(toks, i + 2);
                        read_module(&toks[i + 3..end], child, &dir.join(name), modules);
                        i = end + 1;
                    }
                    _ => {
                        let file = [
                            dir.join(format!("{name}.rs")),
                            dir.join(name).join("mod.rs"),
                        ]
                        .into_iter()
                        .find(|f| f.exists())
                        .unwrap_or_else(|| panic!("{}: mod {name}: no file", dir.display()));
                        let text = std::fs::read_to_string(&file).expect("a source file");
                        read_module(&tokens(&text), child, &dir.join(name), modules);
                        i += 2;
                    }
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let public = i > 0
                    && (toks[i - 1] == Tok::Ident("pub".into()) || toks[i - 1] == Tok::Punct(')'));
                let (paths, end) = path_tree(toks, i + 1);
                // The name each path is brought in as: its last segment, or the one after `as`.
                let alias = match (toks.get(end), toks.get(end + 1)) {
                    (Some(Tok::Ident(a)), Some(Tok::Ident(name))) if a == "as" => {
                        Some(name.clone())
                    }
                    _ => None,
                };
                uses.push((public, paths, alias));
                i = end;
            }
            Tok::Ident(first) if matches!(first.as_str(), "crate" | "super" | "self") => {
                let after_dollar = i > 0 && toks[i - 1] == Tok::Punct('$');
                let after_sep = i > 0 && toks[i - 1] == Tok::PathSep;
                if toks.get(i + 1) == Some(&Tok::PathSep) && !after_dollar && !after_sep {
                    let (paths, end) = path_tree(toks, i);
                    uses.push((false, paths, None));
                    i = end;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    let mut module = Module::default();
    for (public, paths, alias) in uses {
        let single = paths.len() == 1;
        for relative in paths {
            let Some(absolute) = absolute(&path, &relative, &children) else {
                continue;
            };
            if public {
                let name = match (&alias, single) {
                    (Some(alias), true) => Some(alias.clone()),
                    _ => relative
                        .last()
                        .filter(|n| *n != "self" && *n != "*")
                        .cloned(),
                };
                if let Some(name) = name {
                    module.reexports.insert(name, absolute.clone());
                }
            }
            module.names.push(absolute);
        }
    }
    modules.insert(path, module);
}

/// The module an absolute path names: the deepest module it runs through, after following the
/// re-exports (`crate::Thing`, re-exported from `crate::worker::Thing`, names `worker`).
fn named_module(modules: &BTreeMap<Vec<String>, Module>, path: &[String]) -> Vec<String> {
    let mut path = path.to_vec();
    for _ in 0..16 {
        let mut depth = 0;
        while depth < path.len() && modules.contains_key(&path[..=depth]) {
            depth += 1;
        }
        let module = path[..depth].to_vec();
        let Some(next) = path.get(depth) else {
            return module;
        };
        match modules[&module].reexports.get(next) {
            Some(target) if target[..] != path[..=depth] => {
                path = [target.clone(), path[depth + 1..].to_vec()].concat();
            }
            _ => return module,
        }
    }
    path
}

/// For each module of the crate whose root is `root` (`lib.rs` or `main.rs`), its child
/// modules, each with the siblings it uses: a module uses a sibling when its code, or that of
/// a module inside it, names the sibling or anything inside it.
fn sibling_graphs(root: &Path) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let text = std::fs::read_to_string(root).expect("a crate root");
    let mut modules = BTreeMap::new();
    let dir = root.parent().expect("src/");
    read_module(&tokens(&text), Vec::new(), dir, &mut modules);
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for path in modules.keys() {
        if let Some((name, parent)) = path.split_last() {
            graphs
                .entry(parent.to_vec())
                .or_default()
                .entry(name.clone())
                .or_default();
        }
    }
    for (from, module) in &modules {
        for name in &module.names {
            let to = named_module(&modules, name);
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                graphs
                    .get_mut(&from[..common])
                    .expect("a parent module")
                    .get_mut(&from[common])
                    .expect("a child module")
                    .insert(to[common].clone());
            }
        }
    }
    graphs
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

/// Whether `to` is reached from `from` in `graph`.
fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(node) = stack.pop() {
        if node == to {
            return true;
        }
        if seen.insert(node.clone()) {
            stack.extend(graph[&node].iter().cloned());
        }
    }
    false
}

/// Every crate of the workspace, by directory, for [`no_two_modules_need_each_other`].
const CRATES: &[&str] = &[
    "model",
    "shared",
    "schedule",
    "retention",
    "simulate",
    "scheduler",
    "retention-worker",
    "deleter",
    "copier",
    "executor",
    "cli",
];

#[test]
fn no_two_modules_need_each_other() {
    let mut broken = Vec::new();
    for krate in CRATES {
        let src = repo_root().join(krate).join("src");
        let mut found = 0;
        for root in ["lib.rs", "main.rs"] {
            let root = src.join(root);
            if !root.exists() {
                continue;
            }
            for (parent, graph) in sibling_graphs(&root) {
                found += graph.len();
                if let Some(circle) = circle(&graph) {
                    let parent: String = parent.iter().map(|p| format!("{p}::")).collect();
                    let circle: Vec<String> =
                        circle.iter().map(|m| format!("{parent}{m}")).collect();
                    broken.push(format!("{krate}/src: {}", circle.join(" -> ")));
                    for (from, tos) in &graph {
                        for to in tos {
                            if reaches(&graph, to, from) {
                                broken.push(format!("    edge {parent}{from} -> {parent}{to}"));
                            }
                        }
                    }
                }
            }
        }
        assert!(found > 2, "{krate}: only {found} modules found");
    }
    assert!(
        broken.is_empty(),
        "modules in a circle (make them one module, or move the shared part down a \
         floor):\n{}",
        broken.join("\n")
    );
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

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// Issue 48: consumers are made in one place each: the channel table's durables
/// (`shared/src/channels`) and the ordered reads of whole buckets, histories and the audit
/// (`shared/src/stream_read.rs`). A service that made its own would be a channel the table,
/// its authorization test and tenancy cannot see.
#[test]
fn consumers_are_made_by_the_channel_table_and_stream_read_only() {
    let allowed = |path: &Path| {
        let path = path.to_string_lossy();
        path.contains("shared/src/channels") || path.ends_with("shared/src/stream_read.rs")
    };
    let mut makers = Vec::new();
    let mut seen_allowed = 0;
    for krate in CRATES {
        for file in rust_files(&repo_root().join(krate).join("src")) {
            let text = std::fs::read_to_string(&file).expect("a source file");
            let toks = tokens(&text);
            for window in toks.windows(2) {
                if let [Tok::Ident(name), Tok::Punct('(')] = window {
                    if name == "create_consumer" || name == "get_or_create_consumer" {
                        if allowed(&file) {
                            seen_allowed += 1;
                        } else {
                            makers.push(format!("{} ({name})", file.display()));
                        }
                    }
                }
            }
        }
    }
    assert!(
        seen_allowed >= 2,
        "the test no longer sees the allowed makers"
    );
    assert!(
        makers.is_empty(),
        "consumers made outside the channel table and stream_read:\n{}",
        makers.join("\n")
    );
}
