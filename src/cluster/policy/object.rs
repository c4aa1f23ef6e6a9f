//! A `DNSPolicy` object as DNS needs it: read strictly from its JSON ([`PolicyInfo`],
//! [`Rule`]), with its label selectors ([`Selector`]) and `external.allow` entries
//! ([`Pattern`]). What a malformed object stands for is decided by the store (`super`).

use std::collections::BTreeMap;
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::Name;
use serde::Deserialize;

use super::{KIND, label};
use crate::cluster::ObjectError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SpecIn {
    pod_selector: Option<SelectorIn>,
    visible_namespaces: Option<VisibleIn>,
    external: Option<ExternalIn>,
    action: Option<String>,
    mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VisibleIn {
    names: Option<Vec<String>>,
    selector: Option<SelectorIn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExternalIn {
    allow: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct SelectorIn {
    match_labels: Option<BTreeMap<String, String>>,
    match_expressions: Option<Vec<ExpressionIn>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpressionIn {
    key: String,
    operator: String,
    values: Option<Vec<String>>,
}

/// A Kubernetes label selector (`matchLabels` and `matchExpressions`, all of which must hold).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    equal: Vec<(String, String)>,
    expressions: Vec<(String, Operator)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Operator {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

impl Selector {
    pub(super) fn parse(s: SelectorIn) -> Result<Self, String> {
        let equal = s.match_labels.unwrap_or_default().into_iter().collect();
        let mut expressions = Vec::new();
        for e in s.match_expressions.unwrap_or_default() {
            let values = e.values.unwrap_or_default();
            let op = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(format!(
                        "matchExpressions key {}: {} needs values",
                        e.key, e.operator
                    ));
                }
                "In" => Operator::In(values),
                "NotIn" => Operator::NotIn(values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(format!(
                        "matchExpressions key {}: {} takes no values",
                        e.key, e.operator
                    ));
                }
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(format!(
                        "matchExpressions key {}: unknown operator '{other}' (In, NotIn, Exists, DoesNotExist)",
                        e.key
                    ));
                }
            };
            expressions.push((e.key, op));
        }
        Ok(Self { equal, expressions })
    }

    /// True when `labels` (sorted by key) satisfy every requirement; the empty selector
    /// selects everything.
    pub fn matches(&self, labels: &[(Arc<str>, Arc<str>)]) -> bool {
        self.equal
            .iter()
            .all(|(k, v)| label(labels, k) == Some(v.as_str()))
            && self.expressions.iter().all(|(k, op)| {
                let have = label(labels, k);
                match op {
                    Operator::In(vs) => have.is_some_and(|h| vs.iter().any(|v| v == h)),
                    Operator::NotIn(vs) => have.is_none_or(|h| vs.iter().all(|v| v != h)),
                    Operator::Exists => have.is_some(),
                    Operator::DoesNotExist => have.is_none(),
                }
            })
    }
}

/// An `external.allow` entry: `*` (every name), `*.example.com` (names strictly under
/// example.com) or a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pattern {
    /// Every name.
    Any,
    /// Names strictly under this one.
    Under(Name),
    /// This name.
    Exact(Name),
}

impl Pattern {
    /// Reads one `external.allow` entry.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if t == "*" {
            return Ok(Self::Any);
        }
        let (under, rest) = match t.strip_prefix("*.") {
            Some(r) => (true, r),
            None => (false, t),
        };
        if rest.is_empty() || rest.contains('*') {
            return Err(format!(
                "external.allow '{text}': '*' only as '*' or a leading '*.'"
            ));
        }
        let fqdn = if rest.ends_with('.') {
            rest.to_owned()
        } else {
            format!("{rest}.")
        };
        let name = Name::from_ascii(&fqdn)
            .map_err(|e| format!("external.allow '{text}': {e}"))?
            .to_lowercase();
        Ok(if under {
            Self::Under(name)
        } else {
            Self::Exact(name)
        })
    }

    /// True when `name` is one this entry allows.
    pub fn matches(&self, name: &Name) -> bool {
        match self {
            Self::Any => true,
            Self::Exact(n) => n.num_labels() == name.num_labels() && super::zone_of_ci(n, name),
            Self::Under(n) => name.num_labels() > n.num_labels() && super::zone_of_ci(n, name),
        }
    }
}

