//! `deploy/chart`: rendered by Helm's own engine (deploy/render.py, on PyPI's helm-python-sdk,
//! installed by test.sh) for the default values and every documented variation
//! (`deploy/chart/ci/*-values.yaml`), it lints clean (`helm lint --strict`), every rendered
//! object passes the same typed k8s-openapi round trip as deploy.rs (the prometheus-operator
//! objects against the fields of their CRDs that the chart writes), every rendered Corefile passes
//! `cluster-dns --check` with its files where the pod mounts them, each variation does what it
//! says, the values that would conflict, unknown keys (the CoreDNS chart's with their
//! equivalent) and wrong types are refused, and deploy/cluster-dns.yaml,
//! deploy/cluster-dns-corefile.yaml, deploy/autoscaler.yaml,
//! deploy/node-local/prefer-same-node*.yaml and deploy/dnspolicy-crd.yaml are byte for byte the
//! chart's output. The DNSPolicy CRD (crds/) is a structural schema that the example policies of
//! deploy/examples pass and that refuses unknown fields and bad enum values, and the ClusterRole
//! reads DNSPolicies with list and watch only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::deploy::manifests::{check_binary, typed};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs deploy/render.py with `args`; Ok(stdout) or Err(stderr).
pub(crate) fn render_py(args: &[&str]) -> Result<String, String> {
    let out = Command::new("python3")
        .arg(root().join("deploy/render.py"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("python3: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stderr.contains("No module named 'helm_python'"),
        "pip install helm-python-sdk==0.2.2 (test.sh does)"
    );
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(format!("{}{stderr}", String::from_utf8_lossy(&out.stdout)))
    }
}

/// The rendered documents for `args` (`-f FILE`, `--set K=V`).
pub(crate) fn template(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["template"];
    all.extend_from_slice(args);
    let text = render_py(&all).unwrap_or_else(|e| panic!("render {args:?}: {e}"));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Every documented variation: (name, render.py arguments). The defaults first.
pub(crate) fn variations() -> Vec<(String, Vec<String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/chart/ci"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-values.yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let mut v = vec![("defaults".to_owned(), vec![])];
    for f in files {
        let name = f
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches("-values.yaml")
            .to_owned();
        v.push((name, vec!["-f".to_owned(), f.to_string_lossy().into_owned()]));
    }
    v
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

// The prometheus-operator's objects: the fields of the monitoring.coreos.com/v1 CRDs the chart
// writes, so an unknown or misspelt one fails the round trip as a k8s-openapi type would.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Meta {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitor {
    api_version: String,
    kind: String,
    metadata: Meta,
    spec: ServiceMonitorSpec,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ServiceMonitorSpec {
    selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    namespace_selector: NamespaceSelector,
    endpoints: Vec<Endpoint>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct NamespaceSelector {
    match_names: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Endpoint {
    port: String,
    path: String,
    interval: String,
    scheme: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    relabelings: Option<Vec<Relabeling>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Relabeling {
    target_label: String,
    replacement: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PrometheusRule {
    api_version: String,
    kind: String,
    metadata: Meta,
    spec: RuleSpec,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    groups: Vec<RuleGroup>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleGroup {
    name: String,
    rules: Vec<Rule>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    alert: String,
    expr: String,
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    for_: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
}

/// Validates one rendered object as its type; returns its kind.
pub(crate) fn validate(doc: &Value) -> String {
    let kind = doc["kind"].as_str().unwrap().to_owned();
    match kind.as_str() {
        "ServiceAccount" => drop(typed::<ServiceAccount>(doc)),
        "ClusterRole" => drop(typed::<ClusterRole>(doc)),
        "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(doc)),
        "Role" => drop(typed::<Role>(doc)),
        "RoleBinding" => drop(typed::<RoleBinding>(doc)),
        "ConfigMap" => drop(typed::<ConfigMap>(doc)),
        "Deployment" => drop(typed::<Deployment>(doc)),
        "DaemonSet" => drop(typed::<DaemonSet>(doc)),
        "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(doc)),
        "Service" => drop(typed::<Service>(doc)),
        "HorizontalPodAutoscaler" => drop(typed::<HorizontalPodAutoscaler>(doc)),
        // Only the `helm test` hook.
        "Pod" => {
            assert_eq!(doc["metadata"]["annotations"]["helm.sh/hook"], "test");
            drop(typed::<Pod>(doc))
        }
        "ServiceMonitor" => {
            assert_eq!(doc["apiVersion"], "monitoring.coreos.com/v1");
            drop(typed::<ServiceMonitor>(doc))
        }
        "PrometheusRule" => {
            assert_eq!(doc["apiVersion"], "monitoring.coreos.com/v1");
            drop(typed::<PrometheusRule>(doc))
        }
        other => panic!("unexpected kind {other}"),
    }
    kind
}

/// Lays the cluster-dns ConfigMap out as the pod mounts it (the volume's items under the
/// mountPath named by -conf) and runs `cluster-dns --check` on the Corefile there.
fn check_mounted_corefile(name: &str, docs: &[Value]) {
    let cm: ConfigMap = typed(find(docs, "ConfigMap", "cluster-dns").unwrap());
    let d: Deployment = typed(find(docs, "Deployment", "cluster-dns").unwrap());
    let data = cm.data.unwrap();
    let pod = d.spec.unwrap().template.spec.unwrap();
    let c = &pod.containers[0];
    let mount = &c.volume_mounts.as_ref().unwrap()[0];
    let volume = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == mount.name)
        .unwrap();
    let items = volume.config_map.as_ref().unwrap().items.clone().unwrap();
    // Every key is mounted, and nothing else.
    let mut keys: Vec<&String> = items.iter().map(|i| &i.key).collect();
    keys.sort();
    assert_eq!(keys, data.keys().collect::<Vec<_>>(), "{name}");
    let dir = crate::support::temp_dir(&format!("chart-{name}"));
    for item in &items {
        std::fs::write(dir.join(&item.path), &data[&item.key]).unwrap();
    }
    let conf = c.args.as_ref().unwrap()[1].clone();
    let rel = Path::new(&conf).strip_prefix(&mount.mount_path).unwrap();
    let blocks = if name == "custom" { 2 } else { 1 };
    let stdout = check_binary(&dir.join(rel), &format!("{name}'s rendered Corefile"));
    assert!(
        stdout.contains(&format!("OK ({blocks} server block(s))")),
        "{name}: {stdout}"
    );
}

#[test]
fn every_variation_lints_renders_valid_objects_and_a_corefile_that_checks() {
    for (name, args) in variations() {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut lint = vec!["lint"];
        lint.extend_from_slice(&args);
        let report = render_py(&lint).unwrap_or_else(|e| panic!("{name}: helm lint: {e}"));
        assert!(
            report.contains("1 chart(s) linted, no failures"),
            "{name}: {report}"
        );

        let docs = template(&args);
        let mut kinds: Vec<String> = docs.iter().map(validate).collect();
        kinds.sort();
        for kind in [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "ServiceAccount",
        ] {
            assert!(kinds.iter().any(|k| k == kind), "{name}: no {kind} in {kinds:?}");
        }
        // The Service is left out only where the cluster's own is kept (`service.create=false`).
        assert_eq!(
            kinds.iter().any(|k| k == "Service"),
            name != "keep-service",
            "{name}: {kinds:?}"
        );
        for d in &docs {
            if d["metadata"]["namespace"].is_string() {
                assert_eq!(d["metadata"]["namespace"], "kube-system", "{name}");
            }
        }
        check_mounted_corefile(&name, &docs);

        // Replicas are left out exactly when an autoscaler owns them.
        let dep: Deployment = typed(find(&docs, "Deployment", "cluster-dns").unwrap());
        let owned = find(&docs, "Deployment", "cluster-dns-autoscaler").is_some()
            || kinds.iter().any(|k| k == "HorizontalPodAutoscaler");
        assert!(owned || name == "fixed-replicas", "{name}");
        assert_eq!(dep.spec.unwrap().replicas.is_none(), owned, "{name}");
    }
}

#[test]
fn the_defaults_are_the_plain_manifests_byte_for_byte() {
    let dir = crate::support::temp_dir("chart-generate");
    render_py(&["generate", "--out", dir.to_str().unwrap()]).unwrap();
    for file in [
        "cluster-dns.yaml",
        "cluster-dns-corefile.yaml",
        "autoscaler.yaml",
        "node-local/prefer-same-node.yaml",
        "node-local/prefer-same-node-forward.yaml",
        "node-local/prefer-same-node-fabric.yaml",
        "dnspolicy-crd.yaml",
    ] {
        let want = std::fs::read_to_string(dir.join(file)).unwrap();
        let have = std::fs::read_to_string(root().join("deploy").join(file)).unwrap();
        assert!(
            want == have,
            "deploy/{file} is not the chart's output: run `python3 deploy/render.py generate`"
        );
    }
    // The default Corefile is the protected one; `corefile.kubeadm` is kubeadm's
    // (config/Corefile) byte for byte.
    let docs = template(&[]);
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns").unwrap());
    assert_eq!(cm.data.unwrap()["Corefile"], protected_corefile("cluster.local"));
    let docs = template(&["--set", "corefile.kubeadm=true"]);
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns").unwrap());
    assert_eq!(
        cm.data.unwrap()["Corefile"],
        include_str!("../../../config/Corefile")
    );
}

#[test]
fn each_variation_does_what_it_documents() {
    let ci = |f: &str| {
        root()
            .join("deploy/chart/ci")
            .join(f)
            .to_string_lossy()
            .into_owned()
    };

    // fixed-replicas: no autoscaler objects, the replicas given.
    let docs = template(&["-f", &ci("fixed-replicas-values.yaml")]);
    assert!(
        docs.iter()
            .all(|d| !d["metadata"]["name"].as_str().unwrap().contains("autoscaler"))
    );
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns").unwrap());
    assert_eq!(d.spec.unwrap().replicas, Some(3));

    // hpa: an HPA on the Deployment, no autoscaler, no PDB.
    let docs = template(&["-f", &ci("hpa-values.yaml")]);
    let hpa: HorizontalPodAutoscaler = typed(find(&docs, "HorizontalPodAutoscaler", "cluster-dns").unwrap());
    let spec = hpa.spec.unwrap();
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(3), 12));
    assert_eq!(
        (
            spec.scale_target_ref.kind.as_str(),
            spec.scale_target_ref.name.as_str()
        ),
        ("Deployment", "cluster-dns")
    );
    assert!(find(&docs, "Deployment", "cluster-dns-autoscaler").is_none());
    assert!(!docs.iter().any(|d| d["kind"] == "PodDisruptionBudget"));

    // keep-service: no Service; the pods carry the label every kube-dns Service selects.
    let docs = template(&["-f", &ci("keep-service-values.yaml")]);
    assert!(!docs.iter().any(|d| d["kind"] == "Service"));
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns").unwrap());
    let labels = d.spec.unwrap().template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["k8s-app"], "kube-dns");

    // dual-stack: the IPs, families, traffic distribution and the domain in the Corefile.
    let docs = template(&["-f", &ci("dual-stack-values.yaml")]);
    let s: Service = typed(find(&docs, "Service", "kube-dns").unwrap());
    let spec = s.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.100.0.10"));
    assert_eq!(spec.cluster_ips.unwrap(), ["10.100.0.10", "fd00:10:100::a"]);
    assert_eq!(spec.ip_family_policy.as_deref(), Some("RequireDualStack"));
    assert_eq!(spec.ip_families.unwrap(), ["IPv4", "IPv6"]);
    assert_eq!(spec.traffic_distribution.as_deref(), Some("PreferClose"));
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns").unwrap());
    let corefile = cm.data.unwrap().remove("Corefile").unwrap();
    assert_eq!(corefile, protected_corefile("k8s.example.internal"));

    // monitoring: the job relabelled to coredns, the alerts of deploy/monitoring.
    let docs = template(&["-f", &ci("monitoring-values.yaml")]);
    let sm = find(&docs, "ServiceMonitor", "cluster-dns").unwrap();
    assert_eq!(sm["metadata"]["labels"]["release"], "monitoring");
    assert_eq!(
        sm["spec"]["endpoints"][0]["relabelings"],
        serde_json::json!([{"targetLabel": "job", "replacement": "coredns"}])
    );
    let rule = find(&docs, "PrometheusRule", "cluster-dns").unwrap();
    let text = std::fs::read_to_string(root().join("deploy/monitoring/prometheus-rules.yaml")).unwrap();
    let plain: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(
        rule["spec"]["groups"], plain["groups"],
        "the chart's alerts are deploy/monitoring's"
    );
    for expr in rule["spec"]["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["expr"].as_str().unwrap())
    {
        assert!(!expr.contains("job=") || expr.contains("coredns"), "{expr}");
    }

    // custom: image, resources, scheduling, PDB, autoscaler parameters, the hosts file.
    let docs = template(&["-f", &ci("custom-values.yaml")]);
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns").unwrap());
    let pod = d.spec.unwrap().template.spec.unwrap();
    let c = &pod.containers[0];
    assert_eq!(
        c.image.as_deref(),
        Some("registry.example.com/cluster-dns:0.1.0-rc1")
    );
    assert_eq!(c.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        c.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"].0,
        "256Mi"
    );
    assert_eq!(pod.priority_class_name.as_deref(), Some("dns-critical"));
    let affinity = pod.affinity.unwrap();
    assert!(affinity.pod_anti_affinity.is_none() && affinity.node_affinity.is_some());
    let spread = pod.topology_spread_constraints.unwrap();
    assert_eq!(spread.len(), 1);
    assert_eq!(spread[0].when_unsatisfiable, "DoNotSchedule");
    assert_eq!(pod.tolerations.unwrap()[0].key.as_deref(), Some("dedicated"));
    assert_eq!(pod.node_selector.unwrap()["node-role.example.com/infra"], "true");
    let pdb: PodDisruptionBudget = typed(find(&docs, "PodDisruptionBudget", "cluster-dns").unwrap());
    let pdb = pdb.spec.unwrap();
    assert_eq!(
        (pdb.min_available, pdb.max_unavailable),
        (Some(IntOrString::Int(1)), None)
    );
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-autoscaler").unwrap());
    let linear: Value = serde_json::from_str(&cm.data.unwrap()["linear"]).unwrap();
    assert_eq!(
        (linear["coresPerReplica"].clone(), linear["min"].clone()),
        (128.into(), 3.into())
    );
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns").unwrap());
    let data = cm.data.unwrap();
    assert!(data["Corefile"].contains("hosts corp.hosts corp.example {"));
    assert!(data["corp.hosts"].contains("10.20.0.2 ldap.corp.example"));
}

#[test]
fn the_servicemonitor_is_deploy_monitorings() {
    let docs = template(&["--set", "serviceMonitor.enabled=true"]);
    let sm = find(&docs, "ServiceMonitor", "cluster-dns").unwrap();
    let text = std::fs::read_to_string(root().join("deploy/monitoring/servicemonitor.yaml")).unwrap();
    let plain: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(sm["spec"], plain["spec"]);
    // The plain file's labels, beside the chart's standard ones.
    for (k, v) in plain["metadata"]["labels"].as_object().unwrap() {
        assert_eq!(&sm["metadata"]["labels"][k], v, "{k}");
    }
}

#[test]
fn conflicting_values_are_refused() {
    for (set, why) in [
        ("hpa.enabled=true", "autoscaler.enabled and hpa.enabled"),
        (
            "serviceMonitor.enabled=true,serviceMonitor.job=dns",
            "serviceMonitor.job: kube-dns or coredns",
        ),
        (
            "service.clusterIPs={10.96.0.11}",
            "service.clusterIPs must start with clusterIP",
        ),
        ("corefile.zoneFiles.a/b=x", "is not a ConfigMap key"),
        (
            "nodeLocal.enabled=true,service.trafficDistribution=PreferClose",
            "nodeLocal.enabled needs service.trafficDistribution PreferSameNode",
        ),
    ] {
        let err = render_py(&["template", "--set", set]).expect_err(set);
        assert!(err.contains(why), "{set}: {err}");
    }
}

/// deploy/chart/values.schema.json: a misspelt key, a key of the CoreDNS Helm chart or a value
/// of the wrong type fails `helm template` and `helm lint` with a message naming it (the CoreDNS
/// chart's keys with cluster-dns's equivalent), rather than being ignored.
#[test]
fn unknown_keys_and_wrong_types_are_refused_with_a_message() {
    let dir = crate::support::temp_dir("chart-schema");
    let servers = dir.join("servers-values.yaml");
    std::fs::write(
        &servers,
        "servers:\n- zones:\n  - zone: .\n  port: 53\n  plugins:\n  - name: errors\n",
    )
    .unwrap();
    let servers = servers.to_string_lossy().into_owned();
    for (args, why) in [
        // Misspelt: unknown keys, at the top and nested.
        (vec!["--set", "autoscaler.enable=false"], "'enable'"),
        (vec!["--set", "replica=3"], "'replica'"),
        (vec!["--set", "service.annotation.a=b"], "'annotation'"),
        // The CoreDNS chart's keys: refused with cluster-dns's equivalent.
        (
            vec!["--set", "replicaCount=3"],
            "'/replicaCount': value must be 'a CoreDNS chart value, refused: use replicas'",
        ),
        (
            vec!["--set", "service.clusterIP=10.96.0.10"],
            "'/service/clusterIP': value must be 'a CoreDNS chart value, refused: use clusterIP'",
        ),
        (
            vec!["-f", servers.as_str()],
            "'/servers': value must be 'a CoreDNS chart value, refused: use corefile.override",
        ),
        (
            vec!["--set", "autoscaler.coresPerReplica=128"],
            "refused: use autoscaler.linear.coresPerReplica",
        ),
        // Wrong types.
        (
            vec!["--set", "replicas=two"],
            "'/replicas': got string, want integer",
        ),
        (
            vec!["--set", "clusterIP=5"],
            "'/clusterIP': got number, want string",
        ),
        (
            vec!["--set", "service.create=yes"],
            "'/service/create': got string, want boolean",
        ),
        (
            vec!["--set", "nodeLocal.mode=both"],
            "'/nodeLocal/mode': value must be one of 'watch', 'forward'",
        ),
    ] {
        for cmd in ["template", "lint"] {
            let mut all = vec![cmd];
            all.extend_from_slice(&args);
            let err = match render_py(&all) {
                Err(e) => e,
                Ok(out) if cmd == "lint" && !out.contains("no failures") => out,
                Ok(out) => panic!("{cmd} {args:?} passed: {}", &out[..out.len().min(300)]),
            };
            assert!(err.contains(why), "{cmd} {args:?}: {err}");
        }
    }
}

/// Issue 45: the server pod's own knobs (`ci/pod-values.yaml`): extra volumes and mounts, env,
/// flags, the log format, the probes' timing and the two securityContexts reach the pod, merged
/// over the defaults (the config volume, POD_IP, `-conf`, the probes' paths and the rest of each
/// securityContext stay); the defaults keep today's pod; and the values that would break the
/// pod are refused.
#[test]
fn the_pod_values_reach_the_server_pod_over_the_defaults() {
    let file = root().join("deploy/chart/ci/pod-values.yaml");
    let docs = template(&["-f", file.to_str().unwrap()]);
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns").unwrap());
    let pod = d.spec.unwrap().template.spec.unwrap();
    let c = &pod.containers[0];
    let volumes: Vec<&str> = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["config", "upstream-ca"]);
    let mounts: Vec<(&str, &str)> = c
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| (m.name.as_str(), m.mount_path.as_str()))
        .collect();
    assert_eq!(
        mounts,
        [
            ("config", "/etc/cluster-dns"),
            ("upstream-ca", "/etc/upstream-ca")
        ]
    );
    let env: Vec<&str> = c.env.as_ref().unwrap().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(env, ["POD_IP", "RUST_LOG", "UPSTREAM", "NODE_NAME"]);
    assert_eq!(
        c.args.as_deref().unwrap(),
        [
            "-conf",
            "/etc/cluster-dns/Corefile",
            "--log-format",
            "json",
            "-quiet"
        ]
    );
    let live = c.liveness_probe.as_ref().unwrap();
    assert_eq!(
        (
            live.initial_delay_seconds,
            live.period_seconds,
            live.timeout_seconds,
            live.failure_threshold
        ),
        (Some(30), Some(20), Some(10), Some(6))
    );
    assert_eq!(live.http_get.as_ref().unwrap().path.as_deref(), Some("/health"));
    let ready = c.readiness_probe.as_ref().unwrap();
    // Only what the values name changes; the rest keeps the chart's defaults.
    assert_eq!(
        (
            ready.initial_delay_seconds,
            ready.period_seconds,
            ready.timeout_seconds,
            ready.failure_threshold
        ),
        (Some(0), Some(5), Some(1), Some(2))
    );
    let psc = pod.security_context.unwrap();
    assert_eq!((psc.run_as_user, psc.run_as_group), (Some(10001), Some(10001)));
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(
        psc.sysctls.unwrap()[0].name,
        "net.ipv4.ip_unprivileged_port_start"
    );
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.seccomp_profile.as_ref().unwrap().type_, "Localhost");
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        sc.capabilities.as_ref().unwrap().add.as_deref(),
        Some(&["NET_BIND_SERVICE".to_owned()][..])
    );

    // The defaults: no --log-format (coredns), the probes as before.
    let docs = template(&[]);
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns").unwrap());
    let c = d.spec.unwrap().template.spec.unwrap().containers.remove(0);
    assert_eq!(c.args.unwrap(), ["-conf", "/etc/cluster-dns/Corefile"]);
    let live = c.liveness_probe.unwrap();
    assert_eq!(
        (
            live.initial_delay_seconds,
            live.timeout_seconds,
            live.failure_threshold
        ),
        (Some(10), Some(5), Some(5))
    );
    let ready = c.readiness_probe.unwrap();
    assert_eq!(
        (
            ready.period_seconds,
            ready.timeout_seconds,
            ready.failure_threshold
        ),
        (Some(2), Some(1), Some(3))
    );

    for (args, why) in [
        (
            vec!["--set", "logFormat=xml"],
            "'/logFormat': value must be one of 'text', 'coredns', 'json'",
        ),
        (
            vec!["--set", "env[0].name=RUST_LOG,env[0].value=debug"],
            "env: RUST_LOG is set by the chart: use logLevel",
        ),
        (
            vec!["--set", "env[0].name=POD_IP,env[0].value=1.2.3.4"],
            "env: POD_IP is set by the chart",
        ),
        (
            vec![
                "--set",
                "extraVolumes[0].name=config,extraVolumes[0].emptyDir.medium=Memory",
            ],
            "extraVolumes: the name config is the Corefile's volume",
        ),
        (
            vec!["--set", "extraArgs[0]=-conf,extraArgs[1]=/x"],
            "extraArgs: -conf is set by the chart",
        ),
        (
            vec!["--set", "livenessProbe.enabled=false"],
            "'/livenessProbe/enabled': value must be 'a CoreDNS chart value, refused: the probes are always on",
        ),
        (
            vec!["--set", "readinessProbe.timeoutSeconds=0"],
            "'/readinessProbe/timeoutSeconds': minimum",
        ),
    ] {
        let mut all = vec!["template"];
        all.extend_from_slice(&args);
        let err = render_py(&all).expect_err(&format!("{args:?}"));
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// The selector of each workload and Service the chart renders, as the first release set them:
/// a Deployment's or DaemonSet's selector is immutable, so a label added there would make
/// `helm upgrade` fail on an existing install.
type Selector = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);
const SELECTORS: [Selector; 6] = [
    (
        "Deployment",
        "cluster-dns",
        &[("app.kubernetes.io/name", "cluster-dns"), ("k8s-app", "kube-dns")],
    ),
    (
        "PodDisruptionBudget",
        "cluster-dns",
        &[("app.kubernetes.io/name", "cluster-dns"), ("k8s-app", "kube-dns")],
    ),
    (
        "Deployment",
        "cluster-dns-autoscaler",
        &[("k8s-app", "cluster-dns-autoscaler")],
    ),
    (
        "DaemonSet",
        "cluster-dns-node",
        &[
            ("app.kubernetes.io/name", "cluster-dns-node"),
            ("k8s-app", "kube-dns"),
        ],
    ),
    ("Service", "kube-dns", &[("k8s-app", "kube-dns")]),
    (
        "Service",
        "kube-dns-upstream",
        &[("app.kubernetes.io/name", "cluster-dns"), ("k8s-app", "kube-dns")],
    ),
];

/// Issue 45: every object the chart renders (and every pod template) carries the standard
/// labels (`app.kubernetes.io/name`, `instance`, `version`, `managed-by`, `helm.sh/chart`),
/// whatever the values; the selectors stay as they were; and the plain manifests, which
/// `kubectl apply` installs, do not claim Helm manages them.
#[test]
fn every_object_carries_the_standard_labels_and_the_selectors_stay() {
    let chart: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("deploy/chart/Chart.yaml")).unwrap())
            .unwrap();
    let version = chart["appVersion"].as_str().unwrap();
    let chart_label = format!("cluster-dns-{}", chart["version"].as_str().unwrap());
    let mut all = variations();
    for set in [
        "nodeLocal.enabled=true",
        "serviceMonitor.enabled=true,prometheusRule.enabled=true",
    ] {
        all.push((set.to_owned(), vec!["--set".to_owned(), set.to_owned()]));
    }
    let mut seen = Vec::new();
    for (name, args) in all {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let docs = template(&args);
        for d in &docs {
            let what = format!("{name}: {} {}", d["kind"], d["metadata"]["name"]);
            let mut labelled = vec![(what.clone(), &d["metadata"]["labels"])];
            if d["spec"]["template"]["metadata"].is_object() {
                labelled.push((
                    format!("{what}'s pods"),
                    &d["spec"]["template"]["metadata"]["labels"],
                ));
            }
            for (what, labels) in labelled {
                assert!(
                    labels["app.kubernetes.io/name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("cluster-dns")),
                    "{what}: {labels}"
                );
                assert_eq!(labels["app.kubernetes.io/instance"], "cluster-dns", "{what}");
                assert_eq!(labels["app.kubernetes.io/version"], version, "{what}");
                assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{what}");
                assert_eq!(labels["helm.sh/chart"], chart_label.as_str(), "{what}");
            }
            for (kind, object, want) in SELECTORS {
                if d["kind"] != kind || d["metadata"]["name"] != object {
                    continue;
                }
                let selector = if kind == "Service" {
                    &d["spec"]["selector"]
                } else {
                    &d["spec"]["selector"]["matchLabels"]
                };
                let want: serde_json::Map<String, Value> =
                    want.iter().map(|(k, v)| ((*k).to_owned(), (*v).into())).collect();
                assert_eq!(selector, &Value::Object(want), "{name}: {kind} {object}");
                seen.push(format!("{kind} {object}"));
            }
        }
    }
    for (kind, object, _) in SELECTORS {
        assert!(
            seen.contains(&format!("{kind} {object}")),
            "no variation renders {kind} {object}"
        );
    }

    // The plain manifests: the same objects, without the two labels that say Helm manages them
    // (they are installed with kubectl apply).
    for file in [
        "cluster-dns.yaml",
        "cluster-dns-corefile.yaml",
        "autoscaler.yaml",
        "node-local/prefer-same-node.yaml",
        "node-local/prefer-same-node-forward.yaml",
        "node-local/prefer-same-node-fabric.yaml",
    ] {
        for d in crate::deploy::manifests::docs_of(file) {
            let labels = &d["metadata"]["labels"];
            assert_eq!(labels["app.kubernetes.io/instance"], "cluster-dns", "{file}");
            assert_eq!(labels["app.kubernetes.io/version"], version, "{file}");
            for helm in ["app.kubernetes.io/managed-by", "helm.sh/chart"] {
                assert!(
                    labels[helm].is_null(),
                    "{file}: {} has {helm}",
                    d["metadata"]["name"]
                );
                assert!(
                    d["spec"]["template"]["metadata"]["labels"][helm].is_null(),
                    "{file}: {}'s pods have {helm}",
                    d["metadata"]["name"]
                );
            }
        }
    }
}

/// Runs the `helm test` pod's command of the chart rendered with `set` the way the pod would,
/// with busybox's `sh` and `nslookup` (the pod's image is busybox), its nslookup pointed at
/// `port` and `KUBERNETES_SERVICE_HOST` set to `api`: (exit status success, output).
fn run_test_pod(set: &str, port: u16, api: &str) -> (bool, String) {
    let docs = template(&["--set", set]);
    let pod: Pod = typed(find(&docs, "Pod", "cluster-dns-test").unwrap());
    let c = &pod.spec.unwrap().containers[0];
    let command = c.command.clone().unwrap();
    assert_eq!(command[..2], ["sh", "-c"]);
    let dir = crate::support::temp_dir("chart-helm-test");
    let shim = dir.join("nslookup");
    std::fs::write(
        &shim,
        format!("#!/bin/sh\nexec busybox nslookup -port={port} \"$@\"\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("busybox")
        .args(["sh", "-c", &command[2]])
        .env(
            "PATH",
            format!("{}:{}", dir.display(), std::env::var("PATH").unwrap()),
        )
        .env("KUBERNETES_SERVICE_HOST", api)
        .output()
        .unwrap_or_else(|e| panic!("busybox: {e} (apt-get install busybox; test.sh does)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Issue 45: `helm test` runs a hook pod (a small image, busybox) that asks the kube-dns IP for
/// `kubernetes.default.svc.<domain>` and fails unless the answer is the API server's Service IP;
/// its command, run here with busybox against a real server, passes on the right answer and
/// fails on a wrong one or NXDOMAIN. The plain manifests have no such pod (kubectl runs no
/// hooks). NOTES.txt says what was installed, how to check it with dig from a pod, and where the
/// guide is.
#[test]
fn helm_test_resolves_kubernetes_default_and_the_notes_say_how_to_check() {
    let docs = template(&[]);
    let pod = find(&docs, "Pod", "cluster-dns-test").expect("the helm test pod");
    assert_eq!(pod["metadata"]["annotations"]["helm.sh/hook"], "test");
    let pod: Pod = typed(pod);
    let spec = pod.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.containers[0].image.as_deref(), Some("busybox:1.36"));
    let script = &spec.containers[0].command.as_ref().unwrap()[2];
    assert!(
        script.contains("kubernetes.default.svc.cluster.local") && script.contains("10.96.0.10"),
        "{script}"
    );
    for file in ["cluster-dns.yaml", "autoscaler.yaml"] {
        assert!(
            crate::deploy::manifests::docs_of(file)
                .iter()
                .all(|d| d["kind"] != "Pod"),
            "{file} has the helm test pod"
        );
    }

    // The pod's command against a server that knows kubernetes.default.svc.cluster.local.
    let dir = crate::support::temp_dir("chart-helm-test-server");
    let port = crate::support::upstream::free_port();
    let corefile = dir.join("Corefile");
    std::fs::write(
        &corefile,
        format!(
            ".:{port} {{\n    bind 127.0.0.1\n    hosts {{\n        10.96.0.1 kubernetes.default.svc.cluster.local\n    }}\n}}\n"
        ),
    )
    .unwrap();
    let server = crate::runtime::cli::Server::start(&corefile);
    let (ok, out) = run_test_pod("clusterIP=127.0.0.1", port, "10.96.0.1");
    assert!(
        ok && out.contains("OK: kubernetes.default.svc.cluster.local is 10.96.0.1"),
        "{out}"
    );
    // Another answer than the API server's Service IP: fails.
    let (ok, out) = run_test_pod("clusterIP=127.0.0.1", port, "10.96.0.2");
    assert!(!ok && out.contains("FAIL"), "{out}");
    // The name does not exist (another cluster domain): NXDOMAIN fails.
    let (ok, out) = run_test_pod("clusterIP=127.0.0.1,clusterDomain=other.test", port, "10.96.0.1");
    assert!(!ok && out.contains("NXDOMAIN") && out.contains("FAIL"), "{out}");
    assert!(server.stop());
    // No server at all: fails.
    let (ok, out) = run_test_pod("clusterIP=127.0.0.1", port, "10.96.0.1");
    assert!(!ok && out.contains("FAIL"), "{out}");

    // NOTES.txt.
    let notes = render_py(&["notes"]).unwrap();
    for want in [
        "Service kube-dns at 10.96.0.10",
        "Deployment cluster-dns (replicas set by Deployment cluster-dns-autoscaler)",
        "helm test cluster-dns -n kube-system",
        "dig @10.96.0.10 kubernetes.default.svc.cluster.local",
        "https://github.com/cluster-dns/cluster-dns/blob/main/deploy/README.md",
    ] {
        assert!(notes.contains(want), "NOTES.txt lacks {want:?}:\n{notes}");
    }
    let ci = root().join("deploy/chart/ci");
    let notes = render_py(&["notes", "-f", ci.join("dual-stack-values.yaml").to_str().unwrap()]).unwrap();
    assert!(
        notes.contains("dig @10.100.0.10 kubernetes.default.svc.k8s.example.internal"),
        "{notes}"
    );
    let notes = render_py(&[
        "notes",
        "-f",
        ci.join("keep-service-values.yaml").to_str().unwrap(),
    ])
    .unwrap();
    assert!(
        notes.contains("no Service of its own") && !notes.contains("Service kube-dns at"),
        "{notes}"
    );
    let notes = render_py(&[
        "notes",
        "-f",
        ci.join("fixed-replicas-values.yaml").to_str().unwrap(),
    ])
    .unwrap();
    assert!(notes.contains("Deployment cluster-dns (3 replicas)"), "{notes}");
}

/// Issue 45: `grafanaDashboard.enabled` ships deploy/monitoring's dashboard as a ConfigMap for
/// Grafana's sidecar: its label (`grafana_dashboard: "1"`), the dashboard JSON as it is in
/// deploy/monitoring (one copy, through the link in files/), any annotations, in the release's
/// namespace unless told; and not at all by default.
#[test]
fn the_grafana_dashboard_configmap_is_deploy_monitorings() {
    let docs = template(&[]);
    assert!(find(&docs, "ConfigMap", "cluster-dns-dashboard").is_none());
    let text = std::fs::read_to_string(root().join("deploy/monitoring/grafana-dashboard.json")).unwrap();
    let want: Value = serde_json::from_str(&text).unwrap();
    let ci = root().join("deploy/chart/ci/monitoring-values.yaml");
    let docs = template(&["-f", ci.to_str().unwrap()]);
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-dashboard").unwrap());
    let labels = cm.metadata.labels.unwrap();
    assert_eq!(labels["grafana_dashboard"], "1");
    assert_eq!(cm.metadata.annotations.unwrap()["grafana_folder"], "DNS");
    assert_eq!(cm.metadata.namespace.as_deref(), Some("kube-system"));
    let data = cm.data.unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["cluster-dns.json"]);
    let have: Value = serde_json::from_str(&data["cluster-dns.json"]).unwrap();
    assert_eq!(have, want, "the ConfigMap's dashboard is not deploy/monitoring's");
    assert_eq!(data["cluster-dns.json"].trim_end(), text.trim_end());
    // Grafana's namespace, and the sidecar's label of another install.
    let docs = template(&[
        "--set",
        "grafanaDashboard.enabled=true,grafanaDashboard.namespace=monitoring",
        "--set",
        "grafanaDashboard.labels.dashboards=cluster",
    ]);
    let cm = find(&docs, "ConfigMap", "cluster-dns-dashboard").unwrap();
    assert_eq!(cm["metadata"]["namespace"], "monitoring");
    assert_eq!(cm["metadata"]["labels"]["dashboards"], "cluster");
}

/// The chart's default Corefile: kubeadm's (config/Corefile) with `domain`, plus `fairness`
/// and, in the kubernetes block, `pods verified` (so fairness budgets pods per namespace) and
/// `topology`.
pub(crate) fn protected_corefile(domain: &str) -> String {
    include_str!("../../../config/Corefile")
        .replace("cluster.local", domain)
        .replace("    ready\n", "    ready\n    fairness\n")
        .replace(
            "       pods insecure\n",
            "       pods verified\n       topology\n",
        )
}

/// Issue 45, item 7: where the chart owns the Corefile it protects by default: `fairness`, with
/// `pods verified` so its budgets are per namespace, and `topology`; `corefile.kubeadm: true`
/// (ci/kubeadm-corefile-values.yaml) renders kubeadm's Corefile byte for byte, for every domain;
/// `corefile.override` wins over both; both Corefiles pass `cluster-dns --check` (the
/// variations' test runs it on every rendered one); the node agents keep kubeadm's (no Pods or
/// Nodes watch on every node); and the ClusterRole grants what the protected one watches.
#[test]
fn the_default_corefile_is_protected_and_kubeadms_is_one_value_away() {
    let protected = protected_corefile("cluster.local");
    assert_ne!(protected, include_str!("../../../config/Corefile"));
    for line in ["    fairness\n", "       pods verified\n", "       topology\n"] {
        assert!(protected.contains(line), "{line:?}");
    }
    let corefile = |args: &[&str]| {
        let docs = template(args);
        let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns").unwrap());
        cm.data.unwrap().remove("Corefile").unwrap()
    };
    assert_eq!(corefile(&[]), protected);
    let ci = root().join("deploy/chart/ci/kubeadm-corefile-values.yaml");
    assert_eq!(
        corefile(&["-f", ci.to_str().unwrap()]),
        include_str!("../../../config/Corefile")
    );
    assert_eq!(
        corefile(&["--set", "corefile.kubeadm=true,clusterDomain=corp.internal"]),
        include_str!("../../../config/Corefile").replace("cluster.local", "corp.internal")
    );
    assert_eq!(
        corefile(&[
            "--set",
            "corefile.kubeadm=true,corefile.override=.:53 {\n    whoami\n}"
        ]),
        ".:53 {\n    whoami\n}\n"
    );
    // The shipped Corefile is the protected one.
    let cm: ConfigMap = typed(&crate::deploy::manifests::docs_of("cluster-dns-corefile.yaml")[0]);
    assert_eq!(cm.data.unwrap()["Corefile"], protected);
    // The node agents in watch mode run kubeadm's: pods verified and topology would put a Pods
    // and a Nodes watch on every node.
    let docs = template(&["--set", "nodeLocal.enabled=true"]);
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-node").unwrap());
    assert_eq!(
        cm.data.unwrap()["Corefile"],
        include_str!("../../../config/Corefile")
    );
    // What the protected Corefile watches (pods, nodes) is granted.
    let docs = template(&[]);
    let role: ClusterRole = typed(find(&docs, "ClusterRole", "system:cluster-dns").unwrap());
    let granted = crate::deploy::manifests::rules(role.rules.unwrap());
    for want in ["/pods list,watch", "/nodes list,watch"] {
        assert!(granted.iter().any(|g| g == want), "{want}: {granted:?}");
    }
    // The guides say which to pick.
    let guide = std::fs::read_to_string(root().join("deploy/README.md")).unwrap();
    let chart = std::fs::read_to_string(root().join("deploy/chart/README.md")).unwrap();
    assert!(
        guide.contains("### Which Corefile"),
        "deploy/README.md says which to pick"
    );
    assert!(
        chart.contains("`corefile.kubeadm`"),
        "the chart's table has corefile.kubeadm"
    );
}

/// The chart's DNSPolicy CRD (crds/, which Helm installs untemplated).
const DNSPOLICY_CRD: &str = "deploy/chart/crds/dnspolicies.dns.cluster-dns.io.yaml";

fn dnspolicy_crd() -> CustomResourceDefinition {
    let text = std::fs::read_to_string(root().join(DNSPOLICY_CRD)).unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{DNSPOLICY_CRD}: {e}"));
    typed(&doc)
}

/// The openAPIV3Schema of the CRD's one version.
fn dnspolicy_schema() -> JSONSchemaProps {
    let crd = dnspolicy_crd();
    let version = crd.spec.versions.into_iter().next().unwrap();
    version.schema.unwrap().open_api_v3_schema.unwrap()
}

fn property<'a>(s: &'a JSONSchemaProps, path: &str) -> &'a JSONSchemaProps {
    path.split('.').fold(s, |s, k| {
        s.properties
            .as_ref()
            .and_then(|p| p.get(k))
            .unwrap_or_else(|| panic!("the schema has no {path}"))
    })
}

fn items(s: &JSONSchemaProps) -> &JSONSchemaProps {
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(i)) => i,
        other => panic!("items: {other:?}"),
    }
}

