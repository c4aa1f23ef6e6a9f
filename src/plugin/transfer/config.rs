//! What a configured `transfer` directive holds once parsed (`setup.rs` reads the Corefile into
//! it): its zones and who may transfer them or gets NOTIFY; what the handler (`handler.rs`) and the
//! notifier (`notify.rs`) run with.

use std::net::{IpAddr, SocketAddr};

/// Who may transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    /// `to *`: anyone.
    Anyone,
    /// One address.
    Address(IpAddr),
}

/// `transfer`, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferConfig {
    /// The zones transferred, lower-case and absolute.
    pub zones: Vec<String>,
    /// The `to` addresses; empty: nobody (every transfer is refused).
    pub to: Vec<Allowed>,
    /// Where NOTIFY goes: every `to` address but `*`, port 53 unless one is given.
    pub notify: Vec<SocketAddr>,
    /// `source`: NOTIFY's local address.
    pub source: Option<IpAddr>,
    /// `notify transferred [PORT]`: NOTIFY also goes to the addresses that transferred, at
    /// this port.
    pub notify_transferred: Option<u16>,
}

impl TransferConfig {
    /// Its zones as names, lower-case.
    pub fn zone_names(&self) -> Vec<hickory_proto::rr::Name> {
        self.zones
            .iter()
            .filter_map(|z| hickory_proto::rr::Name::from_ascii(z).ok())
            .map(|n| n.to_lowercase())
            .collect()
    }
}
