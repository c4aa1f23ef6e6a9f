//! The Corefile parser: builds server blocks and directives from lexemes, defines snippets and
//! resolves `import` (of snippets, files and globs), with cycle detection and limits.
//!
//! Structure is read as Caddy v1 reads it: a server block is keys (separated by spaces and/or
//! commas; a trailing comma continues them on the next line) then `{`, directives, `}`; a file
//! whose first server block has no `{` holds that one block, to its end. A directive is a name
//! and the arguments on its line; an unquoted `{` on that line opens its block, whose
//! sub-directives are separated by newlines, and a `}` closes it wherever it stands, so
//! `kubernetes cluster.local { pods insecure }` is one line. `(name) { ... }` at the top level
//! defines a snippet; `import NAME_OR_PATH` splices a snippet or files where it stands: server
//! blocks at the top level, directives inside a block.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::lexer::{Kind, Lexeme, lex};
use super::syntax::{CorefileError, Directive, Location, ServerBlock, Token};

/// How deep imports may nest (a file or snippet importing one that imports one...).
pub const MAX_IMPORT_DEPTH: usize = 10;

/// How deep blocks may nest inside one another.
const MAX_BLOCK_DEPTH: usize = 64;

/// How many lexemes imports may splice in all (guards against snippets that import each
/// other many times over).
const MAX_IMPORTED_LEXEMES: usize = 1_000_000;

/// Parses a whole Corefile: `text`, read from `file`.
pub(super) fn parse_root(text: &str, file: &Path) -> Result<Vec<ServerBlock>, CorefileError> {
    let name = Arc::new(file.to_path_buf());
    let lexemes = lex(text, &name)?;
    let mut parser = Parser {
        snippets: HashMap::new(),
        chain: vec![Source::File {
            shown: file.to_path_buf(),
            key: file_key(file),
        }],
        budget: MAX_IMPORTED_LEXEMES,
    };
    let blocks = parser.top(&lexemes)?;
    if blocks.is_empty() {
        return Err(CorefileError::NoServerBlocks {
            loc: Location::new(&name, 1),
        });
    }
    Ok(blocks)
}

/// A defined snippet: its body's lexemes (without the braces) and where it was defined.
#[derive(Debug)]
struct Snippet {
    lexemes: Arc<Vec<Lexeme>>,
    loc: Location,
}

/// Something being read, for cycle detection.
#[derive(Debug, PartialEq, Eq)]
enum Source {
    File {
        /// The path as shown in messages.
        shown: PathBuf,
        /// The canonical path, for comparison.
        key: PathBuf,
    },
    Snippet(String),
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Self::File { shown, .. } => shown.display().to_string(),
            Self::Snippet(name) => format!("snippet '{name}'"),
        }
    }
}

/// Where an import's contents go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    /// The top level: the contents are server blocks (and snippets).
    Top,
    /// Inside a block `depth` deep: the contents are directives.
    Block(usize),
}

/// What an import produced.
enum Spliced {
    Blocks(Vec<ServerBlock>),
    Directives(Vec<Directive>),
}

struct Parser {
    snippets: HashMap<String, Snippet>,
    /// What is being read, outermost first: the Corefile, then each import.
    chain: Vec<Source>,
    /// Lexemes imports may still splice in.
    budget: usize,
}

/// A cursor over one file's (or one snippet's) lexemes.
struct Cursor<'a> {
    lexemes: &'a [Lexeme],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(lexemes: &'a [Lexeme]) -> Self {
        Self { lexemes, pos: 0 }
    }

    fn peek(&self) -> Option<&'a Lexeme> {
        self.lexemes.get(self.pos)
    }

    fn bump(&mut self) -> Option<&'a Lexeme> {
        let l = self.lexemes.get(self.pos)?;
        self.pos += 1;
        Some(l)
    }

    /// The next lexeme if it continues the current line.
    fn peek_same_line(&self) -> Option<&'a Lexeme> {
        self.peek().filter(|l| !l.line_start)
    }

    /// Where the text ends: its last lexeme, else `fallback`.
    fn end_loc(&self, fallback: &Location) -> Location {
        self.lexemes
            .last()
            .map_or_else(|| fallback.clone(), |l| l.loc.clone())
    }
}

fn token(l: &Lexeme) -> Token {
    Token {
        text: l.text.clone(),
        loc: l.loc.clone(),
    }
}

fn syntax(loc: &Location, message: impl Into<String>) -> CorefileError {
    CorefileError::Syntax {
        loc: loc.clone(),
        message: message.into(),
    }
}

/// A word glued to the `{` that was meant to open a block (`health{`), at the end of a line.
fn glued_open(l: &Lexeme, next: Option<&Lexeme>) -> bool {
    !l.quoted && l.text.len() > 1 && l.text.ends_with('{') && next.is_none_or(|n| n.line_start)
}

/// Several `}` written as one word (`}}`).
fn glued_closes(l: &Lexeme) -> bool {
    !l.quoted && l.text.len() > 1 && l.text.bytes().all(|b| b == b'}')
}

/// `(name)`: a snippet definition's key.
fn snippet_name(l: &Lexeme) -> Option<&str> {
    if l.quoted {
        return None;
    }
    l.text.strip_prefix('(')?.strip_suffix(')')
}

/// The name a directive of a brace-less block must not have: what looks like a server block's
/// key or a snippet, meaning the file holds more than one server block.
fn looks_like_block_start(d: &Directive) -> bool {
    let n = &d.name.text;
    d.has_block && (n.contains(['.', ':', '/']) || n.starts_with('('))
}