/// What the API server would refuse or prune in `v` under the structural schema `s` (`path` is
/// where `v` is): a wrong type, a value not in the enum, a string not matching the pattern or too
/// long, a missing required field, a duplicate in a set list, and every field the schema does not
/// name (pruned there, so an example relying on it would not do what it says). `.metadata` is
/// checked as an ObjectMeta, as the API server does. CEL rules, formats and numbers' bounds are
/// not checked: the CRD has none.
fn schema_errors(s: &JSONSchemaProps, v: &Value, path: &str, out: &mut Vec<String>) {
    if path == ".metadata" {
        match serde_json::from_value::<ObjectMeta>(v.clone()) {
            Ok(meta) => {
                let mut lost = Vec::new();
                let round = serde_json::to_value(&meta).unwrap();
                crate::deploy::manifests::unknown_fields(v, &round, path, &mut lost);
                out.extend(lost.into_iter().map(|f| format!("{f}: unknown field")));
            }
            Err(e) => out.push(format!("{path}: {e}")),
        }
        return;
    }
    let ty = s.type_.as_deref().unwrap_or("(none)");
    let fits = match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => false,
    };
    if !fits {
        out.push(format!("{path}: {v} is not of type {ty}"));
        return;
    }
    if let Some(values) = &s.enum_
        && !values.iter().any(|e| e.0 == *v)
    {
        let values: Vec<&Value> = values.iter().map(|e| &e.0).collect();
        out.push(format!("{path}: {v} is not one of {values:?}"));
    }
    if let Some(text) = v.as_str() {
        if let Some(pattern) = &s.pattern
            && !regex::Regex::new(pattern).unwrap().is_match(text)
        {
            out.push(format!("{path}: {text:?} does not match {pattern}"));
        }
        if let Some(max) = s.max_length
            && text.chars().count() as i64 > max
        {
            out.push(format!("{path}: {text:?} is longer than {max}"));
        }
    }
    match v {
        Value::Object(map) => {
            for r in s.required.iter().flatten() {
                if !map.contains_key(r) {
                    out.push(format!("{path}: required field {r} is missing"));
                }
            }
            for (k, child) in map {
                let at = format!("{path}.{k}");
                if let Some(cs) = s.properties.as_ref().and_then(|p| p.get(k)) {
                    schema_errors(cs, child, &at, out);
                } else if let Some(JSONSchemaPropsOrBool::Schema(cs)) = &s.additional_properties {
                    schema_errors(cs, child, &at, out);
                } else {
                    out.push(format!("{at}: unknown field (the API server prunes it)"));
                }
            }
        }
        Value::Array(list) => {
            let Some(JSONSchemaPropsOrArray::Schema(is)) = &s.items else {
                out.push(format!("{path}: no items schema"));
                return;
            };
            for (i, item) in list.iter().enumerate() {
                schema_errors(is, item, &format!("{path}[{i}]"), out);
            }
            if s.x_kubernetes_list_type.as_deref() == Some("set") {
                for (i, item) in list.iter().enumerate() {
                    if list[..i].contains(item) {
                        out.push(format!("{path}[{i}]: duplicate {item} in a set"));
                    }
                }
            }
        }
        _ => {}
    }
}

