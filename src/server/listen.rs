//! The sockets of a listen address and serving them: the UDP workers' sockets (`SO_REUSEPORT`)
//! and the TCP listener, bound by [`bind`]; [`serve`] runs them until a shutdown future
//! completes, then stops UDP and drains TCP.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

use super::error::ServerError;
use super::handler::DnsHandler;
use super::route::RouterCell;
use super::{tcp, udp};

/// The most a stopping server waits for its TCP connections to send the answers in flight
/// (a forwarded question takes at most 4.5 s, its answer's write at most the message
/// deadline).
pub const TCP_DRAIN_LIMIT: Duration = Duration::from_secs(8);

/// The sockets of one listen address: UDP sockets sharing the port (`SO_REUSEPORT`), one per
/// UDP worker, and the TCP listener.
#[derive(Debug)]
pub struct Listeners {
    /// The UDP sockets, all bound to the same address (none for DNS over TLS or HTTPS).
    pub udp: Vec<std::net::UdpSocket>,
    /// The TCP listener on the same address.
    pub tcp: TcpListener,
    /// What the TCP listener's connections speak.
    pub protocol: tcp::StreamProtocol,
}

impl Listeners {
    /// The bound address (the real port when bound to port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match self.udp.first() {
            Some(s) => s.local_addr(),
            None => self.tcp.local_addr(),
        }
    }
}

/// Binds [`udp::workers`] UDP sockets and a TCP listener on the same address and port. With port
/// 0, the first UDP socket picks a free port and the others take the same one.
pub async fn bind(addr: SocketAddr) -> Result<Listeners, ServerError> {
    bind_with(addr, udp::workers()).await
}

/// [`bind`] with `udp_sockets` UDP sockets (at least one).
pub async fn bind_with(addr: SocketAddr, udp_sockets: usize) -> Result<Listeners, ServerError> {
    let err = |source| ServerError::Bind {
        addr: addr.to_string(),
        source,
    };
    let n = udp_sockets.max(1);
    let mut last = None;
    for _ in 0..16 {
        let first = udp::bind_socket(addr).map_err(err)?;
        let port = first.local_addr().map_err(err)?.port();
        let at = SocketAddr::new(addr.ip(), port);
        let tcp = match bind_tcp(at, addr.port() != 0) {
            Ok(tcp) => tcp,
            Err(e) if addr.port() == 0 => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(err(e)),
        };
        let mut udp = vec![first];
        for _ in 1..n {
            udp.push(udp::bind_socket(at).map_err(err)?);
        }
        return Ok(Listeners {
            udp,
            tcp,
            protocol: tcp::StreamProtocol::Tcp,
        });
    }
    Err(err(last.unwrap_or_else(|| std::io::Error::other("no free port"))))
}

/// A TCP listener on `addr`; with `share` (a fixed port), with `SO_REUSEPORT` as the UDP
/// sockets, so a second server (the new instance of a node-local upgrade) binds beside it.
/// Port 0 stays a plain bind: a port picked for UDP must not join a stranger's TCP listener.
fn bind_tcp(addr: SocketAddr, share: bool) -> std::io::Result<TcpListener> {
    let sock = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    if share {
        sock.set_reuse_port(true)?;
    }
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(1024)?;
    TcpListener::from_std(sock.into())
}

/// A TCP listener alone on `addr` speaking `protocol` (DNS over TLS or HTTPS: no UDP).
pub async fn bind_stream(addr: SocketAddr, protocol: tcp::StreamProtocol) -> Result<Listeners, ServerError> {
    let tcp = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    Ok(Listeners {
        udp: Vec::new(),
        tcp,
        protocol,
    })
}

/// Serves `router` on the bound `listeners` until `shutdown` completes: one UDP worker thread per
/// UDP socket, and a tokio task per TCP listener.
pub async fn serve(
    router: RouterCell,
    listeners: Vec<Listeners>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    serve_with(
        router,
        listeners,
        tcp::TcpLimits::default(),
        udp::UdpLimits::default(),
        shutdown,
    )
    .await
}

