//! What a configured `dnspolicy` directive holds once parsed (`setup.rs` reads the Corefile into
//! it): its zones and what a client without a policy gets; what the handler (`handler.rs`) decides
//! with.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::cluster::ClusterSource;
use crate::corefile::Location;

/// What a client no pod is known at gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmapped {
    /// Every name, as if no policy existed.
    Allow,
    /// REFUSED, for every name.
    Deny,
}

/// A parsed `dnspolicy` directive.
#[derive(Debug, Clone)]
pub struct DnsPolicyConfig {
    /// `unmapped`.
    pub unmapped: Unmapped,
    /// `observed ADDRESS`.
    pub observed: Option<SocketAddr>,
    /// Where the directive is written (its errors name it).
    pub at: Location,
    /// The cluster source the built plugin reads, for the `observed` page (set at build; a
    /// reload's build sets its own).
    pub(super) source: Arc<Mutex<Option<Arc<ClusterSource>>>>,
}
