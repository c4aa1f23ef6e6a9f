//! [`ClusterAnswerer`]: answers one question in the cluster zones from a [`ClusterZone`], by the
//! Kubernetes DNS spec and the decisions in the behaviour reference.
//!
//! The answerer builds records; it does not touch the wire. Its result says what to send
//! (rcode, sections) or that the name is not ours ([`Outcome::Fallthrough`]) so the next
//! handler takes it.

use crate::proto::Visibility;
use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, SOA, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::kept::{DEFAULT_KEPT_BYTES, KeptBudget, kept_key};
use super::pick::{ClientUse, ZonalName};
use super::qname::ClusterName;
use crate::cluster::ClusterZone;
use crate::proto::{Answer, FlagEdit, Records};

/// The spec version `dns-version.<zone>` answers.
pub const SCHEMA_VERSION: &str = "1.1.0";
/// The fixed TTL of the `dns-version` TXT record.
pub const DNS_VERSION_TTL: u32 = 28800;
/// How many CNAME links an in-zone ExternalName chase follows.
pub(super) const MAX_CNAME_CHAIN: usize = 10;

/// How pod names (`<dashed-ip>.<ns>.pod.<zone>`) are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodRecords {
    /// No pod records (the plugin default).
    #[default]
    Disabled,
    /// Any IP in an existing namespace.
    Insecure,
    /// Only IPs of live pods in that namespace.
    Verified,
}

/// What the answerer needs from the `kubernetes` plugin's configuration.
#[derive(Debug, Clone)]
pub struct AnswerSettings {
    /// Every zone the plugin owns, lower-case and absolute (forward and reverse).
    pub zones: Vec<Name>,
    /// The reverse zones among them (PTR answers), as [`crate::corefile::is_reverse_zone`]
    /// tells them apart.
    pub reverse_zones: Vec<Name>,
    /// The first forward zone: PTR targets are built in it.
    pub primary: Name,
    /// TTL of synthesised records and SOA MINIMUM.
    pub ttl: u32,
    /// Pod record mode.
    pub pods: PodRecords,
    /// Use the pod name as the endpoint name when the endpoint has no hostname.
    pub endpoint_pod_names: bool,
    /// No endpoint data: headless, endpoint-name answers and endpoint PTRs are NXDOMAIN.
    pub noendpoints: bool,
    /// Zones whose NXDOMAIN answers go to the next handler (`None`: fallthrough off).
    pub fallthrough: Option<Vec<Name>>,
    /// A ClusterIP service with no ready endpoints is NXDOMAIN.
    pub ignore_empty_service: bool,
    /// Namespaces exposed (empty: all).
    pub namespaces: Vec<String>,
    /// This server's own IPs (from `POD_IP`), used to find the Service the NS record names.
    pub self_ips: Vec<IpAddr>,
    /// The `multicluster` zones (some of `zones`): their service names are answered from
    /// ServiceImports (`clusterset`).
    pub multicluster: Vec<Name>,
    /// `zonal`: CoreDNS's zone-scoped names of headless services.
    pub zonal: bool,
    /// `topology`: headless answers follow `trafficDistribution` and the client's place.
    pub topology: bool,
}

/// The result of asking the answerer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Send this.
    Answer(Answer),
    /// The name is NXDOMAIN in a fallthrough zone, or outside the plugin's zones: the next
    /// handler answers.
    Fallthrough,
}

/// The intermediate result of resolving one name: rcode, records, and whether the final name
/// is negative (NODATA/NXDOMAIN, so the authority section gets the SOA).
#[derive(Debug, Default)]
pub(super) struct Resolution {
    pub(super) nxdomain: bool,
    pub(super) answers: Records,
    pub(super) additional: Vec<Record>,
    pub(super) chase_target: Option<Name>,
    /// The answer is a CNAME chain whose in-zone end has no records of the asked type.
    pub(super) nodata_tail: bool,
    /// How the answer used the client's address (`topology`).
    pub(super) client: ClientUse,
}

impl Resolution {
    pub(super) fn nxdomain() -> Self {
        Self {
            nxdomain: true,
            ..Self::default()
        }
    }
    pub(super) fn nodata() -> Self {
        Self::default()
    }
    pub(super) fn records(answers: impl Into<Records>) -> Self {
        Self {
            answers: answers.into(),
            ..Self::default()
        }
    }
}

/// Answers questions in the cluster zones. Cheap to share: it holds the settings and an `Arc`
/// of the zone.
#[derive(Debug, Clone)]
pub struct ClusterAnswerer {
    pub(super) settings: Arc<AnswerSettings>,
    pub(super) zone: Arc<ClusterZone>,
    /// (zone, SOA MNAME, SOA RNAME) of every zone, built once.
    pub(super) soa_names: Arc<Vec<(Name, Name, Name)>>,
    /// Each of `settings.zones`, as labels, and whether it is a reverse zone.
    zone_labels: Arc<Vec<ZoneLabels>>,
    /// Per zone of `settings.zones`, the key of the names kept with zone entries under it
    /// ([`super::kept::kept_key`]): equal for answerers whose names would be equal.
    pub(super) kept_keys: Arc<Vec<u64>>,
    /// The index of `settings.primary` in `settings.zones`, if it is one of them.
    primary_index: Option<usize>,
    /// What the names kept with zone entries may take ([`super::kept`]).
    pub(super) kept: Arc<KeptBudget>,
}

