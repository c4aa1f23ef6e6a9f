//! The direction of imports inside `src/` (see `shared/design/architecture.md` and the
//! layout table in README.md), checked on the source text so the rule cannot rot:
//!
//! - `proto` and `corefile` are leaves; `telemetry` sits on `proto`; `chain` (the plugin and
//!   setup contracts) on `proto`, `corefile` and `telemetry`;
//! - `cluster` (the zone and its sources) on `proto` and `telemetry`: no Corefile, no plugin;
//! - `plugin` on everything below it, and no plugin imports another (only `plugin/mod.rs` and
//!   the registry name them); every plugin may import the plugin kit (`plugin/kit/`: what
//!   plugins share with one another and the server never reads, as CoreDNS's `plugin/pkg`), and
//!   the kit imports no plugin;
//! - `server` on `chain`, `proto` and `telemetry`: it never imports a plugin;
//! - the runtime (`app`, `config`, `http`, `main`, and the harnesses `testing` and `fuzzing`,
//!   `lib`) on anything but plugins: of `plugin`, `app`, `config` and the harnesses import only
//!   the registry, so a plugin is a folder and a line in the registry, never a runtime edit.
//!   No runtime file imports the plugin kit: none must (what the runtime reads of plugins,
//!   such as the `OwnEndpoint` SIGTERM reads, is in `chain`); the server imports no plugin.
//!
//! Every `crate::NAME` path counts, in `use` lines and inline, tests included.
//!
//! And file by file: no files import one another in a loop of any length (a `crate::`,
//! `super::` or `self::` path, or a `mod.rs`'s use of a child it declares, is an import of the
//! file that defines what it names, followed through `pub use` re-exports; a `mod.rs`
//! re-exporting its children is not itself an import). Every file
//! under `src/` says what it owns in a `//!` first line and holds at most [`MAX_LINES`] lines
//! before its tests.
//!
//! And the plugin contract stays small (issue 43): `src/chain/` declares at most
//! [`MAX_CHAIN_ITEMS`] public items and [`MAX_CHAIN_METHODS`] public methods (what is counted:
//! [`chain_public_declarations`]), and the `Plugin` trait has at most [`MAX_PLUGIN_METHODS`]
//! methods.
//!
//! And every plugin folder has one shape (issue 43): `mod.rs`, `setup.rs` and `README.md`, no
//! `build.rs`, and the `impl Configured` in `setup.rs` only (so never in `mod.rs`); the plugin
//! kit is no plugin ([`plugin_shape_violations`]).
//!
//! And the server's answer path stays named stages (issue 43): no function under
//! `src/server/` spans more than [`MAX_SERVER_FN_LINES`] lines (tests left out: the lines
//! before a file's `#[cfg(test)]`), and `src/server/mod.rs` holds at most
//! [`MAX_SERVER_MOD_LINES`] before its tests.

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

/// The runtime: may import anything but plugins.
const RUNTIME: &[&str] = &[
    "app", "config", "http", "logging", "main", "testing", "fuzzing", "lib",
];

/// The runtime files that name no plugin: of `plugin` they import the registry alone.
const PLUGIN_BLIND: &[&str] = &["app", "config", "testing", "fuzzing"];

/// The plugin kit: a folder under `plugin/` that every plugin may import and that imports no
/// plugin; no runtime file imports it.
const KIT: &str = "kit";

/// Node management (node-cache mode), beside the runtime: of `app` it imports only what
/// `app`'s root exports (never one of its modules), and nothing but `main` imports it.
const NODE_ROOM: &str = "nodecache";

