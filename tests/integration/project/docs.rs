//! The documentation a test keeps true (issue 44): the README's directive table and
//! deploy/README.md's comparison with CoreDNS name every directive of
//! `plugin::registry::PLUGINS`, neither calls a registered directive "not built yet", the
//! not-implemented list is named in full, and every relative link of the repository's Markdown
//! files leads to a file (and heading) that exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cluster_dns::plugin::registry::{NOT_YET_IMPLEMENTED, PLUGINS};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn registered() -> BTreeSet<&'static str> {
    PLUGINS.iter().map(|e| e.name).collect()
}

fn not_yet() -> BTreeSet<&'static str> {
    NOT_YET_IMPLEMENTED.iter().map(|(n, _)| *n).collect()
}

/// The rows (cells, trimmed) of the first Markdown table after the first line of `text` that
/// contains `marker`, header and separator left out.
fn table_after(text: &str, marker: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| !l.contains(marker)).skip(1);
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in lines.by_ref() {
        let line = line.trim();
        if line.starts_with('|') {
            in_table = true;
            let inner = line.trim_start_matches('|').trim_end_matches('|');
            // A `\|` inside a cell is a literal bar, not a cell boundary.
            let cells: Vec<String> = inner
                .replace("\\|", "\u{0}")
                .split('|')
                .map(|c| c.replace('\u{0}', "|").trim().to_owned())
                .collect();
            rows.push(cells);
        } else if in_table {
            break;
        }
    }
    assert!(rows.len() > 2, "no table after {marker:?}");
    // The header and the `| --- |` line.
    rows.drain(..2);
    rows
}

/// The first word of every backquoted span of `text` that looks like a directive.
fn directives_in(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|code| code.split_whitespace().next())
        .filter(|w| {
            w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The text of `text` from `marker` up to `end` (exclusive), or to the end.
fn between<'a>(text: &'a str, marker: &str, end: &str) -> &'a str {
    let at = text.find(marker).unwrap_or_else(|| panic!("no {marker:?}"));
    let rest = &text[at..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

#[test]
fn readme_directive_table_has_a_row_for_each_registered_directive() {
    let readme = read("README.md");
    let rows = table_after(&readme, "Directives implemented so far");
    let registered = registered();
    let mut seen = BTreeSet::new();
    for row in &rows {
        let names = directives_in(&row[0]);
        let name = names
            .first()
            .unwrap_or_else(|| panic!("a row without a directive: {row:?}"));
        assert!(
            registered.contains(name.as_str()),
            "README.md lists `{name}`, which plugin::registry::PLUGINS does not have"
        );
        assert!(seen.insert(name.clone()), "README.md lists `{name}` twice");
        // Its syntax is written out, and one line says what it does and links its README.
        let what = row.get(1).map(String::as_str).unwrap_or("");
        assert!(
            what.contains("](src/plugin/") && what.contains("/README.md)"),
            "README.md's row for `{name}` does not link its plugin README: {what}"
        );
    }
    let missing: Vec<_> = registered.iter().filter(|n| !seen.contains(**n)).collect();
    assert!(
        missing.is_empty(),
        "README.md's directive table lacks {missing:?}"
    );
}

#[test]
fn deploy_readme_compares_every_registered_directive_with_coredns() {
    let deploy = read("deploy/README.md");
    let rows = table_after(&deploy, "### What differs from CoreDNS 1.14.7");
    let registered = registered();
    let not_yet = not_yet();
    let mut seen = BTreeSet::new();
    for row in &rows {
        for name in directives_in(&row[0]) {
            assert!(
                !not_yet.contains(name.as_str()),
                "deploy/README.md compares `{name}`, which is not implemented"
            );
            seen.insert(name);
        }
    }
    let missing: Vec<_> = registered.iter().filter(|n| !seen.contains(**n)).collect();
    assert!(
        missing.is_empty(),
        "deploy/README.md's comparison with CoreDNS lacks {missing:?}"
    );
}

#[test]
fn no_doc_calls_a_registered_directive_not_built() {
    let registered = registered();
    let not_yet = not_yet();
    let readme = read("README.md");
    let deploy = read("deploy/README.md");
    let mut listed_in_deploy = BTreeSet::new();
    for (doc, text, marker, end) in [
        ("README.md", &readme, "CoreDNS directives not built yet", "\n\n"),
        (
            "deploy/README.md",
            &deploy,
            "CoreDNS 1.14.7 plugins cluster-dns does not have",
            "\n#",
        ),
    ] {
        let part = between(text, marker, end);
        for name in directives_in(part) {
            assert!(
                !registered.contains(name.as_str()),
                "{doc} says `{name}` is not built, but it is registered:\n{part}"
            );
            if doc.starts_with("deploy") && not_yet.contains(name.as_str()) {
                listed_in_deploy.insert(name);
            }
        }
    }
    let unnamed: Vec<_> = not_yet
        .iter()
        .filter(|n| !listed_in_deploy.contains(**n))
        .collect();
    assert!(
        unnamed.is_empty(),
        "deploy/README.md does not name {unnamed:?} among the directives not implemented yet"
    );
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            // Build output, VCS data and hidden folders hold no docs of the project.
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            markdown_files(&path, out);
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// `text` without fenced code blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if fenced {
            out.push('\n');
            continue;
        }
        // Inline code: drop what is between backquote pairs.
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                out.push_str(part);
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of the inline links `[text](target)` in `text` (prose only).
fn link_targets(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(['<', '>']).to_owned());
        rest = &after[end.min(after.len())..];
    }
    out
}

/// GitHub's anchors of the headings of Markdown `text`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim().to_lowercase();
        let slug: String = heading
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(slug);
    }
    out
}

#[test]
fn every_relative_link_in_the_markdown_files_leads_somewhere() {
    let root = repo();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in link_targets(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let shown = file.strip_prefix(&root).unwrap_or(file).display().to_string();
            if !dest.exists() {
                broken.push(format!("{shown}: {target} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor
                && dest.extension().is_some_and(|e| e == "md")
            {
                let heads = anchors(&std::fs::read_to_string(&dest).unwrap());
                if !heads.contains(anchor) {
                    broken.push(format!("{shown}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
