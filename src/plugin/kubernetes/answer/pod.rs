//! Pod names: `1-2-3-4.<ns>.pod.<zone>` (`pods insecure` / `pods verified`).

use hickory_proto::rr::{Name, RecordType};

use super::addr::parse_pod_label;
use super::answerer::{ClusterAnswerer, PodRecords, Resolution};

impl ClusterAnswerer {
    pub(super) fn resolve_pod(
        &self,
        owner: &Name,
        namespace: &str,
        address: &str,
        qtype: RecordType,
    ) -> Resolution {
        if self.settings.pods == PodRecords::Disabled || !self.namespace_exposed(namespace) {
            return Resolution::nxdomain();
        }
        let Some(ip) = parse_pod_label(address) else {
            return Resolution::nxdomain();
        };
        if self.settings.pods == PodRecords::Verified && !self.zone.pod_ip_exists(namespace, ip) {
            return Resolution::nxdomain();
        }
        self.addresses(owner, qtype, &[ip])
    }
}
