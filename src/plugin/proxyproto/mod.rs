//! The `proxyproto` plugin: PROXY protocol (v1 and v2) headers before a server block's
//! connections and datagrams, as CoreDNS 1.14.7's: from the sources it allows, the client
//! address the chain sees (acl, log, view, metrics) becomes the one the header names. Not in
//! the query path: the listeners read it ([`crate::chain::ProxyProtocol`]); the header reading
//! is `crate::server::proxy`. See this folder's README.

pub mod setup;

pub use setup::ProxyprotoConfig;
