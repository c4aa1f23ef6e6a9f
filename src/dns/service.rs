//! Service names: a Service's A/AAAA (ClusterIP, or one record per ready endpoint when
//! headless), ExternalName CNAMEs and their in-zone chase, endpoint hostnames, and SRV for its
//! ports.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{CNAME, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::addr::dashed;
use super::answer::*;
use crate::cluster::model::{EndpointInfo, PortInfo, PortProtocol, ServiceInfo, ServiceKind, SliceInfo};
use crate::cluster::zone::ServiceEntry;

impl ClusterAnswerer {
    pub(super) fn namespace_exposed(&self, ns: &str) -> bool {
        (self.settings.namespaces.is_empty() || self.settings.namespaces.iter().any(|n| n == ns))
            && self.zone.namespace_exists(ns)
    }

    /// The entry and Service for (namespace, name) if DNS should see it at all.
    pub(super) fn visible_service(&self, namespace: &str, name: &str) -> Option<Arc<ServiceEntry>> {
        if !self.namespace_exposed(namespace) {
            return None;
        }
        let entry = self.zone.service(namespace, name)?;
        let svc = entry.service.as_ref()?;
        let hidden = match &svc.kind {
            ServiceKind::ClusterIp(_) => self.settings.ignore_empty_service && entry.has_no_ready_addresses(),
            ServiceKind::Headless => self.settings.noendpoints || entry.has_no_ready_addresses(),
            ServiceKind::ExternalName(target) => target.is_none(),
        };
        (!hidden).then_some(entry)
    }

    /// A, AAAA or NODATA from a set of addresses (duplicates removed, order kept).
    pub(super) fn addresses(
        &self,
        owner: &Name,
        qtype: RecordType,
        ips: impl IntoIterator<Item = IpAddr>,
    ) -> Resolution {
        let ttl = self.settings.ttl;
        let mut records: Vec<Record> = Vec::new();
        for ip in ips {
            if family_matches(qtype, &ip) && !records.iter().any(|r| record_ip(r) == Some(ip)) {
                records.push(address_record(owner, ttl, ip));
            }
        }
        Resolution::records(records)
    }

    /// The endpoint name of one address of `ep` (§4.3).
    pub(super) fn endpoint_name(&self, ep: &EndpointInfo, ip: &IpAddr) -> String {
        if let Some(h) = ep.hostname() {
            return h.to_owned();
        }
        if self.settings.endpoint_pod_names
            && let Some(p) = ep
                .pod_name()
                .filter(|p| p.len() < 64 && crate::proto::is_dns_label(p))
        {
            return p.to_owned();
        }
        dashed(ip)
    }

    pub(super) fn ready_addresses(
        entry: &ServiceEntry,
    ) -> impl Iterator<Item = (&SliceInfo, &EndpointInfo, &IpAddr)> {
        entry
            .slices
            .values()
            .flat_map(|s| s.endpoints.iter().map(move |e| (&**s, e)))
            .flat_map(|(s, e)| e.addresses.iter().map(move |ip| (s, e, ip)))
    }

    pub(super) fn resolve_service(
        &self,
        owner: &Name,
        zone_labels: usize,
        namespace: &str,
        service: &str,
        qtype: RecordType,
        depth: usize,
    ) -> Resolution {
        let Some(entry) = self.visible_service(namespace, service) else {
            return Resolution::nxdomain();
        };
        let Some(svc) = entry.service.as_ref() else {
            return Resolution::nxdomain();
        };
        match (&svc.kind, qtype) {
            (ServiceKind::ClusterIp(ips), RecordType::A | RecordType::AAAA) => {
                self.addresses(owner, qtype, ips.iter().copied())
            }
            (ServiceKind::Headless, RecordType::A | RecordType::AAAA) => {
                // Prepared when the entry changed: ready addresses, deduplicated, in order.
                let ttl = self.settings.ttl;
                Resolution::records(
                    entry
                        .ready_ips
                        .iter()
                        .filter(|ip| family_matches(qtype, ip))
                        .map(|ip| address_record(owner, ttl, *ip))
                        .collect(),
                )
            }
            (ServiceKind::ClusterIp(_) | ServiceKind::Headless, RecordType::SRV) => {
                let zone_spelt = owner.trim_to(zone_labels);
                let candidates = self.srv_candidates(&entry, svc, &zone_spelt, |_| true);
                self.srv(owner, candidates)
            }
            (ServiceKind::ExternalName(Some(target)), RecordType::CNAME) => {
                match Name::from_ascii(&**target) {
                    Ok(t) => Resolution::records(vec![Record::from_rdata(
                        owner.clone(),
                        self.settings.ttl,
                        RData::CNAME(CNAME(t)),
                    )]),
                    Err(_) => Resolution::nxdomain(),
                }
            }
            (ServiceKind::ExternalName(Some(target)), RecordType::A | RecordType::AAAA) => {
                self.chase(owner, target, qtype, depth)
            }
            _ => Resolution::nodata(),
        }
    }

