//! The `debug` plugin: debug-level logs for the process, as CoreDNS's `debug` turns on its
//! debug messages. Not in the query path: it sets its block's `debug` setting, which the runtime
//! reads when it sets up logging. See
//! this folder's README.

pub mod setup;

pub use setup::DebugConfig;
