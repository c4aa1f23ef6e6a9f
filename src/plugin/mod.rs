//! Plugins: each owns one folder with its Corefile setup and its handler, as CoreDNS's do.
//!
//! The order in which a query passes through a server block's plugins is fixed here, in
//! [`CHAIN_ORDER`], whatever order the Corefile writes them in (as CoreDNS's `plugin.cfg`).
//! [`Chain`] is that order made code.

pub mod health;
pub mod kubernetes;
pub mod log;
pub mod metrics;
pub mod ready;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};

use crate::dns::{Answer, Outcome};

/// The query path, first to last. Directives not in this list are not in the query path
/// (`bind`, `health`, `ready`, `reload`) or not supported.
pub const CHAIN_ORDER: &[&str] = &[
    "prometheus",
    "errors",
    "log",
    "loadbalance",
    "autopath",
    "cache",
    "rewrite",
    "hosts",
    "kubernetes",
    "loop",
    "forward",
];

/// Directives cluster-dns implements today.
pub const IMPLEMENTED: &[&str] = &["bind", "kubernetes"];

/// CoreDNS directives that cluster-dns recognises but does not implement yet: a Corefile that
/// uses one fails to start with a message that says so, rather than "unknown directive".
pub const NOT_YET_IMPLEMENTED: &[(&str, &str)] = &[
    ("forward", "forwarding (issue 4)"),
    ("cache", "caching (issue 4)"),
    ("loop", "loop detection (issue 4)"),
    ("loadbalance", "answer shuffling (issue 4)"),
    ("errors", "the errors plugin (issue 5)"),
    ("log", "query logging (issue 5)"),
    ("health", "the /health endpoint (issue 5)"),
    ("ready", "the /ready endpoint (issue 5)"),
    ("prometheus", "metrics (issue 5)"),
    ("reload", "Corefile reload (issue 5)"),
    ("hosts", "the hosts plugin (issue 5)"),
    ("rewrite", "the rewrite plugin (issue 5)"),
    ("autopath", "autopath"),
    ("bufsize", "the bufsize plugin"),
    ("any", "the any plugin"),
    ("chaos", "the chaos plugin"),
    ("debug", "the debug plugin"),
    ("whoami", "the whoami plugin"),
    ("template", "the template plugin"),
    ("k8s_external", "the k8s_external plugin"),
    ("file", "the file plugin"),
    ("auto", "the auto plugin"),
    ("secondary", "the secondary plugin"),
    ("transfer", "zone transfer"),
    ("dnssec", "DNSSEC signing"),
    ("acl", "the acl plugin"),
    ("local", "the local plugin"),
    ("metadata", "the metadata plugin"),
    ("nsid", "the nsid plugin"),
    ("timeouts", "the timeouts plugin"),
    ("tls", "DNS over TLS"),
    ("view", "the view plugin"),
    ("minimal", "the minimal plugin"),
    ("root", "the root plugin"),
    ("trace", "the trace plugin"),
    ("dns64", "the dns64 plugin"),
    ("geoip", "the geoip plugin"),
    ("header", "the header plugin"),
    ("cancel", "the cancel plugin"),
    ("sign", "the sign plugin"),
    ("grpc", "the grpc plugin"),
    ("erratic", "the erratic plugin"),
    ("clouddns", "the clouddns plugin"),
    ("route53", "the route53 plugin"),
    ("azure", "the azure plugin"),
    ("etcd", "the etcd plugin"),
    ("pprof", "the pprof plugin"),
    ("dnstap", "the dnstap plugin"),
    ("multisocket", "the multisocket plugin"),
];

/// What the chain decided for one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An authoritative answer from the cluster zone.
    Authoritative(Answer),
    /// No plugin wrote an answer: the server answers this rcode with no records.
    Rcode(ResponseCode),
}

/// The plugins of one server block, applied in [`CHAIN_ORDER`].
#[derive(Debug, Clone, Default)]
pub struct Chain {
    /// The `kubernetes` plugin, if the block has one.
    pub kubernetes: Option<kubernetes::Kubernetes>,
}

impl Chain {
    /// Passes the question along the chain. A question no plugin answers gets SERVFAIL, as in
    /// CoreDNS when there is no next plugin.
    pub fn serve(&self, qname: &Name, qtype: RecordType) -> Reply {
        if let Some(k) = &self.kubernetes {
            match k.serve(qname, qtype) {
                Outcome::Answer(answer) => return Reply::Authoritative(answer),
                Outcome::Fallthrough => {}
            }
        }
        Reply::Rcode(ResponseCode::ServFail)
    }
}
