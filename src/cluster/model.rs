//! The DNS projection of Kubernetes objects: only the fields cluster DNS reads, converted from the
//! k8s-openapi types with errors that name the object.
//!
//! Everything here is immutable once built and shared behind `Arc`s by the zone store
//! ([`super::zone`]). Names are stored lower-case (Kubernetes names are DNS labels already, so
//! this only guards against odd input); strings that repeat across objects are `Arc<str>`.

use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::ObjectError;
use super::topology::{EndpointPlace, TrafficDistribution};
use crate::proto::is_dns_label;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A transport protocol of a Service or EndpointSlice port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortProtocol {
    /// TCP (the Kubernetes default).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl PortProtocol {
    /// Parses a Kubernetes protocol string (case-insensitive, as DNS labels are).
    pub fn parse(s: &str) -> Option<Self> {
        if s.eq_ignore_ascii_case("tcp") {
            Some(Self::Tcp)
        } else if s.eq_ignore_ascii_case("udp") {
            Some(Self::Udp)
        } else if s.eq_ignore_ascii_case("sctp") {
            Some(Self::Sctp)
        } else {
            None
        }
    }
}

/// One port of a Service (its `port`) or of an EndpointSlice (the endpoints' port).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortInfo {
    /// The port name, lower-case; empty for an unnamed port.
    pub name: Arc<str>,
    /// The protocol.
    pub protocol: PortProtocol,
    /// The port number; `None` is CoreDNS's `-1` sentinel for a slice without ports.
    pub port: Option<u16>,
}

/// How a Service is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceKind {
    /// A ClusterIP (also NodePort/LoadBalancer) service with its cluster IPs, in spec order,
    /// without duplicates.
    ClusterIp(Vec<IpAddr>),
    /// A headless service (`clusterIP: None`): answered from its ready endpoints.
    Headless,
    /// An ExternalName service: a CNAME to this name. `None` when `externalName` is an IP literal
    /// or not a valid name; such a service answers NXDOMAIN, as CoreDNS does.
    ExternalName(Option<Arc<str>>),
}

/// The DNS view of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceInfo {
    /// Service name, lower-case.
    pub name: Arc<str>,
    /// Namespace, lower-case.
    pub namespace: Arc<str>,
    /// How it answers.
    pub kind: ServiceKind,
    /// The Service ports.
    pub ports: Vec<PortInfo>,
    /// The addresses it is reached at from outside the cluster (`k8s_external`); `None` for
    /// the many Services that have none, so they cost one word.
    pub external: Option<Box<ExternalAddresses>>,
    /// `spec.trafficDistribution`, when it is one DNS acts on (headless answers, `topology`).
    pub traffic: Option<TrafficDistribution>,
}

/// Where a Service is reached from outside the cluster: `spec.externalIPs` and
/// `status.loadBalancer.ingress` (IPs, and hostnames a load balancer gives instead).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExternalAddresses {
    /// External IPs then load-balancer IPs, without repeats.
    pub ips: Vec<IpAddr>,
    /// Load-balancer hostnames, lower-case and absolute.
    pub hostnames: Vec<Arc<str>>,
}

/// An endpoint's addresses: almost always exactly one, kept inline. (A `Vec` is a second heap
/// block per endpoint: at 150,000 endpoints about 6 MB of the zone.) Reads as a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addresses {
    /// The one address.
    One(IpAddr),
    /// None, or more than one.
    Many(Box<[IpAddr]>),
}

impl std::ops::Deref for Addresses {
    type Target = [IpAddr];

    fn deref(&self) -> &[IpAddr] {
        match self {
            Self::One(ip) => std::slice::from_ref(ip),
            Self::Many(ips) => ips,
        }
    }
}

impl From<Vec<IpAddr>> for Addresses {
    fn from(ips: Vec<IpAddr>) -> Self {
        match ips.as_slice() {
            [one] => Self::One(*one),
            _ => Self::Many(ips.into_boxed_slice()),
        }
    }
}

