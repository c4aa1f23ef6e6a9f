//! What a plugin declares about replaying its answers (the answer memo's contract): whether
//! the server may send the same response again for the same request bytes ([`Replay`]), what
//! of the zones it is made from ([`Scope`]), how long a stored reply holds ([`Lifetime`]), and
//! the plan the chain works out from the plugins a question visited ([`ReplayPlan`]), and the
//! order a [`Replay::Reordered`] answer is replayed in ([`reorder`], `loadbalance`'s).

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Record, RecordType};
use rand::seq::SliceRandom;

/// What a plugin's part in the reply to a question depends on, and so who may be sent it
/// again: the one contract of every place that keeps answers (the answer memo, the cache and
/// its serve_stale and prefetch). Declared per question; the chain reads it as the question
/// visits the plugin ([`crate::chain::Next::decided_for_the_client`]).
///
/// | declared | memo replays it | a cache before the plugin keeps it |
/// | --- | --- | --- |
/// | `Client` (the default) | never | never |
/// | `Never` | never | yes |
/// | `Same`, `Counted`, `Reordered`, `Timed` | as each says | yes |
///
/// A decision made for one client is never sent to another: a plugin whose answer or decision
/// (an allow, a refusal, a transfer, a rate) reads who asks declares `Client`, and forgetting to
/// declare is the same as declaring it (it costs speed, never a leak).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// No one else may be given it: the answer or the decision depends on who asks (the
    /// client's address, pod, namespace, TSIG key, transport, view, policy). The memo never
    /// replays it and no cache before the plugin keeps it. The default.
    Client,
    /// No replay from the memo: the answer depends on more than the request bytes and the
    /// zones (the clock, chance, a file, a count per answer), but not on who asks, so a cache
    /// may keep it as it keeps an upstream's answer.
    Never,
    /// Yes, as it is.
    Same,
    /// Yes, and the plugin is told ([`Plugin::replayed`](crate::chain::Plugin::replayed)) so it counts the question as it
    /// would have (the cache's pass-through counters).
    Counted,
    /// Yes, with its address records in a fresh random order each time (`loadbalance`).
    Reordered,
    /// Yes, when the plugin wrote the reply from a store of its own and said how long it holds
    /// ([`Next::held_until`](crate::chain::Next::held_until)): until then, with its TTLs counted down as they age, and the
    /// plugin is told of each replay (the cache's hits). Otherwise, never.
    Timed,
}

/// How long a reply taken from a store stays what the store would answer ([`Replay::Timed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    /// When the store took it in.
    pub stored: tokio::time::Instant,
    /// When the store stops answering with it.
    pub expires: tokio::time::Instant,
    /// The whole seconds since `stored` its TTLs were counted down by, or `None` when they are
    /// sent as stored (`keepttl`).
    pub aged_by: Option<u32>,
    /// The plugin (its index in the chain) whose zone data the stored reply was made from
    /// ([`ZoneMark`]): it holds only while that plugin's answer is unchanged, so a replay of it
    /// depends on that plugin's zones as the plugin's own answer would. `None`: no zone's.
    pub made_from: Option<usize>,
}

/// What a store notes, when it keeps a reply a plugin made from its zones, to tell later that
/// the zones changed what the plugin would answer (a cached cluster name is never served stale:
/// issue 46). Taken before the question is answered, so a change while answering makes the
/// stored reply older than its mark, never newer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneMark {
    /// The plugin's index in the chain.
    pub plugin: usize,
    /// The sum of its zones' change counters for the question's [`Scope`] (the scope's and the
    /// structure's counters for [`Scope::Key`], the whole counter otherwise). Counters only
    /// move forward: the sum moves whenever one of them does.
    pub value: u64,
}

