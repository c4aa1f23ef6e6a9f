//! The chain: the [`Plugin`] trait a query-path plugin implements, and the walk of a question
//! through a server block's plugins, built once per configuration.
//!
//! [`Chain::serve`] walks the plugins in order; each answers or hands the question to [`Next`].
//! A plugin that can answer without awaiting says so per question ([`Plugin::serve_now`]): the
//! walk runs through such plugins as plain calls and builds a future only for the first that
//! needs one, so an answer from memory costs no boxed future.
//! The walk is traced (`Trace`): which plugins the question visited and which one wrote the
//! reply, so the reply can be labelled and judged for replay ([`crate::chain::ReplayPlan`]).
//!
//! The trait, [`Next`] and [`Chain`] share this file: each is written in terms of the others.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use hickory_proto::op::{Edns, ResponseCode};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{DNSClass, Name, RecordType};

use super::capability::{Capabilities, ClientClasses, EdnsOptions, MetadataSource};
use super::replay::{ClientClass, Lifetime, Replay, ReplayPlan, Replayed, Scope, ZoneMark};
use crate::proto::{Answer, ChangeCounter, Failure, NO_PLUGIN_ANSWERED, QueryMetadata, Question, Reply};

/// A boxed future of a [`Reply`] (the chain recurses through its plugins).
pub type ReplyFuture<'a> = Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;

/// The most plugins one chain holds (the trace is a bit set).
const MAX_PLUGINS: usize = 32;

/// What a plugin answers to a question without awaiting anything ([`Plugin::serve_now`]).
#[derive(Debug)]
pub enum Now {
    /// Its reply, written by itself.
    Reply(Reply),
    /// The rest of the chain answers, and that reply is this plugin's unchanged (a
    /// `fallthrough`).
    Pass,
    /// Only [`Plugin::serve`] can answer: the plugin may await, or works on what the rest of
    /// the chain answers. The default.
    Later,
}

/// One plugin in a chain: what the server calls on every plugin. See the module docs for what
/// the server reads. What only some plugins have (upstreams, search paths, zone transfers,
/// EDNS options, metadata, client classes, a startup wait, ...) they offer by type
/// ([`Plugin::offers`]).
pub trait Plugin: Send + Sync + fmt::Debug {
    /// The Corefile directive, and the `plugin` label of the replies it writes.
    fn name(&self) -> &'static str;

    /// True when answering may await I/O (an upstream).
    fn awaits_io(&self) -> bool {
        false
    }

    /// What its part in the reply to `q` depends on, and so whether the memo may replay it
    /// and a cache before it keep it (see [`Replay`]). Default: [`Replay::Client`], kept by no
    /// one.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Client
    }

    /// The classes other than IN it answers (`chaos`: CH). The server refuses a question of
    /// another class unless a plugin of the block that takes it lists the class; every plugin
    /// may assume IN otherwise.
    fn classes(&self) -> &'static [DNSClass] {
        &[]
    }

    /// Its answer to `q`: a reply it writes itself, or what `next` answers (maybe changed).
    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a>;

    /// Its answer to `q` when it needs no await: the chain asks this first and calls
    /// [`Plugin::serve`] only on [`Now::Later`] (the default). What it returns must be what
    /// `serve` would answer, with the same calls on `next` (`next` is here only to be read:
    /// [`Next::awaits_io`]).
    fn serve_now(&self, _q: &Question, _next: &Next<'_>) -> Now {
        Now::Later
    }

    /// A reply it declared [`Replay::Counted`] or [`Replay::Timed`] for was sent again from
    /// the memo.
    fn replayed(&self, _replay: Replayed) {}

    /// The zones whose change counters its answers depend on (the cluster zone).
    fn zones(&self) -> Vec<Arc<dyn ChangeCounter>> {
        Vec::new()
    }

    /// What of the zones its answer to `q` is made from ([`Scope`]). By default: all of them
    /// when it reads a zone ([`Plugin::zones`]), none otherwise.
    fn scope(&self, _q: &Question) -> Scope {
        if self.zones().is_empty() {
            Scope::Independent
        } else {
            Scope::Whole
        }
    }

    /// Background work, started once the listeners are up; `chain` is the chain it is in.
    fn start(&self, _chain: &Chain) {}

    /// Why it is not ready to serve, one line each as `/ready` lists them (`loop`, or
    /// `kubernetes: services: 401 Unauthorized`); empty when it is ready.
    fn not_ready(&self) -> Vec<String> {
        Vec::new()
    }

    /// What it offers other plugins and the runtime, found by type ([`Chain::offered`],
    /// [`Next::offered`]): `forward` its upstreams, `kubernetes` its search paths, `nsid` its
    /// EDNS options ([`crate::chain::EdnsOptions`]). Asked once, when its chain is built.
    /// Default: nothing.
    fn offers(self: Arc<Self>) -> Capabilities {
        Capabilities::default()
    }
}

