//! The metadata the `kubernetes` plugin publishes about a question when its block has
//! `metadata` (CoreDNS 1.14.7's labels): the client pod's namespace (with `pods verified`),
//! and for a name under its zones what the name denotes (`kubernetes/kind`, `namespace`,
//! `service`, `endpoint`, `port-name`, `protocol`; `cluster` in `multicluster` zones), or
//! `kubernetes/parse-error`.

use std::net::IpAddr;

use hickory_proto::rr::Name;

use super::answer::pick::ZonalName;
use super::handler::Kubernetes;
use crate::proto::QueryMetadata;

/// The parts of a name under a cluster zone, read as CoreDNS's `parseRequest` reads them
/// (right to left, `_` stripped from port and protocol); empty where the name has none.
#[derive(Debug, Default, PartialEq, Eq)]
struct Parts {
    kind: String,
    namespace: String,
    service: String,
    endpoint: String,
    port: String,
    protocol: String,
}

/// CoreDNS's error text for a name its grammar does not read.
const INVALID: &str = "invalid query name";

/// `labels`: lower-case, in query order, left of the zone.
fn parse(labels: &[&str]) -> Result<Parts, &'static str> {
    let mut p = Parts::default();
    let mut rest = labels.iter().rev();
    let Some(kind) = rest.next() else {
        return Ok(p);
    };
    if *kind != "svc" && *kind != "pod" {
        return Err(INVALID);
    }
    if labels.len() == 1 {
        // `svc.<zone>`, `pod.<zone>`: the apex's empty values.
        return Ok(p);
    }
    p.kind = (*kind).to_owned();
    let strip = |l: &str| l.strip_prefix('_').unwrap_or(l).to_owned();
    match labels {
        [ns, _] => p.namespace = (*ns).to_owned(),
        [svc, ns, _] => (p.namespace, p.service) = ((*ns).to_owned(), (*svc).to_owned()),
        [ep, svc, ns, _] => {
            (p.namespace, p.service, p.endpoint) = ((*ns).to_owned(), (*svc).to_owned(), (*ep).to_owned());
        }
        [port, proto, svc, ns, _] => {
            (p.namespace, p.service) = ((*ns).to_owned(), (*svc).to_owned());
            (p.port, p.protocol) = (strip(port), strip(proto));
        }
        _ => return Err(INVALID),
    }
    Ok(p)
}

/// In a `multicluster` zone, CoreDNS reads two labels left of the service without a leading
/// `_` as `<endpoint>.<clusterid>`, not as port and protocol: `p` is corrected so, and the
/// cluster id returned (empty for every other name).
fn multicluster_parts(labels: &[&str], p: &mut Parts) -> String {
    match labels {
        [ep, cluster, _, _, "svc"] if !ep.starts_with('_') && !cluster.starts_with('_') => {
            p.endpoint = (*ep).to_owned();
            p.port.clear();
            p.protocol.clear();
            (*cluster).to_owned()
        }
        _ => String::new(),
    }
}

impl Kubernetes {
    /// Publishes its metadata about a question for `name` from `client` into `md`.
    pub(super) fn publish(&self, name: &Name, client: IpAddr, verified: bool, md: &QueryMetadata) {
        if verified && let Some(ns) = self.zone().pod_namespace(client) {
            md.set("kubernetes/client-namespace", &ns);
        }
        let Some(zone) = self.answerer().matching_zone(name) else {
            return;
        };
        let lower = name.to_lowercase();
        let keep = lower.num_labels().saturating_sub(zone.num_labels());
        let labels: Vec<String> = lower
            .iter()
            .take(usize::from(keep))
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let multicluster = self.answerer().settings().multicluster.contains(zone);
        // With `zonal`: `kubernetes/zone`, the zone a zone-scoped name asks for (empty for
        // other names), and such a name's service, namespace and kind.
        let zonal = self
            .answerer()
            .settings()
            .zonal
            .then(|| ZonalName::parse(&labels));
        if let Some(z) = &zonal {
            md.set("kubernetes/zone", z.as_ref().map_or("", |z| z.zone.as_str()));
        }
        if let Some(Some(z)) = zonal {
            let p = Parts {
                kind: "svc".into(),
                namespace: z.namespace.into(),
                service: z.service.into(),
                ..Parts::default()
            };
            publish_parts(&p, md);
            return;
        }
        match parse(&labels) {
            Ok(mut p) => {
                if multicluster {
                    let cluster = multicluster_parts(&labels, &mut p);
                    md.set("kubernetes/cluster", &cluster);
                }
                publish_parts(&p, md);
            }
            Err(e) => md.set("kubernetes/parse-error", e),
        }
    }
}

fn publish_parts(p: &Parts, md: &QueryMetadata) {
    for (label, value) in [
        ("kubernetes/port-name", &p.port),
        ("kubernetes/protocol", &p.protocol),
        ("kubernetes/endpoint", &p.endpoint),
        ("kubernetes/service", &p.service),
        ("kubernetes/namespace", &p.namespace),
        ("kubernetes/kind", &p.kind),
    ] {
        md.set(label, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(kind: &str, ns: &str, svc: &str, ep: &str, port: &str, proto: &str) -> Parts {
        Parts {
            kind: kind.into(),
            namespace: ns.into(),
            service: svc.into(),
            endpoint: ep.into(),
            port: port.into(),
            protocol: proto.into(),
        }
    }

    #[test]
    fn names_read_as_coredns_reads_them() {
        assert_eq!(parse(&[]), Ok(Parts::default()));
        assert_eq!(parse(&["svc"]), Ok(Parts::default()));
        assert_eq!(parse(&["ns-a", "svc"]), Ok(parts("svc", "ns-a", "", "", "", "")));
        assert_eq!(
            parse(&["web", "ns-a", "svc"]),
            Ok(parts("svc", "ns-a", "web", "", "", ""))
        );
        assert_eq!(
            parse(&["web-0", "web", "ns-a", "svc"]),
            Ok(parts("svc", "ns-a", "web", "web-0", "", ""))
        );
        assert_eq!(
            parse(&["_http", "_tcp", "web", "ns-a", "svc"]),
            Ok(parts("svc", "ns-a", "web", "", "http", "tcp"))
        );
        assert_eq!(
            parse(&["10-0-0-1", "ns-a", "pod"]),
            Ok(parts("pod", "ns-a", "10-0-0-1", "", "", ""))
        );
        assert_eq!(parse(&["foo"]), Err(INVALID));
        // In a multicluster zone: endpoint and cluster id, unless a label has a `_`.
        let labels = ["db-0", "east", "db", "ns-a", "svc"];
        let mut p = parse(&labels).unwrap();
        assert_eq!(multicluster_parts(&labels, &mut p), "east");
        assert_eq!(p, parts("svc", "ns-a", "db", "db-0", "", ""));
        let labels = ["_pg", "tcp", "db", "ns-a", "svc"];
        let mut p = parse(&labels).unwrap();
        assert_eq!(multicluster_parts(&labels, &mut p), "");
        assert_eq!(p, parts("svc", "ns-a", "db", "", "pg", "tcp"));
        assert_eq!(parse(&["a", "b", "c", "d", "e", "svc"]), Err(INVALID));
    }
}
