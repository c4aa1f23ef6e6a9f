//! Service names: a Service's A/AAAA (ClusterIP, or one record per ready endpoint when
//! headless), ExternalName CNAMEs and their in-zone chase, endpoint hostnames, and SRV for its
//! ports.

use crate::proto::Visibility;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{CNAME, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::addr::dashed;
use super::answerer::{
    ClusterAnswerer, MAX_CNAME_CHAIN, Resolution, SrvCandidate, address_data, address_record, family_matches,
    name_under, spelt_zone, with_lower_labels,
};
use super::kept::{EndpointNames, ServiceNames};
use super::pick::{ClientUse, Pick};
use crate::cluster::model::{EndpointInfo, PortInfo, PortProtocol, ServiceInfo, ServiceKind, SliceInfo};
use crate::cluster::zone::ServiceEntry;
use crate::proto::Records;

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
    pub(super) fn addresses(&self, owner: &Name, qtype: RecordType, ips: &[IpAddr]) -> Resolution {
        // Each address at its first place in `ips`: few addresses, no set to allocate.
        let first = ips
            .iter()
            .enumerate()
            .filter(|&(i, ip)| family_matches(qtype, ip) && !ips[..i].contains(ip))
            .map(|(_, ip)| address_data(*ip));
        Resolution::records(Records::with_owner(owner, self.settings.ttl, first))
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

    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve_service(
        &self,
        owner: &Name,
        zone: &Name,
        namespace: &str,
        service: &str,
        qtype: RecordType,
        depth: usize,
        client: Option<IpAddr>,
        view: Option<&dyn Visibility>,
    ) -> Resolution {
        let Some(entry) = self.visible_service(namespace, service) else {
            return Resolution::nxdomain();
        };
        let Some(svc) = entry.service.as_ref() else {
            return Resolution::nxdomain();
        };
        if svc.kind == ServiceKind::Headless
            && matches!(qtype, RecordType::A | RecordType::AAAA | RecordType::SRV)
        {
            // The client's place, for a Service with a `trafficDistribution` (`topology`).
            let mut place = None;
            let (pick, used) = self.client_pick(&entry, client, &mut place);
            let mut res = if qtype == RecordType::SRV {
                let zone_spelt = spelt_zone(owner, zone);
                self.with_srv_candidates(&entry, svc, &zone_spelt, |_| true, pick, |c| self.srv(owner, c))
            } else {
                self.picked_addresses(owner, &entry, pick, qtype)
            };
            res.client = used;
            return res;
        }
        match (&svc.kind, qtype) {
            (ServiceKind::ClusterIp(ips), RecordType::A | RecordType::AAAA) => {
                self.addresses(owner, qtype, ips)
            }
            (ServiceKind::ClusterIp(_), RecordType::SRV) => {
                let zone_spelt = spelt_zone(owner, zone);
                self.with_srv_candidates(
                    &entry,
                    svc,
                    &zone_spelt,
                    |_| true,
                    Pick::All,
                    |c| self.srv(owner, c),
                )
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
                self.chase(owner, target, qtype, depth, view)
            }
            _ => Resolution::nodata(),
        }
    }

    /// CNAME to an ExternalName target, followed by the target's records when it is in one of
    /// our zones (RFC 1034 rules: the target's rcode, NODATA when it lacks the type).
    pub(super) fn chase(
        &self,
        owner: &Name,
        target: &str,
        qtype: RecordType,
        depth: usize,
        view: Option<&dyn Visibility>,
    ) -> Resolution {
        let Ok(target) = Name::from_ascii(target) else {
            return Resolution::nxdomain();
        };
        let cname = Record::from_rdata(
            owner.clone(),
            self.settings.ttl,
            RData::CNAME(CNAME(target.clone())),
        );
        // `!=` on names ignores case.
        let in_zone = with_lower_labels(&target, |lower| {
            let zone = self.zone_index(lower)?;
            Some(
                (depth < MAX_CNAME_CHAIN && target != *owner)
                    .then(|| self.resolve(&target, lower, zone, qtype, depth + 1, None, view)),
            )
        });
        match in_zone {
            Some(Some(mut tail)) => {
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
                chase_target: Some(target),
                ..Resolution::records(vec![cname])
            },
        }
    }

    /// Runs `f` on the [`ServiceNames`] of `entry` (the Service `name` in `namespace`) under
    /// `zone_spelt`: those kept with the entry when `zone_spelt` is one of this answerer's
    /// configured zones (a lower-case question spells the zone as configured, see
    /// [`spelt_zone`]), built for this answer alone otherwise.
    pub(super) fn with_service_names<R>(
        &self,
        entry: &ServiceEntry,
        namespace: &str,
        name: &str,
        zone_spelt: &Name,
        f: impl FnOnce(&ServiceNames) -> R,
    ) -> R {
        let key = self.configured_zone(zone_spelt).map(|zone| self.kept_keys[zone]);
        let service = || name_under(&[name, namespace, "svc"], zone_spelt);
        // The service's name, built but refused by the budget: this answer uses it.
        let mut refused = None;
        let kept = key.and_then(|key| {
            let any = match entry.derived.get() {
                Some(any) => any,
                None => match ServiceNames::kept(key, service(), &self.kept) {
                    Ok(names) => entry.derived.get_or_init(|| Box::new(names)),
                    // Not kept past the budget: the next question tries again.
                    Err(name) => {
                        refused = Some(name);
                        return None;
                    }
                },
            };
            any.downcast_ref::<ServiceNames>()
                // Built under another zone, or with other endpoint naming (another block).
                .filter(|names| names.key == Some(key))
        });
        match kept {
            Some(names) => f(names),
            None => f(&ServiceNames::fresh(refused.unwrap_or_else(service))),
        }
    }

    /// The endpoint names of `names` (built the first time they are asked for), per ready
    /// address of `entry`, in [`Self::ready_addresses`] order: the name and its id (equal ids:
    /// equal names, ignoring case); `None` where the endpoint label is not a DNS label.
    pub(super) fn endpoint_names<'n>(
        &self,
        entry: &ServiceEntry,
        names: &'n ServiceNames,
    ) -> EndpointNames<'n> {
        names.endpoints(|| {
            let Some(service) = &names.service else {
                return Vec::new();
            };
            let mut ids: HashMap<String, u32> = HashMap::new();
            Self::ready_addresses(entry)
                .map(|(_, ep, ip)| {
                    let label = self.endpoint_name(ep, ip);
                    name_under(&[&label], service).map(|target| {
                        let next = u32::try_from(ids.len()).unwrap_or(u32::MAX);
                        (target, *ids.entry(label.to_ascii_lowercase()).or_insert(next))
                    })
                })
                .collect()
        })
    }

    /// Runs `answer` on the SRV candidates of `entry`: ClusterIP services give (port ×
    /// ClusterIP) with the service name as target; headless services give (ready address ×
    /// slice port) with endpoint names. Candidates borrow the [`ServiceNames`].
    pub(super) fn with_srv_candidates<R>(
        &self,
        entry: &ServiceEntry,
        svc: &ServiceInfo,
        zone_spelt: &Name,
        port_filter: impl Fn(&PortInfo) -> bool,
        pick: Pick<'_>,
        answer: impl FnOnce(&[SrvCandidate<'_>]) -> R,
    ) -> R {
        self.with_service_names(entry, &svc.namespace, &svc.name, zone_spelt, |names| {
            self.srv_candidates(entry, svc, names, port_filter, pick, answer)
        })
    }

    fn srv_candidates<R>(
        &self,
        entry: &ServiceEntry,
        svc: &ServiceInfo,
        names: &ServiceNames,
        port_filter: impl Fn(&PortInfo) -> bool,
        pick: Pick<'_>,
        answer: impl FnOnce(&[SrvCandidate<'_>]) -> R,
    ) -> R {
        let endpoints = match svc.kind {
            ServiceKind::Headless => self.endpoint_names(entry, names),
            _ => EndpointNames::Kept(&[]),
        };
        // One candidate per address and port: an address's slice usually has one port.
        let mut out = Vec::with_capacity(match &svc.kind {
            ServiceKind::ClusterIp(ips) => ips.len() * svc.ports.len(),
            _ => endpoints.len(),
        });
        match &svc.kind {
            ServiceKind::ClusterIp(ips) => {
                let Some(target) = &names.service else {
                    return answer(&out);
                };
                for p in svc.ports.iter().filter(|p| port_filter(p)) {
                    let Some(port) = p.port else { continue };
                    for ip in ips {
                        out.push(SrvCandidate {
                            target,
                            id: 0,
                            port,
                            glue: *ip,
                        });
                    }
                }
            }
            ServiceKind::Headless => {
                let addresses = Self::ready_addresses(entry).zip(endpoints.iter());
                for ((slice, ep, ip), endpoint) in addresses {
                    let Some((target, id)) = endpoint else { continue };
                    if !pick.keeps(ep) {
                        continue;
                    }
                    let ports = slice.ports.iter().filter(|p| port_filter(p));
                    for port in ports.filter_map(|p| p.port) {
                        out.push(SrvCandidate {
                            target,
                            id: *id,
                            port,
                            glue: *ip,
                        });
                    }
                }
            }
            ServiceKind::ExternalName(_) => {}
        }
        answer(&out)
    }

    /// SRV records from candidates: priority 0, weight floor(100/N) (at least 1) with N counted
    /// before duplicates (by target and port) are removed; glue per (target, address).
    pub(super) fn srv(&self, owner: &Name, candidates: &[SrvCandidate<'_>]) -> Resolution {
        let ttl = self.settings.ttl;
        let n = candidates.len().max(1);
        let weight = u16::try_from(100 / n).unwrap_or(0).max(1);
        // Targets are told apart by their ids (equal ids: the same name, ignoring case).
        let keep = first_of_each(candidates);
        let mut res = Resolution::records(Records::with_owner(
            owner,
            ttl,
            candidates
                .iter()
                .zip(&keep)
                .filter(|(_, (srv, _))| *srv)
                .map(|(c, _)| RData::SRV(SRV::new(0, weight, c.port, c.target.clone()))),
        ));
        res.additional.reserve(candidates.len());
        for (c, _) in candidates.iter().zip(&keep).filter(|(_, (_, glue))| *glue) {
            res.additional.push(address_record(c.target, ttl, c.glue));
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
        self.addresses(owner, qtype, &ips)
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
        client: Option<IpAddr>,
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
        let wanted = |p: &PortInfo| p.protocol == proto && &*p.name == port;
        // A headless Service's port names list its endpoints, narrowed as its own name's SRV
        // is (`topology`); whether the port exists does not depend on who asks.
        let mut place = None;
        let (pick, used) = if svc.kind == ServiceKind::Headless && qtype == RecordType::SRV {
            self.client_pick(&entry, client, &mut place)
        } else {
            (Pick::All, ClientUse::default())
        };
        let mut res =
            self.with_srv_candidates(&entry, svc, zone_spelt, wanted, pick, |candidates| match qtype {
                _ if candidates.is_empty() => Resolution::nxdomain(),
                RecordType::SRV => self.srv(owner, candidates),
                _ => Resolution::nodata(),
            });
        res.client = used;
        res
    }
}

/// For each SRV candidate: is it the first with its (target, port), and the first with its
/// (target, address)? Targets are told apart by their ids. A few candidates (a ClusterIP
/// service's ports) are compared pairwise; more (a headless service's endpoints) are all
/// first when no id repeats (a bitmap of ids tells), and go through hash sets otherwise.
fn first_of_each(candidates: &[SrvCandidate<'_>]) -> Vec<(bool, bool)> {
    if candidates.len() <= 8 {
        return candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let before = &candidates[..i];
                (
                    !before.iter().any(|b| b.port == c.port && b.id == c.id),
                    !before.iter().any(|b| b.glue == c.glue && b.id == c.id),
                )
            })
            .collect();
    }
    // A headless service whose slices have one port: every endpoint name once, so every
    // candidate is the first of its kind. Ids are dense (0 up to the endpoints' count).
    let mut seen_ids: Vec<u64> = Vec::new();
    let distinct = candidates.iter().all(|c| {
        let (word, bit) = ((c.id / 64) as usize, 1u64 << (c.id % 64));
        if word >= 1 << 12 {
            // Ids past 262,144: not worth a bitmap; the hash sets decide.
            return false;
        }
        if word >= seen_ids.len() {
            seen_ids.resize(word + 1, 0);
        }
        let fresh = seen_ids[word] & bit == 0;
        seen_ids[word] |= bit;
        fresh
    });
    if distinct {
        return vec![(true, true); candidates.len()];
    }
    let hasher = foldhash::fast::RandomState::default;
    let mut seen_srv = HashSet::with_capacity_and_hasher(candidates.len(), hasher());
    let mut seen_glue = HashSet::with_capacity_and_hasher(candidates.len(), hasher());
    candidates
        .iter()
        .map(|c| (seen_srv.insert((c.id, c.port)), seen_glue.insert((c.id, c.glue))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    /// A headless service `h` in `ns` with one slice of port 80 holding `endpoints`
    /// (hostname, address), in a synced zone.
    fn headless(endpoints: &[(&str, &str)]) -> ClusterAnswerer {
        use crate::cluster::ClusterZone;
        use crate::cluster::model::ServiceKind;
        let zone = ClusterZone::new();
        zone.apply_namespace("ns".into());
        zone.apply_service(ServiceInfo {
            name: "h".into(),
            namespace: "ns".into(),
            kind: ServiceKind::Headless,
            ports: vec![],
            external: None,
            traffic: None,
        });
        zone.apply_slice(slice(
            endpoints
                .iter()
                .map(|(host, ip)| {
                    let ip: IpAddr = ip.parse().unwrap();
                    EndpointInfo::new(vec![ip].into(), Some(host), None)
                })
                .collect(),
        ));
        zone.set_synced(true);
        ClusterAnswerer::new(super::super::answerer::tests::settings(), Arc::new(zone))
    }

    /// Slice `h-1` of service `h` in `ns`, port 80 `http`, holding `endpoints`.
    fn slice(endpoints: Vec<EndpointInfo>) -> crate::cluster::model::SliceInfo {
        crate::cluster::model::SliceInfo {
            name: "h-1".into(),
            namespace: "ns".into(),
            service: Some("h".into()),
            endpoints,
            ports: vec![PortInfo {
                name: "http".into(),
                protocol: PortProtocol::Tcp,
                port: Some(80),
            }],
        }
    }

    fn srv_and_glue(a: &ClusterAnswerer, q: &str) -> (Vec<String>, Vec<String>) {
        let crate::plugin::kubernetes::answer::Outcome::Answer(ans) = a.answer(&n(q), RecordType::SRV) else {
            panic!("fell through");
        };
        // SRV records are all the question's: marked so for the encoder.
        assert!(ans.answers.share_one_owner());
        assert!(ans.answers.iter().all(|r| r.name.eq_case(&n(q))));
        let srv = ans.answers.iter().map(|r| r.data.to_string()).collect();
        let glue = ans
            .additional
            .iter()
            .map(|r| format!("{} {}", r.name, r.data))
            .collect();
        (srv, glue)
    }

    /// A headless service's addresses are one owner's records, marked so for the encoder.
    #[test]
    fn headless_addresses_are_marked_as_one_owners() {
        let a = headless(&[("web", "10.0.0.1"), ("db", "10.0.0.2"), ("x", "10.0.0.3")]);
        let q = n("H.ns.svc.cluster.local.");
        let crate::plugin::kubernetes::answer::Outcome::Answer(ans) = a.answer(&q, RecordType::A) else {
            panic!("fell through");
        };
        assert_eq!(ans.answers.len(), 3);
        assert!(ans.answers.share_one_owner());
        assert!(ans.answers.iter().all(|r| r.name.eq_case(&q)));
    }

    /// One target per endpoint name and one glue record per (name, address), whether the
    /// candidates are compared pairwise (up to 8) or through hash sets (more).
    #[test]
    fn srv_targets_and_glue_appear_once() {
        let case = [
            ("web", "10.0.0.1"),
            ("web", "10.0.0.1"),
            ("web", "10.0.0.2"),
            ("db", "10.0.0.3"),
        ];
        let extra = [
            ("e1", "10.0.0.4"),
            ("e2", "10.0.0.5"),
            ("e1", "10.0.0.4"),
            ("e2", "10.0.0.6"),
            ("e3", "10.0.0.7"),
            ("e3", "10.0.0.7"),
        ];
        for with_extra in [false, true] {
            let mut list = case.to_vec();
            if with_extra {
                list.extend(extra);
            }
            let a = headless(&list);
            let (srv, glue) = srv_and_glue(&a, "_http._tcp.h.ns.svc.cluster.local.");
            // Weight from all candidates; targets once; glue per (target, address).
            let w = 100 / list.len();
            let mut want_srv = vec![
                format!("0 {w} 80 web.h.ns.svc.cluster.local."),
                format!("0 {w} 80 db.h.ns.svc.cluster.local."),
            ];
            let mut want_glue = vec![
                "web.h.ns.svc.cluster.local. 10.0.0.1",
                "web.h.ns.svc.cluster.local. 10.0.0.2",
                "db.h.ns.svc.cluster.local. 10.0.0.3",
            ];
            if with_extra {
                for t in ["e1", "e2", "e3"] {
                    want_srv.push(format!("0 {w} 80 {t}.h.ns.svc.cluster.local."));
                }
                want_glue.extend([
                    "e1.h.ns.svc.cluster.local. 10.0.0.4",
                    "e2.h.ns.svc.cluster.local. 10.0.0.5",
                    "e2.h.ns.svc.cluster.local. 10.0.0.6",
                    "e3.h.ns.svc.cluster.local. 10.0.0.7",
                ]);
            }
            assert_eq!(srv, want_srv);
            assert_eq!(glue, want_glue);
        }
    }

    fn ptr(a: &ClusterAnswerer, q: &str) -> Vec<String> {
        let crate::plugin::kubernetes::answer::Outcome::Answer(ans) = a.answer(&n(q), RecordType::PTR) else {
            panic!("fell through");
        };
        ans.answers.iter().map(|r| r.data.to_string()).collect()
    }

    /// More than 8 candidates, none repeating a name: every one is an SRV record and a glue
    /// record, in endpoint order (the bitmap path of `first_of_each`).
    #[test]
    fn many_distinct_srv_targets_are_all_kept() {
        let hosts: Vec<(String, String)> = (0..12)
            .map(|i| (format!("h{i}"), format!("10.0.1.{i}")))
            .collect();
        let list: Vec<(&str, &str)> = hosts.iter().map(|(h, a)| (h.as_str(), a.as_str())).collect();
        let a = headless(&list);
        let (srv, glue) = srv_and_glue(&a, "_http._tcp.h.ns.svc.cluster.local.");
        let want_srv: Vec<String> = (0..12)
            .map(|i| format!("0 8 80 h{i}.h.ns.svc.cluster.local."))
            .collect();
        let want_glue: Vec<String> = (0..12)
            .map(|i| format!("h{i}.h.ns.svc.cluster.local. 10.0.1.{i}"))
            .collect();
        assert_eq!(srv, want_srv);
        assert_eq!(glue, want_glue);
    }

    /// Two answerers over one zone with different endpoint naming (two server blocks): each
    /// answers with its own names, whichever of them kept its names with the entry first.
    #[test]
    fn answerers_sharing_a_zone_keep_their_own_names() {
        let plain = headless(&[("web", "10.0.0.1")]);
        plain.zone().apply_slice(slice(vec![EndpointInfo::new(
            vec!["10.0.0.1".parse::<IpAddr>().unwrap()].into(),
            None,
            Some("web-pod"),
        )]));
        let mut s = super::super::answerer::tests::settings();
        s.endpoint_pod_names = true;
        let pods = ClusterAnswerer::new(s, plain.zone().clone());
        let q = "_http._tcp.h.ns.svc.cluster.local.";
        for _ in 0..2 {
            assert_eq!(
                srv_and_glue(&plain, q).0,
                ["0 100 80 10-0-0-1.h.ns.svc.cluster.local."]
            );
            assert_eq!(
                srv_and_glue(&pods, q).0,
                ["0 100 80 web-pod.h.ns.svc.cluster.local."]
            );
            assert_eq!(
                ptr(&pods, "1.0.0.10.in-addr.arpa."),
                ["web-pod.h.ns.svc.cluster.local."]
            );
            assert_eq!(
                ptr(&plain, "1.0.0.10.in-addr.arpa."),
                ["10-0-0-1.h.ns.svc.cluster.local."]
            );
        }
    }

    /// The kept names under concurrent writers: readers on several threads ask SRV and PTR
    /// while a writer swaps the slice between two sets of endpoint names. Every answer is
    /// made from one version of the entry (all targets from one set), and once the writer
    /// stops, every reader sees the last set: nothing derived from an old version survives.
    #[test]
    fn kept_names_under_concurrent_writers_are_never_stale_or_mixed() {
        let endpoints = |prefix: &str| -> Vec<EndpointInfo> {
            (1..=5)
                .map(|i| {
                    let ip: IpAddr = format!("10.0.0.{i}").parse().unwrap();
                    EndpointInfo::new(vec![ip].into(), Some(&format!("{prefix}{i}")), None)
                })
                .collect()
        };
        let a = headless(&[]);
        a.zone().apply_slice(slice(endpoints("a")));
        let q = "_http._tcp.h.ns.svc.cluster.local.";
        let writes = 2_000;
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for k in 0..writes {
                    let prefix = if k % 2 == 0 { "b" } else { "a" };
                    a.zone().apply_slice(slice(endpoints(prefix)));
                }
                done.store(true, std::sync::atomic::Ordering::Release);
            });
            for _ in 0..3 {
                scope.spawn(|| {
                    let mut asked = 0;
                    while !done.load(std::sync::atomic::Ordering::Acquire) || asked < 50 {
                        let (srv, glue) = srv_and_glue(&a, q);
                        assert_eq!(srv.len(), 5, "{srv:?}");
                        assert_eq!(glue.len(), 5, "{glue:?}");
                        let set = |t: &str| t.rsplit(' ').next().unwrap().as_bytes()[0];
                        let first = set(&srv[0]);
                        assert!(srv.iter().all(|t| set(t) == first), "mixed: {srv:?}");
                        let p = ptr(&a, "3.0.0.10.in-addr.arpa.");
                        assert!(
                            p == ["a3.h.ns.svc.cluster.local."] || p == ["b3.h.ns.svc.cluster.local."],
                            "{p:?}"
                        );
                        asked += 1;
                        assert!(asked < 1_000_000, "the writer never finished");
                    }
                });
            }
        });
        // The last write (odd) put back set "a".
        let (srv, _) = srv_and_glue(&a, q);
        assert!(srv.iter().all(|t| t.contains(" a")), "{srv:?}");
        assert_eq!(ptr(&a, "3.0.0.10.in-addr.arpa."), ["a3.h.ns.svc.cluster.local."]);
        // The budget, charged and refunded by racing readers and swapped entries, holds
        // exactly what the live entry keeps: nothing once it changes and nobody asked again.
        assert!(a.kept.used() > 0);
        a.zone().apply_slice(slice(endpoints("b")));
        assert_eq!(a.kept.used(), 0);
    }

    /// Past the budget, names are built for each answer: the same answers, nothing kept, and
    /// what was kept is given back when its entry changes.
    #[test]
    fn names_past_the_budget_are_built_for_each_answer() {
        use crate::plugin::kubernetes::answer::kept::KeptBudget;
        let endpoints = [("web", "10.0.0.1"), ("db", "10.0.0.2")];
        let q = "_http._tcp.h.ns.svc.cluster.local.";
        let want = srv_and_glue(&headless(&endpoints), q);
        let none = KeptBudget::new(0, None);
        let a = headless(&endpoints).with_kept_budget(none.clone());
        let entry = || a.zone().service("ns", "h").unwrap();
        for _ in 0..2 {
            assert_eq!(srv_and_glue(&a, q), want);
            assert_eq!(ptr(&a, "2.0.0.10.in-addr.arpa."), ["db.h.ns.svc.cluster.local."]);
        }
        assert!(format!("{:?}", entry().derived).contains("empty"));
        assert_eq!(none.used(), 0);
        // Room for the service's name but not its endpoints' (a few hundred bytes each): the
        // service's name is kept, the endpoint names are built for each answer.
        let some = KeptBudget::new(400, None);
        let b = headless(&endpoints).with_kept_budget(some.clone());
        let entry = || b.zone().service("ns", "h").unwrap();
        for _ in 0..2 {
            assert_eq!(srv_and_glue(&b, q), want);
        }
        assert!(format!("{:?}", entry().derived).contains("set"));
        assert!(some.used() > 0 && some.used() <= 400, "{}", some.used());
        // The entry changes: what it kept is given back.
        b.zone().apply_slice(slice(vec![EndpointInfo::new(
            vec!["10.0.0.3".parse::<IpAddr>().unwrap()].into(),
            Some("api"),
            None,
        )]));
        assert_eq!(some.used(), 0);
        assert_eq!(srv_and_glue(&b, q).0, ["0 100 80 api.h.ns.svc.cluster.local."]);
    }

    /// The names kept with an entry serve SRV questions in the configured spelling and PTR
    /// questions; a question that spells the zone otherwise gets its own spelling, and a
    /// changed entry starts over.
    #[test]
    fn kept_names_follow_the_entry_and_the_spelling() {
        let a = headless(&[("web", "10.0.0.1")]);
        let entry = || a.zone().service("ns", "h").unwrap();
        assert!(format!("{:?}", entry().derived).contains("empty"));
        let q = "_http._tcp.h.ns.svc.cluster.local.";
        let (srv, _) = srv_and_glue(&a, q);
        assert_eq!(srv, ["0 100 80 web.h.ns.svc.cluster.local."]);
        assert!(format!("{:?}", entry().derived).contains("set"));
        // Asked again: the kept names give the same answer, and the PTR is made from them.
        assert_eq!(srv_and_glue(&a, q).0, srv);
        assert_eq!(ptr(&a, "1.0.0.10.in-addr.arpa."), ["web.h.ns.svc.cluster.local."]);
        // Another spelling of the zone: targets in it, and the kept names are not replaced.
        let (srv, glue) = srv_and_glue(&a, "_http._tcp.h.ns.svc.Cluster.LOCAL.");
        assert_eq!(srv, ["0 100 80 web.h.ns.svc.Cluster.LOCAL."]);
        assert_eq!(glue, ["web.h.ns.svc.Cluster.LOCAL. 10.0.0.1"]);
        assert_eq!(srv_and_glue(&a, q).0, ["0 100 80 web.h.ns.svc.cluster.local."]);
        // The slice changes: the new entry starts without names and answers from its endpoints.
        a.zone().apply_slice(slice(vec![EndpointInfo::new(
            vec!["10.0.0.9".parse::<IpAddr>().unwrap()].into(),
            Some("api"),
            None,
        )]));
        assert!(format!("{:?}", entry().derived).contains("empty"));
        assert_eq!(ptr(&a, "9.0.0.10.in-addr.arpa."), ["api.h.ns.svc.cluster.local."]);
        let (srv, glue) = srv_and_glue(&a, q);
        assert_eq!(srv, ["0 100 80 api.h.ns.svc.cluster.local."]);
        assert_eq!(glue, ["api.h.ns.svc.cluster.local. 10.0.0.9"]);
    }
}