impl FromIterator<IpAddr> for Addresses {
    fn from_iter<I: IntoIterator<Item = IpAddr>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

/// One ready endpoint of an EndpointSlice: 48 bytes (there is one per endpoint, so this is most
/// of the zone; two `Option<Arc<str>>` made it 56). Its place costs a word when not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointInfo {
    /// Its addresses (normally one); non-IP addresses (FQDN slices) are dropped.
    pub addresses: Addresses,
    /// The hostname and the pod name in one block, `HOSTNAME/POD` with either side empty when
    /// absent (neither a DNS label nor a Pod name can hold a `/`); `None` when both are.
    names: Option<Box<str>>,
    /// Its node, zone and hints, kept only when an option reads them.
    place: Option<Box<EndpointPlace>>,
}

impl EndpointInfo {
    /// An endpoint with `addresses`, its `hostname` and its Pod's name (both lower-case).
    pub fn new(addresses: Addresses, hostname: Option<&str>, pod_name: Option<&str>) -> Self {
        let (h, p) = (hostname.unwrap_or_default(), pod_name.unwrap_or_default());
        let names = (!h.is_empty() || !p.is_empty()).then(|| format!("{h}/{p}").into_boxed_str());
        Self {
            addresses,
            names,
            place: None,
        }
    }

    /// The same endpoint at `place`.
    #[must_use]
    pub fn with_place(mut self, place: Option<Box<EndpointPlace>>) -> Self {
        self.place = place;
        self
    }

    /// Its node, zone and hints, when kept.
    pub fn place(&self) -> Option<&EndpointPlace> {
        self.place.as_deref()
    }

    /// `hostname`, lower-case.
    pub fn hostname(&self) -> Option<&str> {
        self.split().0
    }

    /// `targetRef.name` when the target is a Pod, lower-case (used by `endpoint_pod_names`).
    pub fn pod_name(&self) -> Option<&str> {
        self.split().1
    }

    fn split(&self) -> (Option<&str>, Option<&str>) {
        let Some((h, p)) = self.names.as_deref().and_then(|n| n.split_once('/')) else {
            return (None, None);
        };
        ((!h.is_empty()).then_some(h), (!p.is_empty()).then_some(p))
    }
}

/// The DNS view of an EndpointSlice: only ready endpoints are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceInfo {
    /// Slice name.
    pub name: Arc<str>,
    /// Namespace, lower-case.
    pub namespace: Arc<str>,
    /// The Service it belongs to (its `kubernetes.io/service-name` label), lower-case; `None` for
    /// a slice without the label, which DNS ignores.
    pub service: Option<Arc<str>>,
    /// Ready endpoints (`conditions.ready` true or unset).
    pub endpoints: Vec<EndpointInfo>,
    /// Slice ports; a slice without ports holds one sentinel port (`port: None`).
    pub ports: Vec<PortInfo>,
}

/// The DNS view of a Pod (only used with `pods verified`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// Pod name.
    pub name: Arc<str>,
    /// Namespace, lower-case.
    pub namespace: Arc<str>,
    /// `status.podIP`; `None` when the pod has no IP yet, is terminating, or has finished, so it
    /// gives no record.
    pub ip: Option<IpAddr>,
    /// `spec.hostNetwork`: its IP is its node's, which names no namespace (autopath).
    pub host_network: bool,
    /// `spec.nodeName` (the client's place for `topology`).
    pub node: Option<Arc<str>>,
    /// Its labels, kept only for `dnspolicy` (whose `podSelector`s read them).
    pub labels: Option<super::policy::LabelSet>,
}

fn lower(s: &str) -> Arc<str> {
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        Arc::from(s.to_ascii_lowercase())
    } else {
        Arc::from(s)
    }
}

fn required_name(
    kind: &'static str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Result<(Arc<str>, Arc<str>), ObjectError> {
    let name = meta.name.as_deref().unwrap_or_default();
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    if name.is_empty() {
        return Err(ObjectError::new(
            kind,
            namespace,
            "<unnamed>",
            "metadata.name is missing",
        ));
    }
    if !is_dns_label(name) && kind != "EndpointSlice" && kind != "Pod" {
        return Err(ObjectError::new(
            kind,
            namespace,
            name,
            "metadata.name is not a DNS label (lower-case letters, digits and '-', at most 63)",
        ));
    }
    if !is_dns_label(namespace) {
        return Err(ObjectError::new(
            kind,
            namespace,
            name,
            "metadata.namespace is not a DNS label",
        ));
    }
    Ok((lower(name), lower(namespace)))
}

