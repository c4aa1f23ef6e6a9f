//! Service names in a `multicluster` zone (`clusterset.local`), answered from ServiceImports
//! and their imported EndpointSlices, as CoreDNS 1.14.7 answers them (KEP-1645's DNS
//! section, with CoreDNS's choices where the two differ; see this plugin's README):
//!
//! - `<svc>.<ns>.svc.<zone>`: a ClusterSetIP import's `spec.ips`; a Headless import's ready
//!   endpoints from every cluster; SRV for every port;
//! - `<endpoint>.<clusterid>.<svc>.<ns>.svc.<zone>`: the endpoint of that name (hostname, else
//!   pod name with `endpoint_pod_names`, else the dashed IP) in that cluster;
//! - `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: SRV of that port; a ClusterSetIP import's
//!   target is `<svc>.<ns>.svc.<zone>`, a Headless import's the per-cluster endpoint names;
//! - NXDOMAIN for an unknown import, a Headless import with no ready endpoint, an endpoint
//!   name without its cluster id, an unknown port; NODATA for a type the name has no records
//!   of. Other names of the zone (apex, `<ns>.svc`, pods) answer as in any cluster zone.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::{Name, RecordType};

use super::answerer::{ClusterAnswerer, Resolution, SrvCandidate, name_under};
use crate::cluster::model::{PortInfo, PortProtocol};
use crate::cluster::multicluster::{ImportEntry, ImportKind};

fn strip_underscore(label: &str) -> &str {
    label.strip_prefix('_').unwrap_or(label)
}

impl ClusterAnswerer {
    /// Answers `labels` (lower-case, left of the multicluster zone `zone`, as the question spelt
    /// it) when they are a service name; `None` for the zone's other names.
    pub(super) fn resolve_clusterset(
        &self,
        owner: &Name,
        labels: &[&str],
        zone: &Name,
        qtype: RecordType,
    ) -> Option<Resolution> {
        let [rest @ .., service, namespace, "svc"] = labels else {
            return None;
        };
        let Some(entry) = self.visible_import(namespace, service) else {
            return Some(Resolution::nxdomain());
        };
        Some(match rest {
            [] => self.import_records(owner, zone, namespace, service, &entry, qtype, |_| true),
            [port, protocol] if port.starts_with('_') || protocol.starts_with('_') => {
                let (port, protocol) = (strip_underscore(port), strip_underscore(protocol));
                match PortProtocol::parse(protocol) {
                    Some(proto) if !port.is_empty() => {
                        let wanted = |p: &PortInfo| p.protocol == proto && &*p.name == port;
                        match self.import_records(
                            owner,
                            zone,
                            namespace,
                            service,
                            &entry,
                            RecordType::SRV,
                            wanted,
                        ) {
                            res if res.answers.is_empty() => Resolution::nxdomain(),
                            _ if qtype != RecordType::SRV => Resolution::nodata(),
                            res => res,
                        }
                    }
                    _ => Resolution::nxdomain(),
                }
            }
            [endpoint, cluster] => self.cluster_endpoint(owner, &entry, endpoint, cluster, qtype),
            // An endpoint name without its cluster id, or a longer name.
            _ => Resolution::nxdomain(),
        })
    }

    /// The import `namespace/name` if DNS should see it: its namespace is exposed, it exists,
    /// and (Headless, or with `ignore empty_service`) it has a ready endpoint.
    fn visible_import(&self, namespace: &str, name: &str) -> Option<Arc<ImportEntry>> {
        if !self.namespace_exposed(namespace) {
            return None;
        }
        let entry = self.zone.import(namespace, name)?;
        let import = entry.import.as_ref()?;
        let empty = entry.ready().next().is_none();
        let hidden = match import.kind {
            ImportKind::ClusterSetIp(_) => self.settings.ignore_empty_service && empty,
            ImportKind::Headless => self.settings.noendpoints || empty,
        };
        (!hidden).then_some(entry)
    }

