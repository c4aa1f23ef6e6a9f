//! Reading length-prefixed DNS messages from a stream ([`MessageReader`]): the buffer grows
//! with the bytes that arrived, never from what the length prefix claims, and what goes beyond
//! the first chunk is reserved from the listener's [`Budget`].

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

use super::budget::{Budget, FIRST_CHUNK, Reservation};

/// Why reading a message stopped.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed, or the socket failed.
    Closed(io::Error),
    /// The listener's buffer budget could not cover the message.
    Budget,
}

/// Reads length-prefixed messages from `rd`, one `read` at a time, into a buffer that grows with
/// what arrived: up to [`FIRST_CHUNK`] bytes at first, then doubling up to the length the
/// prefix claims, the part beyond the first chunk reserved from the listener's [`Budget`].
/// Every step keeps its progress in `self`, so [`MessageReader::read_some`] is cancel-safe.
#[derive(Debug)]
pub struct MessageReader<R> {
    rd: R,
    prefix: [u8; 2],
    prefix_len: usize,
    claimed: usize,
    buf: Vec<u8>,
    filled: usize,
    started: Option<Instant>,
    reservation: Reservation,
}

impl<R: AsyncRead + Unpin> MessageReader<R> {
    /// A reader over `rd` whose large messages draw on `budget`.
    pub fn new(rd: R, budget: Arc<Budget>) -> Self {
        Self {
            rd,
            prefix: [0; 2],
            prefix_len: 0,
            claimed: 0,
            buf: Vec::new(),
            filled: 0,
            started: None,
            reservation: Reservation::new(budget),
        }
    }

    /// When the first byte of the message being read arrived (`None` between messages).
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Bytes allocated for the message being read.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Bytes of the message being read that arrived (prefix included).
    pub fn received(&self) -> usize {
        self.prefix_len + self.filled
    }

    /// One `read` from the socket. `Some` with a whole message (and the reservation covering
    /// it, to hold while it is answered), `None` when more must arrive.
    pub async fn read_some(&mut self) -> Result<Option<(Vec<u8>, Reservation)>, ReadError> {
        if self.prefix_len < 2 {
            let n = self
                .rd
                .read(&mut self.prefix[self.prefix_len..])
                .await
                .map_err(ReadError::Closed)?;
            if n == 0 {
                return Err(ReadError::Closed(io::ErrorKind::UnexpectedEof.into()));
            }
            self.started.get_or_insert_with(Instant::now);
            self.prefix_len += n;
            if self.prefix_len < 2 {
                return Ok(None);
            }
            self.claimed = usize::from(u16::from_be_bytes(self.prefix));
            if self.claimed == 0 {
                return Ok(Some(self.finish()));
            }
        }
        if self.filled == self.buf.len() {
            let target = self.claimed.min(FIRST_CHUNK.max(self.filled.saturating_mul(2)));
            if !self.reservation.resize(target.saturating_sub(FIRST_CHUNK)) {
                return Err(ReadError::Budget);
            }
            self.buf.reserve_exact(target - self.buf.len());
            self.buf.resize(target, 0);
        }
        let n = self
            .rd
            .read(&mut self.buf[self.filled..])
            .await
            .map_err(ReadError::Closed)?;
        if n == 0 {
            return Err(ReadError::Closed(io::ErrorKind::UnexpectedEof.into()));
        }
        self.filled += n;
        if self.filled < self.claimed {
            return Ok(None);
        }
        Ok(Some(self.finish()))
    }

    fn finish(&mut self) -> (Vec<u8>, Reservation) {
        let msg = std::mem::take(&mut self.buf);
        let fresh = self.reservation.fresh();
        let held = std::mem::replace(&mut self.reservation, fresh);
        self.prefix_len = 0;
        self.claimed = 0;
        self.filled = 0;
        self.started = None;
        (msg, held)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (c, s)
    }

    /// Reads until `want` bytes of the current message arrived (or a message is whole).
    async fn read_until<R: AsyncRead + Unpin>(
        r: &mut MessageReader<R>,
        want: usize,
    ) -> Option<(Vec<u8>, Reservation)> {
        for _ in 0..10_000 {
            if let Some(m) = r.read_some().await.unwrap() {
                return Some(m);
            }
            if r.received() >= want {
                return None;
            }
        }
        panic!("no progress");
    }

    #[tokio::test]
    async fn the_buffer_grows_with_what_arrived_not_with_the_prefix() {
        let (mut client, server) = pair().await;
        let budget = Budget::new(1 << 20);
        let mut r = MessageReader::new(server, budget.clone());
        client.write_all(&[0xff, 0xff]).await.unwrap();
        client.write_all(&[7u8; 100]).await.unwrap();
        assert!(read_until(&mut r, 102).await.is_none());
        // 100 bytes arrived of 65,535 claimed: one first chunk, nothing from the budget.
        assert!(r.capacity() <= FIRST_CHUNK, "capacity {}", r.capacity());
        assert_eq!(budget.used(), 0);
        client.write_all(&[7u8; 3000]).await.unwrap();
        assert!(read_until(&mut r, 3102).await.is_none());
        // At most twice what arrived.
        assert!(r.capacity() <= 2 * 3100, "capacity {}", r.capacity());
        assert_eq!(budget.used(), r.capacity() - FIRST_CHUNK);
        // The rest arrives: the whole message, its bytes held by the reservation until dropped.
        client.write_all(&vec![7u8; 65_535 - 3100]).await.unwrap();
        let (msg, held) = read_until(&mut r, usize::MAX).await.unwrap();
        assert_eq!(msg.len(), 65_535);
        assert_eq!(held.bytes(), 65_535 - FIRST_CHUNK);
        assert_eq!(budget.used(), 65_535 - FIRST_CHUNK);
        drop(held);
        assert_eq!(budget.used(), 0);
        // The next message starts from nothing.
        assert_eq!(r.capacity(), 0);
        assert!(r.started().is_none());
        // A small pipelined pair: each whole, no budget.
        client.write_all(&[0, 3, 1, 2, 3, 0, 1, 9]).await.unwrap();
        let (a, _) = read_until(&mut r, usize::MAX).await.unwrap();
        let (b, _) = read_until(&mut r, usize::MAX).await.unwrap();
        assert_eq!((a, b), (vec![1, 2, 3], vec![9]));
        assert_eq!(budget.used(), 0);
    }

    #[tokio::test]
    async fn a_spent_budget_stops_the_reader_and_dropping_it_gives_back() {
        let (mut client, server) = pair().await;
        let budget = Budget::new(4096);
        let mut r = MessageReader::new(server, budget.clone());
        client.write_all(&[0xff, 0xff]).await.unwrap();
        client.write_all(&[1u8; 20_000]).await.unwrap();
        let mut outcome = None;
        for _ in 0..10_000 {
            match r.read_some().await {
                Ok(None) => {}
                other => {
                    outcome = Some(other);
                    break;
                }
            }
        }
        assert!(matches!(outcome, Some(Err(ReadError::Budget))), "{outcome:?}");
        assert!(budget.used() <= 4096);
        drop(r);
        assert_eq!(budget.used(), 0);
    }
}
