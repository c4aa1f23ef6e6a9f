//! SIGTERM's drain: how long DNS keeps answering after `/ready` turned 503. CoreDNS's `lameduck`
//! is a guess (answer for a fixed time and hope every node stopped sending); here the server
//! watches its own endpoint in the cluster's EndpointSlices ([`OwnEndpoint`], offered by the
//! `kubernetes` plugin): it answers while the endpoint is ready in a Service, then a
//! propagation margin for kube-proxy on every node to follow, and stops. `lameduck` stays the
//! upper bound, and is the whole wait when the endpoint cannot be followed (no `POD_IP`, no
//! API watch, a failing watch). Each step is logged with its timing and shown in
//! `cluster_dns_shutdown_phase`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::chain::OwnEndpoint;
use crate::telemetry::shutdown::{ShutdownMetrics, ShutdownPhase};

/// How often the endpoint is looked at while it is listed.
const POLL: Duration = Duration::from_millis(100);

/// What the watches say of the server's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Ready in some Service: clients are still sent here.
    Listed,
    /// Ready in none, as a healthy watch says.
    Gone,
    /// Cannot be told.
    Unknown,
}

fn look(watches: &[Arc<dyn OwnEndpoint>]) -> Seen {
    let mut seen = Seen::Unknown;
    for w in watches {
        match w.listed() {
            Some(true) => return Seen::Listed,
            Some(false) => seen = Seen::Gone,
            None => {}
        }
    }
    seen
}

/// Waits as the drain says: while the endpoint is listed (at most `lameduck`), then
/// `margin` (within what is left of `lameduck`); the whole `lameduck` when the endpoint cannot
/// be followed. Returns at once when `lameduck` is zero (no `health { lameduck }`).
pub(super) async fn drain(
    watches: &[Arc<dyn OwnEndpoint>],
    lameduck: Duration,
    margin: Duration,
    phases: Option<&ShutdownMetrics>,
) {
    let started = Instant::now();
    let deadline = started + lameduck;
    let phase = |p| {
        if let Some(m) = phases {
            m.set(p);
        }
    };
    if lameduck.is_zero() {
        return;
    }
    let mut seen = look(watches);
    if seen == Seen::Unknown {
        phase(ShutdownPhase::Lameduck);
        tracing::info!(
            ?lameduck,
            "shutdown: /ready is 503; this server's endpoint cannot be followed (no POD_IP, no API watch, or the watch is failing): answering DNS for the lameduck"
        );
        tokio::time::sleep_until(deadline).await;
        return;
    }
    if seen == Seen::Listed {
        phase(ShutdownPhase::EndpointListed);
        tracing::info!(
            ?lameduck,
            "shutdown: /ready is 503; this server's endpoint is still ready in a Service: answering DNS until it is not"
        );
        while seen == Seen::Listed && Instant::now() < deadline {
            tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
            seen = look(watches);
        }
        if seen != Seen::Gone {
            // Still listed at the bound, or the watch failed meanwhile: lameduck decides.
            phase(ShutdownPhase::Lameduck);
            tracing::info!(
                waited = ?started.elapsed(),
                "shutdown: the endpoint did not leave within the lameduck (or can no longer be followed); answering DNS until the lameduck ends"
            );
            tokio::time::sleep_until(deadline).await;
            return;
        }
    }
    let margin = margin.min(deadline.saturating_duration_since(Instant::now()));
    phase(ShutdownPhase::PropagationMargin);
    tracing::info!(
        after = ?started.elapsed(),
        ?margin,
        "shutdown: this server's endpoint is no longer ready in any Service; answering DNS for the propagation margin"
    );
    tokio::time::sleep(margin).await;
    tracing::info!(after = ?started.elapsed(), "shutdown: stopping the listeners");
}
