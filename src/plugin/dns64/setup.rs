//! The `dns64` directive's Corefile syntax:
//!
//! ```text
//! dns64 [PREFIX]
//! dns64 {
//!     prefix PREFIX
//!     translate_all
//!     allow_ipv4
//! }
//! ```
//!
//! PREFIX is an IPv6 network of length 32, 40, 48, 56, 64 or 96 (RFC 6052 section 2.2);
//! `64:ff9b::/96` (the well-known prefix) by default.
//!
//! And how a configured `dns64` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::net::Ipv6Addr;
use std::sync::Arc;

use super::config::Dns64Config;
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token};

/// The RFC 6052 prefix lengths.
const LENGTHS: [u8; 6] = [32, 40, 48, 56, 64, 96];

/// Parses `ADDR/LEN` as a NAT64 prefix.
fn prefix(t: &Token) -> Result<(Ipv6Addr, u8), CorefileError> {
    let bad = |why: &str| t.error(format!("dns64: prefix '{}' {why}", t.text));
    let (addr, len) = t
        .text
        .split_once('/')
        .ok_or_else(|| bad("is not ADDRESS/LENGTH"))?;
    let addr: Ipv6Addr = addr.parse().map_err(|_| bad("is not an IPv6 network"))?;
    let len: u8 = len.parse().map_err(|_| bad("has no valid length"))?;
    if !LENGTHS.contains(&len) {
        return Err(bad("must be of length 32, 40, 48, 56, 64 or 96 (RFC 6052)"));
    }
    let bits = u128::from(addr);
    if bits & (u128::MAX >> len) != 0 {
        return Err(bad("has host bits set"));
    }
    // RFC 6052 section 2.2: bits 64 to 71 (the "u" octet) must be zero.
    if len > 64 && (bits >> 56) & 0xff != 0 {
        return Err(bad("has bits 64 to 71 set (they must be zero, RFC 6052)"));
    }
    Ok((addr, len))
}

/// The `dns64` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    let mut config = Dns64Config::default();
    let mut args = d.args();
    if let Some(t) = args.next() {
        (config.prefix, config.prefix_len) = prefix(t)?;
    }
    args.expect_none()?;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "prefix" => (config.prefix, config.prefix_len) = prefix(d.option_arg(opt)?)?,
            "translate_all" => {
                d.option_no_args(opt)?;
                config.translate_all = true;
            }
            "allow_ipv4" => {
                d.option_no_args(opt)?;
                config.allow_ipv4 = true;
            }
            other => {
                return Err(opt.name.error(format!(
                    "dns64: unknown option '{other}' (expected prefix, translate_all or allow_ipv4)"
                )));
            }
        }
    }
    Ok(Arc::new(config))
}

impl Configured for Dns64Config {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let translated = ctx
            .metrics
            .and_then(|m| m.families::<super::Dns64Metrics>().ok())
            .map(|m| m.for_server(ctx.server));
        Built::Plugin(Arc::new(super::Dns64::new(self.clone(), translated)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(text: &str) -> Token {
        Token::at_line(text, 3)
    }

    #[test]
    fn prefixes_follow_rfc_6052() {
        assert_eq!(prefix(&tok("64:ff9b::/96")).unwrap().1, 96);
        assert_eq!(prefix(&tok("2001:db8::/32")).unwrap().1, 32);
        for (bad, why) in [
            ("64:ff9b::", "ADDRESS/LENGTH"),
            ("10.0.0.0/96", "not an IPv6"),
            ("64:ff9b::/80", "length 32, 40"),
            ("64:ff9b::1/96", "host bits"),
            ("2001:db8:0:0:ff00::/96", "bits 64 to 71"),
        ] {
            let e = prefix(&tok(bad)).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("Corefile:3"), "{bad}: {e}");
        }
    }
}
