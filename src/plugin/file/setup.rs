//! The `file` directive's Corefile syntax (CoreDNS 1.14.7's):
//!
//! ```text
//! file DBFILE [ZONES...] {
//!     reload DURATION
//!     reload_by_mtime
//!     fallthrough [ZONES...]
//! }
//! ```
//!
//! DBFILE is read relative to the Corefile's folder. The file is read and parsed here, so a
//! zone file with a syntax error stops `--check` and start-up at its line; a missing one does
//! too when `reload 0` says it will never be read again (otherwise it is a warning, and the
//! zone answers SERVFAIL until the file appears, as CoreDNS's). A block may name several files:
//! each `file` line adds its zones.
//!
//! And how a configured `file` directive becomes its plugin, and what it tells `--check` (its
//! [`Configured`] impl). What it parses into is `config.rs`'s, which the handler reads too, so
//! the handler never imports this file (the layer test finds import loops).

use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::Name;

use super::config::{FileConfig, ZoneFile};
use crate::chain::{BuildCtx, Built, Configured, NamedFile, SetupCtx};
use crate::corefile::{CorefileError, Directive, normalize_zone, normalize_zone_or_cidr, parse_duration};
use crate::plugin::kit::{Notifier, ZoneData, ZoneError, previous};

/// How often the file is checked when `reload` is not given (CoreDNS's minute).
pub const DEFAULT_RELOAD: Duration = Duration::from_secs(60);

/// Parses one `file` directive of a block serving `block_zones`, reading its file.
pub fn parse(
    d: &Directive,
    block_zones: &[String],
    dir: &std::path::Path,
) -> Result<(ZoneFile, Option<Vec<String>>), CorefileError> {
    let mut args = d.args();
    let file = args.expect("a zone file (DBFILE)")?;
    let path = dir.join(&file.text);
    let rest = args.remaining();
    let origins: Vec<String> = if rest.is_empty() {
        block_zones.to_vec()
    } else {
        rest.iter()
            .map(|t| normalize_zone(&t.text).map_err(|m| d.error_at(t, m)))
            .collect::<Result<_, _>>()?
    };
    let mut reload = DEFAULT_RELOAD;
    let mut by_mtime = false;
    let mut fallthrough = None;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "reload" => {
                let a = d.option_arg(opt)?;
                reload = parse_duration(&a.text).ok_or_else(|| {
                    d.error_at(
                        a,
                        format!(
                            "reload: '{}' is not a duration (e.g. 30s, 0 to never reload)",
                            a.text
                        ),
                    )
                })?;
            }
            "reload_by_mtime" => {
                d.option_no_args(opt)?;
                by_mtime = true;
            }
            "fallthrough" => {
                let zones = opt
                    .args
                    .iter()
                    .map(|t| normalize_zone_or_cidr(&t.text).map_err(|m| d.error_at(t, m)))
                    .collect::<Result<Vec<_>, _>>()?;
                fallthrough = Some(zones);
            }
            // Accepted by CoreDNS and ignored ("remove soon"): CNAME targets outside the zone
            // are always looked up.
            "upstream" => {}
            other => {
                return Err(d.error_at(
                    &opt.name,
                    format!("unknown property '{other}' (reload, reload_by_mtime or fallthrough)"),
                ));
            }
        }
    }
    let mut zones = Vec::new();
    for origin in &origins {
        let name = Name::from_ascii(origin).map_err(|e| d.error_at(file, format!("zone '{origin}': {e}")))?;
        let data = match ZoneData::read(&path, &name) {
            Ok(z) => Some(Arc::new(z)),
            Err(ZoneError::Read { source, .. }) if !reload.is_zero() => {
                tracing::warn!(
                    "file: cannot read {}: {source}; zone {origin} answers SERVFAIL until it can (checked every {reload:?})",
                    path.display()
                );
                None
            }
            Err(e) => return Err(d.error_at(file, e.to_string())),
        };
        zones.push((name.to_lowercase(), data));
    }
    Ok((
        ZoneFile {
            path,
            at: file.loc.clone(),
            zones,
            reload,
            by_mtime,
        },
        fallthrough,
    ))
}

