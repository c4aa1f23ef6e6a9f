//! The `minimal` plugin: empties the authority and additional sections of positive answers
//! (NOERROR that is neither NODATA nor a delegation), as CoreDNS's *minimal* does, so
//! responses are smaller. Negative answers keep their SOA, delegations their NS and glue. See
//! this folder's README.

pub mod handler;
pub mod setup;

pub use handler::Minimal;
