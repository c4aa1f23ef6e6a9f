//! The `k8s_external` plugin: the Services' external addresses under an external zone, as
//! CoreDNS's plugin of that name serves them: `<svc>.<ns>.<zone>` answers the addresses from
//! `spec.externalIPs` and `status.loadBalancer.ingress` (a load balancer's hostname as a CNAME),
//! `_<port>._<proto>.<svc>.<ns>.<zone>` SRV for the Service's ports, and with `headless` the
//! ready endpoints of headless Services (and `<hostname>.<svc>.<ns>.<zone>`). The zone's apex
//! has its SOA and NS. It reads the cluster zone the block's `kubernetes` plugin keeps
//! (watched, so a load balancer that gets its address later shows up). See this folder's
//! README.

pub mod config;
pub mod handler;
pub mod setup;

pub use handler::K8sExternal;
