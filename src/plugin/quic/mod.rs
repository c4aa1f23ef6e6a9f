//! The `quic` plugin: the stream bounds of a `quic://` server block's listeners (DNS over
//! QUIC, RFC 9250), as CoreDNS 1.14.7's: how many streams one connection may have open at once
//! (`max_streams`) and how many streams the listener answers at once across its connections
//! (`worker_pool_size`). Not in the query path: the listener reads them
//! ([`crate::chain::QuicOptions`]); the serving is `crate::server::quic`. See this folder's
//! README.

pub mod setup;

pub use setup::QuicConfig;
