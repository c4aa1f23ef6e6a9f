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
/// How often binding is tried again after it failed.
const BIND_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

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

/// Either listener (a unix one with its socket file's inode, to remove only its own file).
enum Listener {
    Unix(tokio::net::UnixListener, PathBuf, u64),
    Tcp(tokio::net::TcpListener),
}

async fn bind(at: &Listen) -> std::io::Result<Listener> {
    match at {
        Listen::Unix(path) => {
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                std::fs::remove_file(path)?;
            }
            use std::os::unix::fs::MetadataExt;
            let l = tokio::net::UnixListener::bind(path)?;
            let ino = std::fs::symlink_metadata(path)?.ino();
            Ok(Listener::Unix(l, path.clone(), ino))
        }
        Listen::Tcp(addr) => Ok(Listener::Tcp(tokio::net::TcpListener::bind(addr.as_str()).await?)),
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        // Not a file a newer listener bound at the same path meanwhile.
        if let Self::Unix(_, path, ino) = self
            && std::fs::symlink_metadata(&*path).is_ok_and(|m| m.ino() == *ino)
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Serves readers at `at` with what arrives on `rx`, until `rx` closes.
pub async fn run(at: Listen, mut rx: mpsc::Receiver<Vec<u8>>, dropped: Arc<Dropped>) {
    // Until it can bind (the address may still be held by the configuration this one replaces),
    // messages are discarded; it tries again every second.
    let listener = loop {
        match bind(&at).await {
            Ok(l) => break l,
            Err(error) => {
                tracing::warn!(endpoint = %at, %error, "dnstap: cannot listen yet; trying again in 1 s");
                let again = tokio::time::Instant::now() + BIND_RETRY;
                loop {
                    tokio::select! {
                        () = tokio::time::sleep_until(again) => break,
                        m = rx.recv() => match m {
                            Some(m) => dropped.dequeued(m.len()),
                            None => return,
                        },
                    }
                }
            }
        }
    };
    let mut readers: Vec<mpsc::Sender<Arc<Vec<u8>>>> = Vec::new();
    loop {
        let accepted = async {
            match &listener {
                Listener::Unix(l, _, _) => l.accept().await.map(|(s, _)| Conn::Unix(s)),
                Listener::Tcp(l) => l.accept().await.map(|(s, _)| Conn::Tcp(s)),
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
