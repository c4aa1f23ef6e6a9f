//! The `loadbalance` directive's Corefile syntax (CoreDNS 1.14.7's):
//!
//! ```text
//! loadbalance [round_robin] {
//!     prefer CIDR [CIDR...]
//! }
//! ```
//!
//! `weighted WEIGHTFILE` (and its `reload`) is refused with a message: not implemented here.

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{Cidr, CorefileError, Directive};
use std::sync::Arc;

/// `loadbalance`, as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalanceConfig {
    /// `prefer`: address records in these networks go first, in this order of networks.
    pub prefer: Vec<Cidr>,
}

/// Parses a `loadbalance` directive.
pub fn parse(d: &Directive) -> Result<LoadBalanceConfig, CorefileError> {
    let mut args = d.args();
    if let Some(policy) = args.next() {
        match policy.text.as_str() {
            "round_robin" => {}
            "weighted" => {
                return Err(d.error_at(
                    policy,
                    "policy 'weighted' is not implemented in cluster-dns yet; use round_robin (the default), with 'prefer' to put chosen networks first",
                ));
            }
            other => {
                return Err(d.error_at(
                    policy,
                    format!("unknown policy '{other}' (round_robin or weighted)"),
                ));
            }
        }
    }
    args.expect_none()?;
    let mut config = LoadBalanceConfig::default();
    for opt in &d.block {
        match opt.name.text.as_str() {
            "prefer" => {
                if opt.args.is_empty() {
                    return Err(opt.error("needs at least one CIDR (e.g. 10.0.0.0/8)"));
                }
                for t in &opt.args {
                    let cidr = Cidr::parse(&t.text).ok_or_else(|| {
                        t.error(format!(
                            "prefer: '{}' is not a network such as 10.9.20.0/24 or fd00::/8",
                            t.text
                        ))
                    })?;
                    config.prefer.push(cidr);
                }
            }
            "reload" => {
                return Err(opt
                    .error("an option of the weighted policy, which is not implemented in cluster-dns yet"));
            }
            other => return Err(opt.error(format!("unknown property '{other}' (prefer)"))),
        }
    }
    Ok(config)
}

/// The `loadbalance` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

impl Configured for LoadBalanceConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::LoadBalance::new(self.prefer.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(body: &str) -> Result<LoadBalanceConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{body}\n}}\n"), Path::new("Corefile"))?;
        parse(&cf.blocks[0].directives[0])
    }

    #[test]
    fn syntax() {
        assert_eq!(parse_text(" loadbalance").unwrap(), LoadBalanceConfig::default());
        assert_eq!(
            parse_text(" loadbalance round_robin").unwrap(),
            LoadBalanceConfig::default()
        );
        let c = parse_text(
            " loadbalance round_robin {\n  prefer 10.9.20.0/24 192.168.1.0/24\n  prefer fd00::/8\n }",
        )
        .unwrap();
        assert_eq!(
            c.prefer,
            ["10.9.20.0/24", "192.168.1.0/24", "fd00::/8"].map(|s| Cidr::parse(s).unwrap())
        );
        let c = parse_text(" loadbalance {\n  prefer 10.0.0.1\n }").unwrap();
        assert_eq!(c.prefer, [Cidr::parse("10.0.0.1/32").unwrap()]);
        for (text, want) in [
            (
                " loadbalance weighted w.txt",
                "Corefile:2: loadbalance: policy 'weighted' is not implemented",
            ),
            (" loadbalance random", "unknown policy 'random'"),
            (" loadbalance round_robin extra", "Corefile:2"),
            (
                " loadbalance {\n  prefer\n }",
                "Corefile:3: prefer: needs at least one CIDR",
            ),
            (
                " loadbalance {\n  prefer 10.0.0.0/33\n }",
                "Corefile:3: prefer: '10.0.0.0/33' is not a network",
            ),
            (" loadbalance {\n  reload 10s\n }", "weighted policy"),
            (" loadbalance {\n  bogus\n }", "unknown property 'bogus'"),
        ] {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
