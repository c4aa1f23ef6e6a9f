//! The request and the reply as every layer sees them: the question a plugin is asked (with
//! who asked and how), the reply it gives, the transport, and the wire limits. A leaf: it
//! imports nothing of this crate, and every other layer may import it.

use std::net::{Ipv4Addr, SocketAddr};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

/// The transport a request came over: the one transport type of the crate.
pub use hickory_server::net::xfer::Protocol as Transport;

/// The UDP payload size cluster-dns advertises and never exceeds (DNS Flag Day 2020).
pub const MAX_UDP_PAYLOAD: u16 = 1232;
/// UDP size limit for a query without EDNS (RFC 1035).
pub const PLAIN_UDP_LIMIT: u16 = 512;

/// The `proto` label and query-log word of a transport, as CoreDNS writes them: `udp`, else
/// `tcp` (DNS over TLS and HTTPS run over TCP).
pub fn transport_label(t: Transport) -> &'static str {
    match t {
        Transport::Udp => "udp",
        _ => "tcp",
    }
}

/// The failure of a question no configured plugin answers (no `forward` after the cluster zone).
pub const NO_PLUGIN_ANSWERED: &str = "no plugin could answer";

/// One question as the plugins see it: the name as the client spelt it, the type and class,
/// and the request bits that change the answer (DO, CD, RD) or its transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The name, in the client's case.
    pub name: Name,
    /// The type asked.
    pub qtype: RecordType,
    /// The class asked: IN, or a class a plugin of the block declares it answers (`chaos`: CH).
    pub qclass: DNSClass,
    /// The EDNS DO bit.
    pub dnssec_ok: bool,
    /// The CD bit.
    pub checking_disabled: bool,
    /// The RD bit.
    pub recursion_desired: bool,
    /// The transport the client asked over.
    pub transport: Transport,
    /// The client's address (an IPv4 client of a dual-stack socket as IPv4). A plugin whose
    /// answer depends on it must say so (see the plugin contract in `chain`).
    pub client: SocketAddr,
    /// Asked by a plugin that only needs to know whether the name exists (autopath's tries of
    /// a search path), never by a client: an NXDOMAIN may come back as the bare rcode, without
    /// its SOA. Any other reply is the full one.
    pub probe: bool,
    /// The EDNS options that travel with the question: the client's, but for the hop-by-hop
    /// ones ([`HOP_BY_HOP_OPTIONS`]), as `rewrite`'s `edns0` rules left them. `forward` sends
    /// them upstream, as CoreDNS forwards the request's options.
    pub edns_options: Vec<EdnsOpt>,
    /// The address the question arrived at: the listener's bound address (`0.0.0.0:53` for a
    /// wildcard bind), when known.
    pub server: Option<SocketAddr>,
    /// The question's metadata (`metadata`): `None` unless its block has the directive, so a
    /// block without it pays nothing. Plugins publish into it ([`QueryMetadata::set`]).
    pub metadata: Option<QueryMetadata>,
    /// What the client's DNS policy lets it see (`dnspolicy`, which sets it once as the
    /// question reaches it; unset in blocks without the directive). Travels with the question's
    /// copies (autopath's tries, a CNAME target's question), so every plugin that answers
    /// cluster names or sends names out reads it ([`Question::view`]).
    pub visibility: std::sync::OnceLock<VisibilityRef>,
    /// For an IXFR: the serial of the zone version the asker holds (the SOA in its request's
    /// authority section, RFC 1995 section 3), from which `transfer` answers the differences
    /// when its zone's journal reaches back to it.
    pub ixfr_serial: Option<u32>,
}

/// What a tenant's DNS policy lets one client see and ask (the `dnspolicy` plugin sets it on
/// the question; `kubernetes`, `k8s_external` and `forward` read it). A name it hides is
/// answered exactly as a name that does not exist.
pub trait Visibility: Send + Sync + std::fmt::Debug {
    /// The same for every client that sees the same: answers made through this view are
    /// replayed only to clients of the same class.
    fn class(&self) -> u64;
    /// True when some namespace is hidden from the client (a wildcard over namespaces and a
    /// zone transfer of the cluster zone are then not answered).
    fn restricted(&self) -> bool;
    /// True when the client may see the names of `namespace` (lower-case).
    fn sees_namespace(&self, namespace: &str) -> bool;
    /// True when a question for `name`, outside the cluster's names, may be answered for the
    /// client (and may leave the server). Pure: counts nothing.
    fn may_ask_outside(&self, name: &Name) -> bool;
    /// The rcode of a denied outside name (`action`: NXDOMAIN or REFUSED).
    fn denial(&self) -> ResponseCode;
}

