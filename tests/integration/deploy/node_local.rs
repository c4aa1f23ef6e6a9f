//! `deploy/node-local/`: the node-local manifests (node-cache compatible mode, and the two
//! PreferSameNode modes) deserialise into their k8s-openapi types with no unknown field, keep
//! node-cache's and kube-dns's contracts (names, labels, ports, flags, placeholders, probes,
//! resources, RBAC), and every Corefile in them passes `cluster-dns --check`: the node-cache
//! one after the placeholders are filled as Kubernetes' docs and node-cache fill them; and the
//! forward mode's Corefile, run in front of a central server fed by the fake API server,
//! answers cluster names through it.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::deploy::manifests::{check_binary_with_env, docs_of, probe_port, probe_ports, rules, typed};

const FILES: [&str; 4] = [
    "node-local/node-cache.yaml",
    "node-local/prefer-same-node.yaml",
    "node-local/prefer-same-node-forward.yaml",
    "node-local/prefer-same-node-fabric.yaml",
];

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn pod_of(ds: &DaemonSet) -> (BTreeMap<String, String>, PodSpec) {
    let spec = ds.spec.clone().unwrap();
    (
        spec.template.metadata.unwrap().labels.unwrap(),
        spec.template.spec.unwrap(),
    )
}

/// Whether `selector` (a Service's) selects pods labelled `labels`.
fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The central cluster-dns pods' labels, from deploy/cluster-dns.yaml.
fn central_pod_labels() -> BTreeMap<String, String> {
    let docs = docs_of("cluster-dns.yaml");
    let d: Deployment = typed(find(&docs, "Deployment", "cluster-dns"));
    d.spec.unwrap().template.metadata.unwrap().labels.unwrap()
}

/// Runs `cluster-dns --check` on `corefile` with `env` set: its stdout.
fn check_with_env(name: &str, corefile: &str, env: &[(&str, &str)]) -> String {
    let path = crate::support::temp_dir(name).join("Corefile");
    std::fs::write(&path, corefile).unwrap();
    check_binary_with_env(&path, name, env)
}

#[test]
fn node_local_manifests_are_valid_kubernetes_objects() {
    for file in FILES {
        let mut kinds = Vec::new();
        for doc in docs_of(file) {
            // The kinds of deploy/chart (chart::validate's round trip), and the DaemonSet.
            let kind = if doc["kind"] == "DaemonSet" {
                drop(typed::<DaemonSet>(&doc));
                "DaemonSet".to_owned()
            } else {
                crate::deploy::chart::validate(&doc)
            };
            assert_eq!(
                doc["metadata"]["namespace"].as_str().unwrap_or("kube-system"),
                "kube-system"
            );
            kinds.push(kind);
        }
        kinds.sort();
        let want: &[&str] = match file {
            "node-local/node-cache.yaml" => {
                &["ConfigMap", "DaemonSet", "Service", "Service", "ServiceAccount"]
            }
            "node-local/prefer-same-node.yaml" => &[
                "ClusterRole",
                "ClusterRoleBinding",
                "ConfigMap",
                "DaemonSet",
                "Service",
                "ServiceAccount",
            ],
            _ => &["ConfigMap", "DaemonSet", "Service", "Service", "ServiceAccount"],
        };
        assert_eq!(kinds, want, "{file}");
    }
}

