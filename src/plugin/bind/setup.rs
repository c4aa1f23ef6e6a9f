//! The `bind` directive's Corefile syntax (see this folder's README), parsed into a [`BindConfig`],
//! and its [`Configured`] impl: what the configured directive sets for its block.

use std::net::IpAddr;
use std::sync::Arc;

use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};
use crate::plugin::kit::previous;

/// The addresses of a block's `bind` lines, without repeats.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BindConfig {
    /// The addresses, in file order.
    pub addrs: Vec<IpAddr>,
}

/// The `bind` directive's setup: `bind ADDRESS|IFACE... [{ except ADDRESS... }]`; its addresses
/// are added to those of earlier `bind` lines.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    if d.args.is_empty() {
        return Err(d.error("expected at least one IP address or interface name"));
    }
    let mut except: Vec<IpAddr> = Vec::new();
    for opt in &d.block {
        match opt.name.text.as_str() {
            "except" => {
                if opt.args.is_empty() {
                    return Err(d.error_at(&opt.name, "except takes at least one IP address"));
                }
                for a in &opt.args {
                    let ip: IpAddr = a
                        .text
                        .parse()
                        .map_err(|_| d.error_at(a, format!("except: '{}' is not an IP address", a.text)))?;
                    except.push(ip);
                }
            }
            other => return Err(d.error_at(&opt.name, format!("unknown property '{other}'"))),
        }
    }
    let mut config = previous::<BindConfig>(ctx).cloned().unwrap_or_default();
    for a in &d.args {
        let found = match a.text.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => {
                let ips = interface_addresses(&a.text)
                    .map_err(|e| d.error_at(a, format!("cannot list the interfaces: {e}")))?;
                if ips.is_empty() {
                    return Err(d.error_at(
                        a,
                        format!(
                            "'{}' is neither an IP address nor an interface with an address",
                            a.text
                        ),
                    ));
                }
                ips
            }
        };
        for ip in found {
            if !config.addrs.contains(&ip) && !except.contains(&ip) {
                config.addrs.push(ip);
            }
        }
    }
    if config.addrs.is_empty() {
        return Err(d.error("every address is excepted: nothing to listen on"));
    }
    Ok(Arc::new(config))
}

/// The addresses of interface `name`, IPv4 then IPv6, without IPv6 link-local ones (a socket
/// cannot bind those without a scope).
fn interface_addresses(name: &str) -> Result<Vec<IpAddr>, nix::Error> {
    let mut out = Vec::new();
    for ifa in nix::ifaddrs::getifaddrs()? {
        if ifa.interface_name != name {
            continue;
        }
        let Some(addr) = ifa.address else { continue };
        let ip = if let Some(v4) = addr.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = addr.as_sockaddr_in6() {
            let ip = v6.ip();
            if ip.segments()[0] & 0xffc0 == 0xfe80 {
                continue;
            }
            IpAddr::V6(ip)
        } else {
            continue;
        };
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    out.sort_by_key(IpAddr::is_ipv6);
    Ok(out)
}

impl Configured for BindConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.bind.clone_from(&self.addrs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;

    fn bind(text: &str) -> Result<Vec<IpAddr>, String> {
        let cf = Corefile::parse_str(
            &format!(".:53 {{\n{text}\n}}\n"),
            std::path::Path::new("Corefile"),
        )
        .map_err(|e| e.to_string())?;
        let d = &cf.blocks[0].directives[0];
        let zones = vec![".".to_owned()];
        let ctx = SetupCtx {
            zones: &zones,
            dir: std::path::Path::new("."),
            previous: None,
            block: &[],
        };
        let c = setup(d, &ctx).map_err(|e| e.to_string())?;
        let c = (c.as_ref() as &dyn std::any::Any)
            .downcast_ref::<BindConfig>()
            .cloned()
            .unwrap();
        Ok(c.addrs)
    }

    #[test]
    fn interface_names_stand_for_their_addresses() {
        let lo = bind("bind lo").unwrap();
        assert!(lo.contains(&"127.0.0.1".parse().unwrap()), "{lo:?}");
        assert_eq!(bind("bind lo 127.0.0.1").unwrap(), lo, "no repeats");
        let without = bind("bind lo {\n except 127.0.0.1\n}").unwrap_or_default();
        assert!(!without.contains(&"127.0.0.1".parse().unwrap()), "{without:?}");
        let e = bind("bind nosuch0").unwrap_err();
        assert!(
            e.contains("Corefile:2") && e.contains("neither an IP address nor an interface"),
            "{e}"
        );
        let e = bind("bind 127.0.0.1 {\n except 127.0.0.1\n}").unwrap_err();
        assert!(e.contains("nothing to listen on"), "{e}");
        let e = bind("bind lo {\n except lo\n}").unwrap_err();
        assert!(e.contains("Corefile:3") && e.contains("not an IP address"), "{e}");
    }
}
