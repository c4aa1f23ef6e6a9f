//! The `forward` plugin's query path ([`Forward`]): it decides which questions it handles
//! (FROM, outside `except`), bounds them (`max_concurrent`, [`TOTAL_BUDGET`]), chooses among its
//! [`Upstream`]s by `policy` and their health, tries them in turn (each attempt one
//! [`exchange`]) until one replies, `max_connect_attempts` failed or a reply's rcode is not one
//! of `failover`'s, marks an upstream down after `max_fails` failures and probes it back in the
//! background, and sends the loop probes of `loop`.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use rand::seq::SliceRandom;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::config::{ForwardConfig, Policy};
use super::doh::{DohOptions, DohTransport, MAX_CONNS_PER_UPSTREAM};
use super::exchange::{
    ExchangeStats, ForwardError, Link, Outgoing, PROBE_TIMEOUT, Peer, Pools, exchange, probe_question, send,
};
use super::flight::{self, FlightKey, Flights, Joined};
use super::metrics::{ForwardMetrics, PluginInstruments, Pool, UpstreamInstruments};
use super::targets::{To, Transport};
use super::{tls, udp};
use crate::chain::{Capabilities, Next, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::Upstreams;
use crate::plugin::kit::{FairShare, Tap};
use crate::proto::{Failure, FlagEdit, Forwarded, Question, Reply};

/// The most time one client query spends in `forward`, all attempts included.
pub const TOTAL_BUDGET: Duration = Duration::from_millis(4500);
/// The most attempts one client query makes, whatever the timeouts (a bound on the loop).
const MAX_ATTEMPTS: usize = 16;

/// The failure when upstreams stayed silent until the budget ran out.
pub const NO_REPLY_IN_TIME: &str = "no upstream answered in time";
/// The failure when every upstream refused or failed at once (no timeout was waited for).
pub const NO_REPLY_REFUSED: &str = "no upstream answered: each refused or failed the exchange";
/// The failure when `max_concurrent` questions were already in flight (REFUSED).
pub const TOO_MANY_IN_FLIGHT: &str = "too many queries in flight";
/// The failure when too many questions already waited for identical ones in flight
/// (SERVFAIL, at once).
pub const TOO_MANY_WAITING: &str = "too many queries waiting for identical ones in flight";

/// One upstream and its health.
#[derive(Debug)]
pub struct Upstream {
    addr: SocketAddr,
    fails: AtomicU32,
    down: AtomicBool,
    probing: AtomicBool,
    looping: AtomicBool,
    metrics: OnceLock<UpstreamInstruments>,
    /// How it is reached (plain, `tls://`, `https://`), with the connections kept for it.
    link: Link,
    /// Its idle UDP sockets (plain DNS).
    udp: udp::UdpPool,
    /// Its idle TCP connections (plain DNS).
    tcp: tls::TlsTransport,
    /// `source_address`: the local address its sockets are bound to.
    source: Option<IpAddr>,
}

impl Upstream {
    fn new(addr: SocketAddr, link: Link, config: &ForwardConfig) -> Self {
        Self {
            addr,
            link,
            udp: udp::UdpPool::new(addr, config.source_address, config.expire)
                .with_max_idle(config.max_idle_conns),
            tcp: tls::TlsTransport::plain(addr, config.expire)
                .from_source(config.source_address)
                .with_limits(config.max_idle_conns, config.max_age),
            source: config.source_address,
            fails: AtomicU32::new(0),
            down: AtomicBool::new(false),
            probing: AtomicBool::new(false),
            looping: AtomicBool::new(false),
            metrics: OnceLock::new(),
        }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its address and the local address to reach it from (`source_address`).
    fn peer(&self) -> Peer {
        Peer {
            addr: self.addr,
            source: self.source,
        }
    }

    /// Marked down after `max_fails` consecutive failures, until a probe gets a reply.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// A forwarding loop leads through it back to this server: it is never used again.
    pub fn is_looping(&self) -> bool {
        self.looping.load(Ordering::Relaxed)
    }
}

/// Counters of one `forward`, for tests and diagnostics (the exported metrics are in
/// [`super::metrics`], attached with [`Forward::with_metrics`]).
#[derive(Debug, Default)]
pub struct ForwardStats {
    /// Queries refused because `max_concurrent` were in flight
    /// (`coredns_forward_max_concurrent_rejects_total`).
    pub max_concurrent_rejects: AtomicU64,
    /// Health probes that got no reply (`coredns_proxy_healthcheck_failures_total`).
    pub healthcheck_failures: AtomicU64,
    /// Queries answered SERVFAIL because no upstream replied in time.
    pub no_upstream_reply: AtomicU64,
    /// Queries sent upstream (attempts, retries included).
    pub attempts: AtomicU64,
    /// Mismatched replies dropped.
    pub exchange: ExchangeStats,
    /// Questions answered by an identical one's exchange in flight
    /// (`cluster_dns_forward_coalesced_total`).
    pub coalesced: AtomicU64,
    /// Questions failed at once because too many waited for identical ones
    /// (`cluster_dns_forward_waiting_rejects_total`).
    pub waiting_rejects: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    config: ForwardConfig,
    from: Name,
    except: Vec<Name>,
    upstreams: Vec<Arc<Upstream>>,
    inflight: Option<Arc<Semaphore>>,
    next: AtomicUsize,
    stats: Arc<ForwardStats>,
    metrics: OnceLock<PluginInstruments>,
    /// The block's `dnstap` outputs ([`Forward::with_taps`]).
    taps: OnceLock<Vec<Arc<dyn Tap>>>,
    /// The questions in flight, for coalescing ([`super::flight`]).
    flights: Flights,
    /// The block's per-client share of the upstream (`fairness`), asked before each question
    /// goes on ([`Forward::with_share`]).
    share: OnceLock<FairShare>,
}

/// The `forward` plugin in a chain. Clones share upstream state.
#[derive(Debug, Clone)]
pub struct Forward {
    inner: Arc<Inner>,
}

/// The name upstream `to`'s certificate must carry: `tls_servername`, else its `%NAME`, else
/// the hostname it was written as; `None`: its IP address.
fn server_name<'a>(config: &'a ForwardConfig, to: &'a To) -> Option<&'a str> {
    config
        .tls
        .as_ref()
        .and_then(|t| t.server_name.as_deref())
        .or(to.server_name.as_deref())
        .or(to.hostname.as_deref())
}

/// How upstream `to` is reached; `client` is the TLS configuration (checked at setup, so
/// present for `tls://` and `https://` upstreams).
fn link(config: &ForwardConfig, to: &To, client: Option<&Arc<tokio_rustls::rustls::ClientConfig>>) -> Link {
    let Some(client) = client.filter(|_| to.transport != Transport::Dns) else {
        return match to.transport {
            Transport::Dns => Link::Plain,
            _ => Link::Unusable("the TLS settings could not be built".into()),
        };
    };
    let name = server_name(config, to);
    match to.transport {
        Transport::Dns => Link::Plain,
        Transport::Tls => tls::TlsTransport::new(Arc::clone(client), to.addr, name, config.expire)
            .map(|t| {
                Link::Tls(
                    t.from_source(config.source_address)
                        .with_limits(config.max_idle_conns, config.max_age),
                )
            })
            .unwrap_or_else(Link::Unusable),
        Transport::Https => {
            let authority = match &to.hostname {
                Some(h) => format!("{h}:{}", to.addr.port()),
                None => to.addr.to_string(),
            };
            let options = DohOptions {
                authority,
                path: to.path.clone(),
                method: config.doh_method,
                expire: config.expire,
                max_age: config.max_age,
                max_conns: config.max_idle_conns.unwrap_or(MAX_CONNS_PER_UPSTREAM),
                source: config.source_address,
            };
            DohTransport::new(client, to.addr, name, options)
                .map(Link::Https)
                .unwrap_or_else(Link::Unusable)
        }
    }
}

fn name_of(zone: &str) -> Name {
    Name::from_ascii(zone)
        .map(|n| n.to_lowercase())
        .unwrap_or_else(|_| Name::root())
}

impl Forward {
    /// The plugin for `config`.
    pub fn new(config: &ForwardConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                from: name_of(&config.from),
                except: config.except.iter().map(|z| name_of(z)).collect(),
                upstreams: {
                    // The settings were checked when the Corefile was read (setup), so a
                    // failure here cannot happen; such an upstream would be plain DNS.
                    let client = config.tls.as_ref().and_then(|t| tls::client_config(t).ok());
                    config
                        .to
                        .iter()
                        .map(|to| Arc::new(Upstream::new(to.addr, link(config, to, client.as_ref()), config)))
                        .collect()
                },
                inflight: config.max_concurrent.map(|n| Arc::new(Semaphore::new(n))),
                next: AtomicUsize::new(0),
                stats: Arc::new(ForwardStats::default()),
                metrics: OnceLock::new(),
                taps: OnceLock::new(),
                flights: Flights::default(),
                share: OnceLock::new(),
                config: config.clone(),
            }),
        }
    }

    /// Reports to `metrics` from now on. Each upstream's series (`to` = its `IP:PORT`) are
    /// resolved here, once. CoreDNS's forward metrics have no `server` label, so `_server` is
    /// not used; it is taken for the same call shape as the other plugins. Only the first call
    /// takes effect.
    pub fn with_metrics(self, metrics: ForwardMetrics, _server: &str) -> Self {
        if self.inner.metrics.set(metrics.plugin()).is_ok() {
            self.inner.flights.count_into(metrics.waiting());
            for up in &self.inner.upstreams {
                let instruments = metrics.upstream(up.addr);
                match &up.link {
                    Link::Tls(tls) => tls.count_into(instruments.conn_counters(&metrics, Pool::Tls)),
                    Link::Https(doh) => doh.count_into(instruments.conn_counters(&metrics, Pool::Https)),
                    Link::Plain | Link::Unusable(_) => {}
                }
                if up.link.is_plain() {
                    up.tcp.count_into(instruments.conn_counters(&metrics, Pool::Tcp));
                }
                up.udp.count_into(instruments.conn_counters(&metrics, Pool::Udp));
                let _ = up.metrics.set(instruments);
            }
        }
        self
    }

    /// `next_on_nodata`: a NOERROR reply without answers goes to the block's following
    /// `forward`.
    pub fn next_on_nodata(&self) -> bool {
        self.inner.config.next_on_nodata
    }

    /// Reports each exchange with an upstream to `taps` from now on (the block's `dnstap`
    /// outputs). Only the first call takes effect.
    pub fn with_taps(self, taps: Vec<Arc<dyn Tap>>) -> Self {
        if !taps.is_empty() {
            let _ = self.inner.taps.set(taps);
        }
        self
    }

    /// The same plugin, asking `share` whether a client may spend an upstream exchange before
    /// each question goes on.
    pub fn with_share(self, share: Option<FairShare>) -> Self {
        if let Some(s) = share {
            let _ = self.inner.share.set(s);
        }
        self
    }

    /// The rcodes its `next` hands to the block's following `forward`.
    pub fn next_rcodes(&self) -> &[ResponseCode] {
        &self.inner.config.next
    }

    /// The upstreams, in configured order.
    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.inner.upstreams
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<ForwardStats> {
        &self.inner.stats
    }

    /// True when `name` is under FROM and not under an `except` zone.
    pub fn handles(&self, name: &Name) -> bool {
        let lower = name.to_lowercase();
        self.inner.from.zone_of(&lower) && !self.inner.except.iter().any(|z| z.zone_of(&lower))
    }

    /// Marks upstream `index` as looping: it is never used again. Its address when this call
    /// marked it.
    pub fn mark_looping(&self, index: usize) -> Option<SocketAddr> {
        let u = self.inner.upstreams.get(index)?;
        (!u.looping.swap(true, Ordering::Relaxed)).then_some(u.addr)
    }

    /// The upstream indices to try, in the policy's order: healthy ones, else (all down) the
    /// down ones anyway, unless `failfast_all_unhealthy_upstreams`. Looping ones never.
    fn candidates(&self) -> Vec<usize> {
        let n = self.inner.upstreams.len();
        let mut order: Vec<usize> = (0..n).collect();
        match self.inner.config.policy {
            Policy::Random => order.shuffle(&mut rand::rng()),
            Policy::RoundRobin => {
                let start = self.inner.next.fetch_add(1, Ordering::Relaxed) % n.max(1);
                order.rotate_left(start);
            }
            Policy::Sequential => {}
        }
        let usable: Vec<usize> = order
            .into_iter()
            .filter(|i| self.inner.upstreams.get(*i).is_some_and(|u| !u.is_looping()))
            .collect();
        let healthy: Vec<usize> = usable
            .iter()
            .copied()
            .filter(|i| self.inner.upstreams.get(*i).is_some_and(|u| !u.is_down()))
            .collect();
        if healthy.is_empty() && !self.inner.config.failfast_all_unhealthy {
            if !usable.is_empty()
                && let Some(m) = self.inner.metrics.get()
            {
                // Every upstream is down: health checking is taken to be broken (CoreDNS).
                m.healthcheck_broken.inc();
            }
            usable
        } else {
            healthy
        }
    }

    /// Forwards `q` if its client's share of the upstream allows ([`Forward::admit`]), as
    /// [`Forward::serve_admitted`] does; otherwise the share's reply.
    pub async fn forward(&self, q: &Question) -> Reply {
        match self.admit(q) {
            Ok(ticket) => self.serve_admitted(q, ticket).await,
            Err(refusal) => refusal.reply(),
        }
    }

    /// The client's share of the upstream (`fairness`) for `q`: a ticket to hold until the
    /// reply (none without a share), or, over it, what the client gets at once. The refusal
    /// is decided for that client: a caller in a chain says so
    /// ([`crate::chain::Next::for_this_client_only`]), so no store keeps it.
    pub fn admit(
        &self,
        q: &Question,
    ) -> Result<Option<crate::plugin::kit::UpstreamTicket>, crate::plugin::kit::Refusal> {
        self.inner.share.get().map(|s| s.0.admit(q)).transpose()
    }

    /// Forwards `q`, or waits for an identical question already in flight and takes its reply
    /// ([`super::flight`]); see `Forward::serve_alone`. `_ticket` (from [`Forward::admit`])
    /// is held until the reply, or until the client goes away and this future is dropped.
    pub async fn serve_admitted(
        &self,
        q: &Question,
        _ticket: Option<crate::plugin::kit::UpstreamTicket>,
    ) -> Reply {
        let cfg = &self.inner.config;
        let tcp = cfg.force_tcp || (q.over_stream() && !cfg.prefer_udp);
        match self.inner.flights.join(FlightKey::of(q, tcp)) {
            Joined::Leader(leader) => {
                let reply = self.serve_alone(q).await;
                leader.finish(&reply);
                reply
            }
            Joined::Follower(rx) => {
                self.inner.stats.coalesced.fetch_add(1, Ordering::Relaxed);
                if let Some(m) = self.inner.metrics.get() {
                    m.coalesced.inc();
                }
                match tokio::time::timeout(TOTAL_BUDGET, flight::wait(rx)).await {
                    Ok(Some(reply)) => reply,
                    // The leader's client went away before the reply: ask.
                    Ok(None) => self.serve_alone(q).await,
                    Err(_) => Reply::Failed(Failure {
                        rcode: ResponseCode::ServFail,
                        reason: NO_REPLY_IN_TIME,
                    }),
                }
            }
            Joined::Full => {
                self.inner.stats.waiting_rejects.fetch_add(1, Ordering::Relaxed);
                if let Some(m) = self.inner.metrics.get() {
                    m.waiting_rejects.inc();
                }
                Reply::Failed(Failure {
                    rcode: ResponseCode::ServFail,
                    reason: TOO_MANY_WAITING,
                })
            }
        }
    }

    /// Forwards `q` itself: REFUSED at once over `max_concurrent`; the first upstream reply
    /// otherwise (UDP retried over TCP when truncated); SERVFAIL when none replies within the
    /// budget.
    async fn serve_alone(&self, q: &Question) -> Reply {
        let _permit = match &self.inner.inflight {
            Some(sem) => match Arc::clone(sem).try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    self.inner
                        .stats
                        .max_concurrent_rejects
                        .fetch_add(1, Ordering::Relaxed);
                    if let Some(m) = self.inner.metrics.get() {
                        m.max_concurrent_rejects.inc();
                    }
                    return Reply::Failed(Failure {
                        rcode: ResponseCode::Refused,
                        reason: TOO_MANY_IN_FLIGHT,
                    });
                }
            },
            None => None,
        };
        let deadline = Instant::now() + TOTAL_BUDGET;
        let cfg = &self.inner.config;
        let tcp = cfg.force_tcp || (q.over_stream() && !cfg.prefer_udp);
        // The upstreams still worth asking, tried in turn until the budget is spent. One that
        // failed at once (refused, reset, only bad replies) leaves the list; one that timed out
        // stays for the next round, as in CoreDNS.
        let mut candidates = self.candidates();
        let mut timed_out = false;
        let mut at = 0;
        // `max_connect_attempts`: failed attempts allowed (0: only MAX_ATTEMPTS bounds them).
        let failures_allowed = cfg
            .max_connect_attempts
            .map_or(2 * self.inner.upstreams.len(), |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            });
        let mut failures = 0;
        // `failover`: the last reply whose rcode sent the question on, and how many there were.
        let mut failed_over: Option<Message> = None;
        let mut failovers = 0;
        for _ in 0..MAX_ATTEMPTS {
            if candidates.is_empty() {
                break;
            }
            at %= candidates.len();
            let Some(up) = candidates.get(at).and_then(|i| self.inner.upstreams.get(*i)) else {
                break;
            };
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let attempt_deadline = deadline.min(now + cfg.read_timeout);
            // `forward/upstream`, as CoreDNS sets it: the upstream asked last.
            if let Some(md) = &q.metadata {
                md.set("forward/upstream", &up.addr.to_string());
            }
            match self.attempt(up, q, tcp, attempt_deadline).await {
                Ok(msg) => {
                    up.fails.store(0, Ordering::Relaxed);
                    // A failover rcode moves on to the next upstream, at most (upstreams - 1)
                    // times as in CoreDNS: the reply that reaches that count is returned.
                    if cfg.failover.contains(&msg.metadata.response_code) {
                        failovers += 1;
                        if failovers < self.inner.upstreams.len() {
                            failed_over = Some(msg);
                            candidates.remove(at);
                            continue;
                        }
                    }
                    return Reply::Forwarded(forwarded(msg));
                }
                Err(error) => {
                    tracing::debug!(upstream = %up.addr, qname = %q.name, qtype = %q.qtype, %error, "upstream attempt failed");
                    self.failed(up);
                    if matches!(error, ForwardError::Timeout { .. }) {
                        timed_out = true;
                        at += 1;
                    } else {
                        candidates.remove(at);
                    }
                    failures += 1;
                    if failures_allowed > 0 && failures >= failures_allowed {
                        break;
                    }
                }
            }
        }
        if let Some(msg) = failed_over {
            return Reply::Forwarded(forwarded(msg));
        }
        self.inner.stats.no_upstream_reply.fetch_add(1, Ordering::Relaxed);
        Reply::Failed(Failure {
            rcode: ResponseCode::ServFail,
            reason: if timed_out {
                NO_REPLY_IN_TIME
            } else {
                NO_REPLY_REFUSED
            },
        })
    }

    async fn attempt(
        &self,
        up: &Upstream,
        q: &Question,
        tcp: bool,
        deadline: Instant,
    ) -> Result<Message, ForwardError> {
        let stats = &self.inner.stats;
        stats.attempts.fetch_add(1, Ordering::Relaxed);
        // TLS and HTTPS run over TCP whatever the client used.
        let tcp = tcp || !up.link.is_plain();
        let msg = self.exchange_observed(up, q, tcp, deadline).await?;
        if !tcp && msg.metadata.truncation {
            // Truncated over UDP: ask again over TCP, in the same attempt's time.
            stats.attempts.fetch_add(1, Ordering::Relaxed);
            return self.exchange_observed(up, q, true, deadline).await;
        }
        Ok(msg)
    }

    /// One exchange with `up`, counted in the connection cache (a TCP exchange always opens a
    /// connection; UDP sockets and TLS connections are counted by their pools) and, when a reply
    /// comes, timed into `coredns_proxy_request_duration_seconds{to, rcode}` (as CoreDNS's
    /// `proxy.Connect`).
    async fn exchange_observed(
        &self,
        up: &Upstream,
        q: &Question,
        tcp: bool,
        deadline: Instant,
    ) -> Result<Message, ForwardError> {
        let m = up.metrics.get();
        let start = Instant::now();
        let asked = std::time::SystemTime::now();
        let sent = Outgoing::new(q, &up.link)?;
        let pools = Pools {
            udp: &up.udp,
            tcp: &up.tcp,
        };
        let result = send(
            up.peer(),
            &up.link,
            Some(pools),
            &sent,
            tcp,
            deadline,
            &self.inner.stats.exchange,
        )
        .await;
        if let (Some(m), Ok(msg)) = (m, &result) {
            m.replied(msg.metadata.response_code, start.elapsed());
        }
        if let Some(taps) = self.inner.taps.get() {
            let over_tcp = tcp || !up.link.is_plain();
            super::dnstap::report(
                taps,
                q.metadata.as_ref(),
                up.addr,
                &sent,
                over_tcp,
                asked,
                result.as_ref().ok(),
            );
        }
        result
    }

    /// Counts a failure; at `max_fails` in a row the upstream goes down and a probe starts.
    fn failed(&self, up: &Arc<Upstream>) {
        let cfg = &self.inner.config;
        let fails = up.fails.fetch_add(1, Ordering::Relaxed) + 1;
        if cfg.max_fails == 0 || cfg.health_check.is_zero() || fails < cfg.max_fails {
            return;
        }
        if !up.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(upstream = %up.addr, fails, "upstream marked down; probing it in the background");
        }
        if !up.probing.swap(true, Ordering::Relaxed) {
            let weak = Arc::downgrade(up);
            let stats = Arc::downgrade(&self.inner.stats);
            let tcp = cfg.force_tcp;
            let mut q = probe_question();
            q.name = name_of(&cfg.health_check_domain);
            q.recursion_desired = cfg.health_check_rd;
            tokio::spawn(probe_until_healthy(weak, stats, cfg.health_check, tcp, q));
        }
    }

    /// Sends one loop probe (`HINFO name`) to upstream `index` over UDP and waits for any reply;
    /// true when one came.
    pub async fn send_probe(&self, index: usize, name: Name) -> bool {
        let Some(up) = self.inner.upstreams.get(index) else {
            return false;
        };
        let q = Question::new(name, RecordType::HINFO);
        let deadline = Instant::now() + self.inner.config.read_timeout;
        // In CoreDNS the loop probe reaches the upstream through forward, so it is counted too.
        self.exchange_observed(up, &q, self.inner.config.force_tcp, deadline)
            .await
            .is_ok()
    }
}