impl Parser {
    /// The top level of a file or snippet: server blocks, snippet definitions and imports.
    fn top(&mut self, lexemes: &[Lexeme]) -> Result<Vec<ServerBlock>, CorefileError> {
        let mut c = Cursor::new(lexemes);
        let mut blocks = Vec::new();
        while let Some(l) = c.peek() {
            match l.kind {
                Kind::Close => return Err(CorefileError::UnexpectedClose { loc: l.loc.clone() }),
                Kind::Open => return Err(CorefileError::MissingKeys { loc: l.loc.clone() }),
                Kind::Word if !l.quoted && l.text == "import" && (l.line_start || c.pos == 0) => {
                    c.bump();
                    let args = import_args(&mut c);
                    if let Some(n) = c.peek_same_line() {
                        return Err(match n.kind {
                            Kind::Close => CorefileError::UnexpectedClose { loc: n.loc.clone() },
                            _ => syntax(&n.loc, "import takes no block"),
                        });
                    }
                    if let Spliced::Blocks(b) = self.import(l, &args, Context::Top)? {
                        blocks.extend(b);
                    }
                }
                Kind::Word => {
                    let first_of_file = blocks.is_empty();
                    self.server_block(&mut c, first_of_file, &mut blocks)?;
                }
            }
        }
        Ok(blocks)
    }

    /// One server block (or snippet definition), from its first key.
    fn server_block(
        &mut self,
        c: &mut Cursor<'_>,
        first_of_file: bool,
        blocks: &mut Vec<ServerBlock>,
    ) -> Result<(), CorefileError> {
        let mut key_lexemes: Vec<&Lexeme> = Vec::new();
        let mut keys = Vec::new();
        let mut expecting_another = false;
        while let Some(l) = c.peek() {
            match l.kind {
                Kind::Open => {
                    if expecting_another {
                        return Err(syntax(
                            &l.loc,
                            "expected another server block key after ',' but found '{': remove the trailing comma",
                        ));
                    }
                    break;
                }
                Kind::Close => {
                    return Err(syntax(
                        &l.loc,
                        "unexpected '}' after the server block keys: expected '{' to open the block",
                    ));
                }
                Kind::Word => {
                    if l.line_start && !key_lexemes.is_empty() && !expecting_another {
                        break;
                    }
                    c.bump();
                    if glued_open(l, c.peek()) {
                        return Err(syntax(
                            &l.loc,
                            format!(
                                "missing space before '{{' in '{}': write '{} {{'",
                                l.text,
                                &l.text[..l.text.len() - 1]
                            ),
                        ));
                    }
                    expecting_another = l.text.ends_with(',');
                    for part in l.text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                        keys.push(Token {
                            text: part.to_owned(),
                            loc: l.loc.clone(),
                        });
                    }
                    key_lexemes.push(l);
                }
            }
        }
        let Some(&first) = key_lexemes.first() else {
            // Unreachable: called at a word.
            return Ok(());
        };
        if expecting_another && c.peek().is_none() {
            return Err(syntax(
                &first.loc,
                "expected another server block key after ',', but the file ends",
            ));
        }

        if let Some(name) = key_lexemes.iter().find_map(|l| snippet_name(l)) {
            return self.snippet_definition(c, name, &key_lexemes);
        }

