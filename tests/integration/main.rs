//! Integration tests: the real server on loopback, queried over real UDP and TCP sockets and
//! with the real `dig`. One test binary for the whole suite, to keep builds short.

#![allow(clippy::unwrap_used)]

mod acl;
mod any;
mod autopath;
mod bufsize;
mod cancel;
mod chaos;
mod chart;
mod cli;
mod concurrency;
mod config;
mod conformance;
mod deploy;
mod dns64;
mod dnstap;
mod dot;
mod dropin;
mod file;
mod forward;
mod fuzz_corpus;
mod harness;
mod header;
mod image;
mod k8s_external;
mod keys;
mod layers;
mod loadbalance;
mod local;
mod memo;
mod minimal;
mod monitoring;
mod multisocket;
mod nsid;
mod pprof;
mod privileges;
mod rewrite;
mod root;
mod serve_tls;
mod shed;
mod support;
mod tcp_limits;
mod template;
mod timeouts;
mod transfer;
mod transport;
mod upstream;
mod view;
mod watch;
mod whoami_debug;
