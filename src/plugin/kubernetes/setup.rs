//! The `kubernetes` directive's Corefile syntax, parsed into [`KubernetesConfig`], with
//! CoreDNS's options, defaults and checks (see this folder's README).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::corefile::{Args, CorefileError, Directive, normalize_zone, parse_duration};

/// How pod records are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodMode {
    /// No pod records (default).
    Disabled,
    /// Any IP in an existing namespace.
    Insecure,
    /// Only IPs of live pods in that namespace.
    Verified,
}

/// Where the cluster's objects come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiSource {
    /// The in-cluster service account (default).
    InCluster,
    /// `endpoint URL`.
    Endpoint(String),
    /// `kubeconfig PATH [CONTEXT]`.
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// The context (default: the file's current-context).
        context: Option<String>,
    },
    /// `manifests PATH...` (cluster-dns only): Kubernetes YAML files.
    Manifests(Vec<PathBuf>),
}

/// The `kubernetes` plugin's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesConfig {
    /// Zones, lower-case and absolute: the directive's arguments, else the server block's.
    pub zones: Vec<String>,
    /// The object source.
    pub source: ApiSource,
    /// `tls CERT KEY CACERT`.
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
    /// Exposed namespaces (empty: all).
    pub namespaces: Vec<String>,
    /// Label selector on the Namespace watch.
    pub namespace_labels: Option<String>,
    /// Label selector on the Service, EndpointSlice and Pod watches.
    pub labels: Option<String>,
    /// Pod records.
    pub pods: PodMode,
    /// Pod names as endpoint names.
    pub endpoint_pod_names: bool,
    /// TTL of answers (0-3600, default 5).
    pub ttl: u32,
    /// No endpoint data.
    pub noendpoints: bool,
    /// `None`: off; `Some([])`: all of the plugin's zones; else those zones.
    pub fallthrough: Option<Vec<String>>,
    /// `ignore empty_service`.
    pub ignore_empty_service: bool,
    /// How long start-up waits for the first sync (default 5 s).
    pub startup_timeout: Duration,
    /// Client rate limit.
    pub apiserver_qps: Option<f32>,
    /// Client burst.
    pub apiserver_burst: Option<u32>,
    /// Client in-flight limit.
    pub apiserver_max_inflight: Option<u32>,
}

/// The TTL when `ttl` is not given.
pub const DEFAULT_TTL: u32 = 5;

fn is_reverse(zone: &str) -> bool {
    zone.ends_with("in-addr.arpa.") || zone.ends_with("ip6.arpa.") || zone == "arpa."
}

/// Validates a label selector (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
/// comma-separated).
fn valid_selector(s: &str) -> bool {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    if depth != 0 {
        return false;
    }
    parts.push(&s[start..]);
    let key_ok = |k: &str| {
        !k.is_empty()
            && k.len() <= 317
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
    };
    let value_ok = |v: &str| {
        v.len() <= 63
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    parts.iter().all(|p| {
        let p = p.trim();
        if let Some((k, v)) = p.split_once("!=") {
            return key_ok(k.trim()) && value_ok(v.trim());
        }
        if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
            return key_ok(k.trim()) && value_ok(v.trim());
        }
        for op in [" notin ", " in "] {
            if let Some((k, v)) = p.split_once(op) {
                let v = v.trim();
                return key_ok(k.trim())
                    && v.starts_with('(')
                    && v.ends_with(')')
                    && v[1..v.len() - 1].split(',').all(|x| value_ok(x.trim()));
            }
        }
        key_ok(p.strip_prefix('!').unwrap_or(p).trim())
    })
}

