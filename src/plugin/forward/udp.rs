//! Connected UDP sockets to one upstream, reused. A socket whose query got its reply goes back
//! to the upstream's pool and serves later queries: at most [`MAX_USES`] of them, and only
//! while younger than `expire` (10 s by default, CoreDNS's expiry of its cached upstream
//! connections), so the source port still changes often (a rotating pool of random ports; every
//! query also has a random ID, and its reply must match the ID and the question). A socket per
//! query cost a miss five system calls (socket, connect, two epoll registrations, close), and a
//! new socket is not writable until the runtime has polled it, so the server's UDP worker
//! could not send a miss's query inline; with a reused one it does. BENCHMARKS.md, "Reused UDP
//! sockets", has what that gains for misses and costs in wakeups.
//!
//! A socket whose exchange failed, timed out or was dropped is closed, never reused: a late
//! reply must not reach the next query on it (one that does anyway, a duplicate, is dropped by
//! its ID and counted as unwanted).
//!
//! Invariant: a socket is in the idle list only while no exchange uses it. [`UdpPool::lease`]
//! takes it out under the list's lock and only [`UdpPool::give_back`] puts it back, so two
//! queries never share a socket. The list holds at most [`MAX_IDLE`] sockets per upstream (the
//! bound on descriptors kept between queries; those in use are bounded by `max_concurrent`),
//! shown by `cluster_dns_forward_udp_idle_sockets`, with reuse and new sockets counted in
//! `coredns_proxy_conn_cache_{hits,misses}_total{proto="udp"}`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;

use super::metrics::ConnCounters;

/// Queries one socket serves before it is closed.
pub const MAX_USES: u32 = 16;
/// Idle sockets kept per upstream.
pub const MAX_IDLE: usize = 32;

#[derive(Debug)]
struct Idle {
    sock: UdpSocket,
    born: Instant,
    uses: u32,
}

/// A socket taken from the pool (or opened) for one exchange.
#[derive(Debug)]
pub struct Lease {
    sock: UdpSocket,
    born: Instant,
    uses: u32,
}

impl Lease {
    /// The socket, connected to the upstream.
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }
}

