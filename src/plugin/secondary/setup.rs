//! The `secondary` directive's Corefile syntax (CoreDNS's):
//!
//! ```text
//! secondary [ZONES...] {
//!     transfer from ADDRESS [ADDRESS...]
//!     snapshot DIR
//! }
//! ```
//!
//! ZONES default to the block's zones. ADDRESS is a primary: an IP address (port 53) or one
//! with a port (`10.0.0.10:5300`, `[fd00::10]:5300`), asked in the order written. Giving the
//! copies to further secondaries is the `transfer` plugin's (`transfer { to ... }`), as in
//! CoreDNS. `snapshot` (cluster-dns's own) keeps each copy in DIR (relative to the Corefile's
//! folder or `root`), served at start until a primary answers. Also how a configured `secondary` becomes its plugin ([`Configured`]).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hickory_proto::rr::Name;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, normalize_zone};
use crate::plugin::kit::Notifier;

/// `secondary`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryConfig {
    /// The zones followed, lower-case and absolute.
    pub zones: Vec<Name>,
    /// The primaries, in the order asked.
    pub primaries: Vec<SocketAddr>,
    /// `snapshot DIR`: the folder the copies are kept in, across restarts.
    pub snapshot: Option<PathBuf>,
    /// The block has `transfer`: the copies may be transferred on, so each keeps a journal of
    /// its versions for IXFR (a node agent without `transfer` keeps none: no copy of the
    /// version before on every change).
    pub journal: bool,
}

/// A primary's address: `IP` (port 53) or `IP:PORT`.
fn parse_primary(text: &str) -> Option<SocketAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 53));
    }
    text.parse::<SocketAddr>().ok()
}

/// Parses a `secondary` directive of a block serving `block_zones`.
pub fn parse(d: &Directive, block_zones: &[String], dir: &Path) -> Result<SecondaryConfig, CorefileError> {
    let texts: Vec<String> = if d.args.is_empty() {
        block_zones.to_vec()
    } else {
        d.args
            .iter()
            .map(|t| normalize_zone(&t.text).map_err(|m| d.error_at(t, m)))
            .collect::<Result<_, _>>()?
    };
    let zones = texts
        .iter()
        .map(|z| {
            Name::from_ascii(z)
                .map(|n| n.to_lowercase())
                .map_err(|e| d.error_at(&d.name, format!("zone '{z}': {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut primaries = Vec::new();
    let mut snapshot = None;
    for opt in &d.block {
        if opt.name.text == "snapshot" {
            let a = d.option_arg(opt)?;
            let path = dir.join(&a.text);
            if path.exists() && !path.is_dir() {
                return Err(d.error_at(a, format!("snapshot: {} is not a folder", path.display())));
            }
            snapshot = Some(path);
            continue;
        }
        if opt.name.text != "transfer" {
            return Err(d.error_at(
                &opt.name,
                format!(
                    "unknown property '{}' (transfer from ADDRESS... or snapshot DIR)",
                    opt.name.text
                ),
            ));
        }
        match opt.args.first().map(|t| t.text.as_str()) {
            Some("from") => {}
            Some("to") => {
                return Err(d.error_at(
                    &opt.args[0],
                    "'transfer to' is the transfer plugin's: write 'transfer { to ADDRESS }' in the block",
                ));
            }
            _ => return Err(d.error_at(&opt.name, "transfer needs 'from ADDRESS...'")),
        }
        if opt.args.len() < 2 {
            return Err(d.error_at(&opt.args[0], "transfer from needs at least one address"));
        }
        for t in &opt.args[1..] {
            let primary = parse_primary(&t.text).ok_or_else(|| {
                d.error_at(
                    t,
                    format!(
                        "transfer from: '{}' is not an IP address or an address with a port",
                        t.text
                    ),
                )
            })?;
            primaries.push(primary);
        }
    }
    if primaries.is_empty() {
        return Err(d.error_at(
            &d.name,
            "secondary needs a primary: secondary [ZONES...] { transfer from ADDRESS... }",
        ));
    }
    Ok(SecondaryConfig {
        zones,
        primaries,
        snapshot,
        journal: true,
    })
}

/// The `secondary` directive's setup.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let mut config = parse(d, ctx.zones, ctx.dir)?;
    config.journal = ctx.block.contains(&"transfer");
    Ok(Arc::new(config))
}

impl Configured for SecondaryConfig {
    /// Its plugin, with the block's NOTIFY sender when it has one (`transfer`), so its own
    /// secondaries hear of each new version.
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let metrics = ctx
            .metrics
            .and_then(|m| m.families::<super::SecondaryMetrics>().ok());
        Built::Plugin(Arc::new(super::Secondary::new(
            &self.zones,
            &self.primaries,
            self.snapshot.as_deref(),
            self.journal,
            ctx.capabilities.get::<Notifier>(),
            metrics.as_ref(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(text: &str) -> Result<SecondaryConfig, String> {
        let cf = Corefile::parse_str(text, Path::new("Corefile")).map_err(|e| e.to_string())?;
        let zones = vec!["example.org.".to_owned()];
        parse(&cf.blocks[0].directives[0], &zones, Path::new("/srv")).map_err(|e| e.to_string())
    }

    #[test]
    fn syntax_and_errors() {
        let c = parse_text("example.org {\n secondary {\n  transfer from 10.0.0.10 [fd00::1]:5300\n  transfer from 127.0.0.1:5301\n }\n}\n").unwrap();
        assert_eq!(c.zones, [Name::from_ascii("example.org.").unwrap()]);
        let p: Vec<String> = c.primaries.iter().map(ToString::to_string).collect();
        assert_eq!(p, ["10.0.0.10:53", "[fd00::1]:5300", "127.0.0.1:5301"]);
        let c = parse_text(". {\n secondary Example.NET {\n  transfer from 10.0.0.10\n }\n}\n").unwrap();
        assert_eq!(c.zones[0].to_string(), "example.net.");
        for (text, want) in [
            (
                ". {\n secondary\n}\n",
                "Corefile:2: secondary: secondary needs a primary",
            ),
            (
                ". {\n secondary {\n  transfer from\n }\n}\n",
                "Corefile:3: secondary: transfer from needs at least one address",
            ),
            (
                ". {\n secondary {\n  transfer from nowhere\n }\n}\n",
                "'nowhere' is not an IP address",
            ),
            (
                ". {\n secondary {\n  transfer to 10.0.0.1\n }\n}\n",
                "'transfer to' is the transfer plugin's",
            ),
            (
                ". {\n secondary {\n  upstream 10.0.0.1\n }\n}\n",
                "unknown property 'upstream'",
            ),
        ] {
            let e = parse_text(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
