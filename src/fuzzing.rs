//! The bodies of the fuzz targets in `fuzz/`, kept in the library so that `cargo test` replays
//! their committed corpora through the same code (`tests/integration/project/fuzz_corpus.rs`). Each
//! takes arbitrary bytes and panics only when an invariant of the server is broken; bad input
//! itself must give an error or the right rcode. Not part of the server.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;

use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::{Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;

use crate::cluster::model::{PodInfo, ServiceInfo, SliceInfo, namespace_name};
use crate::proto::Transport;
use crate::server::DnsHandler;

/// The client every fuzzed query comes from.
fn client() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 5353))
}

/// Checks a reply the server sent to `req` over `transport`: it parses, echoes the ID, is a
/// response, and fits the UDP size it promised.
fn check_reply(req: &[u8], reply: &[u8], transport: Transport) {
    let m = Message::from_bytes(reply).expect("our reply parses");
    assert_eq!(reply.get(..2), req.get(..2), "id echoed");
    assert_eq!(m.metadata.message_type, MessageType::Response);
    if matches!(transport, Transport::Udp) {
        assert!(reply.len() <= 1232, "reply of {} bytes over UDP", reply.len());
    }
}

/// The whole query path on arbitrary bytes, against the conformance fixture's cluster, over
/// UDP and TCP.
pub fn query_handler(data: &[u8]) {
    static H: OnceLock<DnsHandler> = OnceLock::new();
    let h = H.get_or_init(|| crate::testing::fixture_handler().expect("fixture handler"));
    for transport in [Transport::Udp, Transport::Tcp] {
        if let Some(reply) = h.answer_wire(data, client(), transport) {
            check_reply(data, &reply, transport);
        }
    }
}

/// The PROXY protocol header reader (`proxyproto`, v1 and v2) on arbitrary bytes: an error
/// or nothing, never a panic; a header it finds lies within the bytes given.
pub fn proxy_header(data: &[u8]) {
    if let Ok(Some(h)) = crate::server::proxy::parse(data) {
        assert!(
            h.len > 0 && h.len <= data.len(),
            "header of {} bytes in {}",
            h.len,
            data.len()
        );
    }
}

/// The Corefile parser and the configuration checks on arbitrary text: errors, never panics.
pub fn corefile(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let path = Path::new("/nonexistent-fuzz-dir/Corefile");
        if let Ok(cf) = crate::corefile::Corefile::parse_str(text, path) {
            let _ = crate::config::Config::from_corefile(&cf, path, 53);
        }
    }
}

/// Most objects one input applies (bounds the work per input).
const MAX_OBJECTS: usize = 64;

/// Kubernetes objects as the API server sends them (JSON: one object, a list, or watch events
/// `{"type": ADDED|MODIFIED|DELETED, "object": ...}`) converted by the same code the watch
/// uses (`serde_json` into k8s-openapi types, then the cluster model) and applied to a zone;
/// then every name they could make is asked over UDP and TCP. Invariants: no panic and every reply
/// well formed.
pub fn k8s_objects(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let events = match v {
        Value::Array(items) => items,
        Value::Object(mut o) => match o.remove("items") {
            Some(Value::Array(items)) => items,
            Some(other) => {
                o.insert("items".into(), other);
                vec![Value::Object(o)]
            }
            None => vec![Value::Object(o)],
        },
        _ => return,
    };
    let Ok((handler, zone)) = crate::testing::handler_with_zone(crate::testing::KUBEADM_BLOCK, "", false)
    else {
        return;
    };
    let mut names: Vec<(String, RecordType)> = Vec::new();
    for event in events.into_iter().take(MAX_OBJECTS) {
        let (deleted, obj) = match event {
            Value::Object(mut o) if o.contains_key("object") && o.contains_key("type") => {
                let deleted = o.get("type").and_then(Value::as_str) == Some("DELETED");
                (deleted, o.remove("object").unwrap_or(Value::Null))
            }
            other => (false, other),
        };
        match obj.get("kind").and_then(Value::as_str) {
            Some("Namespace") => {
                let Ok(ns) = serde_json::from_value::<Namespace>(obj) else {
                    continue;
                };
                let Ok(name) = namespace_name(&ns) else { continue };
                if deleted {
                    zone.delete_namespace(&name);
                } else {
                    zone.apply_namespace(name);
                }
            }
            Some("Service") => {
                let Ok(svc) = serde_json::from_value::<Service>(obj) else {
                    continue;
                };
                let Ok(info) = ServiceInfo::from_k8s(&svc) else {
                    continue;
                };
                names.push((
                    format!("{}.{}.svc.cluster.local.", info.name, info.namespace),
                    RecordType::A,
                ));
                names.push((
                    format!("_http._tcp.{}.{}.svc.cluster.local.", info.name, info.namespace),
                    RecordType::SRV,
                ));
                if deleted {
                    zone.delete_service(&info.namespace, &info.name);
                } else {
                    zone.apply_service(info);
                }
            }
            Some("EndpointSlice") => {
                let Ok(slice) = serde_json::from_value::<EndpointSlice>(obj) else {
                    continue;
                };
                let Ok(info) = SliceInfo::from_k8s(&slice, true) else {
                    continue;
                };
                for ep in &info.endpoints {
                    for ip in ep.addresses.iter() {
                        let ptr = match ip {
                            std::net::IpAddr::V4(v4) => {
                                let o = v4.octets();
                                format!("{}.{}.{}.{}.in-addr.arpa.", o[3], o[2], o[1], o[0])
                            }
                            std::net::IpAddr::V6(_) => continue,
                        };
                        names.push((ptr, RecordType::PTR));
                    }
                }
                if deleted {
                    zone.delete_slice(&info.namespace, &info.name);
                } else {
                    zone.apply_slice(info);
                }
            }
            Some("Pod") => {
                let Ok(pod) = serde_json::from_value::<Pod>(obj) else {
                    continue;
                };
                let Ok(info) = PodInfo::from_k8s(&pod) else {
                    continue;
                };
                if deleted {
                    zone.delete_pod(&info.namespace, &info.name);
                } else {
                    zone.apply_pod(info);
                }
            }
            _ => {}
        }
    }
    names.truncate(4 * MAX_OBJECTS);
    for (i, (name, qtype)) in names.iter().enumerate() {
        let Ok(qname) = Name::from_ascii(name) else {
            continue;
        };
        let mut msg = Message::query();
        msg.metadata.id = u16::try_from(i).unwrap_or(u16::MAX);
        msg.add_query(hickory_proto::op::Query::query(qname, *qtype));
        let Ok(req) = msg.to_bytes() else { continue };
        for transport in [Transport::Udp, Transport::Tcp] {
            if let Some(reply) = handler.answer_wire(&req, client(), transport) {
                check_reply(&req, &reply, transport);
            }
        }
    }
}

