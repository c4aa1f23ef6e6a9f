//! The UDP transport: worker threads that each own one socket of the listen address (all bound
//! with `SO_REUSEPORT`, so the kernel spreads clients over them) and answer in a loop, inline:
//! receive a batch (`recvmmsg`), [`DnsHandler::answer_into`] each into a buffer the worker
//! reuses, send the replies as a batch (`sendmmsg`). The system calls come from `nix`'s safe
//! wrappers.
//!
//! hickory-server's UDP server spawns a task and sends through a channel per datagram; that cost
//! more than deciding the answer (see BENCHMARKS.md). Here a question the chain answers without
//! I/O (cluster names, cache hits) costs no task and no allocation in this module. In a block
//! whose chain may wait for an upstream (`forward`, `autopath`), a question the memo does not
//! hold becomes a future that owns its request, polled once: ready, its reply joins the batch;
//! not ready, it is handed to the tokio runtime as a task that sends its reply alone when it
//! has it, so the worker never waits on I/O.
//!
//! A stopping worker first takes its socket out of the `SO_REUSEPORT` group (connects it to its
//! own address), so the kernel queues nothing more on it and a server sharing the port (the
//! new instance of a node-local upgrade) gets the new datagrams; then it answers what was
//! queued and waits for its answers in flight before the socket closes.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::AsRawFd;

use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg, sendmmsg};
use socket2::{Domain, Socket, Type};

use super::handler::DnsHandler;
use crate::proto::{MAX_UDP_PAYLOAD, Transport};
use crate::telemetry::shed::ListenerShed;

/// The environment variable that sets the number of UDP workers (default: the CPUs this process
/// may run on, `std::thread::available_parallelism`, which follows affinity and cgroup quotas).
pub const WORKERS_ENV: &str = "CLUSTER_DNS_UDP_WORKERS";
/// How often an idle worker looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);
/// Receive buffer asked of the kernel per socket (it caps this at `net.core.rmem_max`), so a
/// burst waits in the queue instead of being dropped.
const RECV_BUFFER: usize = 4 << 20;
/// Largest datagram read: anything longer is cut by the kernel and fails to parse.
const MAX_DATAGRAM: usize = 65535;
/// The most a stopping worker waits for its answers in flight (a forwarded question takes at
/// most 4.5 s, as `listen::TCP_DRAIN_LIMIT` reckons).
const IN_FLIGHT_LIMIT: Duration = Duration::from_secs(8);
/// Most datagrams taken by one `recvmmsg` and answered by one `sendmmsg`.
const BATCH: usize = 32;
/// With `shed`, the answers a socket lets wait for I/O at once before it drops new queries
/// that would wait too (CoreDNS's fixed per-socket stack depth).
pub const SHED_DEPTH: usize = 1024;

/// What bounds a listener's UDP sockets beyond the kernel's receive queue.
#[derive(Debug, Clone, Default)]
pub struct UdpLimits {
    /// `shed`: each socket drops queries past its depth of answers waiting.
    pub shed: Option<Shed>,
    /// `proxyproto`: PROXY protocol version 2 headers before a datagram's DNS message.
    pub proxy: Option<Arc<crate::chain::ProxyProtocol>>,
    /// `proxyproto { udp_session_tracking }`: the listener's UDP sessions.
    pub proxy_sessions: Option<Arc<super::proxy::UdpSessions>>,
}

/// One socket's shedding: how many of its answers wait for I/O as tasks, and the bound.
///
/// Invariant: `waiting` counts the socket's answer tasks not yet finished. Only its worker
/// thread adds to it (before spawning a task, after reading it below `depth`); each task takes
/// its one away when it ends, whatever way it ends (`Waiting`'s drop). So it never exceeds
/// `depth`.
#[derive(Debug, Clone)]
pub struct Shed {
    depth: usize,
    waiting: Arc<AtomicUsize>,
    metrics: Option<ListenerShed>,
}