/// The image of every DaemonSet is the one deploy/cluster-dns.yaml runs.
#[test]
fn every_daemonset_runs_the_cluster_dns_image_with_probes_and_resources() {
    let central: Deployment = typed(find(&docs_of("cluster-dns.yaml"), "Deployment", "cluster-dns"));
    let image = central.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    for file in FILES {
        let docs = docs_of(file);
        let ds: DaemonSet = typed(docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap());
        let (_, pod) = pod_of(&ds);
        assert_eq!(
            pod.priority_class_name.as_deref(),
            Some("system-node-critical"),
            "{file}"
        );
        assert_eq!(pod.dns_policy.as_deref(), Some("Default"), "{file}");
        // Every node, whatever its taints.
        let tolerations = pod.tolerations.clone().unwrap();
        for effect in ["NoExecute", "NoSchedule"] {
            assert!(
                tolerations.iter().any(|t| t.effect.as_deref() == Some(effect)
                    && t.operator.as_deref() == Some("Exists")
                    && t.key.is_none()),
                "{file}: {effect}"
            );
        }
        let c = &pod.containers[0];
        // node-cache mode runs the same binary with the programs it sets the node up with.
        let want = match file {
            "node-local/node-cache.yaml" => format!("{image}-node-local"),
            _ => image.clone(),
        };
        assert_eq!(c.image.as_deref(), Some(want.as_str()), "{file}");
        let live = c.liveness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
        assert_eq!(
            (live.path.as_deref(), probe_port(c, &live.port)),
            (Some("/health"), 8080),
            "{file}"
        );
        // The chart's agents name the probe ports as kubeadm does, as the central pods do.
        if file != "node-local/node-cache.yaml" {
            let ready = c.readiness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
            assert_eq!(
                live.port,
                IntOrString::String("liveness-probe".to_owned()),
                "{file}"
            );
            assert_eq!(
                ready.port,
                IntOrString::String("readiness-probe".to_owned()),
                "{file}"
            );
            assert_eq!(
                probe_ports(c),
                [("liveness-probe", 8080), ("readiness-probe", 8181)],
                "{file}"
            );
        }
        let res = c.resources.as_ref().unwrap();
        for key in ["cpu", "memory"] {
            assert!(res.requests.as_ref().unwrap().contains_key(key), "{file}: {key}");
        }
        assert!(res.limits.as_ref().unwrap().contains_key("memory"), "{file}");
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{file}");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{file}");
        // The Corefile's ConfigMap is the one in the file, mounted where -conf (or, for
        // node-cache, -basecorefile) reads it.
        let cm_name = pod
            .volumes
            .as_ref()
            .unwrap()
            .iter()
            .find_map(|v| v.config_map.as_ref().filter(|cm| cm.optional != Some(true)))
            .unwrap()
            .name
            .clone();
        let cm: ConfigMap = typed(find(&docs, "ConfigMap", &cm_name));
        assert!(cm.data.unwrap().contains_key("Corefile"), "{file}");
    }
}

