//! The `rewrite` plugin: rewrites the question name before the plugins after it see the
//! question (`name` rules: exact, prefix, suffix, substring, regex), and maps the reply back so
//! the client sees the names it asked for (`answer auto`, `answer name`, `answer value`); `ttl`
//! rules hold the reply's TTLs to a range. Other CoreDNS rewrite kinds are refused at setup.
//! See this folder's README.
//!
//! Layout: `setup` parses one directive into a [`RewriteRule`], `handler` applies the rules
//! ([`Rewrite::apply`]) and restores replies ([`Rewritten::restore`]).

mod build;
pub mod handler;
pub mod setup;

pub use handler::{Rewrite, Rewritten};
pub use setup::RewriteRule;