/// A question's [`Visibility`], shared by its copies.
#[derive(Debug, Clone)]
pub struct VisibilityRef(pub std::sync::Arc<dyn Visibility>);

/// Two questions' views are equal when they are the same view.
impl PartialEq for VisibilityRef {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for VisibilityRef {}

impl std::ops::Deref for VisibilityRef {
    type Target = dyn Visibility;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

/// What takes a NOTIFY (RFC 1996) for a zone it follows as a secondary (`secondary`). The
/// server answers a NOTIFY request itself, never through the chain: it asks the block's
/// [`NotifyTaker`]s, which a plugin offers by type (`Plugin::offers`).
pub trait ZoneNotified: Send + Sync {
    /// A NOTIFY for `zone` came from `from`: `None` when the zone is not one it follows;
    /// `Some(true)` when `from` is one of the zone's primaries (the zone will be checked at
    /// once), `Some(false)` when it is not (refused).
    fn notified(&self, zone: &Name, from: std::net::IpAddr) -> Option<bool>;
}

/// A plugin's [`ZoneNotified`], as it offers it (found by this type).
#[derive(Clone)]
pub struct NotifyTaker(pub std::sync::Arc<dyn ZoneNotified>);

impl std::fmt::Debug for NotifyTaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyTaker").finish_non_exhaustive()
    }
}

/// One EDNS option (RFC 6891) of a question: its code, and its data as on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdnsOpt {
    /// The option code.
    pub code: u16,
    /// The option data.
    pub data: Vec<u8>,
}

/// Option codes that concern one hop only and never travel with the question: COOKIE (10),
/// TCP keepalive (11), padding (12).
pub const HOP_BY_HOP_OPTIONS: [u16; 3] = [10, 11, 12];

/// A request's EDNS options that travel with its question (see `Question::edns_options`): all
/// but the hop-by-hop ones, as code and wire data. No allocation when there are none (a `dig`
/// query carries only a COOKIE).
pub fn travelling_options(edns: &hickory_proto::op::Edns) -> Vec<EdnsOpt> {
    use hickory_proto::serialize::binary::BinEncodable;
    edns.options()
        .as_ref()
        .iter()
        .filter(|(code, _)| !HOP_BY_HOP_OPTIONS.contains(&u16::from(*code)))
        .filter_map(|(code, option)| {
            Some(EdnsOpt {
                code: u16::from(*code),
                data: option.to_bytes().ok()?,
            })
        })
        .collect()
}

/// The labels and values the plugins publish about one query when its block has `metadata`
/// (`kubernetes/client-namespace`, `forward/upstream`), read by `log`, `view` and `dnstap`. Shared by
/// the question's copies (a rewritten question, autopath's tries), so a value a plugin sets
/// deep in the chain is seen by the observers. At most [`QueryMetadata::MAX_LABELS`] labels.
#[derive(Debug, Clone, Default)]
pub struct QueryMetadata(std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>);

impl QueryMetadata {
    /// The most labels one query holds; further ones are not kept.
    pub const MAX_LABELS: usize = 64;

    /// Sets `label` to `value` (the empty value means "no metadata", as in CoreDNS).
    pub fn set(&self, label: &str, value: &str) {
        let mut all = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(have) = all.iter_mut().find(|(l, _)| l == label) {
            value.clone_into(&mut have.1);
        } else if all.len() < Self::MAX_LABELS {
            all.push((label.to_owned(), value.to_owned()));
        }
    }

    /// The value of `label`, when a plugin set it.
    pub fn get(&self, label: &str) -> Option<String> {
        let all = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        all.iter().find(|(l, _)| l == label).map(|(_, v)| v.clone())
    }

