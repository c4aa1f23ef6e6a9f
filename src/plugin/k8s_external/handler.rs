//! The `k8s_external` plugin's handler: answers names under its external zones from the
//! cluster zone's Services (see the module docs of [`super`]). Names outside its zones go to
//! the next plugin; a name that does not exist is NXDOMAIN with the zone's SOA, unless
//! `fallthrough` covers it.

use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, SOA, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::config::K8sExternalConfig;
use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::cluster::ClusterZone;
use crate::cluster::model::ServiceKind;
use crate::cluster::zone::ServiceEntry;
use crate::proto::{Answer, ChangeCounter, FlagEdit, Question, Reply};

/// The plugin in a block's chain.
#[derive(Debug)]
pub struct K8sExternal {
    config: K8sExternalConfig,
    zone: Arc<ClusterZone>,
    self_ips: Vec<IpAddr>,
}

/// What a name under an external zone is.
enum Found {
    /// Records of the asked type (and glue).
    Records(Vec<Record>, Vec<Record>),
    /// The name exists, not with that type.
    NoData,
    /// The name does not exist.
    NxDomain,
}

impl K8sExternal {
    /// The plugin for `config`, answering from `zone`; `self_ips` are this server's own.
    pub fn new(config: K8sExternalConfig, zone: Arc<ClusterZone>, self_ips: Vec<IpAddr>) -> Self {
        Self {
            config,
            zone,
            self_ips,
        }
    }

    fn ttl(&self) -> u32 {
        self.config.ttl
    }

    fn soa(&self, zone: &Name, owner: &Name) -> Record {
        let apex = Name::from_ascii(&self.config.apex)
            .ok()
            .and_then(|a| a.append_domain(zone).ok())
            .unwrap_or_else(|| zone.clone());
        let hostmaster = Name::from_ascii("hostmaster")
            .ok()
            .and_then(|h| h.append_domain(&apex).ok())
            .unwrap_or_else(|| apex.clone());
        let ttl = self.ttl();
        let soa = SOA::new(apex, hostmaster, self.zone.serial(), 7200, 1800, 86400, ttl);
        Record::from_rdata(owner.clone(), ttl, RData::SOA(soa))
    }

    /// `ns1.<apex>.<zone>`.
    fn ns_name(&self, zone: &Name) -> Option<Name> {
        Name::from_ascii(format!("ns1.{}", self.config.apex))
            .ok()?
            .append_domain(zone)
            .ok()
    }

    /// This server's external addresses: those of the Services whose ClusterIPs or endpoints
    /// hold one of its own IPs.
    fn own_addresses(&self) -> Vec<IpAddr> {
        let mut out = Vec::new();
        for ip in &self.self_ips {
            for owner in self.zone.reverse(ip) {
                let Some(entry) = self.zone.service(owner.namespace(), owner.service()) else {
                    continue;
                };
                let ext = entry.service.as_ref().and_then(|s| s.external.as_ref());
                for a in ext.map(|e| e.ips.as_slice()).unwrap_or_default() {
                    if !out.contains(a) {
                        out.push(*a);
                    }
                }
            }
        }
        out
    }

    fn address_records(&self, owner: &Name, ips: &[IpAddr], qtype: RecordType) -> Vec<Record> {
        ips.iter()
            .filter_map(|ip| match (ip, qtype) {
                (IpAddr::V4(v4), RecordType::A) => Some(RData::A(A(*v4))),
                (IpAddr::V6(v6), RecordType::AAAA) => Some(RData::AAAA(AAAA(*v6))),
                _ => None,
            })
            .map(|data| Record::from_rdata(owner.clone(), self.ttl(), data))
            .collect()
    }

    /// The addresses and hostnames `entry` is served with here: its external ones, or with
    /// `headless` a headless Service's ready endpoints. `None` when it is not served.
    fn served(&self, entry: &ServiceEntry) -> Option<(Vec<IpAddr>, Vec<Name>)> {
        let svc = entry.service.as_ref()?;
        match (&svc.kind, &svc.external) {
            (ServiceKind::ExternalName(_), _) => None,
            (ServiceKind::Headless, _) if self.config.headless => {
                (!entry.ready_ips.is_empty()).then(|| (entry.ready_ips.clone(), Vec::new()))
            }
            (_, Some(ext)) => {
                let hosts = ext
                    .hostnames
                    .iter()
                    .filter_map(|h| Name::from_ascii(&**h).ok())
                    .collect();
                Some((ext.ips.clone(), hosts))
            }
            _ => None,
        }
    }

