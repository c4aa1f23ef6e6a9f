//! The Corefile tokenizer: splits text into lexemes with their line, handling comments, quotes,
//! escapes and environment variables. Newlines matter to the parser (they end directives), so
//! every lexeme keeps its line.

use std::path::Path;
use std::sync::Arc;

use super::{CorefileError, Location};

/// A token before the parser gives it meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Lexeme {
    pub(super) text: String,
    pub(super) loc: Location,
    /// Quoted tokens never count as `{` or `}`.
    pub(super) quoted: bool,
}

/// Splits `text` (from `file`) into lexemes.
pub(super) fn lex(text: &str, file: &Path) -> Result<Vec<Lexeme>, CorefileError> {
    let file = Arc::new(file.to_owned());
    let mut out = Vec::new();
    let mut line: u32 = 1;
    let mut chars = text.chars().peekable();
    let mut cur = String::new();
    let mut cur_line = 1;
    let mut cur_quoted = false;
    let mut in_token = false;

    let flush = |out: &mut Vec<Lexeme>, cur: &mut String, line: u32, quoted: bool, in_token: &mut bool| {
        if *in_token {
            out.push(Lexeme {
                text: expand_env(cur),
                loc: Location {
                    file: file.clone(),
                    line,
                },
                quoted,
            });
            cur.clear();
            *in_token = false;
        }
    };

    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                flush(&mut out, &mut cur, cur_line, cur_quoted, &mut in_token);
                line += 1;
            }
            c if c.is_whitespace() => flush(&mut out, &mut cur, cur_line, cur_quoted, &mut in_token),
            '#' if !in_token => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '"' | '`' if !in_token => {
                let quote = c;
                let start = line;
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' if quote == '"' => match chars.next() {
                            Some(e @ ('"' | '\\')) => cur.push(e),
                            Some('\n') => line += 1,
                            Some(other) => {
                                cur.push('\\');
                                cur.push(other);
                            }
                            None => break,
                        },
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        '\n' => {
                            line += 1;
                            cur.push('\n');
                        }
                        c => cur.push(c),
                    }
                }
                if !closed {
                    return Err(CorefileError::Syntax {
                        loc: Location {
                            file: file.clone(),
                            line: start,
                        },
                        message: format!("unterminated quoted string (opened with {quote} on this line)"),
                    });
                }
                in_token = true;
                cur_quoted = true;
                cur_line = start;
                flush(&mut out, &mut cur, cur_line, cur_quoted, &mut in_token);
            }
            c => {
                if !in_token {
                    in_token = true;
                    cur_quoted = false;
                    cur_line = line;
                }
                cur.push(c);
            }
        }
    }
    flush(&mut out, &mut cur, cur_line, cur_quoted, &mut in_token);
    Ok(out)
}

/// Replaces `{$NAME}` and `{%NAME%}` with the environment variable's value (empty when unset).
fn expand_env(s: &str) -> String {
    if !s.contains("{$") && !s.contains("{%") {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut rest = s;
    loop {
        let next = [
            rest.find("{$").map(|i| (i, "}")),
            rest.find("{%").map(|i| (i, "%}")),
        ]
        .into_iter()
        .flatten()
        .min_by_key(|(i, _)| *i);
        let Some((start, close)) = next else {
            out.push_str(rest);
            return out;
        };
        let after = &rest[start + 2..];
        match after.find(close) {
            Some(end)
                if end > 0
                    && after[..end]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                out.push_str(&rest[..start]);
                out.push_str(&std::env::var(&after[..end]).unwrap_or_default());
                rest = &after[end + close.len()..];
            }
            _ => {
                out.push_str(&rest[..start + 2]);
                rest = after;
            }
        }
    }
}
