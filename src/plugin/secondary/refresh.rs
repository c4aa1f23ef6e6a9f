//! One zone's refresh task (RFC 1034 section 4.3.5, RFC 1996): asks the primaries, in order,
//! for the zone's SOA; when a primary's serial is later than the copy held, transfers the
//! zone (IXFR from the serial held, AXFR when none is held) over the same connection, so a
//! primary behind a Service address is one replica for both, and replaces the copy. It waits
//! the SOA's refresh interval after a check that worked, its retry interval (and a backoff of
//! 1 s doubling to 60 s while no copy is held) after one that failed, and wakes early on a
//! NOTIFY. A failed transfer, one that breaks off, does not parse or goes backwards in serial
//! leaves the copy held as it was. With no primary answering for the SOA's expire interval
//! the zone is marked expired (SERVFAIL) until one does.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hickory_proto::rr::{RData, RecordType};
use tokio::time::Instant;

use super::apply::apply;
use super::xfr::{self, serial_of};
use super::zones::{Inner, ZoneSlot};
use crate::plugin::kit::serial_after;
use crate::plugin::kit::tsig::TsigKey;

/// The shortest wait between two checks (an SOA may say 0).
const MIN_WAIT: Duration = Duration::from_secs(1);
/// The longest wait between two checks.
const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);
/// The longest wait between tries while no copy is held.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

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
    // A copy read from a snapshot was last confirmed when the snapshot was written: its expiry
    // counts from then.
    let mut last_success = match weak.upgrade().and_then(|i| i.zones.get(index).cloned()) {
        Some(slot) => {
            let confirmed = UNIX_EPOCH + Duration::from_secs(slot.confirmed.load(Ordering::Relaxed));
            let age = SystemTime::now().duration_since(confirmed).unwrap_or_default();
            let now = Instant::now();
            now.checked_sub(age).unwrap_or(now)
        }
        None => return,
    };
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let Some(slot) = inner.zones.get(index).cloned() else {
            return;
        };
        let primaries = inner.primaries.clone();
        let tsig = inner.tsig.clone();
        let notifier = inner.notifier.clone();
        let versions = inner.versions.clone();
        drop(inner);
        let wake = slot.wake.clone();
        // (The version held is not kept past this line: once replaced, it must be freed.)
        let timers = slot.held.current().and_then(|z| match &z.soa().data {
            RData::SOA(s) => Some((s.refresh, s.retry, s.expire)),
            _ => None,
        });
        let wait = match check(&slot, &primaries, tsig.as_ref()).await {
            Ok(checked) => {
                last_success = Instant::now();
                confirm(&slot);
                backoff = MIN_WAIT;
                slot.expired.store(false, Ordering::Relaxed);
                if let Checked::Replaced(_) = checked {
                    versions.moved();
                    keep(&slot).await;
                    // A transfer's messages, the records read and the version replaced are
                    // freed now: their pages go back to the kernel, not into the agent's RSS.
                    crate::cluster::heap::release_freed_heap();
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

/// A primary confirmed `slot`'s copy now.
fn confirm(slot: &ZoneSlot) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    slot.confirmed.store(now, Ordering::Relaxed);
    if let Some(m) = &slot.metrics {
        m.confirmed(now, false);
    }
}

/// Writes `slot`'s copy to its snapshot, when it has one (off the runtime's threads: a large
/// zone is megabytes). A failure is logged; the copy in memory serves on.
async fn keep(slot: &Arc<ZoneSlot>) {
    let (Some(path), Some(zone)) = (slot.snapshot.clone(), slot.held.current()) else {
        return;
    };
    let written = tokio::task::spawn_blocking(move || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        super::snapshot::write(&path, &zone, SystemTime::now()).map(|()| path)
    })
    .await;
    match written {
        Ok(Ok(path)) => {
            tracing::debug!(zone = %slot.held.origin(), path = %path.display(), "secondary: snapshot written")
        }
        Ok(Err(e)) => tracing::error!(zone = %slot.held.origin(), "secondary: snapshot not written: {e}"),
        Err(e) => tracing::error!(zone = %slot.held.origin(), "secondary: snapshot not written: {e}"),
    }
}

/// An SOA timer in seconds (a negative one as 0), as a wait between [`MIN_WAIT`] and [`MAX_WAIT`].
fn seconds(s: i32) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0)).clamp(MIN_WAIT, MAX_WAIT)
}

/// Checks `slot`'s zone with each primary in turn until one answers.
/// Its requests signed with `tsig`, when given, and the responses checked against it.
async fn check(
    slot: &ZoneSlot,
    primaries: &[std::net::SocketAddr],
    tsig: Option<&TsigKey>,
) -> Result<Checked, String> {
    let mut errors = Vec::new();
    for &primary in primaries {
        match check_with(slot, primary, tsig).await {
            Ok(c) => return Ok(c),
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

/// Checks `slot`'s zone with `primary`: its SOA, then a transfer when it has a later serial.
async fn check_with(
    slot: &ZoneSlot,
    primary: std::net::SocketAddr,
    tsig: Option<&TsigKey>,
) -> Result<Checked, String> {
    let held = slot.held.current();
    let failed = |e: xfr::XfrError| {
        if let Some(m) = &slot.metrics {
            m.check_failed(e.reason());
        }
        format!("SOA check: {e}")
    };
    let mut session = xfr::Session::open(primary, tsig.cloned()).await.map_err(failed)?;
    let soa = session
        .ask(slot.held.origin(), RecordType::SOA, None)
        .await
        .map_err(failed)?;
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
    let asked = session
        .ask(slot.held.origin(), qtype, held.as_ref().map(|z| z.soa()))
        .await;
    let asked = match asked {
        // A primary that closes a connection after one request: once more, on a new one.
        Err(xfr::XfrError::BrokeOff { records: 0, .. } | xfr::XfrError::Io { .. }) => {
            match xfr::Session::open(primary, tsig.cloned()).await {
                Ok(mut again) => {
                    again
                        .ask(slot.held.origin(), qtype, held.as_ref().map(|z| z.soa()))
                        .await
                }
                Err(e) => Err(e),
            }
        }
        other => other,
    };
    let records = match asked {
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
