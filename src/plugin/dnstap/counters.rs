//! What an output counts: the messages it dropped (also into `coredns_dnstap_dropped_total`)
//! and the bytes its queue holds, shared by the task that writes to readers and the senders.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use prometheus::IntCounter;

/// Dropped messages (counted here and in the metric), and the bytes queued.
#[derive(Debug)]
pub struct Dropped {
    /// Messages dropped.
    pub count: AtomicU64,
    /// `coredns_dnstap_dropped_total`.
    pub metric: Option<IntCounter>,
    /// Bytes of the messages in the queue.
    pub queued: AtomicUsize,
    /// The most bytes the queue holds.
    pub max_bytes: usize,
}

impl Dropped {
    /// Counts `n` messages dropped.
    pub fn add(&self, n: u64) {
        self.count.fetch_add(n, Ordering::Relaxed);
        if let Some(m) = &self.metric {
            m.inc_by(n);
        }
    }

    /// A message of `len` bytes left the queue.
    pub fn dequeued(&self, len: usize) {
        self.queued.fetch_sub(len, Ordering::Relaxed);
    }
}
