//! Integration tests: the real server on loopback, queried over real UDP and TCP sockets and
//! with the real `dig`. One test binary for the whole suite, to keep builds short.
//!
//! Grouped by area, a folder each (a test's name starts with its area: `plugins::acl::...`):
//! `plugins` (one file per plugin), `transport` (the wire and the listeners), `kubernetes` (the
//! cluster zone from the API), `deploy` (what is shipped and how it runs), `runtime` (the server
//! as a whole: CLI, configuration, memo, drain), `conformance` (answers against references) and
//! `project` (the layering, the docs, the build script, the fuzz corpora, the contract); the
//! helpers every area shares are `support` (the in-process server and its client, the scripted
//! upstreams, the reference servers).

#![allow(clippy::unwrap_used)]

mod conformance;
mod deploy;
mod kubernetes;
mod plugins;
mod project;
mod runtime;
mod support;
mod transport;