/// Parses the `kubernetes` directive `d` of a server block with `server_zones`; relative paths
/// are taken from `corefile_dir`.
pub fn parse(
    d: &Directive,
    server_zones: &[String],
    corefile_dir: &Path,
) -> Result<KubernetesConfig, CorefileError> {
    let mut zones = Vec::new();
    for t in &d.args {
        let z = normalize_zone(&t.text).map_err(|e| d.error(e))?;
        if !zones.contains(&z) {
            zones.push(z);
        }
    }
    if zones.is_empty() {
        zones = server_zones.to_vec();
    }
    if !zones.iter().any(|z| !is_reverse(z)) {
        return Err(d.error("needs at least one zone that is not a reverse zone (for example cluster.local)"));
    }

    let mut c = KubernetesConfig {
        zones,
        source: ApiSource::InCluster,
        tls: None,
        namespaces: Vec::new(),
        namespace_labels: None,
        labels: None,
        pods: PodMode::Disabled,
        endpoint_pod_names: false,
        ttl: DEFAULT_TTL,
        noendpoints: false,
        fallthrough: None,
        ignore_empty_service: false,
        startup_timeout: Duration::from_secs(5),
        apiserver_qps: None,
        apiserver_burst: None,
        apiserver_max_inflight: None,
    };
    let mut endpoint: Option<String> = None;
    let mut kubeconfig: Option<(PathBuf, Option<String>)> = None;
    let mut manifests: Option<Vec<PathBuf>> = None;

    for opt in &d.block {
        let name = opt.name.text.as_str();
        let at = |msg: String| CorefileError::Directive {
            loc: opt.name.loc.clone(),
            directive: d.name.text.clone(),
            message: format!("{name}: {msg}"),
        };
        let mut args = Args::new(opt);
        if opt.has_block {
            return Err(at("takes no block".into()));
        }
        match name {
            "endpoint" => {
                let first = args.next().ok_or_else(|| at("expects a URL (http://HOST:PORT or https://HOST:PORT)".into()))?;
                let _ = args.remaining(); // CoreDNS uses only the first endpoint
                if !(first.text.starts_with("http://") || first.text.starts_with("https://")) {
                    return Err(at(format!("'{}' is not an http:// or https:// URL", first.text)));
                }
                endpoint = Some(first.text.clone());
            }
            "kubeconfig" => {
                let path = args.next().ok_or_else(|| at("expects a kubeconfig file and an optional context".into()))?;
                let context = args.next().map(|t| t.text.clone());
                args.expect_none().map_err(|_| at("expects a kubeconfig file and an optional context".into()))?;
                kubeconfig = Some((corefile_dir.join(&path.text), context));
            }
            "manifests" => {
                let files = args.remaining();
                if files.is_empty() {
                    return Err(at("expects one or more Kubernetes YAML files".into()));
                }
                manifests.get_or_insert_with(Vec::new).extend(files.iter().map(|t| corefile_dir.join(&t.text)));
            }
            "tls" => {
                let rest = args.remaining();
                let [cert, key, ca] = rest else {
                    return Err(at("expects three files: CERT KEY CACERT".into()));
                };
                c.tls = Some((corefile_dir.join(&cert.text), corefile_dir.join(&key.text), corefile_dir.join(&ca.text)));
            }
            "namespaces" => {
                let rest = args.remaining();
                if rest.is_empty() {
                    return Err(at("expects one or more namespaces".into()));
                }
                for t in rest {
                    if !crate::cluster::model::is_dns_label(&t.text) {
                        return Err(at(format!("'{}' is not a valid namespace name", t.text)));
                    }
                    c.namespaces.push(t.text.to_ascii_lowercase());
                }
            }
            "namespace_labels" | "labels" => {
                let rest = args.remaining();
                if rest.is_empty() {
                    return Err(at("expects a label selector, such as 'app=dns,tier!=test'".into()));
                }
                let sel = rest.iter().map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ");
                if !valid_selector(&sel) {
                    return Err(at(format!("'{sel}' is not a valid label selector")));
                }
                if name == "labels" {
                    c.labels = Some(sel);
                } else {
                    c.namespace_labels = Some(sel);
                }
            }
            "pods" => {
                let mode = args.next().ok_or_else(|| at("expects disabled, insecure or verified".into()))?;
                args.expect_none().map_err(|_| at("expects one of disabled, insecure or verified".into()))?;
                c.pods = match mode.text.as_str() {
                    "disabled" => PodMode::Disabled,
                    "insecure" => PodMode::Insecure,
                    "verified" => PodMode::Verified,
                    other => return Err(at(format!("'{other}' is not one of disabled, insecure, verified"))),
                };
            }
            "endpoint_pod_names" | "noendpoints" => {
                args.expect_none().map_err(|_| at("takes no arguments".into()))?;
                if name == "noendpoints" {
                    c.noendpoints = true;
                } else {
                    c.endpoint_pod_names = true;
                }
            }
            "ttl" => {
                let v = args.next().ok_or_else(|| at("expects a number of seconds from 0 to 3600".into()))?;
                args.expect_none().map_err(|_| at("expects a single number".into()))?;
                c.ttl = v
                    .text
                    .parse::<u32>()
                    .ok()
                    .filter(|t| *t <= 3600)
                    .ok_or_else(|| at(format!("'{}' is not a number of seconds from 0 to 3600", v.text)))?;
            }
            "fallthrough" => {
                let mut fz = Vec::new();
                for t in args.remaining() {
                    fz.push(normalize_zone(&t.text).map_err(&at)?);
                }
                c.fallthrough = Some(fz);
            }
            "ignore" => {
                let v = args.next().ok_or_else(|| at("expects 'empty_service'".into()))?;
                args.expect_none().map_err(|_| at("expects only 'empty_service'".into()))?;
                if v.text != "empty_service" {
                    return Err(at(format!("'{}' cannot be ignored (only 'empty_service')", v.text)));
                }
                c.ignore_empty_service = true;
            }
            "startup_timeout" => {
                let v = args.next().ok_or_else(|| at("expects a duration such as 5s".into()))?;
                args.expect_none().map_err(|_| at("expects a single duration".into()))?;
                c.startup_timeout = parse_duration(&v.text).ok_or_else(|| at(format!("'{}' is not a duration (such as 5s or 1m)", v.text)))?;
            }
            "apiserver_qps" => {
                let v = args.next().ok_or_else(|| at("expects a number".into()))?;
                args.expect_none().map_err(|_| at("expects a single number".into()))?;
                c.apiserver_qps = Some(v.text.parse::<f32>().ok().filter(|q| q.is_finite() && *q >= 0.0).ok_or_else(|| at(format!("'{}' is not a number", v.text)))?);
            }
            "apiserver_burst" | "apiserver_max_inflight" => {
                let v = args.next().ok_or_else(|| at("expects a whole number".into()))?;
                args.expect_none().map_err(|_| at("expects a single whole number".into()))?;
                let n = v.text.parse::<u32>().map_err(|_| at(format!("'{}' is not a whole number", v.text)))?;
                if name == "apiserver_burst" {
                    c.apiserver_burst = Some(n);
                } else {
                    c.apiserver_max_inflight = Some(n);
                }
            }
            "multicluster" | "zonal" => return Err(at("is not supported by cluster-dns yet".into())),
            "resyncperiod" => return Err(at("was removed from CoreDNS in 1.6; delete this line".into())),
            "upstream" => return Err(at("was removed from CoreDNS in 1.7 (answers are chased through the server's own chain); delete this line".into())),
            other => return Err(at(format!("unknown property '{other}'"))),
        }
    }
    if !c.namespaces.is_empty() && c.namespace_labels.is_some() {
        return Err(d.error("'namespaces' and 'namespace_labels' cannot both be set"));
    }
    c.source = match (manifests, kubeconfig, endpoint) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(d.error("'manifests' cannot be combined with 'endpoint' or 'kubeconfig'"));
        }
        (Some(files), None, None) => ApiSource::Manifests(files),
        (None, Some((path, context)), _) => ApiSource::Kubeconfig { path, context },
        (None, None, Some(url)) => ApiSource::Endpoint(url),
        (None, None, None) => ApiSource::InCluster,
    };
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;

    fn parse_block(body: &str) -> Result<KubernetesConfig, CorefileError> {
        let text = format!(".:53 {{\n{body}\n}}\n");
        let cf = Corefile::parse_str(&text, Path::new("/etc/coredns/Corefile"))?;
        let d = &cf.blocks[0].directives[0];
        parse(d, &[".".to_owned()], Path::new("/etc/coredns"))
    }

    #[test]
    fn kubeadm_stanza() {
        let c = parse_block(" kubernetes cluster.local in-addr.arpa ip6.arpa {\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n  ttl 30\n }").unwrap();
        assert_eq!(c.zones, ["cluster.local.", "in-addr.arpa.", "ip6.arpa."]);
        assert_eq!(c.pods, PodMode::Insecure);
        assert_eq!(c.ttl, 30);
        assert_eq!(
            c.fallthrough,
            Some(vec!["in-addr.arpa.".to_owned(), "ip6.arpa.".to_owned()])
        );
        assert_eq!(c.source, ApiSource::InCluster);
    }

    #[test]
    fn defaults_and_sources() {
        let c = parse_block(" kubernetes CLUSTER.local").unwrap();
        assert_eq!(c.zones, ["cluster.local."]);
        assert_eq!(
            (c.ttl, c.pods, c.fallthrough.clone()),
            (5, PodMode::Disabled, None)
        );
        assert_eq!(c.startup_timeout, Duration::from_secs(5));
        let c = parse_block(" kubernetes cluster.local {\n endpoint http://127.0.0.1:8080 http://other\n }")
            .unwrap();
        assert_eq!(c.source, ApiSource::Endpoint("http://127.0.0.1:8080".into()));
        let c =
            parse_block(" kubernetes cluster.local {\n endpoint http://a:1\n kubeconfig kube.conf ctx\n }")
                .unwrap();
        assert_eq!(
            c.source,
            ApiSource::Kubeconfig {
                path: "/etc/coredns/kube.conf".into(),
                context: Some("ctx".into())
            }
        );
        let c = parse_block(" kubernetes cluster.local {\n manifests a.yaml /abs/b.yaml\n fallthrough\n startup_timeout 1m30s\n }").unwrap();
        assert_eq!(
            c.source,
            ApiSource::Manifests(vec!["/etc/coredns/a.yaml".into(), "/abs/b.yaml".into()])
        );
        assert_eq!(c.fallthrough, Some(vec![]));
        assert_eq!(c.startup_timeout, Duration::from_secs(90));
        // Zones default to the server block's.
        let c = parse_block(" kubernetes {\n labels app=x,tier in (a, b)\n }").unwrap();
        assert_eq!(c.zones, ["."]);
        assert_eq!(c.labels.as_deref(), Some("app=x,tier in (a, b)"));
    }

    #[test]
    fn every_option_error_names_line_and_option() {
        let cases = [
            (
                " kubernetes cluster.local {\n  frob\n }",
                "Corefile:3: kubernetes: frob: unknown property 'frob'",
            ),
            (
                " kubernetes cluster.local {\n  ttl 3601\n }",
                "ttl: '3601' is not",
            ),
            (" kubernetes cluster.local {\n  ttl\n }", "ttl: expects"),
            (" kubernetes cluster.local {\n  pods maybe\n }", "pods: 'maybe'"),
            (
                " kubernetes cluster.local {\n  endpoint\n }",
                "endpoint: expects a URL",
            ),
            (
                " kubernetes cluster.local {\n  endpoint 10.0.0.1:6443\n }",
                "not an http",
            ),
            (
                " kubernetes cluster.local {\n  ignore everything\n }",
                "only 'empty_service'",
            ),
            (
                " kubernetes cluster.local {\n  resyncperiod 10s\n }",
                "removed from CoreDNS in 1.6",
            ),
            (
                " kubernetes cluster.local {\n  upstream\n }",
                "removed from CoreDNS in 1.7",
            ),
            (
                " kubernetes cluster.local {\n  multicluster clusterset.local\n }",
                "not supported",
            ),
            (
                " kubernetes cluster.local {\n  namespaces a\n  namespace_labels x=y\n }",
                "cannot both be set",
            ),
            (
                " kubernetes cluster.local {\n  labels a=b=c\n }",
                "not a valid label selector",
            ),
            (
                " kubernetes cluster.local {\n  manifests\n }",
                "manifests: expects",
            ),
            (
                " kubernetes cluster.local {\n  manifests a.yaml\n  endpoint http://x\n }",
                "cannot be combined",
            ),
            (
                " kubernetes cluster.local {\n  startup_timeout soon\n }",
                "not a duration",
            ),
            (" kubernetes cluster.local {\n  tls a b\n }", "three files"),
            (" kubernetes in-addr.arpa", "not a reverse zone"),
            (" kubernetes cluster.local {\n  pods {\n  }\n }", "takes no block"),
        ];
        for (body, want) in cases {
            let e = parse_block(body).unwrap_err().to_string();
            assert!(e.contains(want), "{body:?}: {e}");
            assert!(e.starts_with("/etc/coredns/Corefile:"), "{e}");
        }
    }

    #[test]
    fn selectors() {
        for ok in [
            "app=dns",
            "app==dns,tier!=test",
            "env in (a, b)",
            "env notin (x)",
            "app",
            "!app",
            "k8s.io/name=x",
        ] {
            assert!(valid_selector(ok), "{ok}");
        }
        for bad in ["", "a=b=c", "env in a", "(", "a b"] {
            assert!(!valid_selector(bad), "{bad}");
        }
    }
}
