//! The direction of imports inside `src/` (see `shared/design/architecture.md` and the
//! layout table in README.md), checked on the source text so the rule cannot rot:
//!
//! - `proto` and `corefile` are leaves; `telemetry` sits on `proto`; `chain` (the plugin and
//!   setup contracts) on `proto`, `corefile` and `telemetry`;
//! - `cluster` (the zone and its sources) on `proto` and `telemetry`: no Corefile, no plugin;
//! - `dns` (the cluster zone's answerer) on `cluster` and `proto`;
//! - `plugin` on everything below it, and no plugin imports another (only `plugin/mod.rs` and
//!   the registry name them);
//! - `server` on `chain`, `proto` and `telemetry`: it never imports a plugin;
//! - the runtime (`app`, `config`, `http`, `main`, and the harnesses `testing` and `fuzzing`,
//!   `lib`) on anything.
//!
//! Every `crate::NAME` path counts, in `use` lines and inline, tests included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each layer may import (besides itself).
const ALLOWED: &[(&str, &[&str])] = &[
    ("proto", &[]),
    ("corefile", &[]),
    ("telemetry", &["proto"]),
    ("chain", &["proto", "corefile", "telemetry"]),
    ("cluster", &["proto", "telemetry"]),
    ("plugin", &["proto", "corefile", "telemetry", "chain", "cluster"]),
    ("server", &["proto", "telemetry", "chain"]),
];

/// The runtime: may import anything.
const RUNTIME: &[&str] = &["app", "config", "http", "main", "testing", "fuzzing", "lib"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The names `NAME` of every `crate::NAME...` path in `text`, comments left out, and for each
/// the path's next segment (`crate::plugin::cache` gives `("plugin", "cache")`).
fn crate_paths(text: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let word = |s: &str| {
                s.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            };
            let first = word(after);
            let next = after[first.len()..]
                .strip_prefix("::")
                .map(word)
                .unwrap_or_default();
            // `cluster_dns::crate::...` does not occur; `somecrate::` is not `crate::`.
            let before = &rest[..at];
            let consumed = first.len();
            if !before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') && !first.is_empty() {
                out.insert((first, next));
            }
            rest = &after[consumed..];
        }
    }
    out
}

/// The layer of a file (its first path component under `src/`) and, for a plugin, its folder
/// or file name.
fn layer_of(rel: &Path) -> (String, String) {
    let mut parts = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned());
    let layer = parts.next().unwrap_or_default();
    let sub = parts.next().unwrap_or_default();
    (layer, sub)
}

/// The imports of `text` (a file of `layer`, plugin `sub`) against the rules.
fn violations(layer: &str, sub: &str, text: &str) -> Vec<String> {
    if RUNTIME.contains(&layer) {
        return Vec::new();
    }
    let allowed = ALLOWED
        .iter()
        .find(|(l, _)| *l == layer)
        .map(|(_, a)| *a)
        .unwrap_or_else(|| panic!("layer '{layer}' is not in the table: add it to ALLOWED"));
    let mut out = Vec::new();
    for (first, next) in crate_paths(text) {
        if first == layer {
            let names_a_plugin = layer == "plugin" && !next.is_empty() && next != sub;
            if names_a_plugin && !["mod", "registry"].contains(&sub) {
                out.push(format!("plugin '{sub}' imports plugin '{next}'"));
            }
        } else if !allowed.contains(&first.as_str()) {
            out.push(format!("{layer} imports {first}"));
        }
    }
    out
}

#[test]
fn imports_go_one_way_and_no_plugin_imports_another() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "src/ not found: {}", src.display());
    let mut bad = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let (layer, sub) = layer_of(rel);
        let text = std::fs::read_to_string(f).unwrap();
        for v in violations(&layer, &sub, &text) {
            bad.push(format!("{}: {v}", rel.display()));
        }
        for (first, _) in crate_paths(&text) {
            if first != layer {
                graph.entry(layer.clone()).or_default().insert(first);
            }
        }
    }
    assert!(
        bad.is_empty(),
        "imports against the layering:\n{}",
        bad.join("\n")
    );
    // No circle between top-level modules (the runtime's files import everything, and nothing
    // imports them but one another).
    let runtime: BTreeSet<String> = RUNTIME.iter().map(|s| (*s).to_owned()).collect();
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        skip: &BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            return Some(path[at..].to_vec());
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if skip.contains(next) {
                continue;
            }
            if let Some(c) = visit(next, graph, skip, path) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    for start in graph.keys().filter(|k| !runtime.contains(*k)) {
        if let Some(circle) = visit(start, &graph, &runtime, &mut Vec::new()) {
            panic!("import circle: {}", circle.join(" -> "));
        }
    }
}

/// The checker itself catches what it is for.
#[test]
fn the_layer_check_catches_a_server_importing_a_plugin() {
    let text = "use crate::proto::Question;\nuse crate::plugin::cache::Cache; // the memo's old way\n";
    assert_eq!(violations("server", "memo", text), ["server imports plugin"]);
    assert_eq!(
        violations("plugin", "cache", "use crate::plugin::forward::Forward;"),
        ["plugin 'cache' imports plugin 'forward'"]
    );
    assert!(violations("plugin", "registry", "use crate::plugin::forward::Forward;").is_empty());
    assert!(
        violations(
            "server",
            "tcp",
            "// use crate::plugin::x;\nuse crate::chain::Chain;"
        )
        .is_empty()
    );
    assert!(violations("app", "", "use crate::plugin::cache::Cache;").is_empty());
    assert_eq!(
        violations("cluster", "watch", "x::<crate::config::Config>()"),
        ["cluster imports config"]
    );
}