    /// CNAME to an ExternalName target, followed by the target's records when it is in one of
    /// our zones (RFC 1034 rules: the target's rcode, NODATA when it lacks the type).
    pub(super) fn chase(&self, owner: &Name, target: &str, qtype: RecordType, depth: usize) -> Resolution {
        let Ok(target) = Name::from_ascii(target) else {
            return Resolution::nxdomain();
        };
        let cname = Record::from_rdata(
            owner.clone(),
            self.settings.ttl,
            RData::CNAME(CNAME(target.clone())),
        );
        let lower = target.to_lowercase();
        let in_zone = self.matching_zone(&lower).cloned();
        match in_zone {
            Some(zone) if depth < MAX_CNAME_CHAIN && lower != owner.to_lowercase() => {
                let mut tail = self.resolve(&target, &lower, &zone, qtype, depth + 1);
                tail.nodata_tail |= tail.answers.is_empty();
                tail.answers.insert(0, cname);
                tail.additional.clear();
                tail
            }
            // A loop or an over-long chain: the CNAME alone, marked negative.
            Some(_) => Resolution {
                nodata_tail: true,
                ..Resolution::records(vec![cname])
            },
            None => Resolution {
                external_target: Some(target),
                ..Resolution::records(vec![cname])
            },
        }
    }

    /// SRV candidates for `entry`: ClusterIP services give (port × ClusterIP) with the service
    /// name as target; headless services give (ready address × slice port) with endpoint names.
    pub(super) fn srv_candidates(
        &self,
        entry: &ServiceEntry,
        svc: &ServiceInfo,
        zone_spelt: &Name,
        port_filter: impl Fn(&PortInfo) -> bool,
    ) -> Vec<SrvCandidate> {
        let mut out = Vec::new();
        match &svc.kind {
            ServiceKind::ClusterIp(ips) => {
                let Some(target) = name_under(&[&svc.name, &svc.namespace, "svc"], zone_spelt) else {
                    return out;
                };
                for p in svc.ports.iter().filter(|p| port_filter(p)) {
                    let Some(port) = p.port else { continue };
                    for ip in ips {
                        out.push(SrvCandidate {
                            target: target.clone(),
                            port,
                            glue: *ip,
                        });
                    }
                }
            }
            ServiceKind::Headless => {
                // The service's name, once; each endpoint's target is its label under it.
                let Some(service) = name_under(&[&svc.name, &svc.namespace, "svc"], zone_spelt) else {
                    return out;
                };
                for (slice, ep, ip) in Self::ready_addresses(entry) {
                    let ep_name = self.endpoint_name(ep, ip);
                    let Some(mut target) = name_under(&[&ep_name], &service) else {
                        continue;
                    };
                    let mut ports = slice
                        .ports
                        .iter()
                        .filter(|p| port_filter(p))
                        .filter_map(|p| p.port)
                        .peekable();
                    while let Some(port) = ports.next() {
                        // The last port takes the name itself.
                        let target = if ports.peek().is_some() {
                            target.clone()
                        } else {
                            std::mem::replace(&mut target, Name::root())
                        };
                        out.push(SrvCandidate {
                            target,
                            port,
                            glue: *ip,
                        });
                    }
                }
            }
            ServiceKind::ExternalName(_) => {}
        }
        out
    }

