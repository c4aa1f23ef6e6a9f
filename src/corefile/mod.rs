//! The Corefile language, as CoreDNS reads it (Caddy v1 syntax): tokens, server blocks and their
//! keys, directives with arguments and nested blocks, `#` comments, quoted tokens, environment
//! variables (`{$NAME}`, `{%NAME%}`), snippets and `import`.
//!
//! This module owns the syntax and nothing else: what a directive means is up to
//! [`crate::config`] and each plugin's setup, which read a [`Directive`] through [`Args`] and
//! report mistakes with [`Directive::error`] / [`Token::error`], so that every error names the
//! file and the line. It also owns the small value parsers every setup shares: server block keys
//! ([`parse_zone_key`]), zone names ([`normalize_zone`]) and Go-style durations
//! ([`parse_duration`]).
//!
//! Layout: `syntax` holds the tree (tokens, directives, blocks) and its errors, `lexer`
//! splits text into tokens, `parser` builds a [`Corefile`] of server blocks and resolves
//! snippets and imports, `zone` reads keys and zone names, `duration` reads durations.

mod duration;
mod http_addr;
mod lexer;
mod net;
mod parser;
mod syntax;
mod zone;

pub use duration::parse_duration;
pub use http_addr::parse_http_addr;
pub use net::Cidr;
pub use parser::{Corefile, MAX_IMPORT_DEPTH};
pub use syntax::{Args, CorefileError, Directive, Location, ServerBlock, Token};
pub use zone::{Scheme, ZoneKey, is_reverse_zone, normalize_zone, normalize_zone_or_cidr, parse_zone_key};

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use super::*;

    fn directive(text: &str) -> Directive {
        let cf = Corefile::parse_str(&format!(".:53 {{\n{text}\n}}\n"), Path::new("Corefile")).unwrap();
        cf.blocks[0].directives[0].clone()
    }

    #[test]
    fn location_display() {
        let file = Arc::new(PathBuf::from("/etc/coredns/Corefile"));
        assert_eq!(Location::new(&file, 12).to_string(), "/etc/coredns/Corefile:12");
        assert_eq!(Location::new(&file, 0).to_string(), "/etc/coredns/Corefile");
    }

    #[test]
    fn args_cursor() {
        let d = directive("forward . 1.1.1.1 8.8.8.8");
        let mut a = Args::new(&d);
        assert_eq!(a.len(), 3);
        assert_eq!(a.peek().unwrap().text, ".");
        assert_eq!(a.next().unwrap().text, ".");
        let e = a.expect_none().unwrap_err().to_string();
        assert_eq!(e, "Corefile:2: unexpected argument '1.1.1.1' to 'forward'");
        let rest: Vec<&str> = a.remaining().iter().map(|t| t.text.as_str()).collect();
        assert_eq!(rest, ["1.1.1.1", "8.8.8.8"]);
        assert!(a.is_empty() && a.next().is_none() && a.remaining().is_empty());
        assert!(a.expect_none().is_ok());
        let e = a.expect("an upstream").unwrap_err().to_string();
        assert_eq!(e, "Corefile:2: forward: expected an upstream");
        assert_eq!(d.args().count(), 3);
    }

    #[test]
    fn directive_and_token_errors() {
        let d = directive("kubernetes cluster.local {\n  foo\n}");
        assert_eq!(
            d.error("can be used only once").to_string(),
            "Corefile:2: kubernetes: can be used only once"
        );
        let e = d.error_at(&d.block[0].name, "unknown property 'foo'");
        assert_eq!(e.to_string(), "Corefile:3: kubernetes: unknown property 'foo'");
        assert_eq!(e.location().line, 3);
        assert_eq!(d.args[0].error("bad zone").to_string(), "Corefile:2: bad zone");
    }

    #[test]
    fn from_file_reads_and_reports_missing_files() {
        let dir = std::env::temp_dir().join(format!("cluster-dns-corefile-mod-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("Corefile");
        std::fs::write(&path, ".:53 {\n whoami\n}\n").unwrap();
        let cf = Corefile::from_file(&path).unwrap();
        assert_eq!(cf.blocks[0].directives[0].name.text, "whoami");
        assert_eq!(*cf.blocks[0].directives[0].name.loc.file, path);
        let missing = dir.join("nope");
        let e = Corefile::from_file(&missing).unwrap_err();
        assert!(matches!(e, CorefileError::Read { .. }));
        assert!(
            e.to_string()
                .starts_with(&format!("{}: cannot read the Corefile:", missing.display())),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
