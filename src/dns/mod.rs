//! The cluster zone's query engine: the name grammar ([`qname`]), address spellings in names
//! ([`addr`]) and the answerer ([`answer`]) that turns a question into records by the
//! Kubernetes DNS spec.

pub mod addr;
pub mod answer;
pub mod qname;

pub use answer::{AnswerSettings, ClusterAnswerer, Outcome, PodRecords};
