//! The cluster zone for a zone transfer (`transfer`): every record a client could be answered
//! in the primary zone, made by asking this plugin's own answerer (one place decides what a
//! name answers): the SOA, the apex NS with its address, then for each Service its A, AAAA
//! and SRV records (for a headless Service, one per ready endpoint, with the endpoints' names
//! and addresses), the SRV records of each named port (`_http._tcp.web.default.svc...`), or
//! its ExternalName CNAME, and the SOA again (RFC 5936). Pod records and
//! PTRs are not part of it, as in CoreDNS. A `multicluster` primary zone lists its
//! ServiceImports instead of its Services.

use std::collections::HashSet;

use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::BinEncodable;

use super::answer::Outcome;
use super::answer::answerer::name_under;
use super::handler::Kubernetes;
use crate::cluster::model::PortProtocol;
use crate::cluster::zone::ServiceEntry;
use crate::plugin::kit::serial_after;
use crate::proto::Question;

impl Kubernetes {
    /// The zone `zone` whole, when it is this plugin's primary zone and the first lists are in.
    pub(super) fn transfer(&self, zone: &Name) -> Option<Vec<Record>> {
        if !self.transferable(zone) {
            return None;
        }
        // Before the SOA is read: a change from here on gets a serial of its own.
        self.zone().note_transfer();
        if let Some(kept) = self.kept_current(<[Record]>::to_vec) {
            if let Some(c) = &self.transfer_counts {
                c.kept.inc();
            }
            return Some(kept);
        }
        if let Some(c) = &self.transfer_counts {
            c.built.inc();
        }
        let answerer = self.answerer();
        let ask = |name: &Name, qtype: RecordType| match self.answer(&Question::new(name.clone(), qtype)) {
            Outcome::Answer(a) => Some(a),
            Outcome::Fallthrough => None,
        };
        let soa = ask(zone, RecordType::SOA)?
            .answers
            .iter()
            .find(|r| r.record_type() == RecordType::SOA)?
            .clone();
        let mut out = vec![soa.clone()];
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        let mut add = |records: &mut dyn Iterator<Item = &Record>, out: &mut Vec<Record>| {
            for r in records {
                if r.record_type() == RecordType::SOA {
                    continue;
                }
                if r.to_bytes().is_ok_and(|b| seen.insert(b)) {
                    out.push(r.clone());
                }
            }
        };
        if let Some(ns) = ask(zone, RecordType::NS) {
            add(&mut ns.answers.iter().chain(ns.additional.iter()), &mut out);
        }
        // A multicluster primary zone holds the ServiceImports, not the Services.
        let names = if answerer.settings().multicluster.contains(zone) {
            self.zone().import_keys()
        } else {
            self.zone().service_keys()
        };
        for (namespace, service) in names {
            let Some(name) = name_under(&[&service, &namespace, "svc"], zone) else {
                continue;
            };
            // The Service's own names, and each named port's SRV name (`_http._tcp.web...`), as
            // CoreDNS's transfer lists them: a secondary answers what a client would be.
            let ports = if answerer.settings().multicluster.contains(zone) {
                Vec::new()
            } else {
                self.zone()
                    .service(&namespace, &service)
                    .map(|e| port_names(&e))
                    .unwrap_or_default()
            };
            let asks =
                [RecordType::A, RecordType::AAAA, RecordType::SRV]
                    .into_iter()
                    .map(|t| (name.clone(), t))
                    .chain(ports.iter().filter_map(|(port, proto)| {
                        Some((name_under(&[port, proto], &name)?, RecordType::SRV))
                    }));
            for (name, qtype) in asks {
                let Some(a) = ask(&name, qtype) else {
                    continue;
                };
                // An ExternalName answers its CNAME (the target is not the cluster's).
                let own = a.answers.iter().filter(|r| match &r.data {
                    RData::CNAME(_) => true,
                    _ => r.record_type() == qtype,
                });
                add(&mut own.chain(a.additional.iter()), &mut out);
            }
        }
        out.push(soa);
        self.journal_step(&out);
        Some(out)
    }

    /// The differences since version `held` of its primary zone `zone` (an IXFR): the zone is
    /// made as for a transfer (which puts the step to it in the journal), then read back from
    /// the journal.
    pub(super) fn transfer_changes(&self, zone: &Name, held: u32) -> Option<Vec<Record>> {
        if !self.transferable(zone) {
            return None;
        }
        // The kept version is current: its journal already ends at it (no build). Else the
        // build puts the step to the current version in the journal.
        self.zone().note_transfer();
        match self.kept_current(|_| ()) {
            Some(()) => {
                if let Some(c) = &self.transfer_counts {
                    c.kept.inc();
                }
            }
            None => {
                self.transfer(zone)?;
            }
        }
        self.transfers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
            .since(held)
    }

    /// True when `zone` is its primary zone and the first lists are in.
    fn transferable(&self, zone: &Name) -> bool {
        self.answerer().settings().primary == *zone && self.zone().is_synced()
    }

    /// `read` of the last transferred version, when it is still the current one: the zone's
    /// serial has not moved since. (After a transfer every change moves the serial, within
    /// the same second too, so an unmoved serial is unchanged data.) Then 5,000 secondaries
    /// asking after one change cost one build of the zone, not 5,000.
    fn kept_current<T>(&self, read: impl FnOnce(&[Record]) -> T) -> Option<T> {
        let held = self
            .transfers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let kept = held.0.as_deref()?;
        match kept.first().map(|r| &r.data) {
            Some(RData::SOA(soa)) if soa.serial == self.zone().serial() => Some(read(kept)),
            _ => None,
        }
    }

    /// Puts the step from the last transferred version to `now` in the journal when `now` is a
    /// later serial (one difference per serial, however many secondaries ask), and keeps `now`
    /// as the last version. An older version (a slower concurrent transfer) changes nothing.
    fn journal_step(&self, now: &[Record]) {
        let serial = |rs: &[Record]| match rs.first().map(|r| &r.data) {
            Some(RData::SOA(s)) => Some(s.serial),
            _ => None,
        };
        let mut held = self
            .transfers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (last, journal) = &mut *held;
        let later = match (last.as_deref().and_then(serial), serial(now)) {
            (None, _) => true,
            (Some(old), Some(new)) => serial_after(new, old),
            (Some(_), None) => false,
        };
        if !later {
            return;
        }
        if let Some(old) = last.as_deref() {
            journal.record(old, now);
        }
        *last = Some(now.to_vec());
    }
}

/// The SRV labels (`_http`, `_tcp`) of the named ports of `entry`'s Service and slices, each
/// once, in order. Unnamed ports have no SRV name (the DNS specification, 2.3.2).
fn port_names(entry: &ServiceEntry) -> Vec<(String, &'static str)> {
    let ports = entry
        .service
        .iter()
        .flat_map(|s| s.ports.iter())
        .chain(entry.slices.values().flat_map(|s| s.ports.iter()));
    let mut out: Vec<(String, &'static str)> = Vec::new();
    for p in ports.filter(|p| !p.name.is_empty()) {
        let proto = match p.protocol {
            PortProtocol::Tcp => "_tcp",
            PortProtocol::Udp => "_udp",
            PortProtocol::Sctp => "_sctp",
        };
        let label = (format!("_{}", p.name), proto);
        if !out.contains(&label) {
            out.push(label);
        }
    }
    out
}