/// What one question's walk through the chain touched: the plugins visited, the one that
/// wrote the reply and what its store said of it. Written by the one task answering that
/// question (atomics and a mutex that is never contended, only so the future stays `Send`).
#[derive(Debug, Default)]
struct Trace {
    /// Bit `i`: plugin `i` was asked.
    visited: AtomicU32,
    /// 1 + the index of the plugin that wrote the reply; 0 while none did.
    writer: AtomicU32,
    /// A plugin found, while answering, that this reply must not be replayed.
    no_replay: std::sync::atomic::AtomicBool,
    /// Bit `i`: plugin `i` decided for this client ([`Replay::Client`] as the question
    /// visited it, [`Next::for_this_client_only`]) or for its class of clients
    /// ([`Next::for_clients_of`]). Only set, never cleared: no store before plugin `i` keeps
    /// the reply ([`Next::decided_for_the_client`]).
    for_client: AtomicU32,
    /// Bit `i`: plugin `i` made its part of the reply through the question's view
    /// ([`Next::depends_on_visibility`]): a decision for the view's class of clients, which the
    /// plugin that set the view pushed as the reply's class.
    through_view: AtomicU32,
    /// The plugin that made the reply for a class of clients, and the class
    /// ([`Next::for_clients_of`]); set at most once (a second, different one forbids the
    /// replay).
    class: std::sync::Mutex<Option<ClientClass>>,
    /// What the store of the plugin that wrote the reply said of it ([`Next::held_until`]);
    /// set at most once (a second one forbids the replay).
    lifetime: std::sync::Mutex<Option<Lifetime>>,
    /// How many times the chain was asked again from the start for this question's CNAME
    /// targets ([`Next::chase`]); bounded by [`MAX_CHASES`] so CNAMEs that lead back to
    /// themselves end.
    chases: AtomicU32,
}

