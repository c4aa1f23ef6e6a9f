//! The Corefile language, as CoreDNS reads it (Caddy's syntax): tokens, server blocks with
//! their keys, directives with arguments and nested blocks, `#` comments, quoted tokens,
//! environment variables (`{$NAME}`, `{%NAME%}`), snippets and `import`.
//!
//! This module knows nothing about what directives mean; [`crate::config`] and each plugin's
//! setup do. Every error carries the file and line.

mod lexer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lexer::{Lexeme, lex};

/// Where a token stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file.
    pub file: Arc<PathBuf>,
    /// The line, from 1.
    pub line: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One token and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Its text, quotes removed and environment variables replaced.
    pub text: String,
    /// Its location.
    pub loc: Location,
}

impl Token {
    /// An error at this token.
    pub fn error(&self, msg: impl Into<String>) -> CorefileError {
        CorefileError::Syntax {
            loc: self.loc.clone(),
            message: msg.into(),
        }
    }
}

/// A directive: `name args... [{ sub-directives }]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The directive's name.
    pub name: Token,
    /// Its arguments on the same line.
    pub args: Vec<Token>,
    /// The directives of its block.
    pub block: Vec<Directive>,
    /// True when braces were written, even empty ones.
    pub has_block: bool,
}

impl Directive {
    /// An error at this directive: `file:line: name: msg`.
    pub fn error(&self, msg: impl Into<String>) -> CorefileError {
        CorefileError::Directive {
            loc: self.name.loc.clone(),
            directive: self.name.text.clone(),
            message: msg.into(),
        }
    }
}

/// A server block: its keys and directives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBlock {
    /// The keys (`.:53`, `cluster.local`).
    pub keys: Vec<Token>,
    /// The directives.
    pub directives: Vec<Directive>,
}

/// A parsed Corefile, imports resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corefile {
    /// The server blocks in order.
    pub blocks: Vec<ServerBlock>,
}

/// A Corefile that cannot be used. Every variant says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorefileError {
    /// The file could not be read.
    #[error("{}: cannot read: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// The text is not a valid Corefile.
    #[error("{loc}: {message}")]
    Syntax {
        /// Where.
        loc: Location,
        /// What was expected.
        message: String,
    },
    /// A directive's arguments or options are wrong.
    #[error("{loc}: {directive}: {message}")]
    Directive {
        /// Where.
        loc: Location,
        /// The directive.
        directive: String,
        /// What is wrong.
        message: String,
    },
}

/// How deep imports may nest.
const MAX_IMPORT_DEPTH: usize = 10;

impl Corefile {
    /// Reads and parses the Corefile at `path`, resolving imports relative to its directory.
    pub fn from_file(path: &Path) -> Result<Self, CorefileError> {
        let text = std::fs::read_to_string(path).map_err(|e| CorefileError::Read {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Self::parse_str(&text, path)
    }

    /// Parses `text`; `file` names it in errors and anchors relative imports.
    pub fn parse_str(text: &str, file: &Path) -> Result<Self, CorefileError> {
        let mut parser = Parser {
            snippets: Vec::new(),
            stack: vec![file.to_owned()],
        };
        let blocks = parser.file_blocks(text, file)?;
        if blocks.is_empty() {
            return Err(CorefileError::Syntax {
                loc: Location {
                    file: Arc::new(file.to_owned()),
                    line: 1,
                },
                message: "no server blocks: a Corefile needs at least one, such as '.:53 { ... }'".into(),
            });
        }
        Ok(Self { blocks })
    }
}

/// A cursor over a directive's arguments, for plugin setups.
#[derive(Debug)]
pub struct Args<'a> {
    directive: &'a Directive,
    pos: usize,
}

impl<'a> Args<'a> {
    /// A cursor at the first argument of `d`.
    pub fn new(d: &'a Directive) -> Self {
        Self { directive: d, pos: 0 }
    }

    /// The next argument.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<&'a Token> {
        let t = self.directive.args.get(self.pos);
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    /// All remaining arguments.
    pub fn remaining(&mut self) -> &'a [Token] {
        let rest = self.directive.args.get(self.pos..).unwrap_or_default();
        self.pos = self.directive.args.len();
        rest
    }

    /// An error if arguments remain.
    pub fn expect_none(&self) -> Result<(), CorefileError> {
        match self.directive.args.get(self.pos) {
            Some(t) => Err(self.directive.error(format!("unexpected argument '{}'", t.text))),
            None => Ok(()),
        }
    }
}

struct Parser {
    snippets: Vec<(String, Vec<Lexeme>)>,
    /// Files being imported, outermost first (for cycle detection).
    stack: Vec<PathBuf>,
}

fn loc_of(l: &Lexeme) -> Location {
    l.loc.clone()
}

