//! The `nsid` plugin: the Name Server Identifier (RFC 5001). A request whose OPT carries an
//! NSID option gets this server's identifier (the Corefile's DATA, or the host's name) in the
//! reply's OPT, as CoreDNS's *nsid* does. It answers nothing itself: it offers the option
//! through the plugin contract (an `EdnsOptions`, `Plugin::offers`) and the server adds it to
//! the OPT it builds. See this folder's README.
//!
//! The files: `handler` holds the plugin ([`Nsid`]), `setup` the Corefile syntax
//! ([`NsidConfig`]).

pub mod handler;
pub mod setup;

pub use handler::Nsid;
pub use setup::NsidConfig;