/// Where the schema `s` is not structural (apiextensions.k8s.io/v1's rules, the part this CRD
/// could break) or keeps what it should prune: a node without a type, any
/// `x-kubernetes-preserve-unknown-fields`, `properties` beside `additionalProperties`, items as
/// a list of schemas, an object that names no field (all of it pruned), and a default or an enum
/// value its own schema refuses.
fn structural_errors(s: &JSONSchemaProps, path: &str, out: &mut Vec<String>) {
    let at = if path.is_empty() { "(root)" } else { path };
    if s.type_.is_none() {
        out.push(format!("{at}: no type"));
    }
    if s.x_kubernetes_preserve_unknown_fields.is_some() {
        out.push(format!("{at}: x-kubernetes-preserve-unknown-fields"));
    }
    if s.properties.is_some() && s.additional_properties.is_some() {
        out.push(format!("{at}: both properties and additionalProperties"));
    }
    if s.type_.as_deref() == Some("object")
        && s.properties.is_none()
        && !matches!(s.additional_properties, Some(JSONSchemaPropsOrBool::Schema(_)))
        && path != ".metadata"
    {
        out.push(format!("{at}: an object that names no field"));
    }
    if let Some(d) = &s.default {
        schema_errors(s, &d.0, &format!("{path} (default)"), out);
    }
    for e in s.enum_.iter().flatten() {
        let bare = JSONSchemaProps {
            enum_: None,
            ..s.clone()
        };
        schema_errors(&bare, &e.0, &format!("{path} (enum)"), out);
    }
    for (k, p) in s.properties.iter().flatten() {
        structural_errors(p, &format!("{path}.{k}"), out);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(p)) = &s.additional_properties {
        structural_errors(p, &format!("{path}.*"), out);
    }
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(i)) => structural_errors(i, &format!("{path}[]"), out),
        Some(JSONSchemaPropsOrArray::Schemas(_)) => out.push(format!("{at}: items as a list")),
        None if s.type_.as_deref() == Some("array") => out.push(format!("{at}: no items")),
        None => {}
    }
}

