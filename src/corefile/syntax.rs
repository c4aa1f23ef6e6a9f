//! The Corefile's syntax tree and its errors: [`Token`]s with their [`Location`],
//! [`Directive`]s with arguments and nested blocks, [`ServerBlock`]s, the [`CorefileError`]
//! every mistake is reported as (file:line: what was expected), and [`Args`], the cursor every
//! plugin setup reads a directive's arguments with.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Where something stands in a Corefile: the file and the line (from 1).
///
/// Line 0 stands for the file as a whole (used when the file cannot be read); it displays as
/// the path alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The file, as it was named (the Corefile's path, or an imported file's path joined to the
    /// importing file's directory).
    pub file: Arc<PathBuf>,
    /// The line, from 1; 0 for the whole file.
    pub line: u32,
}

impl Location {
    /// A location in `file` at `line`.
    pub fn new(file: &Arc<PathBuf>, line: u32) -> Self {
        Self {
            file: Arc::clone(file),
            line,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.file.display())
        } else {
            write!(f, "{}:{}", self.file.display(), self.line)
        }
    }
}

/// One token: its text (quotes removed, escapes and environment variables applied) and where it
/// starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The text.
    pub text: String,
    /// Where the token starts.
    pub loc: Location,
}

impl Token {
    /// An error at this token: displays as `file:line: msg`.
    pub fn error(&self, msg: impl Into<String>) -> CorefileError {
        CorefileError::Invalid {
            loc: self.loc.clone(),
            message: msg.into(),
        }
    }

    /// A token of `text` at line `line` of a file named `Corefile`, for unit tests of value
    /// parsers.
    #[cfg(test)]
    pub fn at_line(text: &str, line: u32) -> Self {
        let file = Arc::new(PathBuf::from("Corefile"));
        Self {
            text: text.to_owned(),
            loc: Location::new(&file, line),
        }
    }
}

/// A directive: `name args... [{ sub-directives }]`. Sub-directives have the same shape, to any
/// depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The directive's name (its first token).
    pub name: Token,
    /// The arguments: the tokens after the name on the same line, before any `{`.
    pub args: Vec<Token>,
    /// The sub-directives of its block, imports spliced in.
    pub block: Vec<Directive>,
    /// True when braces were written, even empty ones (`health {}`).
    pub has_block: bool,
}

impl Directive {
    /// No braces after it, or `NAME: takes no block` at its line.
    pub fn expect_no_block(&self) -> Result<(), CorefileError> {
        match self.has_block {
            true => Err(self.error("takes no block")),
            false => Ok(()),
        }
    }

    /// An error at this directive's line: displays as `file:line: name: msg`.
    pub fn error(&self, msg: impl Into<String>) -> CorefileError {
        CorefileError::Directive {
            loc: self.name.loc.clone(),
            directive: self.name.text.clone(),
            message: msg.into(),
        }
    }

    /// An error about this directive reported at `at` (an argument, or a sub-directive's name):
    /// displays as `file:line-of-at: name: msg`, e.g.
    /// `Corefile:5: kubernetes: unknown property 'foo'`.
    pub fn error_at(&self, at: &Token, msg: impl Into<String>) -> CorefileError {
        CorefileError::Directive {
            loc: at.loc.clone(),
            directive: self.name.text.clone(),
            message: msg.into(),
        }
    }

    /// A cursor over the arguments.
    pub fn args(&self) -> Args<'_> {
        Args::new(self)
    }

    /// The one argument of `opt`, an option line in this directive's block, or
    /// `NAME: OPT takes exactly one argument` at the option.
    pub fn option_arg<'a>(&self, opt: &'a Directive) -> Result<&'a Token, CorefileError> {
        match opt.args.as_slice() {
            [a] => Ok(a),
            _ => Err(self.error_at(&opt.name, format!("{} takes exactly one argument", opt.name.text))),
        }
    }

    /// Nothing after `opt`, an option line in this directive's block, or
    /// `NAME: OPT takes no argument` at its first argument.
    pub fn option_no_args(&self, opt: &Directive) -> Result<(), CorefileError> {
        match opt.args.first() {
            Some(a) => Err(self.error_at(a, format!("{} takes no argument", opt.name.text))),
            None => Ok(()),
        }
    }
}