impl Trace {
    /// The question visited plugin `at`, which declared `replay` for it.
    fn visit(&self, at: usize, replay: Replay) {
        let bit = 1 << at;
        self.visited.fetch_or(bit, Ordering::Relaxed);
        if replay == Replay::Client {
            self.for_client.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Plugin `at` returned `reply`: the innermost plugin that returned a reply without
    /// asking on wrote it (unless a plugin after it claimed it); a failure is the chain's, not
    /// a plugin's answer.
    fn wrote(&self, at: usize, reply: &Reply) {
        if !matches!(reply, Reply::Failed(_)) {
            let me = u32::try_from(at + 1).unwrap_or(0);
            let _ = self
                .writer
                .compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// The most CNAME targets one question chases through the chain (CoreDNS stops a CNAME
/// chain after 8 hops too).
const MAX_CHASES: u32 = 8;

/// The rest of the chain after the plugin being asked.
#[derive(Debug, Clone, Copy)]
pub struct Next<'a> {
    chain: &'a Chain,
    at: usize,
    trace: &'a Trace,
}

impl<'a> Next<'a> {
    /// Asks the rest of the chain (`q` may be a question of the plugin's own, such as a
    /// rewritten one).
    pub fn serve<'b>(&self, q: &'b Question) -> ReplyFuture<'b>
    where
        'a: 'b,
    {
        self.chain.serve_at(self.at, q, self.trace)
    }

    /// The `serve` of a plugin whose [`Plugin::serve_now`] never returns [`Now::Later`]: its
    /// own reply, or on [`Now::Pass`] the rest of the chain's. (The chain calls `serve_now`
    /// itself; this keeps `serve` the same answer for callers that ask it.)
    pub fn follow<'b>(&self, now: Now, q: &'b Question) -> ReplyFuture<'b>
    where
        'a: 'b,
    {
        match now {
            Now::Reply(reply) => Box::pin(std::future::ready(reply)),
            Now::Pass | Now::Later => self.serve(q),
        }
    }

    /// Asks the whole chain again from its first plugin, for another question (an
    /// ExternalName's target, as CoreDNS's upstream lookups go through the server again).
    pub fn restart<'b>(&self, q: &'b Question) -> ReplyFuture<'b>
    where
        'a: 'b,
    {
        self.chain.serve_at(0, q, self.trace)
    }

    /// The CNAME answer `answer` (whose CNAME records point at `target`), completed: the whole
    /// chain is asked again for `target` (as CoreDNS's upstream lookups go through the server
    /// again), and what comes back is appended after the CNAME records, with the target's
    /// rcode (RFC 6604) and negative authority. When nothing in the chain answers for the
    /// target (no upstream), the CNAME is returned alone, NOERROR. The asking plugin is
    /// recorded as the writer. Past `MAX_CHASES` (8) chases for one question, the CNAME is
    /// returned alone.
    pub async fn chase(&self, mut answer: Answer, target: Name, q: &Question) -> Reply {
        answer.chase_target = None;
        // Keep only what this answer owns: the CNAME(s) it wrote (and the DNAMEs they were
        // made from).
        answer
            .answers
            .retain(|r| matches!(r.record_type(), RecordType::CNAME | RecordType::DNAME));
        if self.trace.chases.fetch_add(1, Ordering::Relaxed) >= MAX_CHASES {
            self.claim();
            return Reply::Authoritative(answer);
        }
        let target_q = q.for_name(target);
        let inner = self.restart(&target_q).await;
        match inner {
            Reply::Forwarded(f) => {
                answer.rcode = f.rcode;
                let negative = f.answers.is_empty() || f.rcode != ResponseCode::NoError;
                answer.answers.extend(f.answers);
                answer.authority = if negative { f.authority } else { Vec::new() };
                answer.additional = Vec::new();
            }
            Reply::Authoritative(a) => {
                answer.rcode = a.rcode;
                answer.answers.extend(a.answers);
                answer.authority = a.authority;
            }
            // Nothing in the chain answers for the target: it is outside every zone of the
            // server, and no upstream is asked. The CNAME alone, as an authoritative server
            // answers (RFC 1034 section 4.3.2, step 3a: the rest is the resolver's).
            Reply::Failed(Failure {
                reason: NO_PLUGIN_ANSWERED,
                ..
            }) => {
                answer.rcode = ResponseCode::NoError;
                answer.authority = Vec::new();
            }
            Reply::Rcode(r) | Reply::Failed(Failure { rcode: r, .. }) => {
                answer.rcode = r;
                answer.authority = Vec::new();
            }
            // The target is not to be answered (`acl`'s drop): neither is the question.
            Reply::Dropped => return Reply::Dropped,
            Reply::Truncated => return Reply::Truncated,
        }
        self.claim();
        Reply::Authoritative(answer)
    }

    /// True when a plugin after this one may await I/O.
    pub fn awaits_io(&self) -> bool {
        self.chain.last_awaiting.is_some_and(|last| last >= self.at)
    }

    /// The offers of type `T` of the plugins after this one, nearest first
    /// ([`Plugin::offers`], found when the chain was built): `loop` finds the upstreams it
    /// probes, `transfer` the zones it sends.
    pub fn offered<T: Any>(&self) -> impl Iterator<Item = &'a T> + use<'a, T> {
        let chain: &'a Chain = self.chain;
        chain
            .offers
            .each
            .get(self.at..)
            .unwrap_or_default()
            .iter()
            .filter_map(Capabilities::first::<T>)
    }

    /// The plugin asking wrote the reply it returns, though it asked the rest of the chain for
    /// part of it (an ExternalName answer with its target's records).
    pub fn claim(&self) {
        let me = u32::try_from(self.at).unwrap_or(0);
        self.trace.writer.store(me, Ordering::Relaxed);
    }

    /// This question's reply must not be replayed, whatever the plugins' [`Plugin::replay`]
    /// say: what the plugin asking did depended on the client (autopath's walk), or an answer
    /// for another client could differ from it.
    pub fn forbid_replay(&self) {
        self.trace.no_replay.store(true, Ordering::Relaxed);
    }

    /// The bit of the plugin asking (this `Next` is the rest of the chain after it).
    fn asking_bit(&self) -> u32 {
        1 << self.at.saturating_sub(1)
    }

    /// The reply the plugin asking returns was made for this client only (it lists what is
    /// near the client: `kubernetes`'s `topology`; autopath's walk of the client's search
    /// path), though the plugin declared otherwise for the question ([`Plugin::replay`]): it
    /// is neither replayed nor kept for another client by a store before the plugin
    /// ([`Next::decided_for_the_client`]).
    pub fn for_this_client_only(&self) {
        self.trace
            .for_client
            .fetch_or(self.asking_bit(), Ordering::Relaxed);
        self.forbid_replay();
    }

    /// The reply the plugin asking returns was made for every client of `class` (its
    /// [`ClientClasses`]) alike, and differs for other classes (`kubernetes`'s
    /// `topology`: the client pod's node and zone): a cache before it does not store it (as
    /// [`Next::for_this_client_only`]), and the memo replays it only to clients of that class.
    /// The plugin is told of each replay ([`Plugin::replayed`]), with `note` given back
    /// ([`Replayed::note`]).
    pub fn for_clients_of(&self, class: u64, note: u8) {
        self.trace
            .for_client
            .fetch_or(self.asking_bit(), Ordering::Relaxed);
        let me = ClientClass {
            plugin: self.at.saturating_sub(1),
            class,
            note,
        };
        let mut held = self
            .trace
            .class
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match *held {
            None => *held = Some(me),
            Some(was) if was == me => {}
            Some(_) => self.forbid_replay(),
        }
    }

    /// The reply the plugin asking returns was made through the question's
    /// [`crate::proto::Visibility`] (what the client's DNS policy lets it see): no store before
    /// the plugin keeps it ([`Next::decided_for_the_client`]). The memo still may: the plugin
    /// that set the view (`dnspolicy`, before every store) made the whole reply one for the
    /// view's class of clients ([`Next::for_clients_of`]).
    pub fn depends_on_visibility(&self) {
        let bit = self.asking_bit();
        self.trace.for_client.fetch_or(bit, Ordering::Relaxed);
        self.trace.through_view.fetch_or(bit, Ordering::Relaxed);
    }

    /// True when a plugin after the one asking, visited by this question, decided for its
    /// client (or its class of clients): [`Replay::Client`], [`Next::for_this_client_only`],
    /// [`Next::for_clients_of`]. A store of answers (the cache) keeps nothing the rest of the
    /// chain answered while this holds: what the rest decided for one client is no one else's.
    /// (Plugins before the store decide again for each client before it is asked.)
    pub fn decided_for_the_client(&self) -> bool {
        self.trace.for_client.load(Ordering::Relaxed) >> self.at != 0
    }

    /// The reply the plugin asking returns comes from its store, which holds it as `lifetime`
    /// says: with [`Replay::Timed`], the server may replay it until then.
    pub fn held_until(&self, lifetime: Lifetime) {
        let mut held = self
            .trace
            .lifetime
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.replace(lifetime).is_some() {
            drop(held);
            self.forbid_replay();
        }
    }

    /// The marks of what the plugins after this one that read zones would answer `q` from
    /// ([`ZoneMark`]), taken now: a store takes them before it asks, and keeps the one of the
    /// plugin that wrote the reply ([`Next::writer`]).
    pub fn zone_marks(&self, q: &Question) -> Vec<ZoneMark> {
        self.chain.zone_marks(self.at, q)
    }

    /// The index of the plugin that wrote this question's reply so far, if one did.
    pub fn writer(&self) -> Option<usize> {
        (self.trace.writer.load(Ordering::Relaxed) as usize).checked_sub(1)
    }

    /// True while plugin `mark.plugin` would answer `q` from the zone data `mark` was taken
    /// from (nothing it reads for `q` changed since).
    pub fn zone_mark_holds(&self, mark: ZoneMark, q: &Question) -> bool {
        self.chain.zone_mark(mark.plugin, q) == Some(mark)
    }

    /// A handle on the rest of the chain that outlives this question (a cache refresh in the
    /// background).
    pub fn detach(&self) -> DetachedNext {
        DetachedNext {
            chain: self.chain.clone(),
            at: self.at,
        }
    }
}

/// [`Next`] for work that outlives the question (prefetch, stale refresh): its walks are not
/// traced.
#[derive(Debug, Clone)]
pub struct DetachedNext {
    chain: Chain,
    at: usize,
}

impl DetachedNext {
    /// Asks the rest of the chain, as [`Next::serve`] does for a store.
    pub async fn serve(&self, q: &Question) -> Detached {
        let marks = self.chain.zone_marks(self.at, q);
        let trace = Trace::default();
        let reply = self.chain.serve_at(self.at, q, &trace).await;
        let writer = (trace.writer.load(Ordering::Relaxed) as usize).checked_sub(1);
        Detached {
            reply,
            for_client: trace.for_client.load(Ordering::Relaxed) >> self.at != 0,
            mark: marks.into_iter().find(|m| Some(m.plugin) == writer),
        }
    }
}

/// What a [`DetachedNext`] walk gave a store.
#[derive(Debug)]
pub struct Detached {
    /// The reply.
    pub reply: Reply,
    /// A plugin of the walk decided it for the question's client
    /// ([`Next::decided_for_the_client`]): a store keeps no such reply.
    pub for_client: bool,
    /// The writer's [`ZoneMark`], taken before the walk, when it reads zones.
    pub mark: Option<ZoneMark>,
}

/// What the chain decided for one question, and what the server needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The reply.
    pub reply: Reply,
    /// The plugin that wrote it (`""`: no plugin did; the chain ended or failed).
    pub by: &'static str,
    /// How it may be replayed, or `None` when it may not be.
    pub replay: Option<ReplayPlan>,
}

