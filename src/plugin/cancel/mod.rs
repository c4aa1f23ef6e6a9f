//! The `cancel` plugin: bounds how long the rest of the chain may take for one question (5001
//! ms by default), as CoreDNS's *cancel* cancels the request's context. When the bound is
//! reached the work in progress (an upstream exchange) is dropped and the client gets SERVFAIL,
//! as CoreDNS's *forward* answers a cancelled context. See this folder's README.

pub mod handler;
pub mod setup;

pub use handler::Cancel;
pub use setup::CancelConfig;
