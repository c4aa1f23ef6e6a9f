//! Observers: plugins that see every answered request of their block after it is encoded
//! (`errors`, `log`), instead of answering it, and the [`Exchange`] they are shown.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Metadata, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};

use crate::proto::{QueryMetadata, Transport};

/// One request and its response, as the observers see it.
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
    /// The plugin that wrote the response (`""`: the server or the chain itself).
    pub plugin: &'static str,
    /// Why the chain failed, when it produced the failure itself (for `errors`).
    pub failure: Option<&'static str>,
    /// What the plugins published about the query, in a block with `metadata`.
    pub metadata: Option<&'a QueryMetadata>,
    /// The request as the client sent it (for `dnstap ... full`).
    pub request_wire: &'a [u8],
    /// The response as sent, when it is one DNS message (empty for a framed zone transfer).
    pub response_wire: &'a [u8],
}

/// A plugin that watches answered requests (`errors`, `log`) instead of answering them.
pub trait Observer: Send + Sync + fmt::Debug {
    /// Its directive.
    fn name(&self) -> &'static str;

    /// Sees one answered request of its block.
    fn observe(&self, x: &Exchange<'_>);

    /// True when it must see the question of every request, so its block's responses are
    /// never replayed from the memo (a replay has no parsed question at hand).
    fn needs_every_question(&self) -> bool {
        false
    }

    /// Background work, started once with the block.
    fn start(&self) {}
}
