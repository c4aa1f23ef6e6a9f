//! Issue 45: no step of the install, upgrade or uninstall guide (deploy/README.md) can take
//! cluster DNS down. The guide's selector patch is read from the README and run with the real
//! `kubectl patch --local` against the cluster DNS Services kubeadm, the CoreDNS Helm chart and
//! RKE2 ship (tests/data/kube-dns-services/): afterwards each selects exactly what the chart's
//! own kube-dns Service selects, which the cluster-dns pods carry, and the roll back's patch
//! restores it. `helm uninstall` keeps the kube-dns Service, and no Deployment of ours looks like
//! a second DNS add-on to `kubeadm upgrade`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use serde_json::Value;

use crate::deploy::manifests::{docs_of, typed};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("deploy/README.md")).unwrap()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// Splits a shell command line into words: blanks separate, '...' and "..." quote, `\"` in
/// double quotes is a quote (no expansion: `$VAR` and `$(...)` stay as written).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' | '"' => {
                let w = word.get_or_insert_with(String::new);
                while let Some(q) = chars.next() {
                    match q {
                        _ if q == c => break,
                        '\\' if c == '"' => w.extend(chars.next()),
                        _ => w.push(q),
                    }
                }
            }
            _ => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// Every `kubectl ... patch service ...` command of deploy/README.md, its continuation lines
/// joined, as words.
fn readme_service_patches() -> Vec<Vec<String>> {
    let text = readme();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("kubectl -n kube-system patch service") else {
            continue;
        };
        let mut command = line[at..].to_owned();
        let mut next = i + 1;
        while command.trim_end().ends_with('\\') {
            command = format!(
                "{} {}",
                command.trim_end().trim_end_matches('\\'),
                lines[next].trim()
            );
            next += 1;
        }
        // Inline in prose: the command ends at its closing backtick.
        let command = command.split('`').next().unwrap();
        out.push(shell_words(command.trim_end_matches(['.', ' '])));
    }
    out
}

/// The value of `flag` (`--flag V` or `--flag=V`) in `words`.
fn flag(words: &[String], names: &[&str]) -> Option<String> {
    words.iter().enumerate().find_map(|(i, w)| {
        names.iter().find_map(|n| {
            if w == n {
                words.get(i + 1).cloned()
            } else {
                w.strip_prefix(&format!("{n}=")).map(str::to_owned)
            }
        })
    })
}

/// `kubectl patch --local -f FILE --type TYPE -p PATCH -o OUTPUT`: what it prints.
fn kubectl_patch_local(file: &Path, patch_type: &str, patch: &str, output: &str) -> String {
    let out = Command::new("kubectl")
        .args([
            "patch", "--local", "-o", output, "--type", patch_type, "-p", patch, "-f",
        ])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("kubectl: {e} (apt-get install kubectl)"));
    assert!(
        out.status.success(),
        "kubectl patch --local {file:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs the guide's `kubectl patch service` command `words` on the Service in `file` (offline:
/// `--local`), `$(cat $svc-selector.json)` being `saved`; the patched Service.
fn run_patch(words: &[String], file: &Path, saved: &str) -> Value {
    // Strategic merge is kubectl's default type.
    let patch_type = flag(words, &["--type"]).unwrap_or_else(|| "strategic".to_owned());
    let patch = flag(words, &["-p", "--patch"]).unwrap_or_else(|| panic!("no -p in {words:?}"));
    let patch = patch.replace("$(cat $svc-selector.json)", saved);
    let out = kubectl_patch_local(file, &patch_type, &patch, "yaml");
    let patched: Value = serde_saphyr::from_str(&out).unwrap();
    let file = file.to_path_buf();
    // Nothing but the selector changes: the IP, ports, labels and annotations stay.
    let before: Value = serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let mut rest = patched.clone();
    rest["spec"]["selector"] = before["spec"]["selector"].clone();
    assert_eq!(
        rest,
        before,
        "{file:?}: `{}` changed more than the selector",
        words.join(" ")
    );
    patched
}

fn selector_of(service: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(service["spec"]["selector"].clone()).unwrap()
}
fn service_data(name: &str) -> PathBuf {
    root().join("tests/data/kube-dns-services").join(name)
}

/// The labels of the cluster-dns pods and the selector of the chart's kube-dns Service, from
/// deploy/cluster-dns.yaml (the chart's defaults).
fn pod_labels_and_selector() -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let docs = docs_of("cluster-dns.yaml");
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns"));
    let labels = d.spec.unwrap().template.metadata.unwrap().labels.unwrap();
    let s: Service = typed(find(&docs, "Service", "kube-dns"));
    (labels, s.spec.unwrap().selector.unwrap())
}

