//! The project's own rules, held by tests: the layering and the plugin shape, the docs kept
//! true, the build script, the fuzz corpora replayed, and the contract every directive keeps.

pub mod build_script;
pub mod contract;
pub mod docs;
pub mod fuzz_corpus;
pub mod layers;
