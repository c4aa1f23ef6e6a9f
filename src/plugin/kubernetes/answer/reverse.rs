//! Reverse names: PTR for ClusterIPs and endpoint addresses under `in-addr.arpa.` and
//! `ip6.arpa.`.

use crate::proto::Visibility;
use std::net::IpAddr;

use hickory_proto::rr::rdata::PTR;
use hickory_proto::rr::{Name, RData, RecordType};

use super::addr::parse_reverse;
use super::answerer::{ClusterAnswerer, Resolution, name_under};
use crate::proto::Records;

impl ClusterAnswerer {
    pub(super) fn resolve_reverse(
        &self,
        owner: &Name,
        labels: &[&str],
        keep: usize,
        zone: &Name,
        qtype: RecordType,
        view: Option<&dyn Visibility>,
    ) -> Resolution {
        if keep == 0 {
            return match qtype {
                RecordType::SOA => Resolution::records(vec![self.soa(zone, owner)]),
                RecordType::NS => self.ns_answer(owner, &self.settings.primary),
                _ => Resolution::nodata(),
            };
        }
        let Some(ip) = parse_reverse(labels) else {
            return Resolution::nxdomain();
        };
        let targets = self.ptr_targets(ip, view);
        if targets.is_empty() {
            return Resolution::nxdomain();
        }
        if qtype != RecordType::PTR {
            return Resolution::nodata();
        }
        let ttl = self.settings.ttl;
        Resolution::records(Records::with_owner(
            owner,
            ttl,
            targets.into_iter().map(|t| RData::PTR(PTR(t))),
        ))
    }

    /// PTR targets for `ip` (§4.5): the first service owning it as a ClusterIP, else every
    /// (service, endpoint name) owning it as a ready endpoint address.
    /// An address a namespace hidden by the client's policy (`view`) holds is one no Service
    /// holds for it.
    pub(super) fn ptr_targets(&self, ip: IpAddr, view: Option<&dyn Visibility>) -> Vec<Name> {
        let allowed = |ns: &str| {
            (self.settings.namespaces.is_empty() || self.settings.namespaces.iter().any(|n| n == ns))
                && view.is_none_or(|v| v.sees_namespace(ns))
        };
        let primary = self.primary();
        let owners = self.zone.reverse(&ip);
        if let Some(o) = owners.iter().find(|o| o.cluster_ip && allowed(o.namespace())) {
            let (namespace, service) = (o.namespace(), o.service());
            let target = match self.zone.service(namespace, service) {
                Some(entry) => self
                    .with_service_names(&entry, namespace, service, primary, |names| names.service.clone()),
                None => name_under(&[service, namespace, "svc"], primary),
            };
            return target.into_iter().collect();
        }
        if self.settings.noendpoints {
            return Vec::new();
        }
        let mut out: Vec<Name> = Vec::new();
        for o in owners.iter().filter(|o| !o.cluster_ip && allowed(o.namespace())) {
            let Some(entry) = self.zone.service(o.namespace(), o.service()) else {
                continue;
            };
            self.with_service_names(&entry, o.namespace(), o.service(), primary, |names| {
                let endpoints = self.endpoint_names(&entry, names);
                let addresses = Self::ready_addresses(&entry).zip(endpoints.iter());
                for ((_, _, addr), name) in addresses {
                    if *addr == ip
                        && let Some((t, _)) = name
                        && !out.contains(t)
                    {
                        out.push(t.clone());
                    }
                }
            });
        }
        out
    }
}
