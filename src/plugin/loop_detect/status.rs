//! What the `loop` plugin found ([`LoopStatus`]): whether a forwarding loop was detected and
//! through which upstreams. The plugin writes it; the metrics and `/ready` read it.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether a loop was found, through which upstreams. Shared with the metrics and `/ready`.
#[derive(Debug, Default)]
pub struct LoopStatus {
    detected: AtomicBool,
    detections: AtomicU64,
    upstreams: Mutex<Vec<SocketAddr>>,
}

impl LoopStatus {
    /// True once a loop was detected.
    pub fn detected(&self) -> bool {
        self.detected.load(Ordering::Relaxed)
    }

    /// How many upstreams were found looping (the `cluster_dns_loop_detected_total` counter).
    pub fn detections(&self) -> u64 {
        self.detections.load(Ordering::Relaxed)
    }

    /// The looping upstreams.
    pub fn upstreams(&self) -> Vec<SocketAddr> {
        self.upstreams.lock().map(|u| u.clone()).unwrap_or_default()
    }

    /// Records that `upstream` loops back to this server, logging it once with the fix.
    pub fn record(&self, upstream: SocketAddr) {
        self.detected.store(true, Ordering::Relaxed);
        self.detections.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut u) = self.upstreams.lock() {
            u.push(upstream);
        }
        tracing::error!(
            %upstream,
            "forwarding loop detected: a query this server sent to upstream {upstream} came back to this server. \
             No longer forwarding to {upstream}; the cluster zone is still served. Fix: point 'forward' (or the \
             resolv.conf it reads, e.g. the kubelet's --resolv-conf instead of one naming 127.0.0.53) at a real \
             upstream resolver, not at this server"
        );
    }
}