/// The most lines a file under `src/` holds before its `#[cfg(test)]` module.
const MAX_LINES: usize = 900;

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
    if RUNTIME.contains(&layer)
        && layer != "main"
        && crate_paths(text).iter().any(|(first, _)| first == NODE_ROOM)
    {
        return vec![format!(
            "{layer} imports {NODE_ROOM} (node management is not the runtime's)"
        )];
    }
    if RUNTIME.contains(&layer)
        && crate_paths(text)
            .iter()
            .any(|(first, next)| first == "plugin" && next == KIT)
    {
        return vec![format!(
            "{layer} imports the plugin kit (the runtime reads no plugin helper)"
        )];
    }
    if PLUGIN_BLIND.contains(&layer) {
        return crate_paths(text)
            .into_iter()
            .filter(|(first, next)| first == "plugin" && next != "registry")
            .map(|(_, next)| {
                format!("{layer} imports plugin '{next}' (the runtime names no plugin but the registry)")
            })
            .collect();
    }
    if layer == NODE_ROOM {
        let inside = |m: &str| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/app")
                .join(m)
                .exists()
                || Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join(format!("src/app/{m}.rs"))
                    .exists()
        };
        let mut out: Vec<String> = crate_paths(text)
            .into_iter()
            .filter(|(first, _)| first == "plugin")
            .map(|(_, next)| format!("{layer} imports plugin '{next}'"))
            .collect();
        // What it names of `app`, braces opened: `crate::app::{Running, build::x}`.
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for part in code.split("crate::app::").skip(1) {
                let items = match part.strip_prefix('{') {
                    Some(group) => group.split('}').next().unwrap_or("").to_owned(),
                    None => part.to_owned(),
                };
                for item in items.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && inside(&name) {
                        out.push(format!("{layer} imports app's insides ('app::{name}')"));
                    }
                }
            }
        }
        return out;
    }
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
            let names_a_plugin = layer == "plugin" && !next.is_empty() && next != sub && next != KIT;
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
    // Every plugin may import the kit; the kit imports no plugin, and no runtime file the kit.
    assert!(violations("plugin", "forward", "use crate::plugin::kit::TapSink;").is_empty());
    assert_eq!(
        violations("plugin", "kit", "use crate::plugin::dnstap::Dnstap;"),
        ["plugin 'kit' imports plugin 'dnstap'"]
    );
    assert_eq!(
        violations("app", "drain", "use crate::plugin::kit::Notifier;"),
        ["app imports the plugin kit (the runtime reads no plugin helper)"]
    );
    assert_eq!(
        violations("main", "", "use crate::plugin::kit::Notifier;"),
        ["main imports the plugin kit (the runtime reads no plugin helper)"]
    );
    assert!(
        violations(
            "server",
            "tcp",
            "// use crate::plugin::x;\nuse crate::chain::Chain;"
        )
        .is_empty()
    );
    assert_eq!(
        violations("app", "build", "use crate::plugin::cache::Cache;"),
        ["app imports plugin 'cache' (the runtime names no plugin but the registry)"]
    );
    assert!(violations("app", "build", "use crate::plugin::registry::build_chain;").is_empty());
    assert!(violations("main", "", "use crate::plugin::cache::Cache;").is_empty());
    assert_eq!(
        violations("cluster", "watch", "x::<crate::config::Config>()"),
        ["cluster imports config"]
    );
    // Node management starts the server through app's root, and nothing of the runtime's
    // imports it but the CLI.
    assert!(violations("nodecache", "mod", "use crate::app::{Running, start_with_port};").is_empty());
    assert_eq!(
        violations("nodecache", "mod", "use crate::app::{Running, listen::bind};"),
        ["nodecache imports app's insides ('app::listen')"]
    );
    assert_eq!(
        violations("nodecache", "mod", "use crate::app::build::build;"),
        ["nodecache imports app's insides ('app::build')"]
    );
    assert_eq!(
        violations("nodecache", "rules", "use crate::plugin::forward::Forward;"),
        ["nodecache imports plugin 'forward'"]
    );
    assert_eq!(
        violations("app", "mod", "pub use crate::nodecache::run;"),
        ["app imports nodecache (node management is not the runtime's)"]
    );
    assert!(violations("main", "", "use crate::nodecache::run;").is_empty());
}

/// The module path of a file under `src/` (`plugin/acl/mod.rs` is `plugin::acl`,
/// `plugin/acl/handler.rs` is `plugin::acl::handler`, `lib.rs` is the crate root).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The module paths `text` (the file of module `module`) imports: every `crate::`, `super::`
/// and `self::` path, resolved to absolute segments (`use a::{b, c::d}` gives both), and each
/// use of a child module it declares (`mod x;` then `x::...`), except in `pub use` re-exports.
/// Lines after an inline `mod NAME {` (the tests) resolve `super` against the file's own module.
fn imported_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let children: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let l = l
                .trim_start()
                .trim_start_matches("pub ")
                .trim_start_matches("pub(crate) ");
            l.strip_prefix("mod ")
                .and_then(|r| r.strip_suffix(';'))
                .map(|n| n.trim().to_owned())
        })
        .collect();
    let mut base = module.to_vec();
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let trimmed = code.trim_start();
        if let Some(rest) = trimmed
            .strip_prefix("mod ")
            .or_else(|| trimmed.strip_prefix("pub mod "))
            && rest.trim_end().ends_with('{')
        {
            base = module.to_vec();
            base.push(ident(rest).to_owned());
            continue;
        }
        if trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ") {
            continue;
        }
        let reexport = trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ");
        let bytes = code.as_bytes();
        let mut at = 0;
        while at < code.len() {
            let rest = &code[at..];
            let word = ident(rest);
            let boundary = at == 0 || {
                let b = bytes[at - 1];
                !(b.is_ascii_alphanumeric() || b == b'_' || b == b':')
            };
            if word.is_empty() || !boundary {
                at += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            }
            let after = &rest[word.len()..];
            if !after.starts_with("::") {
                at += word.len();
                continue;
            }
            // The path: `word::seg::seg...`, possibly ending in a `{...}` group.
            let mut start: Vec<String> = match word {
                "crate" => Vec::new(),
                "self" => base.clone(),
                "super" => base[..base.len().saturating_sub(1)].to_vec(),
                w if children.iter().any(|c| c == w) && !reexport => {
                    let mut p = module.to_vec();
                    p.push(w.to_owned());
                    p
                }
                _ => {
                    at += word.len();
                    continue;
                }
            };
            let mut tail = after;
            while let Some(next) = tail.strip_prefix("::") {
                if next.starts_with("super") && ident(next) == "super" {
                    start.pop();
                    tail = &next["super".len()..];
                    continue;
                }
                let seg = ident(next);
                if seg.is_empty() {
                    tail = next;
                    break;
                }
                start.push(seg.to_owned());
                tail = &next[seg.len()..];
            }
            if let Some(group) = tail.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let mut p = start.clone();
                    for seg in item.trim().split("::") {
                        let seg = ident(seg.trim());
                        if !seg.is_empty() && seg != "self" {
                            p.push(seg.to_owned());
                        }
                    }
                    out.push(p);
                }
            } else {
                out.push(start);
            }
            at = code.len() - tail.len().min(code.len() - at);
            at = at.max(code.len() - rest.len() + word.len());
        }
    }
    out
}

