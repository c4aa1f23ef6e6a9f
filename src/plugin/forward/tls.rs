//! DNS over TLS to upstreams (RFC 7858): `forward . tls://ADDR` with `tls [CERT KEY] [CA]` and
//! `tls_servername`; and the same keeping of connections for plain DNS over TCP
//! ([`TlsTransport::plain`]). Owns the TLS settings read from the Corefile, the rustls client
//! configuration built from them, and each upstream's idle connections: a connection that
//! answered goes back to its upstream's pool and is reused until it has been idle for `expire`
//! (and, with `max_age`, until it is that old; at most [`MAX_IDLE_PER_UPSTREAM`] kept, or
//! `max_idle_conns`; more are closed). At most
//! [`MAX_BUSY_PER_UPSTREAM`] exchanges run at once per upstream (more wait for one to end), so
//! the connections a burst of questions opens are bounded too.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use super::metrics::ConnCounters;

/// The default DNS-over-TLS port.
pub const DOT_PORT: u16 = 853;
/// Idle connections kept per upstream.
pub const MAX_IDLE_PER_UPSTREAM: usize = 16;
/// Exchanges (each on its own connection) in flight at once per upstream.
pub const MAX_BUSY_PER_UPSTREAM: usize = 64;

/// The TLS settings of a `forward` (files already read, so the Corefile's errors name them).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSettings {
    /// `tls CERT KEY [CA]`: the client certificate chain and key, PEM.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// `tls [CERT KEY] CA`: the CA that verifies upstreams, PEM; the system's roots when absent.
    pub ca: Option<Vec<u8>>,
    /// `tls_servername`: the name upstream certificates must carry; the upstream's IP otherwise.
    pub server_name: Option<String>,
}

/// A rustls client configuration from `settings`; the error says what is wrong.
pub fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    match &settings.ca {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("the CA file: {e}"))?;
                roots.add(cert).map_err(|e| format!("the CA file: {e}"))?;
            }
            if roots.is_empty() {
                return Err("the CA file holds no certificate".into());
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
        }
    }
    let builder = ClientConfig::builder().with_root_certificates(roots);
    let config = match &settings.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the certificate file: {e}"))?;
            if chain.is_empty() {
                return Err("the certificate file holds no certificate".into());
            }
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the key file: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the certificate and key: {e}"))?
        }
    };
    Ok(Arc::new(config))
}

/// A kept connection: plain TCP or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// The stream side of one upstream, DNS over TLS or plain DNS over TCP: how to connect, and
/// its idle connections.
pub struct TlsTransport {
    /// `None`: plain TCP.
    connector: Option<TlsConnector>,
    name: ServerName<'static>,
    expire: Duration,
    /// `source_address`: the local address its connections are made from.
    source: Option<IpAddr>,
    /// Idle connections kept at most ([`MAX_IDLE_PER_UPSTREAM`], or `max_idle_conns`).
    max_idle: usize,
    /// `max_age`: a connection this old is closed, used or not.
    max_age: Option<Duration>,
    /// Idle connections with the time each went idle and the time it was opened, newest last. Invariant: only connections
    /// whose last exchange completed (no bytes pending) are here; taken out under the lock, so
    /// one connection serves one exchange at a time.
    idle: Mutex<Vec<(Conn, Instant, Instant)>>,
    /// Permits for the exchanges in flight ([`MAX_BUSY_PER_UPSTREAM`]).
    busy: tokio::sync::Semaphore,
    /// This upstream's series, once metrics are attached.
    counters: OnceLock<ConnCounters>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTransport")
            .field("name", &self.name)
            .field("expire", &self.expire)
            .finish_non_exhaustive()
    }
}

