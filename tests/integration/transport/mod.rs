//! The wire and the listeners: UDP and TCP (sizes, truncation, bad input, abusive TCP
//! clients), DNS over TLS, HTTPS, QUIC and HTTP/3, PROXY protocol, several UDP sockets, stream
//! timeouts, server block keys on several ports.

pub mod doh3;
pub mod doq;
pub mod dot;
pub mod keys;
pub mod multisocket;
pub mod proxyproto;
pub mod serve_tls;
pub mod tcp_limits;
pub mod timeouts;
pub mod wire;
