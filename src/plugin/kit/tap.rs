//! The dnstap hook for plugins that talk to other servers: what `forward` reports of each
//! exchange with an upstream ([`TapMessage`], dnstap's FORWARDER_QUERY and FORWARDER_RESPONSE),
//! and the [`Tap`] each `dnstap` directive offers its block to receive them ([`TapSink`], found
//! by type among the block's [`crate::chain::Capabilities`]), so `forward` never names `dnstap`.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use crate::proto::QueryMetadata;

/// The kinds of dnstap message cluster-dns sends (dnstap.proto's `Message.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapKind {
    /// A client's query, as received.
    ClientQuery,
    /// The response sent to a client.
    ClientResponse,
    /// A query sent to an upstream.
    ForwarderQuery,
    /// An upstream's response.
    ForwarderResponse,
}

/// One dnstap message, before encoding.
#[derive(Debug, Clone, Copy)]
pub struct TapMessage<'a> {
    /// Its kind.
    pub kind: TapKind,
    /// True over TCP (or TLS), false over UDP: dnstap's `socket_protocol`.
    pub tcp: bool,
    /// The address the query came from: the client, or this server's own socket towards the
    /// upstream (`None` when it is not known).
    pub query_address: Option<SocketAddr>,
    /// The address the query went to: the upstream (`None` for client messages, as CoreDNS).
    pub response_address: Option<SocketAddr>,
    /// When the query was received or sent.
    pub query_time: SystemTime,
    /// When the response was sent or received (responses only).
    pub response_time: Option<SystemTime>,
    /// The query's wire form (only sent by taps that want messages: `full`).
    pub query_message: Option<&'a [u8]>,
    /// The response's wire form (only sent by taps that want messages: `full`).
    pub response_message: Option<&'a [u8]>,
    /// What the plugins published about the question (in a block with `metadata`), for
    /// `extra`'s `{/LABEL}` placeholders.
    pub metadata: Option<&'a QueryMetadata>,
}

/// Where dnstap messages go: one `dnstap` directive's output. It never blocks the caller.
pub trait Tap: Send + Sync + fmt::Debug {
    /// True when it sends the wire messages too (`full`): callers skip encoding them otherwise.
    fn wants_messages(&self) -> bool;

    /// Queues `m` for output, or counts it dropped.
    fn tap(&self, m: &TapMessage<'_>);
}

/// What a `dnstap` directive offers its block (each one its own).
#[derive(Debug, Clone)]
pub struct TapSink(pub Arc<dyn Tap>);
