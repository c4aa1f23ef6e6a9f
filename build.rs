//! Build script: the git revision for `coredns_build_info{revision=...}`, as CoreDNS puts its
//! short git commit there. `CLUSTER_DNS_REVISION` overrides it (image builds, whose context has
//! no `.git`: the Dockerfile passes it as a build argument); otherwise `git rev-parse
//! --short=12 HEAD` when this is a git checkout and git runs; otherwise empty.
//! It sets `CLUSTER_DNS_BUILD_REVISION` (the label) and `CLUSTER_DNS_BUILD_REVISION_FROM`
//! (`env`, `git` or `none`, for the test that compares the label with git), and
//! `CLUSTER_DNS_RUSTC_VERSION` (`rustc 1.N.P`, which `-version` prints).

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// What moves when a commit is made or another one checked out: HEAD, the branch it names,
/// and packed-refs, each only if it exists. Cargo reruns a build script on every build when a
/// path it watches does not exist, and a clone that never packed its refs has no packed-refs,
/// so watching it would relink the binary each time. A branch that lives only in packed-refs
/// gets its loose file on the next commit: then the nearest existing folder above it is
/// watched (cargo notices a file created in it). In a worktree `.git` is a file: git says
/// where each lives.
fn watched_git_paths() -> Vec<PathBuf> {
    let mut refs = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        refs.push(branch);
    }
    let mut paths = Vec::new();
    for r in &refs {
        let Some(path) = git(&["rev-parse", "--git-path", r]).map(PathBuf::from) else {
            continue;
        };
        if path.exists() {
            paths.push(path);
        } else if r.starts_with("refs/") {
            // The branch's folder (`refs/heads`, or deeper for `a/b` names) that exists.
            if let Some(dir) = path.ancestors().skip(1).find(|d| d.is_dir()) {
                paths.push(dir.to_owned());
            }
        }
        // No packed-refs: nothing to watch; refs moving into one delete their loose files,
        // which are watched.
    }
    paths
}

fn main() {
    println!("cargo:rerun-if-env-changed=CLUSTER_DNS_REVISION");
    let (revision, from) = match std::env::var("CLUSTER_DNS_REVISION") {
        Ok(r) => (r, "env"),
        Err(_) => match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(r) => {
                for path in watched_git_paths() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
                (r, "git")
            }
            None => (String::new(), "none"),
        },
    };
    println!("cargo:rustc-env=CLUSTER_DNS_BUILD_REVISION={revision}");
    // `-version` names the compiler where CoreDNS names Go's version: `rustc 1.N.P`.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    println!("cargo:rustc-env=CLUSTER_DNS_RUSTC_VERSION={version}");
    println!("cargo:rustc-env=CLUSTER_DNS_BUILD_REVISION_FROM={from}");
}
