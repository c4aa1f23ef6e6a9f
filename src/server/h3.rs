//! DNS over HTTP/3 (RFC 8484 over RFC 9114): an `https3://` listener, as CoreDNS 1.13.2 added
//! it, served with quinn and the `h3` crate on one UDP socket. TLS 1.3 with the ALPN protocol
//! `h3`; `POST /dns-query` with an `application/dns-message` body and
//! `GET /dns-query?dns=BASE64URL` are answered through [`DnsHandler::answer_into`] as DNS over
//! HTTPS is (the same path checks, parameter decoding and `cache-control` as
//! `tcp::doh`; no truncation; the `proto` label is `tcp`).
//!
//! What a client can make the server hold, and its bound (the `quic://` listener's, from
//! [`QuicLimits`]; CoreDNS caps DoH3 connections as it caps DoQ's, #8187):
//! * Connections: at most [`QuicLimits::max_connections`] open or in their handshake; past it a
//!   new one is refused before its handshake. Counted as `quic://`'s are, under the listener's
//!   `server` label: `cluster_dns_quic_connections_{open,limit,refused_total}`.
//! * Requests: at most [`QuicLimits::max_streams`] open at once per connection (QUIC stream
//!   credit); a client's control and QPACK streams are the only unidirectional ones it gets.
//! * Requests being answered: at most [`QuicLimits::workers`] per listener.
//! * Bytes: a request body is read up to one largest DNS message (65,535 bytes), a request's
//!   header section up to 16 KiB.
//! * Time: a request must arrive whole within [`QuicLimits::read_timeout`], an answer be
//!   written within [`QuicLimits::write_timeout`], and an idle connection is closed after
//!   [`QuicLimits::idle_timeout`].

use std::net::SocketAddr;
use std::sync::Arc;

use h3::server::RequestStream;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::{Buf, Bytes};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::rustls;

use super::error::ServerError;
use super::handler::DnsHandler;
use super::quic::{Admitted, QuicLimits, QuicListener, accept_until, bind_quic_with, handshake};
use super::route::RouterCell;
use super::tcp::doh::{DNS_MESSAGE, MAX_MESSAGE, PATH, get_query, is_dns_message, least_ttl};
use crate::proto::Transport;

/// The ALPN protocol of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";
/// Unidirectional streams a client may open: its control stream, the two QPACK streams, and
/// room for a grease stream or two.
const UNI_STREAMS: u32 = 8;
/// The largest header section read (HTTP/3's SETTINGS_MAX_FIELD_SECTION_SIZE).
const MAX_FIELD_SECTION: u64 = 16 << 10;

/// Binds an `https3://` listener on `addr` with `tls` and `limits`.
pub fn bind_h3(
    addr: SocketAddr,
    tls: &rustls::ServerConfig,
    limits: &QuicLimits,
) -> Result<QuicListener, ServerError> {
    bind_quic_with(addr, tls, limits, ALPN, UNI_STREAMS)
}

/// What a listener's connections share.
struct Shared {
    handler: DnsHandler,
    limits: QuicLimits,
    workers: Arc<Semaphore>,
}

/// Serves `listener` with `router` until `shutdown` completes, then closes its connections.
pub async fn serve_h3(
    router: RouterCell,
    listener: QuicListener,
    limits: QuicLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let shared = Arc::new(Shared {
        handler: DnsHandler::new(router),
        workers: Arc::new(Semaphore::new(limits.workers)),
        limits,
    });
    let limits = shared.limits.clone();
    // H3_NO_ERROR (RFC 9114 §8.1) when the listener stops.
    accept_until(listener.endpoint, &limits, 0x100, shutdown, |incoming, permit| {
        tokio::spawn(connection(incoming, permit, shared.clone()));
    })
    .await;
    Ok(())
}

/// One connection: its handshake and HTTP/3 setup, then a task per request while a worker is
/// free.
async fn connection(incoming: quinn::Incoming, _permit: OwnedSemaphorePermit, shared: Arc<Shared>) {
    let _admitted = Admitted::count(shared.limits.metrics.as_ref());
    let Some(conn) = handshake(incoming, "DNS-over-HTTP/3").await else {
        return;
    };
    let src = conn.remote_address();
    let built = h3::server::builder()
        .max_field_section_size(MAX_FIELD_SECTION)
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await;
    let mut h3 = match built {
        Ok(h) => h,
        Err(error) => {
            tracing::trace!(%error, "DNS-over-HTTP/3 connection setup failed");
            return;
        }
    };
    // Bounded by the connection: accept fails or ends once it is closed or idles out.
    loop {
        let resolver = match h3.accept().await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(error) => {
                tracing::trace!(%error, "DNS-over-HTTP/3 connection ended");
                return;
            }
        };
        let Ok(worker) = shared.workers.clone().acquire_owned().await else {
            return;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let read = tokio::time::timeout(shared.limits.read_timeout, resolver.resolve_request()).await;
            let Ok(Ok((req, stream))) = read else {
                return;
            };
            request(req, stream, src, worker, &shared).await;
        });
    }
}

