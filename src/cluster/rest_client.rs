//! Measuring the API client's HTTP requests: a tower layer put around the `kube` client's HTTP
//! stack (so every list and watch request the watches make goes through it) that records
//! CoreDNS's `coredns_kubernetes_rest_client_*` families (client-go's rest-client metrics, which
//! CoreDNS re-exports under its own prefix):
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `coredns_kubernetes_rest_client_requests_total` | counter | code, method, host |
//! | `coredns_kubernetes_rest_client_request_duration_seconds` | histogram | verb, host |
//! | `coredns_kubernetes_rest_client_rate_limiter_duration_seconds` | histogram | verb, host |
//!
//! - `method` / `verb`: the HTTP method (`GET` for lists and watches), from a fixed set; any
//!   other method is `other`.
//! - `code`: the HTTP status code of the response, or `<error>` when no response came (refused
//!   connection, TLS failure, timeout), as client-go labels it. Status codes are three digits,
//!   so the set is bounded.
//! - `host`: the API server's `host:port` as configured (one per process, never a client's
//!   input).
//! - The request duration runs from the request being sent to the response's headers (for a
//!   watch, the moment the stream is opened, not its whole life), as client-go measures it.
//! - The rate limiter: how long the request waited for `apiserver_qps`'s token bucket
//!   ([`crate::cluster::api_limits`], the layer outside this one); 0 s without a rate, so that
//!   the family and its counts exist for the dashboards that graph it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Method, Request, Response};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use crate::cluster::api_limits::RateLimitWait;
use crate::telemetry::register_all;

/// The HTTP methods the label set names; anything else is `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// The three rest-client families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RestClientMetrics {
    requests: IntCounterVec,
    duration: HistogramVec,
    rate_limiter: HistogramVec,
}

impl RestClientMetrics {
    /// Creates the families and registers them in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let metrics = Self::new()?;
        register_all(registry, metrics.collectors())?;
        Ok(metrics)
    }

    /// The families, not registered (see [`RestClientMetrics::collectors`]).
    pub fn new() -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "coredns_kubernetes_rest_client_requests_total",
                "Number of HTTP requests, partitioned by status code, method, and host.",
            ),
            &["code", "method", "host"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "coredns_kubernetes_rest_client_request_duration_seconds",
                "Request latency in seconds. Broken down by verb and host.",
            )
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 16)?),
            &["verb", "host"],
        )?;
        let rate_limiter = HistogramVec::new(
            HistogramOpts::new(
                "coredns_kubernetes_rest_client_rate_limiter_duration_seconds",
                "Client side rate limiter latency in seconds. Broken down by verb and host.",
            )
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 16)?),
            &["verb", "host"],
        )?;
        Ok(Self {
            requests,
            duration,
            rate_limiter,
        })
    }

    /// The collectors to register.
    pub fn collectors(&self) -> Vec<Box<dyn prometheus::core::Collector>> {
        vec![
            Box::new(self.requests.clone()),
            Box::new(self.duration.clone()),
            Box::new(self.rate_limiter.clone()),
        ]
    }

    /// The layer that measures requests to the API server at `host` (`host:port`).
    pub fn layer(&self, host: impl Into<String>) -> RestClientLayer {
        RestClientLayer {
            metrics: self.clone(),
            host: Arc::from(host.into()),
        }
    }

    fn observe(&self, method: &'static str, host: &str, code: &str, elapsed: f64, waited: f64) {
        self.requests.with_label_values(&[code, method, host]).inc();
        self.duration.with_label_values(&[method, host]).observe(elapsed);
        self.rate_limiter
            .with_label_values(&[method, host])
            .observe(waited);
    }
}

/// The tower layer ([`RestClientMetrics::layer`]).
#[derive(Debug, Clone)]
pub struct RestClientLayer {
    metrics: RestClientMetrics,
    host: Arc<str>,
}

impl<S> tower_layer::Layer<S> for RestClientLayer {
    type Service = RestClientService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RestClientService {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// The measured HTTP service.
#[derive(Debug, Clone)]
pub struct RestClientService<S> {
    inner: S,
    metrics: RestClientMetrics,
    host: Arc<str>,
}

impl<S, B, R> tower_service::Service<Request<B>> for RestClientService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = method_label(request.method());
        let waited = request
            .extensions()
            .get::<RateLimitWait>()
            .map_or(0.0, |w| w.0.as_secs_f64());
        let metrics = self.metrics.clone();
        let host = self.host.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let elapsed = started.elapsed().as_secs_f64();
            match &result {
                Ok(r) => metrics.observe(method, &host, r.status().as_str(), elapsed, waited),
                Err(_) => metrics.observe(method, &host, "<error>", elapsed, waited),
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use tower_layer::Layer as _;
    use tower_service::Service as _;

    use super::*;
    use crate::telemetry::render_registry;

    /// A service that answers every request with `status`, or fails when `status` is 0.
    #[derive(Clone)]
    struct Fixed(u16);

    impl tower_service::Service<Request<()>> for Fixed {
        type Response = Response<()>;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<Response<()>, std::io::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            std::future::ready(if self.0 == 0 {
                Err(std::io::Error::other("refused"))
            } else {
                let mut r = Response::new(());
                *r.status_mut() = http::StatusCode::from_u16(self.0).unwrap_or_default();
                Ok(r)
            })
        }
    }

    #[tokio::test]
    async fn counts_codes_methods_and_transport_errors() {
        let registry = Registry::new();
        let metrics = RestClientMetrics::register(&registry).unwrap();
        let layer = metrics.layer("10.96.0.1:443");
        for (status, method) in [
            (200, Method::GET),
            (200, Method::GET),
            (410, Method::GET),
            (0, Method::OPTIONS),
        ] {
            let mut svc = layer.layer(Fixed(status));
            let request = Request::builder().method(method).body(()).unwrap();
            let _ = svc.call(request).await;
        }
        let text = render_registry(&registry);
        for want in [
            "coredns_kubernetes_rest_client_requests_total{code=\"200\",host=\"10.96.0.1:443\",method=\"GET\"} 2",
            "coredns_kubernetes_rest_client_requests_total{code=\"410\",host=\"10.96.0.1:443\",method=\"GET\"} 1",
            "coredns_kubernetes_rest_client_requests_total{code=\"<error>\",host=\"10.96.0.1:443\",method=\"other\"} 1",
            "coredns_kubernetes_rest_client_request_duration_seconds_count{host=\"10.96.0.1:443\",verb=\"GET\"} 3",
            "coredns_kubernetes_rest_client_rate_limiter_duration_seconds_bucket{host=\"10.96.0.1:443\",verb=\"GET\",le=\"0.001\"} 3",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
    }
}
