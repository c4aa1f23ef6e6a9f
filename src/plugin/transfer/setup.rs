//! The `transfer` directive's Corefile syntax (CoreDNS 1.14.7's):
//!
//! ```text
//! transfer [ZONE...] {
//!     to ADDRESS...
//!     source ADDRESS
//!     notify transferred [PORT]
//! }
//! ```
//!
//! ADDRESS is `*`, an IP address, or one with a port (`1.2.3.4:5300`, `[12:34::56]:5300`); every
//! address but `*` is also sent NOTIFY when a zone changes (port 53 unless given), from `source`
//! when it is set. `notify transferred` (cluster-dns's own) also sends NOTIFY to every address
//! that transferred one of the zones in the last day, at PORT (53), at most 10,000 of them:
//! node agents following the cluster zone need not be listed.
//!
//! And how a configured `transfer` directive becomes its plugin and the [`Notifier`] it offers
//! its block (`notify.rs`), its [`Configured`] impl. What it parses into is `config.rs`'s, which
//! the handler and the notifier read too.

use std::any::TypeId;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::config::{Allowed, TransferConfig};
use super::notify::{Learned, NotifySender};
use crate::chain::{
    AcquireCtx, AcquireFuture, BlockSettings, BuildCtx, Built, Capabilities, Configured, SetupCtx,
};
use crate::corefile::{CorefileError, Directive, normalize_zone};
use crate::plugin::kit::Notifier;

/// Who `text` allows, and where NOTIFY goes for it (`None` for `*`).
fn parse_address(text: &str) -> Option<(Allowed, Option<SocketAddr>)> {
    if text == "*" {
        return Some((Allowed::Anyone, None));
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some((Allowed::Address(ip.to_canonical()), Some(SocketAddr::new(ip, 53))));
    }
    text.parse::<SocketAddr>()
        .ok()
        .map(|a| (Allowed::Address(a.ip().to_canonical()), Some(a)))
}

/// Parses a `transfer` directive of a block serving `block_zones`.
pub fn parse(d: &Directive, block_zones: &[String]) -> Result<TransferConfig, CorefileError> {
    let zones = if d.args.is_empty() {
        block_zones.to_vec()
    } else {
        d.args
            .iter()
            .map(|t| normalize_zone(&t.text).map_err(|m| d.error_at(t, m)))
            .collect::<Result<_, _>>()?
    };
    let mut to = Vec::new();
    let mut notify = Vec::new();
    let mut source = None;
    let mut notify_transferred = None;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "to" => {
                if opt.args.is_empty() {
                    return Err(d.error_at(&opt.name, "to needs at least one address, or *"));
                }
                for t in &opt.args {
                    let (allowed, target) = parse_address(&t.text).ok_or_else(|| {
                        d.error_at(
                            t,
                            format!(
                                "to: '{}' is not *, an IP address or an address with a port",
                                t.text
                            ),
                        )
                    })?;
                    to.push(allowed);
                    notify.extend(target);
                }
            }
            "notify" => {
                let what = opt.args.first().map(|t| t.text.as_str());
                if what != Some("transferred") || opt.args.len() > 2 {
                    return Err(d.error_at(&opt.name, "notify takes 'transferred [PORT]'"));
                }
                let port = match opt.args.get(1) {
                    None => 53,
                    Some(t) => t.text.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| {
                        d.error_at(t, format!("notify transferred: '{}' is not a port", t.text))
                    })?,
                };
                notify_transferred = Some(port);
            }
            "source" => {
                let a = d.option_arg(opt)?;
                source = Some(
                    a.text
                        .parse::<IpAddr>()
                        .map_err(|_| d.error_at(a, format!("source: '{}' is not an IP address", a.text)))?,
                );
            }
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown property '{other}' (to, source or notify)"),
                ));
            }
        }
    }
    Ok(TransferConfig {
        zones,
        to,
        notify,
        source,
        notify_transferred,
    })
}

/// The `transfer` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d, ctx.zones)?))
}

impl Configured for TransferConfig {
    /// Its block answers zone transfers (the server refuses them in blocks without it).
    fn configure(&self, settings: &mut BlockSettings) {
        settings.transfers = true;
    }

