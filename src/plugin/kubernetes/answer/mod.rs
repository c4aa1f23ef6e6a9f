//! The `kubernetes` plugin's answerer, its query engine over the cluster zone: the name grammar
//! ([`qname`]), address spellings in names ([`addr`]) and the answerer ([`answerer`]) that turns a question into records by the
//! Kubernetes DNS spec, one file per name form: Services, their endpoints and ports
//! (`service`), pods (`pod`), reverse names (`reverse`), the apex's NS records (`apex`) and
//! the `multicluster` zones' imported services (`clusterset`);
//! what the answerer keeps with zone entries between questions, within a byte budget
//! ([`kept`]).

pub mod addr;
pub mod answerer;
mod apex;
mod clusterset;
pub mod kept;
pub mod pick;
mod pod;
pub mod qname;
mod reverse;
mod service;
pub mod topology;

pub use answerer::{AnswerSettings, ClusterAnswerer, Outcome, PodRecords};
