//! The API client's own limits on what it asks of the API server (the `kubernetes` plugin's
//! `apiserver_qps`, `apiserver_burst` and `apiserver_max_inflight`): a tower layer put around
//! the `kube` client's HTTP stack, so every list and watch request of every watch passes it.
//!
//! - **Rate** (`qps`, `burst`): a token bucket, as client-go's: `burst` tokens at most, refilled
//!   at `qps` a second; a request takes one, and when none is left waits for its own (tokens are
//!   reserved in order, so waiting requests go out in the order they came). The wait is handed
//!   to the rest-client metrics layer ([`RateLimitWait`]), which observes it in
//!   `coredns_kubernetes_rest_client_rate_limiter_duration_seconds`.
//! - **Concurrency** (`max_inflight`): a semaphore held from the request being sent until its
//!   response's headers, as CoreDNS's round tripper holds it: a watch holds no permit while its
//!   stream is open, so the long-lived watches never starve the lists.
//!
//! Without any of them (CoreDNS's 0, the default) the layer passes requests straight on.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::Request;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The client's limits, as plain values (`None`: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ApiLimits {
    /// Requests a second (`apiserver_qps`).
    pub qps: Option<f32>,
    /// The bucket's size (`apiserver_burst`; with `qps` only; client-go's 10 when not given).
    pub burst: Option<u32>,
    /// Requests waiting for their response headers at once (`apiserver_max_inflight`).
    pub max_inflight: Option<u32>,
}

// `qps` is never NaN (the Corefile parser takes only non-negative numbers), so equality is one.
impl Eq for ApiLimits {}

/// client-go's burst when a rate is set without one.
pub const DEFAULT_BURST: u32 = 10;

impl ApiLimits {
    /// True when the layer would do nothing.
    pub fn is_unlimited(&self) -> bool {
        self.rate().is_none() && self.max_inflight.is_none()
    }

    fn rate(&self) -> Option<(f64, f64)> {
        let qps = f64::from(self.qps.filter(|q| *q > 0.0)?);
        let burst = f64::from(self.burst.filter(|b| *b > 0).unwrap_or(DEFAULT_BURST));
        Some((qps, burst))
    }

    /// The layer enforcing these limits. Every service it makes shares one bucket and one
    /// semaphore.
    pub fn layer(&self) -> ApiLimitLayer {
        ApiLimitLayer {
            bucket: self.rate().map(|(qps, burst)| {
                Arc::new(Mutex::new(Bucket {
                    qps,
                    burst,
                    tokens: burst,
                    at: Instant::now(),
                }))
            }),
            inflight: self
                .max_inflight
                .filter(|m| *m > 0)
                .map(|m| Arc::new(Semaphore::new(usize::try_from(m).unwrap_or(usize::MAX)))),
        }
    }
}

/// A token bucket.
///
/// Invariant: `tokens` is what the bucket held at `at`; it goes below zero by the tokens
/// reserved by requests still waiting. Read and updated under its mutex, in one step.
#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Takes a token at `now`; how long the request must wait for it.
    fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst) - 1.0;
        self.at = now;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// How long a request waited for the rate limiter: a request extension, read by the
/// rest-client metrics layer inside this one.
#[derive(Debug, Clone, Copy)]
pub struct RateLimitWait(pub Duration);

/// The tower layer ([`ApiLimits::layer`]).
#[derive(Debug, Clone)]
pub struct ApiLimitLayer {
    bucket: Option<Arc<Mutex<Bucket>>>,
    inflight: Option<Arc<Semaphore>>,
}

impl<S> tower_layer::Layer<S> for ApiLimitLayer {
    type Service = ApiLimitService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiLimitService {
            inner,
            bucket: self.bucket.clone(),
            inflight: self.inflight.clone(),
            state: Readiness::default(),
        }
    }
}

type Acquire = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;

/// Where a service is in getting ready for its next request: its token taken (and waited
/// for), then its permit.
#[derive(Default)]
struct Readiness {
    /// The wait for the token, once taken.
    waited: Option<Duration>,
    sleep: Option<Pin<Box<Sleep>>>,
    acquire: Option<Acquire>,
    permit: Option<OwnedSemaphorePermit>,
}

/// The limited HTTP service. A clone starts with no token and no permit of its own.
pub struct ApiLimitService<S> {
    inner: S,
    bucket: Option<Arc<Mutex<Bucket>>>,
    inflight: Option<Arc<Semaphore>>,
    state: Readiness,
}

impl<S: Clone> Clone for ApiLimitService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            bucket: self.bucket.clone(),
            inflight: self.inflight.clone(),
            state: Readiness::default(),
        }
    }
}

impl<S> std::fmt::Debug for ApiLimitService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiLimitService")
            .field("rate", &self.bucket.is_some())
            .field("inflight", &self.inflight.is_some())
            .finish_non_exhaustive()
    }
}

