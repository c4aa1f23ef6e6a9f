//! How a watch asks for its initial state ([`ListMode`]): a streaming list (a watch with
//! `sendInitialEvents=true`, no page of decoded objects ever held), or, for an API server older
//! than 1.27 by `GET /version` or one that refuses the parameter (`422 Invalid`: the WatchList
//! feature gate is off), the paginated list.

use std::time::Duration;

use kube::runtime::watcher;

use super::errors::describe_error;

/// How a watch asks for its initial state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMode {
    /// A watch with `sendInitialEvents=true`: the state comes as events, one object at a time,
    /// and a bookmark marks its end (the WatchList API, on by default from Kubernetes 1.32).
    Streaming,
    /// `list` in pages, then a watch from the list's resourceVersion.
    Pages,
}

/// The first Kubernetes version whose API server knows `sendInitialEvents`; older ones ignore
/// it, and their watch would never end its initial events.
const STREAMING_SINCE: (u32, u32) = (1, 27);

/// How long the API server's version may take before the watches go on without it.
const VERSION_TIMEOUT: Duration = Duration::from_secs(2);

impl ListMode {
    /// The mode to start with, from the API server's `GET /version`: pages for a server older
    /// than [`STREAMING_SINCE`], streaming otherwise, also when the version cannot be had
    /// (every supported Kubernetes release knows the parameter; one with the feature off refuses
    /// it with 422, and [`ListMode::refusal`] falls back).
    pub(super) async fn of_server(client: &kube::Client) -> Self {
        match tokio::time::timeout(VERSION_TIMEOUT, client.apiserver_version()).await {
            Ok(Ok(info)) => {
                let mode = Self::of_version(&info.major, &info.minor);
                tracing::info!(target: "cluster_dns::watch", version = %info.git_version, lists = ?mode, "API server version");
                mode
            }
            Ok(Err(e)) => {
                tracing::debug!(target: "cluster_dns::watch", error = %describe_error(&e), "no API server version: trying streaming lists");
                Self::Streaming
            }
            Err(_) => Self::Streaming,
        }
    }

    /// [`ListMode::of_server`] for a version's major and minor fields (`"1"`, `"30+"`: managed
    /// clusters add suffixes).
    fn of_version(major: &str, minor: &str) -> Self {
        let number = |s: &str| {
            s.trim_start_matches('v')
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u32>()
                .ok()
        };
        match (number(major), number(minor)) {
            (Some(major), Some(minor)) if (major, minor) < STREAMING_SINCE => Self::Pages,
            _ => Self::Streaming,
        }
    }

    /// The API server's refusal of a streaming list, if `e` is one: an HTTP 422 (or 400) to the
    /// watch request (the real server's answer when its WatchList feature gate is off).
    pub(super) fn refusal(e: &watcher::Error) -> Option<&kube::core::Status> {
        match e {
            watcher::Error::WatchStartFailed(kube::Error::Api(status))
                if status.code == 422 || status.code == 400 =>
            {
                Some(status)
            }
            _ => None,
        }
    }

    /// `wc` set for this mode.
    pub(super) fn config(self, wc: &watcher::Config) -> watcher::Config {
        match self {
            Self::Streaming => wc.clone().streaming_lists(),
            Self::Pages => wc.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streaming lists unless the version says the server predates them; only a 422 or 400 to
    /// the streaming watch is a refusal of the mode (RBAC and server errors go the usual way).
    #[test]
    fn streaming_lists_from_1_27_and_when_the_version_is_unclear() {
        assert_eq!(ListMode::of_version("1", "26"), ListMode::Pages);
        assert_eq!(ListMode::of_version("1", "20+"), ListMode::Pages);
        assert_eq!(ListMode::of_version("1", "27"), ListMode::Streaming);
        assert_eq!(ListMode::of_version("1", "30+"), ListMode::Streaming);
        assert_eq!(ListMode::of_version("2", "0"), ListMode::Streaming);
        assert_eq!(ListMode::of_version("", ""), ListMode::Streaming);
        let status = |code| {
            watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            })))
        };
        assert!(ListMode::refusal(&status(422)).is_some());
        assert!(ListMode::refusal(&status(400)).is_some());
        assert!(
            ListMode::refusal(&status(403)).is_none(),
            "RBAC is not a refusal of the mode"
        );
        assert!(ListMode::refusal(&status(500)).is_none());
    }
}