#[test]
fn node_cache_mode_keeps_node_caches_objects_flags_and_placeholders() {
    let docs = docs_of("node-local/node-cache.yaml");
    let ds: DaemonSet = typed(find(&docs, "DaemonSet", "node-local-dns"));
    let (labels, pod) = pod_of(&ds);
    assert_eq!(labels.get("k8s-app").map(String::as_str), Some("node-local-dns"));
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.service_account_name.as_deref(), Some("node-local-dns"));
    let c = &pod.containers[0];
    let caps = c
        .security_context
        .as_ref()
        .unwrap()
        .capabilities
        .as_ref()
        .unwrap();
    assert_eq!(caps.add.as_deref(), Some(&["NET_ADMIN".to_owned()][..]));
    let args = c.args.clone().unwrap();
    let flag = |name: &str| {
        let i = args
            .iter()
            .position(|a| a == name)
            .unwrap_or_else(|| panic!("{name} in {args:?}"));
        args[i + 1].clone()
    };
    assert_eq!(flag("-localip"), "__PILLAR__LOCAL__DNS__,__PILLAR__DNS__SERVER__");
    assert_eq!(flag("-upstreamsvc"), "kube-dns-upstream");
    // The base Corefile is the ConfigMap's, mounted as node-cache's Corefile.base; the
    // rendered one goes to a writable emptyDir (the root filesystem is read-only).
    let mounts = c.volume_mounts.clone().unwrap();
    let mount_of = |volume: &str| {
        mounts
            .iter()
            .find(|m| m.name == volume)
            .unwrap()
            .mount_path
            .clone()
    };
    assert_eq!(
        flag("-basecorefile"),
        format!("{}/Corefile.base", mount_of("config-volume"))
    );
    assert!(flag("-conf").starts_with(&format!("{}/", mount_of("rendered"))));
    assert_eq!(mount_of("kube-dns-config"), "/etc/kube-dns");
    assert_eq!(mount_of("xtables-lock"), "/run/xtables.lock");
    let live = c.liveness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
    assert_eq!(live.host.as_deref(), Some("__PILLAR__LOCAL__DNS__"));
    // Upgrades start the new pod beside the old one: no hostPort (every containerPort is one
    // under hostNetwork) may keep it off the node, and both see the instance folder.
    assert!(c.ports.as_ref().is_none_or(Vec::is_empty), "no ports declared");
    assert_eq!(mount_of("instances"), "/run/cluster-dns-nodelocal");
    let rolling = ds
        .spec
        .as_ref()
        .unwrap()
        .update_strategy
        .clone()
        .unwrap()
        .rolling_update
        .unwrap();
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(0)));
    assert!(rolling.max_surge.is_some());

    // kube-dns-upstream: the central pods (k8s-app: kube-dns), not the node agents.
    let up: Service = typed(find(&docs, "Service", "kube-dns-upstream"));
    let sel = up.spec.unwrap().selector.unwrap();
    assert!(selects(&sel, &central_pod_labels()));
    assert!(!selects(&sel, &labels));
    // The headless metrics Service selects the agents.
    let metrics: Service = typed(find(&docs, "Service", "node-local-dns"));
    let spec = metrics.spec.unwrap();
    assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
    assert!(selects(&spec.selector.unwrap(), &labels));
}

/// The node-cache Corefile after Kubernetes' documented sed (iptables mode) and what the
/// process fills itself (__PILLAR__CLUSTER__DNS__ from KUBE_DNS_UPSTREAM_SERVICE_HOST,
/// __PILLAR__UPSTREAM__SERVERS__ from resolv.conf): no placeholder is left and it checks.
#[test]
fn the_node_cache_corefile_checks_once_its_placeholders_are_filled() {
    let docs = docs_of("node-local/node-cache.yaml");
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "node-local-dns"));
    let base = cm.data.unwrap()["Corefile"].clone();
    for placeholder in [
        "__PILLAR__DNS__DOMAIN__",
        "__PILLAR__LOCAL__DNS__",
        "__PILLAR__DNS__SERVER__",
        "__PILLAR__CLUSTER__DNS__",
        "__PILLAR__UPSTREAM__SERVERS__",
    ] {
        assert!(base.contains(placeholder), "{placeholder}");
    }
    // sed -i "s/__PILLAR__LOCAL__DNS__/$localdns/g; s/__PILLAR__DNS__DOMAIN__/$domain/g;
    //         s/__PILLAR__DNS__SERVER__/$kubedns/g" nodelocaldns.yaml
    let deployed = base
        .replace("__PILLAR__LOCAL__DNS__", "169.254.20.10")
        .replace("__PILLAR__DNS__DOMAIN__", "cluster.local")
        .replace("__PILLAR__DNS__SERVER__", "10.96.0.10");
    let rendered = deployed
        .replace("__PILLAR__CLUSTER__DNS__", "10.96.0.11")
        .replace("__PILLAR__UPSTREAM__SERVERS__", "/etc/resolv.conf");
    assert!(!rendered.contains("__PILLAR__"), "{rendered}");
    assert!(rendered.contains("bind 169.254.20.10 10.96.0.10"));
    assert!(rendered.contains("health 169.254.20.10:8080"));
    let stdout = check_with_env("node-cache-corefile", &rendered, &[]);
    assert!(stdout.contains("OK (4 server block(s))"), "{stdout}");
}

