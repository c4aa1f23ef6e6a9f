//! The `multisocket` plugin: how many UDP sockets a server block's listeners bind on their
//! port with `SO_REUSEPORT` (the kernel spreads clients over them), each served by its own
//! worker thread, as CoreDNS 1.12's starts that many servers. Not in the query path: the
//! listener reads it ([`crate::chain::ListenerSettings::udp_sockets`]). See this folder's README.

pub mod setup;

pub use setup::MultisocketConfig;