/// The DNSPolicy CRD: a k8s-openapi CustomResourceDefinition with no field its type does not
/// know; group dns.cluster-dns.io, kind DNSPolicy, plural dnspolicies, singular dnspolicy,
/// short name dnspol, namespaced; one version v1alpha1, served and stored, with Mode and Action
/// columns; a structural schema that keeps no unknown field anywhere, of the shape the
/// `dnspolicy` directive reads (action NXDOMAIN|REFUSED defaulting to NXDOMAIN, mode
/// Enforce|Audit defaulting to Enforce, both selectors metav1.LabelSelectors); helm lint
/// checks it (the variations' test lints), `render.py template --include-crds` prints it, and
/// deploy/dnspolicy-crd.yaml is the same file byte for byte.
#[test]
fn the_dnspolicy_crd_is_structural_and_the_plain_file_is_the_charts() {
    let crd = dnspolicy_crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("dnspolicies.dns.cluster-dns.io")
    );
    let spec = &crd.spec;
    assert_eq!(spec.group, "dns.cluster-dns.io");
    assert_eq!(spec.scope, "Namespaced");
    assert_eq!(spec.names.kind, "DNSPolicy");
    assert_eq!(spec.names.plural, "dnspolicies");
    assert_eq!(spec.names.singular.as_deref(), Some("dnspolicy"));
    assert_eq!(
        spec.names.short_names.as_deref(),
        Some(&["dnspol".to_owned()][..])
    );
    assert_eq!(spec.names.list_kind.as_deref(), Some("DNSPolicyList"));
    assert_ne!(spec.preserve_unknown_fields, Some(true));
    assert_eq!(spec.versions.len(), 1);
    let v = &spec.versions[0];
    assert_eq!((v.name.as_str(), v.served, v.storage), ("v1alpha1", true, true));
    let columns: Vec<(&str, &str)> = v
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    for want in [("Mode", ".spec.mode"), ("Action", ".spec.action")] {
        assert!(columns.contains(&want), "{want:?}: {columns:?}");
    }

    // Structural, and nothing kept unknown anywhere.
    let schema = dnspolicy_schema();
    let mut errors = Vec::new();
    structural_errors(&schema, "", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
    let text = std::fs::read_to_string(root().join(DNSPOLICY_CRD)).unwrap();
    assert!(!text.contains("x-kubernetes-preserve-unknown-fields"));

    // The shape the directive reads.
    let spec_schema = property(&schema, "spec");
    let mut fields: Vec<&String> = spec_schema.properties.as_ref().unwrap().keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        ["action", "external", "mode", "podSelector", "visibleNamespaces"]
    );
    let json = |v: &[&str]| -> Vec<Value> { v.iter().map(|s| Value::from(*s)).collect() };
    let enum_of =
        |s: &JSONSchemaProps| -> Vec<Value> { s.enum_.iter().flatten().map(|e| e.0.clone()).collect() };
    let action = property(&schema, "spec.action");
    assert_eq!(enum_of(action), json(&["NXDOMAIN", "REFUSED"]));
    assert_eq!(action.default.as_ref().unwrap().0, "NXDOMAIN");
    let mode = property(&schema, "spec.mode");
    assert_eq!(enum_of(mode), json(&["Enforce", "Audit"]));
    assert_eq!(mode.default.as_ref().unwrap().0, "Enforce");
    assert_eq!(
        items(property(&schema, "spec.external.allow")).type_.as_deref(),
        Some("string")
    );
    assert_eq!(
        items(property(&schema, "spec.visibleNamespaces.names"))
            .type_
            .as_deref(),
        Some("string")
    );
    // Both selectors are metav1.LabelSelectors: the same schema, matchLabels a string map,
    // matchExpressions {key, operator In|NotIn|Exists|DoesNotExist, values}.
    let pods = property(&schema, "spec.podSelector");
    let namespaces = property(&schema, "spec.visibleNamespaces.selector");
    let bare = |s: &JSONSchemaProps| JSONSchemaProps {
        description: None,
        ..s.clone()
    };
    assert_eq!(bare(pods), bare(namespaces));
    match &property(pods, "matchLabels").additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(v)) => assert_eq!(v.type_.as_deref(), Some("string")),
        other => panic!("matchLabels: {other:?}"),
    }
    let expression = items(property(pods, "matchExpressions"));
    assert_eq!(
        expression.required.as_deref(),
        Some(&["key".to_owned(), "operator".to_owned()][..])
    );
    assert_eq!(
        enum_of(property(expression, "operator")),
        json(&["In", "NotIn", "Exists", "DoesNotExist"])
    );
    assert_eq!(
        items(property(expression, "values")).type_.as_deref(),
        Some("string")
    );
    // What k8s-openapi writes for a LabelSelector passes as is.
    let selector = LabelSelector {
        match_labels: Some([("team".to_owned(), "a".to_owned())].into()),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".to_owned(),
            operator: "NotIn".to_owned(),
            values: Some(vec!["batch".to_owned()]),
        }]),
    };
    let mut errors = Vec::new();
    schema_errors(
        pods,
        &serde_json::to_value(&selector).unwrap(),
        ".spec.podSelector",
        &mut errors,
    );
    assert!(errors.is_empty(), "{errors:#?}");

    // The plain file is the chart's copy, and `template --include-crds` prints it first.
    let plain = std::fs::read(root().join("deploy/dnspolicy-crd.yaml")).unwrap();
    assert!(
        plain == std::fs::read(root().join(DNSPOLICY_CRD)).unwrap(),
        "deploy/dnspolicy-crd.yaml is not {DNSPOLICY_CRD}: run `python3 deploy/render.py generate`"
    );
    let with = render_py(&["template", "--include-crds"]).unwrap();
    assert!(
        with.starts_with(&format!(
            "---\n# Source: cluster-dns/crds/dnspolicies.dns.cluster-dns.io.yaml\n{text}---\n"
        )),
        "{}",
        &with[..with.len().min(300)]
    );
    assert!(
        !render_py(&["template"])
            .unwrap()
            .contains("CustomResourceDefinition")
    );
}

