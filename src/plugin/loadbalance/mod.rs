//! The `loadbalance` plugin: shuffles the order of A, AAAA and MX records in every answer, so
//! clients that take the first address spread over all of them. CNAMEs stay first (glibc
//! follows the chain in order). See this folder's README.

pub mod handler;
pub mod setup;

pub use handler::LoadBalance;
