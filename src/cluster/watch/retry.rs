//! How a failing watch waits: its [`RetrySchedule`] (jittered, doubling from 1 s to 30 s as
//! client-go's reflector), and, after a refused connection, the TCP probe of the API server's
//! port that ends the wait as soon as the server is back ([`wait_for_retry`]), so that an
//! outage's end is caught up within about a second.

use std::time::Duration;

use kube::runtime::watcher;

/// How long a failing watch waits before its next attempt: `initial` after the first failure,
/// doubling after each further one up to `max`, every delay jittered down by up to a fifth so
/// that replicas started together spread their retries. The default is 1 s to 30 s (each delay
/// 0.8-1 s at first, 24-30 s at the cap), client-go's reflector range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySchedule {
    /// The delay after the first failure (before jitter).
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for RetrySchedule {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

impl RetrySchedule {
    /// The delay before the next attempt after `failures` failures in a row (at least 1),
    /// before jitter.
    pub fn base(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.initial.saturating_mul(1 << doublings).min(self.max)
    }

    /// [`RetrySchedule::base`] jittered down by up to 20 %: between 0.8 and 1 times it.
    pub fn delay(&self, failures: u32) -> Duration {
        self.base(failures).mul_f64(rand::random_range(0.8..=1.0))
    }
}

/// How often a watch whose last attempt was refused checks whether the API server's port
/// accepts connections again.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The API server's host and port, for the outage probe; `None` through a proxy (the route to
/// the server is the proxy's).
pub(super) fn probe_address(config: &kube::Config) -> Option<(String, u16)> {
    if config.proxy_url.is_some() {
        return None;
    }
    let url = &config.cluster_url;
    let host = url
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = url
        .port_u16()
        .unwrap_or(if url.scheme_str() == Some("http") { 80 } else { 443 });
    Some((host, port))
}

/// Whether `e` is a refused TCP connection to the API server (an `io::Error` of that kind in
/// its cause chain): the server is down, not failing requests.
pub(super) fn is_refused(e: &watcher::Error) -> bool {
    let source = match e {
        watcher::Error::InitialListFailed(s)
        | watcher::Error::WatchStartFailed(s)
        | watcher::Error::WatchFailed(s) => s,
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => return false,
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Sleeps until `deadline`. With `probe` (the API server's host and port, after a refused
/// connection) it also tries a bare TCP connection to it every [`PROBE_INTERVAL`] (a refused
/// connect costs a down API server nothing) and ends the sleep as soon as one is accepted;
/// returns whether one was.
pub(super) async fn wait_for_retry(deadline: tokio::time::Instant, probe: Option<&(String, u16)>) -> bool {
    let Some((host, port)) = probe else {
        tokio::time::sleep_until(deadline).await;
        return false;
    };
    loop {
        let next = (tokio::time::Instant::now() + PROBE_INTERVAL).min(deadline);
        tokio::time::sleep_until(next).await;
        if next >= deadline {
            return false;
        }
        let connect = tokio::net::TcpStream::connect((host.as_str(), *port));
        if let Ok(Ok(_)) = tokio::time::timeout(PROBE_INTERVAL, connect).await {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_schedule_doubles_to_its_cap_with_jitter_down_only() {
        let r = RetrySchedule::default();
        let secs: Vec<u64> = (1..=8).map(|n| r.base(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(r.base(u32::MAX), Duration::from_secs(30));
        for n in 1..=40 {
            for _ in 0..20 {
                let d = r.delay(n);
                assert!(d <= r.base(n) && d >= r.base(n).mul_f64(0.8), "{n}: {d:?}");
            }
        }
        // Client-go's cap is 30 s: never more.
        assert!((1..100).all(|n| r.delay(n) <= Duration::from_secs(30)));
    }
}
