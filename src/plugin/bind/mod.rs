//! The `bind` plugin: the IP addresses a server block listens on (default: every interface),
//! given as addresses or interface names (each name stands for its addresses when the Corefile
//! is read), less those of an `except` line. Several `bind` lines add up, as in CoreDNS. Not in
//! the query path: the runtime binds the sockets. See this folder's README.

pub mod setup;

pub use setup::BindConfig;
