//! The `nsid` plugin in a chain ([`Nsid`]): it answers nothing itself, and gives the server
//! the NSID option to add to the reply's OPT when the request's OPT asks for it.

use hickory_proto::op::Edns;
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption, NSIDPayload};

use std::sync::Arc;

use crate::chain::{Capabilities, EdnsOptions, Next, Plugin, Replay, ReplyFuture};
use crate::proto::Question;

/// The `nsid` plugin in a chain.
#[derive(Debug, Clone)]
pub struct Nsid {
    payload: Vec<u8>,
}

impl Nsid {
    /// The plugin answering with the identifier `payload`.
    pub fn new(payload: Vec<u8>) -> Self {
        Self { payload }
    }
}

impl Plugin for Nsid {
    fn name(&self) -> &'static str {
        "nsid"
    }

    /// It changes no answer; its option depends on the request and the configuration alone.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.serve(q)
    }

    /// Its NSID, added to the reply's OPT by the server ([`EdnsOptions`]).
    fn offers(self: Arc<Self>) -> Capabilities {
        Capabilities::default().with(self as Arc<dyn EdnsOptions>)
    }
}

impl EdnsOptions for Nsid {
    fn edns_options(&self, request: &Edns) -> Vec<EdnsOption> {
        if request.option(EdnsCode::NSID).is_none() {
            return Vec::new();
        }
        // At most 65,535 bytes, which no Corefile token or host name reaches.
        NSIDPayload::new(self.payload.clone())
            .map(EdnsOption::NSID)
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identifier_only_when_the_request_asks() {
        let nsid = Nsid {
            payload: b"node-1".to_vec(),
        };
        let mut plain = Edns::new();
        assert!(nsid.edns_options(&plain).is_empty());
        plain
            .options_mut()
            .insert(EdnsOption::NSID(NSIDPayload::new(Vec::new()).unwrap()));
        let options = nsid.edns_options(&plain);
        assert!(
            matches!(options.as_slice(), [EdnsOption::NSID(p)] if p.as_ref() == b"node-1"),
            "{options:?}"
        );
    }
}