/// Both PreferSameNode files: the kube-dns Service is deploy/cluster-dns.yaml's with
/// `trafficDistribution: PreferSameNode`, and the agents are its endpoints.
#[test]
fn prefer_same_node_modes_route_kube_dns_to_the_nodes_own_agent() {
    let central: Service = typed(find(&docs_of("cluster-dns.yaml"), "Service", "kube-dns"));
    let central_spec = central.spec.unwrap();
    for file in &FILES[1..] {
        let docs = docs_of(file);
        let s: Service = typed(find(&docs, "Service", "kube-dns"));
        assert_eq!(s.metadata.labels, central.metadata.labels, "{file}");
        let mut spec = s.spec.unwrap();
        assert_eq!(
            spec.traffic_distribution.as_deref(),
            Some("PreferSameNode"),
            "{file}"
        );
        spec.traffic_distribution = None;
        assert_eq!(
            spec, central_spec,
            "{file}: the rest is deploy/cluster-dns.yaml's"
        );

        let ds: DaemonSet = typed(find(&docs, "DaemonSet", "cluster-dns-node"));
        let (labels, pod) = pod_of(&ds);
        assert!(
            selects(central_spec.selector.as_ref().unwrap(), &labels),
            "{file}"
        );
        // No node networking at all: no host network, no NET_ADMIN.
        assert_eq!(pod.host_network, None, "{file}");
        let c = &pod.containers[0];
        let sc = c.security_context.as_ref().unwrap();
        let caps = sc.capabilities.as_ref().unwrap();
        assert_eq!(
            caps.add.as_deref(),
            Some(&["NET_BIND_SERVICE".to_owned()][..]),
            "{file}"
        );
        assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]), "{file}");
        assert_eq!(
            pod.security_context.unwrap().run_as_non_root,
            Some(true),
            "{file}"
        );
        let ready = c.readiness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
        assert_eq!(ready.path.as_deref(), Some("/ready"), "{file}");
        // The new pod on a node is ready before the old one goes: never a node without one.
        let ru = ds.spec.unwrap().update_strategy.unwrap().rolling_update.unwrap();
        assert_eq!(ru.max_unavailable, Some(IntOrString::Int(0)), "{file}");
        assert!(ru.max_surge.is_some(), "{file}");
        assert_eq!(
            c.args.as_deref().unwrap()[..2],
            ["-conf", "/etc/cluster-dns/Corefile"]
        );
    }
}

#[test]
fn prefer_same_node_watch_mode_runs_kubeadms_corefile_with_read_only_rbac() {
    let docs = docs_of("node-local/prefer-same-node.yaml");
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-node"));
    let corefile = cm.data.unwrap()["Corefile"].clone();
    assert_eq!(corefile, include_str!("../../../config/Corefile"));
    let stdout = check_with_env("prefer-same-node-watch", &corefile, &[]);
    assert!(stdout.contains("OK (1 server block(s))"), "{stdout}");

    let role: ClusterRole = typed(find(&docs, "ClusterRole", "system:cluster-dns-node"));
    assert_eq!(
        rules(role.rules.unwrap()),
        [
            "/namespaces list,watch",
            "/pods list,watch",
            "/services list,watch",
            "discovery.k8s.io/endpointslices list,watch"
        ]
    );
    let binding: ClusterRoleBinding = typed(find(&docs, "ClusterRoleBinding", "system:cluster-dns-node"));
    let ds: DaemonSet = typed(find(&docs, "DaemonSet", "cluster-dns-node"));
    let (_, pod) = pod_of(&ds);
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(Some(&subject.name), pod.service_account_name.as_ref());
    assert_eq!(subject.namespace.as_deref(), Some("kube-system"));
    assert_eq!(pod.automount_service_account_token, Some(true));
}

