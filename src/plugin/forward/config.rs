//! What a configured `forward` directive holds once parsed (`setup.rs` reads the Corefile into it):
//! its upstreams, its options with CoreDNS's defaults and how it picks an upstream; what the
//! handler (`handler.rs`) forwards with.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::ResponseCode;

use super::doh::DohMethod;
use super::targets::To;
use super::tls::TlsSettings;

/// How the next upstream is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// A random order per query (the default).
    #[default]
    Random,
    /// Rotate the starting upstream per query.
    RoundRobin,
    /// Always in the order written.
    Sequential,
}

/// The `forward` plugin's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ForwardConfig {
    /// The zone forwarded (normalized); `.` for everything.
    pub from: String,
    /// The upstreams, in the order written (files and hostnames expanded in place, each
    /// address once).
    pub to: Vec<To>,
    /// `resolver IP[:PORT]...`: the servers hostnames in TO were resolved with (the system
    /// resolver when empty).
    pub resolver: Vec<SocketAddr>,
    /// `except ZONES...`: names in these zones are not forwarded.
    pub except: Vec<String>,
    /// `force_tcp`.
    pub force_tcp: bool,
    /// `prefer_udp`: UDP even when the client asked over TCP.
    pub prefer_udp: bool,
    /// `max_fails N` (0: never marked down).
    pub max_fails: u32,
    /// `health_check DURATION` (0: no checks, never marked down).
    pub health_check: Duration,
    /// `health_check ... domain NAME`: the name the probe asks (`NAME IN NS`; `.` by default).
    pub health_check_domain: String,
    /// The probe's RD bit (`health_check ... no_rec` clears it).
    pub health_check_rd: bool,
    /// `expire DURATION` (accepted, see [`DEFAULT_EXPIRE`](super::setup::DEFAULT_EXPIRE)).
    pub expire: Duration,
    /// `max_concurrent N`: queries in flight above this get REFUSED ([`DEFAULT_MAX_CONCURRENT`](super::setup::DEFAULT_MAX_CONCURRENT)
    /// when not written; `None`, no limit, for `max_concurrent 0`).
    pub max_concurrent: Option<usize>,
    /// `policy`.
    pub policy: Policy,
    /// `read_timeout DURATION`: per-attempt timeout (default 2 s).
    pub read_timeout: Duration,
    /// `failfast_all_unhealthy_upstreams`: SERVFAIL at once when every upstream is down.
    pub failfast_all_unhealthy: bool,
    /// DNS over TLS (`tls://` upstreams): its settings; `None` for plain DNS.
    pub tls: Option<TlsSettings>,
    /// `failover RCODE...`: a reply with one of these rcodes sends the question to the next
    /// upstream (never NOERROR); when every upstream answered so, the last reply is returned.
    pub failover: Vec<ResponseCode>,
    /// `next RCODE...`: an upstream reply with one of these rcodes goes instead to the block's
    /// next `forward` (ignored when this is its last).
    pub next: Vec<ResponseCode>,
    /// `source_address IP`: the local address outgoing sockets (health probes too) are bound to.
    pub source_address: Option<IpAddr>,
    /// `doh_method GET|POST` for `https://` upstreams (POST by default).
    pub doh_method: DohMethod,
    /// `max_age DURATION`: a kept connection this old is closed, used or not (`None`: no
    /// limit, as 0).
    pub max_age: Option<Duration>,
    /// `max_idle_conns N`: connections (UDP sockets) kept per upstream and transport (`None`:
    /// the transport's own bound, as 0).
    pub max_idle_conns: Option<usize>,
    /// `next_on_nodata`: a NOERROR reply with no answer goes to the block's next `forward`.
    pub next_on_nodata: bool,
    /// `max_connect_attempts N`: failed attempts after which the question gets SERVFAIL;
    /// `None` (not written) is twice the number of upstreams, `Some(0)` no cap.
    pub max_connect_attempts: Option<u32>,
}