/// The file of the longest module prefix of `path` that has one.
fn file_of<'a>(path: &[String], files: &'a BTreeMap<Vec<String>, String>) -> Option<&'a String> {
    (0..=path.len()).rev().find_map(|n| files.get(&path[..n]))
}

/// The items each module re-exports (`pub use child::Item;` in its file), and where from.
fn reexports(sources: &BTreeMap<Vec<String>, (String, String)>) -> BTreeMap<Vec<String>, Vec<String>> {
    let mut out = BTreeMap::new();
    for (module, (_, text)) in sources {
        for line in text.lines() {
            let t = line.trim_start();
            if !(t.starts_with("pub use ") || t.starts_with("pub(crate) use ")) {
                continue;
            }
            let stmt = t.split_once("use ").map_or("", |(_, r)| r).trim_end_matches(';');
            // Only a module's own children: `pub use child::...`.
            let first = ident(stmt);
            if first.is_empty() || ["crate", "super", "self"].contains(&first) {
                continue;
            }
            let mut child = module.clone();
            child.push(first.to_owned());
            if !sources.contains_key(&child) {
                continue;
            }
            let fake_module = module.clone();
            let as_child = format!("self::{stmt}");
            for target in imported_paths(&fake_module, &as_child) {
                if let Some(item) = target.last() {
                    let mut at = module.clone();
                    at.push(item.clone());
                    out.insert(at, target);
                }
            }
        }
    }
    out
}

/// `path` with the re-exports it goes through followed to where the item is defined.
fn through_reexports(path: Vec<String>, reexported: &BTreeMap<Vec<String>, Vec<String>>) -> Vec<String> {
    let mut path = path;
    for _ in 0..8 {
        let hit = (1..=path.len())
            .rev()
            .find_map(|n| reexported.get(&path[..n]).map(|to| (n, to)));
        match hit {
            Some((n, to)) => {
                let mut next = to.clone();
                next.extend_from_slice(&path[n..]);
                if next == path {
                    break;
                }
                path = next;
            }
            None => break,
        }
    }
    path
}

/// The files each file imports (through re-exports, to where the item is defined), in
/// `sources` (module path to file name, text).
fn import_edges(sources: &BTreeMap<Vec<String>, (String, String)>) -> BTreeMap<String, BTreeSet<String>> {
    let files: BTreeMap<Vec<String>, String> =
        sources.iter().map(|(m, (f, _))| (m.clone(), f.clone())).collect();
    let reexported = reexports(sources);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, (file, text)) in sources {
        for path in imported_paths(module, text) {
            let path = through_reexports(path, &reexported);
            if let Some(target) = file_of(&path, &files)
                && target != file
            {
                edges.entry(file.clone()).or_default().insert(target.clone());
            }
        }
    }
    edges
}

/// Loops of files that import one another, of any length, each as its files (sorted), found
/// as the graph's strongly connected components of more than one file (Tarjan's algorithm).
fn import_loops(sources: &BTreeMap<Vec<String>, (String, String)>) -> Vec<String> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        loops: Vec<String>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let at = self.index.len();
            self.index.insert(v, at);
            self.low.insert(v, at);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    self.loops.push(component.join(" <-> "));
                }
            }
        }
    }
    let edges = import_edges(sources);
    let mut t = Tarjan {
        edges: &edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        loops: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.loops.sort();
    t.loops
}

/// Every file under `src/`, by module path: its name and text.
fn sources() -> BTreeMap<Vec<String>, (String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap();
            (
                module_of(rel),
                (rel.display().to_string(), std::fs::read_to_string(f).unwrap()),
            )
        })
        .collect()
}

