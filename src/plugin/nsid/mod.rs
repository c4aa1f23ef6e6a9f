//! The `nsid` plugin: the Name Server Identifier (RFC 5001). A request whose OPT carries an
//! NSID option gets this server's identifier (the Corefile's DATA, or the host's name) in the
//! reply's OPT, as CoreDNS's *nsid* does. It answers nothing itself: it declares the option
//! through the plugin contract (`Plugin::edns_options`) and the server adds it to the OPT it
//! builds. See this folder's README.

use std::sync::Arc;

use hickory_proto::op::Edns;
use hickory_proto::rr::rdata::opt::{EdnsCode, EdnsOption, NSIDPayload};

use crate::chain::{BuildCtx, Built, Configured, Next, Plugin, Replay, ReplyFuture, SetupCtx};
use crate::corefile::{CorefileError, Directive};
use crate::proto::Question;

/// `nsid`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsidConfig {
    /// The identifier, or `None` for the host's name.
    pub data: Option<String>,
}

/// The `nsid` directive's setup: `nsid [DATA...]` (the words joined by spaces), no block, once
/// per block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    d.expect_no_block()?;
    let words: Vec<&str> = d.args().map(|t| t.text.as_str()).collect();
    let data = (!words.is_empty()).then(|| words.join(" "));
    Ok(Arc::new(NsidConfig { data }))
}

impl Configured for NsidConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let data = self.data.as_deref().unwrap_or(ctx.hostname);
        Built::Plugin(Arc::new(Nsid {
            payload: data.as_bytes().to_vec(),
        }))
    }
}

/// The `nsid` plugin in a chain.
#[derive(Debug, Clone)]
pub struct Nsid {
    payload: Vec<u8>,
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
