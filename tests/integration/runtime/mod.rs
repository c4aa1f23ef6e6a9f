//! The server as a whole: the binary's command line, the typed configuration, the answer memo,
//! the runtime metrics, the test harness's builder and SIGTERM's drain.

pub mod cli;
pub mod config;
pub mod drain;
pub mod harness;
pub mod memo;
pub mod runtime_metrics;