/// The plugins of one server block, in the registry's order. Cheap to clone.
#[derive(Clone, Default)]
pub struct Chain {
    plugins: Arc<[Arc<dyn Plugin>]>,
    /// The index of the last plugin that may await I/O ([`Plugin::awaits_io`], a fixed property
    /// of a plugin), found once when the chain is built: the UDP workers ask on every question
    /// the answer memo does not hold, and `kubernetes` on every ExternalName.
    last_awaiting: Option<usize>,
    /// What the plugins offer, found once when the chain is built.
    offers: Arc<Offers>,
}

/// What a chain's plugins offer ([`Plugin::offers`]), and the offers the server reads per
/// question or reply picked out of them once, so no question looks one up by type.
#[derive(Default)]
struct Offers {
    /// Plugin `i`'s offers.
    each: Box<[Capabilities]>,
    /// The EDNS options of replies ([`EdnsOptions`]), in chain order.
    edns: Box<[Arc<dyn EdnsOptions>]>,
    /// What is published for `metadata` ([`MetadataSource`]), in chain order.
    metadata: Box<[Arc<dyn MetadataSource>]>,
    /// Plugin `i`'s classes of clients ([`ClientClasses`]), if it offers them.
    classes: Box<[Option<Arc<dyn ClientClasses>>]>,
}

impl Offers {
    fn of(plugins: &[Arc<dyn Plugin>]) -> Self {
        let each: Box<[Capabilities]> = plugins.iter().map(|p| p.clone().offers()).collect();
        Self {
            edns: each
                .iter()
                .filter_map(|c| c.first::<Arc<dyn EdnsOptions>>().cloned())
                .collect(),
            metadata: each
                .iter()
                .filter_map(|c| c.first::<Arc<dyn MetadataSource>>().cloned())
                .collect(),
            classes: each
                .iter()
                .map(|c| c.first::<Arc<dyn ClientClasses>>().cloned())
                .collect(),
            each,
        }
    }
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.plugins.iter().map(|p| p.name()))
            .finish()
    }
}

impl Chain {
    /// A chain of `plugins`, first to last (at most 32, as many as a trace's bit sets hold;
    /// the rest are dropped), with what each offers ([`Plugin::offers`]).
    pub fn new(mut plugins: Vec<Arc<dyn Plugin>>) -> Self {
        plugins.truncate(MAX_PLUGINS);
        let last_awaiting = plugins.iter().rposition(|p| p.awaits_io());
        let offers = Arc::new(Offers::of(&plugins));
        Self {
            plugins: plugins.into(),
            last_awaiting,
            offers,
        }
    }

    /// Its plugins, first to last.
    pub fn plugins(&self) -> &[Arc<dyn Plugin>] {
        &self.plugins
    }

