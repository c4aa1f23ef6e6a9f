//! DNS over HTTPS (RFC 8484): one accepted connection of an `https://` listener, HTTP/2 when
//! TLS negotiated `h2`, else HTTP/1.1. `POST /dns-query` with an `application/dns-message` body
//! and `GET /dns-query?dns=BASE64URL` are answered through [`DnsHandler::answer_into`] as DNS
//! over TCP is (no truncation; the `proto` label is `tcp`, as CoreDNS counts DoH).
//!
//! The TCP listener's bounds hold here: the connection takes a slot in the listener's
//! [`Slots`](super::slots::Slots) (evicted when idle at the limit), a body's bytes beyond the
//! first chunk come out of the listener's budget, a request must arrive whole within the
//! message deadline, at most [`MAX_STREAMS`] requests of a connection are answered at once, and
//! a connection with none for the idle timeout is closed.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::budget::{FIRST_CHUNK, Reservation};
use super::shared::Shared;
use super::slots::Slot;
use crate::proto::Transport;
use crate::telemetry::tcp::{CloseReason, ListenerTcpMetrics};

/// The path DNS over HTTPS is served on (RFC 8484's example, and CoreDNS's only path).
pub const PATH: &str = "/dns-query";
/// The media type of a DNS message over HTTP.
pub const DNS_MESSAGE: &str = "application/dns-message";
/// Requests of one connection answered at once (HTTP/2 streams).
pub const MAX_STREAMS: u32 = 32;
/// The largest DNS message.
pub(crate) const MAX_MESSAGE: usize = 65_535;

/// The requests of one connection: how many are being answered, and when the last finished.
///
/// Invariant: `in_flight` counts the requests whose service future started and has not
/// finished; `idle_since` is only written when it falls to zero, under its lock.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
    changed: Notify,
}

impl Activity {
    /// Counts a request in until the guard is dropped: when it is answered, and also when
    /// HTTP/2 drops its future because the client reset the stream (without the guard such a
    /// request stayed counted, and its connection never idled out nor could be evicted).
    fn start<'a>(&'a self, slot: &'a Slot, metrics: Option<&'a ListenerTcpMetrics>) -> Answering<'a> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        slot.busy();
        if let Some(m) = metrics {
            m.doh_request_started();
        }
        Answering {
            activity: self,
            slot,
            metrics,
        }
    }

    fn finish(&self, slot: &Slot) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Ok(mut t) = self.idle_since.lock() {
                *t = Instant::now();
            }
            slot.waiting();
        }
        self.changed.notify_one();
    }

    /// When the connection has been idle long enough to close, if nothing is in flight.
    fn idle_deadline(&self, idle_timeout: std::time::Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        self.idle_since.lock().ok().map(|t| *t + idle_timeout)
    }
}

/// A request being answered, from [`Activity::start`] until dropped.
struct Answering<'a> {
    activity: &'a Activity,
    slot: &'a Slot,
    metrics: Option<&'a ListenerTcpMetrics>,
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.activity.finish(self.slot);
        if let Some(m) = self.metrics {
            m.doh_request_ended();
        }
    }
}

/// Serves one connection until the client closes it, it idles out, it is evicted or the
/// listener stops.
pub(super) async fn connection<S>(io: S, src: SocketAddr, shared: Arc<Shared>, slot: Slot, h2: bool)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let slot = Arc::new(slot);
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        idle_since: Mutex::new(Instant::now()),
        changed: Notify::new(),
    });
    let service = {
        let (shared, slot, activity) = (shared.clone(), slot.clone(), activity.clone());
        service_fn(move |req: Request<Incoming>| {
            let (shared, slot, activity) = (shared.clone(), slot.clone(), activity.clone());
            async move {
                let _answering = activity.start(&slot, shared.limits.metrics.as_ref());
                Ok::<_, Infallible>(answer(req, src, &shared).await)
            }
        })
    };
    let io = TokioIo::new(io);
    let deadline = shared.limits.message_deadline;
    if h2 {
        let conn = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .max_concurrent_streams(MAX_STREAMS)
            .max_header_list_size(16 << 10)
            .serve_connection(io, service);
        drive(conn, |c| c.graceful_shutdown(), &shared, &slot, &activity).await;
    } else {
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(deadline)
            .max_buf_size(16 << 10)
            .serve_connection(io, service);
        drive(conn, |c| c.graceful_shutdown(), &shared, &slot, &activity).await;
    }
}

