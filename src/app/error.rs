//! Why the server could not start, or a new configuration could not be applied.

use std::net::SocketAddr;

use super::build::BuildError;
use crate::corefile::CorefileError;
use crate::server::ServerError;

/// Why the server could not start (or a new configuration could not be applied).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration could not be built (a zone, a manifest, the API connection).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A listener could not be bound.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// An HTTP listener (`health`, `ready`, `prometheus`) could not be bound.
    #[error("cannot listen on {addr} for {what}: {source}")]
    Http {
        /// The address.
        addr: SocketAddr,
        /// What it serves.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The metrics registry refused a metric (a bug).
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    /// A reloaded Corefile is not UTF-8 text.
    #[error("{}: the Corefile is not UTF-8 text", .0.display())]
    NotUtf8(std::path::PathBuf),
    /// A reloaded Corefile is not valid.
    #[error(transparent)]
    Corefile(#[from] CorefileError),
}