    /// Every plugin that offers a `T` ([`Plugin::offers`]), first to last, with its offer:
    /// found when the chain was built (`autopath` finds its search paths at start, the runtime
    /// the plugins it waits for).
    pub fn offered<T: Any>(&self) -> impl Iterator<Item = (&Arc<dyn Plugin>, &T)> {
        self.plugins
            .iter()
            .zip(self.offers.each.iter())
            .filter_map(|(p, c)| Some((p, c.first::<T>()?)))
    }

    /// True when some plugin may await I/O.
    pub fn awaits_io(&self) -> bool {
        self.last_awaiting.is_some()
    }

    /// What its plugins publish about `q` ([`MetadataSource`]), in chain order.
    pub fn collect_metadata(&self, q: &Question, md: &QueryMetadata) {
        for m in self.offers.metadata.iter() {
            m.metadata(q, md);
        }
    }

    /// The EDNS options its plugins add to a reply to `request` ([`EdnsOptions`]).
    pub fn edns_options(&self, request: &Edns) -> Vec<EdnsOption> {
        self.offers
            .edns
            .iter()
            .flat_map(|e| e.edns_options(request))
            .collect()
    }

    /// True when the chain takes questions of `class`: IN, or a class a plugin lists
    /// ([`Plugin::classes`]).
    pub fn answers_class(&self, class: DNSClass) -> bool {
        class == DNSClass::IN || self.plugins.iter().any(|p| p.classes().contains(&class))
    }

    /// The zones the plugins' answers depend on.
    pub fn zones(&self) -> Vec<Arc<dyn ChangeCounter>> {
        self.plugins.iter().flat_map(|p| p.zones()).collect()
    }

    /// Starts every plugin's background work.
    pub fn start(&self) {
        for p in self.plugins.iter() {
            p.start(self);
        }
    }

    /// The [`ZoneMark`]s of the plugins from `from` on that read zones, for `q`, now.
    fn zone_marks(&self, from: usize, q: &Question) -> Vec<ZoneMark> {
        (from..self.plugins.len())
            .filter_map(|i| self.zone_mark(i, q))
            .collect()
    }

    /// Plugin `plugin`'s [`ZoneMark`] for `q` now, when it reads zones.
    fn zone_mark(&self, plugin: usize, q: &Question) -> Option<ZoneMark> {
        let p = self.plugins.get(plugin)?;
        let zones = p.zones();
        if zones.is_empty() {
            return None;
        }
        let scope = p.scope(q);
        let value = zones.iter().fold(0u64, |sum, z| {
            let v = match scope {
                Scope::Key(k) => z.structure_generation().wrapping_add(z.scope_generation(k)),
                Scope::Whole | Scope::Independent => z.generation(),
            };
            sum.wrapping_add(v)
        });
        Some(ZoneMark { plugin, value })
    }

    /// The class of `client` by plugin `plugin` ([`ClientClasses`]), for a replay of a reply
    /// it made for a class of clients.
    pub fn client_class(&self, plugin: usize, client: std::net::IpAddr) -> Option<u64> {
        self.offers.classes.get(plugin)?.as_ref()?.client_class(client)
    }

    /// Tells the plugins of `counted` (a [`ReplayPlan::counted`] set) of a replay.
    pub fn replayed(&self, counted: u32, replay: Replayed) {
        for (i, p) in self.plugins.iter().enumerate() {
            if counted & (1 << i) != 0 {
                p.replayed(replay);
            }
        }
    }

    /// Passes `q` along the chain. A question no plugin answers gets SERVFAIL, as in CoreDNS
    /// when there is no next plugin.
    pub async fn serve(&self, q: &Question) -> Answered {
        self.serve_planned(q, true).await
    }

    /// [`Chain::serve`] with its first plugin asked through [`Plugin::serve`] even when it
    /// would answer without awaiting (tests compare the two ways).
    #[cfg(test)]
    pub(crate) async fn serve_awaiting(&self, q: &Question) -> Answered {
        let trace = Trace::default();
        let reply = self.serve_later(0, q, &trace).await;
        self.answered(q, reply, &trace, true)
    }

    /// [`Chain::serve`], with the reply's [`ReplayPlan`] worked out only when `plan` (the
    /// answer memo will be asked to keep the reply); without, [`Answered::replay`] is `None`.
    pub async fn serve_planned(&self, q: &Question, plan: bool) -> Answered {
        let trace = Trace::default();
        let reply = match self.walk_now(0, q, &trace) {
            Ok(reply) => reply,
            Err(at) => self.serve_later(at, q, &trace).await,
        };
        self.answered(q, reply, &trace, plan)
    }

    /// The walk `trace` recorded, which ended in `reply`, as the server needs it.
    fn answered(&self, q: &Question, reply: Reply, trace: &Trace, plan: bool) -> Answered {
        let writer = trace.writer.load(Ordering::Relaxed) as usize;
        let by = writer
            .checked_sub(1)
            .and_then(|i| self.plugins.get(i))
            .map_or("", |p| p.name());
        let replay = if !plan || trace.no_replay.load(Ordering::Relaxed) {
            None
        } else {
            self.replay_plan(q, trace)
        };
        Answered { reply, by, replay }
    }

