//! The `ready` plugin: `GET /ready` answers 200 `OK` when every plugin of the running
//! configuration is ready, else 503 with what is not ready (and why, when the plugin knows),
//! one per line. What it reads is the process's [`Readiness`](crate::chain::Readiness), which the
//! runtime fills with one check per plugin and lameduck turns off. See this folder's README.

pub mod handler;
pub mod setup;

pub use setup::ReadyConfig;