    /// Its plugin, telling the block's NOTIFY sender who transferred (`notify transferred`).
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::Transfer::new(
            self,
            ctx.capabilities.get::<Notifier>(),
        )))
    }

    fn offers(&self, capability: TypeId) -> bool {
        capability == TypeId::of::<Notifier>()
            && (!self.notify.is_empty() || self.notify_transferred.is_some())
    }

    /// Its NOTIFY sender, when a `to` line names an address or `notify transferred` is set.
    /// The addresses `notify transferred` learned are a resource kept across reloads (keyed
    /// by the zones and the port), so a reloaded Corefile still tells every agent.
    fn acquire<'a>(&'a self, ctx: AcquireCtx<'a>) -> AcquireFuture<'a> {
        Box::pin(async move {
            let mut offered = Capabilities::default();
            let learned = match self.notify_transferred {
                Some(port) => {
                    let gauge = ctx
                        .metrics
                        .and_then(|m| m.families::<super::TransferMetrics>().ok())
                        .map(|m| m.learned);
                    let key = (self.zones.clone(), port);
                    let made = ctx
                        .resources
                        .get_or_make(key, || async {
                            Ok::<_, std::convert::Infallible>(Learned::new(port, gauge))
                        })
                        .await;
                    made.ok().map(|a| a.value)
                }
                None => None,
            };
            if let Some(sender) = NotifySender::new(self, learned) {
                offered.offer(Arc::new(Notifier(Arc::new(sender))));
            }
            Ok(offered)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<TransferConfig, String> {
        let cf = Corefile::parse_str(text, Path::new("Corefile")).map_err(|e| e.to_string())?;
        let zones = vec!["example.org.".to_owned()];
        parse(&cf.blocks[0].directives[0], &zones).map_err(|e| e.to_string())
    }

    #[test]
    fn syntax_and_errors() {
        let c = parse_text("example.org {\n transfer {\n  to * 10.240.1.1\n  to [12:34::56]:5300 1.2.3.4:5300\n  source 10.0.0.1\n }\n}\n").unwrap();
        assert_eq!(c.zones, ["example.org."]);
        assert_eq!(
            c.to,
            [
                Allowed::Anyone,
                Allowed::Address("10.240.1.1".parse().unwrap()),
                Allowed::Address("12:34::56".parse().unwrap()),
                Allowed::Address("1.2.3.4".parse().unwrap()),
            ]
        );
        let notified: Vec<String> = c.notify.iter().map(ToString::to_string).collect();
        assert_eq!(notified, ["10.240.1.1:53", "[12:34::56]:5300", "1.2.3.4:5300"]);
        assert_eq!(c.source, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(c.notify_transferred, None);
        let c = parse_text(". {\n transfer {\n  to *\n  notify transferred\n }\n}\n").unwrap();
        assert_eq!(c.notify_transferred, Some(53));
        let c = parse_text(". {\n transfer {\n  to *\n  notify transferred 5300\n }\n}\n").unwrap();
        assert_eq!(c.notify_transferred, Some(5300));
        let c = parse_text(". {\n transfer Example.ORG example.net {\n  to 127.0.0.1\n }\n}\n").unwrap();
        assert_eq!(c.zones, ["example.org.", "example.net."]);
        for (text, want) in [
            (
                ". {\n transfer {\n  to\n }\n}\n",
                "Corefile:3: transfer: to needs at least one address",
            ),
            (
                ". {\n transfer {\n  to 10.0.0.0/8\n }\n}\n",
                "Corefile:3: transfer: to: '10.0.0.0/8' is not *",
            ),
            (
                ". {\n transfer {\n  source nowhere\n }\n}\n",
                "source: 'nowhere' is not an IP address",
            ),
            (
                ". {\n transfer {\n  from 1.2.3.4\n }\n}\n",
                "unknown property 'from'",
            ),
            (
                ". {\n transfer {\n  notify everyone\n }\n}\n",
                "notify takes 'transferred [PORT]'",
            ),
            (
                ". {\n transfer {\n  notify transferred 0\n }\n}\n",
                "notify transferred: '0' is not a port",
            ),
        ] {
            let e = parse_text(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
