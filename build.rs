//! Build script: the git revision for `coredns_build_info{revision=...}`, as CoreDNS puts its
//! short git commit there. `CLUSTER_DNS_REVISION` overrides it (image builds, whose context has
//! no `.git`: the Dockerfile passes it as a build argument); otherwise `git rev-parse
//! --short=12 HEAD` when this is a git checkout and git runs; otherwise empty.
//! It sets `CLUSTER_DNS_BUILD_REVISION` (the label) and `CLUSTER_DNS_BUILD_REVISION_FROM`
//! (`env`, `git` or `none`, for the test that compares the label with git), and
//! `CLUSTER_DNS_RUSTC_VERSION` (`rustc 1.N.P`, which `-version` prints).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=CLUSTER_DNS_REVISION");
    let (revision, from) = match std::env::var("CLUSTER_DNS_REVISION") {
        Ok(r) => (r, "env"),
        Err(_) => match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(r) => {
                // A new commit or a checkout moves HEAD or the branch it names. In a worktree
                // `.git` is a file: ask git where HEAD, the branch and packed-refs live.
                let mut paths = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
                if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    paths.push(branch);
                }
                for p in paths {
                    if let Some(path) = git(&["rev-parse", "--git-path", &p]) {
                        println!("cargo:rerun-if-changed={path}");
                    }
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
