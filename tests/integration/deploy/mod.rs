//! What is shipped and how it is run: the manifests, the Helm chart, the install guide, the
//! image, node-local mode, port 53 without root, monitoring, the drop-in contract with CoreDNS's
//! operators and the release workflow.

pub mod chart;
pub mod dropin;
pub mod image;
pub mod install;
pub mod manifests;
pub mod monitoring;
pub mod node_local;
pub mod nodecache;
pub mod privileges;
pub mod release;
