//! The `kubernetes` plugin: answers the cluster zone (`cluster.local` and the reverse zones)
//! from the Kubernetes objects. See `README.md` in this folder for its Corefile syntax.

pub mod handler;
pub mod metrics;
pub mod setup;

pub use handler::Kubernetes;
pub use metrics::KubernetesMetrics;
