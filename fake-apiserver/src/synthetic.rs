//! Synthetic clusters for the benchmarks: N Services (a mix of ClusterIP and headless) spread
//! over namespaces, and a number of endpoints cut into EndpointSlices of a fixed size, written as
//! the EndpointSlice controller writes them (addresses, conditions, hostname for headless
//! services, targetRef to a Pod, nodeName, zone).

use std::net::Ipv4Addr;

use serde_json::{Value, json};

/// The shape of a synthetic cluster.
#[derive(Debug, Clone)]
pub struct SyntheticCluster {
    /// Number of Services.
    pub services: usize,
    /// Total number of endpoints over all slices.
    pub endpoints: usize,
    /// Endpoints per EndpointSlice (the controller's default maximum is 100).
    pub per_slice: usize,
    /// Every `headless_every`-th Service is headless (0: none).
    pub headless_every: usize,
    /// Number of namespaces the Services are spread over.
    pub namespaces: usize,
}

impl Default for SyntheticCluster {
    /// The benchmark cluster: 10,000 Services, 150,000 endpoints in slices of 100, one Service in
    /// four headless, 100 namespaces.
    fn default() -> Self {
        Self {
            services: 10_000,
            endpoints: 150_000,
            per_slice: 100,
            headless_every: 4,
            namespaces: 100,
        }
    }
}

/// The namespace of Service `i`.
pub fn namespace_of(cluster: &SyntheticCluster, i: usize) -> String {
    format!("ns-{}", i % cluster.namespaces.max(1))
}

/// The name of Service `i`.
pub fn service_name(i: usize) -> String {
    format!("svc-{i}")
}

/// The ClusterIP of Service `i` (in 10.96.0.0/12).
pub fn cluster_ip(i: usize) -> Ipv4Addr {
    let n = u32::try_from(i + 1).unwrap_or(0);
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 96, 0, 0)) + n)
}

/// The pod IP of endpoint number `n` (in 10.128.0.0/9, so it does not overlap the Services).
pub fn pod_ip(n: usize) -> Ipv4Addr {
    let n = u32::try_from(n + 1).unwrap_or(0);
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + n)
}

/// A Namespace object.
pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}})
}

/// A Service object: ClusterIP `ip`, or headless when `ip` is `None`.
pub fn service(ns: &str, name: &str, ip: Option<Ipv4Addr>) -> Value {
    let cip = ip.map(|i| i.to_string()).unwrap_or_else(|| "None".to_owned());
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "type": "ClusterIP", "clusterIP": cip, "clusterIPs": [cip],
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"
        }
    })
}

/// One endpoint of a slice: pod `k` of `service` with `ip`; `hostname` for headless services.
pub fn endpoint(service: &str, k: usize, ip: Ipv4Addr, hostname: bool, ready: bool) -> Value {
    let pod = format!("{service}-5d8f9c7b4-{k:05}");
    let mut ep = json!({
        "addresses": [ip.to_string()],
        "conditions": {"ready": ready, "serving": ready, "terminating": false},
        "nodeName": format!("node-{}", k % 500),
        "targetRef": {"kind": "Pod", "namespace": "", "name": pod, "uid": format!("00000000-0000-0000-0000-{k:012}")},
        "zone": format!("zone-{}", ["a", "b", "c"][k % 3])
    });
    if hostname {
        ep["hostname"] = Value::String(format!("{service}-{k}"));
    }
    ep
}

/// An EndpointSlice of `service` named `{service}-{index}` with `endpoints`.
pub fn slice(ns: &str, service: &str, index: usize, endpoints: Vec<Value>) -> Value {
    let mut eps = endpoints;
    for e in &mut eps {
        e["targetRef"]["namespace"] = Value::String(ns.to_owned());
    }
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{service}-{index:05}"), "namespace": ns,
            "labels": {"kubernetes.io/service-name": service, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io", "app": service}
        },
        "addressType": "IPv4",
        "endpoints": eps,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    })
}

impl SyntheticCluster {
    /// True when Service `i` is headless.
    pub fn is_headless(&self, i: usize) -> bool {
        self.headless_every > 0 && i.is_multiple_of(self.headless_every)
    }

    /// The number of slices.
    pub fn slice_count(&self) -> usize {
        self.endpoints.div_ceil(self.per_slice.max(1))
    }

    /// The Service that slice `j` belongs to (slices are spread evenly over the Services).
    pub fn slice_owner(&self, j: usize) -> usize {
        (j * self.services) / self.slice_count().max(1)
    }

    /// Every object of the cluster: Namespaces, then Services, then EndpointSlices.
    pub fn objects(&self) -> impl Iterator<Item = Value> + '_ {
        let namespaces = (0..self.namespaces.max(1)).map(|n| namespace(&format!("ns-{n}")));
        let services = (0..self.services).map(|i| {
            let ip = (!self.is_headless(i)).then(|| cluster_ip(i));
            service(&namespace_of(self, i), &service_name(i), ip)
        });
        let per = self.per_slice.max(1);
        let slices = (0..self.slice_count()).map(move |j| {
            let owner = self.slice_owner(j);
            let name = service_name(owner);
            let start = j * per;
            let end = (start + per).min(self.endpoints);
            let eps = (start..end)
                .map(|n| endpoint(&name, n - start, pod_ip(n), self.is_headless(owner), true))
                .collect();
            slice(&namespace_of(self, owner), &name, j, eps)
        });
        namespaces.chain(services).chain(slices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cluster_has_the_asked_sizes() {
        let c = SyntheticCluster {
            services: 100,
            endpoints: 1_500,
            ..SyntheticCluster::default()
        };
        let objs: Vec<Value> = c.objects().collect();
        let count = |k: &str| objs.iter().filter(|o| o["kind"] == k).count();
        assert_eq!(count("Service"), 100);
        assert_eq!(count("EndpointSlice"), 15);
        let eps: usize = objs
            .iter()
            .filter(|o| o["kind"] == "EndpointSlice")
            .map(|o| o["endpoints"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(eps, 1_500);
        assert_eq!(c.slice_owner(14), 93);
    }
}