fn port_number(kind: &'static str, ns: &str, name: &str, value: i32) -> Result<u16, ObjectError> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| ObjectError::new(kind, ns, name, format!("port {value} is out of range 1-65535")))
}

fn protocol(
    kind: &'static str,
    ns: &str,
    name: &str,
    value: Option<&str>,
) -> Result<PortProtocol, ObjectError> {
    match value {
        None => Ok(PortProtocol::Tcp),
        Some(p) => PortProtocol::parse(p)
            .ok_or_else(|| ObjectError::new(kind, ns, name, format!("unknown port protocol '{p}'"))),
    }
}

impl ServiceInfo {
    /// Projects a Service.
    pub fn from_k8s(svc: &Service) -> Result<Self, ObjectError> {
        const KIND: &str = "Service";
        let (name, namespace) = required_name(KIND, &svc.metadata)?;
        let err = |msg: String| ObjectError::new(KIND, &namespace, &name, msg);
        let spec = svc.spec.as_ref().ok_or_else(|| err("spec is missing".into()))?;

        let mut ports = Vec::new();
        for p in spec.ports.iter().flatten() {
            let port = PortInfo {
                name: lower(p.name.as_deref().unwrap_or_default()),
                protocol: protocol(KIND, &namespace, &name, p.protocol.as_deref())?,
                port: Some(port_number(KIND, &namespace, &name, p.port)?),
            };
            if !ports.contains(&port) {
                ports.push(port);
            }
        }

        let kind = if spec.type_.as_deref() == Some("ExternalName") {
            let target = spec.external_name.as_deref().unwrap_or_default();
            ServiceKind::ExternalName(chase_target(target))
        } else {
            let listed: Vec<&str> = match &spec.cluster_ips {
                Some(ips) if !ips.is_empty() => ips.iter().map(String::as_str).collect(),
                _ => spec.cluster_ip.as_deref().into_iter().collect(),
            };
            match listed.first() {
                Some(first) if first.eq_ignore_ascii_case("none") => ServiceKind::Headless,
                None => return Err(err("spec.clusterIP is missing (neither an IP nor None)".into())),
                Some(_) => {
                    let mut ips = Vec::with_capacity(listed.len());
                    for s in &listed {
                        let ip: IpAddr = s
                            .parse()
                            .map_err(|_| err(format!("spec.clusterIPs has an invalid IP '{s}'")))?;
                        if !ips.contains(&ip) {
                            ips.push(ip);
                        }
                    }
                    ServiceKind::ClusterIp(ips)
                }
            }
        };
        let external = external_addresses(svc, &kind);
        let traffic = spec
            .traffic_distribution
            .as_deref()
            .and_then(TrafficDistribution::parse);
        Ok(Self {
            name,
            namespace,
            kind,
            ports,
            external,
            traffic,
        })
    }
}

/// The external addresses of `svc` (none for ExternalName Services). Addresses that do not
/// parse are left out rather than failing the Service: they are written by controllers, and
/// the cluster answers must not depend on them.
fn external_addresses(svc: &Service, kind: &ServiceKind) -> Option<Box<ExternalAddresses>> {
    if matches!(kind, ServiceKind::ExternalName(_)) {
        return None;
    }
    let mut out = ExternalAddresses::default();
    let spec_ips = svc.spec.as_ref().and_then(|s| s.external_ips.as_ref());
    let ingress = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref());
    let ips = spec_ips
        .into_iter()
        .flatten()
        .map(String::as_str)
        .chain(ingress.into_iter().flatten().filter_map(|i| i.ip.as_deref()));
    for ip in ips.filter_map(|s| s.trim().parse::<IpAddr>().ok()) {
        if !out.ips.contains(&ip) {
            out.ips.push(ip);
        }
    }
    for host in ingress
        .into_iter()
        .flatten()
        .filter_map(|i| i.hostname.as_deref())
    {
        if let Some(h) = chase_target(host)
            && !out.hostnames.contains(&h)
        {
            out.hostnames.push(h);
        }
    }
    (!out.ips.is_empty() || !out.hostnames.is_empty()).then(|| Box::new(out))
}