/// One request: its query (from the URL or the body), answered; or an HTTP error status.
async fn request<S>(
    req: Request<()>,
    mut stream: RequestStream<S, Bytes>,
    src: SocketAddr,
    _worker: OwnedSemaphorePermit,
    shared: &Shared,
) where
    S: h3::quic::BidiStream<Bytes>,
{
    let query = tokio::time::timeout(shared.limits.read_timeout, query_of(&req, &mut stream)).await;
    let reply = match query {
        Ok(Ok(query)) => {
            let mut out = Vec::with_capacity(512);
            match shared
                .handler
                .answer_into(&query, src, Transport::Tcp, &mut out)
                .await
            {
                Some(_) => Ok(out),
                // The chain chose not to answer (acl's drop): no DNS message to send.
                None => Err((StatusCode::FORBIDDEN, "no answer")),
            }
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err((StatusCode::REQUEST_TIMEOUT, "the request did not arrive in time")),
    };
    let written = tokio::time::timeout(shared.limits.write_timeout, respond(&mut stream, reply)).await;
    if !matches!(written, Ok(Ok(()))) {
        tracing::trace!("DNS-over-HTTP/3 answer not written");
    }
}

/// The DNS message a request carries, or the status that refuses it.
async fn query_of<S>(
    req: &Request<()>,
    stream: &mut RequestStream<S, Bytes>,
) -> Result<Vec<u8>, (StatusCode, &'static str)>
where
    S: h3::quic::BidiStream<Bytes>,
{
    if req.uri().path() != PATH {
        return Err((StatusCode::NOT_FOUND, "DNS over HTTPS is served on /dns-query"));
    }
    match *req.method() {
        Method::GET => {
            get_query(req.uri().query().unwrap_or("")).map_err(|why| (StatusCode::BAD_REQUEST, why))
        }
        Method::POST => {
            if !is_dns_message(req.headers().get(CONTENT_TYPE)) {
                return Err((
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "the body must be application/dns-message",
                ));
            }
            let mut body = Vec::new();
            while let Some(mut chunk) = stream
                .recv_data()
                .await
                .map_err(|_| (StatusCode::BAD_REQUEST, "the body could not be read"))?
            {
                if body.len() + chunk.remaining() > MAX_MESSAGE {
                    return Err((
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "a DNS message is at most 65535 bytes",
                    ));
                }
                while chunk.has_remaining() {
                    let part = chunk.chunk();
                    body.extend_from_slice(part);
                    let n = part.len();
                    chunk.advance(n);
                }
            }
            Ok(body)
        }
        _ => Err((StatusCode::METHOD_NOT_ALLOWED, "use GET or POST")),
    }
}

/// Sends the answer (200, `application/dns-message`, `cache-control: max-age` of its least
/// TTL) or the refusal, and ends the stream.
async fn respond<S>(
    stream: &mut RequestStream<S, Bytes>,
    reply: Result<Vec<u8>, (StatusCode, &'static str)>,
) -> Result<(), h3::error::StreamError>
where
    S: h3::quic::BidiStream<Bytes>,
{
    let (head, body) = match reply {
        Ok(out) => {
            let mut head = Response::builder()
                .status(StatusCode::OK)
                .header(CONTENT_TYPE, HeaderValue::from_static(DNS_MESSAGE));
            if let Some(ttl) = least_ttl(&out) {
                head = head.header(CACHE_CONTROL, format!("max-age={ttl}"));
            }
            (head, Bytes::from(out))
        }
        Err((code, why)) => (
            Response::builder().status(code),
            Bytes::from_static(why.as_bytes()),
        ),
    };
    let Ok(head) = head.body(()) else {
        return Ok(());
    };
    stream.send_response(head).await?;
    stream.send_data(body).await?;
    stream.finish().await
}
