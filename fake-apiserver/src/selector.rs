//! Label and field selectors as the API server reads them from `labelSelector=` and
//! `fieldSelector=`: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
//! comma-separated (all must hold).

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// A selector the fake cannot parse (answered 400, as the API server does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: '{0}'")]
pub struct SelectorError(pub String);

fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn set(v: &str, whole: &str) -> Result<Vec<String>, SelectorError> {
    let v = v.trim();
    let inner = v
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| SelectorError(whole.to_owned()))?;
    Ok(inner.split(',').map(|x| x.trim().to_owned()).collect())
}

impl Selector {
    /// Parses a selector; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let bad = || SelectorError(p.to_owned());
            let r = if let Some((k, v)) = p.split_once("!=") {
                Requirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = p.split_once(" notin ") {
                Requirement::NotIn(k.trim().to_owned(), set(v, p)?)
            } else if let Some((k, v)) = p.split_once(" in ") {
                Requirement::In(k.trim().to_owned(), set(v, p)?)
            } else if let Some(k) = p.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_owned())
            } else {
                Requirement::Exists(p.to_owned())
            };
            let key = match &r {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _)
                | Requirement::Exists(k)
                | Requirement::NotExists(k) => k,
            };
            if key.is_empty() || key.contains(' ') {
                return Err(bad());
            }
            requirements.push(r);
        }
        Ok(Self { requirements })
    }

    /// True when `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn equality_and_set_based() {
        let l = labels(&[("app", "dns"), ("tier", "prod")]);
        assert!(Selector::parse("").unwrap().matches(&l));
        assert!(Selector::parse("app=dns").unwrap().matches(&l));
        assert!(Selector::parse("app==dns,tier!=test").unwrap().matches(&l));
        assert!(!Selector::parse("app!=dns").unwrap().matches(&l));
        assert!(Selector::parse("tier in (prod, staging)").unwrap().matches(&l));
        assert!(!Selector::parse("tier notin (prod)").unwrap().matches(&l));
        assert!(Selector::parse("app,!missing").unwrap().matches(&l));
        assert!(!Selector::parse("missing").unwrap().matches(&l));
        assert!(Selector::parse("tier in prod").is_err());
    }
}
