//! The `https3` plugin: the stream bound of an `https3://` server block's listeners (DNS over
//! HTTP/3), as CoreDNS 1.14.7's: how many request streams one connection may have open at once
//! (`max_streams`; 0 keeps the QUIC transport's default, as in CoreDNS). Not in the query path:
//! the listener reads it ([`crate::chain::QuicOptions`]); the serving is `crate::server::h3`.
//! See this folder's README.

pub mod setup;

pub use setup::Https3Config;