        match c.peek() {
            Some(open) if open.kind == Kind::Open => {
                c.bump();
                if keys.is_empty() {
                    return Err(CorefileError::MissingKeys {
                        loc: open.loc.clone(),
                    });
                }
                let directives = self.block(c, Some(open), 1)?;
                blocks.push(ServerBlock { keys, directives });
            }
            _ => {
                if !first_of_file {
                    return Err(syntax(
                        &first.loc,
                        format!(
                            "expected '{{' after the server block keys '{}', on the same line (only a Corefile of a single server block may leave out the braces)",
                            key_lexemes
                                .iter()
                                .map(|l| l.text.as_str())
                                .collect::<Vec<_>>()
                                .join(" ")
                        ),
                    ));
                }
                if keys.is_empty() {
                    return Err(syntax(&first.loc, "empty server block key"));
                }
                // A file of a single server block may leave out the braces: keys on the first
                // line, directives to the end of the file.
                let directives = self.block(c, None, 1).map_err(|e| match e {
                    CorefileError::UnexpectedClose { loc } if loc.file == first.loc.file => syntax(
                        &loc,
                        format!(
                            "unexpected '}}': no block is open here (the server block keys at line {} are not followed by '{{')",
                            first.loc.line
                        ),
                    ),
                    e => e,
                })?;
                if let Some(d) = directives.iter().find(|d| looks_like_block_start(d)) {
                    return Err(syntax(
                        &first.loc,
                        format!(
                            "expected '{{' after the server block keys: '{}' at line {} looks like another server block, and a Corefile of several server blocks must wrap each in braces",
                            d.name.text, d.name.loc.line
                        ),
                    ));
                }
                blocks.push(ServerBlock { keys, directives });
            }
        }
        Ok(())
    }

    /// `(name) { ... }`: stores the body's lexemes.
    fn snippet_definition(
        &mut self,
        c: &mut Cursor<'_>,
        name: &str,
        keys: &[&Lexeme],
    ) -> Result<(), CorefileError> {
        let Some(&first) = keys.first() else {
            return Ok(());
        };
        if keys.len() > 1 {
            return Err(syntax(
                &first.loc,
                format!(
                    "a snippet definition stands alone before its '{{': '({name})' cannot share a line with other keys"
                ),
            ));
        }
        if name.is_empty() || name.contains(['(', ')']) {
            return Err(syntax(
                &first.loc,
                format!("'{}' is not a valid snippet name", first.text),
            ));
        }
        let open = match c.peek() {
            Some(o) if o.kind == Kind::Open => o,
            _ => {
                return Err(syntax(
                    &first.loc,
                    format!(
                        "snippet '{name}' must be followed by '{{' on the same line, then its directives and '}}'"
                    ),
                ));
            }
        };
        c.bump();
        let start = c.pos;
        let mut depth = 1usize;
        while let Some(l) = c.bump() {
            match l.kind {
                Kind::Open => depth += 1,
                Kind::Close => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Kind::Word => {}
            }
        }
        if depth > 0 {
            return Err(CorefileError::UnclosedBlock {
                loc: c.end_loc(&open.loc),
                opened: open.loc.line,
            });
        }
        let body = c.lexemes.get(start..c.pos - 1).unwrap_or_default().to_vec();
        if let Some(earlier) = self.snippets.get(name) {
            return Err(syntax(
                &first.loc,
                format!("snippet '{name}' is already defined at {}", earlier.loc),
            ));
        }
        self.snippets.insert(
            name.to_owned(),
            Snippet {
                lexemes: Arc::new(body),
                loc: first.loc.clone(),
            },
        );
        Ok(())
    }

    /// The directives of a block up to its `}` (`open` is its `{`), or to the end of the text
    /// when `open` is `None` (an imported file, a snippet, a brace-less server block).
    fn block(
        &mut self,
        c: &mut Cursor<'_>,
        open: Option<&Lexeme>,
        depth: usize,
    ) -> Result<Vec<Directive>, CorefileError> {
        let mut out = Vec::new();
        let mut prev: Option<&Lexeme> = open;
        loop {
            let Some(l) = c.peek() else {
                return match open {
                    Some(o) => Err(CorefileError::UnclosedBlock {
                        loc: c.end_loc(&o.loc),
                        opened: o.loc.line,
                    }),
                    None => Ok(out),
                };
            };
            match l.kind {
                Kind::Close => {
                    if open.is_none() {
                        return Err(CorefileError::UnexpectedClose { loc: l.loc.clone() });
                    }
                    c.bump();
                    return Ok(out);
                }
                Kind::Open if l.line_start => {
                    let hint = match prev {
                        Some(p) if p.kind == Kind::Word => {
                            format!(": move it to the end of line {}", p.loc.line)
                        }
                        _ => String::new(),
                    };
                    return Err(syntax(
                        &l.loc,
                        format!(
                            "unexpected '{{' on a line of its own: a block opens at the end of its directive's line{hint}"
                        ),
                    ));
                }
                Kind::Open => {
                    return Err(syntax(
                        &l.loc,
                        "unexpected '{': expected a directive name before it",
                    ));
                }
                Kind::Word => {
                    self.directive(c, depth, &mut out)?;
                    prev = c.pos.checked_sub(1).and_then(|i| c.lexemes.get(i));
                }
            }
        }
    }

    /// One directive (with its block), or an import, appended to `out`.
    fn directive(
        &mut self,
        c: &mut Cursor<'_>,
        depth: usize,
        out: &mut Vec<Directive>,
    ) -> Result<(), CorefileError> {
        let Some(name) = c.bump() else {
            return Ok(());
        };
        let is_import = !name.quoted && name.text == "import";
        let mut args = Vec::new();
        let mut last = name;
        while let Some(l) = c.peek_same_line().filter(|l| l.kind == Kind::Word) {
            c.bump();
            args.push(l);
            last = l;
        }
        if let Some(l) = std::iter::once(name)
            .chain(args.iter().copied())
            .find(|l| glued_closes(l))
        {
            return Err(syntax(
                &l.loc,
                format!(
                    "unexpected '{}': write each '}}' apart, separated by spaces or on lines of their own",
                    l.text
                ),
            ));
        }
        if glued_open(last, c.peek()) {
            return Err(syntax(
                &last.loc,
                format!(
                    "missing space before '{{' in '{}': write '{} {{'",
                    last.text,
                    &last.text[..last.text.len() - 1]
                ),
            ));
        }
        let mut block = Vec::new();
        let mut has_block = false;
        if let Some(open) = c.peek_same_line().filter(|l| l.kind == Kind::Open) {
            if is_import {
                return Err(syntax(
                    &open.loc,
                    "import takes no block: import NAME_OR_PATH, alone on its line",
                ));
            }
            c.bump();
            if depth >= MAX_BLOCK_DEPTH {
                return Err(syntax(
                    &open.loc,
                    format!("blocks are nested more than {MAX_BLOCK_DEPTH} deep"),
                ));
            }
            has_block = true;
            block = self.block(c, Some(open), depth + 1)?;
            if let Some(n) = c.peek_same_line() {
                match n.kind {
                    // Closes the enclosing block on the same line.
                    Kind::Close => {}
                    Kind::Word => {
                        return Err(syntax(
                            &n.loc,
                            format!(
                                "unexpected '{}' after the '}}' that closes the block of '{}': arguments go before '{{', and the next directive on a new line",
                                n.text, name.text
                            ),
                        ));
                    }
                    Kind::Open => {
                        return Err(syntax(
                            &n.loc,
                            format!("unexpected '{{' after the block of '{}' closed", name.text),
                        ));
                    }
                }
            }
        }
        if is_import {
            if let Spliced::Directives(d) = self.import(name, &args, Context::Block(depth))? {
                out.extend(d);
            }
            return Ok(());
        }
        out.push(Directive {
            name: token(name),
            args: args.into_iter().map(token).collect(),
            block,
            has_block,
        });
        Ok(())
    }

    /// Splices snippet `args[0]`, or the files it names, in `context`.
    fn import(&mut self, at: &Lexeme, args: &[&Lexeme], context: Context) -> Result<Spliced, CorefileError> {
        let what = match args {
            [one] => *one,
            [] => {
                return Err(CorefileError::Import {
                    loc: at.loc.clone(),
                    message: "expected a snippet name, a file or a glob pattern after 'import'".into(),
                });
            }
            [_, extra, ..] => {
                return Err(CorefileError::Import {
                    loc: extra.loc.clone(),
                    message: format!(
                        "takes one snippet name, file or glob pattern; unexpected '{}'",
                        extra.text
                    ),
                });
            }
        };
        if what.text.is_empty() {
            return Err(CorefileError::Import {
                loc: what.loc.clone(),
                message: "empty snippet name or path".into(),
            });
        }
        if let Some(snippet) = self.snippets.get(&what.text) {
            let lexemes = Arc::clone(&snippet.lexemes);
            let source = Source::Snippet(what.text.clone());
            return self.splice(what, source, &lexemes, context);
        }

        let base = what.loc.file.parent().unwrap_or(Path::new(""));
        let pattern = base.join(&what.text);
        let file_name = pattern
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = pattern.parent().unwrap_or(Path::new("")).to_path_buf();
        if dir.to_string_lossy().contains(['*', '?']) {
            return Err(CorefileError::Import {
                loc: what.loc.clone(),
                message: format!(
                    "'{}': wildcards are supported only in the last part of the path",
                    what.text
                ),
            });
        }

        let files = if file_name.contains(['*', '?']) {
            let found = glob(&dir, &file_name);
            if found.is_empty() {
                tracing::warn!(pattern = %pattern.display(), at = %what.loc, "import: no file matches the glob pattern");
            }
            found
        } else {
            match std::fs::metadata(&pattern) {
                Ok(m) if m.is_dir() => {
                    return Err(CorefileError::Import {
                        loc: what.loc.clone(),
                        message: format!(
                            "{} is a directory; import its files with a glob such as '{}/*'",
                            pattern.display(),
                            what.text.trim_end_matches('/')
                        ),
                    });
                }
                Ok(_) => vec![pattern],
                Err(_) if !what.text.contains(['/', '.']) => {
                    return Err(CorefileError::UnknownSnippet {
                        loc: what.loc.clone(),
                        name: what.text.clone(),
                        path: pattern,
                    });
                }
                Err(_) => {
                    return Err(CorefileError::ImportNotFound {
                        loc: what.loc.clone(),
                        path: pattern,
                    });
                }
            }
        };

        let mut spliced = match context {
            Context::Top => Spliced::Blocks(Vec::new()),
            Context::Block(_) => Spliced::Directives(Vec::new()),
        };
        for path in files {
            let source = Source::File {
                key: file_key(&path),
                shown: path.clone(),
            };
            let text = std::fs::read_to_string(&path).map_err(|e| CorefileError::Import {
                loc: what.loc.clone(),
                message: format!("cannot read {}: {e}", path.display()),
            })?;
            let lexemes = lex(&text, &Arc::new(path))?;
            match (&mut spliced, self.splice(what, source, &lexemes, context)?) {
                (Spliced::Blocks(all), Spliced::Blocks(b)) => all.extend(b),
                (Spliced::Directives(all), Spliced::Directives(d)) => all.extend(d),
                _ => {}
            }
        }
        Ok(spliced)
    }

    /// Fails if `source` is already being read, or imports are nested too deep.
    fn check_chain(&self, at: &Lexeme, source: &Source) -> Result<(), CorefileError> {
        let same = |s: &Source| match (s, source) {
            (Source::File { key: a, .. }, Source::File { key: b, .. }) => a == b,
            (a, b) => a == b,
        };
        if self.chain.iter().any(same) {
            let mut chain: Vec<String> = self.chain.iter().map(Source::describe).collect();
            chain.push(source.describe());
            return Err(CorefileError::ImportCycle {
                loc: at.loc.clone(),
                what: source.describe(),
                chain: chain.join(" -> "),
            });
        }
        if self.chain.len() > MAX_IMPORT_DEPTH {
            return Err(CorefileError::ImportLimit {
                loc: at.loc.clone(),
                message: format!(
                    "imports are nested more than {MAX_IMPORT_DEPTH} deep (importing {})",
                    source.describe()
                ),
            });
        }
        Ok(())
    }

    /// Parses `lexemes` (the contents of `source`) in `context`, with `source` on the chain.
    fn splice(
        &mut self,
        at: &Lexeme,
        source: Source,
        lexemes: &[Lexeme],
        context: Context,
    ) -> Result<Spliced, CorefileError> {
        self.check_chain(at, &source)?;
        self.budget = self
            .budget
            .checked_sub(lexemes.len())
            .ok_or_else(|| CorefileError::ImportLimit {
                loc: at.loc.clone(),
                message: format!("imports expand the Corefile to more than {MAX_IMPORTED_LEXEMES} tokens"),
            })?;
        self.chain.push(source);
        let result = match context {
            Context::Top => self.top(lexemes).map(Spliced::Blocks),
            Context::Block(depth) => self
                .block(&mut Cursor::new(lexemes), None, depth)
                .map(Spliced::Directives),
        };
        self.chain.pop();
        result
    }
}