impl Shed {
    /// Shedding at `depth` answers waiting, counted in `metrics`.
    pub fn new(depth: usize, metrics: Option<ListenerShed>) -> Self {
        Self {
            depth: depth.max(1),
            waiting: Arc::new(AtomicUsize::new(0)),
            metrics,
        }
    }

    /// The same bound and counters with a count of its own, for one more socket.
    pub fn for_socket(&self) -> Self {
        Self::new(self.depth, self.metrics.clone())
    }

    /// Answers waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// One more answer may wait: its token, or `None` (and a query counted dropped) when the
    /// socket is at its depth. Called by the socket's worker only.
    fn admit(&self) -> Option<Waiting> {
        if self.waiting.load(Ordering::Acquire) >= self.depth {
            if let Some(m) = &self.metrics {
                m.query.inc();
            }
            return None;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        Some(Waiting(self.waiting.clone()))
    }

    fn response_lost(&self) {
        if let Some(m) = &self.metrics {
            m.response.inc();
        }
    }
}

/// One answer task's place in its socket's [`Shed`] count, given back when it is dropped.
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The number of UDP workers (and sockets) per listen address.
pub fn workers() -> usize {
    if let Some(n) = std::env::var(WORKERS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Binds one UDP socket to `addr` with `SO_REUSEPORT`, so more can share its port.
pub fn bind_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    sock.set_reuse_port(true)?;
    // Best effort: an unprivileged process gets at most rmem_max.
    let _ = sock.set_recv_buffer_size(RECV_BUFFER);
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

/// Takes `sock` out of its `SO_REUSEPORT` group before it closes: connected (to its own
/// address, which sends no query), the kernel hands it no new datagram (its reuseport selection
/// skips connected sockets) and spreads them over the group's other sockets, another server's
/// during a node-local upgrade. Closing without this loses what the kernel queued on it
/// meanwhile. Datagrams already queued stay readable.
pub fn leave_group(sock: &UdpSocket) -> io::Result<()> {
    let local = sock.local_addr()?;
    let ip = match local.ip() {
        ip if !ip.is_unspecified() => ip,
        IpAddr::V4(_) => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
    };
    sock.connect(SocketAddr::new(ip, local.port()))
}

/// Tells the workers to stop.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// Asks every worker sharing this flag to stop (each does within `STOP_POLL`).
    pub fn stop(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn stopped(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Stops the workers when dropped.
#[derive(Debug)]
pub struct StopOnDrop(pub Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Starts a worker thread serving `sock` until `stop`. Questions that must await I/O run as
/// tasks on `runtime`, at most `shed`'s depth at once when it is given.
pub fn spawn_worker(
    sock: UdpSocket,
    handler: DnsHandler,
    runtime: tokio::runtime::Handle,
    stop: Stop,
    shed: Option<Shed>,
    proxy: Option<UdpProxy>,
) -> io::Result<JoinHandle<()>> {
    sock.set_read_timeout(Some(STOP_POLL))?;
    let name = format!("udp-{}", sock.local_addr()?);
    std::thread::Builder::new().name(name).spawn(move || {
        let mut worker = Worker::new(sock, handler, runtime, stop, shed);
        worker.proxy = proxy;
        worker.run()
    })
}

/// Can a reply be sent to `src`? Not to port 0, an unspecified or a broadcast address (the
/// checks hickory-server makes).
fn can_reply_to(src: &SocketAddr) -> bool {
    if src.port() == 0 {
        return false;
    }
    match src.ip() {
        IpAddr::V4(v4) => !v4.is_unspecified() && !v4.is_broadcast(),
        IpAddr::V6(v6) => !v6.is_unspecified(),
    }
}

struct Worker {
    sock: Arc<UdpSocket>,
    handler: DnsHandler,
    runtime: tokio::runtime::Handle,
    stop: Stop,
    /// Receive buffers, one per datagram of a batch (pages the kernel never writes stay
    /// unallocated).
    bufs: Vec<Vec<u8>>,
    /// Replies, one per datagram of a batch, reused.
    outs: Vec<Vec<u8>>,
    shed: Option<Shed>,
    proxy: Option<UdpProxy>,
    /// Answers handed to the runtime and not sent yet (each task holds one until it ends).
    in_flight: Arc<AtomicUsize>,
}

/// One answer in flight, given back when its task ends or is dropped.
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A socket's `proxyproto`: the policy, and the listener's UDP sessions when it tracks them.
pub type UdpProxy = (
    Arc<crate::chain::ProxyProtocol>,
    Option<Arc<super::proxy::UdpSessions>>,
);

fn std_addr(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    a.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
}

impl Worker {
    fn new(
        sock: UdpSocket,
        handler: DnsHandler,
        runtime: tokio::runtime::Handle,
        stop: Stop,
        shed: Option<Shed>,
    ) -> Self {
        Self {
            sock: Arc::new(sock),
            handler,
            runtime,
            stop,
            bufs: (0..BATCH).map(|_| vec![0; MAX_DATAGRAM]).collect(),
            outs: (0..BATCH)
                .map(|_| Vec::with_capacity(usize::from(MAX_UDP_PAYLOAD)))
                .collect(),
            shed,
            proxy: None,
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn run(mut self) {
        // Futures polled here may create tokio I/O and timers: they need the runtime's context.
        let runtime = self.runtime.clone();
        let _context = runtime.enter();
        let fd = self.sock.as_raw_fd();
        let mut recv_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
        let mut send_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
        // (length, client) of each datagram of the batch; the replies to send, by index.
        let mut got: Vec<(usize, Option<SocketAddr>)> = Vec::with_capacity(BATCH);
        let mut replies: Vec<(usize, SockaddrStorage)> = Vec::with_capacity(BATCH);
        // Serving, then (stopped) draining: the socket has left its reuseport group, and what
        // it already queued is answered without waiting for more.
        let mut draining = false;
        loop {
            if !draining && self.stop.stopped() {
                draining = true;
                self.leave_group();
            }
            got.clear();
            {
                let mut iovs: Vec<[IoSliceMut<'_>; 1]> =
                    self.bufs.iter_mut().map(|b| [IoSliceMut::new(b)]).collect();
                // Blocks for the first datagram (up to the socket's receive timeout), then takes
                // what else is queued.
                match recvmmsg(
                    fd,
                    &mut recv_headers,
                    iovs.iter_mut(),
                    if draining {
                        MsgFlags::MSG_DONTWAIT
                    } else {
                        MsgFlags::MSG_WAITFORONE
                    },
                    None,
                ) {
                    Ok(msgs) => got.extend(msgs.map(|m| (m.bytes, m.address.as_ref().and_then(std_addr)))),
                    Err(Errno::EAGAIN) if draining => break,
                    Err(Errno::EAGAIN | Errno::EINTR) => continue,
                    Err(error) => {
                        tracing::debug!(%error, "error receiving UDP datagrams");
                        continue;
                    }
                }
            }
            replies.clear();
            for (i, (n, src)) in got.iter().enumerate() {
                let Some(src) = src.filter(can_reply_to) else {
                    continue;
                };
                if self.answer(i, *n, src) {
                    replies.push((i, SockaddrStorage::from(src)));
                }
            }
            self.send_replies(fd, &mut send_headers, &replies);
        }
        // The answers still waiting for I/O keep the socket to send on: they are given the
        // time a forwarded question takes at most.
        let deadline = std::time::Instant::now() + IN_FLIGHT_LIMIT;
        while self.in_flight.load(Ordering::Acquire) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn leave_group(&self) {
        if let Err(error) = leave_group(&self.sock) {
            tracing::debug!(%error, "cannot take the UDP socket out of its reuseport group");
        }
    }

    /// Sends the replies in `outs` named by `replies`, with as few `sendmmsg` calls as the
    /// kernel allows; one that fails is skipped (and logged).
    fn send_replies(
        &self,
        fd: std::os::fd::RawFd,
        headers: &mut MultiHeaders<SockaddrStorage>,
        replies: &[(usize, SockaddrStorage)],
    ) {
        let mut start = 0;
        while start < replies.len() {
            let rest = &replies[start..];
            let slices: Vec<[IoSlice<'_>; 1]> =
                rest.iter().map(|(i, _)| [IoSlice::new(&self.outs[*i])]).collect();
            let addrs: Vec<Option<SockaddrStorage>> = rest.iter().map(|(_, a)| Some(*a)).collect();
            match sendmmsg(fd, headers, &slices, &addrs, [], MsgFlags::empty()) {
                Ok(sent) => start += sent.count().max(1),
                Err(Errno::EINTR) => {}
                Err(error) => {
                    tracing::debug!(%error, "failed to send a UDP response");
                    if let Some(s) = &self.shed {
                        s.response_lost();
                    }
                    start += 1;
                }
            }
        }
    }

    /// Answers the `n`-byte datagram in `bufs[i]` from `src`: true when the reply is in
    /// `outs[i]` to be sent; false when there is none, or a task will send it.
    fn answer(&mut self, i: usize, n: usize, peer: SocketAddr) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let req = &self.bufs[i][..n.min(MAX_DATAGRAM)];
        // With `proxyproto`, the client the chain sees may be the one a header names; the
        // reply still goes to the peer.
        let (src, req) = match &self.proxy {
            None => (peer, req),
            Some((proxy, sessions)) => match super::proxy::datagram(proxy, sessions.as_deref(), req, peer) {
                Ok((client, at)) => (client, &req[at..]),
                Err(super::proxy::ProxyError::HeaderOnly) => return false,
                Err(why) => {
                    tracing::debug!(%peer, ?why, "dropping a datagram with a PROXY protocol header");
                    return false;
                }
            },
        };
        let started = std::time::Instant::now();
        if let Some(served) = self.handler.answer_inline(req, src, &mut self.outs[i], started) {
            return served.is_some();
        }
        // The chain may await I/O (or was not ready after all): the answer runs as a future that
        // owns what it needs, polled here once. Ready (a cluster name, a cache hit, a walk of
        // those), its reply joins the batch like any other, written into this slot's buffer,
        // which the future borrowed.
        let out = std::mem::take(&mut self.outs[i]);
        let mut task = Box::pin(owned_answer(
            self.handler.clone(),
            req.to_vec(),
            src,
            started,
            out,
        ));
        match task.as_mut().poll(&mut cx) {
            Poll::Ready((out, reply)) => {
                self.outs[i] = out;
                reply
            }
            Poll::Pending => {
                self.outs[i] = Vec::with_capacity(usize::from(MAX_UDP_PAYLOAD));
                // With `shed`, at its depth the query is dropped: no answer, so the client's
                // resolver retries (another server), and nothing more piles up here.
                let waiting = match &self.shed {
                    Some(shed) => match shed.admit() {
                        Some(w) => Some(w),
                        None => return false,
                    },
                    None => None,
                };
                // It waits on an upstream: a task finishes it and sends its reply alone.
                self.spawn_sending(task, peer, waiting);
                false
            }
        }
    }

    /// Runs `task` on the runtime and sends its reply, if any, to `src` when it is done; its
    /// place in the shed count (`waiting`) goes with it.
    fn spawn_sending(&self, task: Pin<Box<OwnedAnswer>>, src: SocketAddr, waiting: Option<Waiting>) {
        let sock = self.sock.clone();
        let shed = self.shed.clone();
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let in_flight = InFlight(self.in_flight.clone());
        self.runtime.spawn(async move {
            let _waiting = waiting;
            let _in_flight = in_flight;
            let (out, reply) = task.await;
            if reply
                && !send(&sock, &out, src)
                && let Some(s) = shed
            {
                s.response_lost();
            }
        });
    }
}

/// [`owned_answer`]'s future.
type OwnedAnswer = dyn Future<Output = (Vec<u8>, bool)> + Send;

/// Answers `req` into `out` (cleared first); owns everything, so it can run as a task. Gives
/// the buffer back, and whether it holds a reply to send.
async fn owned_answer(
    handler: DnsHandler,
    req: Vec<u8>,
    src: SocketAddr,
    started: std::time::Instant,
    mut out: Vec<u8>,
) -> (Vec<u8>, bool) {
    let reply = handler
        .answer_in_full(&req, src, Transport::Udp, &mut out, started, false)
        .await
        .is_some();
    (out, reply)
}

/// Sends one reply; false when it did not reach the socket.
fn send(sock: &UdpSocket, bytes: &[u8], dst: SocketAddr) -> bool {
    match sock.send_to(bytes, dst) {
        Ok(_) => true,
        Err(error) => {
            tracing::debug!(%error, %dst, "failed to send a UDP response");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sockets share a port; the one that left its group gets no new datagram (from 64
    /// clients: without leaving, the kernel's hash would give it about half), and a datagram
    /// it had queued before leaving is still read.
    #[test]
    fn a_socket_that_left_its_reuseport_group_gets_no_new_datagram() {
        let leaving = bind_socket("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = leaving.local_addr().unwrap();
        let staying = bind_socket(addr).unwrap();
        for s in [&leaving, &staying] {
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        }
        // Queued before: one client's datagrams until one lands on `leaving`.
        let mut queued = false;
        for _ in 0..64 {
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.send_to(b"before", addr).unwrap();
            let mut buf = [0u8; 16];
            if staying.set_nonblocking(true).is_ok() && staying.recv_from(&mut buf).is_ok() {
                continue;
            }
            queued = true;
            break;
        }
        staying.set_nonblocking(false).unwrap();
        assert!(queued, "no datagram reached the first socket");
        leave_group(&leaving).unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = leaving
            .recv_from(&mut buf)
            .expect("the queued datagram is still read");
        assert_eq!(&buf[..n], b"before");
        for _ in 0..64 {
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.send_to(b"after", addr).unwrap();
            let (n, _) = staying.recv_from(&mut buf).expect("the staying socket gets it");
            assert_eq!(&buf[..n], b"after");
        }
        leaving.set_nonblocking(true).unwrap();
        assert!(
            leaving.recv_from(&mut buf).is_err(),
            "the socket that left got a new datagram"
        );
    }

    /// The shed count under concurrent writers: tasks on four threads give their places back
    /// while the worker admits; the count never passes the depth and returns to zero.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn shed_admits_up_to_its_depth_and_every_task_gives_its_place_back() {
        let shed = Shed::new(10, None);
        for _round in 0..50 {
            let admitted: Vec<Waiting> = std::iter::from_fn(|| shed.admit()).take(20).collect();
            assert_eq!(admitted.len(), 10);
            assert!(shed.admit().is_none(), "at its depth");
            let tasks: Vec<_> = admitted
                .into_iter()
                .map(|w| {
                    tokio::spawn(async move {
                        tokio::task::yield_now().await;
                        drop(w);
                    })
                })
                .collect();
            // The worker goes on admitting while the places come back.
            let mut more = Vec::new();
            for _ in 0..100 {
                if let Some(w) = shed.admit() {
                    more.push(w);
                }
                assert!(shed.waiting() <= 10);
                tokio::task::yield_now().await;
            }
            for t in tasks {
                t.await.unwrap();
            }
            drop(more);
            assert_eq!(shed.waiting(), 0);
        }
    }

    #[test]
    fn no_replies_to_port_zero_or_broadcast() {
        assert!(!can_reply_to(&"10.0.0.1:0".parse().unwrap()));
        assert!(!can_reply_to(&"255.255.255.255:53".parse().unwrap()));
        assert!(!can_reply_to(&"[::]:53".parse().unwrap()));
        assert!(can_reply_to(&"10.0.0.1:5353".parse().unwrap()));
    }
}
