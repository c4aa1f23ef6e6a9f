//! The `forward` plugin's metrics under CoreDNS's (≥ 1.11) names, types and labels
//! (`plugin/pkg/proxy/metrics.go`, `plugin/forward/metrics.go`):
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `coredns_proxy_request_duration_seconds` | histogram | proxy_name, to, rcode |
//! | `coredns_proxy_healthcheck_failures_total` | counter | proxy_name, to |
//! | `coredns_proxy_conn_cache_hits_total` | counter | proxy_name, to, proto |
//! | `coredns_proxy_conn_cache_misses_total` | counter | proxy_name, to, proto |
//! | `coredns_forward_healthcheck_broken_total` | counter | (none) |
//! | `coredns_forward_max_concurrent_rejects_total` | counter | (none) |
//! | `cluster_dns_forward_tls_idle_connections` | gauge | to |
//! | `cluster_dns_forward_https_idle_connections` | gauge | to |
//! | `cluster_dns_forward_tcp_idle_connections` | gauge | to |
//! | `cluster_dns_forward_udp_idle_sockets` | gauge | to |
//! | `cluster_dns_forward_coalesced_total` | counter | (none) |
//! | `cluster_dns_forward_waiting_rejects_total` | counter | (none) |
//! | `cluster_dns_forward_waiting` | gauge | (none) |
//!
//! `proxy_name` is always `forward`; `to` is the upstream as `IP:PORT` (`[IPv6]:PORT`), from the
//! Corefile; `rcode` is the upstream's rcode name from a fixed list (else `other`); `proto` is
//! `udp`, `tcp`, `tcp-tls` or `https`. (CoreDNS's README gives the health-check counter an `rcode` label too; its
//! code does not have one, and neither has this.)
//!
//! UDP sockets are reused (`proto="udp"`: a hit is a socket taken from the upstream's pool, a
//! miss a new one; [`super::udp`]), and so are DNS-over-TLS connections (`proto="tcp-tls"`) and
//! DNS-over-HTTPS ones (`proto="https"`, [`super::doh`]); the idle ones kept per upstream (at
//! most 32 sockets, 16 connections, or `max_idle_conns`) are the gauges
//! `cluster_dns_forward_udp_idle_sockets`, `cluster_dns_forward_tls_idle_connections` and
//! `cluster_dns_forward_https_idle_connections`, cluster-dns's own; plain TCP connections too
//! (`proto="tcp"`, `cluster_dns_forward_tcp_idle_connections`).
//!
//! [`ForwardMetrics`] holds the families, created and registered once per process; every
//! [`Forward`](super::Forward) generation gets a clone through
//! [`Forward::with_metrics`](super::Forward::with_metrics), which resolves each upstream's series
//! once. The duration histogram of an rcode is resolved the first time an upstream answers with
//! it, then kept.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use crate::telemetry::register_all;

/// The `proxy_name` label.
pub const PROXY_NAME: &str = "forward";

/// The `rcode` label values, indexed by [`rcode_index`] (the prometheus plugin's names).
const RCODE_LABELS: [&str; 14] = [
    "NOERROR",
    "FORMERR",
    "SERVFAIL",
    "NXDOMAIN",
    "NOTIMP",
    "REFUSED",
    "YXDOMAIN",
    "YXRRSET",
    "NXRRSET",
    "NOTAUTH",
    "NOTZONE",
    "BADVERS",
    "BADCOOKIE",
    "other",
];

/// The index in [`RCODE_LABELS`] of `r`'s label (the same names as
/// [`crate::telemetry::rcode_label`]).
fn rcode_index(r: ResponseCode) -> usize {
    match u16::from(r) {
        n @ 0..=10 => usize::from(n),
        16 => 11,
        23 => 12,
        _ => 13,
    }
}

/// The forward metric families, registered once per process. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ForwardMetrics {
    request_duration: HistogramVec,
    healthcheck_failures: IntCounterVec,
    conn_cache_hits: IntCounterVec,
    conn_cache_misses: IntCounterVec,
    tls_idle: IntGaugeVec,
    https_idle: IntGaugeVec,
    tcp_idle: IntGaugeVec,
    udp_idle: IntGaugeVec,
    healthcheck_broken: IntCounter,
    max_concurrent_rejects: IntCounter,
    coalesced: IntCounter,
    waiting_rejects: IntCounter,
    waiting: IntGauge,
}

impl crate::telemetry::Families for ForwardMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        ForwardMetrics::register(registry)
    }
}

