//! Stage 7 of the answer path, observe: what the server reports about each answered request
//! ([`Served`]), for the server block that answered it: the `prometheus` metrics, and each
//! observing plugin ([`Observer`]: the `log` plugin's query line, the `errors` plugin's line
//! for a failure the chain produced itself). One call per request, after the response is
//! encoded, so sizes and times are what the client got.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Metadata, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

use super::map::Response;
use super::request::Parsed;
pub use crate::chain::Exchange;
use crate::chain::Observer;
use crate::proto::{PLAIN_UDP_LIMIT, Transport};
use crate::telemetry::{BlockMetrics, RequestRecord};

/// The observers a server block has configured: its `prometheus` recorders, and the plugins
/// that observe (`errors`, `log`), in chain order.
#[derive(Debug, Clone, Default)]
pub struct Observers {
    /// `prometheus`.
    pub metrics: Option<BlockMetrics>,
    /// The observing plugins.
    pub plugins: Vec<Arc<dyn Observer>>,
}

impl Observers {
    /// True when nothing is observed (the server can skip measuring).
    pub fn is_empty(&self) -> bool {
        self.metrics.is_none() && self.plugins.is_empty()
    }

    /// True when an observer must see every request's question: the block's responses are
    /// never replayed from the memo.
    pub fn need_every_question(&self) -> bool {
        self.plugins.iter().any(|p| p.needs_every_question())
    }

    /// Reports `x`, answered by the block whose zone `zone` matched (`None`: no block took it).
    pub fn observe(&self, zone: Option<&Name>, x: &Exchange<'_>) {
        if let Some(m) = &self.metrics {
            m.recorder(zone).record(&RequestRecord {
                proto: x.proto,
                client: x.client,
                qtype: x.qtype.unwrap_or(RecordType::Unknown(0)),
                dnssec_ok: x.dnssec_ok,
                request_size: x.request_size,
                response_size: x.response_size,
                rcode: x.rcode,
                plugin: x.plugin,
                duration: x.elapsed,
            });
        }
        for p in &self.plugins {
            p.observe(x);
        }
    }
}

/// What one answered request was: for metrics and the query log, which observe every response
/// after it is encoded (see [`DnsHandler::answer_into`](crate::server::DnsHandler::answer_into)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Size of the request.
    pub request_len: usize,
    /// Size of the encoded response.
    pub response_len: usize,
    /// The rcode sent.
    pub rcode: ResponseCode,
    /// The type asked, when the request had a readable question.
    pub qtype: Option<RecordType>,
    /// The transport.
    pub protocol: Transport,
    /// The client.
    pub src: SocketAddr,
    /// From the request bytes to the encoded response.
    pub elapsed: Duration,
    /// `out` holds several messages, each with its two-byte length already (a zone transfer
    /// over a stream,
    /// [`DnsHandler::answer_stream_into`](crate::server::DnsHandler::answer_stream_into));
    /// otherwise one message, bare.
    pub framed: bool,
}

/// Reports one answered request to `observers`, under the zone that matched (`None`: no block
/// took it; `Router::observers_of` says who observes which request).
/// `wire`: the request and response bytes (the response empty when it is not one message).
pub(super) fn request(
    observers: &Observers,
    zone: Option<&Name>,
    req: &Parsed<'_>,
    resp: &Response,
    sent: &Metadata,
    served: &Served,
    wire: (&[u8], &[u8]),
) {
    observers.observe(
        zone,
        &Exchange {
            client: canonical_client(served.src),
            proto: served.protocol,
            request: &req.meta,
            query: resp.question.as_ref().map(|q| (&q.name, q.qtype, q.qclass)),
            qtype: served.qtype,
            dnssec_ok: req.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok),
            bufsize: req.edns.as_ref().map_or(PLAIN_UDP_LIMIT, |e| e.max_payload()),
            request_size: served.request_len,
            response: sent,
            rcode: served.rcode,
            response_size: served.response_len,
            answers: resp.answers.len(),
            elapsed: served.elapsed,
            plugin: resp.plugin,
            failure: resp.failure,
            metadata: resp.question.as_ref().and_then(|q| q.metadata.as_ref()),
            request_wire: wire.0,
            response_wire: wire.1,
        },
    );
}

/// A client address as the labels and log lines show it: an IPv4 client reaching a dual-stack
/// socket (`::ffff:10.0.0.1`) is the IPv4 client it is.
pub fn canonical_client(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

/// True for the rcodes the chain produces only when it failed.
pub fn is_failure(rcode: ResponseCode) -> bool {
    matches!(rcode, ResponseCode::ServFail | ResponseCode::Refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_clients_of_a_dual_stack_socket_are_ipv4() {
        let mapped: SocketAddr = "[::ffff:10.0.0.1]:5300".parse().unwrap();
        assert_eq!(
            canonical_client(mapped),
            "10.0.0.1:5300".parse::<SocketAddr>().unwrap()
        );
        let v6: SocketAddr = "[2001:db8::1]:53".parse().unwrap();
        assert_eq!(canonical_client(v6), v6);
    }
}