/// The arguments of a top-level `import` line.
fn import_args<'a>(c: &mut Cursor<'a>) -> Vec<&'a Lexeme> {
    let mut args = Vec::new();
    while let Some(l) = c.peek_same_line().filter(|l| l.kind == Kind::Word) {
        c.bump();
        args.push(l);
    }
    args
}

/// The identity of a file, for cycle detection: its canonical path when it has one.
fn file_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The files in `dir` whose names match `pattern` (`*` any run, `?` any one character), sorted.
/// Directories are skipped.
fn glob(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let pattern: Vec<char> = pattern.chars().collect();
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            let name: Vec<char> = e.file_name().to_string_lossy().chars().collect();
            wildcard_match(&pattern, &name)
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// Matches `name` against `pattern` with `*` and `?`, in linear time (backtracking only to the
/// last `*`).
fn wildcard_match(pattern: &[char], name: &[char]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// A parsed Corefile: its server blocks in order, with snippets and imports resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corefile {
    /// The server blocks, in file order (imported blocks where their `import` stood).
    pub blocks: Vec<ServerBlock>,
}

impl Corefile {
    /// Reads the Corefile at `path`, parses it and resolves its imports (relative to its
    /// directory).
    pub fn from_file(path: &Path) -> Result<Self, CorefileError> {
        let text = std::fs::read_to_string(path).map_err(|e| CorefileError::Read {
            loc: Location {
                file: Arc::new(path.to_path_buf()),
                line: 0,
            },
            message: e.to_string(),
        })?;
        Self::parse_str(&text, path)
    }

    /// Parses `text`. `file` names it in errors and its directory is the base of relative
    /// imports; it need not exist.
    pub fn parse_str(text: &str, file: &Path) -> Result<Self, CorefileError> {
        let blocks = parse_root(text, file)?;
        Ok(Self { blocks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubeadm's default Corefile, as shipped in `config/Corefile`.
    const KUBEADM: &str = include_str!("../../config/Corefile");

    fn parse(text: &str) -> Result<Corefile, CorefileError> {
        Corefile::parse_str(text, Path::new("Corefile"))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    fn names(ds: &[Directive]) -> Vec<&str> {
        ds.iter().map(|d| d.name.text.as_str()).collect()
    }

    fn args(d: &Directive) -> Vec<&str> {
        d.args.iter().map(|t| t.text.as_str()).collect()
    }

    fn keys(b: &ServerBlock) -> Vec<&str> {
        b.keys.iter().map(|t| t.text.as_str()).collect()
    }

    /// A fresh directory under the system's temp dir.
    fn temp_dir(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("cluster-dns-corefile-{}-{tag}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn kubeadm_corefile() {
        let cf = parse(KUBEADM).unwrap();
        assert_eq!(cf.blocks.len(), 1);
        let b = &cf.blocks[0];
        assert_eq!(keys(b), [".:53"]);
        assert_eq!(
            names(&b.directives),
            [
                "errors",
                "health",
                "ready",
                "kubernetes",
                "prometheus",
                "forward",
                "cache",
                "loop",
                "reload",
                "loadbalance"
            ]
        );
        let health = &b.directives[1];
        assert!(health.has_block && health.args.is_empty());
        assert_eq!(names(&health.block), ["lameduck"]);
        assert_eq!(args(&health.block[0]), ["5s"]);
        let k = &b.directives[3];
        assert_eq!(args(k), ["cluster.local", "in-addr.arpa", "ip6.arpa"]);
        assert_eq!(names(&k.block), ["pods", "fallthrough", "ttl"]);
        assert_eq!(k.name.loc.line, 7);
        assert_eq!(k.block[2].name.loc.line, 10);
        assert_eq!(args(&b.directives[5]), [".", "/etc/resolv.conf"]);
        let cache = &b.directives[6];
        assert_eq!(args(&cache.block[1]), ["denial", "cluster.local"]);
        assert!(!b.directives[2].has_block && b.directives[2].block.is_empty());
        assert_eq!(b.directives[9].name.loc.line, 22);
    }

    #[test]
    fn one_line_blocks() {
        let cf = parse(".:53 {\n kubernetes cluster.local { pods insecure }\n log\n}\n").unwrap();
        let k = &cf.blocks[0].directives[0];
        assert!(k.has_block);
        assert_eq!(args(k), ["cluster.local"]);
        assert_eq!(names(&k.block), ["pods"]);
        assert_eq!(args(&k.block[0]), ["insecure"]);
        assert_eq!(names(&cf.blocks[0].directives), ["kubernetes", "log"]);

        // Whole server blocks on one line, nested, and several on a line.
        let cf = parse(
            ".:53 { kubernetes cluster.local { pods insecure } }\nexample.org { whoami } b.org { log }",
        )
        .unwrap();
        assert_eq!(cf.blocks.len(), 3);
        assert_eq!(names(&cf.blocks[0].directives[0].block), ["pods"]);
        assert_eq!(names(&cf.blocks[1].directives), ["whoami"]);
        assert_eq!(keys(&cf.blocks[2]), ["b.org"]);

        // A block opened on one line and continued on the next ones.
        let cf = parse(".:53 {\n cache 30 { success 100\n  denial 50 }\n}").unwrap();
        let cache = &cf.blocks[0].directives[0];
        assert_eq!(names(&cache.block), ["success", "denial"]);
        assert_eq!(args(&cache.block[0]), ["100"]);

        // Empty blocks, with and without a space.
        let cf = parse(".:53 {}\nb.:53 {\n health {}\n ready { }\n}\n").unwrap();
        assert!(cf.blocks[0].directives.is_empty());
        let d = &cf.blocks[1].directives;
        assert!(d[0].has_block && d[0].block.is_empty() && d[1].has_block);
    }

    #[test]
    fn keys_spaces_and_commas() {
        let cf = parse("a.com, b.com:1053 c.com,d.com {\n}\n").unwrap();
        assert_eq!(keys(&cf.blocks[0]), ["a.com", "b.com:1053", "c.com", "d.com"]);
        // A trailing comma continues the keys on the next line; `{` may stand on the next line
        // after the keys.
        let cf = parse("a.com,\n  b.com\n{\n whoami\n}\n").unwrap();
        assert_eq!(keys(&cf.blocks[0]), ["a.com", "b.com"]);
        assert_eq!(names(&cf.blocks[0].directives), ["whoami"]);
        let cf = parse("dns://.:53 cluster.local:53 {\n}\n").unwrap();
        assert_eq!(keys(&cf.blocks[0]), ["dns://.:53", "cluster.local:53"]);
    }

    #[test]
    fn single_block_without_braces() {
        let cf = parse("# a brace-less Corefile\n.:1053\nkubernetes cluster.local {\n pods insecure\n}\nbind 127.0.0.1\n").unwrap();
        assert_eq!(cf.blocks.len(), 1);
        assert_eq!(keys(&cf.blocks[0]), [".:1053"]);
        assert_eq!(names(&cf.blocks[0].directives), ["kubernetes", "bind"]);
        // Keys alone.
        assert!(parse(".:53").unwrap().blocks[0].directives.is_empty());
    }

    #[test]
    fn comments_and_quotes() {
        let text = "# header\n.:53 { # after the brace\n  # a whole line\n  log \"a b\" `raw \\n` \"q\\\"x\" # trailing\n  hosts \"{\" \"}\"\n  template \"multi\nline\" next\n}\n";
        let cf = parse(text).unwrap();
        let d = &cf.blocks[0].directives;
        assert_eq!(names(d), ["log", "hosts", "template"]);
        assert_eq!(args(&d[0]), ["a b", "raw \\n", "q\"x"]);
        assert_eq!(args(&d[1]), ["{", "}"]);
        assert!(!d[1].has_block);
        assert_eq!(args(&d[2]), ["multi\nline", "next"]);
        assert_eq!(d[0].name.loc.line, 4);
    }

    #[test]
    fn environment_variables() {
        let path = std::env::var("PATH").unwrap_or_default();
        let cf =
            parse("{$CLUSTER_DNS_UNSET_VAR}.:53 {\n x {%PATH%}-{$CLUSTER_DNS_UNSET_VAR} \"{$PATH}\"\n}\n")
                .unwrap();
        assert_eq!(keys(&cf.blocks[0]), [".:53"]);
        assert_eq!(args(&cf.blocks[0].directives[0]), [format!("{path}-"), path]);
    }

    #[test]
    fn snippets() {
        let text = "(common) {\n errors\n log {\n  class denial\n }\n}\n(more) {\n import common\n cache\n}\n.:53 {\n import more\n kubernetes cluster.local {\n  import opts\n }\n}\n(opts) { pods insecure }\n";
        // `opts` is defined after its use: not known there.
        let e = err(text);
        assert!(
            e.starts_with("Corefile:14: import: no snippet named 'opts'"),
            "{e}"
        );
        let text = text
            .replace("(opts) { pods insecure }\n", "")
            .replace(".:53", "(opts) { pods insecure }\n.:53");
        let cf = parse(&text).unwrap();
        let d = &cf.blocks[0].directives;
        assert_eq!(names(d), ["errors", "log", "cache", "kubernetes"]);
        // Spliced directives keep the snippet's lines.
        assert_eq!(d[0].name.loc.line, 2);
        assert_eq!(names(&d[1].block), ["class"]);
        assert_eq!(names(&d[3].block), ["pods"]);

        // A snippet of server blocks imported at the top level.
        let cf = parse("(blocks) {\n a.:53 {\n  whoami\n }\n b.:53 { log }\n}\nimport blocks\n").unwrap();
        assert_eq!(cf.blocks.len(), 2);
        assert_eq!(keys(&cf.blocks[1]), ["b.:53"]);

        // A snippet that imports itself.
        let e = err("(a) {\n import b\n}\n(b) {\n import a\n}\n.:53 {\n import a\n}\n");
        assert!(
            e.starts_with("Corefile:5: import cycle: snippet 'a' is already being imported"),
            "{e}"
        );
        assert!(
            e.contains("Corefile -> snippet 'a' -> snippet 'b' -> snippet 'a'"),
            "{e}"
        );
    }

    #[test]
    fn file_imports_and_globs() {
        let dir = temp_dir("imports");
        std::fs::write(
            dir.join("common.conf"),
            "log\nerrors {\n  consolidate 5m \".* i/o timeout$\"\n}\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("blocks")).unwrap();
        std::fs::write(
            dir.join("blocks/a.server"),
            "a.:53 {\n import ../common.conf\n}\n",
        )
        .unwrap();
        std::fs::write(dir.join("blocks/b.server"), "b.:53 {\n import opts.d/*\n}\n").unwrap();
        std::fs::write(dir.join("blocks/ignored.txt"), "not a server block {\n").unwrap();
        std::fs::create_dir_all(dir.join("blocks/opts.d/sub.server")).unwrap();
        std::fs::write(dir.join("blocks/opts.d/2-ready"), "ready\n").unwrap();
        std::fs::write(dir.join("blocks/opts.d/1-health"), "health\n").unwrap();
        let text = ".:53 {\n import common.conf\n kubernetes cluster.local {\n  import none-match-*.conf\n }\n}\nimport blocks/*.server\n";
        let cf = Corefile::parse_str(text, &dir.join("Corefile")).unwrap();
        assert_eq!(cf.blocks.len(), 3);
        let d = &cf.blocks[0].directives;
        assert_eq!(names(d), ["log", "errors", "kubernetes"]);
        assert_eq!(*d[0].name.loc.file, dir.join("common.conf"));
        assert_eq!(d[1].block[0].args[1].text, ".* i/o timeout$");
        // A glob that matches nothing imports nothing (CoreDNS warns).
        assert!(d[2].has_block && d[2].block.is_empty());
        // Files imported from an imported file are relative to that file; globs are sorted and
        // skip directories.
        assert_eq!(keys(&cf.blocks[1]), ["a.:53"]);
        assert_eq!(names(&cf.blocks[1].directives), ["log", "errors"]);
        assert_eq!(names(&cf.blocks[2].directives), ["health", "ready"]);
        assert_eq!(
            cf.blocks[2].directives[1].name.loc.to_string(),
            format!("{}:1", dir.join("blocks/opts.d/2-ready").display())
        );

        // An absolute path, through from_file.
        let abs = dir.join("abs.conf");
        std::fs::write(&abs, "whoami\n").unwrap();
        std::fs::write(
            dir.join("Corefile"),
            format!(".:53 {{\n import {}\n}}\n", abs.display()),
        )
        .unwrap();
        let cf = Corefile::from_file(&dir.join("Corefile")).unwrap();
        assert_eq!(names(&cf.blocks[0].directives), ["whoami"]);

        // Errors inside an imported file name that file and its line.
        std::fs::write(dir.join("bad.conf"), "log\n}\n").unwrap();
        let e = Corefile::parse_str(".:53 {\n import bad.conf\n}\n", &dir.join("Corefile")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: unexpected '}}': no block is open here",
                dir.join("bad.conf").display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn import_cycles() {
        let dir = temp_dir("cycle");
        std::fs::write(dir.join("x.conf"), "log\nimport y.conf\n").unwrap();
        std::fs::write(dir.join("y.conf"), "\nimport ./x.conf\n").unwrap();
        let e = Corefile::parse_str(".:53 {\n import x.conf\n}\n", &dir.join("Corefile")).unwrap_err();
        assert!(matches!(e, CorefileError::ImportCycle { .. }), "{e:?}");
        let e = e.to_string();
        let y = dir.join("y.conf");
        assert!(
            e.starts_with(&format!(
                "{}:2: import cycle: {}",
                y.display(),
                dir.join("./x.conf").display()
            )),
            "{e}"
        );
        assert!(e.contains("x.conf -> ") && e.contains("y.conf -> "), "{e}");

        // The Corefile importing itself.
        let root = dir.join("Corefile");
        std::fs::write(&root, "import Corefile\n").unwrap();
        let e = Corefile::from_file(&root).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}:1: import cycle: ", root.display())),
            "{e}"
        );

        // A chain deeper than the limit, without a cycle.
        for i in 0..=MAX_IMPORT_DEPTH {
            std::fs::write(
                dir.join(format!("d{i}.conf")),
                format!("import d{}.conf\n", i + 1),
            )
            .unwrap();
        }
        std::fs::write(dir.join(format!("d{}.conf", MAX_IMPORT_DEPTH + 1)), "log\n").unwrap();
        let e = Corefile::parse_str(".:53 {\n import d0.conf\n}\n", &root).unwrap_err();
        assert!(matches!(e, CorefileError::ImportLimit { .. }), "{e:?}");
        assert!(e.to_string().contains("nested more than 10 deep"), "{e}");
        // Ten levels are fine.
        std::fs::write(dir.join(format!("d{}.conf", MAX_IMPORT_DEPTH - 1)), "log\n").unwrap();
        assert!(Corefile::parse_str(".:53 {\n import d0.conf\n}\n", &root).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn snippet_blowup_is_capped() {
        // Each snippet imports the previous one 10 times: 10^8 directives if expanded.
        let mut text = String::from("(s0) {\n x\n}\n");
        for i in 1..=8 {
            text.push_str(&format!("(s{i}) {{\n"));
            for _ in 0..10 {
                text.push_str(&format!(" import s{}\n", i - 1));
            }
            text.push_str("}\n");
        }
        text.push_str(".:53 {\n import s8\n}\n");
        let e = err(&text);
        assert!(e.contains("more than 1000000 tokens"), "{e}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = format!(".:53 {{\n{}{}}}\n", "a {\n".repeat(10_000), "}\n".repeat(10_000));
        assert!(err(&text).contains("nested more than 64 deep"));
        let text = format!(".:53 {{\n{}\n}}\n", "a { ".repeat(100_000));
        assert!(parse(&text).is_err());
    }

    #[test]
    fn each_mistake_names_file_line_and_expectation() {
        let cases: &[(&str, &str)] = &[
            // Unclosed blocks: reported where the file ends, naming the opening line.
            (
                ".:53 {\n kubernetes\n",
                "Corefile:2: expected '}' to close the block opened at line 1",
            ),
            (
                ".:53 {\n errors\n health {\n  lameduck 5s\n\n}\n",
                "Corefile:6: expected '}' to close the block opened at line 1",
            ),
            (
                ".:53 {\n x {\n  y\n",
                "Corefile:3: expected '}' to close the block opened at line 2",
            ),
            (
                ".:53 {",
                "Corefile:1: expected '}' to close the block opened at line 1",
            ),
            (
                "(snip) {\n log\n",
                "Corefile:2: expected '}' to close the block opened at line 1",
            ),
            // Stray closing braces.
            (
                ".:53 {\n}\n}\n",
                "Corefile:3: unexpected '}': no block is open here",
            ),
            ("}\n", "Corefile:1: unexpected '}': no block is open here"),
            (
                ".:53\nlog\n}\n",
                "Corefile:3: unexpected '}': no block is open here",
            ),
            (
                ".:53 }\n",
                "Corefile:1: unexpected '}' after the server block keys: expected '{'",
            ),
            (
                ".:53 {\n log }}\n",
                "Corefile:2: unexpected '}}': write each '}' apart",
            ),
            // Braces in the wrong place.
            ("{\n}\n", "Corefile:1: '{' without server block keys"),
            ("\n\n\"\" {\n}\n", "Corefile:3: '{' without server block keys"),
            (
                ".:53 {\n log\n}\n{\n}\n",
                "Corefile:4: '{' without server block keys",
            ),
            (
                ".:53 {\n kubernetes cluster.local\n {\n  pods insecure\n }\n}\n",
                "Corefile:3: unexpected '{' on a line of its own: a block opens at the end of its directive's line: move it to the end of line 2",
            ),
            (
                ".:53 {\n { x }\n}\n",
                "Corefile:2: unexpected '{' on a line of its own",
            ),
            (
                ".:53 {\n a { { x } }\n}\n",
                "Corefile:2: unexpected '{': expected a directive name",
            ),
            (
                ".:53 {\n forward . { max_concurrent 10 } 1.1.1.1\n}\n",
                "Corefile:2: unexpected '1.1.1.1' after the '}' that closes the block of 'forward'",
            ),
            (
                ".:53 {\n forward . { max_concurrent 10 } {\n}\n}\n",
                "Corefile:2: unexpected '{' after the block of 'forward' closed",
            ),
            (
                ".:53{\n log\n}\n",
                "Corefile:1: missing space before '{' in '.:53{': write '.:53 {'",
            ),
            (
                ".:53 {\n health{\n }\n}\n",
                "Corefile:2: missing space before '{' in 'health{': write 'health {'",
            ),
            // Keys.
            (
                "a.com, {\n}\n",
                "Corefile:1: expected another server block key after ',' but found '{'",
            ),
            (
                "a.com,",
                "Corefile:1: expected another server block key after ','",
            ),
            (
                "a.:53 {\n}\nb.:54\nlog\n",
                "Corefile:3: expected '{' after the server block keys 'b.:54', on the same line",
            ),
            (
                ".:53\nlog\nexample.org {\n whoami\n}\n",
                "Corefile:1: expected '{' after the server block keys: 'example.org' at line 3 looks like another server block",
            ),
            // Quotes.
            (
                ".:53 {\n x \"open\n}\n",
                "Corefile:2: unterminated quoted token: the \" opened on this line is never closed",
            ),
            (
                ".:53 {\n x `open\n}\n",
                "Corefile:2: unterminated quoted token: the ` opened",
            ),
            // Snippets and imports.
            (
                ".:53 {\n import nope\n}\n",
                "Corefile:2: import: no snippet named 'nope' is defined before this line, and there is no file nope",
            ),
            (
                ".:53 {\n import nope.conf\n}\n",
                "Corefile:2: import: file nope.conf not found",
            ),
            (
                "import missing/*.conf\n.:53 {\n import sub/x\n}\n",
                "Corefile:3: import: file sub/x not found",
            ),
            (
                ".:53 {\n import\n}\n",
                "Corefile:2: import: expected a snippet name, a file or a glob pattern",
            ),
            (
                ".:53 {\n import a b\n}\n",
                "Corefile:2: import: takes one snippet name, file or glob pattern; unexpected 'b'",
            ),
            (
                ".:53 {\n import a {\n }\n}\n",
                "Corefile:2: import takes no block",
            ),
            ("import a {\n}\n", "Corefile:1: import takes no block"),
            (
                ".:53 {\n import */x.conf\n}\n",
                "Corefile:2: import: '*/x.conf': wildcards are supported only in the last part",
            ),
            (
                ".:53 {\n import \"\"\n}\n",
                "Corefile:2: import: empty snippet name or path",
            ),
            (
                "(snip)\n.:53 {}\n",
                "Corefile:1: snippet 'snip' must be followed by '{' on the same line",
            ),
            (
                "(a) b {\n}\n",
                "Corefile:1: a snippet definition stands alone before its '{'",
            ),
            ("() {\n}\n", "Corefile:1: '()' is not a valid snippet name"),
            (
                "(a) {\n}\n(a) {\n}\n.:53 {}\n",
                "Corefile:3: snippet 'a' is already defined at Corefile:1",
            ),
            // Nothing to serve.
            ("", "Corefile:1: no server blocks"),
            (
                "# only a comment\n\n",
                "Corefile:1: no server blocks: a Corefile needs at least one",
            ),
            ("(snip) {\n log\n}\n", "Corefile:1: no server blocks"),
            ("import nothing-*.conf\n", "Corefile:1: no server blocks"),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(e.starts_with(want), "{text:?}:\n  got  {e}\n  want {want}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        // A deterministic pseudo-random walk over the characters that matter to the syntax.
        const ALPHABET: &[&str] = &[
            "{",
            "}",
            " ",
            "\n",
            "\"",
            "`",
            "\\",
            "#",
            "import",
            "(s)",
            "a",
            ".",
            ":",
            "53",
            ",",
            "{$PATH}",
            "{%",
            "%}",
            "/",
            "*",
            "é",
            "\t",
            "kubernetes",
            "{}",
            "}}",
            "a{",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let len = next() % 40;
            let text: String = (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
                .collect();
            if let Ok(cf) = parse(&text) {
                for b in &cf.blocks {
                    for k in &b.keys {
                        let _ = super::super::parse_zone_key(k);
                    }
                }
            }
            let _ = super::super::normalize_zone_or_cidr(&text);
            let _ = super::super::parse_duration(&text);
        }
    }

    #[test]
    fn wildcards() {
        let m =
            |p: &str, n: &str| wildcard_match(&p.chars().collect::<Vec<_>>(), &n.chars().collect::<Vec<_>>());
        assert!(m("*", "") && m("*", "abc") && m("*.conf", "a.conf") && m("a?c", "abc") && m("*b*", "abc"));
        assert!(m("a*b*c", "aXbYbZc") && m("**", "x"));
        assert!(!m("*.conf", "a.confx") && !m("a?c", "ac") && !m("abc", "ab") && !m("", "a"));
        assert!(m(&"*a".repeat(50), &"a".repeat(60)));
    }
}
