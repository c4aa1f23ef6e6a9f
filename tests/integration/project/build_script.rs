//! build.rs watches only what exists (issue 44): cargo reruns a build script on every build
//! when a `rerun-if-changed` path is missing, and a clone without `.git/packed-refs` then
//! relinked the whole binary each time. The repository's build.rs is built here as the build
//! script of a tiny crate inside a fresh clone (so each build takes a second, not the whole
//! server), with `cargo build --message-format=json`: a second build with nothing changed
//! compiles nothing, and a new commit, or refs packed and then a commit, still rebuild.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.org"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the crate at `dir` and returns the targets cargo compiled (not fresh).
fn build(dir: &Path) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .current_dir(dir)
        .args(["build", "--offline", "--message-format=json"])
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("CLUSTER_DNS_REVISION")
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut compiled = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact" && msg["fresh"] == false {
            compiled.push(msg["target"]["name"].to_string());
        }
    }
    compiled
}

#[test]
fn a_second_build_compiles_nothing_and_a_commit_rebuilds() {
    let tmp = crate::support::temp_dir("build-script");
    let clone = tmp.join("clone");
    let url = format!("file://{}", repo().display());
    let out = Command::new("git")
        .args(["clone", "-q", "--no-local", "--depth", "1", "--no-checkout", &url])
        .arg(&clone)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The case of the issue: a clone whose refs were never packed.
    let _ = std::fs::remove_file(clone.join(".git/packed-refs"));
    let probe = clone.join("probe");
    std::fs::create_dir_all(probe.join("src")).unwrap();
    std::fs::copy(repo().join("build.rs"), probe.join("build.rs")).unwrap();
    std::fs::write(
        probe.join("Cargo.toml"),
        "[package]\nname = \"probe\"\nversion = \"0.0.0\"\nedition = \"2024\"\nbuild = \"build.rs\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        probe.join("src/lib.rs"),
        "//! The revision build.rs found.\npub const REVISION: &str = env!(\"CLUSTER_DNS_BUILD_REVISION\");\n",
    )
    .unwrap();

    let first = build(&probe);
    assert!(first.iter().any(|t| t.contains("probe")), "{first:?}");
    let second = build(&probe);
    assert!(
        second.is_empty(),
        "nothing changed, yet cargo compiled {second:?}"
    );

    // A new commit moves the branch: the revision must follow.
    git(&clone, &["commit", "-q", "--allow-empty", "-m", "next"]);
    let after_commit = build(&probe);
    assert!(!after_commit.is_empty(), "a commit did not rebuild");
    assert!(
        build(&probe).is_empty(),
        "a build after the commit's was not fresh"
    );

    // Refs packed (the branch's loose file goes), then a commit (it comes back).
    git(&clone, &["pack-refs", "--all", "--prune"]);
    assert!(!clone.join(".git/refs/heads").read_dir().unwrap().any(|_| true));
    build(&probe);
    assert!(
        build(&probe).is_empty(),
        "packed refs: a second build was not fresh"
    );
    git(&clone, &["commit", "-q", "--allow-empty", "-m", "after packing"]);
    assert!(
        !build(&probe).is_empty(),
        "a commit over packed refs did not rebuild"
    );
    assert!(build(&probe).is_empty());
    let _ = std::fs::remove_dir_all(&tmp);
}
