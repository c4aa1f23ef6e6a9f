//! The `transfer` plugin: answers zone transfers (AXFR; IXFR as a whole transfer) of its zones
//! to the clients its `to` lines allow, with the records the authoritative plugin after it
//! gives ([`crate::plugin::kit::ZoneTransfer`]: `kubernetes`, `file`). The server sends the
//! answer over TCP in as many messages as it needs; over UDP a transfer is refused. It sends
//! NOTIFY to its `to` addresses when a plugin says a zone changed (`notify.rs`). See this
//! folder's README.

pub mod config;
pub mod handler;
mod notify;
pub mod setup;

pub use config::TransferConfig;
pub use handler::Transfer;
