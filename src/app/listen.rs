//! The listeners: binding a listen address's DNS sockets and serving them, and the HTTP
//! listeners of `/health`, `/ready` and `/metrics`.

use super::*;

pub(super) async fn bind_dns(key: ListenKey) -> Result<server::Listeners, ServerError> {
    match key {
        (Some(ip), port) => server::bind(SocketAddr::new(ip, port)).await,
        // All interfaces: dual-stack where the host has IPv6, else IPv4 only.
        (None, port) => match server::bind(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port)).await {
            Ok(s) => Ok(s),
            Err(_) => server::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)).await,
        },
    }
}

pub(super) async fn listen(
    key: ListenKey,
    router: Router,
    tcp: &TcpMetrics,
) -> Result<Listener, ServerError> {
    let sockets = bind_dns(key).await?;
    let addr = sockets.local_addr().map_err(|source| ServerError::Bind {
        addr: format!("{key:?}"),
        source,
    })?;
    let zone_list: Vec<String> = router
        .blocks
        .iter()
        .flat_map(|b| b.zones.iter().map(|z| z.to_string()))
        .collect();
    tracing::info!(%addr, zones = %zone_list.join(" "), "serving DNS over UDP and TCP");
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
