//! The `acl` directive's Corefile syntax (CoreDNS's):
//!
//! ```text
//! acl [ZONES...] {
//!     ACTION [type QTYPE...] [net SOURCE...]
//! }
//! ```
//!
//! ACTION is `allow`, `block`, `filter` or `drop`; QTYPE a record type or `*`; SOURCE an
//! address, a CIDR network or `*`. A block may hold several `acl` directives (each its own
//! zones), checked in file order.
//!
//! And how a configured `acl` directive becomes its plugin: its [`Configured`] impl, what it
//! checks against its block and offers it. What it parses into is `config.rs`'s, which the
//! handler reads too, so the handler never imports this file (the layer test finds import loops).

use std::str::FromStr;
use std::sync::Arc;

use hickory_proto::rr::{Name, RecordType};

use super::config::{AclConfig, Action, Policy, Rule};
use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{Cidr, CorefileError, Directive, Token};
use crate::plugin::kit::previous;

/// Parses a `net` SOURCE (an address or a CIDR network).
fn net(t: &Token) -> Result<Cidr, CorefileError> {
    Cidr::parse(&t.text).ok_or_else(|| {
        t.error(format!(
            "acl: '{}' is not an address, a CIDR network or '*'",
            t.text
        ))
    })
}

fn rule(d: &Directive, line: &Directive) -> Result<Rule, CorefileError> {
    let action = match line.name.text.as_str() {
        "allow" => Action::Allow,
        "block" => Action::Block,
        "filter" => Action::Filter,
        "drop" => Action::Drop,
        other => {
            return Err(line.name.error(format!(
                "acl: unknown action '{other}' (expected allow, block, filter or drop)"
            )));
        }
    };
    if line.has_block {
        return Err(line.name.error("acl: a rule takes no block"));
    }
    let (mut types, mut nets) = (Vec::new(), Vec::new());
    let mut section: Option<&str> = None;
    let mut wildcard_types = false;
    let mut any_source = false;
    for t in &line.args {
        match t.text.as_str() {
            "type" | "net" => section = Some(if t.text == "type" { "type" } else { "net" }),
            _ => match section {
                None => {
                    return Err(d.error_at(
                        t,
                        format!("acl: '{}': expected 'type' or 'net' before it", t.text),
                    ));
                }
                Some("type") if t.text == "*" => wildcard_types = true,
                Some("type") => {
                    let rt = RecordType::from_str(&t.text.to_ascii_uppercase())
                        .ok()
                        .filter(|rt| !matches!(rt, RecordType::Unknown(_)))
                        .ok_or_else(|| t.error(format!("acl: '{}' is not a record type", t.text)))?;
                    types.push(rt);
                }
                Some(_) if t.text == "*" => any_source = true,
                Some(_) => nets.push(net(t)?),
            },
        }
    }
    if wildcard_types {
        types.clear();
    }
    // `net *` (or any /0 network) is every source of both families.
    if any_source || nets.iter().any(|n| n.prefix_len() == 0) {
        nets.clear();
    }
    Ok(Rule { action, types, nets })
}

/// The `acl` directive's setup: each directive adds a policy to the block's earlier ones.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let mut config = previous::<AclConfig>(ctx).cloned().unwrap_or_default();
    let zones = if d.args.is_empty() {
        ctx.zones.to_vec()
    } else {
        d.args
            .iter()
            .map(|t| crate::corefile::normalize_zone_or_cidr(&t.text).map_err(|e| t.error(e)))
            .collect::<Result<_, _>>()?
    };
    let zones = zones
        .iter()
        .map(|z| {
            Name::from_ascii(z)
                .map(|n| n.to_lowercase())
                .map_err(|_| d.error(format!("acl: '{z}' is not a zone")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if d.block.is_empty() {
        return Err(d.error("acl: expected a block of rules (ACTION [type QTYPE...] [net SOURCE...])"));
    }
    let rules = d
        .block
        .iter()
        .map(|line| rule(d, line))
        .collect::<Result<_, _>>()?;
    config.policies.push(Policy { zones, rules });
    Ok(Arc::new(config))
}

impl Configured for AclConfig {
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        let metrics = ctx.metrics.and_then(|m| m.families::<super::AclMetrics>().ok());
        Built::Plugin(Arc::new(super::Acl::new(
            self.clone(),
            metrics.as_ref(),
            ctx.server,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(text: &str) -> Token {
        Token::at_line(text, 4)
    }

    #[test]
    fn sources_name_the_line() {
        assert!(net(&tok("10.0.0.0/8")).is_ok());
        for bad in ["10.0.0.0/33", "eth0", "10.0.0/8", "::/129"] {
            let e = net(&tok(bad)).unwrap_err().to_string();
            assert!(
                e.contains("Corefile:4") && e.contains("not an address"),
                "{bad}: {e}"
            );
        }
    }
}
