//! What a configured `k8s_external` directive holds once parsed (`setup.rs` reads the Corefile into
//! it): its zones, the apex records and the TTL; what the handler (`handler.rs`) answers with.

use hickory_proto::rr::Name;

use crate::corefile::Token;

/// `k8s_external`, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct K8sExternalConfig {
    /// The external zones, lower-case and absolute: the arguments, else the block's zones.
    pub zones: Vec<Name>,
    /// `apex`: the label under each zone that names this server (`dns`).
    pub apex: String,
    /// `ttl`, 0 to 3600.
    pub ttl: u32,
    /// `headless`: headless Services' ready endpoints are served too.
    pub headless: bool,
    /// `fallthrough`: `None` off; empty for every zone.
    pub fallthrough: Option<Vec<Name>>,
    /// The directive's name token, for the error `check` gives.
    pub(super) at: Token,
}