fn is_open(l: &Lexeme) -> bool {
    !l.quoted && l.text == "{"
}

fn is_close(l: &Lexeme) -> bool {
    !l.quoted && l.text == "}"
}

impl Parser {
    fn file_blocks(&mut self, text: &str, file: &Path) -> Result<Vec<ServerBlock>, CorefileError> {
        let lexemes = lex(text, file)?;
        self.blocks(&lexemes, file)
    }

    /// Top level: snippets, imports of files of server blocks, and server blocks.
    fn blocks(&mut self, lx: &[Lexeme], file: &Path) -> Result<Vec<ServerBlock>, CorefileError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < lx.len() {
            let first = &lx[i];
            if is_close(first) {
                return Err(CorefileError::Syntax {
                    loc: loc_of(first),
                    message: "unexpected '}' with no block open".into(),
                });
            }
            if is_open(first) {
                return Err(CorefileError::Syntax {
                    loc: loc_of(first),
                    message: "'{' with no server block keys before it (expected for example '.:53 {')".into(),
                });
            }
            // Snippet definition: (name) { ... }
            if !first.quoted
                && first.text.starts_with('(')
                && first.text.ends_with(')')
                && first.text.len() > 2
            {
                let name = first.text[1..first.text.len() - 1].to_owned();
                if !lx.get(i + 1).is_some_and(is_open) {
                    return Err(CorefileError::Syntax {
                        loc: loc_of(first),
                        message: format!("snippet '{name}' must be followed by '{{' on the same line"),
                    });
                }
                let close = matching_close(lx, i + 1)?;
                self.snippets.push((name, lx[i + 2..close].to_vec()));
                i = close + 1;
                continue;
            }
            // Top-level import: its file holds server blocks.
            if !first.quoted && first.text == "import" {
                let line_end = line_end(lx, i);
                let args = &lx[i + 1..line_end];
                let [arg] = args else {
                    return Err(CorefileError::Syntax {
                        loc: loc_of(first),
                        message: "import takes exactly one file, glob or snippet name".into(),
                    });
                };
                if let Some(snippet) = self.snippet(&arg.text) {
                    out.extend(self.blocks(&snippet, file)?);
                } else {
                    for path in self.import_paths(arg, file)? {
                        let text = self.read_import(&path, arg)?;
                        self.stack.push(path.clone());
                        let r = self.file_blocks(&text, &path);
                        self.stack.pop();
                        out.extend(r?);
                    }
                }
                i = line_end;
                continue;
            }
            // Keys up to '{' on the same line as the last key; or, for a lone block, the whole
            // first line and the rest of the file as its directives.
            let line = first.loc.line;
            let mut keys = Vec::new();
            let mut j = i;
            while j < lx.len()
                && !is_open(&lx[j])
                && lx[j].loc.line == line
                && lx[j].loc.file == first.loc.file
            {
                if is_close(&lx[j]) {
                    return Err(CorefileError::Syntax {
                        loc: loc_of(&lx[j]),
                        message: "unexpected '}' after server block keys".into(),
                    });
                }
                for part in lx[j].text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    keys.push(Token {
                        text: part.to_owned(),
                        loc: loc_of(&lx[j]),
                    });
                }
                j += 1;
            }
            if keys.is_empty() {
                return Err(CorefileError::Syntax {
                    loc: loc_of(first),
                    message: "expected server block keys".into(),
                });
            }
            if j < lx.len() && is_open(&lx[j]) {
                let close = matching_close(lx, j)?;
                let directives = self.directives(&lx[j + 1..close], file, 0)?;
                out.push(ServerBlock { keys, directives });
                i = close + 1;
            } else if i == 0 {
                // A Corefile of one server block may leave out the braces: keys on the first
                // line, directives after it.
                let directives = self.directives(&lx[j..], file, 0)?;
                out.push(ServerBlock { keys, directives });
                i = lx.len();
            } else {
                return Err(CorefileError::Syntax {
                    loc: loc_of(&lx[j.min(lx.len() - 1)]),
                    message: "expected '{' after the server block keys, on the same line".into(),
                });
            }
        }
        Ok(out)
    }

    fn snippet(&self, name: &str) -> Option<Vec<Lexeme>> {
        self.snippets
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, l)| l.clone())
    }

    fn import_paths(&self, arg: &Lexeme, file: &Path) -> Result<Vec<PathBuf>, CorefileError> {
        let base = file.parent().unwrap_or(Path::new("."));
        let pattern = base.join(&arg.text);
        let fname = pattern
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default()
            .to_owned();
        if !fname.contains('*') && !fname.contains('?') {
            if !pattern.exists() {
                return Err(CorefileError::Syntax {
                    loc: loc_of(arg),
                    message: format!(
                        "import: no snippet named '{}' and no file {}",
                        arg.text,
                        pattern.display()
                    ),
                });
            }
            return Ok(vec![pattern]);
        }
        let dir = pattern.parent().unwrap_or(Path::new(".")).to_owned();
        let mut found = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if glob_match(&fname, &name) && e.path().is_file() {
                    found.push(e.path());
                }
            }
        }
        found.sort();
        // An import glob that matches nothing is not an error (CoreDNS logs a warning).
        Ok(found)
    }

    fn read_import(&self, path: &Path, arg: &Lexeme) -> Result<String, CorefileError> {
        if self.stack.iter().any(|p| p == path) {
            return Err(CorefileError::Syntax {
                loc: loc_of(arg),
                message: format!("import cycle: {} imports itself", path.display()),
            });
        }
        if self.stack.len() > MAX_IMPORT_DEPTH {
            return Err(CorefileError::Syntax {
                loc: loc_of(arg),
                message: format!("imports nested deeper than {MAX_IMPORT_DEPTH}"),
            });
        }
        std::fs::read_to_string(path).map_err(|e| CorefileError::Syntax {
            loc: loc_of(arg),
            message: format!("import: cannot read {}: {e}", path.display()),
        })
    }

    /// Directives of a block body (no outer braces).
    fn directives(
        &mut self,
        lx: &[Lexeme],
        file: &Path,
        depth: usize,
    ) -> Result<Vec<Directive>, CorefileError> {
        if depth > 32 {
            let loc = lx.first().map(loc_of).unwrap_or(Location {
                file: Arc::new(file.to_owned()),
                line: 1,
            });
            return Err(CorefileError::Syntax {
                loc,
                message: "blocks nested too deep".into(),
            });
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < lx.len() {
            let name = &lx[i];
            if is_close(name) {
                return Err(CorefileError::Syntax {
                    loc: loc_of(name),
                    message: "unexpected '}' with no block open".into(),
                });
            }
            if is_open(name) {
                return Err(CorefileError::Syntax {
                    loc: loc_of(name),
                    message: "unexpected '{': expected a directive name before it".into(),
                });
            }
            let line = name.loc.line;
            let same_line = |l: &Lexeme| l.loc.line == line && l.loc.file == name.loc.file;
            let mut j = i + 1;
            let mut args = Vec::new();
            while j < lx.len() && same_line(&lx[j]) && !is_open(&lx[j]) && !is_close(&lx[j]) {
                args.push(Token {
                    text: lx[j].text.clone(),
                    loc: loc_of(&lx[j]),
                });
                j += 1;
            }
            let (block, has_block, next) = if j < lx.len() && same_line(&lx[j]) && is_open(&lx[j]) {
                let close = matching_close(lx, j)?;
                (
                    self.directives(&lx[j + 1..close], file, depth + 1)?,
                    true,
                    close + 1,
                )
            } else {
                (Vec::new(), false, j)
            };
            if !name.quoted && name.text == "import" {
                let [arg] = args.as_slice() else {
                    return Err(CorefileError::Syntax {
                        loc: loc_of(name),
                        message: "import takes exactly one file, glob or snippet name".into(),
                    });
                };
                let arg_lx = Lexeme {
                    text: arg.text.clone(),
                    loc: arg.loc.clone(),
                    quoted: false,
                };
                if let Some(snippet) = self.snippet(&arg.text) {
                    out.extend(self.directives(&snippet, file, depth + 1)?);
                } else {
                    for path in self.import_paths(&arg_lx, file)? {
                        let text = self.read_import(&path, &arg_lx)?;
                        self.stack.push(path.clone());
                        let r = lex(&text, &path).and_then(|l| self.directives(&l, &path, depth + 1));
                        self.stack.pop();
                        out.extend(r?);
                    }
                }
            } else {
                out.push(Directive {
                    name: Token {
                        text: name.text.clone(),
                        loc: loc_of(name),
                    },
                    args,
                    block,
                    has_block,
                });
            }
            i = next;
        }
        Ok(out)
    }
}