/// [`serve`], with `tcp_limits` bounding each TCP listener's connections.
pub async fn serve_with(
    router: RouterCell,
    listeners: Vec<Listeners>,
    tcp_limits: tcp::TcpLimits,
    udp_limits: udp::UdpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let handler = DnsHandler::new(router);
    let runtime = tokio::runtime::Handle::current();
    let stop = udp::Stop::default();
    // The workers are threads, not tasks: if this future is dropped rather than run to the
    // end (the runtime shutting down), they must still stop and close their sockets.
    let _stop_on_drop = udp::StopOnDrop(stop.clone());
    let mut workers = Vec::new();
    let mut tcp_tasks = Vec::new();
    let (tcp_stop, tcp_stopped) = tokio::sync::watch::channel(false);
    for l in listeners {
        let handler = handler.with_local(l.local_addr().ok());
        for sock in l.udp {
            // Each socket sheds on its own count of answers waiting.
            let shed = udp_limits.shed.as_ref().map(udp::Shed::for_socket);
            let w = udp::spawn_worker(
                sock,
                handler.clone(),
                runtime.clone(),
                stop.clone(),
                shed,
                udp_limits
                    .proxy
                    .clone()
                    .map(|p| (p, udp_limits.proxy_sessions.clone())),
            )
            .map_err(|e| ServerError::Serve(format!("cannot start a UDP worker: {e}")))?;
            workers.push(w);
        }
        let mut stopped = tcp_stopped.clone();
        tcp_tasks.push(tokio::spawn(tcp::serve_protocol_until(
            l.tcp,
            handler.clone(),
            tcp_limits.clone(),
            l.protocol,
            async move {
                let _ = stopped.wait_for(|s| *s).await;
            },
        )));
    }
    shutdown.await;
    // TCP drains: the queries already read are answered. Each UDP worker leaves its reuseport
    // group, answers what its socket queued and waits for its answers in flight.
    let _ = tcp_stop.send(true);
    stop.stop();
    for t in tcp_tasks {
        let abort = t.abort_handle();
        if tokio::time::timeout(TCP_DRAIN_LIMIT, t).await.is_err() {
            tracing::debug!("TCP connections still open after the drain limit; closed");
            abort.abort();
        }
    }
    // The workers see the stop within their receive timeout.
    tokio::task::spawn_blocking(move || {
        for w in workers {
            let _ = w.join();
        }
    })
    .await
    .map_err(|e| ServerError::Serve(format!("UDP worker failed: {e}")))?;
    Ok(())
}

/// The UDP workers' sockets as binding and serving them makes them.
#[cfg(test)]
mod udp_tests {
    use super::*;

    #[tokio::test]
    async fn sockets_of_one_address_share_its_port() {
        let l = crate::server::bind_with("127.0.0.1:0".parse().unwrap(), 3)
            .await
            .unwrap();
        let port = l.local_addr().unwrap().port();
        assert_ne!(port, 0);
        assert_eq!(l.udp.len(), 3);
        for s in &l.udp {
            assert_eq!(s.local_addr().unwrap().port(), port);
        }
        assert_eq!(l.tcp.local_addr().unwrap().port(), port);
    }

    /// A serve future dropped without its shutdown (the runtime going away) still stops the
    /// worker threads, which close their sockets.
    #[tokio::test]
    async fn dropping_serve_stops_the_workers() {
        let l = crate::server::bind_with("127.0.0.1:0".parse().unwrap(), 2)
            .await
            .unwrap();
        let addr = l.local_addr().unwrap();
        let router = crate::server::router_cell(crate::server::Router::default());
        let task = tokio::spawn(crate::server::serve(router, vec![l], std::future::pending()));
        tokio::task::yield_now().await;
        task.abort();
        let _ = task.await;
        // A plain bind (no SO_REUSEPORT) succeeds once no worker holds the port.
        let mut freed = false;
        for _ in 0..100 {
            if std::net::UdpSocket::bind(addr).is_ok() {
                freed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(freed, "the UDP workers kept {addr}");
    }
}
