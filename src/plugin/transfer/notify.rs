//! NOTIFY (RFC 1996): when a zone of the block changes, each `to` address but `*` is told, over
//! UDP from `source` (or any local address), with up to three tries two seconds apart, as
//! CoreDNS's transfer plugin sends them. A secondary that never answers costs one short-lived
//! task per change; nothing is queued.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

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

/// The NOTIFY side of one block's `transfer`.
#[derive(Debug)]
pub struct NotifySender {
    zones: Vec<Name>,
    targets: Vec<SocketAddr>,
    source: Option<IpAddr>,
}

impl NotifySender {
    /// The sender for `config`; `None` when it has nobody to notify (only `to *`).
    pub fn new(config: &TransferConfig) -> Option<Self> {
        (!config.notify.is_empty()).then(|| Self {
            zones: config.zone_names(),
            targets: config.notify.clone(),
            source: config.source,
        })
    }
}

impl ZoneNotifier for NotifySender {
    fn zone_changed(&self, zone: &Name) {
        // Only the zones it transfers (CoreDNS: the longest `transfer` zone that holds it).
        if !self.zones.iter().any(|z| z.zone_of(zone)) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        for &target in &self.targets {
            let zone = zone.clone();
            let source = self.source;
            runtime.spawn(async move {
                match notify(target, &zone, source).await {
                    Ok(()) => tracing::debug!(%zone, %target, "transfer: NOTIFY acknowledged"),
                    Err(e) => tracing::warn!(%zone, %target, "transfer: NOTIFY not acknowledged: {e}"),
                }
            });
        }
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
