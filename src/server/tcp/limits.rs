//! The bounds of one listener's TCP connections ([`TcpLimits`]) and the open-file policy they
//! follow: the connection limit from [`MAX_CONNECTIONS_ENV`], kept below the soft
//! `RLIMIT_NOFILE` ([`descriptor_ceiling`]) so the HTTP probes and upstream sockets always have
//! descriptors, and the soft limit raised to the hard one at start ([`raise_nofile_limit`]).

use std::io;
use std::time::Duration;

use crate::telemetry::tcp::ListenerTcpMetrics;

/// The environment variable that sets the most TCP connections per listener.
pub const MAX_CONNECTIONS_ENV: &str = "CLUSTER_DNS_TCP_MAX_CONNECTIONS";
/// How long an idle TCP connection is kept.
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// The default most TCP connections per listener.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1000;
/// How long a message may take to arrive whole, from its first byte (RFC 7766 §6.2.3 asks
/// servers to keep such timeouts short; stub resolvers send a query in one segment).
pub const MESSAGE_DEADLINE: Duration = Duration::from_secs(5);
/// The default budget per listener for message bytes beyond each message's first chunk.
pub const DEFAULT_BUFFER_BUDGET: usize = 4 << 20;

/// What bounds the TCP connections of one listener.
#[derive(Debug, Clone)]
pub struct TcpLimits {
    /// Most connections open at once (at least 1).
    pub max_connections: usize,
    /// A connection with nothing in flight and no message started is closed after this
    /// (`timeouts { idle }`).
    pub idle_timeout: Duration,
    /// A message must arrive whole within this from its first byte (`timeouts { read }`).
    pub message_deadline: Duration,
    /// A reply must be written within this (`timeouts { write }`); a client that does not read
    /// its replies for that long is closed.
    pub write_timeout: Duration,
    /// After this many queries a connection is closed once they are answered (`timeouts {
    /// maxtcpqueries }`); unlimited when `None`. DNS over TCP and TLS only.
    pub max_queries: Option<usize>,
    /// Bytes of message buffers beyond each message's [`FIRST_CHUNK`](super::FIRST_CHUNK), for
    /// the listener.
    pub buffer_budget: usize,
    /// Where to count open and closed connections.
    pub metrics: Option<ListenerTcpMetrics>,
    /// PROXY protocol headers before a connection's bytes (`proxyproto`).
    pub proxy: Option<std::sync::Arc<crate::chain::ProxyProtocol>>,
}

impl Default for TcpLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: TCP_IDLE_TIMEOUT,
            message_deadline: MESSAGE_DEADLINE,
            write_timeout: MESSAGE_DEADLINE,
            max_queries: None,
            buffer_budget: DEFAULT_BUFFER_BUDGET,
            metrics: None,
            proxy: None,
        }
    }
}

impl TcpLimits {
    /// The defaults, with the connection limit from [`MAX_CONNECTIONS_ENV`] when set, then
    /// kept below the open-file limit ([`descriptor_ceiling`]).
    pub fn from_env() -> Self {
        let value = std::env::var(MAX_CONNECTIONS_ENV).ok();
        Self {
            max_connections: max_connections(value.as_deref(), current_nofile()),
            ..Self::default()
        }
    }
}

/// The connection limit from the [`MAX_CONNECTIONS_ENV`] `value` (the default when unset; the
/// default with a warning when not a positive number), lowered to [`descriptor_ceiling`] of
/// `nofile` with a warning.
fn max_connections(value: Option<&str>, nofile: Option<u64>) -> usize {
    let configured = match value.map(|v| (v, v.trim().parse::<usize>())) {
        None => DEFAULT_MAX_CONNECTIONS,
        Some((_, Ok(n))) if n > 0 => n,
        Some((v, _)) => {
            tracing::warn!(
                value = %v,
                default = DEFAULT_MAX_CONNECTIONS,
                "{MAX_CONNECTIONS_ENV} is not a positive number; using the default"
            );
            DEFAULT_MAX_CONNECTIONS
        }
    };
    let ceiling = descriptor_ceiling(nofile);
    if configured > ceiling {
        tracing::warn!(
            configured,
            limit = ceiling,
            nofile = nofile.unwrap_or_default(),
            "the TCP connection limit is above what the open-file limit leaves for TCP clients; using the lower figure"
        );
    }
    configured.min(ceiling).max(1)
}

/// The soft open-file limit now (`None` when it cannot be read or is unlimited).
pub(super) fn current_nofile() -> Option<u64> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    (soft != RLIM_INFINITY).then_some(soft)
}

/// Most TCP connections a listener may hold under an open-file limit of `nofile`: a quarter of
/// the descriptors (at least 64, at most 1,024) stay free for everything else (UDP sockets, the
/// HTTP listeners and their clients, upstream sockets, the API connection, the log).
pub fn descriptor_ceiling(nofile: Option<u64>) -> usize {
    let Some(nofile) = nofile else {
        return usize::MAX;
    };
    let reserve = (nofile / 4).clamp(64, 1024);
    usize::try_from(nofile.saturating_sub(reserve))
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (as Go's runtime does, so CoreDNS does):
/// systemd and containerd 2.x hand out a soft limit of 1,024. Returns the (soft, hard) limits
/// in force afterwards.
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    if soft == hard {
        return Ok((soft, hard));
    }
    // An unlimited hard limit cannot be the soft one: the kernel caps descriptors at nr_open.
    let target = if hard == RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(1 << 20)
    } else {
        hard
    };
    if target > soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard).map_err(io::Error::from)?;
    }
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    Ok((soft, hard))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_setting() {
        assert_eq!(max_connections(None, Some(1 << 20)), DEFAULT_MAX_CONNECTIONS);
        assert_eq!(max_connections(Some(" 5000 "), Some(1 << 20)), 5000);
        // Not a positive number: the default.
        for bad in ["0", "-3", "lots", ""] {
            assert_eq!(max_connections(Some(bad), Some(1 << 20)), DEFAULT_MAX_CONNECTIONS);
        }
        // Kept below the open-file limit.
        assert_eq!(max_connections(None, Some(1024)), 768);
        assert_eq!(max_connections(Some("100000"), Some(20_000)), 18_976);
        assert_eq!(max_connections(Some("100000"), None), 100_000);
    }

    #[test]
    fn the_descriptor_ceiling_leaves_room() {
        assert_eq!(descriptor_ceiling(Some(1024)), 768);
        assert_eq!(descriptor_ceiling(Some(256)), 192);
        assert_eq!(descriptor_ceiling(Some(1 << 20)), (1 << 20) - 1024);
        assert_eq!(descriptor_ceiling(Some(10)), 1);
        assert_eq!(descriptor_ceiling(None), usize::MAX);
    }
}