#[test]
fn no_files_import_one_another_in_a_loop() {
    let loops = import_loops(&sources());
    assert!(
        loops.is_empty(),
        "files that import one another (through re-exports, at any loop length):\n{}",
        loops.join("\n")
    );
}

#[test]
fn every_file_says_what_it_owns_and_stays_small() {
    let mut bad = Vec::new();
    for (file, text) in sources().values() {
        if !text.starts_with("//!") {
            bad.push(format!("{file}: no `//!` comment saying what it owns"));
        }
        let lines = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .count();
        if lines > MAX_LINES {
            bad.push(format!(
                "{file}: {lines} lines before its tests (at most {MAX_LINES})"
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The file checker catches what it is for.
#[test]
fn the_file_checks_catch_import_loops_and_resolve_paths() {
    let module = |s: &str| s.split("::").map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        imported_paths(
            &module("plugin::acl::handler"),
            "use super::setup::{AclConfig, Action};\nuse super::*;\nuse crate::chain::{Next, walk::Plugin};"
        ),
        [
            module("plugin::acl::setup::AclConfig"),
            module("plugin::acl::setup::Action"),
            module("plugin::acl"),
            module("chain::Next"),
            module("chain::walk::Plugin"),
        ]
    );
    // A mod.rs using a child it declares imports it; re-exporting it does not.
    assert_eq!(
        imported_paths(
            &module("app"),
            "mod build;\npub use build::Generation;\nfn f() { build::build(); }"
        ),
        [module("app::build::build")]
    );
    // In the tests module, `super` is the file itself.
    assert_eq!(
        imported_paths(
            &module("server::tcp"),
            "#[cfg(test)]\nmod tests {\n    use super::*;\n}"
        ),
        [module("server::tcp")]
    );
    let mut sources = BTreeMap::new();
    sources.insert(
        module("server::tcp"),
        ("server/tcp.rs".to_owned(), "use super::doh::Doh;".to_owned()),
    );
    sources.insert(
        module("server::doh"),
        (
            "server/doh.rs".to_owned(),
            "use crate::server::tcp::Slots;".to_owned(),
        ),
    );
    sources.insert(
        module("server"),
        (
            "server/mod.rs".to_owned(),
            "pub use tcp::Slots;\nmod tcp;".to_owned(),
        ),
    );
    assert_eq!(import_loops(&sources), ["server/doh.rs <-> server/tcp.rs"]);
    // The rrl shape (issue 43): mod.rs uses its child `table`, `table` the handler, and the
    // handler an item mod.rs defines: a loop of three files, which a check of pairs missed
    // (as it missed forward's setup -> chained -> handler -> setup until this check).
    let mut rrl = BTreeMap::new();
    rrl.insert(
        module("plugin::rrl"),
        (
            "plugin/rrl/mod.rs".to_owned(),
            "mod handler;\nmod table;\npub use table::Table;\npub struct Limits;\nfn f() { table::Table::new(); }".to_owned(),
        ),
    );
    rrl.insert(
        module("plugin::rrl::table"),
        (
            "plugin/rrl/table.rs".to_owned(),
            "use super::handler::Bucket;".to_owned(),
        ),
    );
    rrl.insert(
        module("plugin::rrl::handler"),
        (
            "plugin/rrl/handler.rs".to_owned(),
            "use super::Limits;".to_owned(),
        ),
    );
    assert_eq!(
        import_loops(&rrl),
        ["plugin/rrl/handler.rs <-> plugin/rrl/mod.rs <-> plugin/rrl/table.rs"]
    );
    // No loop, no report: a chain a -> b -> c.
    rrl.insert(
        module("plugin::rrl::handler"),
        ("plugin/rrl/handler.rs".to_owned(), "".to_owned()),
    );
    assert!(import_loops(&rrl).is_empty());
}

/// The files every plugin folder under `src/plugin/` has (issue 43: one shape for every
/// plugin): `mod.rs` (what the plugin owns, its modules and re-exports, its `families`),
/// `setup.rs` (the Corefile syntax: parsing and the `impl Configured`) and `README.md`.
const PLUGIN_FILES: &[&str] = &["mod.rs", "setup.rs", "README.md"];

/// True when `text` implements `chain::Configured` for a type (comments left out), by any
/// path to the trait.
fn implements_configured(text: &str) -> bool {
    text.lines().any(|l| {
        let code = l.split("//").next().unwrap_or("").trim_start();
        code.starts_with("impl")
            && ["Configured for", "chain::Configured for"]
                .iter()
                .any(|t| code.contains(&format!(" {t} ")) || code.contains(&format!("::{t} ")))
    })
}

/// What `folders` (each plugin folder's name and its files: path inside the folder, text)
/// breaks of the plugin shape: a folder without one of [`PLUGIN_FILES`], a `build.rs` (Cargo's
/// build-script name; the `impl Configured` is `setup.rs`'s), an `impl Configured` in any
/// file but a `setup.rs` (so never in `mod.rs`). The plugin kit is no plugin and is left out.
fn plugin_shape_violations(folders: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let mut bad = Vec::new();
    for (folder, files) in folders {
        if folder == KIT {
            continue;
        }
        for want in PLUGIN_FILES {
            if !files.contains_key(*want) {
                bad.push(format!("plugin/{folder}: no {want}"));
            }
        }
        for (file, text) in files {
            let name = file.rsplit('/').next().unwrap_or(file);
            if name == "build.rs" {
                bad.push(format!(
                    "plugin/{folder}/{file}: a build.rs (its impl Configured belongs in setup.rs)"
                ));
            }
            if name != "setup.rs" && file.ends_with(".rs") && implements_configured(text) {
                bad.push(format!(
                    "plugin/{folder}/{file}: an impl Configured outside setup.rs"
                ));
            }
        }
    }
    bad
}

/// Every plugin folder under `src/`: its name and its files (path inside it, text; a file
/// other than Rust has an empty text).
fn plugin_folders() -> BTreeMap<String, BTreeMap<String, String>> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
                continue;
            }
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let text = if rel.ends_with(".rs") {
                std::fs::read_to_string(&path).unwrap()
            } else {
                String::new()
            };
            out.insert(rel, text);
        }
    }
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/plugin");
    let mut folders = BTreeMap::new();
    for entry in std::fs::read_dir(&plugins).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let mut files = BTreeMap::new();
            walk(&path, &path, &mut files);
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            folders.insert(name, files);
        }
    }
    folders
}

