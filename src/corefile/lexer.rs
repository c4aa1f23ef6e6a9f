//! The Corefile tokenizer: splits text into lexemes, each with its line and whether a line break
//! comes before it (newlines end directives, so the parser needs to know).
//!
//! Rules (Caddy v1's, plus backticks): tokens are separated by whitespace; `#` at the start of a
//! token comments out the rest of the line; a `"` at the start of a token opens a quoted token
//! that may hold spaces and newlines, with `\"` and `\\` as escapes; a `` ` `` opens a raw
//! token; an unquoted `{` or `}` is structure (a quoted one never is); `{$NAME}` and `{%NAME%}`
//! are replaced by the environment variable anywhere inside a token.

use std::iter::Peekable;
use std::path::PathBuf;
use std::str::Chars;
use std::sync::Arc;

use super::syntax::{CorefileError, Location};

/// What a lexeme is to the parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Any text (quoted or not).
    Word,
    /// An unquoted `{`.
    Open,
    /// An unquoted `}`.
    Close,
}

/// A token before the parser gives it meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Lexeme {
    /// The text: quotes removed, escapes and environment variables applied.
    pub(super) text: String,
    /// Where it starts.
    pub(super) loc: Location,
    /// Word, `{` or `}`.
    pub(super) kind: Kind,
    /// Written in quotes.
    pub(super) quoted: bool,
    /// The first lexeme of its line: a line break separates it from the previous lexeme (or it
    /// is the first of the file).
    pub(super) line_start: bool,
}

/// Splits `text` (the contents of `file`) into lexemes.
pub(super) fn lex(text: &str, file: &Arc<PathBuf>) -> Result<Vec<Lexeme>, CorefileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line: u32 = 1;
    let mut line_start = true;
    while let Some(&c) = chars.peek() {
        if c == '\n' {
            chars.next();
            line = line.saturating_add(1);
            line_start = true;
            continue;
        }
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if c == '#' {
            while chars.next_if(|&c| c != '\n').is_some() {}
            continue;
        }
        let start = line;
        let loc = Location::new(file, start);
        if c == '"' || c == '`' {
            chars.next();
            let text = quoted(&mut chars, c, &mut line).ok_or(CorefileError::UnterminatedQuote {
                loc: loc.clone(),
                quote: c,
            })?;
            out.push(Lexeme {
                text: expand_env(&text),
                loc,
                kind: Kind::Word,
                quoted: true,
                line_start,
            });
        } else {
            let mut word = String::new();
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.push(c);
            }
            match word.as_str() {
                "{" => out.push(Lexeme {
                    text: word,
                    loc,
                    kind: Kind::Open,
                    quoted: false,
                    line_start,
                }),
                "}" => out.push(Lexeme {
                    text: word,
                    loc,
                    kind: Kind::Close,
                    quoted: false,
                    line_start,
                }),
                // `{}` is an empty block, as people write it (`health {}`).
                "{}" => {
                    out.push(Lexeme {
                        text: "{".into(),
                        loc: loc.clone(),
                        kind: Kind::Open,
                        quoted: false,
                        line_start,
                    });
                    out.push(Lexeme {
                        text: "}".into(),
                        loc,
                        kind: Kind::Close,
                        quoted: false,
                        line_start: false,
                    });
                }
                _ => out.push(Lexeme {
                    text: expand_env(&word),
                    loc,
                    kind: Kind::Word,
                    quoted: false,
                    line_start,
                }),
            }
        }
        line_start = false;
    }
    Ok(out)
}

/// Reads a quoted token after its opening `quote`, counting the newlines in it; `None` if the
/// text ends first.
fn quoted(chars: &mut Peekable<Chars<'_>>, quote: char, line: &mut u32) -> Option<String> {
    let mut s = String::new();
    loop {
        let c = chars.next()?;
        if c == quote {
            return Some(s);
        }
        if c == '\n' {
            *line = line.saturating_add(1);
        }
        if c == '\\'
            && quote == '"'
            && let Some(e) = chars.next_if(|&e| e == '"' || e == '\\')
        {
            s.push(e);
            continue;
        }
        s.push(c);
    }
}

