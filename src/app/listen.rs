//! The listeners: binding a listen address's DNS sockets and serving them, and the HTTP
//! listeners of `/health`, `/ready` and `/metrics`.

use super::*;

/// What the connections of a listen address speak: plain DNS, or DNS over TLS or HTTPS with
/// `tls` (CoreDNS serves a `tls://` block without a `tls` directive unencrypted, and an
/// `https://` one as plain HTTP; both are logged).
fn stream_protocol(
    key: &ListenKey,
    tls: Option<&tokio_rustls::rustls::ServerConfig>,
) -> server::tcp::StreamProtocol {
    use server::tcp::StreamProtocol;
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
    }
}

pub(super) async fn bind_dns(
    key: ListenKey,
    protocol: server::tcp::StreamProtocol,
) -> Result<server::Listeners, ServerError> {
    let bind = |addr: SocketAddr| {
        let protocol = protocol.clone();
        async move {
            match key.2 {
                Scheme::Dns => server::bind(addr).await,
                Scheme::Tls | Scheme::Https => server::bind_stream(addr, protocol).await,
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

pub(super) async fn listen(
    key: ListenKey,
    router: Router,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    tcp: &TcpMetrics,
) -> Result<Listener, ServerError> {
    let protocol = stream_protocol(&key, tls.as_deref());
    let sockets = bind_dns(key, protocol.clone()).await?;
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
    };
    tracing::info!(%addr, zones = %zone_list.join(" "), "serving DNS over {over}");
    let cell = server::router_cell(router);
    let (stop, rx) = oneshot::channel::<()>();
    let tcp_limits = server::tcp::TcpLimits {
        metrics: Some(tcp.listener(&server_label(&key))),
        ..server::tcp::TcpLimits::from_env()
    };
    let task = tokio::spawn(server::serve_with(
        cell.clone(),
        vec![sockets],
        tcp_limits,
        async move {
            let _ = rx.await;
        },
    ));
    Ok(Listener {
        addr,
        cell,
        protocol,
        stop,
        task,
    })
}

pub(super) async fn start_http(
    shared: &Shared,
    addr: SocketAddr,
    what: HttpEndpoints,
) -> Result<(HttpListener, SocketAddr), StartError> {
    let mut router = axum::Router::new();
    let mut names = Vec::new();
    if what.health {
        router = router.merge(health::router());
        names.push("/health");
    }
    if what.ready {
        router = router.merge(shared.readiness.router());
        names.push("/ready");
    }
    if what.metrics {
        router = router.merge(shared.metrics.router());
        names.push("/metrics");
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
    let probe = what
        .health
        .then(|| tokio::spawn(health::self_probe(bound, shared.health_metrics.clone())));
    Ok((HttpListener { probe, stop, task }, bound))
}