#[test]
fn prefer_same_node_forward_mode_only_forwards_to_the_central_pods() {
    let docs = docs_of("node-local/prefer-same-node-forward.yaml");
    // No API access: no role, no token.
    assert!(docs.iter().all(|d| !d["kind"].as_str().unwrap().contains("Role")));
    let ds: DaemonSet = typed(find(&docs, "DaemonSet", "cluster-dns-node"));
    let (labels, pod) = pod_of(&ds);
    assert_eq!(pod.automount_service_account_token, Some(false));
    let sa: ServiceAccount = typed(find(&docs, "ServiceAccount", "cluster-dns-node"));
    assert_eq!(sa.automount_service_account_token, Some(false));

    // kube-dns-upstream selects the central Deployment's pods and never an agent (a loop).
    let up: Service = typed(find(&docs, "Service", "kube-dns-upstream"));
    let sel = up.spec.unwrap().selector.unwrap();
    assert!(selects(&sel, &central_pod_labels()));
    assert!(!selects(&sel, &labels));
    // It comes before the DaemonSet, so the agents get KUBE_DNS_UPSTREAM_SERVICE_HOST.
    let at = |kind: &str, name: &str| {
        docs.iter()
            .position(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap()
    };
    assert!(at("Service", "kube-dns-upstream") < at("DaemonSet", "cluster-dns-node"));

    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-node-forward"));
    let corefile = cm.data.unwrap()["Corefile"].clone();
    assert!(!corefile.contains("kubernetes"), "no API watch: {corefile}");
    assert!(corefile.contains("forward . {$KUBE_DNS_UPSTREAM_SERVICE_HOST}"));
    let stdout = check_with_env(
        "prefer-same-node-forward",
        &corefile,
        &[("KUBE_DNS_UPSTREAM_SERVICE_HOST", "10.96.0.11")],
    );
    assert!(stdout.contains("OK (2 server block(s))"), "{stdout}");
}

/// The fabric mode: no API access, the agents' Corefile follows the cluster zone from the
/// central pods through kube-dns-upstream with a snapshot on a writable volume, and the
/// central Corefile in the file is the default one with the transfer block the agents need.
#[test]
fn prefer_same_node_fabric_mode_follows_the_cluster_zone_from_the_central_pods() {
    let docs = docs_of("node-local/prefer-same-node-fabric.yaml");
    assert!(docs.iter().all(|d| !d["kind"].as_str().unwrap().contains("Role")));
    let ds: DaemonSet = typed(find(&docs, "DaemonSet", "cluster-dns-node"));
    let (labels, pod) = pod_of(&ds);
    assert_eq!(pod.automount_service_account_token, Some(false));
    let up: Service = typed(find(&docs, "Service", "kube-dns-upstream"));
    let sel = up.spec.unwrap().selector.unwrap();
    assert!(selects(&sel, &central_pod_labels()));
    assert!(!selects(&sel, &labels));
    // The snapshot folder is a writable volume (the root filesystem is read-only).
    let mount = pod.containers[0]
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.mount_path == "/var/lib/cluster-dns")
        .expect("a volume at the snapshot folder");
    assert_ne!(mount.read_only, Some(true));
    let volume = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == mount.name)
        .unwrap();
    assert!(volume.empty_dir.is_some(), "the default is an emptyDir");

    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-node-fabric"));
    let corefile = cm.data.unwrap()["Corefile"].clone();
    assert!(!corefile.contains("kubernetes"), "no API watch: {corefile}");
    assert!(corefile.contains("transfer from {$KUBE_DNS_UPSTREAM_SERVICE_HOST}:53"));
    assert!(corefile.contains("snapshot /var/lib/cluster-dns"));
    let stdout = check_with_env(
        "prefer-same-node-fabric",
        &corefile,
        &[("KUBE_DNS_UPSTREAM_SERVICE_HOST", "10.96.0.11")],
    );
    assert!(stdout.contains("OK (3 server block(s))"), "{stdout}");

    // The central Corefile the chart writes in this mode: deploy/cluster-dns-corefile.yaml's
    // plus the transfer block (the file leaves the ConfigMap out: applying it would reset an
    // edited Corefile; the README gives the block to add).
    let central = fabric_central_corefile();
    let default: ConfigMap = typed(find(
        &docs_of("cluster-dns-corefile.yaml"),
        "ConfigMap",
        "cluster-dns",
    ));
    let default = default.data.unwrap()["Corefile"].clone();
    let block = fabric_transfer_block(&central);
    assert_eq!(
        block,
        "    transfer cluster.local {\n       to *\n       notify transferred\n    }\n"
    );
    assert_eq!(
        central.replacen(&block, "", 1),
        default,
        "the rest is the default Corefile"
    );
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/node-local/README.md"))
            .unwrap();
    assert!(
        readme.contains(&block),
        "deploy/node-local/README.md gives the block to add:\n{block}"
    );
    let stdout = check_with_env("prefer-same-node-fabric-central", &central, &[]);
    assert!(stdout.contains("OK (1 server block(s))"), "{stdout}");
}

