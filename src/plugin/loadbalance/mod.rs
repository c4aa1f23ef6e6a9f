//! The `loadbalance` plugin: shuffles the order of A, AAAA and MX records in every answer, so
//! clients that take the first address spread over all of them. CNAMEs stay first (glibc
//! follows the chain in order). Or, with the `weighted` policy, one address record drawn by
//! the weights of a weight file goes first. See this folder's README.

pub mod handler;
pub mod setup;
pub mod weighted;

pub use handler::LoadBalance;
