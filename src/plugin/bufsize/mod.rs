//! The `bufsize` plugin: the largest EDNS UDP payload a server block advertises and fills,
//! 512 to 4096 bytes (default 1232, DNS Flag Day 2020). Not in the query path: the server caps
//! each client's advertised size at it when it sizes the reply. See this folder's README.

pub mod setup;

pub use setup::BufsizeConfig;
