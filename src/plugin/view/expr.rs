//! The subset of CoreDNS's `view` expression language (expr-lang) its documentation uses,
//! parsed once at setup and evaluated per question: string, number and boolean literals, lists
//! `[...]`, `==`, `!=`, `in`, `matches` (a literal regular expression), `startsWith`,
//! `endsWith`, `contains`, `&&`/`and`, `||`/`or`, `!`/`not`, parentheses, and the functions
//! `client_ip()`, `name()`, `type()`, `proto()`, `port()`, `incidr(IP, CIDR)` and
//! `metadata(LABEL)` (the value a plugin published, `''` when none did or without `metadata`).

use std::net::IpAddr;

use regex::Regex;

use crate::corefile::Cidr;
use crate::proto::QueryMetadata;

/// What an expression is evaluated against.
#[derive(Debug)]
pub struct Context<'a> {
    /// The client's address.
    pub client_ip: IpAddr,
    /// The client's port.
    pub port: u16,
    /// The question name, absolute, as asked.
    pub name: &'a str,
    /// The question type (`A`).
    pub qtype: &'a str,
    /// `udp` or `tcp`.
    pub proto: &'a str,
    /// What the block's plugins published about the question (`metadata`).
    pub metadata: Option<&'a QueryMetadata>,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    Num(f64),
    Bool(bool),
    List(Vec<Value>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Func {
    ClientIp,
    Name,
    Type,
    Proto,
    Port,
    InCidr,
    Metadata,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    In,
    StartsWith,
    EndsWith,
    Contains,
}

#[derive(Debug, Clone)]
enum Node {
    Lit(Value),
    List(Vec<Node>),
    Call(Func, Vec<Node>),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cmp(Op, Box<Node>, Box<Node>),
    Matches(Box<Node>, Regex),
}

/// A parsed expression.
#[derive(Debug, Clone)]
pub struct Expr {
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Num(f64),
    Ident(String),
    Sym(&'static str),
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' || c == '"' {
            let mut v = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err("a string is not closed".into()),
                    Some(&q) if q == c => break,
                    Some('\\') => {
                        i += 1;
                        match chars.get(i) {
                            Some(&e) => v.push(e),
                            None => return Err("a string is not closed".into()),
                        }
                    }
                    Some(&x) => v.push(x),
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Str(v));
        } else if c.is_ascii_digit() {
            let start = i;
            while chars.get(i).is_some_and(|c| c.is_ascii_digit() || *c == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Tok::Num(
                text.parse().map_err(|_| format!("'{text}' is not a number"))?,
            ));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while chars.get(i).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
                i += 1;
            }
            out.push(Tok::Ident(chars[start..i].iter().collect()));
        } else {
            let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let sym = ["==", "!=", "&&", "||"]
                .into_iter()
                .find(|s| *s == two)
                .or_else(|| {
                    ["(", ")", "[", "]", ",", "!"]
                        .into_iter()
                        .find(|s| s.starts_with(c))
                })
                .ok_or_else(|| format!("unexpected '{c}'"))?;
            i += sym.len();
            out.push(Tok::Sym(sym));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }
    fn eat_sym(&mut self, s: &str) -> bool {
        if self.peek()
            == Some(&Tok::Sym(match s {
                "(" => "(",
                ")" => ")",
                "[" => "[",
                "]" => "]",
                "," => ",",
                "!" => "!",
                "==" => "==",
                "!=" => "!=",
                "&&" => "&&",
                "||" => "||",
                _ => return false,
            }))
        {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn eat_word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Ident(i)) if i == w) {
            self.at += 1;
            true
        } else {
            false
        }
    }
    fn expect_sym(&mut self, s: &str) -> Result<(), String> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            Err(format!("expected '{s}'"))
        }
    }
    fn or(&mut self) -> Result<Node, String> {
        let mut left = self.and()?;
        while self.eat_sym("||") || self.eat_word("or") {
            left = Node::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }
    fn and(&mut self) -> Result<Node, String> {
        let mut left = self.not()?;
        while self.eat_sym("&&") || self.eat_word("and") {
            left = Node::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }
    fn not(&mut self) -> Result<Node, String> {
        if self.eat_sym("!") || self.eat_word("not") {
            return Ok(Node::Not(Box::new(self.not()?)));
        }
        self.cmp()
    }
    fn cmp(&mut self) -> Result<Node, String> {
        let left = self.primary()?;
        let op = if self.eat_sym("==") {
            Op::Eq
        } else if self.eat_sym("!=") {
            Op::Ne
        } else if self.eat_word("in") {
            Op::In
        } else if self.eat_word("startsWith") {
            Op::StartsWith
        } else if self.eat_word("endsWith") {
            Op::EndsWith
        } else if self.eat_word("contains") {
            Op::Contains
        } else if self.eat_word("matches") {
            let Some(Tok::Str(re)) = self.peek().cloned() else {
                return Err("'matches' needs a string literal on its right".into());
            };
            self.at += 1;
            let re = Regex::new(&re).map_err(|e| format!("'{re}' is not a regular expression: {e}"))?;
            return Ok(Node::Matches(Box::new(left), re));
        } else {
            return Ok(left);
        };
        Ok(Node::Cmp(op, Box::new(left), Box::new(self.primary()?)))
    }
    fn primary(&mut self) -> Result<Node, String> {
        let tok = self.peek().cloned().ok_or("the expression ends too early")?;
        self.at += 1;
        match tok {
            Tok::Str(s) => Ok(Node::Lit(Value::Str(s))),
            Tok::Num(n) => Ok(Node::Lit(Value::Num(n))),
            Tok::Sym("(") => {
                let e = self.or()?;
                self.expect_sym(")")?;
                Ok(e)
            }
            Tok::Sym("[") => {
                let mut items = Vec::new();
                if !self.eat_sym("]") {
                    loop {
                        items.push(self.or()?);
                        if self.eat_sym("]") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                }
                Ok(Node::List(items))
            }
            Tok::Ident(w) if w == "true" => Ok(Node::Lit(Value::Bool(true))),
            Tok::Ident(w) if w == "false" => Ok(Node::Lit(Value::Bool(false))),
            Tok::Ident(w) => {
                let (func, arity) = match w.as_str() {
                    "client_ip" => (Func::ClientIp, 0),
                    "name" => (Func::Name, 0),
                    "type" => (Func::Type, 0),
                    "proto" => (Func::Proto, 0),
                    "port" => (Func::Port, 0),
                    "incidr" => (Func::InCidr, 2),
                    "metadata" => (Func::Metadata, 1),
                    other => {
                        return Err(format!(
                            "'{other}' is not a supported function (client_ip, name, type, proto, port, incidr, metadata)"
                        ));
                    }
                };
                self.expect_sym("(")?;
                let mut args = Vec::new();
                if !self.eat_sym(")") {
                    loop {
                        args.push(self.or()?);
                        if self.eat_sym(")") {
                            break;
                        }
                        self.expect_sym(",")?;
                    }
                }
                if args.len() != arity {
                    return Err(format!("{w}() takes {arity} argument(s)"));
                }
                Ok(Node::Call(func, args))
            }
            Tok::Sym(s) => Err(format!("unexpected '{s}'")),
        }
    }
}

fn in_cidr(ip: &str, cidr: &str) -> bool {
    match (ip.parse::<IpAddr>(), Cidr::parse(cidr)) {
        (Ok(ip), Some(net)) => net.contains(ip.to_canonical()),
        _ => false,
    }
}

impl Expr {
    /// Parses `text`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut p = Parser {
            toks: lex(text)?,
            at: 0,
        };
        let root = p.or()?;
        if p.at != p.toks.len() {
            return Err(format!("unexpected text after the expression in '{text}'"));
        }
        Ok(Self { root })
    }

    /// True when the expression holds for `ctx` (a value that is not a boolean is false).
    pub fn holds(&self, ctx: &Context<'_>) -> bool {
        eval(&self.root, ctx) == Value::Bool(true)
    }
}