/// A server block: its keys (`.:53`, `cluster.local:53`) and its directives, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerBlock {
    /// The keys as written (commas removed); see [`parse_zone_key`](crate::corefile::parse_zone_key).
    pub keys: Vec<Token>,
    /// The directives, snippets and imports spliced in.
    pub directives: Vec<Directive>,
}

/// A Corefile that cannot be used. Every variant carries the file and line, and displays as
/// `file:line: what is wrong / what was expected`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorefileError {
    /// The Corefile itself could not be read.
    #[error("{loc}: cannot read the Corefile: {message}")]
    Read {
        /// The file (line 0).
        loc: Location,
        /// The operating system's reason.
        message: String,
    },
    /// A `"` or `` ` `` was opened and never closed.
    #[error("{loc}: unterminated quoted token: the {quote} opened on this line is never closed")]
    UnterminatedQuote {
        /// Where the quote opens.
        loc: Location,
        /// The quote character.
        quote: char,
    },
    /// The file ended inside a block.
    #[error("{loc}: expected '}}' to close the block opened at line {opened}")]
    UnclosedBlock {
        /// Where the file ended (its last token).
        loc: Location,
        /// The line of the unclosed `{`.
        opened: u32,
    },
    /// A `}` with no block open.
    #[error("{loc}: unexpected '}}': no block is open here")]
    UnexpectedClose {
        /// Where the `}` stands.
        loc: Location,
    },
    /// A server block's `{` with no keys before it.
    #[error(
        "{loc}: '{{' without server block keys before it: write the zone(s) to serve first, e.g. '.:53 {{'"
    )]
    MissingKeys {
        /// Where the `{` stands.
        loc: Location,
    },
    /// `import NAME` where NAME is neither a snippet defined above nor a file.
    #[error(
        "{loc}: import: no snippet named '{name}' is defined before this line, and there is no file {}",
        path.display()
    )]
    UnknownSnippet {
        /// The `import` line.
        loc: Location,
        /// The name.
        name: String,
        /// The file that was looked for too.
        path: PathBuf,
    },
    /// `import PATH` of a file that does not exist.
    #[error("{loc}: import: file {} not found", path.display())]
    ImportNotFound {
        /// The `import` line.
        loc: Location,
        /// The file looked for.
        path: PathBuf,
    },
    /// A file or snippet imports itself, directly or through others.
    #[error("{loc}: import cycle: {what} is already being imported ({chain})")]
    ImportCycle {
        /// The `import` line that closes the cycle.
        loc: Location,
        /// The file or snippet imported again.
        what: String,
        /// The chain of imports, outermost first.
        chain: String,
    },
    /// Imports nested deeper than [`MAX_IMPORT_DEPTH`](crate::corefile::MAX_IMPORT_DEPTH), or expanding to too much text.
    #[error("{loc}: import: {message}")]
    ImportLimit {
        /// The `import` line.
        loc: Location,
        /// Which limit.
        message: String,
    },
    /// Some other `import` problem (unreadable file, bad pattern, wrong arguments).
    #[error("{loc}: import: {message}")]
    Import {
        /// The `import` line.
        loc: Location,
        /// What is wrong.
        message: String,
    },
    /// A Corefile without any server block.
    #[error("{loc}: no server blocks: a Corefile needs at least one, e.g. '.:53 {{ ... }}'")]
    NoServerBlocks {
        /// The Corefile (line 1).
        loc: Location,
    },
    /// Some other syntax mistake.
    #[error("{loc}: {message}")]
    Syntax {
        /// Where.
        loc: Location,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A directive's arguments or options are wrong (from a plugin's setup).
    #[error("{loc}: {directive}: {message}")]
    Directive {
        /// Where.
        loc: Location,
        /// The directive's name.
        directive: String,
        /// What is wrong.
        message: String,
    },
    /// A token's value is wrong (a key, an argument).
    #[error("{loc}: {message}")]
    Invalid {
        /// Where.
        loc: Location,
        /// What is wrong.
        message: String,
    },
}

