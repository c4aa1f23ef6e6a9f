//! The `timeouts` plugin: the bounds of a server block's stream connections (DNS over TCP, TLS
//! and HTTPS), as CoreDNS 1.14's: how long a query may take to arrive (`read`), a reply to be
//! written (`write`), a connection to stay open with nothing to do (`idle`), and how many
//! queries one TCP or TLS connection serves before it is closed (`maxtcpqueries`). Not in the
//! query path: the listener reads them ([`crate::chain::StreamTimeouts`]). See this folder's
//! README.

pub mod setup;

pub use setup::TimeoutsConfig;