impl ForwardMetrics {
    /// Creates the families and registers them in `registry`. Registering twice in one registry
    /// fails with [`prometheus::Error::AlreadyReg`] and leaves the registry unchanged.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let m = Self {
            request_duration: HistogramVec::new(
                HistogramOpts::new(
                    "coredns_proxy_request_duration_seconds",
                    "Histogram of the time each request took.",
                )
                // CoreDNS's plugin.TimeBuckets.
                .buckets(prometheus::exponential_buckets(0.00025, 2.0, 16)?),
                &["proxy_name", "to", "rcode"],
            )?,
            healthcheck_failures: IntCounterVec::new(
                Opts::new(
                    "coredns_proxy_healthcheck_failures_total",
                    "Counter of the number of failed healthchecks.",
                ),
                &["proxy_name", "to"],
            )?,
            conn_cache_hits: IntCounterVec::new(
                Opts::new(
                    "coredns_proxy_conn_cache_hits_total",
                    "Counter of connection cache hits per upstream and protocol.",
                ),
                &["proxy_name", "to", "proto"],
            )?,
            conn_cache_misses: IntCounterVec::new(
                Opts::new(
                    "coredns_proxy_conn_cache_misses_total",
                    "Counter of connection cache misses per upstream and protocol.",
                ),
                &["proxy_name", "to", "proto"],
            )?,
            tls_idle: IntGaugeVec::new(
                Opts::new(
                    "cluster_dns_forward_tls_idle_connections",
                    "Idle DNS-over-TLS connections kept for reuse per upstream (at most 16, or max_idle_conns).",
                ),
                &["to"],
            )?,
            https_idle: IntGaugeVec::new(
                Opts::new(
                    "cluster_dns_forward_https_idle_connections",
                    "DNS-over-HTTPS (HTTP/2) connections kept for reuse per upstream (at most 16, or max_idle_conns).",
                ),
                &["to"],
            )?,
            tcp_idle: IntGaugeVec::new(
                Opts::new(
                    "cluster_dns_forward_tcp_idle_connections",
                    "Idle plain DNS-over-TCP connections kept for reuse per upstream (at most 16, or max_idle_conns).",
                ),
                &["to"],
            )?,
            udp_idle: IntGaugeVec::new(
                Opts::new(
                    "cluster_dns_forward_udp_idle_sockets",
                    "Idle UDP sockets kept for reuse per upstream (at most 32, or max_idle_conns).",
                ),
                &["to"],
            )?,
            healthcheck_broken: IntCounter::new(
                "coredns_forward_healthcheck_broken_total",
                "Counter of the number of complete failures of the healthchecks.",
            )?,
            max_concurrent_rejects: IntCounter::new(
                "coredns_forward_max_concurrent_rejects_total",
                "Counter of the number of queries rejected because the concurrent queries were at maximum.",
            )?,
            coalesced: IntCounter::new(
                "cluster_dns_forward_coalesced_total",
                "Forwarded questions answered by an identical question's upstream exchange already in flight.",
            )?,
            waiting_rejects: IntCounter::new(
                "cluster_dns_forward_waiting_rejects_total",
                "Forwarded questions answered SERVFAIL at once because too many already waited for identical ones in flight.",
            )?,
            waiting: IntGauge::new(
                "cluster_dns_forward_waiting",
                "Forwarded questions waiting for an identical question's upstream exchange in flight.",
            )?,
        };
        register_all(
            registry,
            vec![
                Box::new(m.request_duration.clone()),
                Box::new(m.healthcheck_failures.clone()),
                Box::new(m.conn_cache_hits.clone()),
                Box::new(m.conn_cache_misses.clone()),
                Box::new(m.tls_idle.clone()),
                Box::new(m.https_idle.clone()),
                Box::new(m.tcp_idle.clone()),
                Box::new(m.udp_idle.clone()),
                Box::new(m.healthcheck_broken.clone()),
                Box::new(m.max_concurrent_rejects.clone()),
                Box::new(m.coalesced.clone()),
                Box::new(m.waiting_rejects.clone()),
                Box::new(m.waiting.clone()),
            ],
        )?;
        Ok(m)
    }

    /// The plugin-wide series.
    pub(super) fn plugin(&self) -> PluginInstruments {
        PluginInstruments {
            healthcheck_broken: self.healthcheck_broken.clone(),
            max_concurrent_rejects: self.max_concurrent_rejects.clone(),
            coalesced: self.coalesced.clone(),
            waiting_rejects: self.waiting_rejects.clone(),
        }
    }

    /// `cluster_dns_forward_waiting` (every forward adds its waiters to it).
    pub(super) fn waiting(&self) -> IntGauge {
        self.waiting.clone()
    }

    /// The series of one upstream. The connection-cache series of both transports exist from
    /// here on (the hits at 0), so a hit ratio is defined from the start.
    pub(super) fn upstream(&self, addr: SocketAddr) -> UpstreamInstruments {
        let to = addr.to_string();
        let conn = |v: &IntCounterVec, proto: &str| v.with_label_values(&[PROXY_NAME, &to, proto]);
        for proto in ["udp", "tcp"] {
            conn(&self.conn_cache_hits, proto);
        }
        UpstreamInstruments {
            healthcheck_failures: self.healthcheck_failures.with_label_values(&[PROXY_NAME, &to]),
            durations: std::array::from_fn(|_| OnceLock::new()),
            duration_vec: self.request_duration.clone(),
            to,
        }
    }
}

