//! `deploy/`: every manifest (cluster-dns.yaml, and cluster-dns-corefile.yaml with the Corefile's
//! ConfigMap) deserialises into its k8s-openapi type with no unknown field, the
//! RBAC grants exactly list/watch on what the watches read, and the Deployment and Service keep
//! CoreDNS's contract (labels, port names, probes, security settings, spread over zones and
//! nodes), and the cluster-proportional-autoscaler in autoscaler.yaml scales that Deployment
//! with the linear parameters and only the RBAC it needs. These files are generated from
//! deploy/chart (tests/integration/deploy/chart.rs checks that they are its output).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

fn docs() -> Vec<Value> {
    docs_of("cluster-dns.yaml")
}

pub(crate) fn docs_of(file: &str) -> Vec<Value> {
    let path = format!("{}/deploy/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Keys present in `orig` but lost after a typed round trip: fields the type does not know.
pub(crate) fn unknown_fields(orig: &Value, round: &Value, path: &str, out: &mut Vec<String>) {
    match (orig, round) {
        (Value::Object(o), Value::Object(r)) => {
            for (k, v) in o {
                match r.get(k) {
                    Some(rv) => unknown_fields(v, rv, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k}")),
                }
            }
        }
        (Value::Array(o), Value::Array(r)) => {
            for (i, (a, b)) in o.iter().zip(r).enumerate() {
                unknown_fields(a, b, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

pub(crate) fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) -> T {
    let obj: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{}: {e}", doc["kind"]));
    let mut lost = Vec::new();
    unknown_fields(doc, &serde_json::to_value(&obj).unwrap(), "", &mut lost);
    assert!(
        lost.is_empty(),
        "{} has fields its type does not know: {lost:?}",
        doc["kind"]
    );
    obj
}

#[test]
fn manifests_are_valid_kubernetes_objects() {
    let mut kinds = Vec::new();
    for doc in docs().into_iter().chain(docs_of("cluster-dns-corefile.yaml")) {
        let kind = doc["kind"].as_str().unwrap().to_owned();
        match kind.as_str() {
            "ServiceAccount" => drop(typed::<ServiceAccount>(&doc)),
            "ClusterRole" => drop(typed::<ClusterRole>(&doc)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(&doc)),
            "ConfigMap" => drop(typed::<ConfigMap>(&doc)),
            "Deployment" => drop(typed::<Deployment>(&doc)),
            "PodDisruptionBudget" => drop(typed::<PodDisruptionBudget>(&doc)),
            "Service" => drop(typed::<Service>(&doc)),
            other => panic!("unexpected kind {other}"),
        }
        kinds.push(kind);
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount"
        ]
    );
}

#[test]
fn rbac_grants_exactly_list_and_watch_on_the_watched_resources() {
    let role: ClusterRole = docs()
        .iter()
        .find(|d| d["kind"] == "ClusterRole")
        .map(typed)
        .unwrap();
    let mut granted = Vec::new();
    for rule in role.rules.unwrap() {
        let mut verbs = rule.verbs.clone();
        verbs.sort();
        assert_eq!(verbs, ["list", "watch"], "read-only");
        for group in rule.api_groups.unwrap() {
            for r in rule.resources.clone().unwrap() {
                granted.push(format!("{group}/{r}"));
            }
        }
    }
    granted.sort();
    assert_eq!(
        granted,
        [
            "/namespaces",
            "/nodes",
            "/pods",
            "/services",
            "discovery.k8s.io/endpointslices",
            "dns.cluster-dns.io/dnspolicies"
        ]
    );
    let binding: ClusterRoleBinding = docs()
        .iter()
        .find(|d| d["kind"] == "ClusterRoleBinding")
        .map(typed)
        .unwrap();
    assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        ("cluster-dns", Some("kube-system"))
    );
}

#[test]
fn deployment_and_service_keep_the_coredns_contract() {
    let d: Deployment = docs()
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .map(typed)
        .unwrap();
    let spec = d.spec.unwrap();
    // The autoscaler of autoscaler.yaml owns the replicas: an apply must not set them back.
    assert_eq!(spec.replicas, None);
    let ru = spec.strategy.unwrap().rolling_update.unwrap();
    assert_eq!(
        ru.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0))
    );
    let pod = spec.template.spec.unwrap();
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    assert_eq!(pod.dns_policy.as_deref(), Some("Default"));
    assert!(pod.affinity.unwrap().pod_anti_affinity.is_some());
    let c = &pod.containers[0];
    let live = c.liveness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
    let ready = c.readiness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
    assert_eq!(live.path.as_deref(), Some("/health"));
    assert_eq!(ready.path.as_deref(), Some("/ready"));
    // kubeadm's names for the probe ports, and the probes name them.
    assert_eq!(live.port, IntOrString::String("liveness-probe".to_owned()));
    assert_eq!(ready.port, IntOrString::String("readiness-probe".to_owned()));
    assert_eq!(
        probe_ports(c),
        [("liveness-probe", 8080), ("readiness-probe", 8181)]
    );
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    let caps = sc.capabilities.as_ref().unwrap();
    assert_eq!(caps.add.as_deref(), Some(&["NET_BIND_SERVICE".to_owned()][..]));
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]));
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    let res = c.resources.as_ref().unwrap();
    assert!(
        res.requests.as_ref().unwrap().contains_key("memory")
            && res.limits.as_ref().unwrap().contains_key("memory")
    );
    assert_eq!(c.args.as_deref().unwrap()[0], "-conf");
    let labels = spec.template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels.get("k8s-app").map(String::as_str), Some("kube-dns"));

    let s: Service = docs().iter().find(|d| d["kind"] == "Service").map(typed).unwrap();
    assert_eq!(s.metadata.name.as_deref(), Some("kube-dns"));
    let spec = s.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.10"));
    assert_eq!(
        spec.selector.unwrap().get("k8s-app").map(String::as_str),
        Some("kube-dns")
    );
    let ports: Vec<(String, i32, String)> = spec
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.name.unwrap(), p.port, p.protocol.unwrap()))
        .collect();
    assert_eq!(
        ports,
        [
            ("dns".to_owned(), 53, "UDP".to_owned()),
            ("dns-tcp".to_owned(), 53, "TCP".to_owned()),
            ("metrics".to_owned(), 9153, "TCP".to_owned())
        ]
    );
}