/// The `file` directive's setup: each line adds its zones after the earlier lines'.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    let mut config = previous::<FileConfig>(ctx).cloned().unwrap_or_default();
    let (file, fallthrough) = parse(d, ctx.zones, ctx.dir)?;
    config.files.push(file);
    if fallthrough.is_some() {
        config.fallthrough = fallthrough;
    }
    Ok(Arc::new(config))
}

impl Configured for FileConfig {
    /// The zone files: needed unless `reload` reads them once they appear.
    fn files(&self) -> Vec<NamedFile> {
        self.files
            .iter()
            .map(|f| NamedFile {
                path: f.path.clone(),
                at: f.at.clone(),
                what: "file: zone file".to_owned(),
                needed: f.reload.is_zero(),
            })
            .collect()
    }

    /// Its plugin, with the block's NOTIFY sender when it has one (`transfer`).
    fn build(&self, ctx: &BuildCtx<'_>) -> Built {
        Built::Plugin(Arc::new(super::File::new(
            self,
            ctx.capabilities.get::<Notifier>(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corefile::Corefile;
    use std::path::PathBuf;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("cluster-dns-file-setup-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("db.example.org"),
            "@ 3600 IN SOA ns. admin. 7 7200 3600 1209600 300\n@ IN NS ns.example.org.\nns IN A 192.0.2.1\n",
        )
        .unwrap();
        std::fs::write(
            d.join("db.bad"),
            "@ 3600 IN SOA ns. admin. 7 7200 3600 1209600 300\nwww IN A 999.1.1.1\n",
        )
        .unwrap();
        d
    }

    fn parse_text(text: &str) -> Result<(ZoneFile, Option<Vec<String>>), CorefileError> {
        let d = dir();
        let cf = Corefile::parse_str(text, &d.join("Corefile"))?;
        let b = &cf.blocks[0];
        let zones: Vec<String> = vec!["example.org.".to_owned()];
        parse(&b.directives[0], &zones, &d)
    }

    #[test]
    fn syntax_and_errors() {
        let (f, fall) = parse_text(
            "example.org {\n file db.example.org {\n  reload 30s\n  reload_by_mtime\n  fallthrough\n }\n}\n",
        )
        .unwrap();
        assert_eq!(f.zones.len(), 1);
        assert_eq!(f.zones[0].1.as_ref().unwrap().serial(), 7);
        assert_eq!((f.reload, f.by_mtime), (Duration::from_secs(30), true));
        assert_eq!(fall, Some(Vec::new()));
        // One file, two zones: its relative names under each.
        let (f, _) = parse_text(". {\n file db.example.org example.org Example.NET\n}\n").unwrap();
        let origins: Vec<String> = f.zones.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(origins, ["example.org.", "example.net."]);
        assert!(f.zones.iter().all(|(_, z)| z.is_some()));
        for (text, want) in [
            ("example.org {\n file\n}\n", "Corefile:2"),
            ("example.org {\n file db.bad\n}\n", "db.bad:2: "),
            (
                "example.org {\n file db.missing {\n  reload 0\n }\n}\n",
                "db.missing: No such file",
            ),
            (
                "example.org {\n file db.example.org {\n  reload soon\n }\n}\n",
                "Corefile:3: file: reload: 'soon' is not a duration",
            ),
            (
                "example.org {\n file db.example.org {\n  bogus\n }\n}\n",
                "Corefile:3: file: unknown property 'bogus'",
            ),
        ] {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        // Missing with reload on: served SERVFAIL until it appears.
        let (f, _) = parse_text("example.org {\n file db.missing\n}\n").unwrap();
        assert!(f.zones[0].1.is_none());
    }
}
