//! The `errors` plugin: logs the failures the chain itself produced (no upstream answered, no
//! plugin could answer, too many queries in flight) as CoreDNS does, one line per failure, and
//! `consolidate` folds the failures that match a pattern into one line per period. See this
//! folder's README.
//!
//! The files: `setup` the Corefile syntax and the observer it builds, `config` what it parses
//! into, `handler` the observer.

pub mod config;
pub mod handler;
pub mod setup;

pub use config::ErrorsConfig;
pub use handler::ErrorLog;
