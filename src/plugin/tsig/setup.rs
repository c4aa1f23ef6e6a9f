//! The `tsig` directive's Corefile syntax, as CoreDNS 1.14.7 reads it:
//! `tsig [ZONE...] { secret NAME KEY; secrets FILE; require QTYPE...|all|none;
//! require_opcode OPCODE...|all|none }`, once per server block. Secrets are base64 and decoded
//! here, so a bad one fails at its line; a key file is read in BIND's `named.conf` form.

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use hickory_proto::op::OpCode;
use hickory_proto::rr::Name;

use super::verify::{Require, TsigAuth, qtype_of};
use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token, normalize_zone};

/// `tsig`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsigConfig {
    /// The zones whose requests are checked (the block's, without ZONE arguments).
    pub zones: Vec<Name>,
    /// The keys: name (lower-case, absolute) and secret.
    pub keys: Vec<(Name, Vec<u8>)>,
    /// What is refused unsigned.
    pub require: Require,
}

fn zone_name(text: &str) -> Result<Name, String> {
    let zone = normalize_zone(text)?;
    Name::from_ascii(&zone)
        .map(|n| n.to_lowercase())
        .map_err(|e| format!("'{text}' is not a domain name: {e}"))
}

fn key_name(text: &str) -> Result<Name, String> {
    let absolute = if text.ends_with('.') {
        text.to_owned()
    } else {
        format!("{text}.")
    };
    Name::from_ascii(&absolute)
        .map(|n| n.to_lowercase())
        .map_err(|e| format!("key name '{text}' is not a domain name: {e}"))
}

fn secret(text: &str) -> Result<Vec<u8>, String> {
    match base64::engine::general_purpose::STANDARD.decode(text) {
        Ok(k) if !k.is_empty() => Ok(k),
        Ok(_) => Err("the secret is empty".into()),
        Err(e) => Err(format!("the secret is not base64: {e}")),
    }
}

fn add_key(keys: &mut Vec<(Name, Vec<u8>)>, name: Name, key: Vec<u8>) -> Result<(), String> {
    if keys.iter().any(|(n, _)| *n == name) {
        return Err(format!("key \"{name}\" redefined"));
    }
    keys.push((name, key));
    Ok(())
}

/// The keys of a BIND key file: `key "NAME" { algorithm ALG; secret "BASE64"; };` (the
/// algorithm is read and ignored, as CoreDNS does: the request names it). Errors name the line.
pub fn parse_key_file(text: &str) -> Result<Vec<(Name, Vec<u8>)>, String> {
    let mut keys = Vec::new();
    let mut open: Option<(Name, Option<Vec<u8>>)> = None;
    for (i, line) in text.lines().enumerate() {
        let at = |m: String| format!("line {}: {m}", i + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = fields.first() else {
            continue;
        };
        match (&mut open, *first) {
            (None, "key") => {
                let name = fields
                    .get(1)
                    .map(|f| f.trim_matches(|c| c == '"' || c == '{'))
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| at("expected a key name".into()))?;
                open = Some((key_name(name).map_err(at)?, None));
            }
            (None, other) => return Err(at(format!("unexpected '{other}' (expected 'key')"))),
            (Some(_), "algorithm") => {}
            (Some((_, s)), "secret") => {
                let text = fields
                    .get(1)
                    .map(|f| f.trim_matches(|c| c == '"' || c == ';'))
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| at("expected a secret".into()))?;
                *s = Some(secret(text).map_err(at)?);
            }
            (Some(_), "}" | "};") => {
                let Some((name, s)) = open.take() else {
                    continue;
                };
                let s = s.ok_or_else(|| at(format!("key \"{name}\" has no secret")))?;
                add_key(&mut keys, name, s).map_err(at)?;
            }
            (Some(_), other) => return Err(at(format!("unexpected '{other}'"))),
        }
    }
    if let Some((name, _)) = open {
        return Err(format!("key \"{name}\" is not closed"));
    }
    Ok(keys)
}

fn opcode_of(text: &str) -> Option<OpCode> {
    Some(match text {
        "QUERY" => OpCode::Query,
        "IQUERY" => OpCode::Unknown(1),
        "STATUS" => OpCode::Status,
        "NOTIFY" => OpCode::Notify,
        "UPDATE" => OpCode::Update,
        _ => return None,
    })
}

