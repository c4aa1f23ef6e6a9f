//! Telemetry: the process's metric registry and CoreDNS's core metrics (`coredns_dns_*`,
//! `coredns_plugin_enabled`, `coredns_panics_total`, `coredns_build_info`, the process
//! metrics), under CoreDNS's names, types and labels, so CoreDNS's dashboards and alerts keep
//! working. Labels come from fixed sets only: never a query name or a client address.
//! [`DnsMetrics`] is what the server records into and where the plugins register their own
//! families; [`BlockMetrics`] is one server block's recorders. The text it renders is
//! Prometheus exposition format 0.0.4, as CoreDNS serves it. The `prometheus` directive that
//! turns it on is the plugin in `plugin/metrics`. Imports only `proto`.

pub mod logs;
#[cfg(target_os = "linux")]
pub mod memo;
pub mod process;
pub mod proxy;
pub mod quic;
pub mod runtime;
pub mod shed;
pub mod shutdown;
pub mod tcp;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RecordType};
use prometheus::{
    Counter, CounterVec, Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, Opts,
    Registry, TextEncoder,
};

use crate::proto::{Transport, transport_label};

/// Query types counted by name; all others are `other` (CoreDNS's list).
const COUNTED_TYPES: &[RecordType] = &[
    RecordType::A,
    RecordType::AAAA,
    RecordType::MX,
    RecordType::SOA,
    RecordType::CNAME,
    RecordType::PTR,
    RecordType::TXT,
    RecordType::NS,
    RecordType::SRV,
    RecordType::DS,
    RecordType::DNSKEY,
    RecordType::RRSIG,
    RecordType::NSEC,
    RecordType::NSEC3,
    RecordType::HTTPS,
    RecordType::IXFR,
    RecordType::AXFR,
    RecordType::ANY,
];

/// The `type` label of a query type.
pub fn type_label(t: RecordType) -> &'static str {
    if COUNTED_TYPES.contains(&t) {
        match t {
            RecordType::A => "A",
            RecordType::AAAA => "AAAA",
            RecordType::MX => "MX",
            RecordType::SOA => "SOA",
            RecordType::CNAME => "CNAME",
            RecordType::PTR => "PTR",
            RecordType::TXT => "TXT",
            RecordType::NS => "NS",
            RecordType::SRV => "SRV",
            RecordType::DS => "DS",
            RecordType::DNSKEY => "DNSKEY",
            RecordType::RRSIG => "RRSIG",
            RecordType::NSEC => "NSEC",
            RecordType::NSEC3 => "NSEC3",
            RecordType::HTTPS => "HTTPS",
            RecordType::IXFR => "IXFR",
            RecordType::AXFR => "AXFR",
            _ => "ANY",
        }
    } else {
        "other"
    }
}

/// The rcodes counted by name, in [`rcode_label`]'s order; all others are `other`.
const NAMED_RCODES: &[u16] = &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 23];

/// How many distinct `plugin` label values one recorder keeps resolved handles for (a block
/// has at most this many plugins that write replies); more are resolved per request.
const PLUGIN_SLOTS: usize = 16;

/// The `rcode` label (CoreDNS's rcode names).
pub fn rcode_label(r: ResponseCode) -> &'static str {
    match u16::from(r) {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        6 => "YXDOMAIN",
        7 => "YXRRSET",
        8 => "NXRRSET",
        9 => "NOTAUTH",
        10 => "NOTZONE",
        16 => "BADVERS",
        23 => "BADCOOKIE",
        _ => "other",
    }
}

/// One answered request, as the server reports it.
#[derive(Debug, Clone, Copy)]
pub struct RequestRecord {
    /// Transport.
    pub proto: Transport,
    /// The client's address (only its family is recorded).
    pub client: SocketAddr,
    /// Query type.
    pub qtype: RecordType,
    /// DO bit set.
    pub dnssec_ok: bool,
    /// Request size in bytes.
    pub request_size: usize,
    /// Response size in bytes.
    pub response_size: usize,
    /// Response rcode.
    pub rcode: ResponseCode,
    /// The plugin that wrote the reply (empty: the server itself).
    pub plugin: &'static str,
    /// Time to answer.
    pub duration: Duration,
}

