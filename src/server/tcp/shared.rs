//! What one listener's connections share ([`Shared`]): the handler, the stop signal, the
//! limits, the protocol and the byte budget, and how a connection closed by a bound is counted
//! and (once per listener) logged. Every kind of connection (DNS over TCP or TLS, DNS over
//! HTTPS) holds it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::budget::Budget;
use super::limits::{MAX_CONNECTIONS_ENV, TcpLimits};
use super::protocol::StreamProtocol;
use crate::server::handler::DnsHandler;
use crate::telemetry::tcp::CloseReason;

/// What one listener's connections share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) handler: DnsHandler,
    /// Turns true when the listener stops: each connection stops reading, sends the answers
    /// in flight and closes.
    pub(super) stopping: tokio::sync::watch::Receiver<bool>,
    pub(super) limits: TcpLimits,
    pub(super) protocol: StreamProtocol,
    pub(super) budget: Arc<Budget>,
    addr: String,
    /// The limit and buffer warnings, each logged once per listener.
    warned_limit: AtomicBool,
    warned_buffer: AtomicBool,
}

impl Shared {
    /// The state of a listener at `addr` whose connections stop when `stopping` turns true.
    pub(super) fn new(
        handler: DnsHandler,
        stopping: tokio::sync::watch::Receiver<bool>,
        limits: TcpLimits,
        protocol: StreamProtocol,
        addr: String,
    ) -> Self {
        Self {
            handler,
            stopping,
            budget: Budget::new(limits.buffer_budget),
            limits,
            protocol,
            addr,
            warned_limit: AtomicBool::new(false),
            warned_buffer: AtomicBool::new(false),
        }
    }

    /// Counts a connection closed for `reason` and, the first time per listener for the limit
    /// and the budget, says so in the log.
    pub(super) fn closed(&self, reason: CloseReason) {
        if let Some(m) = &self.limits.metrics {
            m.closed(reason);
        }
        let warned = match reason {
            CloseReason::Limit => &self.warned_limit,
            CloseReason::Buffer => &self.warned_buffer,
            CloseReason::Idle | CloseReason::Deadline | CloseReason::MaxQueries => return,
        };
        if !warned.swap(true, Ordering::AcqRel) {
            match reason {
                CloseReason::Limit => tracing::warn!(
                    addr = %self.addr,
                    limit = self.limits.max_connections,
                    "TCP connection limit reached: closing the connections waiting longest (or new ones, when all are busy); counted in cluster_dns_tcp_connections_closed_total{{reason=\"limit\"}}, logged once; raise {MAX_CONNECTIONS_ENV} if clients need more"
                ),
                _ => tracing::warn!(
                    addr = %self.addr,
                    budget = self.limits.buffer_budget,
                    "TCP message buffer budget spent: closing connections that send large messages; counted in cluster_dns_tcp_connections_closed_total{{reason=\"buffer\"}}, logged once"
                ),
            }
        }
    }
}