    /// How many labels are set.
    pub fn len(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// True when no label is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Two questions' metadata are equal when they are the same set (a question and its copies):
/// metadata is not part of what is asked.
impl PartialEq for QueryMetadata {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for QueryMetadata {}

impl Question {
    /// A plain IN question over UDP with RD set and no DO/CD, from an unspecified client.
    pub fn new(name: Name, qtype: RecordType) -> Self {
        Self {
            name,
            qtype,
            qclass: DNSClass::IN,
            dnssec_ok: false,
            checking_disabled: false,
            recursion_desired: true,
            transport: Transport::Udp,
            client: SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            probe: false,
            edns_options: Vec::new(),
            server: None,
            metadata: None,
            visibility: std::sync::OnceLock::new(),
            ixfr_serial: None,
        }
    }

    /// What the client's DNS policy lets it see, once `dnspolicy` set it.
    pub fn view(&self) -> Option<&dyn Visibility> {
        self.visibility.get().map(|v| &*v.0)
    }

    /// True when the client asked over a stream (TCP, or TLS over TCP).
    pub fn over_stream(&self) -> bool {
        !matches!(self.transport, Transport::Udp)
    }

    /// The same question, asked as a probe or not ([`Question::probe`]).
    #[must_use]
    pub fn probing(mut self, probe: bool) -> Self {
        self.probe = probe;
        self
    }

    /// The same question for another name (an ExternalName target).
    pub fn for_name(&self, name: Name) -> Self {
        // Field by field: `..self.clone()` would copy the old name only to drop it.
        Self {
            name,
            qtype: self.qtype,
            qclass: self.qclass,
            dnssec_ok: self.dnssec_ok,
            checking_disabled: self.checking_disabled,
            recursion_desired: self.recursion_desired,
            transport: self.transport,
            client: self.client,
            probe: self.probe,
            edns_options: self.edns_options.clone(),
            server: self.server,
            metadata: self.metadata.clone(),
            visibility: self.visibility.clone(),
            // Another name is not the zone the asker holds a version of.
            ixfr_serial: None,
        }
    }
}

/// An answer that came from an upstream server: its rcode, flags and sections as received (the
/// OPT record removed; the server adds its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// The upstream's rcode.
    pub rcode: ResponseCode,
    /// The upstream's RA bit.
    pub recursion_available: bool,
    /// The upstream's AD bit.
    pub authentic_data: bool,
    /// The upstream's TC bit (set only when even its TCP answer was cut).
    pub truncated: bool,
    /// Header bits a plugin set or cleared after the upstream answered (`header`).
    pub flags: FlagEdit,
    /// Answer section.
    pub answers: Vec<Record>,
    /// Authority section.
    pub authority: Vec<Record>,
    /// Additional section, without the OPT.
    pub additional: Vec<Record>,
}

/// A failure the chain met while answering this question itself: the rcode the client gets and
/// why, which `errors` logs. Served again from the cache, it is a plain [`Reply::Rcode`]: the
/// failure happened once, when it was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The rcode sent (SERVFAIL or REFUSED).
    pub rcode: ResponseCode,
    /// What failed, from a fixed set of phrases (it is matched by `errors { consolidate }`).
    pub reason: &'static str,
}

/// What the chain decided for one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An authoritative answer from the cluster zone (AA=1, RA=0).
    Authoritative(Answer),
    /// An answer from upstream: its flags (AA=0, its RA) and rcode are kept.
    Forwarded(Forwarded),
    /// The server answers this rcode with no records; nothing failed while answering this
    /// question (for example a SERVFAIL the cache stored earlier).
    Rcode(ResponseCode),
    /// The chain failed on this question (no upstream answered, no plugin could answer): the
    /// rcode with no records, and the failure for `errors`.
    Failed(Failure),
    /// No reply is sent at all (`acl`'s `drop`): the client sees a timeout, and nothing
    /// observes the request. Its [`Reply::rcode`] is REFUSED, for the plugins it passes on the
    /// way out (it is never stored, replayed or sent).
    Dropped,
    /// An empty reply with TC=1 and no records (a rate limit's slip: a real client asks again
    /// over TCP, a spoofed one gets nothing bigger than it sent). Its [`Reply::rcode`] is
    /// NOERROR; it is never stored or replayed.
    Truncated,
}

impl Reply {
    /// The rcode the client gets.
    pub fn rcode(&self) -> ResponseCode {
        match self {
            Self::Authoritative(a) => a.rcode,
            Self::Forwarded(f) => f.rcode,
            Self::Rcode(r) => *r,
            Self::Failed(f) => f.rcode,
            Self::Dropped => ResponseCode::Refused,
            Self::Truncated => ResponseCode::NoError,
        }
    }

