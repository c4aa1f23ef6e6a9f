//! One zone's refresh task (RFC 1034 section 4.3.5, RFC 1996): asks the primaries, in order,
//! for the zone's SOA; when a primary's serial is later than the copy held, transfers the
//! zone (IXFR from the serial held, AXFR when none is held) and replaces the copy. It waits
//! the SOA's refresh interval after a check that worked, its retry interval (and a backoff of
//! 1 s doubling to 60 s while no copy is held) after one that failed, and wakes early on a
//! NOTIFY. A failed transfer, one that breaks off, does not parse or goes backwards in serial
//! leaves the copy held as it was. With no primary answering for the SOA's expire interval
//! the zone is marked expired (SERVFAIL) until one does.

use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hickory_proto::rr::{RData, RecordType};
use tokio::time::Instant;

use super::apply::apply;
use super::xfr::{self, serial_of};
use super::zones::{Inner, ZoneSlot};

/// The shortest wait between two checks (an SOA may say 0).
const MIN_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two checks.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);
/// The longest wait between tries while no copy is held.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// True when serial `new` follows `old` (RFC 1982 serial number arithmetic).
fn serial_after(new: u32, old: u32) -> bool {
    new != old && new.wrapping_sub(old) < (1 << 31)
}

/// What one check did.
#[derive(Debug, PartialEq, Eq)]
enum Checked {
    /// The copy held is current.
    Current,
    /// A new version is held, brought by this kind of transfer.
    Replaced(&'static str),
}

/// Follows zone `index` of the plugin behind `weak` until the plugin is dropped.
pub(super) async fn follow(weak: Weak<Inner>, index: usize) {
    let mut backoff = MIN_WAIT;
    let mut last_success = Instant::now();
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let Some(slot) = inner.zones.get(index).cloned() else {
            return;
        };
        let primaries = inner.primaries.clone();
        let notifier = inner.notifier.clone();
        let versions = inner.versions.clone();
        drop(inner);
        let wake = slot.wake.clone();
        let held = slot.held.current();
        let timers = held.as_ref().and_then(|z| match &z.soa().data {
            RData::SOA(s) => Some((s.refresh, s.retry, s.expire)),
            _ => None,
        });
        let wait = match check(&slot, &primaries).await {
            Ok(checked) => {
                last_success = Instant::now();
                backoff = MIN_WAIT;
                slot.expired.store(false, Ordering::Relaxed);
                if let Checked::Replaced(_) = checked {
                    versions.moved();
                    if let Some(n) = &notifier {
                        n.0.zone_changed(slot.held.origin());
                    }
                }
                let refresh = slot.held.current().and_then(|z| match &z.soa().data {
                    RData::SOA(s) => Some(s.refresh),
                    _ => None,
                });
                seconds(refresh.unwrap_or(60))
            }
            Err(e) => {
                tracing::warn!(zone = %slot.held.origin(), "secondary: zone not refreshed: {e}");
                match timers {
                    Some((_, retry, expire)) => {
                        if last_success.elapsed() >= seconds(expire)
                            && !slot.expired.swap(true, Ordering::Relaxed)
                        {
                            tracing::error!(zone = %slot.held.origin(), "secondary: zone expired, answering SERVFAIL until a primary answers");
                        }
                        seconds(retry).min(backoff)
                    }
                    None => backoff,
                }
            }
        };
        backoff = (backoff * 2).min(MAX_BACKOFF);
        drop(slot);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = wake.notified() => {}
        }
    }
}

/// An SOA timer in seconds (a negative one as 0), as a wait between [`MIN_WAIT`] and [`MAX_WAIT`].
fn seconds(s: i32) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0)).clamp(MIN_WAIT, MAX_WAIT)
}

/// Checks `slot`'s zone with each primary in turn until one answers.
async fn check(slot: &ZoneSlot, primaries: &[std::net::SocketAddr]) -> Result<Checked, String> {
    let mut errors = Vec::new();
    for &primary in primaries {
        match check_with(slot, primary).await {
            Ok(c) => return Ok(c),
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

/// Checks `slot`'s zone with `primary`: its SOA, then a transfer when it has a later serial.
async fn check_with(slot: &ZoneSlot, primary: std::net::SocketAddr) -> Result<Checked, String> {
    let held = slot.held.current();
    let soa = xfr::ask(primary, slot.held.origin(), RecordType::SOA, None)
        .await
        .map_err(|e| format!("SOA check: {e}"))?;
    let Some(serial) = soa.first().and_then(serial_of) else {
        return Err(format!("SOA check: {primary}: no SOA"));
    };
    if let Some(z) = &held
        && !serial_after(serial, z.serial())
    {
        return Ok(Checked::Current);
    }
    let (qtype, kind) = match &held {
        Some(_) => (RecordType::IXFR, "ixfr"),
        None => (RecordType::AXFR, "axfr"),
    };
    let counted = |ok: bool| {
        if let Some(m) = &slot.metrics {
            m.transfer(kind, ok);
        }
    };
    let source = format!("{kind} from {primary}");
    let records = match xfr::ask(primary, slot.held.origin(), qtype, held.as_ref().map(|z| z.soa())).await {
        Ok(r) => r,
        Err(e) => {
            counted(false);
            return Err(format!("{}: {e}", kind.to_uppercase()));
        }
    };
    let fresh = match apply(held.as_deref(), records, &source, slot.held.origin()) {
        Ok(Some(z)) => z,
        Ok(None) => return Ok(Checked::Current),
        Err(e) => {
            counted(false);
            return Err(e.to_string());
        }
    };
    if let Some(z) = &held
        && !serial_after(fresh.serial(), z.serial())
    {
        counted(false);
        return Err(format!(
            "{source}: serial {} is not later than the {} held; the copy held stays",
            fresh.serial(),
            z.serial()
        ));
    }
    counted(true);
    tracing::info!(zone = %slot.held.origin(), serial = fresh.serial(), records = fresh.records(), %primary, kind, "secondary: zone transferred");
    if let Some(m) = &slot.metrics {
        m.serial(fresh.serial());
    }
    slot.held.replace(fresh, held.is_some());
    Ok(Checked::Replaced(kind))
}