/// The last index of the logical line that starts at `i` (exclusive end).
fn line_end(lx: &[Lexeme], i: usize) -> usize {
    let line = lx[i].loc.line;
    let mut j = i + 1;
    while j < lx.len() && lx[j].loc.line == line && lx[j].loc.file == lx[i].loc.file {
        j += 1;
    }
    j
}

/// The index of the `}` matching the `{` at `open`.
fn matching_close(lx: &[Lexeme], open: usize) -> Result<usize, CorefileError> {
    let mut depth = 0usize;
    for (k, l) in lx.iter().enumerate().skip(open) {
        if is_open(l) {
            depth += 1;
        } else if is_close(l) {
            depth -= 1;
            if depth == 0 {
                return Ok(k);
            }
        }
    }
    let o = &lx[open];
    let end_line = lx.last().map(|l| l.loc.line).unwrap_or(o.loc.line);
    Err(CorefileError::Syntax {
        loc: Location {
            file: o.loc.file.clone(),
            line: end_line,
        },
        message: format!("expected '}}' to close the block opened at line {}", o.loc.line),
    })
}

fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], n: &[u8]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// A server block key, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneKey {
    /// The scheme (`dns`).
    pub scheme: String,
    /// The zone, lower-case and absolute (`.` for the root).
    pub zone: String,
    /// The port, if the key names one.
    pub port: Option<u16>,
}

