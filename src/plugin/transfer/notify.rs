//! NOTIFY (RFC 1996): when a zone of the block changes, each `to` address but `*` is told, over
//! UDP from `source` (or any local address), with up to three tries two seconds apart, as
//! CoreDNS's transfer plugin sends them. With `notify transferred`, so is every address that
//! transferred a zone in the last day ([`Learned`]: at most [`MAX_LEARNED`], the one heard
//! from longest ago dropped first, counted in `cluster_dns_transfer_notify_learned`). A
//! secondary that never answers costs one short-lived task per change; nothing is queued.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use tokio::net::UdpSocket;

use super::config::TransferConfig;
use crate::plugin::kit::ZoneNotifier;

/// How long one try waits for the secondary's reply.
const TRY_TIMEOUT: Duration = Duration::from_secs(2);
/// Tries per secondary and change.
const TRIES: usize = 3;
/// NOTIFYs of one change sent at once; the next wave after [`WAVE_GAP`]. Each NOTIFY brings
/// its secondary's SOA check and IXFR at once: 5,000 node agents told together opened 5,000
/// connections in the same moment, past the server's TCP limit (1,000 by default), and the
/// ones it closed missed the change until their retry (`bench/fabric-fanout.sh`: 23% of
/// them). In waves, 5,000 agents are told within 0.9 s.
const WAVE: usize = 500;
/// The pause between two waves of NOTIFYs.
const WAVE_GAP: Duration = Duration::from_millis(100);

/// The most addresses `notify transferred` keeps.
pub const MAX_LEARNED: usize = 10_000;
/// How long an address that transferred is told of changes without transferring again.
pub const LEARNED_FOR: Duration = Duration::from_secs(24 * 3600);

/// The addresses that transferred a zone (`notify transferred`), each with when it last did.
///
/// Invariant: at most [`MAX_LEARNED`] entries; `gauge` moves with every insertion and removal
/// under the map's lock, so it always says how many entries all senders hold.
#[derive(Debug)]
pub struct Learned {
    port: u16,
    seen: Mutex<HashMap<IpAddr, Instant>>,
    gauge: Option<prometheus::IntGauge>,
}

impl Learned {
    /// An empty set whose addresses are told at `port`, counted in `gauge`.
    pub fn new(port: u16, gauge: Option<prometheus::IntGauge>) -> Self {
        Self {
            port,
            seen: Mutex::new(HashMap::new()),
            gauge,
        }
    }

    fn moved(&self, delta: i64) {
        if let Some(g) = &self.gauge {
            g.add(delta);
        }
    }

    /// `ip` transferred at `now`. A new address in a full set takes the place of the one
    /// heard from longest ago.
    pub fn learn(&self, ip: IpAddr, now: Instant) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.insert(ip.to_canonical(), now).is_some() {
            return;
        }
        self.moved(1);
        if seen.len() > MAX_LEARNED
            && let Some(oldest) = seen.iter().min_by_key(|(_, at)| **at).map(|(ip, _)| *ip)
        {
            seen.remove(&oldest);
            self.moved(-1);
        }
    }

    /// The addresses to tell at `now` (those older than [`LEARNED_FOR`] are dropped).
    pub fn targets(&self, now: Instant) -> Vec<SocketAddr> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let before = seen.len();
        seen.retain(|_, at| now.saturating_duration_since(*at) < LEARNED_FOR);
        self.moved(-(i64::try_from(before - seen.len()).unwrap_or(0)));
        seen.keys().map(|ip| SocketAddr::new(*ip, self.port)).collect()
    }

    /// How many it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

impl Drop for Learned {
    /// A set no configuration holds any more leaves the gauge.
    fn drop(&mut self) {
        let n = self.seen.get_mut().unwrap_or_else(PoisonError::into_inner).len();
        self.moved(-(i64::try_from(n).unwrap_or(0)));
    }
}

/// The NOTIFY side of one block's `transfer`.
#[derive(Debug)]
pub struct NotifySender {
    zones: Vec<Name>,
    targets: Vec<SocketAddr>,
    source: Option<IpAddr>,
    learned: Option<Arc<Learned>>,
}

