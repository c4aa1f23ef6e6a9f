//! The cluster zone from the Kubernetes API (the fake API server): watches and their faults,
//! concurrent events, multicluster, topology, the external zone and tenant DNS policy.

pub mod concurrency;
pub mod dnspolicy;
pub mod k8s_external;
pub mod multicluster;
pub mod topology;
pub mod watch;
