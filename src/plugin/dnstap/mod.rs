//! The `dnstap` plugin: logs every client query and response of its block, and `forward`'s
//! exchanges with its upstreams, as dnstap messages (protobuf, dnstap.info) in Frame Streams
//! to a reader on a unix socket, a TCP address or over TLS, as CoreDNS's *dnstap* does. It never slows
//! an answer: each output has a bounded queue, and what does not fit is dropped and counted.
//! See this folder's README.
//!
//! The files: `setup` the Corefile syntax, `handler` what is tapped ([`Tapper`]), `encode` the
//! protobuf, `fstrm` the Frame Streams framing and handshake, `output` the queue and the
//! connection to the reader, `tls` the TLS client of `tls://` outputs,
//! `listen` the readers that connect to `dnstap listen`, `counters` the drops, `metrics` the family.

pub mod counters;
pub mod encode;
pub mod extra;
pub mod fstrm;
pub mod handler;
pub mod listen;
pub mod metrics;
pub mod output;
pub mod setup;
pub mod tls;

pub use handler::Tapper;
pub use metrics::DnstapMetrics;
pub use setup::{DnstapBlock, DnstapConfig};

/// Registers this plugin's metric family (see the registry).
pub fn families(metrics: &crate::telemetry::DnsMetrics) -> Result<(), prometheus::Error> {
    metrics.families::<DnstapMetrics>().map(|_| ())
}