    /// SRV records from candidates: priority 0, weight floor(100/N) (at least 1) with N counted
    /// before duplicates (by target and port) are removed; glue per (target, address).
    pub(super) fn srv(&self, owner: &Name, candidates: Vec<SrvCandidate>) -> Resolution {
        let ttl = self.settings.ttl;
        let n = candidates.len().max(1);
        let weight = u16::try_from(100 / n).unwrap_or(0).max(1);
        let mut res = Resolution::nodata();
        res.answers.reserve(candidates.len());
        res.additional.reserve(candidates.len());
        // Every target of one list is the same name (a ClusterIP service) or one label under
        // the same service (headless), so targets differ in their first label at most: they
        // are told apart by it, ignoring case as names are, without comparing whole names.
        // The keys borrow the targets, which move into the records once all are decided.
        let keep = first_of_each(&candidates);
        for (c, (srv, glue)) in candidates.into_iter().zip(keep) {
            let SrvCandidate {
                target,
                port,
                glue: ip,
            } = c;
            match (srv, glue) {
                (true, glue) => {
                    if glue {
                        res.additional.push(address_record(&target, ttl, ip));
                    }
                    let srv = SRV::new(0, weight, port, target);
                    res.answers
                        .push(Record::from_rdata(owner.clone(), ttl, RData::SRV(srv)));
                }
                (false, true) => res.additional.push(owned_address_record(target, ttl, ip)),
                (false, false) => {}
            }
        }
        res
    }

    pub(super) fn resolve_endpoint(
        &self,
        owner: &Name,
        namespace: &str,
        service: &str,
        endpoint: &str,
        qtype: RecordType,
    ) -> Resolution {
        if self.settings.noendpoints {
            return Resolution::nxdomain();
        }
        let Some(entry) = self.visible_service(namespace, service) else {
            return Resolution::nxdomain();
        };
        if matches!(
            entry.service.as_ref().map(|s| &s.kind),
            Some(ServiceKind::ExternalName(_))
        ) {
            return Resolution::nxdomain();
        }
        let ips: Vec<IpAddr> = Self::ready_addresses(&entry)
            .filter(|(_, ep, ip)| self.endpoint_name(ep, ip) == endpoint)
            .map(|(_, _, ip)| *ip)
            .collect();
        if ips.is_empty() {
            return Resolution::nxdomain();
        }
        self.addresses(owner, qtype, ips)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve_port(
        &self,
        owner: &Name,
        zone_spelt: &Name,
        namespace: &str,
        service: &str,
        port: &str,
        protocol: &str,
        qtype: RecordType,
    ) -> Resolution {
        let Some(proto) = PortProtocol::parse(protocol) else {
            return Resolution::nxdomain();
        };
        if port.is_empty() {
            return Resolution::nxdomain();
        }
        let Some(entry) = self.visible_service(namespace, service) else {
            return Resolution::nxdomain();
        };
        let Some(svc) = entry.service.as_ref() else {
            return Resolution::nxdomain();
        };
        let candidates = self.srv_candidates(&entry, svc, zone_spelt, |p| {
            p.protocol == proto && &*p.name == port
        });
        if candidates.is_empty() {
            return Resolution::nxdomain();
        }
        match qtype {
            RecordType::SRV => self.srv(owner, candidates),
            _ => Resolution::nodata(),
        }
    }
}

/// For each SRV candidate: is it the first with its (target, port), and the first with its
/// (target, address)? Targets are told apart by their first label (see [`ClusterAnswerer::srv`]).
/// A few candidates (a ClusterIP service's ports) are compared pairwise; more (a headless
/// service's endpoints) through hash sets.
fn first_of_each(candidates: &[SrvCandidate]) -> Vec<(bool, bool)> {
    fn first(c: &SrvCandidate) -> Folded<'_> {
        Folded(c.target.iter().next().unwrap_or_default())
    }
    if candidates.len() <= 4 {
        return candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (label, before) = (first(c), &candidates[..i]);
                (
                    !before.iter().any(|b| b.port == c.port && first(b) == label),
                    !before.iter().any(|b| b.glue == c.glue && first(b) == label),
                )
            })
            .collect();
    }
    let hasher = foldhash::fast::RandomState::default;
    let mut seen_srv = HashSet::with_capacity_and_hasher(candidates.len(), hasher());
    let mut seen_glue = HashSet::with_capacity_and_hasher(candidates.len(), hasher());
    candidates
        .iter()
        .map(|c| {
            let label = first(c);
            (
                seen_srv.insert((label, c.port)),
                seen_glue.insert((label, c.glue)),
            )
        })
        .collect()
}

/// A label compared as DNS compares labels: ASCII case ignored.
#[derive(Debug, Clone, Copy)]
struct Folded<'a>(&'a [u8]);