/// A zone's labels (lower case, in order) and kind, so that a question's zone is found by
/// comparing label slices: hickory-proto's `zone_of` walks its label iterator backwards, which
/// was a tenth of a ClusterIP answer with three zones.
#[derive(Debug)]
struct ZoneLabels {
    /// Zone names are ASCII (`corefile::zone` checks them); a label that is not UTF-8 would
    /// be kept with a replacement character and match no question.
    labels: Vec<Box<str>>,
    reverse: bool,
    /// Whether an NXDOMAIN under this zone goes to the next handler, worked out once from
    /// the `fallthrough` zones.
    fallthrough: Fallthrough,
    /// A `multicluster` zone.
    multicluster: bool,
}

/// How `fallthrough` applies to the names of one served zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fallthrough {
    /// Off, or no fallthrough zone shares a name with this zone: a name under both would
    /// make one of the two a suffix of the other.
    Never,
    /// `fallthrough` without zones, or one of them is this zone or holds it.
    Always,
    /// A fallthrough zone lies inside this zone: the name decides.
    ByName,
}

impl Fallthrough {
    fn of(zone: &Name, fallthrough: Option<&[Name]>) -> Self {
        match fallthrough {
            None => Self::Never,
            Some([]) => Self::Always,
            Some(zones) if zones.iter().any(|f| f.zone_of(zone)) => Self::Always,
            Some(zones) if zones.iter().any(|f| zone.zone_of(f)) => Self::ByName,
            Some(_) => Self::Never,
        }
    }
}

/// True when a label of `name` has an upper-case ASCII letter (so it needs lower-casing).
pub(super) fn has_upper(name: &Name) -> bool {
    name.iter().any(|l| l.iter().any(u8::is_ascii_uppercase))
}

/// Calls `f` with the labels of `name`, lower-cased (a copy of the name is made only when it
/// has an upper-case letter), on the stack unless there are more than [`INLINE_LABELS`].
pub(super) fn with_lower_labels<R>(name: &Name, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    // One pass: the labels, and whether any has an upper-case letter (hickory-proto's label
    // iterator is dear, about 55 instructions a label).
    let mut inline: [&[u8]; INLINE_LABELS] = [&[]; INLINE_LABELS];
    let mut n = 0;
    let mut upper = false;
    for label in name.iter() {
        if n == INLINE_LABELS {
            let lowered = name.to_lowercase();
            let all: Vec<&[u8]> = lowered.iter().collect();
            return f(&all);
        }
        // A fold, not `any`: no early exit, so the byte test is branch-free.
        upper |= label.iter().fold(false, |u, b| u | b.is_ascii_uppercase());
        inline[n] = label;
        n += 1;
    }
    if upper {
        let lowered = name.to_lowercase();
        let mut again: [&[u8]; INLINE_LABELS] = [&[]; INLINE_LABELS];
        for (slot, label) in again.iter_mut().zip(lowered.iter()) {
            *slot = label;
        }
        return f(&again[..n]);
    }
    f(&inline[..n])
}

/// `zone` (configured, so lower case) as `owner`, a name in it, spells it. A lower-case owner
/// spells it as configured: no copy (`trim_to` builds a new name through three vectors).
pub(super) fn spelt_zone<'a>(owner: &Name, zone: &'a Name) -> Cow<'a, Name> {
    if has_upper(owner) {
        Cow::Owned(owner.trim_to(usize::from(zone.num_labels())))
    } else {
        Cow::Borrowed(zone)
    }
}

/// Labels a name is split into on the stack; longer names (rare) take a `Vec`.
pub(super) const INLINE_LABELS: usize = 16;

/// A name made of `labels` followed by `suffix`. The labels come from Kubernetes objects, which
/// are valid DNS labels; a label that isn't gives `None` and is left out of the answer.
pub fn name_under(labels: &[&str], suffix: &Name) -> Option<Name> {
    // Label by label: `Name::from_labels` collects into three vectors first.
    let mut name = Name::new();
    for label in labels {
        name = name.append_label(label.as_bytes()).ok()?;
    }
    name.append_domain(suffix).ok()
}

#[inline]
pub(super) fn address_record(owner: &Name, ttl: u32, ip: IpAddr) -> Record {
    Record::from_rdata(owner.clone(), ttl, address_data(ip))
}

/// The A or AAAA data of `ip`.
pub(super) fn address_data(ip: IpAddr) -> RData {
    match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    }
}

pub(super) fn family_matches(qtype: RecordType, ip: &IpAddr) -> bool {
    matches!(
        (qtype, ip),
        (RecordType::A, IpAddr::V4(_)) | (RecordType::AAAA, IpAddr::V6(_))
    )
}

