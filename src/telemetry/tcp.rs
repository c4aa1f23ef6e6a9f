//! The TCP transport's own families: connections open, the effective connection limit, the
//! connections the server closed, by a reason from a fixed set, and the DNS-over-HTTPS requests
//! being answered (HTTP/2 streams in use). CoreDNS has no equivalent, so
//! they live under `cluster_dns_`; labels are the listen address (`server`, as the core
//! families write it) and [`CloseReason`], never a client address.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// Why the server closed a TCP connection (the `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The listener was at its connection limit: the connection waiting longest was closed
    /// to admit a new one, or the new one was closed when every connection had a query in
    /// flight.
    Limit,
    /// No query for the idle timeout.
    Idle,
    /// A message did not arrive whole within the message deadline from its first byte.
    Deadline,
    /// The listener's buffer budget for messages being received was spent.
    Buffer,
    /// The connection was sent as many queries as `timeouts { maxtcpqueries }` allows: they
    /// are answered, then it is closed, so the client reconnects (and a connection-based load
    /// balancer can pick another replica).
    MaxQueries,
}

impl CloseReason {
    /// Every reason, in label order.
    pub const ALL: [CloseReason; 5] = [
        Self::Limit,
        Self::Idle,
        Self::Deadline,
        Self::Buffer,
        Self::MaxQueries,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Limit => "limit",
            Self::Idle => "idle",
            Self::Deadline => "deadline",
            Self::Buffer => "buffer",
            Self::MaxQueries => "max_queries",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Limit => 0,
            Self::Idle => 1,
            Self::Deadline => 2,
            Self::Buffer => 3,
            Self::MaxQueries => 4,
        }
    }
}

/// The TCP families, registered once per process.
#[derive(Debug, Clone)]
pub struct TcpMetrics {
    open: IntGaugeVec,
    limit: IntGaugeVec,
    closed: IntCounterVec,
    doh_requests: IntGaugeVec,
}

impl TcpMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let open = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_tcp_connections_open",
                "TCP connections open on the listener (admitted and not yet closed or evicted).",
            ),
            &["server"],
        )?;
        let limit = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_tcp_connections_limit",
                "Most TCP connections the listener keeps open (the configured limit, kept below the open-file limit).",
            ),
            &["server"],
        )?;
        let closed = IntCounterVec::new(
            Opts::new(
                "cluster_dns_tcp_connections_closed_total",
                "TCP connections the server closed, by reason (limit, idle, deadline, buffer, max_queries).",
            ),
            &["server", "reason"],
        )?;
        let doh_requests = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_doh_requests_in_flight",
                "DNS-over-HTTPS requests being answered on the listener (at most 32 per connection: its HTTP/2 streams in use).",
            ),
            &["server"],
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(open.clone()),
                Box::new(limit.clone()),
                Box::new(closed.clone()),
                Box::new(doh_requests.clone()),
            ],
        )?;
        Ok(Self {
            open,
            limit,
            closed,
            doh_requests,
        })
    }

    /// The series of one listener (`server` as the core families write it, `dns://:53`).
    /// Every reason's series exists from the start, at 0.
    pub fn listener(&self, server: &str) -> ListenerTcpMetrics {
        ListenerTcpMetrics {
            open: self.open.with_label_values(&[server]),
            limit: self.limit.with_label_values(&[server]),
            closed: CloseReason::ALL.map(|r| self.closed.with_label_values(&[server, r.label()])),
            doh_requests: self.doh_requests.with_label_values(&[server]),
        }
    }
}

/// The TCP series of one listener, resolved once.
#[derive(Debug, Clone)]
pub struct ListenerTcpMetrics {
    open: IntGauge,
    limit: IntGauge,
    closed: [IntCounter; 5],
    doh_requests: IntGauge,
}

impl ListenerTcpMetrics {
    /// Sets the effective connection limit.
    pub fn set_limit(&self, limit: usize) {
        self.limit.set(i64::try_from(limit).unwrap_or(i64::MAX));
    }

    /// One more connection open.
    pub fn opened(&self) {
        self.open.inc();
    }

    /// One connection fewer open.
    pub fn gone(&self) {
        self.open.dec();
    }

    /// One more DNS-over-HTTPS request being answered.
    pub fn doh_request_started(&self) {
        self.doh_requests.inc();
    }

    /// One DNS-over-HTTPS request fewer being answered (answered, or dropped with its stream).
    pub fn doh_request_ended(&self) {
        self.doh_requests.dec();
    }

    /// Counts a connection the server closed.
    pub fn closed(&self, reason: CloseReason) {
        if let Some(c) = self.closed.get(reason.index()) {
            c.inc();
        }
    }
}