#[test]
fn the_configmap_holds_the_protected_kubeadm_corefile_and_it_parses() {
    // In a file of its own, so re-applying cluster-dns.yaml leaves an edited Corefile alone.
    assert!(!docs().iter().any(|d| d["kind"] == "ConfigMap"));
    let cm: ConfigMap = docs_of("cluster-dns-corefile.yaml")
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .map(typed)
        .unwrap();
    let corefile = cm.data.unwrap().remove("Corefile").unwrap();
    // The ConfigMap ships kubeadm's default (config/Corefile) with fairness, pods verified and
    // topology (the chart's default; corefile.kubeadm=true renders config/Corefile itself).
    assert_eq!(
        corefile,
        crate::deploy::chart::protected_corefile("cluster.local")
    );
    for line in [
        "kubernetes cluster.local in-addr.arpa ip6.arpa",
        "forward . /etc/resolv.conf",
        "cache 30",
        "loadbalance",
    ] {
        assert!(corefile.contains(line), "{line}");
    }
    let cf = cluster_dns::corefile::Corefile::parse_str(&corefile, std::path::Path::new("Corefile")).unwrap();
    assert_eq!(cf.blocks.len(), 1);
    assert_eq!(cf.blocks[0].directives.len(), 11);
    // The binary accepts it as shipped: `cluster-dns --check` on the ConfigMap's text.
    let dir = crate::support::temp_dir("configmap");
    let path = dir.join("Corefile");
    std::fs::write(&path, &corefile).unwrap();
    let stdout = check_binary(&path, "the ConfigMap's Corefile");
    assert!(stdout.contains("OK (1 server block(s))"));
}

/// The container ports named as kubeadm names CoreDNS's probe ports: (name, port) of each
/// TCP port whose name ends in `-probe`.
pub(crate) fn probe_ports(c: &k8s_openapi::api::core::v1::Container) -> Vec<(&str, i32)> {
    c.ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref() == Some("TCP"))
        .filter_map(|p| Some((p.name.as_deref()?, p.container_port)))
        .filter(|(n, _)| n.ends_with("-probe"))
        .collect()
}

/// The port number an HTTP probe reaches: its port, or the container port of that name.
pub(crate) fn probe_port(c: &k8s_openapi::api::core::v1::Container, port: &IntOrString) -> i32 {
    match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => {
            c.ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("no container port {name}"))
                .container_port
        }
    }
}

/// `cluster-dns --check -conf PATH`: its stdout, or the test fails with its stderr.
pub(crate) fn check_binary(path: &std::path::Path, what: &str) -> String {
    check_binary_with_env(path, what, &[])
}

/// [`check_binary`] with environment variables set (a Corefile's `{$NAME}`).
pub(crate) fn check_binary_with_env(path: &std::path::Path, what: &str, env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-dns"))
        .arg("--check")
        .arg("-conf")
        .arg(path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "--check refused {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn replicas_spread_over_zones_then_nodes() {
    let d: Deployment = docs()
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .map(typed)
        .unwrap();
    let spec = d.spec.unwrap();
    let pod_labels = spec.template.metadata.unwrap().labels.unwrap();
    let spread = spec.template.spec.unwrap().topology_spread_constraints.unwrap();
    let keys: Vec<&str> = spread.iter().map(|c| c.topology_key.as_str()).collect();
    assert_eq!(keys, ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]);
    for c in &spread {
        assert_eq!(c.max_skew, 1);
        // Soft: a single-zone cluster or too few nodes still gets every replica.
        assert_eq!(c.when_unsatisfiable, "ScheduleAnyway");
        // The constraint counts exactly this Deployment's pods.
        let sel = c.label_selector.as_ref().unwrap().match_labels.as_ref().unwrap();
        assert!(!sel.is_empty());
        for (k, v) in sel {
            assert_eq!(pod_labels.get(k), Some(v), "{k}");
        }
        assert_eq!(spec.selector.match_labels.as_ref(), Some(sel));
        assert_eq!(
            c.match_label_keys.as_deref(),
            Some(&["pod-template-hash".to_owned()][..])
        );
    }
}

