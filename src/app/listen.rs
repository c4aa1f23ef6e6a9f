//! The listeners: binding a listen address's DNS sockets and serving them, and the HTTP
//! listeners, each serving the routes plugins declared on its address
//! ([`crate::chain::HttpRoute`]) with what runs beside them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::sync::oneshot;

use super::build::{ListenKey, server_label};
use super::error::StartError;
use super::state::{HttpListener, Listener, Shared};
use crate::chain::{HttpCtx, HttpRoute, ListenerSettings};
use crate::corefile::Scheme;
use crate::server::tcp::StreamProtocol;
use crate::server::{self, Router, ServerError};

/// What the connections of a listen address speak: plain DNS, or DNS over TLS or HTTPS with
/// `tls` (CoreDNS serves a `tls://` block without a `tls` directive unencrypted, and an
/// `https://` one as plain HTTP; both are logged).
fn stream_protocol(key: &ListenKey, tls: Option<&tokio_rustls::rustls::ServerConfig>) -> StreamProtocol {
    match (key.2, tls) {
        (Scheme::Dns, _) => StreamProtocol::Tcp,
        (Scheme::Tls, Some(c)) => StreamProtocol::dot(c),
        (Scheme::Tls, None) => {
            tracing::warn!(server = %server_label(key), "tls:// block without a 'tls' directive: serving DNS over unencrypted TCP, as CoreDNS does");
            StreamProtocol::Tcp
        }
        (Scheme::Https, Some(c)) => StreamProtocol::doh(Some(c)),
        (Scheme::Https, None) => {
            tracing::warn!(server = %server_label(key), "https:// block without a 'tls' directive: serving DNS over plain HTTP (for a TLS-terminating proxy), as CoreDNS does");
            StreamProtocol::doh(None)
        }
        // Not stream listeners (see `listen_quic`).
        (Scheme::Quic | Scheme::Https3, _) => StreamProtocol::Tcp,
    }
}

async fn bind_dns(
    key: ListenKey,
    protocol: StreamProtocol,
    udp_sockets: Option<usize>,
) -> Result<server::Listeners, ServerError> {
    let bind = |addr: SocketAddr| {
        let protocol = protocol.clone();
        async move {
            match key.2 {
                Scheme::Dns => match udp_sockets {
                    Some(n) => server::bind_with(addr, n).await,
                    None => server::bind(addr).await,
                },
                Scheme::Tls | Scheme::Https => server::bind_stream(addr, protocol).await,
                Scheme::Quic | Scheme::Https3 => Err(ServerError::Serve(format!(
                    "{addr}: a {}:// listener is not a stream listener",
                    key.2.as_str()
                ))),
            }
        }
    };
    match key {
        (Some(ip), port, _) => bind(SocketAddr::new(ip, port)).await,
        // All interfaces: dual-stack where the host has IPv6, else IPv4 only.
        (None, port, _) => match bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)).await {
            Ok(s) => Ok(s),
            Err(_) => bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)).await,
        },
    }
}

/// Binds `key` and serves it with `router`.
pub(super) async fn listen(
    key: ListenKey,
    router: Router,
    options: ListenerSettings,
    shared: &Shared,
) -> Result<Listener, ServerError> {
    if matches!(key.2, Scheme::Quic | Scheme::Https3) {
        return listen_quic(key, router, options, shared);
    }
    let protocol = stream_protocol(&key, options.tls.as_deref());
    let sockets = bind_dns(key, protocol.clone(), options.udp_sockets).await?;
    let addr = sockets.local_addr().map_err(|source| ServerError::Bind {
        addr: format!("{key:?}"),
        source,
    })?;
    let zone_list: Vec<String> = router
        .blocks
        .iter()
        .flat_map(|b| b.zones.iter().map(|z| z.to_string()))
        .collect();
    let over = match key.2 {
        Scheme::Dns => "UDP and TCP",
        Scheme::Tls => "TLS",
        Scheme::Https => "HTTPS",
        Scheme::Quic => "QUIC",
        Scheme::Https3 => "HTTP/3",
    };
    tracing::info!(%addr, zones = %zone_list.join(" "), "serving DNS over {over}");
    let cell = server::router_cell(router);
    let (stop, rx) = oneshot::channel::<()>();
    let (tcp_limits, udp_limits) = server::stream_limits(
        &options,
        key.2 == Scheme::Https,
        &shared.listeners,
        &server_label(&key),
    );
    let task = tokio::spawn(server::serve_with(
        cell.clone(),
        vec![sockets],
        tcp_limits,
        udp_limits,
        async move {
            let _ = rx.await;
        },
    ));
    Ok(Listener {
        addr,
        cell,
        protocol,
        quic: None,
        stop,
        task,
    })
}