impl NotifySender {
    /// The sender for `config`, telling the addresses in `learned` too (`notify
    /// transferred`); `None` when it has nobody to notify (only `to *`).
    pub fn new(config: &TransferConfig, learned: Option<Arc<Learned>>) -> Option<Self> {
        (!config.notify.is_empty() || learned.is_some()).then(|| Self {
            zones: config.zone_names(),
            targets: config.notify.clone(),
            source: config.source,
            learned,
        })
    }
}

impl ZoneNotifier for NotifySender {
    fn transferred_to(&self, secondary: IpAddr) {
        if let Some(l) = &self.learned {
            l.learn(secondary, Instant::now());
        }
    }

    fn zone_changed(&self, zone: &Name) {
        // Only the zones it transfers (CoreDNS: the longest `transfer` zone that holds it).
        if !self.zones.iter().any(|z| z.zone_of(zone)) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut targets = self.targets.clone();
        if let Some(l) = &self.learned {
            for t in l.targets(Instant::now()) {
                if !targets.contains(&t) {
                    targets.push(t);
                }
            }
        }
        let (zone, source) = (zone.clone(), self.source);
        runtime.spawn(async move {
            for (i, wave) in targets.chunks(WAVE).enumerate() {
                if i > 0 {
                    tokio::time::sleep(WAVE_GAP).await;
                }
                for &target in wave {
                    let zone = zone.clone();
                    tokio::spawn(async move {
                        match notify(target, &zone, source).await {
                            Ok(()) => tracing::debug!(%zone, %target, "transfer: NOTIFY acknowledged"),
                            Err(e) => {
                                tracing::warn!(%zone, %target, "transfer: NOTIFY not acknowledged: {e}")
                            }
                        }
                    });
                }
            }
        });
    }
}

/// The NOTIFY message for `zone` (RFC 1996 section 3.7: AA set, the SOA question).
fn message(zone: &Name) -> Message {
    let mut m = Message::new(rand::random(), MessageType::Query, OpCode::Notify);
    m.metadata.authoritative = true;
    let mut q = Query::query(zone.clone(), RecordType::SOA);
    q.set_query_class(DNSClass::IN);
    m.add_query(q);
    m
}

