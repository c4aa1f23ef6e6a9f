//! The `secondary` directive's Corefile syntax (CoreDNS's):
//!
//! ```text
//! secondary [ZONES...] {
//!     transfer from ADDRESS [ADDRESS...]
//!     tsig KEYNAME SECRET [ALGORITHM]
//!     snapshot DIR
//! }
//! ```
//!
//! ZONES default to the block's zones. ADDRESS is a primary: an IP address (port 53) or one
//! with a port (`10.0.0.10:5300`, `[fd00::10]:5300`), asked in the order written. Giving the
//! copies to further secondaries is the `transfer` plugin's (`transfer { to ... }`), as in
//! CoreDNS. `snapshot` (cluster-dns's own) keeps each copy in DIR (relative to the Corefile's
//! folder or `root`), served at start until a primary answers. `tsig` (cluster-dns's own) signs
//! every request to the primaries with a TSIG key (RFC 8945; base64 SECRET, ALGORITHM
//! `hmac-sha256` unless named) and takes only responses signed with it. Also how a configured `secondary` becomes its plugin ([`Configured`]).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hickory_proto::rr::Name;

use crate::chain::{BuildCtx, Built, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, normalize_zone};
use crate::plugin::kit::Notifier;
use crate::plugin::kit::tsig::{Algorithm, TsigKey};

/// `secondary`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryConfig {
    /// The zones followed, lower-case and absolute.
    pub zones: Vec<Name>,
    /// The primaries, in the order asked.
    pub primaries: Vec<SocketAddr>,
    /// `snapshot DIR`: the folder the copies are kept in, across restarts.
    pub snapshot: Option<PathBuf>,
    /// `tsig KEYNAME SECRET [ALGORITHM]`: the key requests are signed with.
    pub tsig: Option<TsigKey>,
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

/// `tsig KEYNAME SECRET [ALGORITHM]`'s key, or what is wrong with it.
fn parse_tsig(d: &Directive, opt: &Directive) -> Result<TsigKey, CorefileError> {
    use base64::Engine as _;
    let [name, secret, rest @ ..] = opt.args.as_slice() else {
        return Err(d.error_at(&opt.name, "tsig needs KEYNAME SECRET [ALGORITHM]"));
    };
    if rest.len() > 1 {
        return Err(d.error_at(&rest[1], "tsig takes KEYNAME SECRET [ALGORITHM]"));
    }
    let absolute = if name.text.ends_with('.') {
        name.text.clone()
    } else {
        format!("{}.", name.text)
    };
    let key_name = Name::from_ascii(&absolute)
        .map_err(|e| d.error_at(name, format!("tsig: key name '{}': {e}", name.text)))?
        .to_lowercase();
    let secret_bytes = match base64::engine::general_purpose::STANDARD.decode(&secret.text) {
        Ok(k) if !k.is_empty() => k,
        Ok(_) => return Err(d.error_at(secret, "tsig: the secret is empty")),
        Err(e) => return Err(d.error_at(secret, format!("tsig: the secret is not base64: {e}"))),
    };
    let algorithm = match rest.first() {
        None => Algorithm::Sha256,
        Some(a) => {
            let lower = a.text.to_ascii_lowercase();
            let absolute = if lower.ends_with('.') {
                lower
            } else {
                format!("{lower}.")
            };
            Algorithm::from_name(&absolute).ok_or_else(|| {
                d.error_at(
                    a,
                    format!(
                        "tsig: unknown algorithm '{}' (hmac-sha1, hmac-sha224, hmac-sha256, hmac-sha384, hmac-sha512)",
                        a.text
                    ),
                )
            })?
        }
    };
    Ok(TsigKey {
        name: key_name,
        algorithm,
        secret: secret_bytes,
    })
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
    let mut tsig = None;
    for opt in &d.block {
        if opt.name.text == "tsig" {
            if tsig.is_some() {
                return Err(d.error_at(&opt.name, "tsig given twice"));
            }
            tsig = Some(parse_tsig(d, opt)?);
            continue;
        }
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
                    "unknown property '{}' (transfer from ADDRESS..., tsig KEYNAME SECRET [ALGORITHM] or snapshot DIR)",
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
        tsig,
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
            self.tsig.clone(),
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
        assert_eq!(c.tsig, None);
        let c = parse_text(
            ". {\n secondary {\n  transfer from 10.0.0.10\n  tsig Fabric.Key c2VjcmV0 HMAC-SHA512\n }\n}\n",
        )
        .unwrap();
        let key = c.tsig.unwrap();
        assert_eq!(
            (
                key.name.to_string().as_str(),
                key.algorithm,
                key.secret.as_slice()
            ),
            ("fabric.key.", Algorithm::Sha512, &b"secret"[..])
        );
        let c =
            parse_text(". {\n secondary {\n  transfer from 10.0.0.10\n  tsig k. c2VjcmV0\n }\n}\n").unwrap();
        assert_eq!(c.tsig.unwrap().algorithm, Algorithm::Sha256);
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
            (
                ". {\n secondary {\n  transfer from 10.0.0.1\n  tsig k.\n }\n}\n",
                "Corefile:4: secondary: tsig needs KEYNAME SECRET [ALGORITHM]",
            ),
            (
                ". {\n secondary {\n  transfer from 10.0.0.1\n  tsig k. not*base64\n }\n}\n",
                "Corefile:4: secondary: tsig: the secret is not base64",
            ),
            (
                ". {\n secondary {\n  transfer from 10.0.0.1\n  tsig k. c2VjcmV0 hmac-md5\n }\n}\n",
                "Corefile:4: secondary: tsig: unknown algorithm 'hmac-md5'",
            ),
            (
                ". {\n secondary {\n  transfer from 10.0.0.1\n  tsig k. c2VjcmV0\n  tsig k. c2VjcmV0\n }\n}\n",
                "Corefile:5: secondary: tsig given twice",
            ),
        ] {
            let e = parse_text(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
