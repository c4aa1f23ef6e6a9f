//! The `hosts` plugin: serves A, AAAA and PTR records from a `/etc/hosts`-style file and from
//! entries written inline in the Corefile, re-reading the file when it changes. Names it does
//! not know are NXDOMAIN, or go to the next plugin where `fallthrough` says so. See this
//! folder's README.
//!
//! Layout: `setup` parses the directive into a [`HostsConfig`] (`config`) and makes the plugin,
//! `table` reads hosts files and
//! builds the lookup table, `handler` answers questions ([`Hosts::answer`]) and runs the reload
//! task ([`Hosts::start_reload`]), `metrics` exports the table's size and build time.

pub mod config;
pub mod handler;
pub mod metrics;
pub mod setup;
pub mod table;

pub use config::HostsConfig;
pub use handler::Hosts;
pub use metrics::HostsMetrics;
