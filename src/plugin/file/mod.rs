//! The `file` plugin: serves zones from RFC 1035 master files, authoritatively (referrals below
//! zone cuts, CNAMEs, wildcards, NXDOMAIN and NODATA with the SOA), and reads a file again when
//! its SOA serial grows (or its modification time changes). See this folder's README.
//!
//! Layout: `setup` parses the directive and reads the files into a [`FileConfig`], `handler`
//! answers from each zone's records (the plugin kit's `ZoneData`, shared with `secondary`) and
//! runs the reload tasks ([`File`]), `build` turns the configuration into the plugin.

mod build;
pub mod fuzz;
pub mod handler;
pub mod setup;

pub use handler::File;
pub use setup::FileConfig;
