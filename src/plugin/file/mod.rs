//! The `file` plugin: serves zones from RFC 1035 master files, authoritatively (referrals below
//! zone cuts, CNAMEs, wildcards, NXDOMAIN and NODATA with the SOA), and reads a file again when
//! its SOA serial grows (or its modification time changes). See this folder's README.
//!
//! Layout: `setup` parses the directive, reads the files into a [`FileConfig`] (`config`) and
//! turns it into the plugin, `handler` answers from each zone's records (the plugin kit's
//! `ZoneData`, shared with `secondary`) and runs the reload tasks ([`File`]).

pub mod config;
pub mod fuzz;
pub mod handler;
pub mod setup;

pub use config::FileConfig;
pub use handler::File;
