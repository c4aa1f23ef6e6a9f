//! cluster-dns: a Kubernetes cluster DNS server, a drop-in replacement for CoreDNS.
//!
//! Layers, imported one way from the bottom up (`tests/integration/project/layers.rs` holds the rule):
//! - [`proto`] and [`corefile`] (leaves): the question, the reply, the transport and wire
//!   limits; the Corefile language with file:line errors.
//! - [`telemetry`]: the metric registry and CoreDNS's core families.
//! - [`chain`]: the plugin contract (what a plugin declares), the chain, the setup contract.
//! - [`cluster`]: the in-memory cluster zone and the sources that fill it (manifests, the API
//!   watches).
//! - [`plugin`]: one folder per plugin; [`plugin::registry`] is the one list of them. The
//!   cluster zone's answerer is the `kubernetes` plugin's own ([`plugin::kubernetes::answer`]).
//! - [`server`]: validation, routing, encoding, the answer memo, the UDP and TCP transports;
//!   it reads only what plugins declare.
//! - The runtime: [`app`] (start-up, reload, shutdown), [`config`], [`http`], [`logging`], and
//!   the harnesses [`testing`] and [`fuzzing`].
//! - Beside the runtime, node management: [`nodecache`] (node-cache compatible mode), which
//!   starts the server through [`app`]'s public API and is imported by no runtime file.

pub mod app;
pub mod chain;
pub mod cluster;
pub mod config;
pub mod corefile;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod logging;
pub mod nodecache;
pub mod plugin;
pub mod proto;
pub mod server;
pub mod telemetry;
#[doc(hidden)]
pub mod testing;
