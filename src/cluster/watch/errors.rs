//! The API source's errors and how they read: [`WatchError`] (why a source could not start),
//! and the one-line renderings of a failed API request that the watch logs and `/ready` shows
//! ([`describe_error`], [`error_chain`]), with the shape that makes two errors "the same" for
//! the log-once rule ([`error_shape`]). Kept apart so that every part of the source renders
//! errors the same way.

use std::path::PathBuf;

/// Why the API source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// The in-cluster service-account configuration could not be read.
    #[error(
        "kubernetes: in-cluster configuration is not available (not running in a pod?): {source}. Outside a cluster, add `endpoint URL` or `kubeconfig PATH` to the kubernetes block (see `fake-apiserver` for a local API server)"
    )]
    InCluster {
        /// kube's error.
        #[source]
        source: kube::config::InClusterError,
    },
    /// `endpoint URL` is not a valid URL.
    #[error("kubernetes: endpoint '{url}' is not a valid URL: {message}")]
    Endpoint {
        /// The URL as written.
        url: String,
        /// The parser's message.
        message: String,
    },
    /// The kubeconfig file (or the one built for `tls`) could not be loaded.
    #[error("kubernetes: cannot load kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        /// The file (for `tls`, the endpoint URL).
        path: PathBuf,
        /// kube's error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The HTTP client could not be built from the configuration.
    #[error("kubernetes: cannot build the API client for {url}: {source}")]
    Client {
        /// The API server URL.
        url: String,
        /// kube's error.
        #[source]
        source: kube::Error,
    },
    /// The source is not an API source (`manifests` is loaded elsewhere).
    #[error("kubernetes: not an API source")]
    NotApi,
}

/// One line for a failed API request: the API's status for an HTTP error
/// (`403 Forbidden: services is forbidden: ...`), else the error with its whole cause chain
/// (`ServiceError: client error (Connect): ...: invalid peer certificate: UnknownIssuer`).
pub fn describe_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => describe_status(status),
        other => error_chain(other),
    }
}

pub(super) fn describe_status(status: &kube::core::Status) -> String {
    let reason = if status.reason.is_empty() {
        axum::http::StatusCode::from_u16(status.code)
            .ok()
            .and_then(|c| c.canonical_reason())
            .unwrap_or("error")
    } else {
        status.reason.as_str()
    };
    if status.message.is_empty() {
        format!("{} {reason}", status.code)
    } else {
        format!("{} {reason}: {}", status.code, status.message)
    }
}

/// What makes two errors "the same" for logging: their text with every run of digits as one
/// `0`, so that an expired certificate's changing verification time (`verification time
/// 1796288422 (UNIX) ... (86401 seconds ago)`) does not log again at every retry.
pub(super) fn error_shape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_digits = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('0');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// `e` and every error in its `source()` chain, joined with `: `; a cause whose text its parent
/// already includes is not repeated.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_names_every_cause_once() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let e = E(
            "client error (Connect)",
            Some(Box::new(E(
                "invalid peer certificate: UnknownIssuer",
                Some(Box::new(E("UnknownIssuer", None))),
            ))),
        );
        assert_eq!(
            error_chain(&e),
            "client error (Connect): invalid peer certificate: UnknownIssuer"
        );
        assert_eq!(
            error_shape("expired: verification time 1796288422 (UNIX), not after 1796202021 (86401 s ago)"),
            error_shape("expired: verification time 1796288424 (UNIX), not after 1796202021 (86403 s ago)"),
        );
        assert_ne!(error_shape("401 Unauthorized"), error_shape("403 Forbidden"));
        let status = kube::core::Status::failure("services is forbidden", "Forbidden").with_code(403);
        assert_eq!(
            describe_error(&kube::Error::Api(Box::new(status))),
            "403 Forbidden: services is forbidden"
        );
    }
}
