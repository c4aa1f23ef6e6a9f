//! DNS over HTTPS to upstreams (RFC 8484): `forward . https://ADDR[/PATH]`. HTTP/2 over TLS
//! (ALPN `h2`, nothing else is offered), with the `tls` and `tls_servername` settings of DNS
//! over TLS. Each question is one request: `POST PATH` with the query as an
//! `application/dns-message` body (the default), or with `doh_method GET`,
//! `GET PATH?dns=BASE64URL` (the query in base64url without padding). The query's ID is 0, as
//! RFC 8484 asks; the reply must be `200` with at most 65,535 bytes of body.
//!
//! Connections are reused: HTTP/2 carries many requests at once on one connection, so a
//! question takes the most recently used open connection of its upstream, and a new one is
//! opened only when none is open, young enough (used within `expire`, opened within
//! `max_age`) and ready; one at a time, the questions arriving meanwhile waiting to share it. At most `max_idle_conns` (default [`MAX_CONNS_PER_UPSTREAM`])
//! connections are kept per upstream (a connection opened beyond that serves its request
//! and is closed), shown by `cluster_dns_forward_https_idle_connections`; reuse and new
//! connections are counted in `coredns_proxy_conn_cache_{hits,misses}_total{proto="https"}`. At
//! most [`MAX_BUSY_PER_UPSTREAM`] requests are in flight per upstream (more wait).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::client::conn::http2::{self, SendRequest};
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::rustls::pki_types::ServerName;

use super::metrics::ConnCounters;
use super::tls::tcp_connect;

/// Connections kept per upstream when `max_idle_conns` is not given.
pub const MAX_CONNS_PER_UPSTREAM: usize = 16;
/// Requests in flight at once per upstream.
pub const MAX_BUSY_PER_UPSTREAM: usize = 64;
/// The largest reply body taken (a DNS message's limit).
pub const MAX_REPLY_BYTES: usize = 65_535;
/// The media type of a DNS message over HTTP.
pub const DNS_MESSAGE: &str = "application/dns-message";

/// `doh_method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DohMethod {
    /// `POST` with the query as the body (the default, as CoreDNS's).
    #[default]
    Post,
    /// `GET` with the query in the `dns` parameter.
    Get,
}

/// How one upstream's connections are made and kept.
#[derive(Debug, Clone)]
pub struct DohOptions {
    /// The authority of the request URIs (`host:port`).
    pub authority: String,
    /// The path (and query) requests go to.
    pub path: String,
    /// `doh_method`.
    pub method: DohMethod,
    /// A connection unused this long is closed (`expire`).
    pub expire: Duration,
    /// A connection this old is closed, used or not (`max_age`).
    pub max_age: Option<Duration>,
    /// Connections kept (`max_idle_conns`).
    pub max_conns: usize,
    /// `source_address`.
    pub source: Option<IpAddr>,
}

struct Conn {
    sender: SendRequest<Full<Bytes>>,
    born: Instant,
    used: Instant,
}

/// The HTTPS side of one upstream: how to connect, and its open connections.
pub struct DohTransport {
    connector: TlsConnector,
    name: ServerName<'static>,
    options: DohOptions,
    /// Open connections, most recently used last.
    conns: Mutex<Vec<Conn>>,
    busy: tokio::sync::Semaphore,
    /// Held while a connection is being opened.
    opening: tokio::sync::Mutex<()>,
    counters: OnceLock<ConnCounters>,
}

/// The request that carries `query` to the upstream of `o` (RFC 8484 section 4.1).
pub fn build_request(o: &DohOptions, query: &[u8]) -> Result<Request<Full<Bytes>>, hyper::http::Error> {
    let builder = Request::builder().header(ACCEPT, DNS_MESSAGE);
    match o.method {
        DohMethod::Post => builder
            .method(Method::POST)
            .uri(format!("https://{}{}", o.authority, o.path))
            .header(CONTENT_TYPE, DNS_MESSAGE)
            .body(Full::new(Bytes::copy_from_slice(query))),
        DohMethod::Get => {
            let sep = if o.path.contains('?') { '&' } else { '?' };
            let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(query);
            builder
                .method(Method::GET)
                .uri(format!("https://{}{}{sep}dns={b64}", o.authority, o.path))
                .body(Full::new(Bytes::new()))
        }
    }
}