/// A replay a plugin is told of ([`Plugin::replayed`](crate::chain::Plugin::replayed)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// The reply was one the plugin wrote from its store ([`Replay::Timed`]); otherwise the
    /// plugin passed the question on ([`Replay::Counted`]).
    pub from_store: bool,
    /// The rcode sent.
    pub rcode: ResponseCode,
    /// Records in the answer section.
    pub answers: usize,
    /// For a reply made for a class of clients, what the plugin noted with it
    /// ([`ClientClass::note`]); 0 otherwise.
    pub note: u8,
}

/// What part of the zones a plugin's answer to a question is made from, so the answer memo
/// keeps it through changes elsewhere. Declared per question, after answering it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// None of the zones' data: the plugin does not read them. The default.
    Independent,
    /// Any of it: every change may alter the answer.
    Whole,
    /// The data of one scope (`cluster::scope::service_scope`, `cluster::scope::address_scope`) and the zones'
    /// structure ([`crate::proto::ChangeCounter::structure_generation`]).
    Key(u64),
}

impl Scope {
    /// The scope of an answer two plugins' scopes went into.
    #[must_use]
    pub fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::Independent, x) | (x, Self::Independent) => x,
            (Self::Key(a), Self::Key(b)) if a == b => Self::Key(a),
            _ => Self::Whole,
        }
    }
}

/// How a reply may be sent again (see [`Replay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayPlan {
    /// Its address records are reordered on each replay.
    pub reordered: bool,
    /// Bit `i`: plugin `i` is told of each replay ([`Chain::replayed`](crate::chain::Chain::replayed)).
    pub counted: u32,
    /// What of the zones the reply is made from: `Some(key)` for one scope, `None` for any
    /// (or none) of it.
    pub scope: Option<u64>,
    /// For a reply from a plugin's store ([`Replay::Timed`]): how long it holds. Such a plan
    /// has `reads_zones` false unless a plugin before the store read them.
    pub lifetime: Option<Lifetime>,
    /// Some visited plugin's answer is made from the zones ([`Scope::Whole`] or
    /// [`Scope::Key`]).
    pub reads_zones: bool,
    /// For a reply made for a class of clients ([`crate::chain::Next::for_clients_of`]).
    pub class: Option<ClientClass>,
}

/// A reply made for every client of one class ([`crate::chain::Next::for_clients_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientClass {
    /// The plugin that classifies clients ([`crate::chain::ClientClasses`]): its index
    /// in the chain.
    pub plugin: usize,
    /// The class the reply was made for.
    pub class: u64,
    /// A number the plugin is given back with each replay ([`Replayed::note`]).
    pub note: u8,
}

impl Replay {
    /// True when [`reorder`] (the order [`Replay::Reordered`] promises) may change `records`:
    /// two or more A/AAAA, or two or more MX.
    pub fn reorders(records: &[Record]) -> bool {
        let count = |t: &[RecordType]| records.iter().filter(|r| t.contains(&r.record_type())).count();
        count(&[RecordType::A, RecordType::AAAA]) >= 2 || count(&[RecordType::MX]) >= 2
    }
}

/// Where a record goes in [`reorder`]'s order.
fn place(r: &Record) -> u8 {
    match r.record_type() {
        RecordType::CNAME => 0,
        RecordType::A | RecordType::AAAA => 2,
        RecordType::MX => 3,
        _ => 1,
    }
}

/// The order of an answer that [`Replay::Reordered`] promises afresh on every replay (and that
/// `loadbalance` gives every answer): CNAMEs first, then the records that are not reordered in
/// their order, then the A/AAAA records shuffled, then the MX records shuffled.
pub fn reorder(records: &mut [Record]) {
    if !Replay::reorders(records) {
        return;
    }
    // A stable sort keeps each group's own order before the shuffles.
    records.sort_by_key(place);
    let addrs = records
        .iter()
        .position(|r| place(r) >= 2)
        .unwrap_or(records.len());
    let mxs = records
        .iter()
        .position(|r| place(r) == 3)
        .unwrap_or(records.len());
    let mut rng = rand::rng();
    records[addrs..mxs].shuffle(&mut rng);
    records[mxs..].shuffle(&mut rng);
}
