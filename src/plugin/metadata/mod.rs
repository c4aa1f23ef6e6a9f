//! The `metadata` plugin: turns on the per-query metadata of its block (labels such as
//! `kubernetes/client-namespace` and `forward/upstream` that the block's plugins publish about
//! each question, read by `log`'s `{/LABEL}` placeholders and `view`'s `metadata('LABEL')`).
//! It owns only its Corefile syntax; the metadata itself travels with the question
//! (`proto::QueryMetadata`), and each plugin publishes its own (a `chain::MetadataSource` it offers).
//! See this folder's README.

pub mod setup;

pub use setup::MetadataConfig;
