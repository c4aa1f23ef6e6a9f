//! The `loadbalance` directive's Corefile syntax (CoreDNS 1.14.7's):
//!
//! ```text
//! loadbalance [round_robin] {
//!     prefer CIDR [CIDR...]
//! }
//! loadbalance weighted WEIGHTFILE {
//!     reload DURATION
//! }
//! ```
//!
//! The weight file is read at setup: a wrong one fails setup with its own file:line; a missing
//! one too, unless it is reloaded (`reload` not 0), as CoreDNS.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::weighted::{Weights, read_weights};
use crate::chain::{BuildCtx, Built, Configured, NamedFile, SetupCtx};
use crate::corefile::{Cidr, CorefileError, Directive, Location, parse_duration};
use std::sync::Arc;

/// How often the weight file is checked for changes unless `reload` says otherwise.
pub const DEFAULT_RELOAD: Duration = Duration::from_secs(30);

/// The `weighted` policy, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightedConfig {
    /// The weight file (relative paths from the block's folder: `root`'s, or the Corefile's).
    pub path: PathBuf,
    /// Where the Corefile names it.
    pub at: Location,
    /// `reload`: how often the file is checked for changes (zero: never).
    pub reload: Duration,
    /// The weights read at setup (none when the file was missing).
    pub weights: Weights,
    /// The file's content they were read from.
    pub content: Vec<u8>,
}

/// `loadbalance`, as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadBalanceConfig {
    /// `prefer`: address records in these networks go first, in this order of networks.
    pub prefer: Vec<Cidr>,
    /// `weighted WEIGHTFILE`: one address record, drawn by weight, goes first instead of the
    /// shuffle.
    pub weighted: Option<WeightedConfig>,
}

/// Parses `weighted WEIGHTFILE { reload DURATION }`, reading the file.
fn weighted(d: &Directive, dir: &Path) -> Result<WeightedConfig, CorefileError> {
    let toks = d.args().remaining();
    let Some(file) = toks.get(1) else {
        return Err(d.error("missing weight file argument: loadbalance weighted WEIGHTFILE"));
    };
    if let Some(extra) = toks.get(2) {
        return Err(d.error_at(extra, format!("unexpected argument '{}'", extra.text)));
    }
    let mut reload = DEFAULT_RELOAD;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "reload" => {
                let [t] = opt.args.as_slice() else {
                    return Err(opt.error("takes one duration (e.g. 10s, 0s to never reload)"));
                };
                reload = parse_duration(&t.text)
                    .ok_or_else(|| t.error(format!("invalid reload duration '{}'", t.text)))?;
            }
            other => {
                return Err(opt.error(format!(
                    "unknown property '{other}' of the weighted policy (reload)"
                )));
            }
        }
    }
    let path = dir.join(&file.text);
    let (weights, content) = match read_weights(&path) {
        Ok(read) => read,
        Err(Some(why)) => return Err(d.error_at(file, format!("weight file: {why}"))),
        Err(None) if reload.is_zero() => {
            return Err(d.error_at(
                file,
                format!(
                    "cannot read the weight file {} (it is never reloaded: reload 0s)",
                    path.display()
                ),
            ));
        }
        Err(None) => {
            tracing::warn!(file = %path.display(), "loadbalance: cannot read the weight file; trying again every {reload:?}");
            (Weights::default(), Vec::new())
        }
    };
    Ok(WeightedConfig {
        path,
        at: file.loc.clone(),
        reload,
        weights,
        content,
    })
}

/// Parses a `loadbalance` directive; a weight file is read from `dir` when relative.
pub fn parse(d: &Directive, dir: &Path) -> Result<LoadBalanceConfig, CorefileError> {
    let mut args = d.args();
    if let Some(policy) = args.next() {
        match policy.text.as_str() {
            "round_robin" => {}
            "weighted" => {
                return Ok(LoadBalanceConfig {
                    prefer: Vec::new(),
                    weighted: Some(weighted(d, dir)?),
                });
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
                return Err(opt.error("an option of the weighted policy (loadbalance weighted WEIGHTFILE)"));
            }
            other => return Err(opt.error(format!("unknown property '{other}' (prefer)"))),
        }
    }
    Ok(config)
}

/// The `loadbalance` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d, ctx.dir)?))
}

impl Configured for LoadBalanceConfig {
    /// The weight file, for `--check` to open; needed only when it is never reloaded.
    fn files(&self) -> Vec<NamedFile> {
        self.weighted
            .iter()
            .map(|w| NamedFile {
                path: w.path.clone(),
                at: w.at.clone(),
                what: "loadbalance: weight file".to_owned(),
                needed: w.reload.is_zero(),
            })
            .collect()
    }

    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        let lb = match &self.weighted {
            Some(w) => super::LoadBalance::weighted(super::weighted::Weighted::new(
                w.path.clone(),
                w.reload,
                w.weights.clone(),
                w.content.clone(),
            )),
            None => super::LoadBalance::new(self.prefer.clone()),
        };
        Built::Plugin(Arc::new(lb))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn parse_text(body: &str) -> Result<LoadBalanceConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{body}\n}}\n"), Path::new("Corefile"))?;
        parse(&cf.blocks[0].directives[0], Path::new("."))
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
        // The weight file is read at setup; missing, it is waited for when reloaded.
        let dir = std::env::temp_dir().join(format!("lb-setup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("w.txt"), "www.example.com\n100.64.1.1 3\n").unwrap();
        let cf = Corefile::parse_str(
            ".:53 {\n loadbalance weighted w.txt {\n  reload 10s\n }\n}\n",
            Path::new("Corefile"),
        )
        .unwrap();
        let c = parse(&cf.blocks[0].directives[0], &dir).unwrap();
        let w = c.weighted.unwrap();
        assert_eq!((w.path, w.reload), (dir.join("w.txt"), Duration::from_secs(10)));
        assert_eq!(
            w.weights
                .weight("www.example.com.", "100.64.1.1".parse().unwrap()),
            3
        );
        let c = parse_text(" loadbalance weighted /nonexistent/w.txt").unwrap();
        assert_eq!(
            c.weighted.map(|w| (w.reload, w.weights.names())),
            Some((DEFAULT_RELOAD, 0))
        );
        std::fs::remove_dir_all(&dir).unwrap();
        for (text, want) in [
            (
                " loadbalance weighted /nonexistent/w.txt {\n  reload 0s\n }",
                "Corefile:2: loadbalance: cannot read the weight file /nonexistent/w.txt",
            ),
            (" loadbalance weighted", "missing weight file argument"),
            (" loadbalance weighted a b", "unexpected argument 'b'"),
            (
                " loadbalance weighted w.txt {\n  reload soon\n }",
                "Corefile:3: invalid reload duration 'soon'",
            ),
            (
                " loadbalance weighted w.txt {\n  prefer 10.0.0.0/8\n }",
                "Corefile:3: prefer: unknown property 'prefer' of the weighted policy",
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
