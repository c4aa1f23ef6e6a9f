//! Plugins: each owns one folder with its Corefile setup and its handler, as CoreDNS's do,
//! and implements the contract in [`crate::chain`]. Every folder has one shape: `mod.rs`
//! (what the plugin owns, its modules, re-exports and metric families), `setup.rs` (the
//! Corefile syntax and the one `impl Configured`), `README.md`, and as the plugin needs
//! `handler.rs`, `config.rs`, `metrics.rs` (the layer test holds the shape; the plugin kit,
//! `kit/`, is no plugin). Which plugins exist, their order in the
//! chain and their setups are one list: [`registry::PLUGINS`]. No plugin imports another.

pub mod acl;
pub mod any;
pub mod autopath;
pub mod bind;
pub mod bufsize;
pub mod cache;
pub mod cancel;
pub mod chaos;
pub mod debug;
pub mod dns64;
pub mod dnspolicy;
pub mod dnstap;
pub mod errors;
pub mod fairness;
pub mod file;
pub mod forward;
pub mod header;
pub mod health;
pub mod hosts;
pub mod https3;
pub mod k8s_external;
pub mod kit;
pub mod kubernetes;
pub mod loadbalance;
pub mod local;
pub mod log;
pub mod loop_detect;
pub mod metadata;
pub mod metrics;
pub mod minimal;
pub mod multisocket;
pub mod noaaaa;
pub mod nsid;
pub mod pprof;
pub mod proxyproto;
pub mod quic;
pub mod ready;
pub mod registry;
pub mod reload;
pub mod rewrite;
pub mod root;
pub mod rrl;
pub mod secondary;
pub mod shed;
pub mod template;
pub mod timeouts;
pub mod tls;
pub mod transfer;
pub mod tsig;
pub mod view;
pub mod whoami;
