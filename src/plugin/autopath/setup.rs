//! The `autopath` directive's Corefile syntax: `autopath [ZONE...] RESOLV-CONF`, where
//! RESOLV-CONF is `@PLUGIN` (the plugin that knows each client's search path: `@kubernetes`) or
//! a resolv.conf file whose `search` line is every client's path.
//!
//! And how a configured `autopath` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::path::Path;
use std::sync::Arc;

use hickory_proto::rr::Name;

use super::config::{AutoPathConfig, SearchSource};
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive};

/// The `search` (or last `domain`) domains of a resolv.conf text, as absolute names.
pub fn parse_search(content: &str) -> Vec<Name> {
    let mut out = Vec::new();
    for line in content.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("search") | Some("domain") => {
                out = words
                    .filter_map(|w| Name::from_ascii(w.trim_end_matches('.')).ok())
                    .filter(|n| !n.is_root())
                    .map(|mut n| {
                        n.set_fqdn(true);
                        n.to_lowercase()
                    })
                    .collect();
            }
            _ => {}
        }
    }
    out
}

/// The resolv.conf this server reads its own search domains from.
const OWN_RESOLV_CONF: &str = "/etc/resolv.conf";

/// Parses an `autopath` directive.
pub fn parse(d: &Directive, block_zones: &[String], dir: &Path) -> Result<AutoPathConfig, CorefileError> {
    if d.has_block {
        return Err(d.error("takes no block"));
    }
    let args: Vec<_> = d.args().remaining().to_vec();
    let Some((last, zone_args)) = args.split_last() else {
        return Err(
            d.error("needs a resolv.conf file or @PLUGIN: autopath [ZONE...] RESOLV-CONF|@kubernetes")
        );
    };
    let mut zones = Vec::new();
    for z in zone_args {
        let text = z.text.trim_end_matches('.').to_ascii_lowercase();
        let mut name = Name::from_ascii(if text.is_empty() { "." } else { &text })
            .map_err(|e| d.error_at(z, format!("'{}' is not a zone: {e}", z.text)))?;
        name.set_fqdn(true);
        zones.push(name);
    }
    if zones.is_empty() {
        for z in block_zones {
            let mut name = Name::from_ascii(z).map_err(|e| d.error(format!("zone '{z}': {e}")))?;
            name.set_fqdn(true);
            zones.push(name.to_lowercase());
        }
    }
    let source = match last.text.strip_prefix('@') {
        Some("") => return Err(d.error_at(last, "'@' needs a plugin name: @kubernetes")),
        Some(plugin) => SearchSource::Plugin(plugin.to_owned()),
        None => {
            let path = dir.join(&last.text);
            let content = std::fs::read_to_string(&path)
                .map_err(|e| d.error_at(last, format!("cannot read resolv.conf {}: {e}", path.display())))?;
            SearchSource::Fixed(parse_search(&content))
        }
    };
    let own_search = match source {
        SearchSource::Plugin(_) => std::fs::read_to_string(OWN_RESOLV_CONF)
            .map(|c| parse_search(&c))
            .unwrap_or_default(),
        SearchSource::Fixed(_) => Vec::new(),
    };
    Ok(AutoPathConfig {
        zones,
        source,
        own_search,
        at: (d.clone(), last.clone()),
    })
}

/// The `autopath` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d, ctx.zones, ctx.dir)?))
}

impl AutoPathConfig {
    pub(super) fn source_error(&self, message: String) -> CorefileError {
        self.at.0.error_at(&self.at.1, message)
    }
}

impl Configured for AutoPathConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let success = ctx
            .metrics
            .and_then(|m| m.families::<super::AutoPathMetrics>().ok())
            .map(|m| m.for_server(ctx.server));
        Built::Plugin(Arc::new(super::AutoPath::new(self.clone(), success)))
    }

    /// `@PLUGIN` must name a plugin of the block that can give search paths.
    fn check(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Result<(), CorefileError> {
        let SearchSource::Plugin(name) = &self.source else {
            return Ok(());
        };
        let Some((_, plugin)) = block.iter().find(|(n, _)| n == name) else {
            return Err(self.source_error(format!(
                "@{name}: this server block has no '{name}' plugin to take search paths from"
            )));
        };
        match plugin.offers_search_paths() {
            // It can, but not as configured: a warning (see `warnings`).
            Some(_) => Ok(()),
            None => Err(self.source_error(format!(
                "@{name}: the {name} plugin does not know its clients' search paths (only @kubernetes does)"
            ))),
        }
    }

    /// `@PLUGIN` that offers search paths only with other options (`@kubernetes` without
    /// `pods verified`): CoreDNS starts and its autopath does nothing; so does this one (the
    /// plugin gives no search paths), and says what to change.
    fn warnings(&self, block: &[(&'static str, Arc<dyn Configured>)]) -> Vec<CorefileError> {
        let SearchSource::Plugin(name) = &self.source else {
            return Vec::new();
        };
        match block
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, p)| p.offers_search_paths())
        {
            Some(Err(why)) => vec![self.source_error(format!("@{name}: autopath does nothing: {why}"))],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn search_lines() {
        let names = parse_search(
            "nameserver 10.0.0.2\nsearch default.svc.cluster.local svc.cluster.local. Cluster.Local\noptions ndots:5\n",
        );
        let texts: Vec<String> = names.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "default.svc.cluster.local.",
                "svc.cluster.local.",
                "cluster.local."
            ]
        );
        assert!(parse_search("nameserver 1.1.1.1\n").is_empty());
    }
}
