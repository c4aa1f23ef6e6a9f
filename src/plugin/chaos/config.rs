//! What a configured `chaos` directive holds once parsed (`setup.rs` reads the Corefile into it):
//! what `version.bind` and `authors.bind` answer; what the handler (`handler.rs`) serves.

/// `chaos`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaosConfig {
    /// What `version.bind` and `version.server` answer.
    pub version: String,
    /// What `authors.bind` answers, one TXT record each.
    pub authors: Vec<String>,
}