/// Polls `conn` to its end; asks it to finish gracefully (answers in flight are sent) when the
/// listener stops, the slot is taken back or the connection idled out, and gives it the
/// message deadline to do so.
async fn drive<C>(conn: C, graceful: impl Fn(Pin<&mut C>), shared: &Shared, slot: &Slot, activity: &Activity)
where
    C: Future<Output = hyper::Result<()>>,
{
    let mut conn = std::pin::pin!(conn);
    let mut stopping = shared.stopping.clone();
    let reason = loop {
        let idle = activity.idle_deadline(shared.limits.idle_timeout);
        tokio::select! {
            biased;
            done = conn.as_mut() => {
                if let Err(error) = done {
                    tracing::trace!(%error, "DNS-over-HTTPS connection ended");
                }
                return;
            }
            () = slot.evicted() => break Some(CloseReason::Limit),
            _ = stopping.wait_for(|stop| *stop) => break None,
            () = activity.changed.notified() => {}
            () = tokio::time::sleep_until(idle.unwrap_or_else(Instant::now)), if idle.is_some() => {
                if activity.idle_deadline(shared.limits.idle_timeout).is_some_and(|t| t <= Instant::now()) {
                    break Some(CloseReason::Idle);
                }
            }
        }
    };
    if let Some(reason) = reason {
        shared.closed(reason);
    }
    graceful(conn.as_mut());
    let _ = tokio::time::timeout(shared.limits.message_deadline, conn).await;
}

/// The response to one request.
async fn answer(req: Request<Incoming>, src: SocketAddr, shared: &Shared) -> Response<Full<Bytes>> {
    if req.uri().path() != PATH {
        return status(StatusCode::NOT_FOUND, "DNS over HTTPS is served on /dns-query");
    }
    let (query, _held) = match *req.method() {
        Method::GET => match get_query(req.uri().query().unwrap_or("")) {
            Ok(q) => (q, None),
            Err(why) => return status(StatusCode::BAD_REQUEST, why),
        },
        Method::POST => {
            if !is_dns_message(req.headers().get(CONTENT_TYPE)) {
                return status(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "the body must be application/dns-message",
                );
            }
            match tokio::time::timeout(shared.limits.message_deadline, read_body(req.into_body(), shared))
                .await
            {
                Ok(Ok((q, held))) => (q, Some(held)),
                Ok(Err(e)) => return e,
                Err(_) => return status(StatusCode::REQUEST_TIMEOUT, "the body did not arrive in time"),
            }
        }
        _ => return status(StatusCode::METHOD_NOT_ALLOWED, "use GET or POST"),
    };
    let mut out = Vec::with_capacity(512);
    match shared
        .handler
        .answer_into(&query, src, Transport::Tcp, &mut out)
        .await
    {
        Some(_) => {
            let ttl = least_ttl(&out);
            let mut r = Response::new(Full::new(Bytes::from(out)));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(DNS_MESSAGE));
            if let Some(ttl) = ttl
                && let Ok(v) = HeaderValue::from_str(&format!("max-age={ttl}"))
            {
                r.headers_mut().insert(CACHE_CONTROL, v);
            }
            r
        }
        // The chain chose not to answer (acl's drop): no DNS message to send.
        None => status(StatusCode::FORBIDDEN, "no answer"),
    }
}

/// True when a POST's `content-type` is `application/dns-message` (parameters allowed).
pub(crate) fn is_dns_message(content_type: Option<&HeaderValue>) -> bool {
    content_type.and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case(DNS_MESSAGE))
    })
}

/// The DNS message of `GET /dns-query?dns=...`: base64url, padding optional.
pub(crate) fn get_query(query: &str) -> Result<Vec<u8>, &'static str> {
    let value = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("dns="))
        .ok_or("the dns parameter is missing")?;
    if value.len() > MAX_MESSAGE * 4 / 3 + 4 {
        return Err("the dns parameter is too long");
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(value.trim_end_matches('='))
        .map_err(|_| "the dns parameter is not base64url")
}

/// A POST body, its bytes beyond the first chunk taken from the listener's budget as they
/// arrive.
async fn read_body(
    mut body: Incoming,
    shared: &Shared,
) -> Result<(Vec<u8>, Reservation), Response<Full<Bytes>>> {
    let mut buf = Vec::new();
    let mut held = Reservation::new(shared.budget.clone());
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| status(StatusCode::BAD_REQUEST, "the body could not be read"))?;
        let Ok(data) = frame.into_data() else { continue };
        if buf.len() + data.len() > MAX_MESSAGE {
            return Err(status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "a DNS message is at most 65535 bytes",
            ));
        }
        if !held.resize((buf.len() + data.len()).saturating_sub(FIRST_CHUNK)) {
            shared.closed(CloseReason::Buffer);
            return Err(status(StatusCode::SERVICE_UNAVAILABLE, "busy"));
        }
        buf.extend_from_slice(&data);
    }
    Ok((buf, held))
}

/// The smallest TTL of the answer's records (RFC 8484 §5.1 asks for a freshness lifetime no
/// longer than it); `None` when the message has none.
pub(crate) fn least_ttl(msg: &[u8]) -> Option<u32> {
    use hickory_proto::serialize::binary::BinDecodable;
    let m = hickory_proto::op::Message::from_bytes(msg).ok()?;
    m.answers.iter().chain(m.authorities.iter()).map(|r| r.ttl).min()
}

fn status(code: StatusCode, why: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(why.as_bytes())));
    *r.status_mut() = code;
    r
}