/// Parses a server block key: `[dns://]ZONE[:PORT]` or a CIDR (`10.0.0.0/8`, `fd00::/8`) that
/// stands for its reverse zone.
pub fn parse_zone_key(t: &Token) -> Result<ZoneKey, CorefileError> {
    let mut s = t.text.as_str();
    let mut scheme = "dns".to_owned();
    if let Some((sch, rest)) = s.split_once("://") {
        let sch = sch.to_ascii_lowercase();
        if sch != "dns" {
            return Err(t.error(format!(
                "'{sch}://' servers are not supported by cluster-dns (only dns://)"
            )));
        }
        scheme = sch;
        s = rest;
    }
    // CIDR keys contain '/', and IPv6 ones contain ':'; a port follows the prefix length.
    if let Some((addr, rest)) = s.split_once('/') {
        let (prefix, port) = match rest.split_once(':') {
            Some((p, port)) => (p, Some(parse_port(t, port)?)),
            None => (rest, None),
        };
        let zone =
            reverse_zone(addr, prefix).ok_or_else(|| t.error(format!("'{}' is not a valid CIDR", t.text)))?;
        return Ok(ZoneKey { scheme, zone, port });
    }
    let (zone, port) = match s.rsplit_once(':') {
        Some((z, p)) => (z, Some(parse_port(t, p)?)),
        None => (s, None),
    };
    let zone = if zone.is_empty() { "." } else { zone };
    let zone = normalize_zone(zone).map_err(|e| t.error(e))?;
    Ok(ZoneKey { scheme, zone, port })
}

fn parse_port(t: &Token, p: &str) -> Result<u16, CorefileError> {
    p.parse::<u16>()
        .map_err(|_| t.error(format!("'{p}' is not a valid port (0-65535) in key '{}'", t.text)))
}

fn reverse_zone(addr: &str, prefix: &str) -> Option<String> {
    let bits: u32 = prefix.parse().ok()?;
    match addr.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(v4) => {
            if bits > 32 {
                return None;
            }
            let octets = (bits / 8) as usize;
            let o = v4.octets();
            let mut labels: Vec<String> = o[..octets].iter().rev().map(u8::to_string).collect();
            labels.push("in-addr.arpa.".into());
            Some(labels.join("."))
        }
        std::net::IpAddr::V6(v6) => {
            if bits > 128 {
                return None;
            }
            let nibbles = (bits / 4) as usize;
            let hex: Vec<char> = v6
                .octets()
                .iter()
                .flat_map(|b| [b >> 4, b & 0xf])
                .map(|n| char::from_digit(u32::from(n), 16).unwrap_or('0'))
                .collect();
            let mut labels: Vec<String> = hex[..nibbles].iter().rev().map(char::to_string).collect();
            labels.push("ip6.arpa.".into());
            Some(labels.join("."))
        }
    }
}

/// Lower-cases a zone, makes it absolute, and checks its labels (at most 63 bytes each, 255 in
/// all, none empty).
pub fn normalize_zone(s: &str) -> Result<String, String> {
    let lower = s.trim().to_ascii_lowercase();
    if lower == "." {
        return Ok(lower);
    }
    let body = lower.strip_suffix('.').unwrap_or(&lower);
    if body.is_empty() {
        return Err(format!("'{s}' is not a valid zone"));
    }
    if body.len() + 1 > 255 {
        return Err(format!("zone '{s}' is longer than 255 characters"));
    }
    for label in body.split('.') {
        if label.is_empty() {
            return Err(format!("zone '{s}' has an empty label"));
        }
        if label.len() > 63 {
            return Err(format!("zone '{s}' has a label longer than 63 characters"));
        }
        if label
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b == b'{' || b == b'}' || b == b'/' || b == b':')
        {
            return Err(format!("'{s}' is not a valid zone"));
        }
    }
    Ok(format!("{body}."))
}

/// Parses a Go-style duration: `5s`, `500ms`, `1m30s`, `2h`, `1.5s`, `100us`, `0`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
    }
    if !total.is_finite() || !(0.0..=1e12).contains(&total) {
        return None;
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests;