/// Binds the UDP socket of `quic://` (or `https3://`) listen address `key` and serves DNS over
/// QUIC (or over HTTP/3) on it with `router`, its block's certificate, its `quic` (or
/// `https3`) stream bounds and its `timeouts`.
fn listen_quic(
    key: ListenKey,
    router: Router,
    options: ListenerSettings,
    shared: &Shared,
) -> Result<Listener, ServerError> {
    use crate::server::h3::{bind_h3, serve_h3};
    use crate::server::quic::{bind_quic, serve_quic};
    let label = server_label(&key);
    let (scheme, h3) = (key.2.as_str(), key.2 == Scheme::Https3);
    // The configuration refuses such a block without `tls`; kept as an error, not a panic.
    let tls = options.tls.as_deref().ok_or_else(|| {
        ServerError::Serve(format!(
            "{label}: a {scheme}:// server block needs a 'tls' directive"
        ))
    })?;
    let limits = server::quic_limits(&options, h3, &shared.listeners, &label);
    let ip = key.0.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    let bind = |addr| {
        if h3 {
            bind_h3(addr, tls, &limits)
        } else {
            bind_quic(addr, tls, &limits)
        }
    };
    let listener = match bind(SocketAddr::new(ip, key.1)) {
        // All interfaces: dual-stack where the host has IPv6, else IPv4 only.
        Err(_) if key.0.is_none() => bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), key.1))?,
        other => other?,
    };
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: label.clone(),
        source,
    })?;
    let zone_list: Vec<String> = router
        .blocks
        .iter()
        .flat_map(|b| b.zones.iter().map(|z| z.to_string()))
        .collect();
    let over = if h3 { "HTTP/3" } else { "QUIC" };
    tracing::info!(%addr, zones = %zone_list.join(" "), "serving DNS over {over}");
    let cell = server::router_cell(router);
    let (stop, rx) = oneshot::channel::<()>();
    let stopped = async move {
        let _ = rx.await;
    };
    let task = if h3 {
        tokio::spawn(serve_h3(cell.clone(), listener.clone(), limits, stopped))
    } else {
        tokio::spawn(serve_quic(cell.clone(), listener.clone(), limits, stopped))
    };
    Ok(Listener {
        addr,
        cell,
        protocol: StreamProtocol::Tcp,
        quic: Some(listener),
        stop,
        task,
    })
}

/// Binds `addr` and serves `routes` on it, with what runs beside them.
pub(super) async fn start_http(
    shared: &Shared,
    addr: SocketAddr,
    routes: &[HttpRoute],
) -> Result<(HttpListener, SocketAddr), StartError> {
    let ctx = HttpCtx {
        metrics: &shared.metrics,
        readiness: &shared.readiness,
    };
    let mut router = axum::Router::new();
    let names: Vec<&str> = routes.iter().map(|r| r.path).collect();
    for route in routes {
        router = router.merge((route.router)(ctx));
    }
    let listener = crate::http::bind_http(addr)
        .await
        .map_err(|source| StartError::Http {
            addr,
            what: names.join(" "),
            source,
        })?;
    let bound = listener.local_addr().unwrap_or(addr);
    tracing::info!(addr = %bound, paths = %names.join(" "), "serving HTTP");
    let (stop, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(crate::http::serve(listener, router, async move {
        let _ = rx.await;
    }));
    let beside = routes
        .iter()
        .filter_map(|r| r.beside.as_ref())
        .map(|b| tokio::spawn(b(bound, ctx)))
        .collect();
    Ok((HttpListener { beside, stop, task }, bound))
}
