//! The `tsig` plugin: checks TSIG-signed requests (RFC 8945) of its block's zones with the
//! keys it is given, refuses the unsigned ones where it requires a signature, and signs the
//! responses to signed ones. It works on the wire form, before and after its block's chain
//! (through [`crate::chain::RequestAuth`]): the chain never sees the signature. See this
//! folder's README.

pub mod fuzz;
pub mod setup;
pub mod verify;

pub use setup::TsigConfig;
pub use verify::TsigAuth;
