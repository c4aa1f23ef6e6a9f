//! What a stream listener speaks ([`StreamProtocol`]): DNS over TCP, DNS over TLS or DNS over
//! HTTPS, with the listener's TLS configuration ([`TlsCell`]), which a reload replaces in place.

use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio_rustls::rustls::ServerConfig;

/// A listener's TLS configuration, replaced in place when a reload brings new certificates
/// (connections already open keep theirs).
pub type TlsCell = Arc<ArcSwap<ServerConfig>>;

/// What a stream listener speaks.
#[derive(Debug, Clone, Default)]
pub enum StreamProtocol {
    /// DNS over TCP, each message with its length prefix (RFC 7766).
    #[default]
    Tcp,
    /// DNS over TLS (RFC 7858): the same framing inside TLS.
    Tls(TlsCell),
    /// DNS over HTTPS (RFC 8484) on `/dns-query`; plain HTTP/1.1 without TLS (for a
    /// TLS-terminating proxy in front, as CoreDNS allows).
    Https(Option<TlsCell>),
}

impl StreamProtocol {
    /// DNS over TLS with `config`, offering the `dot` ALPN protocol (RFC 7858 §3.2).
    pub fn dot(config: &ServerConfig) -> Self {
        Self::Tls(Arc::new(ArcSwap::from_pointee(Self::with_alpn(
            config,
            &[b"dot"],
        ))))
    }

    /// DNS over HTTPS, over TLS with `config` (offering `h2` and `http/1.1`), or plain HTTP.
    pub fn doh(config: Option<&ServerConfig>) -> Self {
        Self::Https(
            config.map(|c| Arc::new(ArcSwap::from_pointee(Self::with_alpn(c, &[b"h2", b"http/1.1"])))),
        )
    }

    /// Puts `config` in place of the listener's TLS configuration, keeping its ALPN protocols.
    /// False when this protocol has no TLS to update.
    pub fn update_tls(&self, config: &ServerConfig) -> bool {
        let cell = match self {
            Self::Tls(cell) | Self::Https(Some(cell)) => cell,
            Self::Tcp | Self::Https(None) => return false,
        };
        let alpn = cell.load().alpn_protocols.clone();
        let mut next = config.clone();
        next.alpn_protocols = alpn;
        cell.store(Arc::new(next));
        true
    }

    fn with_alpn(config: &ServerConfig, protocols: &[&[u8]]) -> ServerConfig {
        let mut c = config.clone();
        c.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        c
    }
}