#[test]
fn the_autoscaler_scales_the_cluster_dns_deployment_linearly() {
    let scaler = docs_of("autoscaler.yaml");
    let mut kinds: Vec<&str> = scaler.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Role",
            "RoleBinding",
            "ServiceAccount"
        ]
    );
    let find = |kind: &str| scaler.iter().find(|d| d["kind"] == kind).unwrap();
    let sa: ServiceAccount = typed(find("ServiceAccount"));
    let role: ClusterRole = typed(find("ClusterRole"));
    let binding: ClusterRoleBinding = typed(find("ClusterRoleBinding"));
    let ns_role: Role = typed(find("Role"));
    let ns_binding: RoleBinding = typed(find("RoleBinding"));
    let cm: ConfigMap = typed(find("ConfigMap"));
    let d: Deployment = typed(find("Deployment"));
    for ns in [
        &sa.metadata.namespace,
        &cm.metadata.namespace,
        &d.metadata.namespace,
    ] {
        assert_eq!(ns.as_deref(), Some("kube-system"));
    }

    // The linear parameters, in the ConfigMap and as the defaults on the command line.
    let linear: Value = serde_json::from_str(&cm.data.unwrap()["linear"]).unwrap();
    assert_eq!(linear["coresPerReplica"], 256);
    assert_eq!(linear["nodesPerReplica"], 16);
    assert_eq!(linear["preventSinglePointFailure"], true);
    let pod = d.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name, sa.metadata.name);
    let args = pod.containers[0].args.clone().unwrap();
    let arg = |flag: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{flag}=")))
            .unwrap_or_else(|| panic!("--{flag} in {args:?}"))
            .to_owned()
    };
    assert_eq!(arg("namespace"), "kube-system");
    assert_eq!(Some(arg("configmap")), cm.metadata.name);
    let defaults: Value = serde_json::from_str(&arg("default-params")).unwrap();
    assert_eq!(defaults["linear"], linear);

    // The target is the cluster-dns Deployment of cluster-dns.yaml, in the same namespace.
    let target = arg("target");
    let (kind, name) = target.split_once('/').unwrap();
    assert_eq!(kind, "Deployment");
    let dns = docs().into_iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(dns["metadata"]["name"], name);
    assert_eq!(dns["metadata"]["namespace"], "kube-system");

    // RBAC: cluster-wide only nodes list/watch; in kube-system only the scale of the target by
    // name, its own ConfigMap by name, and configmaps create (which cannot be named).
    assert_eq!(rules(role.rules.unwrap()), ["/nodes list,watch"]);
    assert_eq!(ns_role.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        rules(ns_role.rules.unwrap()),
        [
            "/configmaps create",
            "/configmaps get [cluster-dns-autoscaler]",
            "apps/deployments/scale get,update [cluster-dns]"
        ]
    );
    assert_eq!(binding.role_ref.name, role.metadata.name.unwrap());
    assert_eq!(ns_binding.role_ref.kind, "Role");
    assert_eq!(ns_binding.role_ref.name, ns_role.metadata.name.unwrap());
    for subject in [&binding.subjects.unwrap()[0], &ns_binding.subjects.unwrap()[0]] {
        assert_eq!(
            (Some(subject.name.clone()), subject.namespace.clone()),
            (sa.metadata.name.clone(), Some("kube-system".to_owned()))
        );
    }

    // The autoscaler's liveness probe: it serves /healthz on :8080.
    let live = pod.containers[0]
        .liveness_probe
        .as_ref()
        .unwrap()
        .http_get
        .as_ref()
        .unwrap();
    assert_eq!(
        (live.path.as_deref(), &live.port),
        (Some("/healthz"), &IntOrString::Int(8080))
    );
}

/// `group/resource verbs [names]` of each rule, sorted.
pub(crate) fn rules(rules: Vec<PolicyRule>) -> Vec<String> {
    let mut granted = Vec::new();
    for rule in rules {
        let mut verbs = rule.verbs.clone();
        verbs.sort();
        let names = rule
            .resource_names
            .map(|n| format!(" [{}]", n.join(",")))
            .unwrap_or_default();
        for group in rule.api_groups.unwrap() {
            for r in rule.resources.clone().unwrap() {
                granted.push(format!("{group}/{r} {}{names}", verbs.join(",")));
            }
        }
    }
    granted.sort();
    granted
}