/// Sends NOTIFY for `zone` to `target` until it acknowledges (a NOTIFY reply with the same ID),
/// at most [`TRIES`] times.
async fn notify(target: SocketAddr, zone: &Name, source: Option<IpAddr>) -> Result<(), String> {
    let local = match (source, target) {
        (Some(ip), _) => SocketAddr::new(ip, 0),
        (None, SocketAddr::V4(_)) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        (None, SocketAddr::V6(_)) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    let sock = UdpSocket::bind(local)
        .await
        .map_err(|e| format!("bind {local}: {e}"))?;
    let m = message(zone);
    let bytes = m.to_bytes().map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let mut last = String::from("no reply");
    for _ in 0..TRIES {
        if let Err(e) = sock.send_to(&bytes, target).await {
            last = e.to_string();
            tokio::time::sleep(TRY_TIMEOUT).await;
            continue;
        }
        let deadline = tokio::time::Instant::now() + TRY_TIMEOUT;
        while let Ok(Ok((n, from))) = tokio::time::timeout_at(deadline, sock.recv_from(&mut buf)).await {
            let Some(reply) = buf.get(..n).and_then(|b| Message::from_bytes(b).ok()) else {
                continue;
            };
            if from != target
                || reply.metadata.id != m.metadata.id
                || reply.metadata.op_code != OpCode::Notify
            {
                continue;
            }
            return match reply.metadata.response_code {
                ResponseCode::NoError => Ok(()),
                code => Err(format!("answered {code}")),
            };
        }
        last = "no reply".to_owned();
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change told to 1,200 secondaries goes out in waves of [`WAVE`], [`WAVE_GAP`] apart:
    /// the first NOTIFY of the third wave comes at least two gaps after the first of the first
    /// (all at once, 5,000 agents' transfers overran the TCP limit); every one arrives.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_is_told_in_waves_and_to_everyone() {
        let mut sockets = Vec::new();
        for _ in 0..1_200 {
            sockets.push(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        }
        let config = TransferConfig {
            zones: vec!["example.org.".to_owned()],
            to: Vec::new(),
            notify: sockets.iter().map(|s| s.local_addr().unwrap()).collect(),
            source: None,
            notify_transferred: None,
        };
        let sender = NotifySender::new(&config, None).unwrap();
        let start = Instant::now();
        sender.zone_changed(&Name::from_ascii("example.org.").unwrap());
        let arrivals: Vec<Duration> = futures::future::join_all(sockets.iter().map(|s| async move {
            let mut buf = [0u8; 512];
            tokio::time::timeout(Duration::from_secs(20), s.recv_from(&mut buf))
                .await
                .expect("every secondary is told")
                .unwrap();
            start.elapsed()
        }))
        .await;
        let mut sorted = arrivals.clone();
        sorted.sort();
        assert!(
            sorted[2 * WAVE] - sorted[0] >= 2 * WAVE_GAP,
            "the third wave came {:?} after the first",
            sorted[2 * WAVE] - sorted[0]
        );
    }

    /// Many transfers at once (each `transfer` answer learns its client, from any task) and a
    /// sender reading the set: no address lost, the bound and the gauge exact.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_learners_keep_the_set_and_the_gauge_exact() {
        let gauge = prometheus::IntGauge::new("learned_concurrent", "test").unwrap();
        let learned = Arc::new(Learned::new(53, Some(gauge.clone())));
        let start = Instant::now();
        let writers: Vec<_> = (0..8u8)
            .map(|w| {
                let learned = learned.clone();
                tokio::spawn(async move {
                    for i in 0..2_000u16 {
                        let ip = IpAddr::from([10, w, (i >> 8) as u8, i as u8]);
                        learned.learn(ip, start + Duration::from_micros(u64::from(i)));
                        if i % 500 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        let reader = {
            let learned = learned.clone();
            tokio::spawn(async move {
                for _ in 0..50 {
                    assert!(learned.targets(start).len() <= MAX_LEARNED);
                    tokio::task::yield_now().await;
                }
            })
        };
        for w in writers {
            w.await.unwrap();
        }
        reader.await.unwrap();
        // 16,000 distinct addresses through a set of 10,000.
        assert_eq!(learned.len(), MAX_LEARNED);
        assert_eq!(gauge.get(), MAX_LEARNED as i64);
    }

    #[test]
    fn learned_addresses_are_bounded_expire_and_are_counted() {
        let gauge = prometheus::IntGauge::new("learned", "test").unwrap();
        let learned = Learned::new(5300, Some(gauge.clone()));
        let start = Instant::now();
        for i in 0..=MAX_LEARNED {
            let ip = IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
            learned.learn(ip, start + Duration::from_millis(i as u64));
        }
        assert_eq!(learned.len(), MAX_LEARNED, "bounded");
        assert_eq!(gauge.get(), MAX_LEARNED as i64);
        let targets = learned.targets(start + Duration::from_secs(60));
        assert!(
            !targets.contains(&SocketAddr::from(([10, 0, 0, 0], 5300))),
            "the oldest went"
        );
        assert!(
            targets.contains(&SocketAddr::from(([10, 0, 39, 16], 5300))),
            "the newest stayed"
        );
        // Again: the same address is one entry, its time moved.
        learned.learn(IpAddr::from([10, 0, 0, 1]), start + LEARNED_FOR);
        assert_eq!(learned.len(), MAX_LEARNED);
        // A day later, only the address heard from again remains.
        let later = learned.targets(start + LEARNED_FOR + Duration::from_secs(60));
        assert_eq!(later, [SocketAddr::from(([10, 0, 0, 1], 5300))]);
        assert_eq!(gauge.get(), 1);
        drop(learned);
        assert_eq!(gauge.get(), 0, "a dropped set leaves the gauge");
    }
}