    /// The answer section.
    pub fn answers(&self) -> &[Record] {
        match self {
            Self::Authoritative(a) => &a.answers,
            Self::Forwarded(f) => &f.answers,
            Self::Rcode(_) | Self::Failed(_) | Self::Dropped | Self::Truncated => &[],
        }
    }
}

/// An answer section, and whether its records are known to share one owner: every record's
/// owner a clone of the first one's, so spelt the same byte for byte.
///
/// The encoder then writes that owner once and points at it from every later record, instead
/// of reading each owner's labels again (hickory-proto's label iterator, about 450
/// instructions a record for a cluster name). Only [`Records::with_owner`] sets the mark,
/// building the records itself; any mutable access (`DerefMut`: a push, a rewrite of a name,
/// `iter_mut`) forgets it, so no plugin can change an owner under it. [`Records::permute`]
/// keeps it, since reordering records of one owner keeps them of one owner.
#[derive(Debug, Clone, Default, Eq)]
pub struct Records {
    list: Vec<Record>,
    /// Every record's owner is the first one's, spelt the same (see the type's comment).
    one_owner: bool,
}

impl Records {
    /// One record per item of `data`, all owned by `owner` with `ttl`: a section that is
    /// known to share one owner.
    pub fn with_owner(owner: &Name, ttl: u32, data: impl IntoIterator<Item = RData>) -> Self {
        let data = data.into_iter();
        // The upper bound: a filtered iterator's lower one is 0, and growing by doubling
        // copies every 272-byte record again.
        let (least, most) = data.size_hint();
        let mut list = Vec::with_capacity(most.unwrap_or(least));
        // A loop, not `collect`: through the iterator each 272-byte record was copied twice.
        for d in data {
            list.push(Record::from_rdata(owner.clone(), ttl, d));
        }
        Self {
            list,
            one_owner: true,
        }
    }

    /// True when every record's owner is known to be the first one's, spelt the same.
    pub fn share_one_owner(&self) -> bool {
        self.one_owner
    }

    /// The records, as a plain list.
    pub fn into_vec(self) -> Vec<Record> {
        self.list
    }

    /// Reorders the records with `f`, keeping the mark: `f` may only move records (a slice
    /// cannot grow or shrink), so they keep sharing their one owner.
    pub fn permute(&mut self, f: impl FnOnce(&mut [Record])) {
        f(&mut self.list);
    }
}

impl From<Vec<Record>> for Records {
    fn from(list: Vec<Record>) -> Self {
        Self {
            list,
            one_owner: false,
        }
    }
}

impl std::ops::Deref for Records {
    type Target = Vec<Record>;
    fn deref(&self) -> &Vec<Record> {
        &self.list
    }
}

impl std::ops::DerefMut for Records {
    /// Whatever the caller does with the records, they may no longer share one owner.
    fn deref_mut(&mut self) -> &mut Vec<Record> {
        self.one_owner = false;
        &mut self.list
    }
}

/// Equal when the records are: the mark is what is known of them, not part of the section.
impl PartialEq for Records {
    fn eq(&self, other: &Self) -> bool {
        self.list == other.list
    }
}

impl<'a> IntoIterator for &'a Records {
    type Item = &'a Record;
    type IntoIter = std::slice::Iter<'a, Record>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

impl IntoIterator for Records {
    type Item = Record;
    type IntoIter = std::vec::IntoIter<Record>;
    fn into_iter(self) -> Self::IntoIter {
        self.list.into_iter()
    }
}

impl FromIterator<Record> for Records {
    fn from_iter<I: IntoIterator<Item = Record>>(iter: I) -> Self {
        Vec::from_iter(iter).into()
    }
}

/// A complete answer to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The rcode.
    pub rcode: ResponseCode,
    /// Answer section.
    pub answers: Records,
    /// Authority section (one SOA for negative answers).
    pub authority: Vec<Record>,
    /// Additional section (SRV/NS glue).
    pub additional: Vec<Record>,
    /// A CNAME target outside what the writing plugin answers (a kubernetes ExternalName, a
    /// template's CNAME) whose records should follow the CNAME: the rest of the chain is asked
    /// for it (`chain::Next::chase`) when a plugin that may reach an upstream follows.
    pub chase_target: Option<Name>,
    /// Header bits a plugin set or cleared after it was written (`header`).
    pub flags: FlagEdit,
}