impl PartialEq for Folded<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_ignore_ascii_case(other.0)
    }
}

impl Eq for Folded<'_> {}

impl std::hash::Hash for Folded<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Lower-cased on the stack, hashed in one write (a label is at most 63 bytes; a
        // longer slice is hashed in chunks, which is as consistent).
        for chunk in self.0.chunks(63) {
            let mut folded = [0u8; 63];
            for (f, b) in folded.iter_mut().zip(chunk) {
                *f = b.to_ascii_lowercase();
            }
            state.write(&folded[..chunk.len()]);
        }
        state.write_u8(0xFF);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn folded_labels_compare_and_hash_as_dns_labels_do() {
        use std::hash::BuildHasher;
        let hasher = std::collections::hash_map::RandomState::new();
        let same = [(&b"Web-0"[..], &b"web-0"[..]), (b"WEB", b"web"), (b"", b"")];
        for (a, b) in same {
            assert_eq!(Folded(a), Folded(b));
            assert_eq!(hasher.hash_one(Folded(a)), hasher.hash_one(Folded(b)));
        }
        assert_ne!(Folded(b"web-0"), Folded(b"web-1"));
        assert_ne!(Folded(b"web"), Folded(b"web-"));
        let long = [b'A'; 100];
        assert_eq!(
            hasher.hash_one(Folded(&long)),
            hasher.hash_one(Folded(&[b'a'; 100]))
        );
    }

    #[test]
    fn srv_targets_differing_in_case_are_one_target() {
        use crate::cluster::ClusterZone;
        let answerer = ClusterAnswerer::new(
            super::super::answer::tests::settings(),
            Arc::new(ClusterZone::new()),
        );
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let candidates = |targets: &[(&str, &str)]| {
            targets
                .iter()
                .map(|(t, a)| SrvCandidate {
                    target: n(t),
                    port: 80,
                    glue: ip(a),
                })
                .collect::<Vec<_>>()
        };
        let owner = n("_http._tcp.h.ns.svc.cluster.local.");
        let case = [
            ("web.h.ns.svc.cluster.local.", "10.0.0.1"),
            ("WEB.h.ns.svc.cluster.local.", "10.0.0.1"),
            ("web.h.ns.svc.cluster.local.", "10.0.0.2"),
            ("db.h.ns.svc.cluster.local.", "10.0.0.3"),
        ];
        // Four candidates are compared pairwise, more through hash sets: the same answer,
        // with the extra distinct targets after it.
        let extra = [
            ("e1.h.ns.svc.cluster.local.", "10.0.0.4"),
            ("e2.h.ns.svc.cluster.local.", "10.0.0.5"),
            ("E1.h.ns.svc.cluster.local.", "10.0.0.4"),
            ("e2.h.ns.svc.cluster.local.", "10.0.0.6"),
        ];
        for with_extra in [false, true] {
            let mut list = case.to_vec();
            if with_extra {
                list.extend(extra);
            }
            let res = answerer.srv(&owner, candidates(&list));
            // Weight from all candidates; targets once; glue per (target, address).
            let w = 100 / list.len();
            let mut srv = vec![
                format!("0 {w} 80 web.h.ns.svc.cluster.local."),
                format!("0 {w} 80 db.h.ns.svc.cluster.local."),
            ];
            let mut glue = vec![
                "web.h.ns.svc.cluster.local. 10.0.0.1",
                "web.h.ns.svc.cluster.local. 10.0.0.2",
                "db.h.ns.svc.cluster.local. 10.0.0.3",
            ];
            if with_extra {
                srv.push(format!("0 {w} 80 e1.h.ns.svc.cluster.local."));
                srv.push(format!("0 {w} 80 e2.h.ns.svc.cluster.local."));
                glue.extend([
                    "e1.h.ns.svc.cluster.local. 10.0.0.4",
                    "e2.h.ns.svc.cluster.local. 10.0.0.5",
                    "e2.h.ns.svc.cluster.local. 10.0.0.6",
                ]);
            }
            let got: Vec<String> = res.answers.iter().map(|r| r.data.to_string()).collect();
            assert_eq!(got, srv);
            let got: Vec<String> = res
                .additional
                .iter()
                .map(|r| format!("{} {}", r.name, r.data))
                .collect();
            assert_eq!(got, glue);
        }
    }
}
