//! `coredns_nodecache_setup_errors_total{errortype}`: node-cache's one family, with its label
//! values (`iptables`, `iptables_lock`, `interface_add`, `interface_check`, `configmap`; the
//! `iptables` ones count nftables failures too), all present from the start at 0.

use prometheus::{IntCounterVec, Opts, Registry};

/// The error types, node-cache's fixed set.
pub const ERROR_TYPES: [&str; 5] = [
    "iptables",
    "iptables_lock",
    "interface_add",
    "interface_check",
    "configmap",
];

/// The family. Counted from the first setup step, before the server (and its registry) exists;
/// [`SetupErrors::register`] adds it to the registry `/metrics` renders, values kept.
#[derive(Debug, Clone)]
pub struct SetupErrors(IntCounterVec);

impl SetupErrors {
    /// The family, every label at 0.
    pub fn new() -> Self {
        let vec = IntCounterVec::new(
            Opts::new(
                "coredns_nodecache_setup_errors_total",
                "The number of errors during periodic network setup for node-cache",
            ),
            &["errortype"],
        )
        .unwrap_or_else(|e| unreachable!("a fixed, valid metric definition: {e}"));
        for t in ERROR_TYPES {
            vec.with_label_values(&[t]).reset();
        }
        Self(vec)
    }

    /// Counts one error of `errortype` (one of `ERROR_TYPES`).
    pub fn inc(&self, errortype: &'static str) {
        debug_assert!(ERROR_TYPES.contains(&errortype));
        self.0.with_label_values(&[errortype]).inc();
    }

    /// The count of `errortype`.
    pub fn get(&self, errortype: &str) -> u64 {
        self.0.with_label_values(&[errortype]).get()
    }

    /// Adds the family to `registry`.
    pub fn register(&self, registry: &Registry) -> Result<(), prometheus::Error> {
        registry.register(Box::new(self.0.clone()))
    }
}

impl Default for SetupErrors {
    fn default() -> Self {
        Self::new()
    }
}