/// CoreDNS's core metrics.
#[derive(Debug, Clone)]
pub struct DnsMetrics {
    registry: Registry,
    families: Arc<FamilySet>,
    requests: CounterVec,
    responses: CounterVec,
    do_requests: CounterVec,
    duration: HistogramVec,
    request_size: HistogramVec,
    response_size: HistogramVec,
    plugin_enabled: GaugeVec,
    panics: IntCounter,
}

fn size_buckets() -> Vec<f64> {
    vec![
        0.0, 100.0, 200.0, 300.0, 400.0, 511.0, 1023.0, 2047.0, 4095.0, 8291.0, 16e3, 32e3, 48e3, 64e3,
    ]
}

impl DnsMetrics {
    /// Registers the core metrics (and `coredns_build_info`) in a new registry.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let requests = CounterVec::new(
            Opts::new(
                "coredns_dns_requests_total",
                "Counter of DNS requests made per zone, protocol and family.",
            ),
            &["server", "zone", "view", "proto", "family", "type"],
        )?;
        let responses = CounterVec::new(
            Opts::new("coredns_dns_responses_total", "Counter of response status codes."),
            &["server", "zone", "view", "rcode", "plugin"],
        )?;
        let do_requests = CounterVec::new(
            Opts::new(
                "coredns_dns_do_requests_total",
                "Counter of DNS requests with DO bit set per zone.",
            ),
            &["server", "zone", "view"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "coredns_dns_request_duration_seconds",
                "Histogram of the time (in seconds) each request took per zone.",
            )
            .buckets(prometheus::exponential_buckets(0.00025, 2.0, 16)?),
            &["server", "zone", "view"],
        )?;
        let request_size = HistogramVec::new(
            HistogramOpts::new(
                "coredns_dns_request_size_bytes",
                "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.",
            )
            .buckets(size_buckets()),
            &["server", "zone", "view", "proto"],
        )?;
        let response_size = HistogramVec::new(
            HistogramOpts::new(
                "coredns_dns_response_size_bytes",
                "Size of the returned response in bytes.",
            )
            .buckets(size_buckets()),
            &["server", "zone", "view", "proto"],
        )?;
        let plugin_enabled = GaugeVec::new(
            Opts::new(
                "coredns_plugin_enabled",
                "A metric that indicates whether a plugin is enabled on per server and zone basis.",
            ),
            &["server", "zone", "view", "name"],
        )?;
        let panics = IntCounter::new(
            "coredns_panics_total",
            "A metrics that counts the number of panics.",
        )?;
        let build_info = GaugeVec::new(
            Opts::new(
                "coredns_build_info",
                "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
            ),
            &["version", "revision", "goversion"],
        )?;
        build_info
            .with_label_values(&[
                env!("CARGO_PKG_VERSION"),
                env!("CLUSTER_DNS_BUILD_REVISION"),
                "rust",
            ])
            .set(1.0);
        // process_cpu_seconds_total, process_resident_memory_bytes, ...: the CoreDNS dashboard's
        // CPU and memory panels read them.
        #[cfg(target_os = "linux")]
        registry.register(Box::new(process::ProcessMetrics::for_self()))?;
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(responses.clone()),
            Box::new(do_requests.clone()),
            Box::new(duration.clone()),
            Box::new(request_size.clone()),
            Box::new(response_size.clone()),
            Box::new(plugin_enabled.clone()),
            Box::new(panics.clone()),
            Box::new(build_info),
        ] {
            registry.register(c)?;
        }
        Ok(Self {
            registry,
            families: Arc::default(),
            requests,
            responses,
            do_requests,
            duration,
            request_size,
            response_size,
            plugin_enabled,
            panics,
        })
    }

    /// The registry, for plugins that add their own metrics.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The families of type `T` (a plugin's own), registered in this registry on first use.
    pub fn families<T: Families>(&self) -> Result<T, prometheus::Error> {
        self.families.get(&self.registry)
    }

    /// Marks `name` enabled in a server block.
    pub fn plugin_enabled(&self, server: &str, zone: &str, name: &str) {
        self.plugin_enabled
            .with_label_values(&[server, zone, "", name])
            .set(1.0);
    }

    /// Counts a panic caught while answering.
    pub fn panic(&self) {
        self.panics.inc();
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        render_registry(&self.registry)
    }

    /// The `/metrics` router.
    pub fn router(&self) -> axum::Router {
        let m = self.clone();
        axum::Router::new().route(
            "/metrics",
            get(move || {
                let m = m.clone();
                async move {
                    (
                        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                        m.render(),
                    )
                }
            }),
        )
    }
}