    /// The records of the import's own name: addresses for A/AAAA, SRV (of the ports `wanted`
    /// picks) with glue, NODATA for other types.
    #[allow(clippy::too_many_arguments)]
    fn import_records(
        &self,
        owner: &Name,
        zone: &Name,
        namespace: &str,
        service: &str,
        entry: &ImportEntry,
        qtype: RecordType,
        wanted: impl Fn(&PortInfo) -> bool,
    ) -> Resolution {
        let Some(import) = entry.import.as_ref() else {
            return Resolution::nxdomain();
        };
        match (&import.kind, qtype) {
            (ImportKind::ClusterSetIp(ips), RecordType::A | RecordType::AAAA) => {
                self.addresses(owner, qtype, ips)
            }
            (ImportKind::Headless, RecordType::A | RecordType::AAAA) => {
                let ips: Vec<IpAddr> = entry.ready().map(|(_, _, ip)| *ip).collect();
                self.addresses(owner, qtype, &ips)
            }
            (ImportKind::ClusterSetIp(ips), RecordType::SRV) => {
                let Some(target) = name_under(&[service, namespace, "svc"], zone) else {
                    return Resolution::nodata();
                };
                let target = &target;
                let candidates: Vec<SrvCandidate<'_>> = import
                    .ports
                    .iter()
                    .filter(|p| wanted(p))
                    .filter_map(|p| p.port)
                    .flat_map(|port| {
                        ips.iter().map(move |ip| SrvCandidate {
                            target,
                            id: 0,
                            port,
                            glue: *ip,
                        })
                    })
                    .collect();
                self.srv(owner, &candidates)
            }
            (ImportKind::Headless, RecordType::SRV) => {
                // One target per (cluster, endpoint name); equal names share an id.
                let mut targets: Vec<(Name, IpAddr, &[PortInfo])> = Vec::new();
                for (slice, ep, ip) in entry.ready() {
                    if slice.cluster.is_empty() {
                        continue;
                    }
                    let label = self.endpoint_name(ep, ip);
                    if let Some(t) = name_under(&[&label, &slice.cluster, service, namespace, "svc"], zone) {
                        targets.push((t, *ip, &slice.slice.ports));
                    }
                }
                let mut first: HashMap<&Name, u32> = HashMap::with_capacity(targets.len());
                let ids: Vec<u32> = targets
                    .iter()
                    .enumerate()
                    .map(|(i, (t, _, _))| *first.entry(t).or_insert(u32::try_from(i).unwrap_or(u32::MAX)))
                    .collect();
                let candidates: Vec<SrvCandidate<'_>> = targets
                    .iter()
                    .zip(&ids)
                    .flat_map(|((target, ip, ports), id)| {
                        ports
                            .iter()
                            .filter(|p| wanted(p))
                            .filter_map(|p| p.port)
                            .map(move |port| SrvCandidate {
                                target,
                                id: *id,
                                port,
                                glue: *ip,
                            })
                    })
                    .collect();
                self.srv(owner, &candidates)
            }
            _ => Resolution::nodata(),
        }
    }

    /// `<endpoint>.<cluster>.<svc>.<ns>.svc.<zone>`: the ready addresses of that name in that
    /// cluster (of either kind of import, as CoreDNS answers them), else NXDOMAIN.
    fn cluster_endpoint(
        &self,
        owner: &Name,
        entry: &ImportEntry,
        endpoint: &str,
        cluster: &str,
        qtype: RecordType,
    ) -> Resolution {
        if self.settings.noendpoints {
            return Resolution::nxdomain();
        }
        let ips: Vec<IpAddr> = entry
            .ready()
            .filter(|(s, ep, ip)| &*s.cluster == cluster && self.endpoint_name(ep, ip) == endpoint)
            .map(|(_, _, ip)| *ip)
            .collect();
        if ips.is_empty() {
            return Resolution::nxdomain();
        }
        self.addresses(owner, qtype, &ips)
    }
}

#[cfg(test)]
mod tests {
    use hickory_proto::op::ResponseCode;
    use hickory_proto::rr::RData;
    use serde_json::json;