/// The example policies of deploy/examples pass the CRD's schema (as the API server would
/// check them: types, enums, patterns, required fields, no field it would prune), and say what
/// deploy/README.md says they do; the same check refuses an unknown field at any level, a bad
/// enum value, a wrong type, a missing required field and an outside name that is not a name.
#[test]
fn the_example_policies_pass_the_crds_schema_and_bad_ones_do_not() {
    let schema = dnspolicy_schema();
    let check = |doc: &Value| {
        let mut errors = Vec::new();
        schema_errors(&schema, doc, "", &mut errors);
        errors
    };
    let example = |file: &str| {
        let docs = crate::deploy::manifests::docs_of(&format!("examples/{file}"));
        assert_eq!(docs.len(), 1, "{file}");
        let doc = docs.into_iter().next().unwrap();
        assert_eq!(doc["apiVersion"], "dns.cluster-dns.io/v1alpha1", "{file}");
        assert_eq!(doc["kind"], "DNSPolicy", "{file}");
        assert!(doc["metadata"]["namespace"].is_string(), "{file}: namespaced");
        let errors = check(&doc);
        assert!(errors.is_empty(), "{file}: {errors:#?}");
        doc
    };

    let isolate = example("dnspolicy-isolate.yaml");
    assert_eq!(isolate["metadata"]["namespace"], "team-a");
    let spec = &isolate["spec"];
    assert_eq!(spec["podSelector"], serde_json::json!({}));
    assert_eq!(
        spec["visibleNamespaces"],
        serde_json::json!({"names": ["team-a", "shared"]})
    );
    assert_eq!(
        spec["external"],
        serde_json::json!({"allow": ["*.pypi.org", "github.com"]})
    );
    assert_eq!(
        (spec["action"].as_str(), spec["mode"].as_str()),
        (Some("NXDOMAIN"), Some("Enforce"))
    );

    let audit = example("dnspolicy-audit.yaml");
    assert_eq!(audit["spec"]["mode"], "Audit");
    assert_eq!(audit["spec"]["external"], serde_json::json!({"allow": []}));
    // Every namespace visible (no visibleNamespaces), the default action.
    assert!(audit["spec"]["visibleNamespaces"].is_null() && audit["spec"]["action"].is_null());

    // The full shape of the directive's contract passes too.
    let full = serde_json::json!({
        "apiVersion": "dns.cluster-dns.io/v1alpha1",
        "kind": "DNSPolicy",
        "metadata": {"name": "isolate", "namespace": "team-a", "labels": {"owner": "team-a"}},
        "spec": {
            "podSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
            "visibleNamespaces": {"names": ["team-a", "shared"], "selector": {"matchLabels": {}}},
            "external": {"allow": ["*", "*.pypi.org", "github.com", "files.pythonhosted.org."]},
            "action": "REFUSED",
            "mode": "Audit"
        }
    });
    assert_eq!(check(&full), Vec::<String>::new());

    // What the check refuses, each from the isolate example with one change: (JSON pointer,
    // the new value as JSON or "" to remove the field, the error wanted).
    let broken = |pointer: &str, value: &str| {
        let mut doc = isolate.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let at = if parent.is_empty() {
            &mut doc
        } else {
            doc.pointer_mut(parent).unwrap()
        };
        if value.is_empty() {
            at.as_object_mut().unwrap().remove(key);
        } else {
            let value: Value = serde_json::from_str(value).unwrap();
            match at {
                Value::Array(list) => list[key.parse::<usize>().unwrap()] = value,
                at => drop(at.as_object_mut().unwrap().insert(key.to_owned(), value)),
            }
        }
        check(&doc)
    };
    for (pointer, value, want) in [
        // Unknown fields, at every level.
        ("/status", "{}", ".status: unknown field"),
        ("/spec/egress", "{}", ".spec.egress: unknown field"),
        ("/spec/external/deny", "[]", ".spec.external.deny: unknown field"),
        (
            "/spec/visibleNamespaces/name",
            "[]",
            ".spec.visibleNamespaces.name: unknown field",
        ),
        (
            "/spec/podSelector/matchLabel",
            "{}",
            ".spec.podSelector.matchLabel: unknown field",
        ),
        (
            "/spec/podSelector/matchExpressions",
            r#"[{"key": "app", "operator": "In", "values": ["a"], "value": "a"}]"#,
            ".spec.podSelector.matchExpressions[0].value: unknown field",
        ),
        (
            "/metadata/namspace",
            r#""team-a""#,
            ".metadata.namspace: unknown field",
        ),
        // Bad enum values.
        (
            "/spec/action",
            r#""DROP""#,
            r#".spec.action: "DROP" is not one of"#,
        ),
        (
            "/spec/action",
            r#""nxdomain""#,
            r#".spec.action: "nxdomain" is not one of"#,
        ),
        ("/spec/mode", r#""audit""#, r#".spec.mode: "audit" is not one of"#),
        (
            "/spec/podSelector/matchExpressions",
            r#"[{"key": "app", "operator": "Within", "values": ["a"]}]"#,
            r#".spec.podSelector.matchExpressions[0].operator: "Within" is not one of"#,
        ),
        // Wrong types, missing required fields, names that are not names.
        (
            "/spec/external/allow",
            r#""github.com""#,
            r#".spec.external.allow: "github.com" is not of type array"#,
        ),
        (
            "/spec/podSelector/matchLabels",
            r#"{"tier": 1}"#,
            ".spec.podSelector.matchLabels.tier: 1 is not of type string",
        ),
        (
            "/spec/podSelector/matchExpressions",
            r#"[{"key": "app"}]"#,
            ".spec.podSelector.matchExpressions[0]: required field operator is missing",
        ),
        (
            "/spec/podSelector",
            "",
            ".spec: required field podSelector is missing",
        ),
        ("/spec", "", ": required field spec is missing"),
        (
            "/spec/external/allow/0",
            r#""*pypi.org""#,
            r#".spec.external.allow[0]: "*pypi.org" does not match"#,
        ),
        (
            "/spec/external/allow/1",
            r#""https://github.com""#,
            r#".spec.external.allow[1]: "https://github.com" does not match"#,
        ),
        (
            "/spec/external/allow/1",
            r#""*.pypi.org""#,
            r#".spec.external.allow[1]: duplicate "*.pypi.org" in a set"#,
        ),
        (
            "/spec/visibleNamespaces/names/1",
            r#""Shared""#,
            r#".spec.visibleNamespaces.names[1]: "Shared" does not match"#,
        ),
    ] {
        let errors = broken(pointer, value);
        assert!(
            errors.iter().any(|e| e.starts_with(want)),
            "{pointer} = {value}: want {want:?}, got {errors:?}"
        );
    }
}

/// The ClusterRole of every variation, and of deploy/cluster-dns.yaml, lets the server list and
/// watch DNSPolicies and grants nothing but list and watch anywhere; the node agents, which do
/// not run `dnspolicy` (kubeadm's Corefile, or forward only), get no DNSPolicy access.
#[test]
fn the_cluster_role_lists_and_watches_dnspolicies_and_nothing_more() {
    let check = |what: &str, role: ClusterRole| {
        let granted = crate::deploy::manifests::rules(role.rules.unwrap());
        assert!(
            granted
                .iter()
                .any(|g| g == "dns.cluster-dns.io/dnspolicies list,watch"),
            "{what}: {granted:?}"
        );
        for g in &granted {
            assert!(
                g.ends_with(" list,watch"),
                "{what}: {g} is more than list and watch"
            );
        }
    };
    let mut all = variations();
    all.push((
        "nodeLocal".to_owned(),
        vec!["--set".to_owned(), "nodeLocal.enabled=true".to_owned()],
    ));
    for (name, args) in all {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let docs = template(&args);
        check(
            &name,
            typed(find(&docs, "ClusterRole", "system:cluster-dns").unwrap()),
        );
        if let Some(node) = find(&docs, "ClusterRole", "system:cluster-dns-node") {
            let node: ClusterRole = typed(node);
            let granted = crate::deploy::manifests::rules(node.rules.unwrap());
            assert!(
                !granted.iter().any(|g| g.contains("dnspolicies")),
                "{name}: {granted:?}"
            );
        }
    }
    let docs = crate::deploy::manifests::docs_of("cluster-dns.yaml");
    check(
        "deploy/cluster-dns.yaml",
        typed(find(&docs, "ClusterRole", "system:cluster-dns").unwrap()),
    );
}
