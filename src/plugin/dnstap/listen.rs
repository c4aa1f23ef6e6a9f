//! `dnstap listen SOCKET`: the server listens, and every reader that connects gets the
//! messages from then on (Frame Streams with the server as the writer, as in the outgoing
//! case: READY, the reader's ACCEPT, START, data frames). As in CoreDNS, a reader that falls
//! behind is cut off: each has a queue of [`READER_QUEUE`] messages, and one that finds it
//! full (or a write that takes more than the I/O timeout) closes that reader's connection and
//! counts the message dropped. At most [`MAX_READERS`] readers at once; more are closed at
//! once. With no reader connected, messages are discarded without counting, as CoreDNS does.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::timeout;

use super::counters::Dropped;
use super::fstrm;

/// Messages queued for one reader.
pub const READER_QUEUE: usize = 1000;
/// Readers connected at once.
pub const MAX_READERS: usize = 16;

/// Where `dnstap listen` listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A unix socket path (a stale socket file there is replaced).
    Unix(PathBuf),
    /// `HOST:PORT`.
    Tcp(String),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unix(p) => write!(f, "listen unix://{}", p.display()),
            Self::Tcp(a) => write!(f, "listen tcp://{a}"),
        }
    }
}

/// Either listener.
enum Listener {
    Unix(tokio::net::UnixListener, PathBuf),
    Tcp(tokio::net::TcpListener),
}

async fn bind(at: &Listen) -> std::io::Result<Listener> {
    match at {
        Listen::Unix(path) => {
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                std::fs::remove_file(path)?;
            }
            Ok(Listener::Unix(
                tokio::net::UnixListener::bind(path)?,
                path.clone(),
            ))
        }
        Listen::Tcp(addr) => Ok(Listener::Tcp(tokio::net::TcpListener::bind(addr.as_str()).await?)),
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Self::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Serves readers at `at` with what arrives on `rx`, until `rx` closes.
pub async fn run(at: Listen, mut rx: mpsc::Receiver<Vec<u8>>, dropped: Arc<Dropped>) {
    let listener = match bind(&at).await {
        Ok(l) => Some(l),
        Err(error) => {
            tracing::error!(endpoint = %at, %error, "dnstap: cannot listen; no reader will get messages");
            None
        }
    };
    let mut readers: Vec<mpsc::Sender<Arc<Vec<u8>>>> = Vec::new();
    loop {
        let accepted = async {
            match &listener {
                Some(Listener::Unix(l, _)) => l.accept().await.map(|(s, _)| Conn::Unix(s)),
                Some(Listener::Tcp(l)) => l.accept().await.map(|(s, _)| Conn::Tcp(s)),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            m = rx.recv() => {
                let Some(m) = m else { return };
                dropped.dequeued(m.len());
                let m = Arc::new(m);
                let before = readers.len();
                readers.retain(|r| r.try_send(m.clone()).is_ok());
                dropped.add((before - readers.len()) as u64);
            }
            conn = accepted => {
                let Ok(conn) = conn else { continue };
                readers.retain(|r| !r.is_closed());
                if readers.len() >= MAX_READERS {
                    tracing::warn!(endpoint = %at, "dnstap: {MAX_READERS} readers connected; refusing another");
                    continue;
                }
                let (tx, rx) = mpsc::channel(READER_QUEUE);
                readers.push(tx);
                match conn {
                    Conn::Unix(s) => tokio::spawn(write_to(s, rx)),
                    Conn::Tcp(s) => tokio::spawn(write_to(s, rx)),
                };
            }
        }
    }
}

enum Conn {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

/// One reader: the handshake, then its queue until it closes (the listener cut it off or is
/// gone: STOP and FINISH then) or a write fails.
async fn write_to<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, mut rx: mpsc::Receiver<Arc<Vec<u8>>>) {
    if !matches!(timeout(fstrm::IO_TIMEOUT, fstrm::open(&mut s)).await, Ok(Ok(()))) {
        return;
    }
    let mut frame = Vec::new();
    while let Some(m) = rx.recv().await {
        frame.clear();
        fstrm::data(&mut frame, &m);
        let wrote = timeout(fstrm::IO_TIMEOUT, async {
            s.write_all(&frame).await?;
            s.flush().await
        })
        .await;
        if !matches!(wrote, Ok(Ok(()))) {
            return;
        }
    }
    let _ = timeout(fstrm::IO_TIMEOUT, fstrm::close(&mut s)).await;
}