/// Normalises an `externalName` into an absolute lower-case DNS name, or `None` when it is an IP
/// literal or not a valid name (CoreDNS refuses to make a CNAME to those).
fn chase_target(target: &str) -> Option<Arc<str>> {
    let t = target.trim().trim_end_matches('.');
    if t.is_empty() || t.parse::<IpAddr>().is_ok() || t.len() > 253 {
        return None;
    }
    let valid = t.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    valid.then(|| Arc::from(format!("{}.", t.to_ascii_lowercase())))
}

impl SliceInfo {
    /// Projects an EndpointSlice, keeping only ready endpoints with IP addresses, and their
    /// Pods' names only with `pod_names` (only `endpoint_pod_names` reads them: without it, no
    /// string per endpoint).
    pub fn from_k8s(slice: &EndpointSlice, pod_names: bool) -> Result<Self, ObjectError> {
        Self::from_k8s_placed(slice, pod_names, false)
    }

    /// [`Self::from_k8s`], keeping each endpoint's node, zone and hints with `places` (the
    /// `topology` and `zonal` options read them).
    pub fn from_k8s_placed(
        slice: &EndpointSlice,
        pod_names: bool,
        places: bool,
    ) -> Result<Self, ObjectError> {
        const KIND: &str = "EndpointSlice";
        let (name, namespace) = required_name(KIND, &slice.metadata)?;
        let service = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
            .filter(|s| is_dns_label(s))
            .map(|s| lower(s));

        let mut ports = Vec::new();
        for p in slice.ports.iter().flatten() {
            let number = match p.port {
                Some(n) => Some(port_number(KIND, &namespace, &name, n)?),
                None => None,
            };
            let port = PortInfo {
                name: lower(p.name.as_deref().unwrap_or_default()),
                protocol: protocol(KIND, &namespace, &name, p.protocol.as_deref())?,
                port: number,
            };
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        if ports.is_empty() {
            ports.push(PortInfo {
                name: Arc::from(""),
                protocol: PortProtocol::Tcp,
                port: None,
            });
        }

        let mut endpoints = Vec::new();
        // The same few node and zone names repeat across a slice's endpoints: one copy each.
        let mut seen: Vec<Arc<str>> = Vec::new();
        let mut intern = |s: &str| -> Arc<str> {
            if let Some(x) = seen.iter().find(|x| ***x == *s) {
                return x.clone();
            }
            let x: Arc<str> = Arc::from(s);
            seen.push(x.clone());
            x
        };
        for ep in &slice.endpoints {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            if !ready {
                continue;
            }
            let addresses: Addresses = ep.addresses.iter().filter_map(|a| a.parse().ok()).collect();
            if addresses.is_empty() {
                continue;
            }
            let hostname = ep
                .hostname
                .as_deref()
                .filter(|h| is_dns_label(h))
                .map(str::to_ascii_lowercase);
            let pod_name = ep
                .target_ref
                .as_ref()
                .filter(|r| pod_names && r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.as_deref())
                .filter(|n| !n.contains('/'))
                .map(str::to_ascii_lowercase);
            let place = if places {
                EndpointPlace::of(ep, &mut intern)
            } else {
                None
            };
            endpoints.push(
                EndpointInfo::new(addresses, hostname.as_deref(), pod_name.as_deref()).with_place(place),
            );
        }
        Ok(Self {
            name,
            namespace,
            service,
            endpoints,
            ports,
        })
    }
}

impl PodInfo {
    /// Projects a Pod: the primary `status.podIP`, dropped for terminating pods and for pods in
    /// phase Succeeded, Failed or Unknown.
    pub fn from_k8s(pod: &Pod) -> Result<Self, ObjectError> {
        const KIND: &str = "Pod";
        let (name, namespace) = required_name(KIND, &pod.metadata)?;
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        let live =
            pod.metadata.deletion_timestamp.is_none() && !matches!(phase, "Succeeded" | "Failed" | "Unknown");
        let ip = match status.and_then(|s| s.pod_ip.as_deref()) {
            Some(s) if !s.is_empty() => Some(s.parse::<IpAddr>().map_err(|_| {
                ObjectError::new(
                    KIND,
                    &namespace,
                    &name,
                    format!("status.podIP '{s}' is not an IP"),
                )
            })?),
            _ => None,
        };
        Ok(Self {
            name,
            namespace,
            ip: ip.filter(|_| live),
            host_network: pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            labels: None,
        })
    }