/// `require ...` or `require_opcode ...`: `all`, `none`, or the listed items.
fn listed<T>(
    d: &Directive,
    args: &[Token],
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<(bool, Vec<T>), CorefileError> {
    match args.first().map(|a| a.text.as_str()) {
        None => Err(d.error(format!("tsig: expected 'all', 'none' or a list of {what}s"))),
        Some("all") => Ok((true, Vec::new())),
        Some("none") => Ok((false, Vec::new())),
        Some(_) => args
            .iter()
            .map(|a| {
                parse(&a.text).ok_or_else(|| d.error_at(a, format!("tsig: unknown {what} '{}'", a.text)))
            })
            .collect::<Result<_, _>>()
            .map(|v| (false, v)),
    }
}

/// Parses `d` (`dir`: where a relative key file is read from).
pub fn parse(d: &Directive, block_zones: &[String], dir: &Path) -> Result<TsigConfig, CorefileError> {
    let zones = if d.args.is_empty() {
        block_zones
            .iter()
            .map(|z| zone_name(z).map_err(|e| d.error(e)))
            .collect::<Result<_, _>>()?
    } else {
        d.args
            .iter()
            .map(|a| zone_name(&a.text).map_err(|e| d.error_at(a, format!("tsig: {e}"))))
            .collect::<Result<_, _>>()?
    };
    let mut keys = Vec::new();
    let mut require = Require::default();
    for opt in &d.block {
        let err_at = |t: &Token, m: String| opt.error_at(t, format!("tsig: {m}"));
        match opt.name.text.as_str() {
            "secret" => {
                let [name, key] = opt.args.as_slice() else {
                    return Err(opt.error("tsig: expected 'secret NAME KEY'"));
                };
                let key_bytes = secret(&key.text).map_err(|e| err_at(key, e))?;
                let name_n = key_name(&name.text).map_err(|e| err_at(name, e))?;
                add_key(&mut keys, name_n, key_bytes).map_err(|e| err_at(name, e))?;
            }
            "secrets" => {
                let [file] = opt.args.as_slice() else {
                    return Err(opt.error("tsig: expected 'secrets FILE'"));
                };
                let path = dir.join(&file.text);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| err_at(file, format!("cannot read {}: {e}", path.display())))?;
                for (name, key) in
                    parse_key_file(&text).map_err(|e| err_at(file, format!("{}: {e}", path.display())))?
                {
                    add_key(&mut keys, name, key).map_err(|e| err_at(file, e))?;
                }
            }
            "require" => {
                (require.all_types, require.types) = listed(opt, &opt.args, "query type", qtype_of)?;
            }
            "require_opcode" => {
                (require.all_opcodes, require.opcodes) = listed(opt, &opt.args, "opcode", opcode_of)?;
            }
            other => {
                return Err(opt.error(format!(
                    "tsig: unknown property '{other}' (secret, secrets, require, require_opcode)"
                )));
            }
        }
    }
    Ok(TsigConfig { zones, keys, require })
}

/// The `tsig` directive's setup (once per block).
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    Ok(Arc::new(parse(d, ctx.zones, ctx.dir)?))
}

impl Configured for TsigConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.auth = Some(Arc::new(TsigAuth::new(
            self.zones.clone(),
            self.keys.iter().cloned().collect(),
            self.require.clone(),
        )));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::RecordType;

    fn cfg(text: &str) -> Result<TsigConfig, String> {
        let c = crate::chain::set_up(text, setup)?;
        let any: &dyn std::any::Any = c.as_ref();
        Ok(any.downcast_ref::<TsigConfig>().unwrap().clone())
    }

    #[test]
    fn the_readme_examples_and_the_errors() {
        let c = cfg("tsig {\n secret example.zone.key. NoTCJU+DMqFWywaPyxSijrDEA/eC3nK0xi3AMEZuPVk=\n require AXFR IXFR\n}").unwrap();
        assert_eq!(c.keys.len(), 1);
        assert_eq!(c.keys[0].0, Name::from_ascii("example.zone.key.").unwrap());
        assert_eq!(c.keys[0].1.len(), 32);
        assert!(c.require.applies(RecordType::AXFR, OpCode::Query));
        assert!(!c.require.applies(RecordType::A, OpCode::Query));
        assert!(c.zones.is_empty(), "the block's zones (none in this helper)");
        let c = cfg("tsig auth.zone {\n secret k bm9wZQ==\n require all\n require_opcode UPDATE NOTIFY\n}")
            .unwrap();
        assert!(c.require.applies(RecordType::A, OpCode::Query));
        assert_eq!(c.zones, [Name::from_ascii("auth.zone.").unwrap()]);
        assert_eq!(c.require.opcodes, [OpCode::Update, OpCode::Notify]);
        assert!(
            !cfg("tsig {\n require none\n}")
                .unwrap()
                .require
                .applies(RecordType::A, OpCode::Query)
        );
        for (bad, line, says) in [
            ("tsig {\n secret k not-base64!\n}", "Corefile:3", "base64"),
            ("tsig {\n secret k\n}", "Corefile:3", "secret NAME KEY"),
            (
                "tsig {\n secret k bm9wZQ==\n secret K. bm9wZQ==\n}",
                "Corefile:4",
                "redefined",
            ),
            (
                "tsig {\n require BOGUS\n}",
                "Corefile:3",
                "unknown query type 'BOGUS'",
            ),
            ("tsig {\n require\n}", "Corefile:3", "'all', 'none'"),
            ("tsig {\n require_opcode PUSH\n}", "Corefile:3", "unknown opcode"),
            ("tsig {\n keys x\n}", "Corefile:3", "unknown property"),
            (
                "tsig {\n secrets /nonexistent/keys.conf\n}",
                "Corefile:3",
                "cannot read",
            ),
        ] {
            let e = cfg(bad).unwrap_err();
            assert!(e.contains(line) && e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn key_files_in_bind_form() {
        let keys = parse_key_file(
            "key \"example.\" {\n  algorithm hmac-sha256;\n  secret \"X28hl0BOfAL5G0jsmJWSacrwn7YRm2f6U5brnzwWEus=\";\n};\n\nkey other. {\n secret \"bm9wZQ==\";\n};\n",
        )
        .unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[1], (Name::from_ascii("other.").unwrap(), b"nope".to_vec()));
        assert!(
            parse_key_file("key \"a.\" {\n};\n")
                .unwrap_err()
                .contains("no secret")
        );
        assert!(parse_key_file("zone x {\n").unwrap_err().starts_with("line 1"));
        assert!(
            parse_key_file("key a. {\n secret \"bm9wZQ==\";\n")
                .unwrap_err()
                .contains("not closed")
        );
    }
}
