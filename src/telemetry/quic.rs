//! The DNS-over-QUIC families: CoreDNS 1.14's `coredns_dns_quic_responses_total{server,
//! status}` (streams served, by the DoQ application code the server ended them with: `0x0`
//! answered, `0x1` internal error, `0x2` protocol error), and cluster-dns's own gauges and
//! counter for the connection cap (CoreDNS has none): connections open, the limit, and
//! connections refused at it. Labels are the listen address and fixed words, never a client.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// A DoQ application error code (RFC 9250 §4.3), as the `status` label writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoqCode {
    /// `DOQ_NO_ERROR` (0x0): the stream was answered.
    NoError,
    /// `DOQ_INTERNAL_ERROR` (0x1).
    Internal,
    /// `DOQ_PROTOCOL_ERROR` (0x2): the connection was closed for a malformed query.
    Protocol,
}

impl DoqCode {
    /// Its code on the wire.
    pub fn code(self) -> u32 {
        match self {
            Self::NoError => 0,
            Self::Internal => 1,
            Self::Protocol => 2,
        }
    }

    fn index(self) -> usize {
        self.code() as usize
    }
}

/// The families, registered once per process.
#[derive(Debug, Clone)]
pub struct QuicMetrics {
    responses: IntCounterVec,
    open: IntGaugeVec,
    limit: IntGaugeVec,
    refused: IntCounterVec,
}

impl QuicMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let responses = IntCounterVec::new(
            Opts::new(
                "coredns_dns_quic_responses_total",
                "Counter of DoQ responses per server and QUIC application code.",
            ),
            &["server", "status"],
        )?;
        let open = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_quic_connections_open",
                "QUIC connections open on the listener (admitted and not yet closed).",
            ),
            &["server"],
        )?;
        let limit = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_quic_connections_limit",
                "Most QUIC connections the listener keeps open (CoreDNS's 200).",
            ),
            &["server"],
        )?;
        let refused = IntCounterVec::new(
            Opts::new(
                "cluster_dns_quic_connections_refused_total",
                "QUIC connections refused because the listener had as many open as its limit.",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(responses.clone()),
                Box::new(open.clone()),
                Box::new(limit.clone()),
                Box::new(refused.clone()),
            ],
        )?;
        Ok(Self {
            responses,
            open,
            limit,
            refused,
        })
    }

    /// The series of one listener (`server` as the core families write it, `quic://:853`);
    /// each exists from the start, at 0.
    pub fn listener(&self, server: &str) -> ListenerQuicMetrics {
        ListenerQuicMetrics {
            responses: ["0x0", "0x1", "0x2"].map(|s| self.responses.with_label_values(&[server, s])),
            open: self.open.with_label_values(&[server]),
            limit: self.limit.with_label_values(&[server]),
            refused: self.refused.with_label_values(&[server]),
        }
    }
}

/// The QUIC series of one listener, resolved once.
#[derive(Debug, Clone)]
pub struct ListenerQuicMetrics {
    responses: [IntCounter; 3],
    open: IntGauge,
    limit: IntGauge,
    refused: IntCounter,
}

impl ListenerQuicMetrics {
    /// A stream ended with `code`.
    pub fn response(&self, code: DoqCode) {
        self.responses[code.index()].inc();
    }

    /// Sets the connection limit.
    pub fn set_limit(&self, limit: usize) {
        self.limit.set(i64::try_from(limit).unwrap_or(i64::MAX));
    }

    /// A connection was admitted.
    pub fn opened(&self) {
        self.open.inc();
    }

    /// An admitted connection ended.
    pub fn gone(&self) {
        self.open.dec();
    }

    /// A connection was refused at the limit.
    pub fn refused(&self) {
        self.refused.inc();
    }
}