    /// The replay plan of a reply whose walk `trace` recorded: each visited plugin must allow
    /// it. A [`Replay::Timed`] plugin must have written the reply itself and said how long its
    /// store holds it.
    fn replay_plan(&self, q: &Question, trace: &Trace) -> Option<ReplayPlan> {
        let visited = trace.visited.load(Ordering::Relaxed);
        let writer = trace.writer.load(Ordering::Relaxed) as usize;
        let mut plan = ReplayPlan::default();
        let mut scope = Scope::Independent;
        let class = *trace
            .class
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Decided for this client: replayed to no one, but for a reply made for a class of
        // clients, which the memo replays to that class only. A part made through the
        // question's view is one for the view's class: only `dnspolicy` sets a view, and it
        // makes every reply one for its class ([`Next::depends_on_visibility`]).
        let class_bit = class.map_or(0, |c| 1 << c.plugin);
        let view_bits = if class.is_some() {
            trace.through_view.load(Ordering::Relaxed)
        } else {
            0
        };
        if trace.for_client.load(Ordering::Relaxed) & !class_bit & !view_bits != 0 {
            return None;
        }
        for (i, p) in self.plugins.iter().enumerate() {
            if visited & (1 << i) == 0 {
                continue;
            }
            match p.replay(q) {
                Replay::Client | Replay::Never => return None,
                Replay::Same => {}
                Replay::Counted => plan.counted |= 1 << i,
                Replay::Reordered => plan.reordered = true,
                // A reply made for a class of clients passed through the store, which keeps
                // no such reply (`Next::is_for_this_client_only`): replayed as the miss it was,
                // and the store told of it as of a question it passed on.
                Replay::Timed if class.is_some() && writer != i + 1 => {
                    plan.counted |= 1 << i;
                    continue;
                }
                Replay::Timed => {
                    let held = *trace
                        .lifetime
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if writer != i + 1 || plan.lifetime.is_some() {
                        return None;
                    }
                    let held = held?;
                    plan.lifetime = Some(held);
                    plan.counted |= 1 << i;
                    // What it answers from its store does not read the zones now, unless the
                    // stored reply was made from a plugin's zones: then it depends on them as
                    // that plugin's answer does.
                    if let Some(p) = held.made_from.and_then(|j| self.plugins.get(j)) {
                        scope = scope.and(p.scope(q));
                    }
                    continue;
                }
            }
            scope = scope.and(p.scope(q));
        }
        plan.reads_zones = scope != Scope::Independent;
        // The plugin that made a reply for a class of clients is told of each replay too.
        if let Some(c) = class {
            plan.counted |= 1 << c.plugin;
        }
        plan.class = class;
        plan.scope = match scope {
            Scope::Key(k) => Some(k),
            Scope::Independent | Scope::Whole => None,
        };
        Some(plan)
    }

