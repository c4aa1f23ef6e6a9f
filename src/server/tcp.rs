//! The TCP transport (RFC 7766): a tokio task per connection reads length-prefixed messages,
//! answers each through [`DnsHandler::answer_into`] as its own task (so pipelined queries are
//! answered concurrently, in whatever order they finish), and writes the replies back with
//! their length prefix. A connection idle for [`TCP_IDLE_TIMEOUT`] is closed.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::{DnsHandler, TCP_IDLE_TIMEOUT};
use crate::proto::Transport;

/// Most queries of one connection answered at the same time; reading waits beyond that.
const MAX_IN_FLIGHT: usize = 32;

/// Accepts connections on `listener` and serves each until it closes or idles out. Runs until
/// the task is aborted.
pub async fn serve(listener: TcpListener, handler: DnsHandler) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        match accepted {
            Ok((stream, src)) => {
                connections.spawn(connection(stream, src, handler.clone()));
            }
            Err(error) => {
                tracing::debug!(%error, "error accepting a TCP connection");
                // Out of descriptors and the like: do not spin.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn connection(stream: TcpStream, src: SocketAddr, handler: DnsHandler) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let wr = Arc::new(Mutex::new(wr));
    let mut in_flight = JoinSet::new();
    loop {
        while in_flight.len() >= MAX_IN_FLIGHT {
            in_flight.join_next().await;
        }
        while in_flight.try_join_next().is_some() {}
        let mut len = [0u8; 2];
        match timeout(TCP_IDLE_TIMEOUT, rd.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => break,
        }
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        match timeout(TCP_IDLE_TIMEOUT, rd.read_exact(&mut msg)).await {
            Ok(Ok(_)) => {}
            _ => break,
        }
        let handler = handler.clone();
        let wr = wr.clone();
        in_flight.spawn(async move {
            let mut out = Vec::with_capacity(512);
            if handler
                .answer_into(&msg, src, Transport::Tcp, &mut out)
                .await
                .is_none()
            {
                return;
            }
            write_framed(&wr, &out).await;
        });
    }
    // Let the answers already being worked on go out before the connection closes.
    while in_flight.join_next().await.is_some() {}
}

async fn write_framed(wr: &Mutex<OwnedWriteHalf>, msg: &[u8]) {
    let Ok(len) = u16::try_from(msg.len()) else {
        return;
    };
    let mut framed = Vec::with_capacity(msg.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(msg);
    let mut w = wr.lock().await;
    if let Err(error) = w.write_all(&framed).await {
        tracing::debug!(%error, "failed to write a TCP response");
    }
}
