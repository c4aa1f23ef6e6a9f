//! The DNS server: the answer path every transport calls to go from request bytes to response
//! bytes ([`DnsHandler::answer_into`], in `handler`), and the transports: [`udp`] (one worker
//! thread per core answering inline), [`tcp`] (a tokio task per connection; TLS and HTTPS on
//! the same listener), [`quic`] and [`h3`] (DNS over HTTP/3).
//!
//! The answer path is named stages, one file each, in the order a request meets them:
//! `validate` (the request read, and what needs no server block checked: opcode, one question,
//! EDNS version, COOKIE lengths), `route` (the block whose zone matches), `gate` (the block's
//! checks: class, signed requests, transfers), `walk` (the block's chain asked), `map` (its
//! reply made into a response message), `encode` (written with EDNS, cut to the client's limit
//! by [`fit`], a transfer framed by `xfr`, signed) and [`observe`] (metrics, query log); then
//! the UDP answer memo ([`memo`]) keeps what may be replayed (`memoize`). `handler` composes
//! them and nothing else.
//!
//! [`serve`] takes already-bound sockets and a shutdown future, so tests bind port 0 and stop
//! the server cleanly.
//!
//! This file only declares the modules and re-exports their public surface.

mod compress;
mod encode;
mod error;
pub mod fit;
mod gate;
pub mod h3;
mod handler;
mod listen;
mod map;
pub mod memo;
mod memoize;
mod notify;
pub mod observe;
pub mod proxy;
pub mod quic;
mod request;
mod route;
mod settings;
pub mod tcp;
pub mod udp;
mod validate;
mod walk;
mod xfr;

pub use error::ServerError;
pub use handler::DnsHandler;
pub use listen::{Listeners, TCP_DRAIN_LIMIT, bind, bind_stream, bind_with, serve, serve_with};
pub use observe::Served;
pub use route::{BlockRoute, Router, RouterCell, router_cell};
pub use settings::{ListenerFamilies, fold_listener, quic_limits, stream_limits};
pub use tcp::TCP_IDLE_TIMEOUT;
pub use udp::{SHED_DEPTH, Shed, UdpLimits};