    /// [`PodInfo::from_k8s`], keeping the pod's labels (`dnspolicy`).
    pub fn from_k8s_labelled(pod: &Pod) -> Result<Self, ObjectError> {
        let mut info = Self::from_k8s(pod)?;
        info.labels = Some(super::policy::label_set(pod.metadata.labels.iter().flatten()));
        Ok(info)
    }
}

/// Projects a Namespace to its (lower-case) name.
pub fn namespace_name(ns: &Namespace) -> Result<Arc<str>, ObjectError> {
    let name = ns.metadata.name.as_deref().unwrap_or_default();
    if !is_dns_label(name) {
        return Err(ObjectError::new(
            "Namespace",
            "",
            name,
            "metadata.name is not a DNS label",
        ));
    }
    Ok(lower(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_is_inline_and_every_count_reads_as_a_slice() {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let one: Addresses = [ip("10.0.0.1")].into_iter().collect();
        assert!(matches!(one, Addresses::One(_)));
        assert_eq!(&*one, &[ip("10.0.0.1")]);
        let two: Addresses = vec![ip("10.0.0.1"), ip("fd00::1")].into();
        assert_eq!(two.len(), 2);
        assert_eq!(two[1], ip("fd00::1"));
        let none: Addresses = Vec::new().into();
        assert!(none.is_empty());
        assert!(std::mem::size_of::<Addresses>() <= std::mem::size_of::<Vec<IpAddr>>());
    }

    fn svc(yaml: &str) -> Service {
        serde_saphyr::from_str(yaml).expect("test yaml")
    }

    #[test]
    fn cluster_ip_service_projects_ips_and_ports() {
        let s = svc(
            "metadata: {name: Svc1, namespace: testns}\nspec:\n  clusterIP: 10.96.10.1\n  clusterIPs: [10.96.10.1, 'fd00::1', 10.96.10.1]\n  ports:\n  - {name: http, port: 80, protocol: TCP}\n  - {port: 53, protocol: UDP}\n",
        );
        let info = ServiceInfo::from_k8s(&s).expect("valid");
        assert_eq!(&*info.name, "svc1");
        let ips: Vec<IpAddr> = vec!["10.96.10.1".parse().unwrap(), "fd00::1".parse().unwrap()];
        assert_eq!(info.kind, ServiceKind::ClusterIp(ips));
        assert_eq!(info.ports.len(), 2);
        assert_eq!(info.ports[1].protocol, PortProtocol::Udp);
        assert_eq!(&*info.ports[1].name, "");
    }

    #[test]
    fn headless_and_external_name() {
        let h = svc("metadata: {name: h, namespace: a}\nspec: {clusterIP: None}\n");
        assert_eq!(ServiceInfo::from_k8s(&h).unwrap().kind, ServiceKind::Headless);
        let e = svc(
            "metadata: {name: e, namespace: a}\nspec: {type: ExternalName, externalName: WWW.Example.com}\n",
        );
        assert_eq!(
            ServiceInfo::from_k8s(&e).unwrap().kind,
            ServiceKind::ExternalName(Some(Arc::from("www.example.com.")))
        );
        let ip =
            svc("metadata: {name: e, namespace: a}\nspec: {type: ExternalName, externalName: 192.0.2.1}\n");
        assert_eq!(
            ServiceInfo::from_k8s(&ip).unwrap().kind,
            ServiceKind::ExternalName(None)
        );
    }

    #[test]
    fn bad_services_are_errors_naming_the_object() {
        let bad_ip = svc("metadata: {name: s, namespace: a}\nspec: {clusterIP: 10.0.0.300}\n");
        let e = ServiceInfo::from_k8s(&bad_ip).unwrap_err().to_string();
        assert!(e.contains("Service a/s") && e.contains("10.0.0.300"), "{e}");
        let bad_port =
            svc("metadata: {name: s, namespace: a}\nspec: {clusterIP: 10.0.0.3, ports: [{port: 70000}]}\n");
        assert!(
            ServiceInfo::from_k8s(&bad_port)
                .unwrap_err()
                .to_string()
                .contains("70000")
        );
        let no_spec = svc("metadata: {name: s, namespace: a}\n");
        assert!(ServiceInfo::from_k8s(&no_spec).is_err());
        let no_name = svc("metadata: {namespace: a}\nspec: {clusterIP: None}\n");
        assert!(ServiceInfo::from_k8s(&no_name).is_err());
    }

    #[test]
    fn slice_keeps_ready_endpoints_only() {
        let s: EndpointSlice = serde_saphyr::from_str(
            "metadata: {name: x, namespace: n, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints:\n- {addresses: [10.0.0.1], conditions: {ready: true}, hostname: web-0}\n- {addresses: [10.0.0.2], conditions: {ready: false}}\n- {addresses: [10.0.0.3], conditions: {}, targetRef: {kind: Pod, name: p3}}\n- {addresses: [not-an-ip]}\n",
        )
        .unwrap();
        let info = SliceInfo::from_k8s(&s, true).unwrap();
        assert_eq!(info.service.as_deref(), Some("web"));
        assert_eq!(info.endpoints.len(), 2);
        assert_eq!(info.endpoints[0].hostname(), Some("web-0"));
        assert_eq!(info.endpoints[0].pod_name(), None);
        assert_eq!(info.endpoints[1].pod_name(), Some("p3"));
        assert_eq!(info.endpoints[1].hostname(), None);
        assert_eq!(std::mem::size_of::<EndpointInfo>(), 48);
        let both = EndpointInfo::new(info.endpoints[0].addresses.clone(), Some("web-0"), Some("p0"));
        assert_eq!((both.hostname(), both.pod_name()), (Some("web-0"), Some("p0")));
        // Without pod names: the hostname stays, the pod-only endpoint keeps no names at all.
        let without = SliceInfo::from_k8s(&s, false).unwrap();
        assert_eq!(
            (without.endpoints[0].hostname(), without.endpoints[0].pod_name()),
            (Some("web-0"), None)
        );
        assert_eq!(
            without.endpoints[1],
            EndpointInfo::new(info.endpoints[1].addresses.clone(), None, None)
        );
        assert_eq!(
            info.ports,
            vec![PortInfo {
                name: Arc::from(""),
                protocol: PortProtocol::Tcp,
                port: None
            }]
        );
    }

    #[test]
    fn pods_that_finished_or_terminate_have_no_ip() {
        let p: Pod = serde_saphyr::from_str(
            "metadata: {name: p, namespace: n}\nstatus: {phase: Running, podIP: 10.1.1.1}\n",
        )
        .unwrap();
        assert!(PodInfo::from_k8s(&p).unwrap().ip.is_some());
        let p: Pod = serde_saphyr::from_str(
            "metadata: {name: p, namespace: n}\nstatus: {phase: Succeeded, podIP: 10.1.1.1}\n",
        )
        .unwrap();
        assert!(PodInfo::from_k8s(&p).unwrap().ip.is_none());
        let p: Pod = serde_saphyr::from_str("metadata: {name: p, namespace: n, deletionTimestamp: '2026-01-01T00:00:00Z'}\nstatus: {phase: Running, podIP: 10.1.1.1}\n").unwrap();
        assert!(PodInfo::from_k8s(&p).unwrap().ip.is_none());
    }
}
