//! The TCP transport (RFC 7766) and every bound a TCP client meets. A tokio task per connection
//! reads length-prefixed messages, answers each through
//! [`DnsHandler::answer_into`](super::DnsHandler::answer_into) as its own task (so pipelined
//! queries are answered concurrently, in whatever order they finish), and writes the replies
//! back with their length prefix.
//!
//! What a client can make the server hold, and its bound:
//! * Message buffers grow with the bytes that arrived ([`MessageReader`]), never from what the
//!   length prefix claims; beyond the first [`FIRST_CHUNK`] bytes of a message, the bytes held
//!   (being received or being answered) come out of one budget per listener
//!   ([`TcpLimits::buffer_budget`]); a connection that needs more when it is spent is closed.
//! * A message must arrive whole within [`TcpLimits::message_deadline`] of its first byte, and
//!   an answer must be taken by the client within the same time (else the connection is closed
//!   and its other answers dropped); a connection with no query in flight and no message started
//!   is closed after [`TcpLimits::idle_timeout`].
//! * At most [`TcpLimits::max_connections`] connections per listener ([`MAX_CONNECTIONS_ENV`],
//!   kept below the open-file limit so the HTTP probes and upstream sockets always have
//!   descriptors). At the limit, the connection that has waited longest with no query in flight
//!   is closed to admit the new one ([`Slots`]); only when every connection has a query in flight
//!   is the new one closed.
//!
//! The same listener serves DNS over TLS (RFC 7858: the same framing inside TLS, the handshake
//! within the message deadline) and DNS over HTTPS (RFC 8484, in `doh`) when its
//! [`StreamProtocol`] says so; the bounds above hold for those connections too.
//!
//! It also raises the soft open-file limit to the hard one at start ([`raise_nofile_limit`]).
//!
//! This file holds only the public surface; the seams are files of their own: `limits` (the
//! bounds and the open-file policy), `budget` (the message-byte budget), `reader` (length-
//! prefixed messages), `slots` (the connection limit and eviction), `protocol` (TCP, TLS or
//! HTTPS, and the TLS configuration), `shared` (what a listener's connections share), `accept`
//! (the accept loop and the TLS handshake), `connection` (DNS over TCP and TLS) and `doh` (DNS
//! over HTTPS). The connection kinds only import what they share, never each other.

mod accept;
mod budget;
mod connection;
pub(crate) mod doh;
mod limits;
mod protocol;
mod reader;
mod shared;
mod slots;

pub use accept::serve_protocol_until;
pub use budget::{Budget, FIRST_CHUNK, Reservation};
pub use limits::{
    DEFAULT_BUFFER_BUDGET, DEFAULT_MAX_CONNECTIONS, MAX_CONNECTIONS_ENV, MESSAGE_DEADLINE, TCP_IDLE_TIMEOUT,
    TcpLimits, descriptor_ceiling, raise_nofile_limit,
};
pub use protocol::{StreamProtocol, TlsCell};
pub use reader::{MessageReader, ReadError};
pub use slots::{Admission, Slot, Slots};