impl Answer {
    /// An answer with `rcode` and empty sections, to fill in.
    pub fn empty(rcode: ResponseCode) -> Self {
        Self {
            rcode,
            answers: Records::default(),
            authority: Vec::new(),
            additional: Vec::new(),
            chase_target: None,
            flags: FlagEdit::KEEP,
        }
    }
}

/// Header bits of a reply set or cleared after it was written (`header`'s rules), which the
/// server applies over the ones it writes for the reply's kind (AA=1 and RA=0 for an
/// [`Answer`], the upstream's RA for a [`Forwarded`], the client's RD). `None` keeps the
/// server's. Stores that keep a reply (the cache) keep its edit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlagEdit {
    /// The AA bit.
    pub authoritative: Option<bool>,
    /// The RA bit.
    pub recursion_available: Option<bool>,
    /// The RD bit.
    pub recursion_desired: Option<bool>,
}

impl FlagEdit {
    /// No bit changed.
    pub const KEEP: Self = Self {
        authoritative: None,
        recursion_available: None,
        recursion_desired: None,
    };

    /// `self`, then `later` over it (a later rule wins).
    #[must_use]
    pub fn then(self, later: Self) -> Self {
        Self {
            authoritative: later.authoritative.or(self.authoritative),
            recursion_available: later.recursion_available.or(self.recursion_available),
            recursion_desired: later.recursion_desired.or(self.recursion_desired),
        }
    }
}

/// Something answers are made from that counts its changes (the cluster zone): a response made
/// while it read `g` is current while it still reads `g`.
///
/// Finer, for answers that depend on one part of the data only (a scope: the cluster's `service_scope`): such
/// an answer is current while [`ChangeCounter::structure_generation`] and
/// [`ChangeCounter::scope_generation`] of its scope are unchanged. Every change moves
/// [`ChangeCounter::generation`] first, then the finer counters it touches, so a response whose
/// finer counters were read before `generation` was read unchanged is never newer than them.
pub trait ChangeCounter: Send + Sync + std::fmt::Debug {
    /// The change counter; it moves (after the change is complete) whenever an answer may
    /// have changed.
    fn generation(&self) -> u64;

    /// Moves with the changes that may alter answers of any scope (a namespace appearing, the
    /// sync state). By default, with every change.
    fn structure_generation(&self) -> u64 {
        self.generation()
    }

    /// Moves with the changes to the data of scope `key` (and of the scopes sharing its
    /// counter). By default, with every change.
    fn scope_generation(&self, _key: u64) -> u64 {
        self.generation()
    }

    /// The SOA serial its negative answers carry now, when it has one.
    fn serial(&self) -> Option<u32> {
        None
    }
}

/// True for a label Kubernetes accepts as a DNS label (RFC 1123), compared case-insensitively.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::A;

    fn records() -> Records {
        let owner = Name::from_ascii("Web.ns.svc.cluster.local.").unwrap();
        Records::with_owner(
            &owner,
            5,
            (1..=4).map(|i| RData::A(A(Ipv4Addr::new(10, 0, 0, i)))),
        )
    }

    /// The mark is set only by `with_owner`, survives reading, cloning and `permute`, and is
    /// forgotten by any mutable access, even one that changes nothing.
    #[test]
    fn the_one_owner_mark_is_lost_with_any_mutable_access() {
        let r = records();
        assert!(r.share_one_owner());
        assert_eq!(r.len(), 4);
        assert!(r.iter().all(|x| x.name.eq_case(&r[0].name)));
        assert!(r.clone().share_one_owner());
        let mut reversed = r.clone();
        reversed.permute(|list| list.reverse());
        assert!(reversed.share_one_owner());
        assert_eq!(reversed[0], r[3]);
        assert!(!Records::from(r.clone().into_vec()).share_one_owner());
        assert!(!r.iter().cloned().collect::<Records>().share_one_owner());

        let changes: [fn(&mut Records); 4] = [
            |r| {
                let same = r[0].clone();
                r.push(same);
            },
            |r| r[1].name = Name::from_ascii("other.").unwrap(),
            |r| r.iter_mut().for_each(|x| x.ttl = 1),
            |r| {
                let _ = r.as_mut_slice();
            },
        ];
        for change in changes {
            let mut m = r.clone();
            change(&mut m);
            assert!(!m.share_one_owner());
        }
        // Equality is about the records, not what is known of them.
        assert_eq!(Records::from(r.clone().into_vec()), r);
    }
}
