//! The accept loop of one stream listener ([`serve_protocol_until`]): it admits each connection
//! into the listener's slots, completes the TLS handshake when the protocol has one, hands the
//! connection to DNS over TCP/TLS or DNS over HTTPS, and drains on shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::connection::connection;
use super::doh;
use super::limits::{TcpLimits, current_nofile, descriptor_ceiling};
use super::protocol::{StreamProtocol, TlsCell};
use super::shared::Shared;
use super::slots::{Admission, Slot, Slots};
use crate::server::handler::DnsHandler;
use crate::server::proxy::{Rewound, read_stream_header};
use crate::telemetry::tcp::CloseReason;

/// Accepts connections on `listener` and serves each, speaking `protocol` within `limits`,
/// until it closes or idles out, and until `shutdown` completes; then it drains: no new
/// connection is accepted, each connection stops reading, the queries already read are answered (each
/// answer written within the message deadline), and it returns once every connection closed.
pub async fn serve_protocol_until(
    listener: TcpListener,
    handler: DnsHandler,
    limits: TcpLimits,
    protocol: StreamProtocol,
    shutdown: impl Future<Output = ()> + Send,
) {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let process_max = descriptor_ceiling(current_nofile());
    tracing::debug!(%addr, max_connections = limits.max_connections, process_max, "TCP limits");
    if let Some(m) = &limits.metrics {
        m.set_limit(limits.max_connections);
    }
    let slots = Slots::new(limits.max_connections, limits.metrics.clone());
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared::new(handler, stopping, limits, protocol, addr));
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => a,
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        match accepted {
            Ok((stream, src)) => match slots.admit(process_max) {
                Admission::Admitted { slot, .. } => {
                    connections.spawn(serve_accepted(stream, src, shared.clone(), slot));
                }
                Admission::Refused => {
                    shared.closed(CloseReason::Limit);
                    drop(stream);
                }
            },
            Err(error) => {
                tracing::debug!(%error, "error accepting a TCP connection");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    while connections.join_next().await.is_some() {}
}

/// One accepted connection, in its listener's protocol.
async fn serve_accepted(mut stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, slot: Slot) {
    let _ = stream.set_nodelay(true);
    // With `proxyproto`, the header comes first (before TLS), within the message deadline.
    let (src, prefix) = match shared.limits.proxy.clone() {
        None => (peer, Vec::new()),
        Some(proxy) => {
            let read = read_stream_header(&mut stream, &proxy, peer);
            match tokio::time::timeout(shared.limits.message_deadline, read).await {
                Ok(Ok(got)) => got,
                Ok(Err(why)) => {
                    tracing::debug!(%peer, ?why, "closing a connection for its PROXY protocol header");
                    return;
                }
                Err(_) => {
                    shared.closed(CloseReason::Deadline);
                    return;
                }
            }
        }
    };
    let stream = Rewound::new(prefix, stream);
    match shared.protocol.clone() {
        StreamProtocol::Tcp => connection(stream, src, shared, slot).await,
        StreamProtocol::Tls(cell) => {
            if let Some(tls) = handshake(&cell, stream, src, &shared).await {
                connection(tls, src, shared, slot).await;
            }
        }
        StreamProtocol::Https(None) => doh::connection(stream, src, shared, slot, false).await,
        StreamProtocol::Https(Some(cell)) => {
            if let Some(tls) = handshake(&cell, stream, src, &shared).await {
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                doh::connection(tls, src, shared, slot, h2).await;
            }
        }
    }
}

/// The server side of a TLS handshake, within the message deadline; `None` (and counted as a
/// deadline close when it timed out) when it did not complete.
async fn handshake<S>(
    cell: &TlsCell,
    stream: S,
    src: SocketAddr,
    shared: &Shared,
) -> Option<tokio_rustls::server::TlsStream<S>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let acceptor = TlsAcceptor::from(cell.load_full());
    match tokio::time::timeout(shared.limits.message_deadline, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(error)) => {
            tracing::debug!(%src, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            shared.closed(CloseReason::Deadline);
            tracing::debug!(%src, "TLS handshake not done within the message deadline");
            None
        }
    }
}
