//! Headless answers narrowed to some of a Service's endpoints: by where the client is (the
//! Service's `trafficDistribution`, with `topology`: its node, else its zone, else all), and by
//! the zone a name asks for (CoreDNS's `zonal` names, `<zone>.pin._zone.<svc>.<ns>.svc.<zone>`
//! and `<zone>.prefer._zone...`).
//!
//! Client-aware answers differ between clients: the answerer says so (`pick::ClientUse`) and the
//! plugin keeps them from being replayed or cached for anyone else.

use std::net::IpAddr;

use hickory_proto::rr::{Name, RecordType};

use super::answerer::{ClusterAnswerer, Resolution, address_data, family_matches, spelt_zone};
use super::pick::{ClientUse, Directive, Pick, Reason, ZonalName};
use crate::cluster::model::{EndpointInfo, ServiceKind};
use crate::cluster::topology::{ClientPlace, NO_PLACE, TrafficDistribution};
use crate::cluster::zone::ServiceEntry;
use crate::proto::Records;

fn endpoints(entry: &ServiceEntry) -> impl Iterator<Item = &EndpointInfo> {
    entry.slices.values().flat_map(|s| s.endpoints.iter())
}

/// True when some ready endpoint of `entry` is kept by `pick`.
fn any_kept(entry: &ServiceEntry, pick: Pick<'_>) -> bool {
    endpoints(entry).any(|e| pick.keeps(e))
}

/// The pick for the client at `place` under `traffic`, and why: kube-proxy's rules, applied to
/// DNS. Hints are used when every endpoint has that kind of hint (as kube-proxy uses them),
/// the endpoints' own `nodeName` and `zone` otherwise.
fn choose<'p>(
    entry: &ServiceEntry,
    traffic: TrafficDistribution,
    place: &'p ClientPlace,
) -> (Pick<'p>, Reason) {
    let all_have = |f: fn(&EndpointInfo) -> bool| {
        let mut any = false;
        for e in endpoints(entry) {
            if !f(e) {
                return false;
            }
            any = true;
        }
        any
    };
    if traffic == TrafficDistribution::PreferSameNode {
        let pick = if all_have(|e| e.place().is_some_and(|p| p.for_nodes.is_some())) {
            Pick::NodeHint(&place.node)
        } else {
            Pick::Node(&place.node)
        };
        if any_kept(entry, pick) {
            return (pick, Reason::Node);
        }
    }
    if let Some(zone) = place.zone.as_deref() {
        let pick = if all_have(|e| e.place().is_some_and(|p| p.for_zones.is_some())) {
            Pick::ZoneHint(zone)
        } else {
            Pick::Zone(zone)
        };
        if any_kept(entry, pick) {
            return (pick, Reason::Zone);
        }
    }
    (Pick::All, Reason::Fallback)
}

impl ClusterAnswerer {
    /// The addresses of the endpoints `pick` keeps, deduplicated, in order.
    pub(super) fn picked_addresses(
        &self,
        owner: &Name,
        entry: &ServiceEntry,
        pick: Pick<'_>,
        qtype: RecordType,
    ) -> Resolution {
        if pick == Pick::All {
            return Resolution::records(Records::with_owner(
                owner,
                self.settings.ttl,
                entry
                    .ready_ips
                    .iter()
                    .filter(|ip| family_matches(qtype, ip))
                    .map(|ip| address_data(*ip)),
            ));
        }
        let mut ips: Vec<IpAddr> = Vec::new();
        for ip in endpoints(entry)
            .filter(|e| pick.keeps(e))
            .flat_map(|e| e.addresses.iter())
        {
            if family_matches(qtype, ip) && !ips.contains(ip) {
                ips.push(*ip);
            }
        }
        Resolution::records(Records::with_owner(
            owner,
            self.settings.ttl,
            ips.into_iter().map(address_data),
        ))
    }

    /// The pick for a question about headless `entry` from `client`, and how the answer uses
    /// the client: with `topology`, for a Service with a `trafficDistribution`.
    pub(super) fn client_pick<'p>(
        &self,
        entry: &ServiceEntry,
        client: Option<IpAddr>,
        place: &'p mut Option<ClientPlace>,
    ) -> (Pick<'p>, ClientUse) {
        let traffic = entry.service.as_ref().and_then(|s| s.traffic);
        let (Some(traffic), Some(client), true) = (traffic, client, self.settings.topology) else {
            return (Pick::All, ClientUse::default());
        };
        *place = self.zone.client_place(client);
        let Some(place) = place.as_ref() else {
            // Not a known pod: every endpoint, and another client's answer may differ.
            return (
                Pick::All,
                ClientUse {
                    dependent: true,
                    reason: None,
                    class: Some(NO_PLACE),
                },
            );
        };
        let (pick, reason) = choose(entry, traffic, place);
        (
            pick,
            ClientUse {
                dependent: true,
                reason: Some(reason),
                class: place.class,
            },
        )
    }

    /// Answers a zonal name (`zonal`): A/AAAA and SRV of the headless Service's endpoints in
    /// the zone (`pin`: NODATA when none; `prefer`: all when none); NODATA for other types;
    /// NXDOMAIN for a Service that does not exist or is not headless.
    pub(super) fn resolve_zonal(
        &self,
        owner: &Name,
        zone: &Name,
        name: &ZonalName<'_>,
        qtype: RecordType,
    ) -> Resolution {
        let Some(entry) = self.visible_service(name.namespace, name.service) else {
            return Resolution::nxdomain();
        };
        let Some(svc) = entry.service.as_ref() else {
            return Resolution::nxdomain();
        };
        if svc.kind != ServiceKind::Headless {
            return Resolution::nxdomain();
        }
        if !matches!(qtype, RecordType::A | RecordType::AAAA | RecordType::SRV) {
            return Resolution::nodata();
        }
        let mut pick = Pick::Zone(&name.zone);
        if !any_kept(&entry, pick) {
            match name.directive {
                Directive::Pin => return Resolution::nodata(),
                Directive::Prefer => pick = Pick::All,
            }
        }
        if qtype == RecordType::SRV {
            let zone_spelt = spelt_zone(owner, zone);
            return self.with_srv_candidates(
                &entry,
                svc,
                &zone_spelt,
                |_| true,
                pick,
                |c| self.srv(owner, c),
            );
        }
        self.picked_addresses(owner, &entry, pick, qtype)
    }
}
