//! The `loop` plugin: detects a forwarding loop (an upstream that leads back to this server,
//! such as a resolv.conf naming 127.0.0.53 whose resolver forwards to us) and, unlike CoreDNS,
//! does not exit: the looping upstream is taken out of use, the cluster zone keeps being
//! served, the cause is logged once with the fix, and [`LoopStatus`] reports it (for metrics
//! and `/ready`). See this folder's README.
//!
//! Method: once the listeners are up, [`probe::run_probes`] sends each upstream of the
//! chain's upstream plugin (`forward`, found through its [`crate::plugin::kit::Upstreams`]) a
//! `HINFO <random>.<random>.<zone>` query whose name only this process knows. If that name ever
//! arrives in this server's own chain, the upstream it was sent to forwarded it back to us.
//!
//! The files: `handler` holds the query path ([`LoopDetect`]), `probe` the probe names and
//! their sending, `status` what was found ([`LoopStatus`]), `setup` the Corefile syntax.

pub mod handler;
pub mod probe;
pub mod setup;
pub mod status;

pub use handler::LoopDetect;
pub use status::LoopStatus;
