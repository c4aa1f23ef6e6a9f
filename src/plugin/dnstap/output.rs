//! One dnstap output: a bounded queue of encoded messages and the task that writes them to the
//! reader (a unix socket, a TCP address, or TLS over TCP) in Frame Streams.
//!
//! The query path never waits on it: a message that does not fit in the queue (CoreDNS's
//! 10,000 messages times `queue`, and here also 64 MiB times `queue`) is dropped and counted (`coredns_dnstap_dropped_total`), and so is
//! every message that arrives while no reader is connected or that a failed write took with
//! it. The task connects with a 4 s timeout, writes what the queue holds in batches, each with
//! a 4 s timeout (a reader that stops reading costs a reconnect, never an answer), and after a
//! failure tries again after 0.5 s, doubling up to 10 s. When the last configuration holding
//! the output is gone the queue closes and the task ends the stream (STOP, FINISH) and stops.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use prometheus::IntCounter;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until, timeout};

use super::counters::Dropped;
use super::fstrm;

use super::fstrm::IO_TIMEOUT;
/// First wait after a failure.
const MIN_BACKOFF: Duration = Duration::from_millis(500);
/// Longest wait between tries (CoreDNS redials every 10 s).
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Most bytes written in one batch (a batch is lost whole when its write fails).
const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Where the messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A unix socket (`unix:///path`, or a bare path).
    Unix(PathBuf),
    /// A TCP reader (`tcp://host:port`), the host resolved at each connect.
    Tcp(String),
    /// `dnstap listen`: readers connect to the server.
    Listen(super::listen::Listen),
    /// A TLS reader (`tls://host:port`); its certificate is not checked with `skipverify`.
    Tls {
        /// `host:port`.
        addr: String,
        /// `skipverify`.
        skip_verify: bool,
    },
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unix(p) => write!(f, "unix://{}", p.display()),
            Self::Tcp(a) => write!(f, "tcp://{a}"),
            Self::Tls { addr, .. } => write!(f, "tls://{addr}"),
            Self::Listen(l) => l.fmt(f),
        }
    }
}

/// One output (see the module docs). Dropping the last holder ends its task.
#[derive(Debug)]
pub struct Output {
    tx: mpsc::Sender<Vec<u8>>,
    dropped: Arc<Dropped>,
}

impl Output {
    /// Starts the output to `endpoint` with a queue of `capacity` messages and at most
    /// `max_bytes` bytes (in a tokio runtime). A TCP connection asks the kernel for a send
    /// buffer of `write_buffer_mib` MiB.
    pub fn start(
        endpoint: Endpoint,
        (capacity, max_bytes): (usize, usize),
        write_buffer_mib: usize,
        metric: Option<IntCounter>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let dropped = Arc::new(Dropped {
            count: AtomicU64::new(0),
            metric,
            queued: AtomicUsize::new(0),
            max_bytes,
        });
        match endpoint {
            Endpoint::Listen(at) => tokio::spawn(super::listen::run(at, rx, dropped.clone())),
            _ => tokio::spawn(run(endpoint, rx, dropped.clone(), write_buffer_mib << 20)),
        };
        Self { tx, dropped }
    }

    /// Queues one encoded `Dnstap` payload, or drops it when the queue is full (in messages
    /// or in bytes).
    pub fn send(&self, payload: Vec<u8>) {
        let len = payload.len();
        let before = self.dropped.queued.fetch_add(len, Ordering::Relaxed);
        if before + len > self.dropped.max_bytes || self.tx.try_send(payload).is_err() {
            self.dropped.dequeued(len);
            self.dropped.add(1);
        }
    }

    /// Messages dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.count.load(Ordering::Relaxed)
    }
}

/// Why a connection ended.
enum Ended {
    /// The queue closed: the output is gone.
    Closed,
    /// No reader could be reached (or it refused the handshake).
    Failed(std::io::Error),
    /// A connected reader failed: the next try waits the shortest time again.
    Lost(std::io::Error),
}

