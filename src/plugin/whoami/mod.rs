//! The `whoami` plugin: answers every question that reaches it with the client's address, port
//! and transport, as CoreDNS's `whoami` does: an empty answer section, and in the additional
//! section an A (or AAAA) record of the client's address owned by the question's name and an
//! SRV record `_udp.<name>` (or `_tcp`) with the client's port, target the root. Its answers
//! depend on the client, so they are never memoized. See this folder's README.

pub mod handler;
pub mod setup;

pub use handler::WhoAmI;
pub use setup::WhoAmIConfig;