    /// Walks the chain from plugin `at` as far as its plugins answer without awaiting
    /// ([`Plugin::serve_now`]): the reply, or the index of the first plugin whose
    /// [`Plugin::serve`] must be awaited. Traces the visits and the writer as
    /// [`Chain::serve_later`] does.
    fn walk_now(&self, mut at: usize, q: &Question, trace: &Trace) -> Result<Reply, usize> {
        loop {
            let Some(plugin) = self.plugins.get(at) else {
                return Ok(Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: NO_PLUGIN_ANSWERED,
                }));
            };
            let next = Next {
                chain: self,
                at: at + 1,
                trace,
            };
            match plugin.serve_now(q, &next) {
                Now::Later => return Err(at),
                Now::Pass => {
                    trace.visit(at, plugin.replay(q));
                    at += 1;
                }
                Now::Reply(reply) => {
                    trace.visit(at, plugin.replay(q));
                    trace.wrote(at, &reply);
                    return Ok(reply);
                }
            }
        }
    }

    /// The rest of the chain's reply from plugin `at` on.
    fn serve_at<'a>(&'a self, at: usize, q: &'a Question, trace: &'a Trace) -> ReplyFuture<'a> {
        match self.walk_now(at, q, trace) {
            Ok(reply) => Box::pin(std::future::ready(reply)),
            Err(at) => self.serve_later(at, q, trace),
        }
    }

    /// Plugin `at`'s [`Plugin::serve`], traced: it was visited, and wrote the reply unless a
    /// plugin after it did.
    fn serve_later<'a>(&'a self, at: usize, q: &'a Question, trace: &'a Trace) -> ReplyFuture<'a> {
        Box::pin(async move {
            let Some(plugin) = self.plugins.get(at) else {
                return Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: NO_PLUGIN_ANSWERED,
                });
            };
            trace.visit(at, plugin.replay(q));
            let next = Next {
                chain: self,
                at: at + 1,
                trace,
            };
            let reply = plugin.serve(q, next).await;
            trace.wrote(at, &reply);
            reply
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hickory_proto::rr::RecordType;

    use super::*;
    use crate::proto::Answer;

    /// A plugin that answers NOERROR with no records, or asks on, and declares `replay`.
    #[derive(Debug)]
    struct Stub {
        name: &'static str,
        answers: bool,
        replay: Replay,
        /// What it says its store holds the reply for, when it answers.
        held: Option<Lifetime>,
        /// It answers or passes in [`Plugin::serve_now`] (as a plugin answering from memory
        /// does) instead of in `serve`.
        now: bool,
    }

    fn empty_answer() -> Reply {
        Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers: Vec::new().into(),
            authority: Vec::new(),
            additional: Vec::new(),
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        })
    }

    impl Plugin for Stub {
        fn name(&self) -> &'static str {
            self.name
        }
        fn replay(&self, _q: &Question) -> Replay {
            self.replay
        }
        fn serve_now(&self, _q: &Question, _next: &Next<'_>) -> Now {
            match (self.now, self.answers) {
                (false, _) => Now::Later,
                (true, true) => Now::Reply(empty_answer()),
                (true, false) => Now::Pass,
            }
        }
        fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
            Box::pin(async move {
                if self.answers {
                    if let Some(l) = self.held {
                        next.held_until(l);
                    }
                    empty_answer()
                } else {
                    next.serve(q).await
                }
            })
        }
    }

    fn stub(name: &'static str, answers: bool, replay: Replay) -> Arc<dyn Plugin> {
        Arc::new(Stub {
            name,
            answers,
            replay,
            held: None,
            now: false,
        })
    }

    /// [`stub`], answering or passing without a future.
    fn stub_now(name: &'static str, answers: bool, replay: Replay) -> Arc<dyn Plugin> {
        Arc::new(Stub {
            name,
            answers,
            replay,
            held: None,
            now: true,
        })
    }

    fn store(answers: bool, held: Option<Lifetime>) -> Arc<dyn Plugin> {
        Arc::new(Stub {
            name: "store",
            answers,
            replay: Replay::Timed,
            held,
            now: false,
        })
    }

    fn q() -> Question {
        Question::new(Name::from_ascii("a.example.").unwrap(), RecordType::A)
    }

    #[tokio::test]
    async fn the_writer_labels_the_reply_and_visited_plugins_decide_replay() {
        // Plugins answering with a future or without one (`serve_now`), in every mix along
        // one chain: the same writer, the same plan.
        type Make = fn(&'static str, bool, Replay) -> Arc<dyn Plugin>;
        let ways: [Make; 2] = [stub, stub_now];
        for first in ways {
            for second in ways {
                for writer in ways {
                    let chain = Chain::new(vec![
                        first("first", false, Replay::Reordered),
                        second("second", false, Replay::Counted),
                        writer("writer", true, Replay::Same),
                        stub_now("after", true, Replay::Never),
                    ]);
                    let a = chain.serve(&q()).await;
                    assert_eq!(a.by, "writer");
                    assert_eq!(a.reply, empty_answer());
                    assert_eq!(
                        a.replay,
                        Some(ReplayPlan {
                            reordered: true,
                            counted: 0b10,
                            ..ReplayPlan::default()
                        })
                    );
                }
            }
        }
        let chain = Chain::new(vec![
            stub("first", false, Replay::Reordered),
            stub("second", false, Replay::Counted),
            stub("writer", true, Replay::Same),
            stub("after", true, Replay::Never),
        ]);
        let a = chain.serve(&q()).await;
        // Without a memo to keep it, no plan is worked out; the reply is the same.
        let unplanned = chain.serve_planned(&q(), false).await;
        assert_eq!((unplanned.by, unplanned.replay), ("writer", None));
        assert_eq!(unplanned.reply, a.reply);
        // A plugin that declares nothing is never replayed.
        let chain = Chain::new(vec![
            stub("any", false, Replay::Never),
            stub("writer", true, Replay::Same),
        ]);
        assert_eq!(chain.serve(&q()).await.replay, None);
    }

    /// A plugin that may await I/O or not, and records what [`Next::awaits_io`] said at its
    /// place in the chain; the last one answers.
    #[derive(Debug)]
    struct Probe {
        io: bool,
        answers: bool,
        seen: std::sync::Mutex<Option<bool>>,
    }

    impl Plugin for Probe {
        fn name(&self) -> &'static str {
            "probe"
        }
        fn awaits_io(&self) -> bool {
            self.io
        }
        fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
            Box::pin(async move {
                *self.seen.lock().unwrap() = Some(next.awaits_io());
                if self.answers {
                    empty_answer()
                } else {
                    next.serve(q).await
                }
            })
        }
    }

    /// Whether a chain, and the rest of it after each plugin, may await I/O is worked out once
    /// when the chain is built: the same as asking every plugin, for every placement of
    /// awaiting plugins along a chain of four.
    #[tokio::test]
    async fn what_may_await_io_is_known_from_the_chain_as_built() {
        for mask in 0u8..16 {
            let probes: Vec<Arc<Probe>> = (0..4)
                .map(|i| {
                    Arc::new(Probe {
                        io: mask & (1 << i) != 0,
                        answers: i == 3,
                        seen: std::sync::Mutex::new(None),
                    })
                })
                .collect();
            let chain = Chain::new(probes.iter().map(|p| p.clone() as Arc<dyn Plugin>).collect());
            assert_eq!(chain.awaits_io(), mask != 0, "mask {mask:04b}");
            let _ = chain.serve(&q()).await;
            for (i, p) in probes.iter().enumerate() {
                // What the plugins after plugin i declare.
                let after = mask >> (i + 1) != 0;
                assert_eq!(
                    *p.seen.lock().unwrap(),
                    Some(after),
                    "mask {mask:04b}, plugin {i}"
                );
            }
        }
        assert!(!Chain::default().awaits_io());
    }

    /// A store in the chain that notes what [`Next::decided_for_the_client`] says once the
    /// rest of the chain answered (as the cache asks before it keeps a reply).
    #[derive(Debug, Default)]
    struct Keeper {
        saw: std::sync::Mutex<Option<bool>>,
    }

    impl Plugin for Keeper {
        fn name(&self) -> &'static str {
            "keeper"
        }
        fn replay(&self, _q: &Question) -> Replay {
            Replay::Same
        }
        fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
            Box::pin(async move {
                let reply = next.serve(q).await;
                *self.saw.lock().unwrap() = Some(next.decided_for_the_client());
                reply
            })
        }
    }

    /// Issue 42's contract: a plugin that declares [`Replay::Client`] for a question (or says
    /// so while answering) keeps its decision from every store before it and from the memo;
    /// one before the store decides again for each client and does not stop the store.
    #[tokio::test]
    async fn what_a_plugin_decides_for_the_client_is_kept_by_no_store_before_it() {
        for (before, after, kept, replayed) in [
            (Replay::Same, Replay::Same, true, true),
            (Replay::Same, Replay::Never, true, false),
            (Replay::Client, Replay::Same, true, false),
            (Replay::Same, Replay::Client, false, false),
            (Replay::Client, Replay::Client, false, false),
        ] {
            for make in [stub, stub_now] {
                let keeper = Arc::new(Keeper::default());
                let chain = Chain::new(vec![
                    make("before", false, before),
                    keeper.clone(),
                    make("after", true, after),
                ]);
                let a = chain.serve(&q()).await;
                assert_eq!(a.by, "after");
                assert_eq!(*keeper.saw.lock().unwrap(), Some(!kept), "{before:?} {after:?}");
                assert_eq!(a.replay.is_some(), replayed, "{before:?} {after:?}");
            }
        }
        // The default declaration is `Client`.
        #[derive(Debug)]
        struct Undeclared;
        impl Plugin for Undeclared {
            fn name(&self) -> &'static str {
                "undeclared"
            }
            fn serve<'a>(&'a self, _q: &'a Question, _next: Next<'a>) -> ReplyFuture<'a> {
                Box::pin(std::future::ready(empty_answer()))
            }
        }
        let keeper = Arc::new(Keeper::default());
        let chain = Chain::new(vec![keeper.clone(), Arc::new(Undeclared)]);
        let a = chain.serve(&q()).await;
        assert_eq!(*keeper.saw.lock().unwrap(), Some(true));
        assert_eq!(a.replay, None);
        // A detached walk (prefetch, a stale entry's refresh) says it too.
        let chain = Chain::new(vec![stub("first", false, Replay::Same), Arc::new(Undeclared)]);
        let trace = Trace::default();
        let next = Next {
            chain: &chain,
            at: 1,
            trace: &trace,
        };
        assert!(next.detach().serve(&q()).await.for_client);
        let chain = Chain::new(vec![Arc::new(Undeclared), stub("second", true, Replay::Same)]);
        let next = Next {
            chain: &chain,
            at: 1,
            trace: &trace,
        };
        assert!(!next.detach().serve(&q()).await.for_client);
    }

    #[tokio::test]
    async fn a_timed_reply_is_replayed_only_when_its_store_wrote_it_and_said_how_long() {
        let now = tokio::time::Instant::now();
        let held = Lifetime {
            stored: now,
            expires: now + Duration::from_secs(30),
            aged_by: Some(0),
            made_from: None,
        };
        // The store answered and said how long: replayable till then, and counted.
        let chain = Chain::new(vec![stub("first", false, Replay::Same), store(true, Some(held))]);
        let a = chain.serve(&q()).await;
        assert_eq!(a.by, "store");
        assert_eq!(
            a.replay,
            Some(ReplayPlan {
                counted: 0b10,
                lifetime: Some(held),
                ..ReplayPlan::default()
            })
        );
        // The store passed the question on (a miss): what answered is not its to time.
        let chain = Chain::new(vec![store(false, None), stub("writer", true, Replay::Same)]);
        assert_eq!(chain.serve(&q()).await.replay, None);
        // The store answered without saying how long it holds the reply.
        let chain = Chain::new(vec![store(true, None)]);
        assert_eq!(chain.serve(&q()).await.replay, None);
    }

    #[tokio::test]
    async fn the_end_of_the_chain_is_a_failure_written_by_no_plugin() {
        let chain = Chain::new(vec![stub("passes", false, Replay::Same)]);
        let a = chain.serve(&q()).await;
        assert_eq!(a.by, "");
        assert!(matches!(a.reply, Reply::Failed(f) if f.reason == NO_PLUGIN_ANSWERED));
    }

    #[tokio::test]
    async fn a_walk_goes_on_through_an_awaiting_plugin_between_two_that_answer_at_once() {
        // Every mix of the two ways along one chain: the same writer, the same plan.
        // The walk goes on through the awaiting plugin's `next`, and the passing plugin's
        // `Never` still forbids replay.
        let chain = Chain::new(vec![
            stub_now("passes", false, Replay::Never),
            stub("awaits", false, Replay::Same),
            stub_now("writer", true, Replay::Same),
        ]);
        let a = chain.serve(&q()).await;
        assert_eq!((a.by, a.replay), ("writer", None));
        // Passing off the end of the chain fails as an awaited walk does.
        let chain = Chain::new(vec![stub_now("passes", false, Replay::Same)]);
        let a = chain.serve(&q()).await;
        assert_eq!(a.by, "");
        assert!(matches!(a.reply, Reply::Failed(f) if f.reason == NO_PLUGIN_ANSWERED));
    }
}
