//! The `secondary` families, labelled by the zone followed (from the Corefile, a fixed set):
//! `cluster_dns_secondary_transfers_total{zone,kind,result}` (kind `axfr` or `ixfr`, result
//! `ok` or `failed`), `cluster_dns_secondary_serial{zone}` (the serial of the copy held) and
//! `cluster_dns_secondary_notifies_total{zone,result}` (NOTIFY `accepted` from a primary, or
//! `refused` from anyone else), `cluster_dns_secondary_confirmed_timestamp_seconds{zone}`
//! (when a primary last confirmed the copy held: its age is `time() -` this) and
//! `cluster_dns_secondary_from_snapshot{zone}` (1 while the copy held is the snapshot read at
//! start and no primary has confirmed it since) and
//! `cluster_dns_secondary_check_failures_total{zone,reason}` (SOA checks a primary did not
//! answer usably, by reason: `unreachable`, `timeout`, `rcode`, `tsig`, `malformed`).

use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// The secondary families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SecondaryMetrics {
    transfers: IntCounterVec,
    serial: IntGaugeVec,
    notifies: IntCounterVec,
    confirmed: IntGaugeVec,
    from_snapshot: IntGaugeVec,
    check_failures: IntCounterVec,
}

impl crate::telemetry::Families for SecondaryMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let transfers = IntCounterVec::new(
            Opts::new(
                "cluster_dns_secondary_transfers_total",
                "Zone transfers a secondary zone asked its primaries for, by kind and result.",
            ),
            &["zone", "kind", "result"],
        )?;
        let serial = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_secondary_serial",
                "The SOA serial of the copy of a secondary zone held.",
            ),
            &["zone"],
        )?;
        let notifies = IntCounterVec::new(
            Opts::new(
                "cluster_dns_secondary_notifies_total",
                "NOTIFY messages for a secondary zone, accepted from a primary or refused.",
            ),
            &["zone", "result"],
        )?;
        let confirmed = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_secondary_confirmed_timestamp_seconds",
                "Unix time a primary last confirmed the copy of a secondary zone held (for a snapshot read at start: when it was written).",
            ),
            &["zone"],
        )?;
        let from_snapshot = IntGaugeVec::new(
            Opts::new(
                "cluster_dns_secondary_from_snapshot",
                "1 while the copy of a secondary zone held is the snapshot read at start, not yet confirmed by a primary.",
            ),
            &["zone"],
        )?;
        let check_failures = IntCounterVec::new(
            Opts::new(
                "cluster_dns_secondary_check_failures_total",
                "SOA checks of a secondary zone a primary did not answer usably, by reason (unreachable, timeout, rcode, tsig, malformed).",
            ),
            &["zone", "reason"],
        )?;
        crate::telemetry::register_all(
            registry,
            vec![
                Box::new(check_failures.clone()),
                Box::new(transfers.clone()),
                Box::new(serial.clone()),
                Box::new(notifies.clone()),
                Box::new(confirmed.clone()),
                Box::new(from_snapshot.clone()),
            ],
        )?;
        Ok(Self {
            transfers,
            serial,
            notifies,
            confirmed,
            from_snapshot,
            check_failures,
        })
    }
}

impl SecondaryMetrics {
    /// The series of one zone.
    pub fn zone(&self, zone: &str) -> ZoneInstruments {
        ZoneInstruments {
            zone: zone.to_owned(),
            transfers: self.transfers.clone(),
            serial: self.serial.with_label_values(&[zone]),
            notifies: self.notifies.clone(),
            confirmed: self.confirmed.with_label_values(&[zone]),
            from_snapshot: self.from_snapshot.with_label_values(&[zone]),
            check_failures: self.check_failures.clone(),
        }
    }
}

/// One zone's series.
#[derive(Debug, Clone)]
pub struct ZoneInstruments {
    zone: String,
    transfers: IntCounterVec,
    serial: IntGauge,
    notifies: IntCounterVec,
    confirmed: IntGauge,
    from_snapshot: IntGauge,
    check_failures: IntCounterVec,
}

impl ZoneInstruments {
    /// An SOA check failed for `reason` (`unreachable`, `timeout`, `rcode`, `tsig`, `malformed`).
    pub fn check_failed(&self, reason: &'static str) {
        self.check_failures.with_label_values(&[&self.zone, reason]).inc();
    }

    /// A transfer of `kind` (`axfr`, `ixfr`) ended, `ok` or not.
    pub fn transfer(&self, kind: &str, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.transfers
            .with_label_values(&[&self.zone, kind, result])
            .inc();
    }

    /// The copy held is now at `serial`.
    pub fn serial(&self, serial: u32) {
        self.serial.set(i64::from(serial));
    }

    /// A NOTIFY came, from a primary (`accepted`) or not.
    pub fn notify(&self, accepted: bool) {
        let result = if accepted { "accepted" } else { "refused" };
        self.notifies.with_label_values(&[&self.zone, result]).inc();
    }

    /// A primary confirmed the copy at Unix time `secs`; or, `from_snapshot`, the copy is the
    /// snapshot written then.
    pub fn confirmed(&self, secs: u64, from_snapshot: bool) {
        self.confirmed.set(i64::try_from(secs).unwrap_or(i64::MAX));
        self.from_snapshot.set(i64::from(from_snapshot));
    }
}