/// `DNSPolicy` objects (JSON: one object or a list, at most 64) read as the watch
/// and the manifests read them ([`PolicyInfo::from_json`](crate::cluster::policy::PolicyInfo::from_json)),
/// applied one by one to a policy store beside a fixed `Enforce` policy (`team-a/fixed`:
/// `team-a` and `shared` visible, outside names `*.pypi.org`) and labelled namespaces; after
/// each, the views of pods of three label sets in every namespace named are computed.
/// Invariants: no panic; a pod always sees its own namespace; and a malformed policy never
/// widens what anyone sees: after it, no pod sees a namespace or may ask an outside name it
/// could not before.
pub fn dns_policy(data: &[u8]) {
    use crate::cluster::policy::{PolicyInfo, PolicyStore, label_set};
    use crate::proto::Visibility as _;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let objects: Vec<Value> = match value {
        Value::Array(items) => items.into_iter().take(MAX_OBJECTS).collect(),
        one => vec![one],
    };
    let labels = |pairs: &[(&str, &str)]| {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        label_set(&m)
    };
    let store = PolicyStore::default();
    store.set_namespace(Arc::from("shared"), labels(&[("tier", "shared")]));
    store.set_namespace(Arc::from("team-b"), labels(&[("team", "b")]));
    store.apply(
        PolicyInfo::from_json(&serde_json::json!({
            "metadata": {"name": "fixed", "namespace": "team-a"},
            "spec": {"visibleNamespaces": {"names": ["team-a", "shared"]}, "external": {"allow": ["*.pypi.org"]}},
        }))
        .expect("the fixed policy"),
    );
    let pods = [
        labels(&[]),
        labels(&[("app", "web")]),
        labels(&[("app", "db"), ("tier", "back")]),
    ];
    let outside: Vec<Name> = ["files.pypi.org.", "github.com.", "example.com."]
        .iter()
        .map(|n| Name::from_ascii(n).expect("a name"))
        .collect();
    let mut namespaces: Vec<Arc<str>> = ["team-a", "team-b", "shared", "kube-system"]
        .map(Arc::from)
        .to_vec();
    // What every pod sees now: (namespace, labels) -> (namespaces seen, outside names allowed).
    let mut round = 0u32;
    let mut seen = |store: &PolicyStore, namespaces: &[Arc<str>]| {
        round += 1;
        let mut all = Vec::new();
        for (i, ns) in namespaces.iter().enumerate() {
            for (j, pod) in pods.iter().enumerate() {
                let key = (round, u32::try_from(i * pods.len() + j).unwrap_or(u32::MAX));
                let view = store.view(key, ns, pod);
                assert!(
                    view.sees_namespace(ns),
                    "a pod of {ns} does not see its own namespace"
                );
                let sees: Vec<bool> = namespaces
                    .iter()
                    .map(|other| view.sees_namespace(other))
                    .collect();
                let asks: Vec<bool> = outside.iter().map(|n| view.may_ask_outside(n)).collect();
                all.push((sees, asks));
            }
        }
        all
    };
    for object in objects {
        let Ok(info) = PolicyInfo::from_json(&object) else {
            continue;
        };
        if !namespaces.contains(&info.namespace) && namespaces.len() < 8 {
            namespaces.push(info.namespace.clone());
        }
        let malformed = info.rule.is_err();
        let before = seen(&store, &namespaces);
        store.apply(info);
        let after = seen(&store, &namespaces);
        if malformed {
            for ((sees_b, asks_b), (sees_a, asks_a)) in before.iter().zip(&after) {
                let wider = |b: &[bool], a: &[bool]| a.iter().zip(b).any(|(a, b)| *a && !*b);
                assert!(
                    !wider(sees_b, sees_a),
                    "a malformed policy widened the namespaces seen"
                );
                assert!(
                    !wider(asks_b, asks_a),
                    "a malformed policy widened the outside names"
                );
            }
        }
    }
}