/// The SOA MNAME and RNAME of `zone`.
pub(super) fn soa_names(zone: &Name) -> (Name, Name) {
    let mname = name_under(&["ns", "dns"], zone).unwrap_or_else(|| zone.clone());
    let rname = name_under(&["hostmaster"], zone).unwrap_or_else(|| zone.clone());
    (mname, rname)
}

/// One SRV candidate before duplicates are removed.
pub(super) struct SrvCandidate<'a> {
    pub(super) target: &'a Name,
    /// Equal for equal targets (ignoring case), different otherwise, within one answer.
    pub(super) id: u32,
    pub(super) port: u16,
    pub(super) glue: IpAddr,
}

impl ClusterAnswerer {
    /// An answerer over `zone` with `settings`.
    pub fn new(settings: AnswerSettings, zone: Arc<ClusterZone>) -> Self {
        let soa_names = settings
            .zones
            .iter()
            .map(|z| {
                let (mname, rname) = soa_names(z);
                (z.clone(), mname, rname)
            })
            .collect();
        let zone_labels = settings
            .zones
            .iter()
            .map(|z| ZoneLabels {
                labels: z
                    .to_lowercase()
                    .iter()
                    .map(|l| String::from_utf8_lossy(l).into())
                    .collect(),
                reverse: settings.reverse_zones.contains(z),
                fallthrough: Fallthrough::of(z, settings.fallthrough.as_deref()),
                multicluster: settings.multicluster.contains(z),
            })
            .collect();
        let primary_index = settings.zones.iter().position(|z| z.eq_case(&settings.primary));
        let kept_keys = settings
            .zones
            .iter()
            .map(|z| kept_key(z, settings.endpoint_pod_names))
            .collect();
        Self {
            settings: Arc::new(settings),
            zone,
            soa_names: Arc::new(soa_names),
            zone_labels: Arc::new(zone_labels),
            kept_keys: Arc::new(kept_keys),
            primary_index,
            kept: KeptBudget::new(DEFAULT_KEPT_BYTES, None),
        }
    }

    /// The same answerer, keeping names with zone entries within `budget`.
    pub fn with_kept_budget(mut self, budget: Arc<KeptBudget>) -> Self {
        self.kept = budget;
        self
    }

    /// The zone it reads.
    pub fn zone(&self) -> &Arc<ClusterZone> {
        &self.zone
    }

    /// The settings.
    pub fn settings(&self) -> &AnswerSettings {
        &self.settings
    }

