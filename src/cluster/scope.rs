//! The cluster zone's scope keys: which part of the zone an answer is made from (one
//! Service's names, one address's PTR), so the answer memo keeps an answer through changes to
//! the rest of the zone. The zone counts changes by these keys; the kubernetes plugin's
//! answerer declares them (`chain::Scope::Key`).

/// FNV-1a, for scope keys (stable across the writer and the readers of one process).
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(&[0xff]) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The scope of the answers about one Service (its names, ports and endpoints): `namespace`
/// and `service` lower-case.
pub fn service_scope(namespace: &str, service: &str) -> u64 {
    fnv(&[b"svc", namespace.as_bytes(), service.as_bytes()])
}

/// The scope of the answers about one address (its PTR, the pod name spelling it).
pub fn address_scope(ip: std::net::IpAddr) -> u64 {
    match ip {
        std::net::IpAddr::V4(a) => fnv(&[b"ip", &a.octets()]),
        std::net::IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => fnv(&[b"ip", &v4.octets()]),
            None => fnv(&[b"ip", &a.octets()]),
        },
    }
}
