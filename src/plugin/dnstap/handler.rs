//! What one `dnstap` directive taps ([`Tapper`]): every answered client request of its block,
//! as a CLIENT_QUERY and a CLIENT_RESPONSE ([`Observer`]: it sees the request and the response
//! as they went over the wire), and what `forward` reports of its upstream exchanges
//! ([`Tap`]); each encoded with the directive's identity, version and extra and queued on its
//! [`Output`].

use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use crate::chain::{Exchange, Observer};
use crate::plugin::kit::{Tap, TapKind, TapMessage};
use crate::proto::Transport;

use super::encode::{Header, dnstap};
use super::output::Output;

/// One directive's tap.
#[derive(Debug)]
pub struct Tapper {
    output: Arc<Output>,
    full: bool,
    /// Set when the block is built (the identity defaults to the host name, known then).
    header: OnceLock<Header>,
}

impl Tapper {
    /// A tap writing to `output`, with the wire messages when `full`.
    pub fn new(output: Arc<Output>, full: bool) -> Self {
        Self {
            output,
            full,
            header: OnceLock::new(),
        }
    }

    /// Sets the identity, version and extra its messages carry (the first call wins).
    pub fn set_header(&self, header: Header) {
        let _ = self.header.set(header);
    }

    /// Its output.
    pub fn output(&self) -> &Arc<Output> {
        &self.output
    }
}

impl Tap for Tapper {
    fn wants_messages(&self) -> bool {
        self.full
    }

    fn tap(&self, m: &TapMessage<'_>) {
        let empty = Header::default();
        let header = self.header.get().unwrap_or(&empty);
        self.output.send(dnstap(header, m, self.full));
    }
}

impl Observer for Tapper {
    fn name(&self) -> &'static str {
        "dnstap"
    }

    fn observe(&self, x: &Exchange<'_>) {
        let answered = SystemTime::now();
        let asked = answered.checked_sub(x.elapsed).unwrap_or(answered);
        let query = TapMessage {
            kind: TapKind::ClientQuery,
            tcp: !matches!(x.proto, Transport::Udp),
            query_address: Some(x.client),
            response_address: None,
            query_time: asked,
            response_time: None,
            query_message: Some(x.request_wire),
            response_message: None,
            metadata: x.metadata,
        };
        self.tap(&query);
        self.tap(&TapMessage {
            kind: TapKind::ClientResponse,
            response_time: Some(answered),
            query_message: None,
            response_message: (!x.response_wire.is_empty()).then_some(x.response_wire),
            ..query
        });
    }
}
