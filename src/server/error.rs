//! The serving layer's errors ([`ServerError`]), with what to do about a port the process may
//! not bind.

/// Errors of the serving layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A socket could not be bound (with what to do when a port below 1024 is refused).
    #[error("cannot listen on {addr}: {source}{}", privileged_port_hint(addr, source))]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server stopped with an error.
    #[error("dns server failed: {0}")]
    Serve(String),
}

/// What to do when binding `addr` was refused for want of privilege: ports below 1024 need
/// CAP_NET_BIND_SERVICE, which a non-root process gets only from a file capability on the
/// binary or a lowered `net.ipv4.ip_unprivileged_port_start`. Empty for other errors.
fn privileged_port_hint(addr: &str, error: &std::io::Error) -> String {
    let port = addr.rsplit(':').next().and_then(|p| {
        p.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse::<u16>()
            .ok()
    });
    match port {
        Some(port) if port < 1024 && error.kind() == std::io::ErrorKind::PermissionDenied => {
            let binary = std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "cluster-dns".to_owned());
            format!(
                "; port {port} needs the NET_BIND_SERVICE capability, which a non-root process gets \
                 from a file capability on the binary (`setcap cap_net_bind_service=+ep {binary}`, as \
                 the image is built) or when the pod sets the sysctl \
                 net.ipv4.ip_unprivileged_port_start={port} (securityContext.sysctls); \
                 capabilities.add alone does not reach a non-root process on containerd 1.x or CRI-O"
            )
        }
        _ => String::new(),
    }
}
