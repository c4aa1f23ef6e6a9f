//! The `any` plugin: answers every question of type ANY with one short HINFO record, as
//! RFC 8482 (section 4.2) allows, instead of every record set of the name. See this folder's
//! README.

pub mod handler;
pub mod setup;

pub use handler::MinimalAny;
