//! The `proxyproto` directive's Corefile syntax (see this folder's README), parsed into a
//! [`ProxyprotoConfig`], and its [`Configured`] impl: what the configured directive sets for its
//! block.

use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, ProxyPolicy, ProxyProtocol, SetupCtx};
use crate::corefile::{Cidr, CorefileError, Directive, parse_duration};

/// The UDP sessions remembered at once without `max_sessions` (CoreDNS's).
pub const DEFAULT_MAX_SESSIONS: usize = 10_240;

/// A block's `proxyproto`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyprotoConfig(pub Arc<ProxyProtocol>);

/// `proxyproto [{ allow CIDR...; default use|ignore|reject|skip; udp_session_tracking
/// DURATION [MAX_SESSIONS] }]`; once per server block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    if ctx.previous.is_some() {
        return Err(d.error("proxy protocol already configured for this server block"));
    }
    d.args().expect_none()?;
    let mut p = ProxyProtocol::default();
    for opt in &d.block {
        let name = opt.name.text.as_str();
        match name {
            "allow" => {
                for t in opt.args().remaining() {
                    // CoreDNS takes CIDRs only (Go's net.ParseCIDR).
                    let cidr = Some(&t.text)
                        .filter(|s| s.contains('/'))
                        .and_then(|s| Cidr::parse(s))
                        .ok_or_else(|| {
                            d.error_at(
                                t,
                                format!("allow: '{}' is not a CIDR (such as 10.0.0.0/8)", t.text),
                            )
                        })?;
                    p.allow.push(cidr);
                }
            }
            "default" => {
                let arg = d.option_arg(opt)?;
                p.default = Some(match arg.text.to_ascii_lowercase().as_str() {
                    "use" => ProxyPolicy::Use,
                    "ignore" => ProxyPolicy::Ignore,
                    "reject" => ProxyPolicy::Reject,
                    "skip" => ProxyPolicy::Skip,
                    _ => {
                        return Err(d.error_at(
                            arg,
                            format!("default: '{}' is not use, ignore, reject or skip", arg.text),
                        ));
                    }
                });
            }
            "udp_session_tracking" => {
                let mut args = opt.args();
                let ttl_token = args.expect("a duration")?;
                let ttl = parse_duration(&ttl_token.text).ok_or_else(|| {
                    d.error_at(
                        ttl_token,
                        format!("udp_session_tracking: invalid duration '{}'", ttl_token.text),
                    )
                })?;
                let max = match args.next() {
                    None => DEFAULT_MAX_SESSIONS,
                    Some(t) => t.text.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        d.error_at(
                            t,
                            format!(
                                "udp_session_tracking: invalid max sessions '{}': must be a positive integer",
                                t.text
                            ),
                        )
                    })?,
                };
                args.expect_none()?;
                // A zero duration turns tracking off, as in CoreDNS.
                p.udp_sessions = (!ttl.is_zero()).then_some((ttl, max));
            }
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown option '{other}' (allow, default or udp_session_tracking)"),
                ));
            }
        }
    }
    Ok(Arc::new(ProxyprotoConfig(Arc::new(p))))
}

impl Configured for ProxyprotoConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.listener.proxy = Some(self.0.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ProxyProtocol, String> {
        let c = crate::chain::set_up(text, setup)?;
        let mut s = BlockSettings::default();
        c.configure(&mut s);
        s.listener
            .proxy
            .map(|p| (*p).clone())
            .ok_or_else(|| "not set".to_owned())
    }

    #[test]
    fn options_policies_and_errors() {
        // What the server's policy_for reads (its tests: server::proxy).
        let all = parse("proxyproto").unwrap();
        assert!(all.allow.is_empty() && all.default.is_none());
        let some = parse("proxyproto {\n allow 192.168.1.1/32 192.168.0.1/32\n}").unwrap();
        assert_eq!(some.allow.len(), 2);
        assert!(some.allow[0].contains("192.168.1.1".parse().unwrap()));
        assert!(!some.allow[0].contains("192.168.1.2".parse().unwrap()));
        let reject = parse("proxyproto {\n allow 192.168.1.1/32\n default REJECT\n}").unwrap();
        assert_eq!(reject.default, Some(ProxyPolicy::Reject));
        let spectrum = parse("proxyproto {\n allow 192.168.1.1/32\n udp_session_tracking 28s\n}").unwrap();
        assert_eq!(
            spectrum.udp_sessions,
            Some((std::time::Duration::from_secs(28), 10_240))
        );
        let more = parse("proxyproto {\n udp_session_tracking 28s 20000\n}").unwrap();
        assert_eq!(
            more.udp_sessions,
            Some((std::time::Duration::from_secs(28), 20_000))
        );
        let skip_all = parse("proxyproto {\n default skip\n}").unwrap();
        assert_eq!(skip_all.default, Some(ProxyPolicy::Skip));
        for (text, want) in [
            ("proxyproto x", "Corefile:2"),
            (
                "proxyproto {\n allow 192.168.1.1\n}",
                "Corefile:3: proxyproto: allow: '192.168.1.1' is not a CIDR",
            ),
            (
                "proxyproto {\n default maybe\n}",
                "Corefile:3: proxyproto: default: 'maybe'",
            ),
            ("proxyproto {\n default\n}", "Corefile:3"),
            (
                "proxyproto {\n udp_session_tracking soon\n}",
                "Corefile:3: proxyproto: udp_session_tracking: invalid duration 'soon'",
            ),
            (
                "proxyproto {\n udp_session_tracking 28s 0\n}",
                "invalid max sessions '0'",
            ),
            ("proxyproto {\n udp_session_tracking\n}", "Corefile:3"),
            ("proxyproto {\n udp_session_tracking 1s 2 3\n}", "Corefile:3"),
            ("proxyproto {\n frob\n}", "unknown option 'frob'"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
