//! The `view` plugin: a server block takes only the questions its expressions admit, so blocks
//! of the same zones and port can answer different clients differently (split horizon). Not in
//! the query path: the router asks the block's filter before it picks the block. See this
//! folder's README.

pub mod expr;
pub mod setup;

pub use setup::ViewConfig;