    use super::*;
    use crate::cluster::ClusterZone;
    use crate::cluster::multicluster::{
        ClusterSlice, ImportInfo, MC_SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL,
    };
    use crate::plugin::kubernetes::answer::answerer::tests::settings;
    use crate::plugin::kubernetes::answer::{Outcome, PodRecords};
    use crate::proto::Answer;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    fn zone() -> Arc<ClusterZone> {
        let z = ClusterZone::new();
        z.apply_namespace("ns".into());
        let import = |name: &str, spec| {
            let v = json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec});
            z.apply_import(ImportInfo::from_json(&v).unwrap());
        };
        import(
            "web",
            json!({"type": "ClusterSetIP", "ips": ["10.9.0.1"], "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}),
        );
        import(
            "db",
            json!({"type": "Headless", "ports": [{"name": "pg", "port": 5432}]}),
        );
        import("empty", json!({"type": "Headless"}));
        let slice = |name: &str, svc: &str, cluster: &str, eps: serde_json::Value| {
            let s = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns",
                             "labels": {MC_SERVICE_NAME_LABEL: svc, SOURCE_CLUSTER_LABEL: cluster}},
                "addressType": "IPv4", "endpoints": eps,
                "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]
            }))
            .unwrap();
            z.apply_cluster_slice(ClusterSlice::from_k8s(&s, false).unwrap());
        };
        slice(
            "db-c1",
            "db",
            "c1",
            json!([{"addresses": ["10.1.0.1"], "hostname": "db-0"}, {"addresses": ["10.1.0.2"]},
                   {"addresses": ["10.1.0.3"], "conditions": {"ready": false}}]),
        );
        slice(
            "db-c2",
            "db",
            "c2",
            json!([{"addresses": ["10.2.0.1"], "hostname": "db-0"}]),
        );
        slice(
            "web-c1",
            "web",
            "c1",
            json!([{"addresses": ["10.1.1.1"], "hostname": "w"}]),
        );
        z.set_synced(true);
        Arc::new(z)
    }

    fn answerer() -> ClusterAnswerer {
        let mut s = settings();
        s.zones.push(n("clusterset.local."));
        s.multicluster = vec![n("clusterset.local.")];
        s.pods = PodRecords::Insecure;
        ClusterAnswerer::new(s, zone())
    }

    fn ask(a: &ClusterAnswerer, q: &str, t: RecordType) -> Answer {
        match a.answer(&n(q), t) {
            Outcome::Answer(ans) => ans,
            Outcome::Fallthrough => panic!("fell through"),
        }
    }

    fn data(ans: &Answer) -> Vec<String> {
        ans.answers
            .iter()
            .map(|r| match &r.data {
                RData::SRV(s) => format!("{} {} {}", r.name, s.port, s.target),
                d => format!("{} {d}", r.name),
            })
            .collect()
    }

    #[test]
    fn clusterset_ip_imports_answer_their_ips_and_ports() {
        let a = answerer();
        let ans = ask(&a, "web.ns.svc.clusterset.local.", RecordType::A);
        assert_eq!(data(&ans), ["web.ns.svc.clusterset.local. 10.9.0.1"]);
        let ans = ask(&a, "_http._tcp.web.ns.svc.clusterset.local.", RecordType::SRV);
        assert_eq!(
            data(&ans),
            ["_http._tcp.web.ns.svc.clusterset.local. 80 web.ns.svc.clusterset.local."]
        );
        assert_eq!(ans.additional.len(), 1);
        let ans = ask(&a, "web.ns.svc.clusterset.local.", RecordType::SRV);
        assert_eq!(data(&ans).len(), 1);
        // NODATA: no AAAA; a port name's A.
        for (q, t) in [
            ("web.ns.svc.clusterset.local.", RecordType::AAAA),
            ("_http._tcp.web.ns.svc.clusterset.local.", RecordType::A),
            ("ns.svc.clusterset.local.", RecordType::A),
        ] {
            let ans = ask(&a, q, t);
            assert_eq!(
                (ans.rcode, ans.answers.len(), ans.authority.len()),
                (ResponseCode::NoError, 0, 1),
                "{q}"
            );
        }
        // The cluster zone knows nothing of imports, and the import's per-cluster names
        // answer as CoreDNS answers them.
        assert_eq!(
            ask(&a, "web.ns.svc.cluster.local.", RecordType::A).rcode,
            ResponseCode::NXDomain
        );
        assert_eq!(
            data(&ask(&a, "w.c1.web.ns.svc.clusterset.local.", RecordType::A)),
            ["w.c1.web.ns.svc.clusterset.local. 10.1.1.1"]
        );
    }

    #[test]
    fn headless_imports_answer_every_ready_endpoint_and_per_cluster_names() {
        let a = answerer();
        let ans = ask(&a, "db.ns.svc.clusterset.local.", RecordType::A);
        assert_eq!(ans.answers.len(), 3, "{:?}", data(&ans));
        let ans = ask(&a, "_pg._tcp.db.ns.svc.clusterset.local.", RecordType::SRV);
        let mut targets: Vec<String> = data(&ans);
        targets.sort();
        assert_eq!(
            targets,
            [
                "_pg._tcp.db.ns.svc.clusterset.local. 5432 10-1-0-2.c1.db.ns.svc.clusterset.local.",
                "_pg._tcp.db.ns.svc.clusterset.local. 5432 db-0.c1.db.ns.svc.clusterset.local.",
                "_pg._tcp.db.ns.svc.clusterset.local. 5432 db-0.c2.db.ns.svc.clusterset.local.",
            ]
        );
        assert_eq!(ans.additional.len(), 3);
        assert_eq!(
            data(&ask(&a, "DB-0.C2.db.ns.svc.clusterset.local.", RecordType::A)),
            ["DB-0.C2.db.ns.svc.clusterset.local. 10.2.0.1"]
        );
        for q in [
            "db-0.db.ns.svc.clusterset.local.",
            "db-0.c3.db.ns.svc.clusterset.local.",
            "10-1-0-3.c1.db.ns.svc.clusterset.local.",
            "x.db-0.c1.db.ns.svc.clusterset.local.",
            "empty.ns.svc.clusterset.local.",
            "nosuch.ns.svc.clusterset.local.",
            "db.nons.svc.clusterset.local.",
            "_http._tcp.db.ns.svc.clusterset.local.",
            "_pg._xyz.db.ns.svc.clusterset.local.",
        ] {
            let ans = ask(&a, q, RecordType::A);
            assert_eq!(
                (ans.rcode, ans.authority.len()),
                (ResponseCode::NXDomain, 1),
                "{q}"
            );
        }
        let ans = ask(&a, "db-0.c1.db.ns.svc.clusterset.local.", RecordType::AAAA);
        assert_eq!((ans.rcode, ans.answers.len()), (ResponseCode::NoError, 0));
        // The zone's other names answer as in any cluster zone.
        assert_eq!(
            data(&ask(&a, "10-0-0-9.ns.pod.clusterset.local.", RecordType::A)),
            ["10-0-0-9.ns.pod.clusterset.local. 10.0.0.9"]
        );
        assert_eq!(ask(&a, "clusterset.local.", RecordType::SOA).answers.len(), 1);
    }

    #[test]
    fn ignore_empty_service_hides_clusterset_ip_imports_without_endpoints() {
        let z = zone();
        let v = json!({"metadata": {"name": "lonely", "namespace": "ns"},
                       "spec": {"type": "ClusterSetIP", "ips": ["10.9.0.2"]}});
        z.apply_import(ImportInfo::from_json(&v).unwrap());
        let mut s = settings();
        s.zones.push(n("clusterset.local."));
        s.multicluster = vec![n("clusterset.local.")];
        let a = ClusterAnswerer::new(s.clone(), z.clone());
        assert_eq!(
            ask(&a, "lonely.ns.svc.clusterset.local.", RecordType::A)
                .answers
                .len(),
            1
        );
        s.ignore_empty_service = true;
        let a = ClusterAnswerer::new(s, z);
        assert_eq!(
            ask(&a, "lonely.ns.svc.clusterset.local.", RecordType::A).rcode,
            ResponseCode::NXDomain
        );
        assert_eq!(
            ask(&a, "web.ns.svc.clusterset.local.", RecordType::A)
                .answers
                .len(),
            1
        );
    }
}
