//! cluster-dns: a Kubernetes cluster DNS server, a drop-in replacement for CoreDNS.
//!
//! Layout (one concept per module):
//! - [`corefile`]: the Corefile language (tokens, server blocks, directives) with file:line errors.
//! - [`config`]: the typed server configuration built from a parsed Corefile.
//! - [`plugin`]: one folder per plugin (its Corefile setup and handler); the chain order lives in
//!   [`plugin::CHAIN_ORDER`].
//! - [`cluster`]: the in-memory cluster zone (Namespaces, Services, EndpointSlices, Pods reduced to
//!   what DNS needs) and the sources that fill it (Kubernetes manifests, later the API watches).
//! - [`dns`]: the query engine that answers names in the cluster zone by the Kubernetes DNS spec.
//! - [`server`]: the UDP workers and TCP listener, request validation, EDNS, truncation and
//!   response encoding (one path from request bytes to response bytes for every transport).

pub mod app;
pub mod chain;
pub mod cluster;
pub mod config;
pub mod corefile;
pub mod dns;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod plugin;
pub mod proto;
pub mod server;
pub mod telemetry;
#[doc(hidden)]
pub mod testing;
