//! The `chaos` plugin: answers CH-class TXT questions for the server's identity
//! (`version.bind`, `version.server`, `authors.bind`, `hostname.bind`, `id.server`), as
//! CoreDNS's *chaos* does. It is what lets CH questions into its block (it declares the class
//! through the plugin contract). See this folder's README.

pub mod config;
pub mod handler;
pub mod setup;

pub use handler::Chaos;
