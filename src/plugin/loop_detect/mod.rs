//! The `loop` plugin: detects a forwarding loop (an upstream that leads back to this server,
//! such as a resolv.conf naming 127.0.0.53 whose resolver forwards to us) and, unlike CoreDNS,
//! does not exit: the looping upstream is taken out of use, the cluster zone keeps being
//! served, the cause is logged once with the fix, and [`LoopStatus`] reports it (for metrics
//! and `/ready`). See this folder's README.
//!
//! Method: once the listeners are up, [`handler::run_probes`] sends each upstream of the
//! chain's upstream plugin (`forward`, found through its [`crate::chain::Upstreams`]) a
//! `HINFO <random>.<random>.<zone>` query whose name only this process knows. If that name ever
//! arrives in this server's own chain, the upstream it was sent to forwarded it back to us.

pub mod handler;
pub mod setup;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::Name;

use crate::chain::{Chain, Next, Plugin, ReplyFuture};
use crate::proto::{Question, Reply};

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

/// The `loop` plugin in a chain.
#[derive(Debug, Clone)]
pub struct LoopDetect {
    zone: Name,
    probes: Arc<DashMap<Name, usize>>,
    status: Arc<LoopStatus>,
}

impl LoopDetect {
    /// The plugin for a block whose first zone is `zone`.
    pub fn new(zone: Name) -> Self {
        Self {
            zone,
            probes: Arc::new(DashMap::new()),
            status: Arc::new(LoopStatus::default()),
        }
    }

    /// The loop status.
    pub fn status(&self) -> &Arc<LoopStatus> {
        &self.status
    }

    /// The zone the probe names are made in.
    pub fn zone(&self) -> &Name {
        &self.zone
    }

    /// If `name` is one of our probes, the index of the upstream it was sent to.
    pub fn probe_seen(&self, name: &Name) -> Option<usize> {
        if self.probes.is_empty() {
            return None;
        }
        self.probes.get(&name.to_lowercase()).map(|e| *e.value())
    }

    /// Registers a probe name for upstream `index`.
    pub fn register(&self, name: &Name, index: usize) {
        self.probes.insert(name.to_lowercase(), index);
    }
}

impl Plugin for LoopDetect {
    fn name(&self) -> &'static str {
        "loop"
    }

    /// One of our probes coming back marks the upstream it went to as looping and gets
    /// SERVFAIL; any other question goes on.
    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            if let Some(index) = self.probe_seen(&q.name) {
                if let Some(addr) = next.upstreams().and_then(|u| u.mark_looping(index)) {
                    self.status.record(addr);
                }
                return Reply::Rcode(ResponseCode::ServFail);
            }
            next.serve(q).await
        })
    }

    fn start(&self, chain: &Chain) {
        if chain.upstreams().is_some() {
            tokio::spawn(handler::run_probes(self.clone(), chain.clone()));
        }
    }

    fn not_ready(&self) -> Vec<String> {
        if !self.status.detected() {
            return Vec::new();
        }
        let upstreams: Vec<String> = self.status.upstreams().iter().map(|u| u.to_string()).collect();
        vec![format!("loop: forwarding loop through {}", upstreams.join(" "))]
    }
}