/// `Enforce` or `Audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Hidden names are answered as names that do not exist; denied outside names get the
    /// action's rcode and never leave the server.
    Enforce,
    /// Answers as if there were no policy; counts what `Enforce` would deny and records its
    /// pods' outside names.
    Audit,
}

/// What one policy allows the pods it covers (a valid `DNSPolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Which pods of its namespace it covers.
    pub pods: Selector,
    /// The namespaces listed by name (`None`: `visibleNamespaces` absent, every namespace).
    pub namespaces: Option<Vec<String>>,
    /// The namespaces selected by their labels.
    pub namespace_selector: Option<Selector>,
    /// The outside names allowed (`None`: every one).
    pub outside: Option<Vec<Pattern>>,
    /// The rcode of a denied outside name.
    pub action: ResponseCode,
    /// `Enforce` or `Audit`.
    pub mode: Mode,
}

impl Rule {
    /// The rule of the `spec` of a `DNSPolicy` (JSON), or why it is malformed.
    pub fn from_spec(spec: Option<&serde_json::Value>) -> Result<Self, String> {
        let spec: SpecIn = match spec {
            None => return Err("no spec".to_owned()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("spec: {e}"))?,
        };
        let pods = match spec.pod_selector {
            Some(s) => Selector::parse(s).map_err(|e| format!("podSelector: {e}"))?,
            None => Selector::default(),
        };
        let (namespaces, namespace_selector) = match spec.visible_namespaces {
            None => (None, None),
            Some(v) => {
                let names = v
                    .names
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| n.to_ascii_lowercase())
                    .collect();
                let sel = v
                    .selector
                    .map(Selector::parse)
                    .transpose()
                    .map_err(|e| format!("visibleNamespaces.selector: {e}"))?;
                (Some(names), sel)
            }
        };
        let outside = match spec.external.and_then(|e| e.allow) {
            None => None,
            Some(list) => Some(
                list.iter()
                    .map(|p| Pattern::parse(p))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let action = match spec.action.as_deref() {
            None | Some("NXDOMAIN") => ResponseCode::NXDomain,
            Some("REFUSED") => ResponseCode::Refused,
            Some(other) => return Err(format!("action '{other}': NXDOMAIN or REFUSED")),
        };
        let mode = match spec.mode.as_deref() {
            None | Some("Enforce") => Mode::Enforce,
            Some("Audit") => Mode::Audit,
            Some(other) => return Err(format!("mode '{other}': Enforce or Audit")),
        };
        Ok(Self {
            pods,
            namespaces,
            namespace_selector,
            outside,
            action,
            mode,
        })
    }

    /// What a malformed policy stands for: every pod of its namespace, its own namespace
    /// only, no outside name.
    pub(super) fn closed() -> Self {
        Self {
            pods: Selector::default(),
            namespaces: Some(Vec::new()),
            namespace_selector: None,
            outside: Some(Vec::new()),
            action: ResponseCode::NXDomain,
            mode: Mode::Enforce,
        }
    }
}

/// A `DNSPolicy` as the zone keeps it.
#[derive(Debug, Clone)]
pub struct PolicyInfo {
    /// Its namespace (lower-case).
    pub namespace: Arc<str>,
    /// Its name.
    pub name: Arc<str>,
    /// Its rule, or why it is malformed.
    pub rule: Result<Rule, String>,
}

impl PolicyInfo {
    /// Reads a `DNSPolicy` object (JSON, as the API or a manifest gives it). An object without
    /// a name is an error; a malformed spec is kept as malformed (it closes, never opens).
    pub fn from_json(obj: &serde_json::Value) -> Result<Self, ObjectError> {
        let meta = obj.get("metadata");
        let text = |k: &str| meta.and_then(|m| m.get(k)).and_then(serde_json::Value::as_str);
        let name = text("name").unwrap_or_default();
        let namespace = text("namespace").unwrap_or("default").to_ascii_lowercase();
        if name.is_empty() {
            return Err(ObjectError::new(KIND, &namespace, name, "no metadata.name"));
        }
        Ok(Self {
            namespace: Arc::from(namespace.as_str()),
            name: Arc::from(name),
            rule: Rule::from_spec(obj.get("spec")),
        })
    }
}
