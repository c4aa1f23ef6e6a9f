//! The cluster zone's query engine: the name grammar ([`qname`]), address spellings in names
//! ([`addr`]) and the answerer ([`answer`]) that turns a question into records by the
//! Kubernetes DNS spec, one file per name form: Services, their endpoints and ports
//! (`service`), pods (`pod`), reverse names (`reverse`) and the apex's NS records (`apex`);
//! what the answerer keeps with zone entries between questions, within a byte budget
//! ([`kept`]).

pub mod addr;
pub mod answer;
mod apex;
pub mod kept;
mod pod;
pub mod qname;
mod reverse;
mod service;

pub use answer::{AnswerSettings, ClusterAnswerer, Outcome, PodRecords};
