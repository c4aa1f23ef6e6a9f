//! What `forward` tells the block's `dnstap` outputs of each exchange with an upstream, as
//! CoreDNS's forward does: a FORWARDER_QUERY, and a FORWARDER_RESPONSE when a reply came, both
//! from this server's side (query address: the local end of the socket to the upstream;
//! response address: the upstream), with the query and the reply's wire form for the outputs
//! that want them (`full`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use hickory_proto::op::Message;
use hickory_proto::serialize::binary::BinEncodable;

use super::exchange::Outgoing;
use crate::plugin::kit::{Tap, TapKind, TapMessage};
use crate::proto::QueryMetadata;

/// Reports the exchange of `sent` with `upstream` (over TCP or TLS when `tcp`), asked at
/// `asked`, to `taps`; `reply` is the upstream's answer, if one came; `metadata` is what the
/// plugins published about the question (`extra`'s placeholders read it).
pub fn report(
    taps: &[Arc<dyn Tap>],
    metadata: Option<&QueryMetadata>,
    upstream: SocketAddr,
    sent: &Outgoing<'_>,
    tcp: bool,
    asked: SystemTime,
    reply: Option<&Message>,
) {
    let answered = SystemTime::now();
    let reply_wire = match reply {
        Some(m) if taps.iter().any(|t| t.wants_messages()) => m.to_bytes().ok(),
        _ => None,
    };
    for tap in taps {
        let full = tap.wants_messages();
        let query = TapMessage {
            kind: TapKind::ForwarderQuery,
            tcp,
            query_address: sent.local.get().copied(),
            response_address: Some(upstream),
            query_time: asked,
            response_time: None,
            query_message: full.then_some(sent.wire.as_slice()),
            response_message: None,
            metadata,
        };
        tap.tap(&query);
        if reply.is_some() {
            tap.tap(&TapMessage {
                kind: TapKind::ForwarderResponse,
                response_time: Some(answered),
                query_message: None,
                response_message: if full { reply_wire.as_deref() } else { None },
                ..query
            });
        }
    }
}
