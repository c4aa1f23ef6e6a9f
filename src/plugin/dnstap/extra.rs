//! `extra` with CoreDNS's metadata placeholders: `{/LABEL}` is replaced, per message, by the
//! value a plugin published for the question (`{/forward/upstream}`,
//! `{/kubernetes/client-namespace}`), or `-` when none did or the block has no `metadata`, as
//! CoreDNS's dnstap fills it through its replacer. Any other text, other `{...}` included, is
//! sent as written.

use std::borrow::Cow;

use crate::proto::QueryMetadata;

/// What CoreDNS writes for a label no plugin set.
const EMPTY: &str = "-";

/// One piece of an `extra` text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Sent as written.
    Text(String),
    /// `{/LABEL}`: the label's value.
    Label(String),
}

/// An `extra` text, split at its metadata placeholders.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extra {
    parts: Vec<Part>,
}

impl Extra {
    /// Splits `text` at its `{/LABEL}` placeholders (a `{/` without its `}` is text).
    pub fn parse(text: &str) -> Self {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("{/") {
            let after = &rest[at + 2..];
            let Some(end) = after.find('}') else {
                break;
            };
            literal.push_str(&rest[..at]);
            if !literal.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut literal)));
            }
            parts.push(Part::Label(after[..end].to_owned()));
            rest = &after[end + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Self { parts }
    }

    /// True when it has a metadata placeholder.
    pub fn has_labels(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Label(_)))
    }

    /// True when its text holds a `{...}` other than a metadata placeholder (CoreDNS's
    /// `{type}`, `{name}` and the like), which is sent as written.
    pub fn has_other_placeholders(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Text(t) => t.find('{').is_some_and(|at| t[at..].contains('}')),
            Part::Label(_) => false,
        })
    }

    /// The text sent for a question whose metadata is `md`.
    pub fn render(&self, md: Option<&QueryMetadata>) -> Cow<'_, [u8]> {
        match self.parts.as_slice() {
            [] => Cow::Borrowed(&[]),
            [Part::Text(t)] => Cow::Borrowed(t.as_bytes()),
            parts => {
                let mut out = String::new();
                for p in parts {
                    match p {
                        Part::Text(t) => out.push_str(t),
                        Part::Label(l) => match md.and_then(|md| md.get(l)) {
                            Some(v) => out.push_str(&v),
                            None => out.push_str(EMPTY),
                        },
                    }
                }
                Cow::Owned(out.into_bytes())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_filled_and_the_rest_kept() {
        let e = Extra::parse("upstream: {/forward/upstream} ns={/kubernetes/client-namespace} {type} {/x");
        assert!(e.has_labels());
        let md = QueryMetadata::default();
        md.set("forward/upstream", "192.0.2.1:53");
        assert_eq!(
            e.render(Some(&md)).as_ref(),
            b"upstream: 192.0.2.1:53 ns=- {type} {/x"
        );
        assert_eq!(e.render(None).as_ref(), b"upstream: - ns=- {type} {/x");
    }

    #[test]
    fn a_fixed_text_is_sent_as_written() {
        for text in ["hi", "", "{type}", "a}{/"] {
            let e = Extra::parse(text);
            assert!(!e.has_labels());
            assert_eq!(e.render(None).as_ref(), text.as_bytes());
        }
        assert_eq!(Extra::parse("{/a}{/b}").render(None).as_ref(), b"--");
    }
}
