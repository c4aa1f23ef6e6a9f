//! The `rewrite` plugin: rewrites the question before the plugins after it see it (`name`
//! rules: exact, prefix, suffix, substring, regex; `type`, `class`; `edns0` options) and maps
//! the reply back so the client sees the question it asked (`answer auto`, `answer name`,
//! `answer value`); `ttl` rules hold the reply's TTLs to a range, `rcode` rules change its
//! rcode, `cname` rules send a CNAME's target elsewhere. See this folder's README.
//!
//! Layout: `rule` holds what a parsed rule is, `setup` parses `name` and `ttl` rules and
//! dispatches the others to `fields` (`type`, `class`, `rcode`, `cname`) and `edns0`, and makes
//! the plugin; `handler`
//! applies the rules ([`Rewrite::apply`]) and restores replies ([`Rewritten::restore`]).

pub mod edns0;
mod fields;
pub mod fuzz;
pub mod handler;
pub mod rule;
pub mod setup;

pub use handler::{Rewrite, Rewritten};
pub use rule::RewriteRule;