/// Item 1: the guide's patch replaces the selector of whichever cluster DNS Service it is run
/// on (a merge patch would add to it: the CoreDNS chart's Service then selects neither CoreDNS
/// nor cluster-dns, and RKE2's never selects cluster-dns), and the roll back's patch puts the
/// selector the guide saved back.
#[test]
fn the_guides_selector_patch_points_every_shipped_dns_service_at_the_cluster_dns_pods() {
    let patches = readme_service_patches();
    assert_eq!(
        patches.len(),
        2,
        "deploy/README.md patches the selector twice, to swap and to roll back: {patches:?}"
    );
    let text = readme();
    let save = "kubectl -n kube-system get service $svc -o jsonpath='{.spec.selector}' > $svc-selector.json";
    assert!(text.contains(save), "the guide saves the selector with `{save}`");
    let (labels, selector) = pod_labels_and_selector();
    for (k, v) in &selector {
        assert_eq!(
            labels.get(k),
            Some(v),
            "the chart's Service selects the pods by {k}"
        );
    }
    for file in ["kubeadm.yaml", "coredns-chart.yaml", "rke2.yaml"] {
        let path = service_data(file);
        let original: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // What the guide's `get -o jsonpath='{.spec.selector}'` saves, by kubectl's own printer.
        let saved = kubectl_patch_local(&path, "json", "[]", "jsonpath={.spec.selector}");
        let swapped = run_patch(&patches[0], &path, &saved);
        assert_eq!(
            selector_of(&swapped),
            selector,
            "{file}: after `{}` the selector is not exactly the chart's",
            patches[0].join(" ")
        );
        // Roll back: the patched Service, then the guide's second patch with the saved selector.
        let dir = crate::support::temp_dir("install-rollback");
        let swapped_file = dir.join(file);
        std::fs::write(&swapped_file, serde_json::to_string(&swapped).unwrap()).unwrap();
        let back: Value = serde_saphyr::from_str(&kubectl_patch_local(
            &swapped_file,
            &flag(&patches[1], &["--type"]).unwrap_or_else(|| "strategic".to_owned()),
            &flag(&patches[1], &["-p"])
                .unwrap()
                .replace("$(cat $svc-selector.json)", &saved),
            "yaml",
        ))
        .unwrap();
        assert_eq!(
            back, original,
            "{file}: the roll back does not restore the Service"
        );
    }
}

/// Item 2: `helm uninstall` leaves the kube-dns Service (the cluster DNS IP every pod's
/// resolv.conf names) in place, whatever values the release was installed with; the guide
/// says how to upgrade, roll back and uninstall.
#[test]
fn helm_uninstall_keeps_the_kube_dns_service() {
    for (name, args) in crate::deploy::chart::variations() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let docs = crate::deploy::chart::template(&args);
        let Some(service) = docs
            .iter()
            .find(|d| d["kind"] == "Service" && d["metadata"]["name"] == "kube-dns")
        else {
            assert_eq!(name, "keep-service", "only service.create=false leaves it out");
            continue;
        };
        assert_eq!(
            service["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
            "{name}: helm uninstall would delete kube-dns"
        );
    }
    let text = readme();
    for command in [
        "helm upgrade cluster-dns deploy/chart -n kube-system",
        "helm rollback cluster-dns",
        "helm uninstall cluster-dns -n kube-system",
    ] {
        assert!(
            text.contains(command),
            "deploy/README.md does not say `{command}`"
        );
    }
}

/// Item 4: kubeadm's upgrade preflight (and its addon/coredns phase) finds the DNS add-on as the
/// Deployments of kube-system labelled `k8s-app=kube-dns` and stops when there are two. No
/// Deployment object of ours carries that label; the cluster-dns pods still do, and the
/// kube-dns Service selects them.
#[test]
fn kubeadm_finds_one_dns_deployment_coredns() {
    let mut sources: Vec<(String, Vec<Value>)> = crate::deploy::chart::variations()
        .into_iter()
        .map(|(name, args)| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            (format!("chart {name}"), crate::deploy::chart::template(&args))
        })
        .collect();
    for file in [
        "cluster-dns.yaml",
        "autoscaler.yaml",
        "node-local/node-cache.yaml",
        "node-local/prefer-same-node.yaml",
        "node-local/prefer-same-node-forward.yaml",
    ] {
        sources.push((file.to_owned(), docs_of(file)));
    }
    for (name, docs) in &sources {
        for d in docs.iter().filter(|d| d["kind"] == "Deployment") {
            assert_ne!(
                d["metadata"]["labels"]["k8s-app"], "kube-dns",
                "{name}: Deployment {} is a second DNS add-on to kubeadm",
                d["metadata"]["name"]
            );
        }
        let Some(dep) = docs
            .iter()
            .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "cluster-dns")
        else {
            continue;
        };
        let dep: Deployment = typed(dep);
        let pods = dep.spec.unwrap().template.metadata.unwrap().labels.unwrap();
        assert_eq!(
            pods.get("k8s-app").map(String::as_str),
            Some("kube-dns"),
            "{name}"
        );
        if let Some(s) = docs
            .iter()
            .find(|d| d["kind"] == "Service" && d["metadata"]["name"] == "kube-dns")
        {
            let s: Service = typed(s);
            for (k, v) in s.spec.unwrap().selector.unwrap() {
                assert_eq!(
                    pods.get(&k),
                    Some(&v),
                    "{name}: kube-dns does not select the pods"
                );
            }
        }
    }
}

