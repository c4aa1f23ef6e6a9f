//! The `tls` plugin: the certificate, key and client-certificate policy of a `tls://` (DNS over
//! TLS) or `https://` (DNS over HTTPS) server block. Not in the query path: it sets its block's
//! `tls` setting (a rustls configuration), which the runtime hands the listener it binds. In a plain
//! `dns://` block it has no effect (as in CoreDNS). See this folder's README.

pub mod setup;

pub use setup::{ClientAuth, TlsConfig};