/// Registers every collector in `collectors`, or none: on the first failure the ones already
/// registered are taken out again, so that a failed registration leaves `registry` as it was.
pub fn register_all(
    registry: &Registry,
    collectors: Vec<Box<dyn prometheus::core::Collector>>,
) -> Result<(), prometheus::Error> {
    let mut done: Vec<Box<dyn prometheus::core::Collector>> = Vec::with_capacity(collectors.len());
    for c in collectors {
        let handle = clone_collector(&*c);
        match registry.register(c) {
            Ok(()) => done.push(handle),
            Err(e) => {
                for d in done {
                    let _ = registry.unregister(d);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// A collector with the same descriptors as `c` (for unregistering): the `prometheus` crate
/// unregisters by descriptor ids, so a wrapper that reports `c`'s descriptors is enough.
fn clone_collector(c: &dyn prometheus::core::Collector) -> Box<dyn prometheus::core::Collector> {
    Box::new(Descs(c.desc().into_iter().cloned().collect()))
}

struct Descs(Vec<prometheus::core::Desc>);

impl prometheus::core::Collector for Descs {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.iter().collect()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        Vec::new()
    }
}

/// The exposition text of everything in `registry` (Prometheus 0.0.4, as CoreDNS serves it).
pub fn render_registry(registry: &Registry) -> String {
    let mut buf = Vec::new();
    // Encoding to a Vec cannot fail for well-formed families.
    let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
    String::from_utf8(buf).unwrap_or_default()
}

/// A set of metric families one part of the server registers (a plugin's, the API source's).
pub trait Families: Clone + Send + Sync + 'static {
    /// Registers the families in `registry`, all or none.
    fn register(registry: &Registry) -> Result<Self, prometheus::Error>;
}

/// Each [`Families`] type registered once per process, in the process's registry, and handed
/// to every configuration that asks (counters keep counting through reloads). Invariant: the
/// lock is held from the look-up to the insert, so a type is registered at most once.
#[derive(Debug, Default)]
pub struct FamilySet {
    registered: std::sync::Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
}

impl FamilySet {
    /// The families of type `T`, registered in `registry` on first use.
    pub fn get<T: Families>(&self, registry: &Registry) -> Result<T, prometheus::Error> {
        let mut set = self
            .registered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(f) = set.get(&TypeId::of::<T>()).and_then(|b| b.downcast_ref::<T>()) {
            return Ok(f.clone());
        }
        let f = T::register(registry)?;
        set.insert(TypeId::of::<T>(), Box::new(f.clone()));
        Ok(f)
    }
}

/// The core metrics of one `server` and `zone` label pair, with each series' handle resolved
/// on its first use: recording a request then costs atomic adds, not a label lookup per metric.
/// Series appear on first use, as with the label-vector API.
#[derive(Debug)]
pub struct ZoneRecorder {
    metrics: DnsMetrics,
    server: String,
    zone: String,
    /// The `view` label: the block's view name, empty without one.
    view: String,
    /// proto × family × (counted types + `other`).
    requests: Box<[OnceLock<Counter>]>,
    /// The `plugin` label values seen, in the order first seen (the first slot is the server's
    /// own, `""`). Set once each, never changed: a name's index is stable.
    plugins: [OnceLock<&'static str>; PLUGIN_SLOTS],
    /// (named rcodes + `other`) × plugin slots.
    responses: Box<[OnceLock<Counter>]>,
    do_requests: OnceLock<Counter>,
    duration: OnceLock<Histogram>,
    request_size: [OnceLock<Histogram>; 2],
    response_size: [OnceLock<Histogram>; 2],
}

fn slots<T>(n: usize) -> Box<[OnceLock<T>]> {
    (0..n).map(|_| OnceLock::new()).collect()
}

impl ZoneRecorder {
    /// A recorder for `server` and `zone`, no view.
    pub fn new(metrics: &DnsMetrics, server: &str, zone: &str) -> Arc<Self> {
        Self::in_view(metrics, server, zone, "")
    }

    /// A recorder for `server`, `zone` and `view` (a block's `view` name).
    pub fn in_view(metrics: &DnsMetrics, server: &str, zone: &str, view: &str) -> Arc<Self> {
        Arc::new(Self {
            metrics: metrics.clone(),
            server: server.to_owned(),
            zone: zone.to_owned(),
            view: view.to_owned(),
            requests: slots(2 * 2 * (COUNTED_TYPES.len() + 1)),
            plugins: std::array::from_fn(|_| OnceLock::new()),
            responses: slots((NAMED_RCODES.len() + 1) * PLUGIN_SLOTS),
            do_requests: OnceLock::new(),
            duration: OnceLock::new(),
            request_size: [OnceLock::new(), OnceLock::new()],
            response_size: [OnceLock::new(), OnceLock::new()],
        })
    }

    /// The metrics it records into.
    pub fn metrics(&self) -> &DnsMetrics {
        &self.metrics
    }

    /// The slot of the `plugin` label value `name`, claiming a free one the first time; `None`
    /// when every slot holds another name.
    fn plugin_slot(&self, name: &'static str) -> Option<usize> {
        self.plugins
            .iter()
            .position(|slot| *slot.get_or_init(|| name) == name)
    }

    /// Records one answered request under this recorder's `server` and `zone`.
    pub fn record(&self, r: &RequestRecord) {
        let m = &self.metrics;
        let (server, zone, view) = (self.server.as_str(), self.zone.as_str(), self.view.as_str());
        let family = usize::from(!(r.client.is_ipv4()));
        let proto = usize::from(r.proto != Transport::Udp);
        let t = COUNTED_TYPES
            .iter()
            .position(|c| *c == r.qtype)
            .unwrap_or(COUNTED_TYPES.len());
        let i = (proto * 2 + family) * (COUNTED_TYPES.len() + 1) + t;
        if let Some(slot) = self.requests.get(i) {
            slot.get_or_init(|| {
                m.requests.with_label_values(&[
                    server,
                    zone,
                    view,
                    transport_label(r.proto),
                    if family == 0 { "1" } else { "2" },
                    type_label(r.qtype),
                ])
            })
            .inc();
        }
        if r.dnssec_ok {
            self.do_requests
                .get_or_init(|| m.do_requests.with_label_values(&[server, zone, view]))
                .inc();
        }
        let code = u16::from(r.rcode);
        let rc = NAMED_RCODES
            .iter()
            .position(|c| *c == code)
            .unwrap_or(NAMED_RCODES.len());
        match self.plugin_slot(r.plugin) {
            Some(p) => {
                if let Some(slot) = self.responses.get(rc * PLUGIN_SLOTS + p) {
                    slot.get_or_init(|| {
                        m.responses
                            .with_label_values(&[server, zone, view, rcode_label(r.rcode), r.plugin])
                    })
                    .inc();
                }
            }
            None => m
                .responses
                .with_label_values(&[server, zone, view, rcode_label(r.rcode), r.plugin])
                .inc(),
        }
        self.duration
            .get_or_init(|| m.duration.with_label_values(&[server, zone, view]))
            .observe(r.duration.as_secs_f64());
        self.request_size[proto]
            .get_or_init(|| {
                m.request_size
                    .with_label_values(&[server, zone, view, transport_label(r.proto)])
            })
            .observe(r.request_size as f64);
        self.response_size[proto]
            .get_or_init(|| {
                m.response_size
                    .with_label_values(&[server, zone, view, transport_label(r.proto)])
            })
            .observe(r.response_size as f64);
    }
}

/// The zone label of a request no server block took (CoreDNS's `dropped`).
pub const UNROUTED_ZONE: &str = "dropped";

/// A block's `prometheus`: a recorder per zone of the block on this address, and one for
/// requests no block took (`dropped`).
#[derive(Debug, Clone)]
pub struct BlockMetrics {
    zones: Vec<(Name, Arc<ZoneRecorder>)>,
    dropped: Arc<ZoneRecorder>,
}

impl BlockMetrics {
    /// Recorders for `zones` (lower-case, absolute) on the listener labelled `server`, in the
    /// block's `view` (empty without one).
    pub fn new(metrics: &DnsMetrics, server: &str, zones: &[Name], view: &str) -> Self {
        Self {
            zones: zones
                .iter()
                .map(|z| {
                    (
                        z.clone(),
                        ZoneRecorder::in_view(metrics, server, &z.to_string(), view),
                    )
                })
                .collect(),
            dropped: ZoneRecorder::new(metrics, server, UNROUTED_ZONE),
        }
    }

    /// The process's metrics.
    pub fn metrics(&self) -> &DnsMetrics {
        self.dropped.metrics()
    }

    /// The recorder of `zone` (`None`: no block took the request).
    pub fn recorder(&self, zone: Option<&Name>) -> &ZoneRecorder {
        zone.and_then(|z| self.zones.iter().find(|(n, _)| n == z))
            .map_or(&self.dropped, |(_, r)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_under_coredns_names_with_fixed_labels() {
        let m = DnsMetrics::new().unwrap();
        m.plugin_enabled("dns://:53", ".", "kubernetes");
        ZoneRecorder::new(&m, "dns://:53", ".").record(&RequestRecord {
            proto: Transport::Udp,
            client: "127.0.0.1:5000".parse().unwrap(),
            qtype: RecordType::Unknown(65280),
            dnssec_ok: false,
            request_size: 40,
            response_size: 120,
            rcode: ResponseCode::NXDomain,
            plugin: "kubernetes",
            duration: Duration::from_micros(300),
        });
        let text = m.render();
        for want in [
            "coredns_dns_requests_total{family=\"1\",proto=\"udp\",server=\"dns://:53\",type=\"other\",view=\"\",zone=\".\"} 1",
            "coredns_dns_responses_total{plugin=\"kubernetes\",rcode=\"NXDOMAIN\",server=\"dns://:53\",view=\"\",zone=\".\"} 1",
            "coredns_dns_request_duration_seconds_bucket{server=\"dns://:53\",view=\"\",zone=\".\",le=\"0.0005\"} 1",
            "coredns_dns_response_size_bytes_bucket{proto=\"udp\",server=\"dns://:53\",view=\"\",zone=\".\",le=\"200\"} 1",
            "coredns_plugin_enabled{name=\"kubernetes\",server=\"dns://:53\",view=\"\",zone=\".\"} 1",
            format!(
                "coredns_build_info{{goversion=\"rust\",revision=\"{}\",version=\"",
                env!("CLUSTER_DNS_BUILD_REVISION")
            )
            .as_str(),
            "# TYPE coredns_panics_total counter",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        // A second recorder for the same labels adds to the same series.
        let rec = ZoneRecorder::new(&m, "dns://:53", ".");
        rec.record(&RequestRecord {
            proto: Transport::Udp,
            client: "127.0.0.1:5000".parse().unwrap(),
            qtype: RecordType::Unknown(65280),
            dnssec_ok: true,
            request_size: 40,
            response_size: 120,
            rcode: ResponseCode::NXDomain,
            plugin: "kubernetes",
            duration: Duration::from_micros(300),
        });
        let text = m.render();
        for want in [
            "coredns_dns_requests_total{family=\"1\",proto=\"udp\",server=\"dns://:53\",type=\"other\",view=\"\",zone=\".\"} 2",
            "coredns_dns_responses_total{plugin=\"kubernetes\",rcode=\"NXDOMAIN\",server=\"dns://:53\",view=\"\",zone=\".\"} 2",
            "coredns_dns_do_requests_total{server=\"dns://:53\",view=\"\",zone=\".\"} 1",
            "coredns_dns_request_duration_seconds_count{server=\"dns://:53\",view=\"\",zone=\".\"} 2",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        assert_eq!(type_label(RecordType::SRV), "SRV");
        assert_eq!(rcode_label(ResponseCode::BADVERS), "BADVERS");
    }

    /// Each `plugin` label value gets its own series; past the resolved slots they are still
    /// counted (resolved per request).
    #[test]
    fn every_plugin_label_is_counted_past_the_slots() {
        let m = DnsMetrics::new().unwrap();
        let rec = ZoneRecorder::new(&m, "dns://:53", ".");
        let names: Vec<&'static str> = (0..PLUGIN_SLOTS + 3)
            .map(|i| &*Box::leak(format!("p{i}").into_boxed_str()))
            .collect();
        for name in names.iter().chain(names.iter()) {
            rec.record(&RequestRecord {
                proto: Transport::Tcp,
                client: "[::1]:5000".parse().unwrap(),
                qtype: RecordType::A,
                dnssec_ok: false,
                request_size: 40,
                response_size: 120,
                rcode: ResponseCode::NoError,
                plugin: name,
                duration: Duration::from_micros(30),
            });
        }
        let text = m.render();
        for name in &names {
            let want = format!(
                "coredns_dns_responses_total{{plugin=\"{name}\",rcode=\"NOERROR\",server=\"dns://:53\",view=\"\",zone=\".\"}} 2"
            );
            assert!(text.contains(&want), "missing {want}");
        }
    }
}
