//! Label selectors as the `labels` and `namespace_labels` options take them: the equality and
//! set-based forms Kubernetes accepts, checked when the Corefile is read so a typo fails at
//! start-up rather than as an empty watch.

use crate::proto::is_dns_label;

/// Checks a label selector as Kubernetes parses one: comma-separated requirements, each `key`,
/// `!key`, `key=value`, `key==value`, `key!=value`, `key in (v1, v2)` or `key notin (v1, v2)`.
pub(super) fn check_selector(s: &str) -> Result<(), String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        match ch {
            '(' if depth > 0 => return Err("nested '('".into()),
            '(' => depth = 1,
            ')' if depth == 0 => return Err("')' without '('".into()),
            ')' => depth = 0,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("'(' is never closed".into());
    }
    parts.push(&s[start..]);
    parts.into_iter().try_for_each(|p| check_requirement(p.trim()))
}

fn check_requirement(p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err("empty requirement (a comma too many?)".into());
    }
    if let Some(key) = p.strip_prefix('!') {
        return check_key(key.trim());
    }
    let key_len = p
        .find(|c: char| !(c.is_ascii_alphanumeric() || "-_./".contains(c)))
        .unwrap_or(p.len());
    let (key, rest) = p.split_at(key_len);
    check_key(key)?;
    let rest = rest.trim_start();
    if rest.is_empty() {
        return Ok(());
    }
    for op in ["!=", "==", "="] {
        if let Some(value) = rest.strip_prefix(op) {
            return check_value(value.trim());
        }
    }
    if rest.starts_with(['<', '>']) {
        return Err(format!("'{p}': the operators < and > are not allowed here"));
    }
    for op in ["notin", "in"] {
        if let Some(set) = rest.strip_prefix(op).filter(|s| s.starts_with([' ', '\t', '('])) {
            let set = set.trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("'{p}': expected a list of values in parentheses after '{op}'"))?;
            if inner.trim().is_empty() {
                return Err(format!("'{p}': '{op}' needs at least one value"));
            }
            return inner.split(',').try_for_each(|v| check_value(v.trim()));
        }
    }
    Err(format!(
        "cannot read '{p}': expected key, !key, key=value, key!=value, key in (...) or key notin (...)"
    ))
}

/// A label key: `[prefix/]name`, the prefix a DNS subdomain.
fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        // A DNS subdomain, in lower case as Kubernetes requires.
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && !prefix.bytes().any(|b| b.is_ascii_uppercase())
            && prefix.split('.').all(is_dns_label);
        if !ok {
            return Err(format!(
                "'{key}': '{prefix}' is not a valid key prefix (a DNS subdomain)"
            ));
        }
    }
    if name.is_empty() || !is_label_value(name) {
        return Err(format!(
            "'{key}' is not a valid label key (up to 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
        ));
    }
    Ok(())
}

fn check_value(v: &str) -> Result<(), String> {
    if is_label_value(v) {
        Ok(())
    } else {
        Err(format!(
            "'{v}' is not a valid label value (up to 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)"
        ))
    }
}

/// A label value (or key name): empty, or up to 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends.
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
            && b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        for ok in [
            "app=dns",
            "app==dns,tier!=test",
            "app = dns , tier != test",
            "env in (a, b)",
            "env notin (x)",
            "env in(a,b)",
            "app",
            "!app",
            "! app",
            "k8s.io/name=x",
            "kubernetes.io/metadata.name notin (kube-system, default)",
            "a=",
            "x in (a,)",
            "in=notin",
        ] {
            assert!(check_selector(ok).is_ok(), "{ok}: {:?}", check_selector(ok));
        }
        for bad in [
            "",
            "a=b=c",
            "env in a",
            "env in ()",
            "(",
            ")",
            "a b",
            "a,",
            ",a",
            "a>1",
            "a<1",
            "-a=b",
            "a=-b",
            "a/b/c=d",
            "Bad_Prefix/x=y",
            "/x",
            "x/",
            "a in (b",
            "a in (b))",
            "a in ((b))",
            "a=b c",
            &"k".repeat(64),
            &format!("a={}", "v".repeat(64)),
        ] {
            assert!(check_selector(bad).is_err(), "{bad}");
        }
    }
}
