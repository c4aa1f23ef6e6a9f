//! The Corefile node-cache serves: the base Corefile (`-basecorefile`, from the node-local-dns
//! ConfigMap) with its `__PILLAR__` variables filled in, and one server block per stub domain
//! of the kube-dns ConfigMap (`-kubednscm`), as node-cache writes it.
//!
//! - `__PILLAR__LOCAL__DNS__`: the `-localip` addresses, space-separated (for `bind`);
//!   `__PILLAR__DNS__SERVER__` left over after that becomes empty (its address is among them).
//! - `__PILLAR__CLUSTER__DNS__`: the `-upstreamsvc` Service's cluster IP, from the
//!   `<NAME>_SERVICE_HOST` variable the kubelet sets in every pod (`kube-dns-upstream` reads
//!   `KUBE_DNS_UPSTREAM_SERVICE_HOST`).
//! - `__PILLAR__UPSTREAM__SERVERS__`: the ConfigMap's `upstreamNameservers` (then over UDP: the
//!   base's `force_tcp` block is rewritten), else `/etc/resolv.conf` (the node's servers; the
//!   DaemonSet uses `dnsPolicy: Default`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folder node-cache reads the kube-dns ConfigMap from when `-kubednscm` is not given.
pub const DEFAULT_KUBEDNS_CM: &str = "/etc/kube-dns";

const LOCAL_DNS: &str = "__PILLAR__LOCAL__DNS__";
const DNS_SERVER: &str = "__PILLAR__DNS__SERVER__";
const CLUSTER_DNS: &str = "__PILLAR__CLUSTER__DNS__";
const UPSTREAM_SERVERS: &str = "__PILLAR__UPSTREAM__SERVERS__";
/// The base's forward to the upstream servers over TCP, as node-cache's template spells it.
const UPSTREAM_TCP_BLOCK: &str =
    "\n    forward . __PILLAR__UPSTREAM__SERVERS__ {\n            force_tcp\n    }\n";
/// A stub domain's cache TTL (node-cache's).
const STUB_TTL: u32 = 30;

/// Why the Corefile could not be rendered (counted as `errortype="configmap"`).
#[derive(Debug, thiserror::Error)]
pub enum PillarError {
    #[error("cannot read the base Corefile {path}: {source}")]
    Base { path: PathBuf, source: std::io::Error },
    #[error(
        "the base Corefile uses __PILLAR__CLUSTER__DNS__ but {var} is not set (the cluster IP of \
         the Service named by -upstreamsvc '{svc}', which the kubelet puts in every pod's environment)"
    )]
    ClusterDns { var: String, svc: String },
    #[error("{var}='{value}' is not an IP address")]
    BadClusterDns { var: String, value: String },
    #[error("kube-dns ConfigMap {path}: {error}")]
    ConfigMap { path: PathBuf, error: String },
}

/// The kube-dns ConfigMap's keys node-cache reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KubeDnsConfig {
    /// `stubDomains`: domain → servers.
    pub stub_domains: BTreeMap<String, Vec<String>>,
    /// `upstreamNameservers`.
    pub upstream_nameservers: Vec<String>,
}

/// The environment variable holding Service `svc`'s cluster IP.
pub fn service_env(svc: &str) -> String {
    format!("{}_SERVICE_HOST", svc.replace('-', "_").to_uppercase())
}

/// Reads the ConfigMap's folder (a missing key is empty; a key that is not JSON of the right
/// shape is an error).
pub fn read_kubedns_cm(dir: &Path) -> Result<KubeDnsConfig, PillarError> {
    let mut out = KubeDnsConfig::default();
    let bad = |error: String| PillarError::ConfigMap {
        path: dir.to_owned(),
        error,
    };
    let read = |key: &str| -> Result<Option<String>, PillarError> {
        match std::fs::read_to_string(dir.join(key)) {
            Ok(s) if s.trim().is_empty() => Ok(None),
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(bad(format!("{key}: {e}"))),
        }
    };
    if let Some(s) = read("stubDomains")? {
        out.stub_domains = serde_json::from_str(&s)
            .map_err(|e| bad(format!("stubDomains is not a JSON map of lists: {e}")))?;
    }
    if let Some(s) = read("upstreamNameservers")? {
        out.upstream_nameservers = serde_json::from_str(&s)
            .map_err(|e| bad(format!("upstreamNameservers is not a JSON list: {e}")))?;
    }
    let word_ok = |w: &str| !w.is_empty() && !w.contains(|c: char| c.is_whitespace() || "{}#;\"".contains(c));
    for (domain, servers) in &out.stub_domains {
        if !word_ok(domain) || servers.is_empty() || !servers.iter().all(|s| word_ok(s)) {
            return Err(bad(format!(
                "stub domain '{domain}' or its servers are not valid"
            )));
        }
    }
    if !out.upstream_nameservers.iter().all(|s| word_ok(s)) {
        return Err(bad("upstreamNameservers holds an invalid entry".into()));
    }
    Ok(out)
}

