//! The `log` plugin: one line per query in CoreDNS's common log format, on stdout, so log
//! pipelines built for CoreDNS keep parsing. See this folder's README.
//!
//! The files: `setup` the Corefile syntax and the observer it builds, `config` what it parses
//! into, `handler` the observer and its formats.

pub mod config;
pub mod handler;
pub mod setup;

pub use config::LogConfig;
pub use handler::QueryLog;