impl std::fmt::Debug for DohTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DohTransport")
            .field("name", &self.name)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl DohTransport {
    /// The transport with `config` (its ALPN replaced by `h2`); the certificate must name
    /// `server_name` (the address when `None`).
    pub fn new(
        config: &ClientConfig,
        addr: SocketAddr,
        server_name: Option<&str>,
        options: DohOptions,
    ) -> Result<Self, String> {
        let name = match server_name {
            Some(n) => ServerName::try_from(n.to_owned()).map_err(|_| format!("'{n}' is not a DNS name"))?,
            None => ServerName::IpAddress(addr.ip().into()),
        };
        let mut config = config.clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            name,
            options,
            conns: Mutex::new(Vec::new()),
            busy: tokio::sync::Semaphore::new(MAX_BUSY_PER_UPSTREAM),
            opening: tokio::sync::Mutex::new(()),
            counters: OnceLock::new(),
        })
    }

    /// Counts reused connections, new ones and the kept ones in `counters` from now on.
    pub fn count_into(&self, counters: ConnCounters) {
        let _ = self.counters.set(counters);
    }

    /// Connections kept now.
    pub fn kept(&self) -> usize {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn gauge(&self, n: usize) {
        if let Some(c) = self.counters.get() {
            c.idle.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// The most recently used connection still open, ready and young enough (the others are
    /// closed here), marked used now.
    fn reuse(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let o = &self.options;
        conns.retain(|c| {
            !c.sender.is_closed()
                && now.duration_since(c.used) < o.expire
                && o.max_age.is_none_or(|m| now.duration_since(c.born) < m)
        });
        let found = conns.iter_mut().rev().find(|c| c.sender.is_ready()).map(|c| {
            c.used = now;
            c.sender.clone()
        });
        conns.sort_by_key(|c| c.used);
        self.gauge(conns.len());
        found
    }

    /// A new connection to `addr`, kept for reuse when there is room.
    async fn open(&self, addr: SocketAddr) -> std::io::Result<SendRequest<Full<Bytes>>> {
        let tcp = tcp_connect(addr, self.options.source).await?;
        let _ = tcp.set_nodelay(true);
        let tls = self.connector.connect(self.name.clone(), tcp).await?;
        if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
            return Err(std::io::Error::other(
                "the upstream did not agree to HTTP/2 (ALPN h2)",
            ));
        }
        let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
        // Ends when the server closes the connection or every sender is dropped.
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%e, "DNS-over-HTTPS upstream connection ended");
            }
        });
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        if conns.len() < self.options.max_conns {
            let now = Instant::now();
            conns.push(Conn {
                sender: sender.clone(),
                born: now,
                used: now,
            });
        }
        self.gauge(conns.len());
        Ok(sender)
    }

    /// Sends `query` (its ID 0) to `addr` and returns the reply's bytes: on a kept connection
    /// when there is one, else on a new one. One connection is opened at a time per upstream:
    /// the questions that arrive meanwhile wait for it and share it (HTTP/2 multiplexes them),
    /// so a burst opens one connection, not one per question.
    pub async fn exchange(&self, addr: SocketAddr, query: &[u8]) -> std::io::Result<Vec<u8>> {
        let _permit = self
            .busy
            .acquire()
            .await
            .map_err(|_| std::io::Error::other("the upstream's transport is closed"))?;
        if let Some(sender) = self.reuse()
            && let Ok(reply) = self.request(sender, query).await
        {
            self.count(true);
            return Ok(reply);
        }
        let (sender, reused) = {
            let _opening = self.opening.lock().await;
            match self.reuse() {
                Some(sender) => (sender, true),
                None => (self.open(addr).await?, false),
            }
        };
        let reply = self.request(sender, query).await?;
        self.count(reused);
        Ok(reply)
    }

    /// Counts a connection reused (`hit`) or opened.
    fn count(&self, hit: bool) {
        if let Some(c) = self.counters.get() {
            if hit { c.hits.inc() } else { c.misses.inc() }
        }
    }

    async fn request(&self, mut sender: SendRequest<Full<Bytes>>, query: &[u8]) -> std::io::Result<Vec<u8>> {
        let req = build_request(&self.options, query).map_err(std::io::Error::other)?;
        sender.ready().await.map_err(std::io::Error::other)?;
        let resp = sender.send_request(req).await.map_err(std::io::Error::other)?;
        if resp.status() != StatusCode::OK {
            return Err(std::io::Error::other(format!("HTTP status {}", resp.status())));
        }
        let body = Limited::new(resp.into_body(), MAX_REPLY_BYTES)
            .collect()
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(body.to_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(method: DohMethod, path: &str) -> DohOptions {
        DohOptions {
            authority: "127.0.0.1:8443".into(),
            path: path.into(),
            method,
            expire: Duration::from_secs(10),
            max_age: None,
            max_conns: 1,
            source: None,
        }
    }

    #[tokio::test]
    async fn get_and_post_requests_are_rfc_8484s() {
        // 13 bytes: base64 of it needs padding, which GET leaves out.
        let query = b"\x00\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xfb";
        let get = build_request(&options(DohMethod::Get, "/dns-query"), query).unwrap();
        assert_eq!(get.method(), Method::GET);
        assert_eq!(
            get.uri().to_string(),
            "https://127.0.0.1:8443/dns-query?dns=AAABAAABAAAAAAAA-w"
        );
        assert_eq!(get.headers()[ACCEPT], DNS_MESSAGE);
        let get = build_request(&options(DohMethod::Get, "/resolve?ct"), query).unwrap();
        assert_eq!(get.uri().query(), Some("ct&dns=AAABAAABAAAAAAAA-w"));
        let post = build_request(&options(DohMethod::Post, "/custom"), query).unwrap();
        assert_eq!((post.method(), post.uri().path()), (&Method::POST, "/custom"));
        assert_eq!(post.headers()[CONTENT_TYPE], DNS_MESSAGE);
        let body = post.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], query);
    }
}
