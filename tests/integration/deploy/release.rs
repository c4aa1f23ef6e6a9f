//! `.github/workflows/release.yml`, the release workflow, linted as CI services read it: the
//! GitHub workflow schema (PyPI's check-jsonschema, its vendored schemastore copy, offline) and
//! zizmor (PyPI; the workflow security audits: unpinned actions, persisted credentials,
//! template injection, excessive permissions), both installed by test.sh. And it does what the
//! install guide says a release is: the Dockerfile for amd64 and arm64, pushed and signed, and
//! the chart as a signed OCI artifact.

use std::path::Path;
use std::process::Command;

fn workflow() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows/release.yml")
}

fn run(tool: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(tool)
        .args(args)
        .arg(workflow())
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e} (test.sh installs it from PyPI)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_release_workflow_passes_the_schema_and_zizmor() {
    let (ok, text) = run(
        "check-jsonschema",
        &["--builtin-schema", "vendor.github-workflows"],
    );
    assert!(ok, "{text}");
    let (ok, text) = run("zizmor", &["--offline", "--no-progress"]);
    assert!(ok && text.contains("No findings"), "{text}");
}

#[test]
fn the_release_builds_both_architectures_and_signs_image_and_chart() {
    let text = std::fs::read_to_string(workflow()).unwrap();
    for want in [
        // The binaries and the image as .ci/run builds them (tests/integration/deploy/image.rs).
        "run: deploy/image/binaries.sh release",
        "sudo buildah bud --platform linux/amd64,linux/arm64 --manifest cluster-dns",
        "sudo buildah manifest push --all",
        "cosign sign --yes \"${IMAGE}@${DIGEST}\"",
        "cosign attest --yes --type cyclonedx --predicate dist/sbom.cdx.json",
        "helm package deploy/chart",
        "helm push",
        "cosign sign --yes \"${CHART_REPO}/cluster-dns@${digest}\"",
    ] {
        assert!(text.contains(want), "the release workflow lacks {want:?}");
    }
    // Every action is pinned to a commit, not a tag that can move.
    for line in text
        .lines()
        .filter(|l| l.trim_start().starts_with("- uses:") || l.trim_start().starts_with("uses:"))
    {
        let pin = line.split('@').nth(1).unwrap_or_default();
        let sha = pin.split_whitespace().next().unwrap_or_default();
        assert!(
            sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "not pinned to a commit: {line}"
        );
    }
}
