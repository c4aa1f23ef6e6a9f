//! The `pprof` plugin: serves `/debug/pprof/` on its own address (`localhost:6053` by
//! default), as CoreDNS's *pprof* does, with what a Rust process can give: a CPU profile
//! (`/debug/pprof/profile?seconds=N`, gzipped pprof protobuf that `go tool pprof` reads) and
//! the command line. Go's runtime profiles (heap, goroutine, block, ...) answer 404 saying so.
//! See this folder's README.
//!
//! The files: `setup` the Corefile syntax and the HTTP route it adds, `handler` the endpoints
//! and the profiler.

pub mod handler;
pub mod setup;

pub use setup::PprofConfig;
