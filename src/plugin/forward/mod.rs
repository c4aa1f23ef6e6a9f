//! The `forward` plugin: sends questions it handles (names under FROM, outside `except`) to its
//! upstreams and returns their answers unchanged (rcode, RA, AD, sections). It owns upstream
//! choice (`policy`), health (passive failure counting, background probes while down),
//! `max_concurrent` and the per-query time budget. See this folder's README.
//!
//! Time: each attempt waits at most `read_timeout` (2 s), and the whole query at most
//! [`TOTAL_BUDGET`], so a client gets SERVFAIL before its own 5 s retry. Within the budget the
//! upstreams are tried in turn, again and again, as CoreDNS does, until `max_connect_attempts`
//! failed (one upstream: 2 s, 2 s). A `failover` rcode moves on to the next upstream too. An upstream that refuses (ICMP port unreachable on the connected UDP socket,
//! a TCP reset) is not asked again for that question, so a closed port costs no timeout.
//!
//! The files: `handler` holds the query path ([`Forward`], its upstreams and their health),
//! `exchange` one exchange with one upstream, `udp`, `tls` and `doh` (DNS over HTTPS) the upstream
//! sockets and connections kept for reuse, `chained` several `forward`s in one block and their `next`,
//! `setup` the Corefile options and how the plugin is made, `config` what they hold, `targets` the upstream list (files, hostnames resolved at start),
//! `flight` identical questions in flight sharing one exchange, `metrics` the families, `dnstap` what it reports to the block's `dnstap` outputs, `fuzz`
//! the body of the `forward_reply` fuzz target.

pub mod chained;
pub mod config;
pub mod dnstap;
pub mod doh;
pub mod exchange;
pub mod flight;
#[doc(hidden)]
pub mod fuzz;
pub mod handler;
pub mod metrics;
pub mod setup;
pub mod targets;
pub mod tls;
pub mod udp;

pub use chained::Forwards;
pub use config::{ForwardConfig, Policy};
pub use exchange::ForwardError;
pub use handler::{
    Forward, ForwardStats, NO_REPLY_IN_TIME, NO_REPLY_REFUSED, TOO_MANY_IN_FLIGHT, TOTAL_BUDGET, Upstream,
    forwarded,
};
pub use metrics::ForwardMetrics;
pub use setup::ForwardBlock;

/// Registers this plugin's metric families (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<ForwardMetrics>().map(|_| ())
}
