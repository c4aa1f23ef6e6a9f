//! The `shed` plugin (CoreDNS 1.14): a server block's UDP sockets shed load instead of piling
//! it up. Not in the query path: the UDP transport does it ([`crate::server::Shed`]), the
//! block's setting turns it on ([`crate::chain::ListenerSettings::shed`]). See this folder's
//! README.

pub mod setup;

pub use setup::ShedConfig;