    /// The longest plugin zone that contains the name of `labels` (lower case, in order): its
    /// index in `settings.zones`.
    pub(super) fn zone_index(&self, labels: &[&[u8]]) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for (i, zone) in self.zone_labels.iter().enumerate() {
            let n = zone.labels.len();
            let Some(tail) = labels.len().checked_sub(n).map(|at| &labels[at..]) else {
                continue;
            };
            if best.is_none_or(|(_, longest)| n > longest)
                && tail.iter().zip(&zone.labels).all(|(a, b)| *a == b.as_bytes())
            {
                best = Some((i, n));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The primary zone (PTR targets are built in it), as one of `settings.zones` when it is
    /// one, so that [`Self::configured_zone`] knows it.
    pub(super) fn primary(&self) -> &Name {
        self.primary_index
            .map_or(&self.settings.primary, |i| &self.settings.zones[i])
    }

    /// Which of `settings.zones` `zone` is, if it is that very value (not a copy, which may be
    /// spelt otherwise): names built under it may be kept with zone entries.
    pub(super) fn configured_zone(&self, zone: &Name) -> Option<usize> {
        self.settings.zones.iter().position(|z| std::ptr::eq(z, zone))
    }

    /// The longest plugin zone that contains `name`.
    pub fn matching_zone(&self, name: &Name) -> Option<&Name> {
        with_lower_labels(name, |labels| self.zone_index(labels)).map(|i| &self.settings.zones[i])
    }

    /// The scope of the answers to `qname` (`cluster::scope::service_scope`, `cluster::scope::address_scope`):
    /// the one Service or address whose data they are made from, besides the zone's structure
    /// (its namespaces). `None` for names whose answers are made from more (the apex, a
    /// namespace, partial reverse names, wildcards) or outside the zones.
    pub fn scope_of(&self, qname: &Name) -> Option<u64> {
        let (zone, labels) = with_lower_labels(qname, |labels| {
            let zone = self.zone_index(labels)?;
            let labels: Vec<String> = labels
                .iter()
                .map(|l| std::str::from_utf8(l).map(str::to_owned))
                .collect::<Result<_, _>>()
                .ok()?;
            Some((zone, labels))
        })?;
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        if labels.iter().any(|l| *l == "*" || *l == "any") {
            return None;
        }
        if self.zone_labels[zone].reverse {
            return super::addr::parse_reverse(&labels).map(crate::cluster::scope::address_scope);
        }
        let keep = labels.len().checked_sub(self.zone_labels[zone].labels.len())?;
        match ClusterName::parse(&labels[..keep]) {
            ClusterName::Service { namespace, service }
            | ClusterName::Endpoint {
                namespace, service, ..
            }
            | ClusterName::Port {
                namespace, service, ..
            } => Some(crate::cluster::scope::service_scope(namespace, service)),
            ClusterName::PodAddress { address, .. } => {
                super::addr::parse_pod_label(address).map(crate::cluster::scope::address_scope)
            }
            _ => None,
        }
    }

    /// Answers `qname` (as the client spelt it) for `qtype`. Class, opcode and question count
    /// are the server's business and already checked.
    pub fn answer(&self, qname: &Name, qtype: RecordType) -> Outcome {
        self.answer_as(qname, qtype, false)
    }

    /// [`ClusterAnswerer::answer`]; for a `probe` (a plugin asking only whether the name
    /// exists, `Question::probe`) an NXDOMAIN comes without its SOA.
    pub fn answer_as(&self, qname: &Name, qtype: RecordType, probe: bool) -> Outcome {
        self.answer_for(qname, qtype, probe, None).0
    }

    /// [`ClusterAnswerer::answer_as`] for the client at `client` (`None`: whoever asks), and
    /// how the answer used the client's address (`topology`).
    pub fn answer_for(
        &self,
        qname: &Name,
        qtype: RecordType,
        probe: bool,
        client: Option<IpAddr>,
    ) -> (Outcome, ClientUse) {
        self.answer_through(qname, qtype, probe, client, None)
    }

    /// [`ClusterAnswerer::answer_for`] through what the client's DNS policy lets it see
    /// (`view`, `dnspolicy`): a name of a namespace it does not see, an address such a
    /// namespace holds, a CNAME target in one, are answered as names that do not exist.
    pub fn answer_through(
        &self,
        qname: &Name,
        qtype: RecordType,
        probe: bool,
        client: Option<IpAddr>,
        view: Option<&dyn Visibility>,
    ) -> (Outcome, ClientUse) {
        // Most clients ask in lower case: the name is copied only when it is not.
        let found = with_lower_labels(qname, |labels| {
            let zone = self.zone_index(labels)?;
            Some((zone, self.resolve(qname, labels, zone, qtype, 0, client, view)))
        });
        let Some((zone, res)) = found else {
            return (Outcome::Fallthrough, ClientUse::default());
        };
        let used = res.client;
        (self.outcome(qname, zone, res, probe), used)
    }

    /// The answer to `qname`, resolved as `res` in zone `zone`.
    fn outcome(&self, qname: &Name, zone: usize, res: Resolution, probe: bool) -> Outcome {
        if res.nxdomain && res.answers.is_empty() {
            let falls = match self.zone_labels[zone].fallthrough {
                Fallthrough::Never => false,
                Fallthrough::Always => true,
                Fallthrough::ByName => self
                    .settings
                    .fallthrough
                    .iter()
                    .flatten()
                    .any(|z| z.zone_of(qname)),
            };
            if falls {
                return Outcome::Fallthrough;
            }
        }
        let negative = res.nxdomain || res.answers.is_empty() || res.nodata_tail;
        let rcode = if res.nxdomain && res.answers.is_empty() && !self.zone.is_synced() {
            ResponseCode::ServFail
        } else if res.nxdomain {
            ResponseCode::NXDomain
        } else {
            ResponseCode::NoError
        };
        let authority = if negative && !(probe && rcode == ResponseCode::NXDomain) {
            let (zone, mname, rname) = &self.soa_names[zone];
            vec![self.soa_record(mname, rname, &spelt_zone(qname, zone))]
        } else {
            Vec::new()
        };
        Outcome::Answer(Answer {
            rcode,
            answers: res.answers,
            authority,
            additional: res.additional,
            chase_target: res.chase_target,
            flags: FlagEdit::KEEP,
        })
    }

    /// The SOA record of `zone` (lower-case), owned by `spelt`: the zone as the question spelt
    /// it, since every owner echoes the question's case.
    pub fn soa(&self, zone: &Name, spelt: &Name) -> Record {
        match self.soa_names.iter().find(|(z, _, _)| z.eq_case(zone)) {
            Some((_, m, r)) => self.soa_record(m, r, spelt),
            None => {
                let (m, r) = soa_names(zone);
                self.soa_record(&m, &r, spelt)
            }
        }
    }

    /// The SOA record with these names, owned by `spelt`.
    fn soa_record(&self, mname: &Name, rname: &Name, spelt: &Name) -> Record {
        let ttl = self.settings.ttl;
        let soa = SOA::new(
            mname.clone(),
            rname.clone(),
            self.zone.serial(),
            7200,
            1800,
            86400,
            ttl,
        );
        Record::from_rdata(spelt.clone(), ttl.min(300), RData::SOA(soa))
    }

    /// Resolves `owner` (client spelling) whose labels, lower-cased, are `lower`, inside the
    /// zone `zone_index` (of `settings.zones`, as [`Self::zone_index`] found it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve(
        &self,
        owner: &Name,
        lower: &[&[u8]],
        zone_index: usize,
        qtype: RecordType,
        depth: usize,
        client: Option<IpAddr>,
        view: Option<&dyn Visibility>,
    ) -> Resolution {
        let zone = &self.settings.zones[zone_index];
        let ZoneLabels {
            labels: zone_labels,
            reverse,
            ..
        } = &self.zone_labels[zone_index];
        let keep = lower.len() - zone_labels.len();
        // The labels as text: the question's own are checked; the zone's are the same bytes
        // as the configured zone's labels (`zone_index` compared them), already text.
        let mut inline = [""; INLINE_LABELS];
        let spilled: Vec<&str>;
        let labels: &[&str] = if lower.len() <= INLINE_LABELS {
            for (slot, l) in inline.iter_mut().zip(&lower[..keep]) {
                let Ok(l) = std::str::from_utf8(l) else {
                    return Resolution::nxdomain();
                };
                *slot = l;
            }
            for (slot, l) in inline[keep..].iter_mut().zip(zone_labels) {
                *slot = l;
            }
            &inline[..lower.len()]
        } else {
            let own: Option<Vec<&str>> = lower[..keep]
                .iter()
                .map(|l| std::str::from_utf8(l).ok())
                .collect();
            let Some(mut all) = own else {
                return Resolution::nxdomain();
            };
            all.extend(zone_labels.iter().map(|l| &**l));
            spilled = all;
            &spilled
        };
        // The zone as the client spelt it: SRV and NS targets are built in it.
        let zone_spelt = || spelt_zone(owner, zone);
        if *reverse {
            return self.resolve_reverse(owner, labels, keep, zone, qtype, view);
        }
        // What the client's policy hides is a name that does not exist.
        let hidden = |ns: &str| view.is_some_and(|v| !v.sees_namespace(ns));
        if self.zone_labels[zone_index].multicluster
            && let [.., namespace, "svc"] = &labels[..keep]
            && hidden(namespace)
        {
            return Resolution::nxdomain();
        }
        if self.zone_labels[zone_index].multicluster
            && let Some(res) = self.resolve_clusterset(owner, &labels[..keep], &zone_spelt(), qtype)
        {
            return res;
        }
        // Zonal names are not defined inside `multicluster` zones (CoreDNS).
        if self.settings.zonal
            && !self.zone_labels[zone_index].multicluster
            && let Some(zonal) = ZonalName::parse(&labels[..keep])
        {
            if hidden(zonal.namespace) {
                return Resolution::nxdomain();
            }
            return self.resolve_zonal(owner, zone, &zonal, qtype);
        }
        let node = ClusterName::parse(&labels[..keep]);
        if let ClusterName::Namespace(ns)
        | ClusterName::PodNamespace(ns)
        | ClusterName::PodAddress { namespace: ns, .. }
        | ClusterName::Service { namespace: ns, .. }
        | ClusterName::Endpoint { namespace: ns, .. }
        | ClusterName::Port { namespace: ns, .. } = node
            && hidden(ns)
        {
            return Resolution::nxdomain();
        }
        match node {
            ClusterName::Apex => match qtype {
                RecordType::SOA => Resolution::records(vec![self.soa(zone, owner)]),
                RecordType::NS => self.ns_answer(owner, &zone_spelt()),
                _ => Resolution::nodata(),
            },
            ClusterName::ServiceRoot | ClusterName::PodRoot => Resolution::nodata(),
            ClusterName::DnsVersion => match qtype {
                RecordType::TXT => {
                    let txt = TXT::new(vec![SCHEMA_VERSION.to_owned()]);
                    Resolution::records(vec![Record::from_rdata(
                        owner.clone(),
                        DNS_VERSION_TTL,
                        RData::TXT(txt),
                    )])
                }
                _ => Resolution::nodata(),
            },
            ClusterName::NsDns => {
                let ips: Vec<IpAddr> = self
                    .name_servers(&zone_spelt())
                    .into_iter()
                    .flat_map(|(_, g)| g)
                    .collect();
                self.addresses(owner, qtype, &ips)
            }
            ClusterName::Namespace(ns) => {
                if self.namespace_exposed(ns) {
                    Resolution::nodata()
                } else {
                    Resolution::nxdomain()
                }
            }
            ClusterName::PodNamespace(ns) => {
                if self.settings.pods != PodRecords::Disabled && self.namespace_exposed(ns) {
                    Resolution::nodata()
                } else {
                    Resolution::nxdomain()
                }
            }
            ClusterName::PodAddress { namespace, address } => {
                self.resolve_pod(owner, namespace, address, qtype)
            }
            ClusterName::Service { namespace, service } => {
                self.resolve_service(owner, zone, namespace, service, qtype, depth, client, view)
            }
            ClusterName::Endpoint {
                namespace,
                service,
                endpoint,
            } => self.resolve_endpoint(owner, namespace, service, endpoint, qtype),
            ClusterName::Port {
                namespace,
                service,
                port,
                protocol,
            } => self.resolve_port(
                owner,
                &zone_spelt(),
                namespace,
                service,
                port,
                protocol,
                qtype,
                client,
            ),
            ClusterName::Invalid => Resolution::nxdomain(),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cluster::model::{EndpointInfo, ServiceInfo, ServiceKind, SliceInfo};

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    /// Settings for `cluster.local` and the reverse zones, TTL 5, everything else default.
    pub(in crate::plugin::kubernetes::answer) fn settings() -> AnswerSettings {
        AnswerSettings {
            zones: vec![n("cluster.local."), n("in-addr.arpa."), n("ip6.arpa.")],
            reverse_zones: vec![n("in-addr.arpa."), n("ip6.arpa.")],
            primary: n("cluster.local."),
            ttl: 5,
            pods: PodRecords::Disabled,
            endpoint_pod_names: false,
            noendpoints: false,
            fallthrough: None,
            ignore_empty_service: false,
            namespaces: vec![],
            self_ips: vec![],
            multicluster: vec![],
            zonal: false,
            topology: false,
        }
    }

    fn svc(ns: &str, name: &str, kind: ServiceKind) -> ServiceInfo {
        ServiceInfo {
            name: name.into(),
            namespace: ns.into(),
            kind,
            ports: vec![],
            external: None,
            traffic: None,
        }
    }

    fn zone() -> Arc<ClusterZone> {
        let z = ClusterZone::new();
        z.apply_namespace("ns".into());
        z.apply_service(svc(
            "ns",
            "a",
            ServiceKind::ClusterIp(vec!["10.0.0.1".parse().unwrap()]),
        ));
        z.apply_service(svc(
            "ns",
            "to-a",
            ServiceKind::ExternalName(Some("a.ns.svc.cluster.local.".into())),
        ));
        z.apply_service(svc(
            "ns",
            "to-to-a",
            ServiceKind::ExternalName(Some("to-a.ns.svc.cluster.local.".into())),
        ));
        z.apply_service(svc(
            "ns",
            "loop",
            ServiceKind::ExternalName(Some("loop.ns.svc.cluster.local.".into())),
        ));
        z.apply_service(svc(
            "ns",
            "to-nothing",
            ServiceKind::ExternalName(Some("nothing.ns.svc.cluster.local.".into())),
        ));
        z.apply_service(svc(
            "ns",
            "out",
            ServiceKind::ExternalName(Some("www.example.com.".into())),
        ));
        Arc::new(z)
    }

    fn ask(a: &ClusterAnswerer, name: &str, t: RecordType) -> Answer {
        match a.answer(&n(name), t) {
            Outcome::Answer(ans) => ans,
            Outcome::Fallthrough => panic!("fell through"),
        }
    }

    /// A probe (a plugin asking whether the name exists) gets an NXDOMAIN without its SOA;
    /// NODATA, a SERVFAIL before sync and every answer to a client keep theirs.
    #[test]
    fn a_probe_gets_nxdomain_without_its_soa() {
        let z = zone();
        let a = ClusterAnswerer::new(settings(), z.clone());
        let probe = |name: &str, t: RecordType| match a.answer_as(&n(name), t, true) {
            Outcome::Answer(ans) => ans,
            Outcome::Fallthrough => panic!("fell through"),
        };
        let before_sync = probe("nosuch.ns.svc.cluster.local.", RecordType::A);
        assert_eq!(before_sync.rcode, ResponseCode::ServFail);
        assert_eq!(before_sync.authority.len(), 1);
        z.set_synced(true);
        let nx = probe("nosuch.ns.svc.cluster.local.", RecordType::A);
        assert_eq!(nx.rcode, ResponseCode::NXDomain);
        assert!(nx.authority.is_empty(), "{nx:?}");
        let full = ask(&a, "nosuch.ns.svc.cluster.local.", RecordType::A);
        assert_eq!((full.rcode, full.authority.len()), (ResponseCode::NXDomain, 1));
        let nodata = probe("a.ns.svc.cluster.local.", RecordType::AAAA);
        assert_eq!((nodata.rcode, nodata.authority.len()), (ResponseCode::NoError, 1));
        assert_eq!(probe("a.ns.svc.cluster.local.", RecordType::A).answers.len(), 1);
    }

    #[test]
    fn before_sync_would_be_nxdomain_is_servfail_with_soa() {
        let z = zone();
        let a = ClusterAnswerer::new(settings(), z.clone());
        let ans = ask(&a, "nosuch.ns.svc.cluster.local.", RecordType::A);
        assert_eq!(ans.rcode, ResponseCode::ServFail);
        assert_eq!(ans.authority.len(), 1);
        // Positive answers are given from what has arrived.
        assert_eq!(ask(&a, "a.ns.svc.cluster.local.", RecordType::A).answers.len(), 1);
        z.set_synced(true);
        assert_eq!(
            ask(&a, "nosuch.ns.svc.cluster.local.", RecordType::A).rcode,
            ResponseCode::NXDomain
        );
    }

    #[test]
    fn externalname_chains_in_zone() {
        let z = zone();
        z.set_synced(true);
        let a = ClusterAnswerer::new(settings(), z);
        let ans = ask(&a, "to-to-a.ns.svc.cluster.local.", RecordType::A);
        let types: Vec<RecordType> = ans.answers.iter().map(Record::record_type).collect();
        assert_eq!(types, [RecordType::CNAME, RecordType::CNAME, RecordType::A]);
        assert!(ans.authority.is_empty());
        // Target missing: CNAME then NXDOMAIN (RFC 6604), SOA in authority.
        let ans = ask(&a, "to-nothing.ns.svc.cluster.local.", RecordType::A);
        assert_eq!(ans.rcode, ResponseCode::NXDomain);
        assert_eq!(ans.answers.len(), 1);
        assert_eq!(ans.authority.len(), 1);
        // A self-loop stops at the first CNAME.
        let ans = ask(&a, "loop.ns.svc.cluster.local.", RecordType::A);
        assert_eq!(ans.answers.len(), 1);
        assert_eq!(ans.rcode, ResponseCode::NoError);
        // Outside the zone: the CNAME, and the target to chase upstream.
        let ans = ask(&a, "out.ns.svc.cluster.local.", RecordType::AAAA);
        assert_eq!(ans.answers.len(), 1);
        assert_eq!(ans.chase_target, Some(n("www.example.com.")));
        // CNAME questions are never chased.
        let ans = ask(&a, "to-a.ns.svc.cluster.local.", RecordType::CNAME);
        assert_eq!(ans.answers.len(), 1);
        assert!(ans.authority.is_empty());
    }

    /// Answers made of one name's records carry the mark that lets the encoder write the
    /// owner once; a chase (CNAMEs, then the target's records) does not.
    #[test]
    fn records_of_one_owner_are_marked_so() {
        let z = zone();
        z.set_synced(true);
        let a = ClusterAnswerer::new(settings(), z);
        let ans = ask(&a, "A.ns.svc.cluster.local.", RecordType::A);
        assert_eq!(ans.answers.len(), 1);
        assert!(ans.answers.share_one_owner());
        let ans = ask(&a, "1.0.0.10.in-addr.arpa.", RecordType::PTR);
        assert_eq!(ans.answers.len(), 1);
        assert!(ans.answers.share_one_owner());
        let ans = ask(&a, "to-to-a.ns.svc.cluster.local.", RecordType::A);
        assert_eq!(ans.answers.len(), 3);
        assert!(!ans.answers.share_one_owner());
    }

    #[test]
    fn fallthrough_takes_only_nxdomain_in_its_zones() {
        let z = zone();
        z.set_synced(true);
        let mut s = settings();
        s.fallthrough = Some(vec![n("in-addr.arpa.")]);
        let a = ClusterAnswerer::new(s.clone(), z.clone());
        assert_eq!(
            a.answer(&n("9.9.9.9.in-addr.arpa."), RecordType::PTR),
            Outcome::Fallthrough
        );
        assert!(matches!(
            a.answer(&n("nosuch.ns.svc.cluster.local."), RecordType::A),
            Outcome::Answer(_)
        ));
        s.fallthrough = Some(vec![]);
        let a = ClusterAnswerer::new(s, z);
        assert_eq!(
            a.answer(&n("nosuch.ns.svc.cluster.local."), RecordType::A),
            Outcome::Fallthrough
        );
        // NODATA never falls through.
        assert!(matches!(
            a.answer(&n("a.ns.svc.cluster.local."), RecordType::AAAA),
            Outcome::Answer(_)
        ));
        assert_eq!(a.answer(&n("example.com."), RecordType::A), Outcome::Fallthrough);
    }

    /// Fallthrough zones inside a served zone decide by the name; one holding it, for all of
    /// its names; one beside it, for none (worked out once, when the answerer is built).
    #[test]
    fn fallthrough_zones_inside_around_and_beside_a_served_zone() {
        let z = zone();
        z.set_synced(true);
        let mut s = settings();
        let falls = |s: &AnswerSettings, name: &str| {
            let a = ClusterAnswerer::new(s.clone(), z.clone());
            a.answer(&n(name), RecordType::PTR) == Outcome::Fallthrough
        };
        s.fallthrough = Some(vec![n("10.IN-ADDR.arpa.")]);
        assert!(falls(&s, "9.9.9.10.in-addr.arpa."));
        assert!(falls(&s, "9.9.9.10.In-Addr.Arpa."));
        assert!(!falls(&s, "9.9.9.11.in-addr.arpa."));
        assert!(!falls(&s, "nosuch.ns.svc.cluster.local."));
        s.fallthrough = Some(vec![n("arpa.")]);
        assert!(falls(&s, "9.9.9.11.in-addr.arpa."));
        assert!(!falls(&s, "nosuch.ns.svc.cluster.local."));
        s.fallthrough = Some(vec![n("example.com."), n("svc.cluster.local.")]);
        assert!(!falls(&s, "9.9.9.11.in-addr.arpa."));
        assert!(falls(&s, "nosuch.ns.svc.cluster.local."));
        assert!(!falls(&s, "nosuch.pod.cluster.local."));
    }

    #[test]
    fn ns_prefers_the_service_holding_our_own_ip() {
        let z = zone();
        z.set_synced(true);
        z.apply_namespace("kube-system".into());
        z.apply_service(svc(
            "kube-system",
            "kube-dns",
            ServiceKind::ClusterIp(vec!["10.96.0.10".parse().unwrap()]),
        ));
        z.apply_service(svc(
            "kube-system",
            "my-dns",
            ServiceKind::ClusterIp(vec!["10.96.0.53".parse().unwrap()]),
        ));
        z.apply_slice(SliceInfo {
            name: "my-dns-1".into(),
            namespace: "kube-system".into(),
            service: Some("my-dns".into()),
            endpoints: vec![EndpointInfo::new(
                vec!["10.244.0.9".parse().unwrap()].into(),
                None,
                None,
            )],
            ports: vec![],
        });
        let a = ClusterAnswerer::new(settings(), z.clone());
        let ans = ask(&a, "cluster.local.", RecordType::NS);
        assert_eq!(
            crate_show(&ans.answers[0]),
            "kube-dns.kube-system.svc.cluster.local."
        );
        let mut s = settings();
        s.self_ips = vec!["10.244.0.9".parse().unwrap()];
        let a = ClusterAnswerer::new(s, z);
        let ans = ask(&a, "cluster.local.", RecordType::NS);
        assert_eq!(
            crate_show(&ans.answers[0]),
            "my-dns.kube-system.svc.cluster.local."
        );
        assert_eq!(ans.additional.len(), 1);
    }

    /// The longest zone that holds the whole name, label by label, in any case.
    #[test]
    fn the_matching_zone_is_the_longest_that_holds_every_label() {
        let mut s = settings();
        s.zones = vec![
            n("local."),
            n("cluster.local."),
            n("in-addr.arpa."),
            n("10.in-addr.arpa."),
        ];
        s.reverse_zones = vec![n("in-addr.arpa."), n("10.in-addr.arpa.")];
        let a = ClusterAnswerer::new(s, zone());
        let found = |q: &str| a.matching_zone(&n(q)).map(|z| z.to_string());
        for (q, want) in [
            ("a.ns.svc.cluster.local.", Some("cluster.local.")),
            ("A.NS.svc.Cluster.LOCAL.", Some("cluster.local.")),
            ("cluster.local.", Some("cluster.local.")),
            ("xcluster.local.", Some("local.")),
            ("local.", Some("local.")),
            ("1.0.0.10.in-addr.arpa.", Some("10.in-addr.arpa.")),
            ("1.0.0.11.IN-ADDR.arpa.", Some("in-addr.arpa.")),
            ("arpa.", None),
            ("example.com.", None),
            (".", None),
        ] {
            assert_eq!(found(q).as_deref(), want, "{q}");
        }
        // A name of more labels than fit on the stack.
        let long = format!("{}cluster.local.", "x.".repeat(20));
        assert_eq!(found(&long).as_deref(), Some("cluster.local."));
    }

    fn crate_show(r: &Record) -> String {
        match &r.data {
            RData::NS(ns) => ns.0.to_ascii(),
            other => format!("{other:?}"),
        }
    }

    /// The SOA's owner is spelt as the question spelt the zone, like every other owner: at the
    /// apex (forward and reverse) and in the authority section of negative answers. Before, it
    /// was the configured lower-case zone (`Cluster.Local. SOA` answered `cluster.local.`).
    #[test]
    fn soa_owner_echoes_the_question_case() {
        let z = zone();
        z.set_synced(true);
        let a = ClusterAnswerer::new(settings(), z);
        let owner = |r: &Record| r.name.to_string();
        let ans = ask(&a, "Cluster.LOCAL.", RecordType::SOA);
        assert_eq!(
            ans.answers.iter().map(owner).collect::<Vec<_>>(),
            ["Cluster.LOCAL."]
        );
        let ans = ask(&a, "In-Addr.Arpa.", RecordType::SOA);
        assert_eq!(
            ans.answers.iter().map(owner).collect::<Vec<_>>(),
            ["In-Addr.Arpa."]
        );
        for (q, t, zone) in [
            ("NoSuch.NS.svc.Cluster.Local.", RecordType::A, "Cluster.Local."),
            ("A.Ns.Svc.CLUSTER.local.", RecordType::TXT, "CLUSTER.local."),
            ("9.9.9.10.IN-ADDR.arpa.", RecordType::PTR, "IN-ADDR.arpa."),
        ] {
            let ans = ask(&a, q, t);
            assert_eq!(
                ans.authority.iter().map(owner).collect::<Vec<_>>(),
                [zone],
                "{q} {t}"
            );
        }
    }
}