/// The central Corefile the chart writes with `nodeLocal.mode=fabric`.
fn fabric_central_corefile() -> String {
    let docs = crate::deploy::chart::template(&["--set", "nodeLocal.enabled=true,nodeLocal.mode=fabric"]);
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns"));
    cm.data.unwrap()["Corefile"].clone()
}

/// The `transfer` block of `corefile` (its comment lines left out), as the README gives it.
fn fabric_transfer_block(corefile: &str) -> String {
    let start = corefile
        .find("    transfer cluster.local {")
        .expect("a transfer block");
    let end = start + corefile[start..].find("    }\n").unwrap() + 6;
    corefile[start..end].to_owned()
}

/// Every file in deploy/node-local/ is one of those the tests above cover.
#[test]
fn every_node_local_manifest_is_covered() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/node-local");
    let mut yaml: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .map(|n| format!("node-local/{n}"))
        .collect();
    yaml.sort();
    let mut covered = FILES.to_vec();
    covered.sort_unstable();
    assert_eq!(yaml, covered);
}

/// The forward mode's Corefile (the cluster block of prefer-same-node-forward.yaml, on
/// loopback) in front of a central server running kubeadm's Corefile against the fake API
/// server: cluster names come back through the agent over UDP (the agent asks over TCP), a
/// Service created after the agent started is answered, and a missing name is NXDOMAIN.
#[tokio::test]
async fn the_forward_agent_answers_cluster_names_from_the_central_server() {
    use fake_apiserver::FakeApiServer;
    use hickory_proto::op::ResponseCode;
    use hickory_proto::rr::RecordType;

    use crate::support;

    let dir = support::temp_dir("node-local-forward");
    let fake = FakeApiServer::start().await.unwrap();
    fake.load(crate::support::fixture()).unwrap();
    let central_dir = dir.join("central");
    std::fs::create_dir_all(&central_dir).unwrap();
    let upstream: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let central = support::start(
        &crate::deploy::dropin::kubeadm_corefile_for_test(&fake.url(), upstream),
        &central_dir,
    )
    .await;
    let central_addr = central.dns_addrs()[0];

    let docs = docs_of("node-local/prefer-same-node-forward.yaml");
    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-node-forward"));
    let corefile = cm.data.unwrap()["Corefile"].clone();
    let block_end = corefile.find("\n}\n").unwrap() + 3;
    let mut agent = corefile[..block_end].to_owned();
    for (from, to) in [
        (
            "cluster.local in-addr.arpa ip6.arpa {\n",
            "cluster.local:0 in-addr.arpa:0 ip6.arpa:0 {\n    bind 127.0.0.1\n".to_owned(),
        ),
        ("    health {\n", "    health 127.0.0.1:0 {\n".to_owned()),
        ("    ready\n", "    ready 127.0.0.1:0\n".to_owned()),
        (
            "    prometheus :9153\n",
            "    prometheus 127.0.0.1:0\n".to_owned(),
        ),
        ("{$KUBE_DNS_UPSTREAM_SERVICE_HOST}", central_addr.to_string()),
    ] {
        assert!(
            agent.contains(from),
            "the forward Corefile no longer has {from:?}"
        );
        agent = agent.replacen(from, &to, 1);
    }
    let agent_dir = dir.join("agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    let node = support::start(&agent, &agent_dir).await;
    let addrs = node.dns_addrs();
    assert_eq!(addrs.len(), 1, "one listener for the three zones: {addrs:?}");
    let addr = addrs[0];

    // The central server answers once its watches have synced; ask through the agent.
    assert!(
        answers(addr, "kubernetes.default.svc.cluster.local.", "10.96.0.1").await,
        "the agent never answered kubernetes.default through the central server"
    );
    let (m, _) = support::udp(
        addr,
        &support::query("nope.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);

    // A Service created now (never asked before, so not in the agent's cache) is answered.
    fake.create(fake_apiserver::synthetic::service(
        "default",
        "late",
        Some(std::net::Ipv4Addr::new(10, 96, 7, 7)),
    ))
    .unwrap();
    let late = answers(addr, "late.default.svc.cluster.local.", "10.96.7.7").await;
    assert!(late, "the new Service never came through the agent");
}

/// The fabric mode's Corefiles, on loopback: the central server (kubeadm's Corefile against
/// the fake API server, with the transfer block the chart adds to the central
/// Corefile) and an agent running prefer-same-node-fabric.yaml's cluster block. The agent answers cluster names
/// from its copy, a Service created later reaches it by NOTIFY (the agent is in no `to`
/// line), and its snapshot is written. (kubeadm's Corefile has `loadbalance`, which once
/// reordered the transfer: the first ExternalName's CNAME came before the SOA, and the agent
/// refused every copy.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fabric_agent_answers_cluster_names_from_its_copy() {
    use fake_apiserver::FakeApiServer;

    use crate::support;

    let dir = support::temp_dir("node-local-fabric");
    let fake = FakeApiServer::start().await.unwrap();
    fake.load(crate::support::fixture()).unwrap();
    let docs = docs_of("node-local/prefer-same-node-fabric.yaml");
    let agent_port = crate::support::upstream::free_port();
    let transfer = fabric_transfer_block(&fabric_central_corefile())
        .replace("notify transferred", &format!("notify transferred {agent_port}"));
    let upstream: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let central_corefile = crate::deploy::dropin::kubeadm_corefile_for_test(&fake.url(), upstream).replacen(
        "    kubernetes cluster.local",
        &format!("{transfer}    kubernetes cluster.local"),
        1,
    );
    let central_dir = dir.join("central");
    std::fs::create_dir_all(&central_dir).unwrap();
    let central = support::start(&central_corefile, &central_dir).await;
    let central_addr = central.dns_addrs()[0];
    // (The agent's first tries back off while the central zone syncs; start it on a synced one.)
    assert!(
        answers(central_addr, "kubernetes.default.svc.cluster.local.", "10.96.0.1").await,
        "the central server never synced"
    );

    let cm: ConfigMap = typed(find(&docs, "ConfigMap", "cluster-dns-node-fabric"));
    let corefile = cm.data.unwrap()["Corefile"].clone();
    let block_end = corefile.find("\n}\n").unwrap() + 3;
    let mut agent = corefile[..block_end].to_owned();
    let snapshots = dir.join("snapshots");
    for (from, to) in [
        (
            "cluster.local {\n".to_owned(),
            format!("cluster.local:{agent_port} {{\n    bind 127.0.0.1\n"),
        ),
        (
            "    health {\n".to_owned(),
            "    health 127.0.0.1:0 {\n".to_owned(),
        ),
        ("    ready\n".to_owned(), "    ready 127.0.0.1:0\n".to_owned()),
        (
            "    prometheus :9153\n".to_owned(),
            "    prometheus 127.0.0.1:0\n".to_owned(),
        ),
        (
            "{$KUBE_DNS_UPSTREAM_SERVICE_HOST}:53".to_owned(),
            central_addr.to_string(),
        ),
        (
            "snapshot /var/lib/cluster-dns".to_owned(),
            format!("snapshot {}", snapshots.display()),
        ),
    ] {
        assert!(
            agent.contains(&from),
            "the fabric Corefile no longer has {from:?}"
        );
        agent = agent.replacen(&from, &to, 1);
    }
    let agent_dir = dir.join("agent");
    std::fs::create_dir_all(&agent_dir).unwrap();
    let node = support::start(&agent, &agent_dir).await;
    let addr = node.dns_addrs()[0];
    assert!(
        answers(addr, "kubernetes.default.svc.cluster.local.", "10.96.0.1").await,
        "the agent never answered kubernetes.default from its copy"
    );
    fake.create(fake_apiserver::synthetic::service(
        "default",
        "late",
        Some(std::net::Ipv4Addr::new(10, 96, 7, 8)),
    ))
    .unwrap();
    let late = answers(addr, "late.default.svc.cluster.local.", "10.96.7.8").await;
    assert!(late, "the new Service never reached the agent");
    assert!(
        snapshots.join("cluster.local.zone-snapshot").exists(),
        "no snapshot written"
    );
    node.stop().await.unwrap();
    central.stop().await.unwrap();
}

/// Whether `addr` answers `name` A with exactly `ip`, asked every 50 ms up to 200 times.
async fn answers(addr: std::net::SocketAddr, name: &str, ip: &str) -> bool {
    let want = [format!("{name} A {ip}")];
    for _ in 0..200 {
        let query = crate::support::query(name, hickory_proto::rr::RecordType::A);
        let (m, _) = crate::support::udp(addr, &query).await;
        if m.answers.iter().map(crate::support::show).collect::<Vec<_>>() == want {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// The PreferSameNode files are the chart's (`nodeLocal.enabled`, `nodeLocal.mode`), so they
/// follow its values: at a non-default cluster IP, domain and image nothing of the defaults is
/// left, and each Corefile checks.
#[test]
fn prefer_same_node_modes_follow_the_charts_cluster_ip_domain_and_image() {
    for mode in ["watch", "forward", "fabric"] {
        let set = format!(
            "nodeLocal.enabled=true,nodeLocal.mode={mode},clusterIP=10.100.0.10,\
             clusterDomain=corp.internal,image.repository=registry.example.com/dns,image.tag=9.9.9"
        );
        let text = crate::deploy::chart::render_py(&["template", "--set", &set])
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        for default in ["10.96.0.10", "cluster.local", "cluster-dns:0.1.0"] {
            assert!(!text.contains(default), "{mode}: {default} is left:\n{text}");
        }
        let docs = crate::deploy::chart::template(&["--set", &set]);
        let ds: DaemonSet = typed(find(&docs, "DaemonSet", "cluster-dns-node"));
        let (_, pod) = pod_of(&ds);
        assert_eq!(
            pod.containers[0].image.as_deref(),
            Some("registry.example.com/dns:9.9.9"),
            "{mode}"
        );
        let s: Service = typed(find(&docs, "Service", "kube-dns"));
        let spec = s.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.100.0.10"), "{mode}");
        assert_eq!(
            spec.traffic_distribution.as_deref(),
            Some("PreferSameNode"),
            "{mode}"
        );
        let cm_name = pod.volumes.unwrap()[0].config_map.clone().unwrap().name;
        let cm: ConfigMap = typed(find(&docs, "ConfigMap", &cm_name));
        let corefile = cm.data.unwrap()["Corefile"].clone();
        assert!(corefile.contains("corp.internal"), "{mode}: {corefile}");
        let stdout = check_with_env(
            &format!("prefer-same-node-{mode}-values"),
            &corefile,
            &[("KUBE_DNS_UPSTREAM_SERVICE_HOST", "10.100.0.11")],
        );
        assert!(stdout.contains("OK ("), "{stdout}");
    }
}
