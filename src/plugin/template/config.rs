//! What a configured `template` directive holds once parsed (`setup.rs` reads the Corefile into
//! it): its rules, each zones, a class, types, a pattern and what to answer; what the handler
//! (`handler.rs`) answers with.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, RecordType};
use regex::Regex;

use super::text::Template;

/// One `template` directive.
#[derive(Debug, Clone)]
pub struct TemplateRule {
    /// The class it answers (`None`: ANY).
    pub class: Option<DNSClass>,
    /// The type it answers (`None`: ANY).
    pub qtype: Option<RecordType>,
    /// The class and type as written, for the metric labels.
    pub labels: (String, String),
    /// Its zones, lower-case and absolute.
    pub zones: Vec<Name>,
    /// The expressions a question name must match (one of them); `.*` by default.
    pub regexes: Vec<Regex>,
    /// The answer, additional and authority templates.
    pub answer: Vec<Template>,
    /// Additional section templates.
    pub additional: Vec<Template>,
    /// Authority section templates.
    pub authority: Vec<Template>,
    /// The rcode of a match.
    pub rcode: ResponseCode,
    /// `fallthrough [ZONES...]`: `None` off; empty for every zone.
    pub fallthrough: Option<Vec<Name>>,
    /// `upstream`: a CNAME answer's target is resolved again through the server, and its
    /// records follow the CNAME.
    pub upstream: bool,
}

/// A block's `template` directives, in file order.
#[derive(Debug, Clone, Default)]
pub struct TemplateConfig {
    /// The templates.
    pub rules: Vec<TemplateRule>,
}
