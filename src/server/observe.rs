//! What the server reports about each answered request, for the server block that answered
//! it: the `prometheus` metrics, the `log` plugin's query line and the `errors` plugin's line
//! for a failure the chain produced itself. One call per request, after the response is
//! encoded, so sizes and times are what the client got.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Metadata, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};

use crate::plugin::errors::ErrorLog;
use crate::plugin::log::{LogEntry, QueryLog};
use crate::proto::{Transport, transport_label};
use crate::telemetry::{self, BlockMetrics, RequestRecord};

/// One request and its response, as observed.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The client.
    pub client: SocketAddr,
    /// The transport.
    pub proto: Transport,
    /// The request's header fields.
    pub request: &'a Metadata,
    /// The question, when the request had exactly one that reached a block.
    pub query: Option<(&'a Name, RecordType, DNSClass)>,
    /// The type asked, when the request had a readable question (also unrouted ones).
    pub qtype: Option<RecordType>,
    /// The request's DO bit.
    pub dnssec_ok: bool,
    /// The client's advertised UDP size (512 without EDNS).
    pub bufsize: u16,
    /// Request size in bytes.
    pub request_size: usize,
    /// The response's header fields (as decided, before encoding).
    pub response: &'a Metadata,
    /// The rcode sent (SERVFAIL when the response could not be encoded).
    pub rcode: ResponseCode,
    /// Response size in bytes.
    pub response_size: usize,
    /// Records in the response's answer section.
    pub answers: usize,
    /// Time from the request to the encoded response.
    pub elapsed: Duration,
    /// The plugin that wrote the response (`""`: the server itself).
    pub plugin: &'static str,
    /// Why the chain failed, when it produced the failure itself (for `errors`).
    pub failure: Option<&'static str>,
}

/// The observers a server block has configured.
#[derive(Debug, Clone, Default)]
pub struct Observers {
    /// `prometheus`.
    pub metrics: Option<BlockMetrics>,
    /// `log`.
    pub log: Option<QueryLog>,
    /// `errors`.
    pub errors: Option<ErrorLog>,
}

impl Observers {
    /// True when nothing is observed (the server can skip measuring).
    pub fn is_empty(&self) -> bool {
        self.metrics.is_none() && self.log.is_none() && self.errors.is_none()
    }

    /// Reports `x`, answered by the block whose zone `zone` matched (`None`: no block took it).
    pub fn observe(&self, zone: Option<&Name>, x: &Exchange<'_>) {
        let rcode = x.rcode;
        let qtype = x.qtype.unwrap_or(RecordType::Unknown(0));
        if let Some(m) = &self.metrics {
            m.recorder(zone).record(&RequestRecord {
                proto: x.proto,
                client: x.client,
                qtype,
                dnssec_ok: x.dnssec_ok,
                request_size: x.request_size,
                response_size: x.response_size,
                rcode,
                plugin: x.plugin,
                duration: x.elapsed,
            });
        }
        if let (Some(errors), Some(reason), Some((name, qtype, _))) = (&self.errors, x.failure, x.query) {
            errors.report(rcode, name, qtype, reason);
        }
        if let (Some(log), Some((name, qtype, qclass))) = (&self.log, x.query)
            && log.wants(&name.to_lowercase(), rcode, x.answers == 0)
        {
            let qtype = qtype.to_string();
            let qclass = qclass.to_string();
            let name = name.to_string();
            let rflags = flags(x.response);
            log.write(&LogEntry {
                remote: x.client,
                id: x.request.id,
                qtype: &qtype,
                qclass: &qclass,
                name: &name,
                proto: transport_label(x.proto),
                size: x.request_size,
                dnssec_ok: x.dnssec_ok,
                bufsize: x.bufsize,
                rcode: telemetry::rcode_label(rcode),
                rflags: &rflags,
                rsize: x.response_size,
                duration: x.elapsed,
                opcode: opcode_label(x.request.op_code),
            });
        }
    }
}

/// The response flags as CoreDNS's `{>rflags}` writes them.
fn flags(m: &Metadata) -> String {
    let mut out = Vec::with_capacity(6);
    out.push("qr");
    for (set, name) in [
        (m.authoritative, "aa"),
        (m.truncation, "tc"),
        (m.recursion_desired, "rd"),
        (m.recursion_available, "ra"),
        (m.authentic_data, "ad"),
        (m.checking_disabled, "cd"),
    ] {
        if set {
            out.push(name);
        }
    }
    out.join(",")
}

fn opcode_label(op: OpCode) -> &'static str {
    match op {
        OpCode::Query => "QUERY",
        OpCode::Status => "STATUS",
        OpCode::Notify => "NOTIFY",
        OpCode::Update => "UPDATE",
        _ => "OTHER",
    }
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

    #[test]
    fn response_flags_in_coredns_order() {
        let mut m = Metadata::new(1, hickory_proto::op::MessageType::Response, OpCode::Query);
        m.authoritative = true;
        m.recursion_desired = true;
        m.truncation = true;
        assert_eq!(flags(&m), "qr,aa,tc,rd");
    }
}
