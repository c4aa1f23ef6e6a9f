//! The `bind` plugin: the IP addresses a server block listens on (default: every interface).
//! Several `bind` lines add up, as in CoreDNS. Not in the query path: the runtime binds the
//! sockets. See this folder's README.

use std::net::IpAddr;
use std::sync::Arc;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx, previous};
use crate::corefile::{CorefileError, Directive};

/// The addresses of a block's `bind` lines, without repeats.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BindConfig {
    /// The addresses, in file order.
    pub addrs: Vec<IpAddr>,
}

/// The `bind` directive's setup: its addresses are added to those of earlier `bind` lines.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    if d.args.is_empty() {
        return Err(d.error("expected at least one IP address"));
    }
    if d.has_block {
        return Err(d.error("takes no block"));
    }
    let mut config = previous::<BindConfig>(ctx).cloned().unwrap_or_default();
    for a in &d.args {
        let ip: IpAddr = a.text.parse().map_err(|_| {
            a.error(format!(
                "bind: '{}' is not an IP address (interface names are not supported)",
                a.text
            ))
        })?;
        if !config.addrs.contains(&ip) {
            config.addrs.push(ip);
        }
    }
    Ok(Arc::new(config))
}

impl Configured for BindConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Nothing
    }
}