async fn run(endpoint: Endpoint, mut rx: mpsc::Receiver<Vec<u8>>, dropped: Arc<Dropped>, send_buffer: usize) {
    let mut backoff = MIN_BACKOFF;
    let mut tls = None;
    loop {
        let ended = match &endpoint {
            Endpoint::Unix(path) => match timeout(IO_TIMEOUT, tokio::net::UnixStream::connect(path)).await {
                Ok(Ok(s)) => serve(s, &mut rx, &dropped).await,
                Ok(Err(e)) => Ended::Failed(e),
                Err(_) => Ended::Failed(std::io::ErrorKind::TimedOut.into()),
            },
            Endpoint::Tcp(addr) => {
                match timeout(IO_TIMEOUT, tokio::net::TcpStream::connect(addr.as_str())).await {
                    Ok(Ok(s)) => {
                        // As CoreDNS: a larger send buffer, and Nagle left on (batches are large).
                        let _ = socket2::SockRef::from(&s).set_send_buffer_size(send_buffer);
                        serve(s, &mut rx, &dropped).await
                    }
                    Ok(Err(e)) => Ended::Failed(e),
                    Err(_) => Ended::Failed(std::io::ErrorKind::TimedOut.into()),
                }
            }
            // Served by `listen` (see [`Output::start`]).
            Endpoint::Listen(_) => return,
            Endpoint::Tls { addr, skip_verify } => {
                let connector = tls.get_or_insert_with(|| super::tls::connector(*skip_verify));
                match connect_tls(connector, addr, send_buffer).await {
                    Ok(s) => serve(s, &mut rx, &dropped).await,
                    Err(e) => Ended::Failed(e),
                }
            }
        };
        let error = match ended {
            Ended::Closed => return,
            Ended::Failed(error) => error,
            Ended::Lost(error) => {
                backoff = MIN_BACKOFF;
                error
            }
        };
        let lost = dropped.count.load(Ordering::Relaxed);
        tracing::warn!(%endpoint, %error, dropped = lost, "dnstap: no output; messages are dropped until it is back");
        // Wait before the next try, dropping what arrives meanwhile (nothing reads it).
        let until = Instant::now() + backoff;
        loop {
            tokio::select! {
                () = sleep_until(until) => break,
                m = rx.recv() => match m {
                    Some(m) => {
                        dropped.dequeued(m.len());
                        dropped.add(1);
                    }
                    None => return,
                },
            }
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Connects to a TLS reader at `addr` (the TCP connection and the handshake each within
/// [`IO_TIMEOUT`]).
async fn connect_tls(
    connector: &tokio_rustls::TlsConnector,
    addr: &str,
    send_buffer: usize,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let timed_out = || std::io::Error::from(std::io::ErrorKind::TimedOut);
    let name = super::tls::server_name(addr)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no server name"))?;
    let tcp = timeout(IO_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| timed_out())??;
    let _ = socket2::SockRef::from(&tcp).set_send_buffer_size(send_buffer);
    timeout(IO_TIMEOUT, connector.connect(name, tcp))
        .await
        .map_err(|_| timed_out())?
}

/// Writes the queue to one connected reader until it fails or the queue closes.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    rx: &mut mpsc::Receiver<Vec<u8>>,
    dropped: &Dropped,
) -> Ended {
    match timeout(IO_TIMEOUT, fstrm::open(&mut s)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Ended::Failed(e),
        Err(_) => return Ended::Failed(std::io::ErrorKind::TimedOut.into()),
    }
    tracing::info!("dnstap: connected to the reader");
    let mut batch = Vec::with_capacity(64 * 1024);
    loop {
        let Some(first) = rx.recv().await else {
            let _ = timeout(IO_TIMEOUT, fstrm::close(&mut s)).await;
            return Ended::Closed;
        };
        batch.clear();
        dropped.dequeued(first.len());
        fstrm::data(&mut batch, &first);
        let mut n = 1u64;
        while batch.len() < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(m) => {
                    dropped.dequeued(m.len());
                    fstrm::data(&mut batch, &m);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        let wrote = timeout(IO_TIMEOUT, async {
            s.write_all(&batch).await?;
            s.flush().await
        })
        .await;
        match wrote {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                dropped.add(n);
                return Ended::Lost(e);
            }
            Err(_) => {
                dropped.add(n);
                return Ended::Lost(std::io::ErrorKind::TimedOut.into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_queue_is_bounded_in_messages_and_in_bytes() {
        // No reader at this path.
        let nowhere = Endpoint::Unix(std::env::temp_dir().join(format!("no-dnstap-{}", std::process::id())));
        let out = Output::start(nowhere.clone(), (3, 1 << 20), 1, None);
        for _ in 0..5 {
            out.send(vec![0; 10]);
        }
        // The task has not run yet (no await since it was spawned): 3 fit, 2 are dropped.
        assert_eq!(out.dropped(), 2);
        // Then it finds no reader and drops what the queue held.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(out.dropped(), 5);
        let bytes = Output::start(nowhere, (1000, 100), 1, None);
        bytes.send(vec![0; 60]);
        bytes.send(vec![0; 60]);
        assert_eq!(bytes.dropped(), 1, "the second does not fit in 100 bytes");
        assert!(bytes.dropped.queued.load(Ordering::Relaxed) <= 100);
    }
}
