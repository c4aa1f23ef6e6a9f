//! The `reload` directive's Corefile syntax (see this folder's README), parsed into a
//! [`ReloadConfig`], and its [`Configured`] impl: what the configured directive sets for its block.

use std::time::Duration;

use crate::chain::{BlockSettings, Configured, ReloadSettings, SetupCtx};
use crate::corefile::{Args, CorefileError, Directive, parse_duration};
use std::sync::Arc;

/// `reload [INTERVAL] [JITTER]`: CoreDNS's defaults are 30 s and 15 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadConfig {
    /// How often the Corefile is checked.
    pub interval: Duration,
    /// Up to this much is added to or taken from each interval.
    pub jitter: Duration,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(30),
            jitter: Duration::from_secs(15),
        }
    }
}

/// Parses the `reload` directive.
pub fn parse(d: &Directive) -> Result<ReloadConfig, CorefileError> {
    let mut args = Args::new(d);
    let mut c = ReloadConfig::default();
    let dur = |t: &crate::corefile::Token| {
        parse_duration(&t.text)
            .ok_or_else(|| d.error(format!("'{}' is not a duration (such as 30s)", t.text)))
    };
    if let Some(t) = args.next() {
        c.interval = dur(t)?;
        c.jitter = c.interval / 2;
    }
    if let Some(t) = args.next() {
        c.jitter = dur(t)?;
    }
    args.expect_none()?;
    if c.interval < Duration::from_secs(2) {
        return Err(d.error("the interval must be at least 2s"));
    }
    if c.jitter >= c.interval {
        return Err(d.error("the jitter must be smaller than the interval"));
    }
    if !d.block.is_empty() {
        return Err(d.error("takes no options"));
    }
    Ok(c)
}

/// The `reload` directive's setup (one per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

impl Configured for ReloadConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.reload = Some(ReloadSettings {
            interval: self.interval,
            jitter: self.jitter,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::Path;

    fn cfg(body: &str) -> Result<ReloadConfig, CorefileError> {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{body}\n}}\n"), Path::new("Corefile"))?;
        parse(&cf.blocks[0].directives[0])
    }

    #[test]
    fn syntax() {
        assert_eq!(cfg(" reload").unwrap(), ReloadConfig::default());
        assert_eq!(cfg(" reload 10s").unwrap().jitter, Duration::from_secs(5));
        assert_eq!(cfg(" reload 10s 1s").unwrap().jitter, Duration::from_secs(1));
        assert!(cfg(" reload 1s").is_err());
        assert!(cfg(" reload 10s 10s").is_err());
        assert!(
            cfg(" reload soon")
                .unwrap_err()
                .to_string()
                .contains("Corefile:2")
        );
    }
}