    fn service(&self, namespace: &str, name: &str) -> Option<Arc<ServiceEntry>> {
        if !self.zone.namespace_exists(namespace) {
            return None;
        }
        self.zone.service(namespace, name)
    }

    /// `<svc>.<ns>.<zone>` for `qtype`, owned by `owner`; `zone_spelt` builds SRV targets.
    fn service_answer(&self, owner: &Name, ns: &str, svc: &str, qtype: RecordType, zone: &Name) -> Found {
        let Some(entry) = self.service(ns, svc) else {
            return Found::NxDomain;
        };
        let Some((ips, hosts)) = self.served(&entry) else {
            return Found::NxDomain;
        };
        let records = match qtype {
            RecordType::A | RecordType::AAAA if !ips.is_empty() => self.address_records(owner, &ips, qtype),
            RecordType::A | RecordType::AAAA | RecordType::CNAME => hosts
                .first()
                .map(|h| {
                    vec![Record::from_rdata(
                        owner.clone(),
                        self.ttl(),
                        RData::CNAME(CNAME(h.clone())),
                    )]
                })
                .unwrap_or_default(),
            RecordType::SRV => return self.srv(owner, &entry, None, &ips, ns, svc, zone),
            _ => Vec::new(),
        };
        if records.is_empty() {
            Found::NoData
        } else {
            Found::Records(records, Vec::new())
        }
    }

    /// SRV records of `entry`'s ports (only `port`/`proto` when given), targets
    /// `<svc>.<ns>.<zone>` with their addresses as glue.
    #[allow(clippy::too_many_arguments)]
    fn srv(
        &self,
        owner: &Name,
        entry: &ServiceEntry,
        port: Option<(&str, &str)>,
        ips: &[IpAddr],
        ns: &str,
        svc: &str,
        zone: &Name,
    ) -> Found {
        let Some(target) = Name::from_ascii(format!("{svc}.{ns}"))
            .ok()
            .and_then(|n| n.append_domain(zone).ok())
        else {
            return Found::NxDomain;
        };
        let ports: Vec<_> = entry
            .service
            .iter()
            .flat_map(|s| s.ports.iter())
            .filter(|p| {
                port.is_none_or(|(name, proto)| {
                    *p.name == *name && format!("{:?}", p.protocol).eq_ignore_ascii_case(proto)
                })
            })
            .filter_map(|p| p.port)
            .collect();
        if ports.is_empty() {
            return if port.is_some() {
                Found::NxDomain
            } else {
                Found::NoData
            };
        }
        let weight = u16::try_from(100 / ports.len()).unwrap_or(1).max(1);
        let records = ports
            .iter()
            .map(|p| {
                Record::from_rdata(
                    owner.clone(),
                    self.ttl(),
                    RData::SRV(SRV::new(0, weight, *p, target.clone())),
                )
            })
            .collect();
        let mut glue = self.address_records(&target, ips, RecordType::A);
        glue.extend(self.address_records(&target, ips, RecordType::AAAA));
        Found::Records(records, glue)
    }

    /// What `labels` (lower-case, left of `zone`, in query order) name.
    fn find(&self, owner: &Name, labels: &[&str], qtype: RecordType, zone: &Name) -> Found {
        let apex = self.config.apex.as_str();
        match labels {
            [] => match qtype {
                RecordType::SOA => Found::Records(vec![self.soa(zone, owner)], Vec::new()),
                RecordType::NS => match self.ns_name(zone) {
                    Some(ns) => {
                        let own = self.own_addresses();
                        let mut glue = self.address_records(&ns, &own, RecordType::A);
                        glue.extend(self.address_records(&ns, &own, RecordType::AAAA));
                        Found::Records(
                            vec![Record::from_rdata(owner.clone(), self.ttl(), RData::NS(NS(ns)))],
                            glue,
                        )
                    }
                    None => Found::NoData,
                },
                _ => Found::NoData,
            },
            [a] if *a == apex => Found::NoData,
            ["ns1", a] if *a == apex => {
                let records = self.address_records(owner, &self.own_addresses(), qtype);
                if records.is_empty() {
                    Found::NoData
                } else {
                    Found::Records(records, Vec::new())
                }
            }
            [svc, ns] => self.service_answer(owner, ns, svc, qtype, zone),
            [port, proto, svc, ns] if port.starts_with('_') && proto.starts_with('_') => {
                let Some(entry) = self.service(ns, svc) else {
                    return Found::NxDomain;
                };
                let Some((ips, _)) = self.served(&entry) else {
                    return Found::NxDomain;
                };
                match self.srv(
                    owner,
                    &entry,
                    Some((&port[1..], &proto[1..])),
                    &ips,
                    ns,
                    svc,
                    zone,
                ) {
                    Found::Records(r, g) if qtype == RecordType::SRV => Found::Records(r, g),
                    Found::Records(..) => Found::NoData,
                    other => other,
                }
            }
            [host, svc, ns] if self.config.headless => self.endpoint(owner, host, ns, svc, qtype),
            _ => Found::NxDomain,
        }
    }

