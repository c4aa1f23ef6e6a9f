//! The `reload` plugin's syntax: `reload [INTERVAL] [JITTER]` sets how often the runtime reads
//! the Corefile again and applies it when it changed (the change detector and the
//! `coredns_reload_*` metrics are the runtime's, in `app/reload.rs`).
//! See this folder's README.

pub mod setup;

pub use setup::ReloadConfig;