/// A TCP connection to `addr`, from `source` (any port) when given: under DNS over TLS, and
/// for plain DNS over TCP.
pub async fn tcp_connect(addr: SocketAddr, source: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = source {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    sock.connect(addr).await
}

impl TlsTransport {
    /// The transport to `addr` with `config`; the certificate must name `server_name` (or the
    /// address when `None`).
    pub fn new(
        config: Arc<ClientConfig>,
        addr: SocketAddr,
        server_name: Option<&str>,
        expire: Duration,
    ) -> Result<Self, String> {
        let name = match server_name {
            Some(n) => ServerName::try_from(n.to_owned())
                .map_err(|_| format!("tls_servername '{n}' is not a DNS name"))?,
            None => ServerName::IpAddress(addr.ip().into()),
        };
        Ok(Self {
            connector: Some(TlsConnector::from(config)),
            name,
            expire,
            source: None,
            max_idle: MAX_IDLE_PER_UPSTREAM,
            max_age: None,
            idle: Mutex::new(Vec::new()),
            busy: tokio::sync::Semaphore::new(MAX_BUSY_PER_UPSTREAM),
            counters: OnceLock::new(),
        })
    }

    /// Plain DNS over TCP to `addr`, its connections kept as DNS over TLS's are.
    pub fn plain(addr: SocketAddr, expire: Duration) -> Self {
        Self {
            connector: None,
            name: ServerName::IpAddress(addr.ip().into()),
            expire,
            source: None,
            max_idle: MAX_IDLE_PER_UPSTREAM,
            max_age: None,
            idle: Mutex::new(Vec::new()),
            busy: tokio::sync::Semaphore::new(MAX_BUSY_PER_UPSTREAM),
            counters: OnceLock::new(),
        }
    }

    /// Makes its connections from `source` (`source_address`) when given.
    pub fn from_source(mut self, source: Option<IpAddr>) -> Self {
        self.source = source;
        self
    }

    /// Keeps at most `max_idle` idle connections (`max_idle_conns`) when given, and closes
    /// connections older than `max_age` when given.
    pub fn with_limits(mut self, max_idle: Option<usize>, max_age: Option<Duration>) -> Self {
        if let Some(n) = max_idle {
            self.max_idle = n;
        }
        self.max_age = max_age;
        self
    }

    /// An idle connection young enough to reuse, if there is one (older ones are closed), and
    /// when it was opened.
    fn take_idle(&self) -> Option<(Conn, Instant)> {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        idle.retain(|(_, since, born)| {
            now.duration_since(*since) < self.expire
                && self.max_age.is_none_or(|m| now.duration_since(*born) < m)
        });
        let taken = idle.pop().map(|(s, _, born)| (s, born));
        self.gauge(idle.len());
        taken
    }

    fn gauge(&self, idle: usize) {
        if let Some(c) = self.counters.get() {
            c.idle.set(i64::try_from(idle).unwrap_or(i64::MAX));
        }
    }

    fn put_idle(&self, stream: Conn, born: Instant) {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push((stream, Instant::now(), born));
        }
        self.gauge(idle.len());
    }

    /// Counts reused connections, new ones and the idle ones in `counters` from now on.
    pub fn count_into(&self, counters: ConnCounters) {
        let _ = self.counters.set(counters);
    }

    /// Sends the framed `query` to `addr` and returns the reply's bytes: on an idle connection
    /// when one is fresh (a new one if that fails before a reply), else on a new connection.
    pub async fn exchange(&self, addr: SocketAddr, query: &[u8]) -> std::io::Result<Vec<u8>> {
        let _permit = self
            .busy
            .acquire()
            .await
            .map_err(|_| std::io::Error::other("the upstream's transport is closed"))?;
        if let Some((mut s, born)) = self.take_idle()
            && let Ok(reply) = round_trip(&mut s, query).await
        {
            if let Some(c) = self.counters.get() {
                c.hits.inc();
            }
            self.put_idle(s, born);
            return Ok(reply);
        }
        if let Some(c) = self.counters.get() {
            c.misses.inc();
        }
        let tcp = tcp_connect(addr, self.source).await?;
        let _ = tcp.set_nodelay(true);
        let mut s = match &self.connector {
            Some(c) => Conn::Tls(Box::new(c.connect(self.name.clone(), tcp).await?)),
            None => Conn::Plain(tcp),
        };
        let born = Instant::now();
        let reply = round_trip(&mut s, query).await?;
        self.put_idle(s, born);
        Ok(reply)
    }
}

async fn round_trip(s: &mut Conn, query: &[u8]) -> std::io::Result<Vec<u8>> {
    match s {
        Conn::Plain(t) => framed(t, query).await,
        Conn::Tls(t) => framed(t.as_mut(), query).await,
    }
}

/// Writes `query` with its length prefix (RFC 1035 4.2.2) and reads one framed reply.
async fn framed<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, query: &[u8]) -> std::io::Result<Vec<u8>> {
    let len = u16::try_from(query.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "query too long"))?;
    let mut out = Vec::with_capacity(query.len() + 2);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(query);
    s.write_all(&out).await?;
    s.flush().await?;
    let mut lenb = [0u8; 2];
    s.read_exact(&mut lenb).await?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(lenb))];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}