    /// `<hostname>.<svc>.<ns>.<zone>` of a headless Service's ready endpoint.
    fn endpoint(&self, owner: &Name, host: &str, ns: &str, svc: &str, qtype: RecordType) -> Found {
        let Some(entry) = self.service(ns, svc) else {
            return Found::NxDomain;
        };
        if !matches!(
            entry.service.as_ref().map(|s| &s.kind),
            Some(ServiceKind::Headless)
        ) {
            return Found::NxDomain;
        }
        let ips: Vec<IpAddr> = entry
            .slices
            .values()
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.hostname() == Some(host))
            .flat_map(|e| e.addresses.iter().copied())
            .collect();
        if ips.is_empty() {
            return Found::NxDomain;
        }
        let records = self.address_records(owner, &ips, qtype);
        if records.is_empty() {
            Found::NoData
        } else {
            Found::Records(records, Vec::new())
        }
    }

    /// The reply to `q` when a zone of this plugin holds it, or `None` to pass it on.
    fn answer(&self, q: &Question) -> Option<Reply> {
        let lower = q.name.to_lowercase();
        let zone = self
            .config
            .zones
            .iter()
            .filter(|z| z.zone_of(&lower))
            .max_by_key(|z| z.num_labels())?;
        let labels: Vec<&str> = lower
            .iter()
            .map(std::str::from_utf8)
            .collect::<Result<_, _>>()
            .ok()?;
        let keep = labels.len().checked_sub(usize::from(zone.num_labels()))?;
        let zone_spelt = q.name.trim_to(usize::from(zone.num_labels()));
        // A namespace the client's DNS policy hides (`dnspolicy`) holds no name.
        let hidden = keep >= 2 && q.view().is_some_and(|v| !v.sees_namespace(labels[keep - 1]));
        let found = if hidden {
            Found::NxDomain
        } else {
            self.find(&q.name, &labels[..keep], q.qtype, zone)
        };
        let (rcode, answers, additional) = match found {
            Found::Records(records, glue) => (ResponseCode::NoError, records, glue),
            Found::NoData => (ResponseCode::NoError, Vec::new(), Vec::new()),
            Found::NxDomain => {
                let falls = self
                    .config
                    .fallthrough
                    .as_ref()
                    .is_some_and(|zs| zs.is_empty() || zs.iter().any(|z| z.zone_of(&lower)));
                if falls {
                    return None;
                }
                // Before the cluster zone has synced, "no such Service" may be wrong: SERVFAIL,
                // as the kubernetes plugin answers then (and caches do not keep it).
                let rcode = if self.zone.is_synced() {
                    ResponseCode::NXDomain
                } else {
                    ResponseCode::ServFail
                };
                (rcode, Vec::new(), Vec::new())
            }
        };
        let authority = if answers.is_empty() {
            vec![self.soa(zone, &zone_spelt)]
        } else {
            Vec::new()
        };
        Some(Reply::Authoritative(Answer {
            rcode,
            answers: answers.into(),
            authority,
            additional,
            chase_target: None,
            flags: FlagEdit::KEEP,
        }))
    }
}

impl Plugin for K8sExternal {
    fn name(&self) -> &'static str {
        "k8s_external"
    }

    /// Its answers are a function of the question and the cluster zone.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    fn zones(&self) -> Vec<Arc<dyn ChangeCounter>> {
        vec![self.zone.clone() as Arc<dyn ChangeCounter>]
    }

    /// Through the client's DNS policy, when it has one: a name of its zones is then never
    /// kept by a cache.
    fn serve_now(&self, q: &Question, next: &Next<'_>) -> Now {
        if q.view().is_some()
            && self
                .config
                .zones
                .iter()
                .any(|z| crate::cluster::policy::zone_of_ci(z, &q.name))
        {
            next.depends_on_visibility();
        }
        self.answer(q).map_or(Now::Pass, Now::Reply)
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}
