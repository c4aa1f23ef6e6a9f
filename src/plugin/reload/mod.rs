//! The `reload` plugin's syntax and the change detector it runs: the Corefile is re-read every
//! INTERVAL (± JITTER) and compared with what is running. Reading the path each time follows
//! the `..data` symlink swap a ConfigMap update makes, which a watch on the file itself would
//! lose after the first swap.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
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

/// The reload plugin's metrics, registered once per process.
#[derive(Debug, Clone)]
pub struct ReloadMetrics {
    failed: prometheus::IntCounter,
    version: prometheus::GaugeVec,
}

impl ReloadMetrics {
    /// Registers `coredns_reload_failed_total` and `coredns_reload_version_info` in `registry`.
    pub fn register(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let failed = prometheus::IntCounter::new(
            "coredns_reload_failed_total",
            "Counter of the number of failed reload attempts.",
        )?;
        let version = prometheus::GaugeVec::new(
            prometheus::Opts::new(
                "coredns_reload_version_info",
                "A metric with a constant '1' value labeled by hash, and value which type of hash generated.",
            ),
            &["hash", "value"],
        )?;
        registry.register(Box::new(failed.clone()))?;
        registry.register(Box::new(version.clone()))?;
        Ok(Self { failed, version })
    }

    /// A reload was refused.
    pub fn failed(&self) {
        self.failed.inc();
    }

    /// `corefile` is the running Corefile: its SHA-512 becomes the one version series.
    pub fn running(&self, corefile: &[u8]) {
        use sha2::Digest as _;
        let digest = sha2::Sha512::digest(corefile);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.version.reset();
        self.version.with_label_values(&["sha512", &hex]).set(1.0);
    }
}

/// Tells whether the Corefile at a path changed since the last look.
#[derive(Debug)]
pub struct ChangeDetector {
    path: PathBuf,
    last: Option<Vec<u8>>,
}

impl ChangeDetector {
    /// A detector that takes the file's current content as the running one.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            last: std::fs::read(path).ok(),
        }
    }

    /// The new content when it differs from the last seen (an unreadable file is no change:
    /// a ConfigMap swap can leave it missing for a moment).
    pub fn poll(&mut self) -> Option<Vec<u8>> {
        let now = std::fs::read(&self.path).ok()?;
        if self.last.as_deref() == Some(now.as_slice()) {
            return None;
        }
        self.last = Some(now.clone());
        Some(now)
    }
}

/// The `reload` directive's setup (one per block; the runtime reads it).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d)?))
}

impl Configured for ReloadConfig {
    fn build(&self, _ctx: &BuildCtx<'_>) -> Built {
        Built::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;

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

    #[test]
    fn follows_a_symlink_swap() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-reload-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("v1")).unwrap();
        std::fs::create_dir_all(dir.join("v2")).unwrap();
        std::fs::write(dir.join("v1/Corefile"), "a").unwrap();
        std::fs::write(dir.join("v2/Corefile"), "b").unwrap();
        std::os::unix::fs::symlink("v1", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/Corefile", dir.join("Corefile")).unwrap();
        let mut d = ChangeDetector::new(&dir.join("Corefile"));
        assert_eq!(d.poll(), None);
        // Swap ..data atomically, as the kubelet does.
        std::os::unix::fs::symlink("v2", dir.join("..data_tmp")).unwrap();
        std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
        assert_eq!(d.poll(), Some(b"b".to_vec()));
        assert_eq!(d.poll(), None);
    }
}