/// Renders `base` (the base Corefile's text) for `local_ips` on `port`, with the cluster DNS
/// address `cluster_dns` (None: not known) and the ConfigMap's `cm`.
pub fn render(
    base: &str,
    local_ips: &str,
    port: u16,
    cluster_dns: Option<&str>,
    cm: &KubeDnsConfig,
) -> Result<String, (String, String)> {
    let mut text = base.to_owned();
    if cm.upstream_nameservers.is_empty() {
        text = text.replace(UPSTREAM_SERVERS, "/etc/resolv.conf");
    } else {
        let servers = cm.upstream_nameservers.join(" ");
        // Custom upstreams are asked over UDP, as node-cache does.
        let udp = format!("\n    forward . {servers}\n");
        text = text.replace(UPSTREAM_TCP_BLOCK, &udp);
        text = text.replace(UPSTREAM_SERVERS, &servers);
    }
    if text.contains(CLUSTER_DNS) {
        match cluster_dns {
            Some(ip) => text = text.replace(CLUSTER_DNS, ip),
            None => return Err((CLUSTER_DNS.to_owned(), String::new())),
        }
    }
    let ips = local_ips.replace(',', " ");
    text = text.replace(LOCAL_DNS, &ips).replace(DNS_SERVER, "");
    for (domain, servers) in &cm.stub_domains {
        text.push_str(&format!(
            "\n{domain}:{port} {{\n    errors\n    cache {STUB_TTL}\n    bind {ips}\n    forward . {}\n}}\n",
            servers.join(" ")
        ));
    }
    Ok(text)
}

/// Renders the Corefile from the files and environment node-cache reads.
pub fn render_files(
    base_corefile: &Path,
    kubedns_cm: Option<&Path>,
    local_ips: &str,
    port: u16,
    upstream_svc: &str,
) -> Result<String, PillarError> {
    let base = std::fs::read_to_string(base_corefile).map_err(|source| PillarError::Base {
        path: base_corefile.to_owned(),
        source,
    })?;
    let cm = match kubedns_cm {
        Some(dir) => read_kubedns_cm(dir)?,
        None => KubeDnsConfig::default(),
    };
    let var = service_env(upstream_svc);
    let cluster_dns = match std::env::var(&var) {
        Ok(v) if v.trim().parse::<std::net::IpAddr>().is_ok() => Some(v.trim().to_owned()),
        Ok(v) if !v.is_empty() => {
            return Err(PillarError::BadClusterDns { var, value: v });
        }
        _ => None,
    };
    render(&base, local_ips, port, cluster_dns.as_deref(), &cm).map_err(|_| PillarError::ClusterDns {
        var,
        svc: upstream_svc.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kubernetes' nodelocaldns.yaml Corefile, abridged to two blocks.
    const BASE: &str = "cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health __PILLAR__LOCAL__DNS__:8080
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__ {
            force_tcp
    }
    prometheus :9253
    }
";

    #[test]
    fn pillars_are_filled_in() {
        let out = render(
            BASE,
            "169.254.20.10,10.96.0.10",
            53,
            Some("10.96.0.20"),
            &KubeDnsConfig::default(),
        )
        .unwrap();
        assert!(!out.contains("__PILLAR__"), "{out}");
        assert!(out.contains("bind 169.254.20.10 10.96.0.10 \n"), "{out}");
        assert!(out.contains("forward . 10.96.0.20 {"), "{out}");
        assert!(
            out.contains("forward . /etc/resolv.conf {\n            force_tcp"),
            "{out}"
        );
    }

    #[test]
    fn configmap_upstreams_go_over_udp_and_stub_domains_get_blocks() {
        let dir = std::env::temp_dir().join(format!("pillar-cm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("stubDomains"),
            r#"{"acme.local": ["1.2.3.4", "1.2.3.5:5353"]}"#,
        )
        .unwrap();
        std::fs::write(dir.join("upstreamNameservers"), r#"["8.8.8.8"]"#).unwrap();
        let cm = read_kubedns_cm(&dir).unwrap();
        let out = render(BASE, "169.254.20.10", 53, Some("10.96.0.20"), &cm).unwrap();
        assert!(out.contains("\n    forward . 8.8.8.8\n"), "{out}");
        assert!(!out.contains("forward . 8.8.8.8 {"), "{out}");
        assert!(
            out.contains("acme.local:53 {\n    errors\n    cache 30\n    bind 169.254.20.10\n    forward . 1.2.3.4 1.2.3.5:5353\n}"),
            "{out}"
        );
        std::fs::write(dir.join("stubDomains"), "{not json").unwrap();
        assert!(matches!(
            read_kubedns_cm(&dir),
            Err(PillarError::ConfigMap { .. })
        ));
        std::fs::write(dir.join("stubDomains"), r#"{"a b": ["1.2.3.4"]}"#).unwrap();
        assert!(read_kubedns_cm(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_cluster_dns_is_an_error_naming_the_variable() {
        assert_eq!(service_env("kube-dns-upstream"), "KUBE_DNS_UPSTREAM_SERVICE_HOST");
        assert!(render(BASE, "169.254.20.10", 53, None, &KubeDnsConfig::default()).is_err());
        let dir = std::env::temp_dir().join(format!("pillar-base-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("base"), BASE).unwrap();
        let e = render_files(&dir.join("base"), None, "169.254.20.10", 53, "no-such-svc-xyz")
            .unwrap_err()
            .to_string();
        assert!(e.contains("NO_SUCH_SVC_XYZ_SERVICE_HOST"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