/// Replaces `{$NAME}` and `{%NAME%}` with the value of the environment variable NAME (empty when
/// it is unset or not valid UTF-8). Anything else, including a reference that is never closed,
/// stays as written. Values are not expanded again.
pub(super) fn expand_env(s: &str) -> String {
    if !s.contains("{$") && !s.contains("{%") {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let at = &rest[i..];
        match reference(at, "{$", "}").or_else(|| reference(at, "{%", "%}")) {
            Some((name, len)) => {
                out.push_str(&env_value(name));
                rest = &at[len..];
            }
            None => {
                out.push('{');
                rest = &at[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// If `s` starts with a reference `open NAME close`, its name and length.
fn reference<'s>(s: &'s str, open: &str, close: &str) -> Option<(&'s str, usize)> {
    let body = s.strip_prefix(open)?;
    let end = body.find(close)?;
    let name = &body[..end];
    let plausible = !name.is_empty() && !name.contains(|c: char| c.is_whitespace() || "{}$%=\0".contains(c));
    plausible.then_some((name, open.len() + end + close.len()))
}

fn env_value(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lx(text: &str) -> Vec<Lexeme> {
        lex(text, &Arc::new(PathBuf::from("Corefile"))).unwrap()
    }

    fn texts(text: &str) -> Vec<String> {
        lx(text).into_iter().map(|l| l.text).collect()
    }

    #[test]
    fn words_lines_and_structure() {
        let l = lx(".:53 {\n  errors\n\n  cache 30\n}");
        let got: Vec<(&str, u32, Kind, bool)> = l
            .iter()
            .map(|l| (l.text.as_str(), l.loc.line, l.kind, l.line_start))
            .collect();
        assert_eq!(
            got,
            [
                (".:53", 1, Kind::Word, true),
                ("{", 1, Kind::Open, false),
                ("errors", 2, Kind::Word, true),
                ("cache", 4, Kind::Word, true),
                ("30", 4, Kind::Word, false),
                ("}", 5, Kind::Close, true),
            ]
        );
        // Braces glued to words are words; `{}` is an empty block.
        let l = lx("a{ }b {}");
        let kinds: Vec<Kind> = l.iter().map(|l| l.kind).collect();
        assert_eq!(kinds, [Kind::Word, Kind::Word, Kind::Open, Kind::Close]);
        assert!(lx("\r\n.\t{\r\n}\r\n").iter().map(|l| l.loc.line).eq([2, 2, 3]));
        assert_eq!(texts("\u{feff}.:53"), [".:53"]);
    }

    #[test]
    fn comments() {
        assert_eq!(
            texts("# all\na # rest { }\nb#not-a-comment \"#\""),
            ["a", "b#not-a-comment", "#"]
        );
        let l = lx("# one\n# two\nx");
        assert_eq!(l[0].loc.line, 3);
        assert!(l[0].line_start);
    }

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(
            texts(r#""a b" "q\"x" "back\\slash" "keep\n" `raw \" \\`"#),
            ["a b", "q\"x", "back\\slash", "keep\\n", "raw \\\" \\\\"]
        );
        // A quoted brace is a word; quotes open only at the start of a token.
        let l = lx("\"{\" `}` a\"b");
        assert!(l.iter().all(|l| l.kind == Kind::Word));
        assert_eq!(l[2].text, "a\"b");
        // A quoted token may span lines; its line is where it starts, and the next token on the
        // closing line continues the same line.
        let l = lx("x \"one\ntwo\" y\nz");
        assert_eq!(l[1].text, "one\ntwo");
        assert_eq!((l[2].loc.line, l[2].line_start), (2, false));
        assert_eq!((l[3].loc.line, l[3].line_start), (3, true));
        // The token ends at the closing quote.
        assert_eq!(texts("\"a\"b"), ["a", "b"]);
        assert_eq!(texts("\"\""), [""]);
    }

    #[test]
    fn unterminated_quotes() {
        let file = Arc::new(PathBuf::from("Corefile"));
        let e = lex("a\nb \"open\nmore\n", &file).unwrap_err();
        assert_eq!(
            e,
            CorefileError::UnterminatedQuote {
                loc: Location::new(&file, 2),
                quote: '"'
            }
        );
        assert!(
            e.to_string().starts_with("Corefile:2: unterminated quoted token"),
            "{e}"
        );
        let e = lex("`raw", &file).unwrap_err().to_string();
        assert!(e.contains("Corefile:1") && e.contains('`'), "{e}");
        assert!(lex("\"ends with backslash\\\"", &file).is_err());
    }

    #[test]
    fn environment_variables() {
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(expand_env("{$PATH}"), path);
        assert_eq!(expand_env("a{%PATH%}b"), format!("a{path}b"));
        assert_eq!(expand_env("x{$CLUSTER_DNS_SURELY_UNSET_VARIABLE}y"), "xy");
        for literal in [
            "{$}",
            "{$PATH",
            "{%PATH}",
            "{1}",
            "{$ A}",
            "{{ .Name }}",
            "{$a=b}",
        ] {
            assert_eq!(expand_env(literal), literal);
        }
        assert_eq!(expand_env("{$CLUSTER_DNS_UNSET}{$CLUSTER_DNS_UNSET}"), "");
        // Inside quoted tokens too; an expanded `{` is never structure.
        let l = lx("\"{$PATH} x\"");
        assert_eq!(l[0].text, format!("{path} x"));
    }
}