impl<S, B> tower_service::Service<Request<B>> for ApiLimitService<S>
where
    S: tower_service::Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.state.waited.is_none()
            && let Some(bucket) = &self.bucket
        {
            let wait = match bucket.lock() {
                Ok(mut b) => b.reserve(Instant::now()),
                Err(_) => Duration::ZERO,
            };
            self.state.waited = Some(wait);
            if !wait.is_zero() {
                self.state.sleep = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        if let Some(sleep) = &mut self.state.sleep {
            ready!(sleep.as_mut().poll(cx));
            self.state.sleep = None;
        }
        if self.state.permit.is_none()
            && let Some(semaphore) = &self.inflight
        {
            let acquire = self.state.acquire.get_or_insert_with(|| {
                let semaphore = semaphore.clone();
                // A closed semaphore (never closed here) lets the request go.
                Box::pin(async move { semaphore.acquire_owned().await.ok() })
            });
            self.state.permit = ready!(acquire.as_mut().poll(cx));
            self.state.acquire = None;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let state = std::mem::take(&mut self.state);
        if let Some(waited) = state.waited {
            request.extensions_mut().insert(RateLimitWait(waited));
        }
        let response = self.inner.call(request);
        let permit = state.permit;
        Box::pin(async move {
            let result = response.await;
            // The permit goes with the response's headers, not with a watch's stream.
            drop(permit);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tower_layer::Layer as _;
    use tower_service::Service as _;

    use super::*;

    /// Answers each request after 100 ms, counting how many are in flight at once and the
    /// most there were.
    #[derive(Clone, Default)]
    struct Slow {
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }

    impl tower_service::Service<Request<()>> for Slow {
        type Response = Option<Duration>;
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<()>) -> Self::Future {
            let waited = request.extensions().get::<RateLimitWait>().map(|w| w.0);
            let (now, most) = (self.now.clone(), self.most.clone());
            Box::pin(async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(waited)
            })
        }
    }

    /// Sends `n` requests at once, each through its own clone of one limited service; gives
    /// the waits the metrics layer would see.
    async fn send(limits: ApiLimits, inner: Slow, n: usize) -> Vec<Option<Duration>> {
        let svc = limits.layer().layer(inner);
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let mut svc = svc.clone();
                tokio::spawn(async move {
                    std::future::poll_fn(|cx| svc.poll_ready(cx)).await.unwrap();
                    svc.call(Request::new(())).await.unwrap()
                })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    }

    /// The bucket's invariant under concurrent writers: 8 threads reserving 100 tokens each at
    /// one instant get every wait exactly once, none lost, none given twice.
    #[test]
    fn concurrent_reservations_each_get_their_own_slot() {
        let now = Instant::now();
        let bucket = Arc::new(Mutex::new(Bucket {
            qps: 100.0,
            burst: 10.0,
            tokens: 10.0,
            at: now,
        }));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let bucket = bucket.clone();
                std::thread::spawn(move || {
                    (0..100)
                        .map(|_| bucket.lock().unwrap().reserve(now).as_micros())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut waits: Vec<u128> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        waits.sort_unstable();
        let want: Vec<u128> = (0..800u128).map(|i| i.saturating_sub(9) * 10_000).collect();
        assert_eq!(waits, want);
    }

    #[tokio::test(start_paused = true)]
    async fn max_inflight_holds_requests_until_headers() {
        let inner = Slow::default();
        let started = Instant::now();
        let limits = ApiLimits {
            max_inflight: Some(2),
            ..ApiLimits::default()
        };
        let waits = send(limits, inner.clone(), 5).await;
        assert_eq!(inner.most.load(Ordering::SeqCst), 2);
        // Five requests of 100 ms, two at a time.
        assert_eq!(started.elapsed(), Duration::from_millis(300));
        assert!(waits.iter().all(Option::is_none), "no rate limiter: {waits:?}");
        // Without the limit, all five at once.
        let inner = Slow::default();
        send(ApiLimits::default(), inner.clone(), 5).await;
        assert_eq!(inner.most.load(Ordering::SeqCst), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn qps_and_burst_space_requests_out_and_report_the_wait() {
        let limits = ApiLimits {
            qps: Some(10.0),
            burst: Some(2),
            max_inflight: None,
        };
        let started = Instant::now();
        let mut waits = send(limits, Slow::default(), 6).await;
        waits.sort();
        // Two from the bucket at once, then one every 100 ms.
        let ms = |m: u64| Some(Duration::from_millis(m));
        assert_eq!(waits, [ms(0), ms(0), ms(100), ms(200), ms(300), ms(400)]);
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        // A rate without a burst gets client-go's 10; a burst without a rate limits nothing.
        let limits = ApiLimits {
            qps: Some(1.0),
            ..ApiLimits::default()
        };
        let waits = send(limits, Slow::default(), 10).await;
        assert!(waits.iter().all(|w| *w == ms(0)), "{waits:?}");
        assert!(
            ApiLimits {
                burst: Some(5),
                ..ApiLimits::default()
            }
            .is_unlimited()
        );
    }
}
