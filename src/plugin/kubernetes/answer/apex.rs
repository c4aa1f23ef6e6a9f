//! The apex: the NS records (the Service that holds this server's own IP) and their glue.

use std::net::IpAddr;

use hickory_proto::rr::rdata::NS;
use hickory_proto::rr::{Name, RData, Record};

use super::answerer::{ClusterAnswerer, Resolution, address_record, name_under};
use crate::cluster::model::ServiceKind;

impl ClusterAnswerer {
    /// NS targets with their glue (§4.9): the Service whose endpoints hold one of this server's
    /// own IPs; else the `kube-dns` Service in `kube-system`, which fronts the cluster DNS
    /// server in every kubeadm-style cluster; else `ns.dns.<zone>` with our own IPs.
    pub(super) fn name_servers(&self, zone_spelt: &Name) -> Vec<(Name, Vec<IpAddr>)> {
        let mut out: Vec<(Name, Vec<IpAddr>)> = Vec::new();
        fn push(out: &mut Vec<(Name, Vec<IpAddr>)>, target: Name, glue: Vec<IpAddr>) {
            if !out.iter().any(|(t, _)| t == &target) {
                out.push((target, glue));
            }
        }
        for ip in &self.settings.self_ips {
            for o in self.zone.reverse(ip).iter().filter(|o| !o.cluster_ip) {
                let Some(entry) = self.zone.service(o.namespace(), o.service()) else {
                    continue;
                };
                match entry.service.as_ref().map(|s| &s.kind) {
                    Some(ServiceKind::ClusterIp(ips)) => {
                        if let Some(t) = name_under(&[o.service(), o.namespace(), "svc"], zone_spelt) {
                            push(&mut out, t, ips.clone());
                        }
                    }
                    Some(ServiceKind::Headless) => {
                        for (_, ep, addr) in Self::ready_addresses(&entry).filter(|(_, _, a)| *a == ip) {
                            let ep_name = self.endpoint_name(ep, addr);
                            if let Some(t) =
                                name_under(&[&ep_name, o.service(), o.namespace(), "svc"], zone_spelt)
                            {
                                push(&mut out, t, vec![*addr]);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        if out.is_empty()
            && let Some(ServiceKind::ClusterIp(ips)) = self
                .zone
                .service("kube-system", "kube-dns")
                .and_then(|e| e.service.as_ref().map(|s| s.kind.clone()))
            && let Some(t) = name_under(&["kube-dns", "kube-system", "svc"], zone_spelt)
        {
            push(&mut out, t, ips);
        }
        if out.is_empty()
            && let Some(t) = name_under(&["ns", "dns"], zone_spelt)
        {
            push(&mut out, t, self.settings.self_ips.clone());
        }
        out
    }

    /// The NS records of a zone apex owned by `owner`, their targets named under `zone` (the
    /// zone as the question spelt it; the primary zone for reverse apexes), with glue.
    pub(super) fn ns_answer(&self, owner: &Name, zone: &Name) -> Resolution {
        let ttl = self.settings.ttl;
        let mut res = Resolution::nodata();
        for (target, glue) in self.name_servers(zone) {
            res.answers.push(Record::from_rdata(
                owner.clone(),
                ttl,
                RData::NS(NS(target.clone())),
            ));
            res.additional
                .extend(glue.into_iter().map(|ip| address_record(&target, ttl, ip)));
        }
        res
    }
}