/// Issue 43: every plugin folder has one shape (see [`plugin_shape_violations`]).
#[test]
fn every_plugin_folder_has_the_same_shape() {
    let folders = plugin_folders();
    assert!(
        folders.len() > 40,
        "the check sees the plugin folders: {}",
        folders.len()
    );
    let bad = plugin_shape_violations(&folders);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The shape checker catches what it is for: the shapes the plugin folders had before issue 43
/// (a `build.rs`; a single `mod.rs` with the setup in it).
#[test]
fn the_shape_check_catches_a_build_rs_and_a_configured_outside_setup() {
    let folder = |files: &[(&str, &str)]| {
        files
            .iter()
            .map(|(f, t)| ((*f).to_owned(), (*t).to_owned()))
            .collect::<BTreeMap<_, _>>()
    };
    let mut folders = BTreeMap::new();
    folders.insert(
        "acl".to_owned(),
        folder(&[
            ("README.md", ""),
            ("mod.rs", "//! acl\nmod build;\npub mod setup;"),
            ("setup.rs", "//! syntax\npub fn setup() {}"),
            ("build.rs", "//! glue\nimpl Configured for AclConfig {\n}"),
        ]),
    );
    folders.insert(
        "bind".to_owned(),
        folder(&[
            ("README.md", ""),
            (
                "mod.rs",
                "//! bind\nimpl crate::chain::Configured for BindConfig {}",
            ),
        ]),
    );
    folders.insert(
        "header".to_owned(),
        folder(&[
            (
                "mod.rs",
                "//! header\n// impl Configured for nothing: a comment\npub mod setup;",
            ),
            ("setup.rs", "impl Configured for HeaderConfig {}"),
            (
                "handler/tests.rs",
                "#[cfg(test)]\nimpl chain::Configured for Fake {}",
            ),
        ]),
    );
    folders.insert(
        "kit".to_owned(),
        folder(&[("mod.rs", "//! the kit"), ("setup.rs", "")]),
    );
    assert_eq!(
        plugin_shape_violations(&folders),
        [
            "plugin/acl/build.rs: a build.rs (its impl Configured belongs in setup.rs)",
            "plugin/acl/build.rs: an impl Configured outside setup.rs",
            "plugin/bind: no setup.rs",
            "plugin/bind/mod.rs: an impl Configured outside setup.rs",
            "plugin/header: no README.md",
            "plugin/header/handler/tests.rs: an impl Configured outside setup.rs",
        ]
    );
}

/// The most lines a function under `src/server/` spans (its `fn` line to its closing brace),
/// tests left out: the answer path is named stages, each small enough to read at once.
const MAX_SERVER_FN_LINES: usize = 80;

/// The most lines `src/server/mod.rs` holds before its tests: it declares the modules and
/// re-exports them, and the stages live in files of their own.
const MAX_SERVER_MOD_LINES: usize = 150;

/// `line` with comments, string and character literals left out (`state`: inside a block
/// comment or a string that goes on to the next line). Raw strings are read as plain ones.
fn code_of(line: &str, state: &mut (bool, bool)) -> String {
    let (in_comment, in_string) = state;
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if *in_comment {
            if c == '*' && next == Some('/') {
                *in_comment = false;
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        if *in_string {
            match c {
                '\\' => i += 2,
                '"' => {
                    *in_string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        match (c, next) {
            ('/', Some('/')) => break,
            ('/', Some('*')) => {
                *in_comment = true;
                i += 2;
            }
            ('"', _) => {
                *in_string = true;
                i += 1;
            }
            // A character literal ('{', '\'', '\u{7b}'); a lifetime ('a) has no closing quote.
            ('\'', Some('\\')) => {
                let close = chars.get(i + 3..).and_then(|r| r.iter().position(|&c| c == '\''));
                i += close.map_or(1, |at| at + 4);
            }
            ('\'', Some(_)) if chars.get(i + 2) == Some(&'\'') => i += 3,
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The name of the function a line declares (`pub(crate) async fn name<...>(`), if it does.
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    loop {
        let word = ident(rest);
        rest = match word {
            "pub" => {
                let after = rest["pub".len()..].trim_start();
                match after.strip_prefix('(') {
                    Some(inner) => inner.split_once(')').map_or("", |(_, r)| r).trim_start(),
                    None => after,
                }
            }
            "const" | "async" | "unsafe" | "default" => rest[word.len()..].trim_start(),
            "extern" => {
                let after = rest["extern".len()..].trim_start();
                match after.strip_prefix('"') {
                    Some(abi) => abi.split_once('"').map_or("", |(_, r)| r).trim_start(),
                    None => after,
                }
            }
            "fn" => {
                let name = ident(rest["fn".len()..].trim_start());
                return (!name.is_empty() && rest["fn".len()..].starts_with(char::is_whitespace))
                    .then_some(name);
            }
            _ => return None,
        }
    }
}

/// Every function with a body in `text` before its `#[cfg(test)]` module: its name, the line
/// of its `fn` (from 1) and how many lines it spans, through its closing brace. A nested
/// function counts on its own and in the one around it.
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .collect();
    let mut out = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let mut state = (false, false);
        let code = code_of(line, &mut state);
        let Some(name) = declared_fn(&code).map(str::to_owned) else {
            continue;
        };
        // The body opens at the first `{` outside the signature's brackets; a `;` first means
        // a declaration without one (a trait's).
        let (mut depth, mut brackets, mut opened) = (0usize, 0usize, false);
        let mut state = (false, false);
        let end = lines[at..].iter().enumerate().find_map(|(n, l)| {
            for c in code_of(l, &mut state).chars() {
                match c {
                    '(' | '[' => brackets += 1,
                    ')' | ']' => brackets = brackets.saturating_sub(1),
                    '{' => {
                        opened |= brackets == 0;
                        depth += 1;
                    }
                    '}' => {
                        depth = depth.saturating_sub(1);
                        if opened && depth == 0 {
                            return Some(Some(n));
                        }
                    }
                    ';' if !opened && brackets == 0 && depth == 0 => return Some(None),
                    _ => {}
                }
            }
            None
        });
        if let Some(Some(last)) = end {
            out.push((name, at + 1, last + 1));
        }
    }
    out
}

/// What `text`, the file `file` under `src/server/`, breaks of the length rules.
fn server_length_violations(file: &str, text: &str) -> Vec<String> {
    let mut bad: Vec<String> = function_lengths(text)
        .into_iter()
        .filter(|(_, _, lines)| *lines > MAX_SERVER_FN_LINES)
        .map(|(name, line, lines)| {
            format!("{file}:{line}: fn {name} is {lines} lines (at most {MAX_SERVER_FN_LINES})")
        })
        .collect();
    if file == "server/mod.rs" {
        let lines = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .count();
        if lines > MAX_SERVER_MOD_LINES {
            bad.push(format!(
                "{file}: {lines} lines before its tests (at most {MAX_SERVER_MOD_LINES}: it declares \
                 and re-exports the server's modules; the stages live in files of their own)"
            ));
        }
    }
    bad
}

#[test]
fn the_server_answers_in_stages_of_short_functions() {
    let mut bad = Vec::new();
    for (file, text) in sources().values() {
        if file.starts_with("server/") {
            bad.extend(server_length_violations(file, text));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The length checker catches what it is for.
#[test]
fn the_length_check_counts_bodies_not_strings_or_declarations() {
    let text = "\
pub(crate) async fn a<'x>(s: &'x str) -> [u8; 2] {
    let c = '{';
    let s = \"}}} { \\\" }\";
    /* } */ let e = '\\'';
    [0; 2] // }
}
fn declared(&self) -> u8;
    fn nested() {
        fn inner() {}
    }
fn raw(x: [u8; 3])
where
    u8: Copy,
{
}
#[cfg(test)]
mod tests {
    fn long() {}
}
";
    assert_eq!(
        function_lengths(text),
        [
            ("a".to_owned(), 1, 6),
            ("nested".to_owned(), 8, 3),
            ("inner".to_owned(), 9, 1),
            ("raw".to_owned(), 11, 5),
        ]
    );
    let long = format!("fn long() {{\n{}}}\n", "    x();\n".repeat(79));
    assert_eq!(
        server_length_violations("server/stage.rs", &long),
        ["server/stage.rs:1: fn long is 81 lines (at most 80)"]
    );
    assert!(server_length_violations("server/stage.rs", &long.replacen("    x();\n", "", 1)).is_empty());
    let module = format!("//! m\n{}", "mod x;\n".repeat(150));
    assert_eq!(
        server_length_violations("server/mod.rs", &module),
        [
            "server/mod.rs: 151 lines before its tests (at most 150: it declares and re-exports the \
          server's modules; the stages live in files of their own)"
        ]
    );
}

/// The most public items `src/chain/` declares (issue 43: a small plugin contract). What
/// plugins share only with one another is the plugin kit's (`src/plugin/kit/`), not chain's.
const MAX_CHAIN_ITEMS: usize = 50;

/// The most public methods `src/chain/` declares: the count when the items came down to
/// [`MAX_CHAIN_ITEMS`], so it only goes down.
const MAX_CHAIN_METHODS: usize = 48;

/// The most methods the `Plugin` trait has: what the server calls on every plugin, and
/// `offers` for the rest.
const MAX_PLUGIN_METHODS: usize = 12;

/// What `text`, a file of `src/chain/`, declares public, as `(items, methods)`, each named by
/// its declaration line.
///
/// Counted: every line that declares with a plain `pub` (not `pub(crate)` or `pub(super)`,
/// which no one outside the crate sees, nor `pub use`, a re-export of what is counted where
/// it is declared) a `fn`, `struct`, `enum`, `union`, `trait`, `type`, `const`, `static` or
/// `mod` (`async`, `const`, `unsafe` and `extern` qualifiers allowed). A `fn` declared indented
/// (in an `impl`) is a method; anything else is an item. Left out: the file's tests (from a
/// `#[cfg(test)]` before a `mod`), a declaration right after `#[cfg(test)]` (a helper for
/// tests), struct fields, enum variants and trait methods (a trait is one item; the `Plugin`
/// trait's methods are counted on their own, [`plugin_trait_methods`]).
fn chain_public_declarations(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut items, mut methods) = (Vec::new(), Vec::new());
    let lines: Vec<&str> = text.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let previous = lines[..at].iter().rev().map(|l| l.trim()).find(|l| !l.is_empty());
        if trimmed == "#[cfg(test)]" {
            let next = lines.get(at + 1).map_or("", |l| l.trim_start());
            if next.starts_with("mod ") || next.starts_with("pub mod ") {
                break;
            }
            continue;
        }
        if previous == Some("#[cfg(test)]") {
            continue;
        }
        let Some(mut rest) = trimmed.strip_prefix("pub ") else {
            continue;
        };
        loop {
            let word = ident(rest);
            match word {
                "async" | "unsafe" => rest = rest[word.len()..].trim_start(),
                "const" if ident(rest["const".len()..].trim_start()) == "fn" => {
                    rest = rest["const".len()..].trim_start();
                }
                "extern" => {
                    let after = rest["extern".len()..].trim_start();
                    rest = match after.strip_prefix('"') {
                        Some(abi) => abi.split_once('"').map_or("", |(_, r)| r).trim_start(),
                        None => after,
                    };
                }
                _ => break,
            }
        }
        let kind = ident(rest);
        let declared = format!("{}: {}", at + 1, trimmed.split('{').next().unwrap_or("").trim());
        match kind {
            "fn" if line.len() != trimmed.len() => methods.push(declared),
            "fn" | "struct" | "enum" | "union" | "trait" | "type" | "const" | "static" | "mod" => {
                items.push(declared);
            }
            _ => {}
        }
    }
    (items, methods)
}

/// The methods of `pub trait Plugin` in `text` (`src/chain/walk.rs`): each `fn` its body
/// declares, by name.
fn plugin_trait_methods(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("pub trait Plugin"))
        .skip(1)
        .take_while(|l| *l != "}")
        .filter_map(|l| l.strip_prefix("    fn "))
        .map(|l| ident(l).to_owned())
        .collect()
}

/// Issue 43: the plugin contract stays small. `src/chain/` declares at most
/// [`MAX_CHAIN_ITEMS`] public items and [`MAX_CHAIN_METHODS`] public methods (see
/// [`chain_public_declarations`] for what is counted), and `Plugin` has at most
/// [`MAX_PLUGIN_METHODS`] methods.
#[test]
fn the_plugin_contract_stays_small() {
    let (mut items, mut methods) = (Vec::new(), Vec::new());
    let mut plugin = Vec::new();
    for (file, text) in sources().values() {
        if !file.starts_with("chain/") {
            continue;
        }
        let (i, m) = chain_public_declarations(text);
        items.extend(i.into_iter().map(|d| format!("{file}:{d}")));
        methods.extend(m.into_iter().map(|d| format!("{file}:{d}")));
        if file == "chain/walk.rs" {
            plugin = plugin_trait_methods(text);
        }
    }
    assert!(
        items.len() <= MAX_CHAIN_ITEMS,
        "src/chain/ declares {} public items (at most {MAX_CHAIN_ITEMS}; what only plugins \
         share belongs in src/plugin/kit/):\n{}",
        items.len(),
        items.join("\n")
    );
    assert!(
        methods.len() <= MAX_CHAIN_METHODS,
        "src/chain/ declares {} public methods (at most {MAX_CHAIN_METHODS}):\n{}",
        methods.len(),
        methods.join("\n")
    );
    assert!(
        !plugin.is_empty(),
        "pub trait Plugin not found in src/chain/walk.rs"
    );
    assert!(
        plugin.len() <= MAX_PLUGIN_METHODS,
        "Plugin has {} methods (at most {MAX_PLUGIN_METHODS}; what only some plugins have, \
         they offer by type: Plugin::offers): {}",
        plugin.len(),
        plugin.join(", ")
    );
}

/// The counters count what they say.
#[test]
fn the_contract_count_counts_public_declarations_only() {
    let text = "\
//! pub fn in_a_doc() {}
pub use inner::Reexported;
pub struct Item {
    pub field: u8,
}
pub(crate) fn crate_only() {}
pub const LIMIT: usize = 1;
pub trait Contract {
    fn declared(&self);
}
impl Item {
    pub fn method(&self) {}
    pub const fn constant() -> u8 { 0 }
    pub(super) fn private() {}
    fn plain() {}
}
#[cfg(test)]
pub fn for_tests() {}
pub async fn free() {}
pub type Alias = u8;
#[cfg(test)]
mod tests {
    pub fn in_tests() {}
}
";
    let (items, methods) = chain_public_declarations(text);
    assert_eq!(
        items,
        [
            "3: pub struct Item",
            "7: pub const LIMIT: usize = 1;",
            "8: pub trait Contract",
            "19: pub async fn free()",
            "20: pub type Alias = u8;",
        ]
    );
    assert_eq!(
        methods,
        ["12: pub fn method(&self)", "13: pub const fn constant() -> u8"]
    );
    let walk = "pub trait Plugin: Send {\n    fn name(&self) -> &str;\n    /// x\n    fn serve(\n        &self,\n    ) -> u8 {\n        0\n    }\n}\nfn after() {}\n";
    assert_eq!(plugin_trait_methods(walk), ["name", "serve"]);
}

/// A listener option is its plugin folder plus the server (issue 43): the runtime folds each
/// address's [`ListenerSettings`] through `server::fold_listener` and hands it whole to the
/// server, which turns it into limits (`server/settings.rs`). Of its fields, `src/app/` reads
/// only the two it binds sockets with (the certificate and the UDP socket count): a new
/// option read there fails this test. (`https3`'s bounds, added by issue 44, are the example:
/// their field, plugin and server reading touch no runtime file.)
#[test]
fn the_runtime_reads_no_listener_option_but_what_it_binds_with() {
    let files = sources();
    let settings = &files
        .values()
        .find(|(f, _)| f == "chain/settings.rs")
        .expect("src/chain/settings.rs")
        .1;
    let body = settings
        .split("pub struct ListenerSettings {")
        .nth(1)
        .and_then(|b| b.split("\n}").next())
        .expect("pub struct ListenerSettings in src/chain/settings.rs");
    let fields: Vec<&str> = body
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub ")?.split(':').next())
        .collect();
    assert!(fields.len() >= 7, "{fields:?}");
    let mut read = Vec::new();
    for (file, text) in files.values() {
        if !file.starts_with("app/") {
            continue;
        }
        for field in &fields {
            for at in ["options.", "settings.listener.", "l."] {
                if text.contains(&format!("{at}{field}")) {
                    read.push(format!("{file}: {at}{field}"));
                }
            }
        }
    }
    read.sort();
    read.dedup();
    let allowed = ["tls", "udp_sockets"];
    let extra: Vec<_> = read
        .iter()
        .filter(|r| !allowed.iter().any(|f| r.ends_with(&format!(".{f}"))))
        .collect();
    assert!(
        extra.is_empty(),
        "src/app/ reads listener options the server should: {extra:?}"
    );
    assert!(
        read.iter().any(|r| r.ends_with("options.udp_sockets")),
        "the check sees what app/listen.rs reads: {read:?}"
    );
}