/// Every `kubectl VERB ... -f deploy/FILE ...` command of the guides (deploy/README.md, the
/// chart's and node-local's READMEs, the plain manifests' headers): (verb, the files it names).
fn guide_file_commands() -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for doc in [
        "deploy/README.md",
        "deploy/chart/README.md",
        "deploy/node-local/README.md",
        "deploy/cluster-dns.yaml",
        "deploy/cluster-dns-corefile.yaml",
        "deploy/autoscaler.yaml",
    ] {
        let text = std::fs::read_to_string(root().join(doc)).unwrap();
        for line in text.lines() {
            let Some(at) = line.find("kubectl ") else {
                continue;
            };
            let command = line[at..].split('`').next().unwrap();
            let words = shell_words(command.split('#').next().unwrap());
            let files: Vec<String> = words
                .windows(2)
                .filter(|w| w[0] == "-f")
                .filter_map(|w| w[1].strip_prefix("deploy/").map(str::to_owned))
                .collect();
            let Some(verb) = words
                .iter()
                .skip(1)
                .find(|w| ["apply", "create", "delete", "diff", "replace"].contains(&w.as_str()))
            else {
                continue;
            };
            if !files.is_empty() {
                out.push((doc.to_owned(), verb.clone(), files));
            }
        }
    }
    out
}

/// Issue 45, item 6: an upgrade on the plain-manifest path keeps a customised Corefile, as
/// kubeadm's does. `kubectl apply` of a file holding the `cluster-dns` ConfigMap would put the
/// shipped Corefile back over an edited one (its three-way merge takes the file's Corefile
/// whenever it differs from the last applied one, and the guide's own carry-over applies yours),
/// so the ConfigMap ships alone in cluster-dns-corefile.yaml, which the guides only ever
/// `kubectl create` (it fails on an existing ConfigMap and changes nothing), and every file the
/// guides `kubectl apply` leaves it out; the Deployment mounts exactly that ConfigMap.
#[test]
fn reapplying_the_plain_manifests_leaves_an_edited_corefile_alone() {
    let corefile = docs_of("cluster-dns-corefile.yaml");
    assert_eq!(
        corefile.len(),
        1,
        "cluster-dns-corefile.yaml holds the ConfigMap alone"
    );
    assert_eq!(
        (
            corefile[0]["kind"].as_str(),
            corefile[0]["metadata"]["name"].as_str()
        ),
        (Some("ConfigMap"), Some("cluster-dns"))
    );
    let docs = docs_of("cluster-dns.yaml");
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns"));
    let pod = d.spec.unwrap().template.spec.unwrap();
    let mounted: Vec<String> = pod
        .volumes
        .unwrap()
        .into_iter()
        .filter_map(|v| v.config_map.map(|c| c.name))
        .collect();
    assert_eq!(
        mounted,
        ["cluster-dns"],
        "the Deployment mounts the Corefile's ConfigMap"
    );

    let commands = guide_file_commands();
    let mut created = false;
    let mut applied = false;
    for (doc, verb, files) in &commands {
        if verb == "apply" {
            for file in files {
                assert!(
                    !docs_of(file)
                        .iter()
                        .any(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "cluster-dns"),
                    "{doc}: `kubectl apply -f deploy/{file}` resets an edited Corefile"
                );
            }
            applied |= files.iter().any(|f| f == "cluster-dns.yaml");
        }
        if files.iter().any(|f| f == "cluster-dns-corefile.yaml") {
            assert!(
                ["create", "diff"].contains(&verb.as_str()),
                "{doc}: `kubectl {verb}` of cluster-dns-corefile.yaml"
            );
            created |= verb == "create";
        }
    }
    assert!(
        created && applied,
        "the guide creates cluster-dns-corefile.yaml and applies cluster-dns.yaml: {commands:?}"
    );
    // The guide says why, and how to see what a new default Corefile would change.
    let text = readme();
    for want in [
        "kubectl create -f deploy/cluster-dns-corefile.yaml",
        "kubectl diff -f deploy/cluster-dns-corefile.yaml",
        "resets an edited Corefile",
    ] {
        assert!(text.contains(want), "deploy/README.md does not say `{want}`");
    }
}