/// The series of one `forward` that have no upstream label.
#[derive(Debug, Clone)]
pub(super) struct PluginInstruments {
    /// `coredns_forward_healthcheck_broken_total`.
    pub healthcheck_broken: IntCounter,
    /// `coredns_forward_max_concurrent_rejects_total`.
    pub max_concurrent_rejects: IntCounter,
    /// `cluster_dns_forward_coalesced_total`.
    pub coalesced: IntCounter,
    /// `cluster_dns_forward_waiting_rejects_total`.
    pub waiting_rejects: IntCounter,
}

/// The connection pools of an upstream: its UDP sockets ([`super::udp`]) and its DNS-over-TLS
/// connections ([`super::tls`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// Plain DNS over UDP.
    Udp,
    /// DNS over TLS.
    Tls,
    /// DNS over HTTPS.
    Https,
    /// Plain DNS over TCP.
    Tcp,
}

/// The series a connection pool is counted in: reuse, new connections and the idle ones.
#[derive(Debug, Clone)]
pub struct ConnCounters {
    /// `coredns_proxy_conn_cache_hits_total{proto}`: an idle connection reused.
    pub hits: IntCounter,
    /// `coredns_proxy_conn_cache_misses_total{proto}`: a new one opened.
    pub misses: IntCounter,
    /// `cluster_dns_forward_udp_idle_sockets` or `cluster_dns_forward_tls_idle_connections`.
    pub idle: IntGauge,
}

/// The series of one upstream.
#[derive(Debug)]
pub(super) struct UpstreamInstruments {
    to: String,
    /// `coredns_proxy_healthcheck_failures_total{to}`.
    pub healthcheck_failures: IntCounter,
    duration_vec: HistogramVec,
    durations: [OnceLock<Histogram>; RCODE_LABELS.len()],
}

impl UpstreamInstruments {
    /// The connection-cache hit and miss series of `pool`'s connections to this upstream
    /// (`proto="udp"` or `"tcp-tls"`, as CoreDNS labels them), and its idle gauge.
    pub(super) fn conn_counters(&self, metrics: &ForwardMetrics, pool: Pool) -> ConnCounters {
        let (proto, idle) = match pool {
            Pool::Udp => ("udp", &metrics.udp_idle),
            Pool::Tls => ("tcp-tls", &metrics.tls_idle),
            Pool::Https => ("https", &metrics.https_idle),
            Pool::Tcp => ("tcp", &metrics.tcp_idle),
        };
        let labels = [PROXY_NAME, self.to.as_str(), proto];
        ConnCounters {
            hits: metrics.conn_cache_hits.with_label_values(&labels),
            misses: metrics.conn_cache_misses.with_label_values(&labels),
            idle: idle.with_label_values(&[self.to.as_str()]),
        }
    }

    /// Records an exchange that got a reply with `rcode` after `took`.
    pub fn replied(&self, rcode: ResponseCode, took: Duration) {
        let i = rcode_index(rcode);
        let Some(cell) = self.durations.get(i) else {
            return;
        };
        let label = RCODE_LABELS.get(i).copied().unwrap_or("other");
        cell.get_or_init(|| {
            self.duration_vec
                .with_label_values(&[PROXY_NAME, self.to.as_str(), label])
        })
        .observe(took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::render_registry as render;

    #[test]
    fn rcode_labels_are_the_prometheus_plugins() {
        for code in 0..=4095u16 {
            let high = u8::try_from(code >> 4).unwrap();
            let r = ResponseCode::from(high, u8::try_from(code & 0xF).unwrap());
            assert_eq!(u16::from(r), code);
            assert_eq!(
                RCODE_LABELS[rcode_index(r)],
                crate::telemetry::rcode_label(r),
                "{code}"
            );
        }
    }

    #[test]
    fn registering_twice_fails_cleanly() {
        let r = Registry::new();
        ForwardMetrics::register(&r).unwrap();
        assert!(matches!(
            ForwardMetrics::register(&r),
            Err(prometheus::Error::AlreadyReg)
        ));
        // Still usable: the first registration is intact.
        assert!(render(&r).contains("coredns_forward_max_concurrent_rejects_total 0"));
    }
}