impl Plugin for Forward {
    fn name(&self) -> &'static str {
        "forward"
    }

    fn awaits_io(&self) -> bool {
        true
    }

    /// Upstream answers depend on the upstream and the clock, not on who asks: never replayed
    /// from the memo, kept by a cache. A client over its share of the upstream is refused for
    /// itself alone ([`Forward::admit`]).
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Never
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            if !self.handles(&q.name) {
                return next.serve(q).await;
            }
            if let Some(denied) = denied_by_policy(q) {
                next.for_this_client_only();
                return denied;
            }
            match self.admit(q) {
                Ok(ticket) => self.serve_admitted(q, ticket).await,
                Err(refusal) => {
                    next.for_this_client_only();
                    refusal.reply()
                }
            }
        })
    }

    /// Its upstreams, which `loop` probes.
    fn offers(self: Arc<Self>) -> Capabilities {
        Capabilities::default().with(self as Arc<dyn Upstreams>)
    }
}

/// The reply to a question the client's DNS policy (`dnspolicy`'s view) does not let leave the
/// server, or `None` when it may: such a name is never sent upstream, nor joined to another
/// client's question in flight. (The `dnspolicy` plugin refused it already when the client
/// asked it; this holds for every name asked on the client's behalf too.)
pub fn denied_by_policy(q: &Question) -> Option<Reply> {
    let view = q.view()?;
    (!view.may_ask_outside(&q.name)).then(|| Reply::Rcode(view.denial()))
}