fn eval(n: &Node, ctx: &Context<'_>) -> Value {
    let text = |v: Value| match v {
        Value::Str(s) => Some(s),
        _ => None,
    };
    match n {
        Node::Lit(v) => v.clone(),
        Node::List(items) => Value::List(items.iter().map(|i| eval(i, ctx)).collect()),
        Node::Call(f, args) => match f {
            Func::ClientIp => Value::Str(ctx.client_ip.to_canonical().to_string()),
            Func::Name => Value::Str(ctx.name.to_owned()),
            Func::Type => Value::Str(ctx.qtype.to_owned()),
            Func::Proto => Value::Str(ctx.proto.to_owned()),
            Func::Port => Value::Num(f64::from(ctx.port)),
            Func::InCidr => {
                let mut it = args.iter().map(|a| text(eval(a, ctx)));
                match (it.next().flatten(), it.next().flatten()) {
                    (Some(ip), Some(cidr)) => Value::Bool(in_cidr(&ip, &cidr)),
                    _ => Value::Bool(false),
                }
            }
            Func::Metadata => {
                let label = args.first().and_then(|a| text(eval(a, ctx)));
                Value::Str(
                    label
                        .and_then(|l| ctx.metadata.and_then(|md| md.get(&l)))
                        .unwrap_or_default(),
                )
            }
        },
        Node::Not(e) => Value::Bool(eval(e, ctx) != Value::Bool(true)),
        Node::And(a, b) => {
            Value::Bool(eval(a, ctx) == Value::Bool(true) && eval(b, ctx) == Value::Bool(true))
        }
        Node::Or(a, b) => Value::Bool(eval(a, ctx) == Value::Bool(true) || eval(b, ctx) == Value::Bool(true)),
        Node::Matches(e, re) => Value::Bool(text(eval(e, ctx)).is_some_and(|s| re.is_match(&s))),
        Node::Cmp(op, a, b) => {
            let (a, b) = (eval(a, ctx), eval(b, ctx));
            let strs = || match (&a, &b) {
                (Value::Str(x), Value::Str(y)) => Some((x.as_str(), y.as_str())),
                _ => None,
            };
            Value::Bool(match op {
                Op::Eq => a == b,
                Op::Ne => a != b,
                Op::In => matches!(&b, Value::List(items) if items.contains(&a)),
                Op::StartsWith => strs().is_some_and(|(x, y)| x.starts_with(y)),
                Op::EndsWith => strs().is_some_and(|(x, y)| x.ends_with(y)),
                Op::Contains => strs().is_some_and(|(x, y)| x.contains(y)),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(ip: &str, name: &'static str, qtype: &'static str) -> Context<'static> {
        Context {
            client_ip: ip.parse().unwrap(),
            port: 40000,
            name,
            qtype,
            proto: "udp",
            metadata: None,
        }
    }

    #[test]
    fn the_documented_expressions() {
        let c = ctx("10.0.0.5", "www.example.com.", "A");
        for (text, want) in [
            ("incidr(client_ip(), '10.0.0.0/24')", true),
            ("incidr(client_ip(), '10.0.1.0/24')", false),
            ("type() in ['A', 'AAAA']", true),
            ("type() in ['MX']", false),
            ("name() matches '^www\\\\..*\\\\.com\\\\.$'", true),
            ("incidr(client_ip(), '10.0.0.0/8') && type() == 'A'", true),
            ("not (type() == 'A') or proto() == 'udp'", true),
            ("!incidr(client_ip(), '10.0.0.0/8')", false),
            ("name() endsWith 'example.com.' and port() == 40000", true),
            ("client_ip() == '10.0.0.5'", true),
        ] {
            let e = Expr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(e.holds(&c), want, "{text}");
        }
        let v6 = ctx("2001:db8::5", "x.", "AAAA");
        assert!(
            Expr::parse("incidr(client_ip(), '2001:db8::/32')")
                .unwrap()
                .holds(&v6)
        );
        // Metadata: '' without it or for a label no plugin set.
        let md = QueryMetadata::default();
        md.set("kubernetes/client-namespace", "ns-a");
        let e = Expr::parse("metadata('kubernetes/client-namespace') == 'ns-a'").unwrap();
        assert!(!e.holds(&c));
        assert!(e.holds(&Context {
            metadata: Some(&md),
            ..ctx("10.0.0.5", "x.", "A")
        }));
        assert!(
            Expr::parse("metadata('view/name') == ''")
                .unwrap()
                .holds(&Context {
                    metadata: Some(&md),
                    ..ctx("10.0.0.5", "x.", "A")
                })
        );
        for bad in [
            "metadata() == 'y'",
            "meta('x') == 'y'",
            "type() ==",
            "(type() == 'A'",
            "name() matches name()",
            "type() == 'A' 'B'",
        ] {
            assert!(Expr::parse(bad).is_err(), "{bad}");
        }
    }
}
