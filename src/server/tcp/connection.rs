//! One DNS-over-TCP (or DNS-over-TLS) connection (RFC 7766): it reads length-prefixed
//! messages, answers each through [`DnsHandler::answer_into`](crate::server::DnsHandler::answer_into)
//! as its own task (so pipelined queries are answered concurrently, in whatever order they
//! finish, at most [`MAX_IN_FLIGHT`] at once), and writes the replies back with their length
//! prefix, each within the write timeout. It closes when idle, late, evicted, over budget,
//! after its most queries, or when the listener stops.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::budget::Reservation;
use super::reader::{MessageReader, ReadError};
use super::shared::Shared;
use super::slots::Slot;
use crate::server::handler::DnsHandler;
use crate::telemetry::tcp::CloseReason;

/// Most queries of one connection answered at the same time; reading waits beyond that.
const MAX_IN_FLIGHT: usize = 32;

/// Serves one connection until the client closes it, a bound closes it, or the listener
/// stops; then it sends the answers already being worked on.
pub(super) async fn connection<S>(stream: S, src: SocketAddr, shared: Arc<Shared>, slot: Slot)
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (rd, wr) = tokio::io::split(stream);
    let wr = Arc::new(tokio::sync::Mutex::new(wr));
    let mut reader = MessageReader::new(rd, shared.budget.clone());
    let mut in_flight = JoinSet::new();
    let mut idle_since = Instant::now();
    let limits = &shared.limits;
    let mut stopping = shared.stopping.clone();
    let mut queries = 0usize;
    let reason = loop {
        let (timer, on_timer) = match reader.started() {
            Some(t) => (Some(t + limits.message_deadline), CloseReason::Deadline),
            None if in_flight.is_empty() => (Some(idle_since + limits.idle_timeout), CloseReason::Idle),
            None => (None, CloseReason::Idle),
        };
        tokio::select! {
            biased;
            () = slot.evicted() => break Some(CloseReason::Limit),
            // The listener stops: answer what was read, then close.
            _ = stopping.wait_for(|stop| *stop) => break None,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                if matches!(done, Ok(Stalled(true))) {
                    // The client does not read its answers.
                    break Some(CloseReason::Deadline);
                }
                if in_flight.is_empty() {
                    slot.waiting();
                    idle_since = Instant::now();
                }
            }
            () = tokio::time::sleep_until(timer.unwrap_or_else(Instant::now)), if timer.is_some() => {
                break Some(on_timer);
            }
            read = reader.read_some(), if in_flight.len() < MAX_IN_FLIGHT => match read {
                Ok(None) => {}
                Ok(Some((msg, held))) => {
                    let still_open = slot.busy();
                    let handler = shared.handler.clone();
                    in_flight.spawn(answer(handler, msg, held, src, wr.clone(), limits.write_timeout));
                    if !still_open {
                        break Some(CloseReason::Limit);
                    }
                    queries += 1;
                    if limits.max_queries.is_some_and(|most| queries >= most) {
                        break Some(CloseReason::MaxQueries);
                    }
                }
                Err(ReadError::Budget) => break Some(CloseReason::Buffer),
                Err(ReadError::Closed(error)) => {
                    tracing::trace!(%src, %error, "TCP connection closed by the client");
                    break None;
                }
            },
        }
    };
    if let Some(reason) = reason {
        shared.closed(reason);
        tracing::debug!(%src, reason = reason.label(), "closing a TCP connection");
    }
    // Free the message being read before the answers drain.
    drop(reader);
    // Let the answers already being worked on go out before the connection closes, unless the
    // client stopped reading them.
    while let Some(done) = in_flight.join_next().await {
        if matches!(done, Ok(Stalled(true))) {
            in_flight.abort_all();
        }
    }
}

/// Answers `msg` from `src` (its bytes beyond the first chunk `held` out of the listener's
/// budget until it is answered) and writes the answer to `wr` within `write_deadline`.
async fn answer<W: AsyncWrite + Unpin>(
    handler: DnsHandler,
    msg: Vec<u8>,
    held: Reservation,
    src: SocketAddr,
    wr: Arc<tokio::sync::Mutex<W>>,
    write_deadline: Duration,
) -> Stalled {
    let mut out = Vec::with_capacity(512);
    let answered = handler.answer_stream_into(&msg, src, &mut out).await;
    drop(msg);
    drop(held);
    match answered {
        // A zone transfer: its messages carry their lengths already.
        Some(served) if served.framed => write_raw(&wr, &out, write_deadline).await,
        Some(_) => write_framed(&wr, &out, write_deadline).await,
        None => Stalled(false),
    }
}

/// True when an answer could not be written within the deadline: the client does not read.
#[derive(Debug, Clone, Copy)]
struct Stalled(bool);

/// Writes `msg` with its length prefix, waiting at most `deadline` for the socket (and for the
/// answers before it).
async fn write_framed<W: AsyncWrite + Unpin>(
    wr: &tokio::sync::Mutex<W>,
    msg: &[u8],
    deadline: Duration,
) -> Stalled {
    let Ok(len) = u16::try_from(msg.len()) else {
        return Stalled(false);
    };
    let mut framed = Vec::with_capacity(msg.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(msg);
    write_raw(wr, &framed, deadline).await
}

/// Writes `bytes` (messages with their length prefixes) as they are, waiting at most
/// `deadline` for the socket (and for the answers before it).
async fn write_raw<W: AsyncWrite + Unpin>(
    wr: &tokio::sync::Mutex<W>,
    bytes: &[u8],
    deadline: Duration,
) -> Stalled {
    let write = async {
        let mut w = wr.lock().await;
        w.write_all(bytes).await?;
        // TLS holds records until flushed; a plain socket's flush does nothing.
        w.flush().await
    };
    match tokio::time::timeout(deadline, write).await {
        Ok(Ok(())) => Stalled(false),
        Ok(Err(error)) => {
            tracing::debug!(%error, "failed to write a TCP response");
            Stalled(false)
        }
        Err(_) => Stalled(true),
    }
}