impl Upstreams for Forward {
    fn count(&self) -> usize {
        self.inner.upstreams.len()
    }

    fn handles(&self, name: &Name) -> bool {
        Forward::handles(self, name)
    }

    fn probe(
        &self,
        index: usize,
        name: Name,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>> {
        Box::pin(self.send_probe(index, name))
    }

    fn mark_looping(&self, index: usize) -> Option<SocketAddr> {
        Forward::mark_looping(self, index)
    }
}

/// Probes a down upstream with `q` (`. IN NS`, or `health_check`'s `domain` and `no_rec`) every
/// `interval` until it answers (then takes it back) or the plugin
/// is gone.
async fn probe_until_healthy(
    up: Weak<Upstream>,
    stats: Weak<ForwardStats>,
    interval: Duration,
    tcp: bool,
    q: Question,
) {
    loop {
        tokio::time::sleep(interval).await;
        let (Some(up), Some(stats)) = (up.upgrade(), stats.upgrade()) else {
            return;
        };
        let deadline = Instant::now() + PROBE_TIMEOUT;
        match exchange(up.peer(), &up.link, None, &q, tcp, deadline, &stats.exchange).await {
            Ok(_) => {
                up.fails.store(0, Ordering::Relaxed);
                up.down.store(false, Ordering::Relaxed);
                up.probing.store(false, Ordering::Relaxed);
                tracing::info!(upstream = %up.addr, "upstream answers again; back in use");
                return;
            }
            Err(_) => {
                stats.healthcheck_failures.fetch_add(1, Ordering::Relaxed);
                if let Some(m) = up.metrics.get() {
                    m.healthcheck_failures.inc();
                }
            }
        }
    }
}

/// The upstream reply as the chain carries it (its OPT, TSIG and SIG records left out: the
/// server writes its own OPT).
pub fn forwarded(msg: Message) -> Forwarded {
    let meta = msg.metadata;
    Forwarded {
        rcode: meta.response_code,
        recursion_available: meta.recursion_available,
        authentic_data: meta.authentic_data,
        truncated: meta.truncation,
        flags: FlagEdit::KEEP,
        answers: msg.answers,
        authority: msg.authorities,
        additional: msg
            .additionals
            .into_iter()
            .filter(|r| {
                !matches!(
                    r.record_type(),
                    RecordType::OPT | RecordType::TSIG | RecordType::SIG
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