impl CorefileError {
    /// Where the error is.
    pub fn location(&self) -> &Location {
        match self {
            Self::Read { loc, .. }
            | Self::UnterminatedQuote { loc, .. }
            | Self::UnclosedBlock { loc, .. }
            | Self::UnexpectedClose { loc }
            | Self::MissingKeys { loc }
            | Self::UnknownSnippet { loc, .. }
            | Self::ImportNotFound { loc, .. }
            | Self::ImportCycle { loc, .. }
            | Self::ImportLimit { loc, .. }
            | Self::Import { loc, .. }
            | Self::NoServerBlocks { loc }
            | Self::Syntax { loc, .. }
            | Self::Directive { loc, .. }
            | Self::Invalid { loc, .. } => loc,
        }
    }
}

/// A cursor over a directive's arguments, for plugin setups. It is an [`Iterator`] of tokens, so
/// `args.next()` takes the next one.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    directive: &'a Directive,
    pos: usize,
}

impl<'a> Args<'a> {
    /// A cursor at the first argument of `d`.
    pub fn new(d: &'a Directive) -> Self {
        Self { directive: d, pos: 0 }
    }

    /// The directive the arguments belong to.
    pub fn directive(&self) -> &'a Directive {
        self.directive
    }

    /// The next argument, without taking it.
    pub fn peek(&self) -> Option<&'a Token> {
        self.directive.args.get(self.pos)
    }

    /// Takes the next argument, or fails with `name: expected WHAT` at the directive's line.
    pub fn expect(&mut self, what: &str) -> Result<&'a Token, CorefileError> {
        self.next()
            .ok_or_else(|| self.directive.error(format!("expected {what}")))
    }

    /// Takes all the remaining arguments.
    pub fn remaining(&mut self) -> &'a [Token] {
        let args: &'a [Token] = &self.directive.args;
        let rest = args.get(self.pos..).unwrap_or_default();
        self.pos = args.len();
        rest
    }

    /// How many arguments are left.
    pub fn len(&self) -> usize {
        self.directive.args.len().saturating_sub(self.pos)
    }

    /// True when no argument is left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Exactly one argument left, described as `what` in the error (for an option's
    /// arguments: the caller puts the option's name and place on it).
    pub fn single(&mut self, what: &str) -> Result<&'a Token, String> {
        match self.remaining() {
            [one] => Ok(one),
            [] => Err(format!("expected {what}")),
            [_, extra, ..] => Err(format!(
                "unexpected argument '{}': expected only {what}",
                extra.text
            )),
        }
    }

    /// No argument left (for an option's arguments, as [`Args::single`]).
    pub fn none(&self) -> Result<(), String> {
        match self.peek() {
            Some(t) => Err(format!("takes no arguments, but has '{}'", t.text)),
            None => Ok(()),
        }
    }

    /// Fails with `unexpected argument 'x' to 'name'` at the first argument left, if any.
    pub fn expect_none(&self) -> Result<(), CorefileError> {
        match self.peek() {
            Some(t) => Err(t.error(format!(
                "unexpected argument '{}' to '{}'",
                t.text, self.directive.name.text
            ))),
            None => Ok(()),
        }
    }
}

impl<'a> Iterator for Args<'a> {
    type Item = &'a Token;

    fn next(&mut self) -> Option<&'a Token> {
        let t = self.directive.args.get(self.pos)?;
        self.pos += 1;
        Some(t)
    }
}
