//! The grammar of names inside a cluster zone (`behaviour.md` §2), read right to left from the
//! labels left of the zone. Pure: it decides nothing about types or objects.

/// What a name under a forward cluster zone denotes. Labels are lower-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterName<'a> {
    /// The zone apex itself.
    Apex,
    /// `svc.<zone>`: an empty non-terminal.
    ServiceRoot,
    /// `pod.<zone>`: an empty non-terminal.
    PodRoot,
    /// `dns-version.<zone>`.
    DnsVersion,
    /// `ns.dns.<zone>`.
    NsDns,
    /// `<ns>.svc.<zone>`.
    Namespace(&'a str),
    /// `<ns>.pod.<zone>`.
    PodNamespace(&'a str),
    /// `<svc>.<ns>.svc.<zone>`.
    Service {
        /// Namespace label.
        namespace: &'a str,
        /// Service label.
        service: &'a str,
    },
    /// `<endpoint>.<svc>.<ns>.svc.<zone>` (no `_` stripping).
    Endpoint {
        /// Namespace label.
        namespace: &'a str,
        /// Service label.
        service: &'a str,
        /// Endpoint name label.
        endpoint: &'a str,
    },
    /// `<port>.<proto>.<svc>.<ns>.svc.<zone>`, one leading `_` stripped from each.
    Port {
        /// Namespace label.
        namespace: &'a str,
        /// Service label.
        service: &'a str,
        /// Port name (may be empty after stripping, which matches nothing).
        port: &'a str,
        /// Protocol (may be empty, which matches nothing).
        protocol: &'a str,
    },
    /// `<dashed-ip>.<ns>.pod.<zone>`.
    PodAddress {
        /// Namespace label.
        namespace: &'a str,
        /// The dashed IP label, not yet parsed.
        address: &'a str,
    },
    /// Anything else: does not exist.
    Invalid,
}

fn strip_underscore(label: &str) -> &str {
    label.strip_prefix('_').unwrap_or(label)
}

impl<'a> ClusterName<'a> {
    /// Classifies `labels`, the lower-case labels left of the zone in query order
    /// (`["web-0", "web", "ns", "svc"]`).
    pub fn parse(labels: &[&'a str]) -> Self {
        match labels {
            [] => Self::Apex,
            ["svc"] => Self::ServiceRoot,
            ["pod"] => Self::PodRoot,
            ["dns-version"] => Self::DnsVersion,
            ["ns", "dns"] => Self::NsDns,
            [ns, "svc"] => Self::Namespace(ns),
            [ns, "pod"] => Self::PodNamespace(ns),
            [service, namespace, "svc"] => Self::Service { namespace, service },
            [address, namespace, "pod"] => Self::PodAddress { namespace, address },
            [endpoint, service, namespace, "svc"] => Self::Endpoint {
                namespace,
                service,
                endpoint,
            },
            [port, protocol, service, namespace, "svc"] => Self::Port {
                namespace,
                service,
                port: strip_underscore(port),
                protocol: strip_underscore(protocol),
            },
            _ => Self::Invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ClusterName as N;

    #[test]
    fn every_name_form() {
        assert_eq!(N::parse(&[]), N::Apex);
        assert_eq!(N::parse(&["svc"]), N::ServiceRoot);
        assert_eq!(N::parse(&["pod"]), N::PodRoot);
        assert_eq!(N::parse(&["dns-version"]), N::DnsVersion);
        assert_eq!(N::parse(&["ns", "dns"]), N::NsDns);
        assert_eq!(N::parse(&["x", "dns"]), N::Invalid);
        assert_eq!(N::parse(&["foo"]), N::Invalid);
        assert_eq!(N::parse(&["testns", "svc"]), N::Namespace("testns"));
        assert_eq!(N::parse(&["testns", "pod"]), N::PodNamespace("testns"));
        assert_eq!(
            N::parse(&["web", "testns", "svc"]),
            N::Service {
                namespace: "testns",
                service: "web"
            }
        );
        assert_eq!(
            N::parse(&["10-0-0-1", "testns", "pod"]),
            N::PodAddress {
                namespace: "testns",
                address: "10-0-0-1"
            }
        );
        assert_eq!(
            N::parse(&["_http", "web", "testns", "svc"]),
            N::Endpoint {
                namespace: "testns",
                service: "web",
                endpoint: "_http"
            }
        );
        assert_eq!(
            N::parse(&["_http", "_tcp", "web", "testns", "svc"]),
            N::Port {
                namespace: "testns",
                service: "web",
                port: "http",
                protocol: "tcp"
            }
        );
        assert_eq!(
            N::parse(&["http", "tcp", "web", "testns", "svc"]),
            N::Port {
                namespace: "testns",
                service: "web",
                port: "http",
                protocol: "tcp"
            }
        );
        assert_eq!(
            N::parse(&["_", "_tcp", "web", "testns", "svc"]),
            N::Port {
                namespace: "testns",
                service: "web",
                port: "",
                protocol: "tcp"
            }
        );
        assert_eq!(N::parse(&["a", "b", "c", "svc1", "testns", "svc"]), N::Invalid);
        assert_eq!(N::parse(&["x", "10-0-0-1", "testns", "pod"]), N::Invalid);
        assert_eq!(N::parse(&["web", "testns", "foo"]), N::Invalid);
    }
}