/// A new UDP socket connected to `addr`, on a random ephemeral source port the kernel picks,
/// bound to `source` when given (`source_address`).
pub async fn connect(addr: SocketAddr, source: Option<IpAddr>) -> std::io::Result<UdpSocket> {
    let local: SocketAddr = match source {
        Some(ip) => (ip, 0).into(),
        None if addr.is_ipv4() => (Ipv4Addr::UNSPECIFIED, 0).into(),
        None => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(addr).await?;
    Ok(sock)
}

/// The idle sockets to one upstream. See the module docs.
#[derive(Debug)]
pub struct UdpPool {
    addr: SocketAddr,
    source: Option<IpAddr>,
    expire: Duration,
    /// Idle sockets kept at most ([`MAX_IDLE`], or `max_idle_conns`).
    max_idle: usize,
    idle: Mutex<Vec<Idle>>,
    counters: OnceLock<ConnCounters>,
}

impl UdpPool {
    /// A pool of sockets to `addr` (bound to `source` when given), each reused while younger
    /// than `expire`.
    pub fn new(addr: SocketAddr, source: Option<IpAddr>, expire: Duration) -> Self {
        Self {
            addr,
            source,
            expire,
            max_idle: MAX_IDLE,
            idle: Mutex::new(Vec::new()),
            counters: OnceLock::new(),
        }
    }

    /// Keeps at most `max_idle` idle sockets (`max_idle_conns`) instead of [`MAX_IDLE`] when
    /// given.
    pub fn with_max_idle(mut self, max_idle: Option<usize>) -> Self {
        if let Some(n) = max_idle {
            self.max_idle = n;
        }
        self
    }

    /// Counts into `counters` from now on (only the first call takes effect).
    pub fn count_into(&self, counters: ConnCounters) {
        let _ = self.counters.set(counters);
    }

    /// Idle sockets held now.
    pub fn idle(&self) -> usize {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// A socket for one exchange: the newest idle one still young enough, or a new one.
    pub async fn lease(&self) -> std::io::Result<Lease> {
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            idle.retain(|i| now.duration_since(i.born) < self.expire);
            let taken = idle.pop();
            self.gauge(idle.len());
            taken
        };
        if let Some(Idle { sock, born, uses }) = reused {
            if let Some(c) = self.counters.get() {
                c.hits.inc();
            }
            return Ok(Lease { sock, born, uses });
        }
        if let Some(c) = self.counters.get() {
            c.misses.inc();
        }
        Ok(Lease {
            sock: connect(self.addr, self.source).await?,
            born: Instant::now(),
            uses: 0,
        })
    }

    /// Returns `lease` after its exchange got the reply it waited for: kept for the next query
    /// unless it has served [`MAX_USES`], is older than `expire` or the pool is full (then it is
    /// closed).
    pub fn give_back(&self, lease: Lease) {
        let uses = lease.uses + 1;
        if uses >= MAX_USES || lease.born.elapsed() >= self.expire {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push(Idle {
                sock: lease.sock,
                born: lease.born,
                uses,
            });
        }
        self.gauge(idle.len());
    }

    fn gauge(&self, idle: usize) {
        if let Some(c) = self.counters.get() {
            c.idle.set(i64::try_from(idle).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use prometheus::{IntCounter, IntGauge};

    use super::*;

    fn counters() -> ConnCounters {
        ConnCounters {
            hits: IntCounter::new("h", "h").unwrap(),
            misses: IntCounter::new("m", "m").unwrap(),
            idle: IntGauge::new("i", "i").unwrap(),
        }
    }

    /// A socket serves `MAX_USES` queries, then a new one is opened; counted as hits and misses.
    #[tokio::test]
    async fn a_socket_is_reused_until_its_uses_are_spent() {
        let pool = UdpPool::new("127.0.0.1:53".parse().unwrap(), None, Duration::from_secs(10));
        let c = counters();
        pool.count_into(c.clone());
        let first = pool.lease().await.unwrap();
        let port = first.socket().local_addr().unwrap().port();
        pool.give_back(first);
        for _ in 1..MAX_USES {
            let again = pool.lease().await.unwrap();
            assert_eq!(again.socket().local_addr().unwrap().port(), port);
            pool.give_back(again);
        }
        assert_eq!(pool.idle(), 0, "closed after its last use");
        let fresh = pool.lease().await.unwrap();
        assert_ne!(fresh.socket().local_addr().unwrap().port(), port);
        assert_eq!((c.hits.get(), c.misses.get()), (u64::from(MAX_USES) - 1, 2));
        // A lease that is not given back (its exchange failed) is closed, not reused.
        drop(fresh);
        assert_eq!(pool.idle(), 0);
        assert_eq!(c.idle.get(), 0);
    }

    /// At most `MAX_IDLE` sockets are kept idle: the rest of a burst's sockets are closed.
    #[tokio::test]
    async fn the_idle_sockets_are_bounded() {
        let pool = UdpPool::new("127.0.0.1:53".parse().unwrap(), None, Duration::from_secs(10));
        let c = counters();
        pool.count_into(c.clone());
        let mut leases = Vec::new();
        for _ in 0..MAX_IDLE + 8 {
            leases.push(pool.lease().await.unwrap());
        }
        for lease in leases {
            pool.give_back(lease);
        }
        assert_eq!(pool.idle(), MAX_IDLE);
        assert_eq!(c.idle.get(), i64::try_from(MAX_IDLE).unwrap());
        assert_eq!(c.misses.get(), u64::try_from(MAX_IDLE + 8).unwrap());
    }

    /// An idle socket older than `expire` is closed instead of reused.
    #[tokio::test(start_paused = true)]
    async fn an_idle_socket_expires() {
        let pool = UdpPool::new("127.0.0.1:53".parse().unwrap(), None, Duration::from_secs(10));
        let lease = pool.lease().await.unwrap();
        let port = lease.socket().local_addr().unwrap().port();
        pool.give_back(lease);
        assert_eq!(pool.idle(), 1);
        tokio::time::advance(Duration::from_secs(10)).await;
        let lease = pool.lease().await.unwrap();
        assert_ne!(lease.socket().local_addr().unwrap().port(), port);
        assert_eq!(pool.idle(), 0);
    }

    /// Concurrent exchanges never share a socket, and the idle list never holds more than
    /// `MAX_IDLE`, with leases taken and given back from many tasks on several threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_leases_never_share_a_socket() {
        let pool = Arc::new(UdpPool::new(
            "127.0.0.1:53".parse().unwrap(),
            None,
            Duration::from_secs(10),
        ));
        let c = counters();
        pool.count_into(c.clone());
        let in_use = Arc::new(Mutex::new(HashSet::new()));
        let mut tasks = Vec::new();
        for _ in 0..48 {
            let (pool, in_use) = (pool.clone(), in_use.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..40 {
                    let lease = pool.lease().await.unwrap();
                    let port = lease.socket().local_addr().unwrap().port();
                    assert!(in_use.lock().unwrap().insert(port), "port {port} leased twice");
                    tokio::task::yield_now().await;
                    assert!(in_use.lock().unwrap().remove(&port));
                    pool.give_back(lease);
                    assert!(pool.idle() <= MAX_IDLE);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert!(pool.idle() <= MAX_IDLE);
        assert_eq!(c.hits.get() + c.misses.get(), 48 * 40);
        assert_eq!(c.idle.get(), i64::try_from(pool.idle()).unwrap());
    }
}
