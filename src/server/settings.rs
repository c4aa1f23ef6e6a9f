//! What a listener is told and what it counts: the [`ListenerSettings`] its blocks' listener
//! directives set (`tls`, `timeouts`, `multisocket`, `shed`, `quic`, `https3`, `proxyproto`),
//! folded once per listen address ([`fold_listener`]), and turned here into the limits of its
//! transports ([`stream_limits`], [`quic_limits`]) with its series of the listener families
//! ([`ListenerFamilies`]). This is the one place that reads a listener option: a new one is a
//! field of `ListenerSettings`, its plugin folder, and this file; the runtime hands the value
//! over whole and never looks inside.

use prometheus::Registry;

use super::proxy::UdpSessions;
use super::quic::QuicLimits;
use super::tcp::TcpLimits;
use super::udp::{SHED_DEPTH, Shed, UdpLimits};
use crate::chain::ListenerSettings;
use crate::telemetry::proxy::ProxyMetrics;
use crate::telemetry::quic::QuicMetrics;
use crate::telemetry::shed::ShedMetrics;
use crate::telemetry::tcp::TcpMetrics;

/// Folds a later block's listener settings for the same address into `into`: the first block
/// that sets an option decides; `shed` is on when any block has it.
pub fn fold_listener(into: &mut ListenerSettings, later: &ListenerSettings) {
    // Named field by field: a new option fails to compile here until it is folded.
    let ListenerSettings {
        tls,
        stream,
        udp_sockets,
        shed,
        quic,
        https3,
        proxy,
    } = later;
    if into.tls.is_none() {
        into.tls.clone_from(tls);
    }
    into.stream = into.stream.or(*stream);
    into.udp_sockets = into.udp_sockets.or(*udp_sockets);
    into.shed |= *shed;
    into.quic = into.quic.or(*quic);
    into.https3 = into.https3.or(*https3);
    if into.proxy.is_none() {
        into.proxy.clone_from(proxy);
    }
}

/// The families every listener counts in (registered once per process), each listener's
/// series under its `server` label.
#[derive(Debug, Clone)]
pub struct ListenerFamilies {
    tcp: TcpMetrics,
    shed: ShedMetrics,
    quic: QuicMetrics,
    proxy: ProxyMetrics,
}

impl ListenerFamilies {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        Ok(Self {
            tcp: TcpMetrics::register(registry)?,
            shed: ShedMetrics::register(registry)?,
            quic: QuicMetrics::register(registry)?,
            proxy: ProxyMetrics::register(registry)?,
        })
    }
}

/// The limits of a DNS, `tls://` or `https://` listener (`https`: CoreDNS counts
/// `max_queries` on TCP and TLS connections, not on HTTP requests) labelled `server`.
pub fn stream_limits(
    settings: &ListenerSettings,
    https: bool,
    families: &ListenerFamilies,
    server: &str,
) -> (TcpLimits, UdpLimits) {
    let mut tcp = TcpLimits {
        metrics: Some(families.tcp.listener(server)),
        ..TcpLimits::from_env()
    };
    if let Some(t) = settings.stream {
        tcp.message_deadline = t.read.unwrap_or(tcp.message_deadline);
        tcp.write_timeout = t.write.unwrap_or(tcp.write_timeout);
        tcp.idle_timeout = t.idle.unwrap_or(tcp.idle_timeout);
        if !https {
            tcp.max_queries = t.max_queries;
        }
    }
    tcp.proxy.clone_from(&settings.proxy);
    let udp = UdpLimits {
        proxy: settings.proxy.clone(),
        proxy_sessions: settings
            .proxy
            .as_ref()
            .and_then(|p| p.udp_sessions)
            .map(|(ttl, max)| {
                std::sync::Arc::new(UdpSessions::new(ttl, max, Some(families.proxy.sessions(server))))
            }),
        shed: settings
            .shed
            .then(|| Shed::new(SHED_DEPTH, Some(families.shed.listener(server)))),
    };
    (tcp, udp)
}

/// The limits of a `quic://` listener, or with `h3` of an `https3://` one, labelled `server`:
/// its block's `quic` (or `https3`) stream bounds and its `timeouts`.
pub fn quic_limits(
    settings: &ListenerSettings,
    h3: bool,
    families: &ListenerFamilies,
    server: &str,
) -> QuicLimits {
    if settings.proxy.is_some() {
        tracing::warn!(%server, "proxyproto has no effect on QUIC listeners (CoreDNS applies it to their datagrams)");
    }
    let mut limits = QuicLimits {
        metrics: Some(families.quic.listener(server)),
        ..QuicLimits::default()
    };
    if let Some(q) = if h3 { settings.https3 } else { settings.quic } {
        limits.max_streams = q.max_streams.unwrap_or(limits.max_streams);
        limits.workers = q.workers.unwrap_or(limits.workers);
    }
    if let Some(t) = settings.stream {
        limits.read_timeout = t.read.unwrap_or(limits.read_timeout);
        limits.write_timeout = t.write.unwrap_or(limits.write_timeout);
        limits.idle_timeout = t.idle.unwrap_or(limits.idle_timeout);
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{QuicOptions, StreamTimeouts};
    use std::time::Duration;

    #[test]
    fn the_first_block_that_sets_an_option_decides_and_shed_is_any() {
        let first = ListenerSettings {
            udp_sockets: Some(2),
            quic: Some(QuicOptions {
                max_streams: Some(4),
                workers: None,
            }),
            ..ListenerSettings::default()
        };
        let later = ListenerSettings {
            udp_sockets: Some(8),
            shed: true,
            stream: Some(StreamTimeouts {
                idle: Some(Duration::from_secs(3)),
                ..StreamTimeouts::default()
            }),
            https3: Some(QuicOptions {
                max_streams: Some(9),
                workers: None,
            }),
            ..ListenerSettings::default()
        };
        let mut folded = ListenerSettings::default();
        fold_listener(&mut folded, &first);
        fold_listener(&mut folded, &later);
        assert_eq!(folded.udp_sockets, Some(2));
        assert!(folded.shed);
        assert_eq!(folded.stream.and_then(|s| s.idle), Some(Duration::from_secs(3)));
        assert_eq!(folded.quic.and_then(|q| q.max_streams), Some(4));
        assert_eq!(folded.https3.and_then(|q| q.max_streams), Some(9));
        let families = ListenerFamilies::register(&Registry::new()).unwrap();
        assert_eq!(
            quic_limits(&folded, false, &families, "quic://:853").max_streams,
            4
        );
        let h3 = quic_limits(&folded, true, &families, "https3://:443");
        assert_eq!((h3.max_streams, h3.idle_timeout), (9, Duration::from_secs(3)));
        let (tcp, udp) = stream_limits(&folded, false, &families, "dns://:53");
        assert_eq!(tcp.idle_timeout, Duration::from_secs(3));
        assert!(udp.shed.is_some() && udp.proxy.is_none());
    }
}
