//! Issue 42's tenant DNS policy (`dnspolicy`) over real sockets, the clients pods at distinct
//! loopback addresses:
//! - a generated leak test: a seeded world of 1,000 namespaces with random `DNSPolicy` objects,
//!   100,000 questions over every path (Service, SRV, endpoint, namespace, PTR, autopath,
//!   `k8s_external`, outside names, shared names a cache holds, AXFR), over UDP (the memo),
//!   TCP and PROXY v2, from pods of every namespace: no answer shows what a policy hides, no
//!   denied outside name reaches the upstream, and every visible name answers right;
//! - the exfiltration count: 100,000 random-label outside names from a denied pod, not one
//!   packet to the upstream;
//! - the audit allowlist, read back from `/dnspolicy/observed` and applied through the API;
//! - a policy change through the API watch takes effect at once, and a malformed policy closes.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, UdpSocket};

use crate::support;

/// splitmix64: a seeded generator, so a failure is reproduced by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }
}

/// An upstream that answers every A question with 192.0.2.1 (others NODATA) and records every
/// name it is asked.
struct Recorder {
    addr: SocketAddr,
    names: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

/// The reply to `q` (parsed), recording its name in `seen`.
fn recorded_reply(q: &Message, seen: &Mutex<Vec<String>>) -> Option<Vec<u8>> {
    let query = q.queries.first()?.clone();
    seen.lock().unwrap().push(query.name().to_lowercase().to_string());
    let mut r = Message::response(q.metadata.id, q.metadata.op_code);
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.recursion_available = true;
    r.queries = q.queries.clone();
    if query.query_type() == RecordType::A {
        r.answers.push(Record::from_rdata(
            query.name().clone(),
            60,
            RData::A(hickory_proto::rr::rdata::A(Ipv4Addr::new(192, 0, 2, 1))),
        ));
    }
    r.to_bytes().ok()
}

impl Recorder {
    async fn start() -> Self {
        let (sock, tcp) = crate::support::upstream::bind_pair().await;
        let addr = sock.local_addr().unwrap();
        let names: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = names.clone();
        let streams = names.clone();
        let task = tokio::spawn(async move {
            // TCP (a client that asked over TCP is forwarded over TCP): one task per connection.
            tokio::spawn(async move {
                while let Ok((mut s, _)) = tcp.accept().await {
                    let seen = streams.clone();
                    tokio::spawn(async move {
                        let mut len = [0u8; 2];
                        while s.read_exact(&mut len).await.is_ok() {
                            let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
                            if s.read_exact(&mut buf).await.is_err() {
                                return;
                            }
                            let Some(reply) = Message::from_bytes(&buf)
                                .ok()
                                .and_then(|q| recorded_reply(&q, &seen))
                            else {
                                return;
                            };
                            let n = u16::try_from(reply.len()).unwrap_or(0).to_be_bytes();
                            if s.write_all(&n).await.is_err() || s.write_all(&reply).await.is_err() {
                                return;
                            }
                        }
                    });
                }
            });
            let mut buf = vec![0u8; 4096];
            loop {
                let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                    continue;
                };
                let Some(reply) = Message::from_bytes(&buf[..n])
                    .ok()
                    .and_then(|q| recorded_reply(&q, &seen))
                else {
                    continue;
                };
                let _ = sock.send_to(&reply, from).await;
            }
        });
        Self { addr, names, task }
    }

    fn names(&self) -> Vec<String> {
        self.names.lock().unwrap().clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How a question is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Udp,
    Tcp,
    /// UDP from 127.0.0.1 with a PROXY v2 header naming the pod's address.
    Proxy,
}

/// Sends `msg` from `client` (bound there, or named by a PROXY header); the reply, parsed.
async fn ask(server: SocketAddr, client: IpAddr, via: Via, msg: &Message) -> Option<Message> {
    let bytes = msg.to_bytes().ok()?;
    for _ in 0..3 {
        let reply = match via {
            Via::Udp | Via::Proxy => {
                let from = if via == Via::Udp {
                    client
                } else {
                    IpAddr::V4(Ipv4Addr::LOCALHOST)
                };
                let sock = UdpSocket::bind(SocketAddr::new(from, 0)).await.ok()?;
                let mut wire = Vec::new();
                if via == Via::Proxy {
                    let IpAddr::V4(c) = client else { return None };
                    wire.extend_from_slice(b"\r\n\r\n\0\r\nQUIT\n\x21\x12");
                    wire.extend_from_slice(&12u16.to_be_bytes());
                    wire.extend_from_slice(&c.octets());
                    wire.extend_from_slice(&[127, 0, 0, 1]);
                    wire.extend_from_slice(&40000u16.to_be_bytes());
                    wire.extend_from_slice(&53u16.to_be_bytes());
                }
                wire.extend_from_slice(&bytes);
                sock.send_to(&wire, server).await.ok()?;
                let mut buf = vec![0u8; 65535];
                match tokio::time::timeout(Duration::from_secs(2), sock.recv_from(&mut buf)).await {
                    Ok(Ok((n, _))) => Some(buf[..n].to_vec()),
                    _ => None,
                }
            }
            Via::Tcp => {
                let sock = TcpSocket::new_v4().ok()?;
                sock.bind(SocketAddr::new(client, 0)).ok()?;
                let mut s = sock.connect(server).await.ok()?;
                let len = u16::try_from(bytes.len()).ok()?;
                s.write_all(&len.to_be_bytes()).await.ok()?;
                s.write_all(&bytes).await.ok()?;
                let mut lenb = [0u8; 2];
                match tokio::time::timeout(Duration::from_secs(3), s.read_exact(&mut lenb)).await {
                    Ok(Ok(_)) => {
                        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(lenb))];
                        s.read_exact(&mut buf).await.ok()?;
                        Some(buf)
                    }
                    _ => None,
                }
            }
        };
        if let Some(r) = reply.and_then(|r| Message::from_bytes(&r).ok()) {
            return Some(r);
        }
    }
    None
}

// ------------------------------------------------------------------ the generated world

/// One generated policy.
#[derive(Debug, Clone)]
struct Policy {
    /// Covers only the pods labelled `app: a` (else every pod of its namespace).
    only_a: bool,
    /// `visibleNamespaces`: listed namespaces and a `group` label selected, or absent.
    visible: Option<(Vec<usize>, Option<usize>)>,
    /// `external.allow`: `None` absent; else the zones allowed under (`allowed.test`, ...).
    allow: Option<Vec<&'static str>>,
    refused: bool,
    audit: bool,
}

/// What a pod sees, as the README says policies combine.
#[derive(Debug, Clone)]
struct View {
    sees: Option<HashSet<usize>>,
    allow: Option<Vec<&'static str>>,
    refused: bool,
}

impl View {
    fn sees(&self, ns: usize) -> bool {
        self.sees.as_ref().is_none_or(|s| s.contains(&ns))
    }
    fn may_ask(&self, name: &str) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|zs| zs.iter().any(|z| name.ends_with(&format!(".{z}."))))
    }
    fn denial(&self) -> ResponseCode {
        if self.refused {
            ResponseCode::Refused
        } else {
            ResponseCode::NXDomain
        }
    }
    fn restricted(&self) -> bool {
        self.sees.is_some()
    }
}

const GROUPS: usize = 10;
const ZONES: [&str; 3] = ["allowed.test", "other.test", "denied.test"];

struct World {
    n: usize,
    policies: Vec<Vec<Policy>>,
}

fn octets(i: usize) -> (usize, usize) {
    (i / 250, i % 250 + 1)
}

impl World {
    fn generate(seed: u64, n: usize) -> Self {
        let mut rng = Rng(seed);
        let mut policies = Vec::new();
        for _ in 0..n {
            let count = [0, 0, 1, 1, 1, 2][rng.below(6)];
            let mut list = Vec::new();
            for _ in 0..count {
                let visible = if rng.percent(20) {
                    None
                } else {
                    let names = (0..rng.below(4)).map(|_| rng.below(n)).collect();
                    let group = rng.percent(20).then(|| rng.below(GROUPS));
                    Some((names, group))
                };
                let allow = match rng.below(10) {
                    0 | 1 => None,
                    2 | 3 => Some(vec![]),
                    4..=6 => Some(vec![ZONES[0]]),
                    _ => Some(vec![ZONES[0], ZONES[1]]),
                };
                list.push(Policy {
                    only_a: rng.percent(30),
                    visible,
                    allow,
                    refused: rng.percent(30),
                    audit: rng.percent(10),
                });
            }
            policies.push(list);
        }
        Self { n, policies }
    }

    fn pod_ip(i: usize, pod: usize) -> IpAddr {
        let (x, y) = octets(i);
        IpAddr::V4(Ipv4Addr::new(127, 1 + pod as u8, x as u8, y as u8))
    }

    fn view(&self, i: usize, pod: usize) -> View {
        let mut sees: Option<Option<HashSet<usize>>> = None;
        let mut allow: Option<Option<Vec<&'static str>>> = None;
        let mut refused = true;
        for p in &self.policies[i] {
            if p.audit || (p.only_a && pod != 0) {
                continue;
            }
            refused &= p.refused;
            let s = p.visible.as_ref().map(|(names, group)| {
                let mut set: HashSet<usize> = names.iter().copied().collect();
                set.insert(i);
                if let Some(g) = group {
                    set.extend((0..self.n).filter(|k| k % GROUPS == *g));
                }
                set
            });
            sees = Some(match (sees, s) {
                (None, s) => s,
                (Some(Some(mut a)), Some(b)) => {
                    a.extend(b);
                    Some(a)
                }
                _ => None,
            });
            allow = Some(match (allow, p.allow.clone()) {
                (None, a) => a,
                (Some(Some(mut a)), Some(b)) => {
                    a.extend(b);
                    Some(a)
                }
                _ => None,
            });
        }
        match sees {
            None => View {
                sees: None,
                allow: None,
                refused: false,
            },
            Some(s) => View {
                sees: s,
                allow: allow.flatten(),
                refused,
            },
        }
    }

    fn manifests(&self) -> String {
        let mut out = String::new();
        for i in 0..self.n {
            let (x, y) = octets(i);
            out.push_str(&format!(
                "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: n{i}, labels: {{group: g{}}}}}\n",
                i % GROUPS
            ));
            out.push_str(&format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc, namespace: n{i}}}\nspec: {{clusterIP: 10.100.{x}.{y}, externalIPs: [10.150.{x}.{y}], ports: [{{name: http, port: 80, protocol: TCP}}]}}\n"
            ));
            out.push_str(&format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: hl, namespace: n{i}}}\nspec: {{clusterIP: None, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n"
            ));
            out.push_str(&format!(
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: hl-1, namespace: n{i}, labels: {{kubernetes.io/service-name: hl}}}}\naddressType: IPv4\nendpoints: [{{addresses: [10.200.{x}.{y}], hostname: h, conditions: {{ready: true}}}}]\nports: [{{name: http, port: 80, protocol: TCP}}]\n"
            ));
            for (pod, app) in ["a", "b"].iter().enumerate() {
                out.push_str(&format!(
                    "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{pod}, namespace: n{i}, labels: {{app: {app}}}}}\nspec: {{containers: [{{name: c, image: x}}]}}\nstatus: {{phase: Running, podIP: {}}}\n",
                    Self::pod_ip(i, pod)
                ));
            }
            for (k, p) in self.policies[i].iter().enumerate() {
                let selector = if p.only_a { "{matchLabels: {app: a}}" } else { "{}" };
                let mut spec = format!("podSelector: {selector}");
                if let Some((names, group)) = &p.visible {
                    let names: Vec<String> = names.iter().map(|j| format!("n{j}")).collect();
                    spec.push_str(&format!(", visibleNamespaces: {{names: [{}]", names.join(", ")));
                    if let Some(g) = group {
                        spec.push_str(&format!(", selector: {{matchLabels: {{group: g{g}}}}}"));
                    }
                    spec.push('}');
                }
                if let Some(zones) = &p.allow {
                    let pats: Vec<String> = zones.iter().map(|z| format!("'*.{z}'")).collect();
                    spec.push_str(&format!(", external: {{allow: [{}]}}", pats.join(", ")));
                }
                spec.push_str(&format!(
                    ", action: {}, mode: {}",
                    if p.refused { "REFUSED" } else { "NXDOMAIN" },
                    if p.audit { "Audit" } else { "Enforce" }
                ));
                out.push_str(&format!(
                    "---\napiVersion: dns.cluster-dns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {{name: p{k}, namespace: n{i}}}\nspec: {{{spec}}}\n"
                ));
            }
        }
        out
    }
}

/// The leak test's block; `cache` is its `cache` line and block (`cache 30` alone: the memo
/// replays its hits; with `prefetch` and `serve_stale`: those refresh in the background).
fn corefile(upstream: SocketAddr, cache: &str) -> String {
    format!(
        ".:0 {{
 bind 127.0.0.1
 proxyproto {{
  allow 127.0.0.1/32
 }}
 kubernetes cluster.local in-addr.arpa {{
  manifests cluster.yaml
  pods verified
  fallthrough in-addr.arpa
 }}
 k8s_external example.com
 autopath @kubernetes
 dnspolicy {{
  unmapped deny
 }}
 {cache}
 transfer cluster.local {{
  to *
 }}
 forward . {upstream}
}}
"
    )
}

/// One question of the leak test.
#[derive(Debug, Clone, Copy)]
enum Asked {
    Service(usize),
    Srv(usize),
    Endpoint(usize),
    Namespace(usize),
    PtrService(usize),
    PtrEndpoint(usize),
    Autopath(usize),
    External(usize),
    /// An outside name under `ZONES[zone]`, tagged with the asking client, or shared by all.
    Outside {
        zone: usize,
        shared: Option<usize>,
    },
    Axfr,
}

fn question(asked: Asked, client: usize, pod: usize, serial: usize) -> (String, RecordType) {
    let rev = |a: u8, j: usize| {
        let (x, y) = octets(j);
        format!("{y}.{x}.{a}.10.in-addr.arpa.")
    };
    match asked {
        Asked::Service(j) => (format!("svc.n{j}.svc.cluster.local."), RecordType::A),
        Asked::Srv(j) => (format!("_http._tcp.svc.n{j}.svc.cluster.local."), RecordType::SRV),
        Asked::Endpoint(j) => (format!("h.hl.n{j}.svc.cluster.local."), RecordType::A),
        Asked::Namespace(j) => (format!("n{j}.svc.cluster.local."), RecordType::A),
        Asked::PtrService(j) => (rev(100, j), RecordType::PTR),
        Asked::PtrEndpoint(j) => (rev(200, j), RecordType::PTR),
        // As the pod's resolver asks it: the name, then its first search domain.
        Asked::Autopath(j) => (format!("svc.n{j}.n{client}.svc.cluster.local."), RecordType::A),
        Asked::External(j) => (format!("svc.n{j}.example.com."), RecordType::A),
        Asked::Outside { zone, shared } => match shared {
            Some(k) => (format!("s{k}.{}.", ZONES[zone]), RecordType::A),
            None => (
                format!("q{serial}.c{client}-{pod}.{}.", ZONES[zone]),
                RecordType::A,
            ),
        },
        Asked::Axfr => ("cluster.local.".into(), RecordType::AXFR),
    }
}

/// The records of a reply, as `owner TYPE rdata` tokens.
fn tokens(reply: &Message) -> Vec<String> {
    reply
        .answers
        .iter()
        .chain(&reply.authorities)
        .chain(&reply.additionals)
        .flat_map(|r| {
            support::show(r)
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What a reply shows of namespace `j`: its addresses or names.
fn shows(reply: &Message, j: usize) -> bool {
    let (x, y) = octets(j);
    let addrs = [
        format!("10.100.{x}.{y}"),
        format!("10.200.{x}.{y}"),
        format!("10.150.{x}.{y}"),
    ];
    let zone = format!(".n{j}.svc.cluster.local.");
    tokens(reply).iter().any(|t| {
        addrs.contains(t)
            || t.ends_with(&zone)
            || t == &zone[1..]
            || t.ends_with(&format!(".n{j}.example.com."))
    })
}

/// Checks one reply; `Err` says what is wrong (a leak, or a wrong answer).
fn check(
    asked: Asked,
    view: &View,
    reply: &Message,
    name: &str,
    reference_nx: &Message,
) -> Result<(), String> {
    let rcode = reply.metadata.response_code;
    let answers: Vec<String> = reply.answers.iter().map(support::show).collect();
    let nonexistent = |r: &Message| {
        r.metadata.response_code == reference_nx.metadata.response_code
            && r.metadata.authoritative == reference_nx.metadata.authoritative
            && r.answers.is_empty()
            && r.authorities.len() == 1
            && r.authorities[0].record_type() == RecordType::SOA
            && r.authorities[0].name == reference_nx.authorities[0].name
    };
    let outside = |allowed: bool| -> Result<(), String> {
        if allowed {
            (rcode == ResponseCode::NoError)
                .then_some(())
                .ok_or("outside name allowed, not answered")?;
        } else if rcode != view.denial() || !reply.answers.is_empty() {
            return Err(format!(
                "LEAK: denied outside name answered {rcode:?} {answers:?}"
            ));
        }
        Ok(())
    };
    let cluster = |j: usize, want: &str| -> Result<(), String> {
        if view.sees(j) {
            answers
                .iter()
                .any(|a| a.ends_with(want))
                .then_some(())
                .ok_or_else(|| format!("visible: want {want}, got {rcode:?} {answers:?}"))
        } else if shows(reply, j) || !nonexistent(reply) {
            Err(format!("LEAK: hidden name answered {rcode:?} {answers:?}"))
        } else {
            Ok(())
        }
    };
    match asked {
        Asked::Service(j) => {
            let (x, y) = octets(j);
            cluster(j, &format!("A 10.100.{x}.{y}"))
        }
        Asked::Srv(j) => cluster(j, &format!("svc.n{j}.svc.cluster.local.")),
        Asked::Endpoint(j) => {
            let (x, y) = octets(j);
            cluster(j, &format!("A 10.200.{x}.{y}"))
        }
        Asked::Namespace(j) => {
            if view.sees(j) {
                (rcode == ResponseCode::NoError && answers.is_empty())
                    .then_some(())
                    .ok_or_else(|| format!("visible namespace: {rcode:?}"))
            } else if !nonexistent(reply) {
                Err(format!("LEAK: hidden namespace answered {rcode:?}"))
            } else {
                Ok(())
            }
        }
        Asked::PtrService(j) | Asked::PtrEndpoint(j) => {
            let target = match asked {
                Asked::PtrService(_) => format!("svc.n{j}.svc.cluster.local."),
                _ => format!("h.hl.n{j}.svc.cluster.local."),
            };
            if view.sees(j) {
                return answers
                    .iter()
                    .any(|a| a.ends_with(&target))
                    .then_some(())
                    .ok_or_else(|| format!("visible PTR: {rcode:?} {answers:?}"));
            }
            if shows(reply, j) || !reply.answers.is_empty() {
                return Err(format!("LEAK: hidden PTR answered {answers:?}"));
            }
            // As an address the cluster does not hold: an outside name.
            if view.may_ask(name) {
                (rcode == ResponseCode::NoError)
                    .then_some(())
                    .ok_or("PTR forwarded".to_owned())
            } else {
                (rcode == view.denial())
                    .then_some(())
                    .ok_or(format!("PTR denied as {rcode:?}"))
            }
        }
        Asked::Autopath(j) => {
            let (x, y) = octets(j);
            if view.sees(j) {
                answers
                    .iter()
                    .any(|a| a.ends_with(&format!("A 10.100.{x}.{y}")))
                    .then_some(())
                    .ok_or_else(|| format!("autopath to a visible Service: {rcode:?} {answers:?}"))
            } else if shows(reply, j) {
                Err(format!("LEAK: autopath reached a hidden Service: {answers:?}"))
            } else {
                Ok(())
            }
        }
        Asked::External(j) => {
            if !view.may_ask(name) {
                return outside(false);
            }
            if view.sees(j) {
                let (x, y) = octets(j);
                answers
                    .iter()
                    .any(|a| a.ends_with(&format!("A 10.150.{x}.{y}")))
                    .then_some(())
                    .ok_or_else(|| format!("k8s_external visible: {rcode:?} {answers:?}"))
            } else if shows(reply, j) || rcode != ResponseCode::NXDomain {
                Err(format!(
                    "LEAK: k8s_external hidden answered {rcode:?} {answers:?}"
                ))
            } else {
                Ok(())
            }
        }
        Asked::Outside { .. } => outside(view.may_ask(name)),
        Asked::Axfr => {
            if view.restricted() {
                (rcode == ResponseCode::Refused && reply.answers.is_empty())
                    .then_some(())
                    .ok_or_else(|| {
                        format!(
                            "LEAK: AXFR to a restricted pod: {rcode:?}, {} records",
                            reply.answers.len()
                        )
                    })
            } else {
                (rcode == ResponseCode::NoError && reply.answers.len() > 2)
                    .then_some(())
                    .ok_or_else(|| format!("AXFR to an open pod: {rcode:?}"))
            }
        }
    }
}

/// The leak test: see the module docs. Seed and sizes in the first lines; half the questions
/// go to a block whose cache hits the memo replays, half to one whose cache prefetches and
/// serves stale answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_generated_world_of_policies_leaks_nothing() {
    const SEED: u64 = 42;
    const NAMESPACES: usize = 1000;
    const QUESTIONS: usize = 100_000;
    let world = Arc::new(World::generate(SEED, NAMESPACES));
    for (i, cache) in [
        "cache 30",
        "cache 30 {\n  prefetch 2 10s 10%\n  serve_stale 1h\n }",
    ]
    .into_iter()
    .enumerate()
    {
        run_world(&world, SEED + i as u64, QUESTIONS / 2, cache).await;
    }
}

async fn run_world(world: &Arc<World>, seed: u64, questions: usize, cache: &str) {
    const NAMESPACES: usize = 1000;
    let dir = support::temp_dir("dnspolicy-leaks");
    std::fs::write(dir.join("cluster.yaml"), world.manifests()).unwrap();
    let upstream = Recorder::start().await;
    let running = support::start(&corefile(upstream.addr, cache), &dir).await;
    let server = running.dns_addrs()[0];

    // What a name that does not exist is answered (from an open pod's view, by name).
    let reference_nx = ask(
        server,
        World::pod_ip(0, 0),
        Via::Udp,
        &support::query("svc.nosuch.svc.cluster.local.", RecordType::A),
    )
    .await
    .expect("a reply");
    assert_eq!(reference_nx.metadata.response_code, ResponseCode::NXDomain);

    let mut rng = Rng(seed ^ 0xD15EA5E);
    let mut plan = Vec::with_capacity(questions);
    for serial in 0..questions {
        let client = rng.below(NAMESPACES);
        let pod = rng.below(2);
        // Mostly namespaces near the client's own and those it may see, so both answers are common.
        let j = if rng.percent(30) {
            client
        } else {
            rng.below(NAMESPACES)
        };
        let asked = match rng.below(100) {
            0..=17 => Asked::Service(j),
            18..=27 => Asked::Srv(j),
            28..=37 => Asked::Endpoint(j),
            38..=42 => Asked::Namespace(j),
            43..=50 => Asked::PtrService(j),
            51..=56 => Asked::PtrEndpoint(j),
            57..=68 => Asked::Autopath(j),
            69..=73 => Asked::External(j),
            74..=86 => Asked::Outside {
                zone: rng.below(3),
                shared: Some(rng.below(50)),
            },
            87..=99 => Asked::Outside {
                zone: rng.below(3),
                shared: None,
            },
            _ => unreachable!(),
        };
        let asked = if rng.below(1000) == 0 { Asked::Axfr } else { asked };
        let via = match (asked, rng.below(100)) {
            (Asked::Axfr, _) => Via::Tcp,
            (_, 0..=11) => Via::Tcp,
            (_, 12..=24) => Via::Proxy,
            _ => Via::Udp,
        };
        plan.push((serial, client, pod, asked, via));
    }
    let started = Instant::now();
    let reference_nx = Arc::new(reference_nx);
    let results: Vec<Result<(), String>> = futures::stream::iter(plan.clone())
        .map(|(serial, client, pod, asked, via)| {
            let world = world.clone();
            let reference_nx = reference_nx.clone();
            async move {
                let (name, qtype) = question(asked, client, pod, serial);
                let msg = support::query(&name, qtype);
                let view = world.view(client, pod);
                let Some(reply) = ask(server, World::pod_ip(client, pod), via, &msg).await else {
                    return Err(format!("no reply to {name} {qtype} via {via:?}"));
                };
                check(asked, &view, &reply, &name, &reference_nx)
                    .map_err(|e| format!("n{client}/p{pod} {name} {qtype} via {via:?}: {e}"))
            }
        })
        .buffer_unordered(48)
        .collect()
        .await;
    let took = started.elapsed();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let leaks: Vec<&&String> = failures.iter().filter(|f| f.contains("LEAK")).collect();

    // No denied outside name reached the upstream: each tagged name names its client.
    let mut exfiltrated = Vec::new();
    for name in upstream.names() {
        let Some(tag) = name.split('.').nth(1).and_then(|t| t.strip_prefix('c')) else {
            continue;
        };
        let Some((client, pod)) = tag.split_once('-') else {
            continue;
        };
        let (Ok(client), Ok(pod)) = (client.parse::<usize>(), pod.parse::<usize>()) else {
            continue;
        };
        if !world.view(client, pod).may_ask(&name) {
            exfiltrated.push(name);
        }
    }
    running.stop().await.unwrap();
    eprintln!(
        "dnspolicy leak test ({cache:?}): {questions} questions in {took:?}, {} upstream queries, {} wrong, {} leaks, {} exfiltrated",
        upstream.names().len(),
        failures.len(),
        leaks.len(),
        exfiltrated.len()
    );
    assert!(
        leaks.is_empty(),
        "{} leaks, first: {:?}",
        leaks.len(),
        &leaks[..leaks.len().min(10)]
    );
    assert!(
        exfiltrated.is_empty(),
        "denied names upstream: {:?}",
        &exfiltrated[..exfiltrated.len().min(10)]
    );
    assert!(
        failures.is_empty(),
        "{} wrong answers, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(10)]
    );
}

/// A Corefile over `cluster.yaml` in `dir` with `forward` to `upstream`, `lines` added.
fn small_corefile(upstream: SocketAddr, kubernetes: &str, lines: &str) -> String {
    format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local {{\n  {kubernetes}\n  pods verified\n }}\n dnspolicy {{\n  unmapped deny\n{lines} }}\n cache 30\n prometheus 127.0.0.1:0\n forward . {upstream}\n}}\n"
    )
}

const POD: &str = "127.1.0.9";

/// The cluster of the smaller tests: namespaces `a` (pod at [`POD`]) and `b` (a Service).
fn small_cluster(policy: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: a}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: b}}\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: b}}\nspec: {{clusterIP: 10.96.0.20, ports: [{{name: http, port: 80, protocol: TCP}}]}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: a1, namespace: a}}\nspec: {{containers: [{{name: c, image: x}}]}}\nstatus: {{phase: Running, podIP: {POD}}}\n{policy}"
    )
}

/// 100,000 random-label outside names from a pod whose policy allows none: not one packet
/// reaches the upstream; then one allowed name does (the upstream was there all along).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_label_exfiltration_sends_nothing_upstream() {
    const NAMES: usize = 100_000;
    let dir = support::temp_dir("dnspolicy-exfil");
    let policy = "---\napiVersion: dns.cluster-dns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: sandbox, namespace: a}\nspec: {podSelector: {}, external: {allow: [pypi.org]}}\n";
    std::fs::write(dir.join("cluster.yaml"), small_cluster(policy)).unwrap();
    let upstream = Recorder::start().await;
    let running = support::start(&small_corefile(upstream.addr, "manifests cluster.yaml", ""), &dir).await;
    let server = running.dns_addrs()[0];
    let client: IpAddr = POD.parse().unwrap();
    let mut rng = Rng(7);
    let names: Vec<String> = (0..NAMES)
        .map(|_| {
            let label: String = (0..20)
                .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.below(36)]))
                .collect();
            let tld = ["com", "net", "org", "io", "pypi.org.evil.com"][rng.below(5)];
            format!("{label}.exfil.{tld}.")
        })
        .collect();
    let started = Instant::now();
    let answered: Vec<Option<ResponseCode>> = futures::stream::iter(names)
        .map(|name| async move {
            let via = if name.len() % 7 == 0 { Via::Tcp } else { Via::Udp };
            ask(server, client, via, &support::query(&name, RecordType::A))
                .await
                .map(|r| r.metadata.response_code)
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let took = started.elapsed();
    let upstream_before = upstream.names().len();
    let nx = answered
        .iter()
        .filter(|r| **r == Some(ResponseCode::NXDomain))
        .count();
    // The allowed name goes out: the count above is not for want of an upstream.
    let allowed = ask(
        server,
        client,
        Via::Udp,
        &support::query("pypi.org.", RecordType::A),
    )
    .await
    .unwrap();
    let upstream_after = upstream.names().len();
    running.stop().await.unwrap();
    eprintln!(
        "dnspolicy exfiltration: {NAMES} names in {took:?}, {nx} NXDOMAIN, {upstream_before} upstream queries"
    );
    assert_eq!(upstream_before, 0, "denied names reached the upstream");
    assert_eq!(nx, NAMES, "every denied name is NXDOMAIN");
    assert_eq!(allowed.metadata.response_code, ResponseCode::NoError);
    assert_eq!(upstream_after, 1, "{:?}", upstream.names());
}

/// GET `path` on `addr`, the body.
async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned()
}

/// The value of the sample `series` (name and labels as exposed) in `text`.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// Polls `f` (up to 10 s) until it holds; how long that took.
async fn until(mut f: impl AsyncFnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    for _ in 0..2000 {
        if f().await {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// Audit through the API watch: answers unchanged, the observed names read back as a merge
/// patch from `/dnspolicy/observed`, applied to the policy with Enforce: the same names still
/// answer, others are denied and never leave; a change takes effect as soon as the watch
/// delivers it; a malformed policy closes and is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_allowlist_read_back_applies_and_changes_take_effect() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&small_cluster("")).unwrap();
    for d in docs.into_iter().filter(|d| !d.is_null()) {
        fake.create(d).unwrap();
    }
    let audit = json!({"apiVersion": "dns.cluster-dns.io/v1alpha1", "kind": "DNSPolicy",
        "metadata": {"name": "trial", "namespace": "a"},
        "spec": {"podSelector": {}, "external": {"allow": []}, "visibleNamespaces": {"names": []}, "mode": "Audit"}});
    fake.create(audit.clone()).unwrap();
    let dir = support::temp_dir("dnspolicy-audit");
    let upstream = Recorder::start().await;
    let corefile = small_corefile(
        upstream.addr,
        &format!("endpoint {}", fake.url()),
        "  observed 127.0.0.1:0\n",
    );
    let running = support::start(&corefile, &dir).await;
    let server = running.dns_addrs()[0];
    let http = |path: &'static str| {
        running
            .http_addrs()
            .iter()
            .find(|(_, paths)| paths.contains(&path))
            .map(|(a, _)| *a)
            .unwrap()
    };
    let (observed_at, metrics_at) = (http("/dnspolicy/observed"), http("/metrics"));
    let client: IpAddr = POD.parse().unwrap();
    let a = async |name: &str| {
        ask(server, client, Via::Udp, &support::query(name, RecordType::A))
            .await
            .map(|r| (r.metadata.response_code, r.answers.len()))
            .unwrap()
    };
    assert!(
        until(async || a("web.b.svc.cluster.local.").await == (ResponseCode::NoError, 1))
            .await
            .is_some(),
        "synced"
    );
    // Audit: everything answers as before.
    for name in ["pypi.org.", "files.pythonhosted.org.", "github.com."] {
        assert_eq!(a(name).await, (ResponseCode::NoError, 1), "{name}");
    }
    let page = http_get(observed_at, "/dnspolicy/observed").await;
    let line: serde_json::Value = serde_json::from_str(page.lines().next().unwrap()).unwrap();
    assert_eq!(line["namespace"], "a");
    assert_eq!(line["name"], "trial");
    assert_eq!(
        line["patch"]["spec"]["external"]["allow"],
        json!(["files.pythonhosted.org", "github.com", "pypi.org"])
    );
    let metrics = http_get(metrics_at, "/metrics").await;
    let audited = metric(
        &metrics,
        "cluster_dns_dnspolicy_decisions_total{decision=\"audited\",namespace=\"a\",policy=\"trial\"}",
    );
    assert!(
        audited.is_some_and(|n| n >= 4.0),
        "three outside names and a hidden namespace, audited: {audited:?}"
    );
    // The client's view is kept, and counted (bounded: 65,536; unit-tested at a small bound).
    let views = metric(&metrics, "cluster_dns_dnspolicy_cached{cache=\"views\"}");
    assert!(views.is_some_and(|n| n >= 1.0), "{views:?}");
    let flushes = metric(
        &metrics,
        "cluster_dns_dnspolicy_cache_flushes_total{cache=\"views\"}",
    );
    assert_eq!(flushes, Some(0.0));
    // The patch, applied, with Enforce: the observed names still answer, others do not leave.
    let mut enforced = audit.clone();
    enforced["spec"]["external"] = line["patch"]["spec"]["external"].clone();
    enforced["spec"]["mode"] = json!("Enforce");
    let before = upstream.names().len();
    fake.update(enforced.clone()).unwrap();
    let took = until(async || a("web.b.svc.cluster.local.").await.0 == ResponseCode::NXDomain).await;
    eprintln!("dnspolicy: Audit -> Enforce took effect after {took:?}");
    assert!(took.is_some(), "the change took effect");
    for name in ["pypi.org.", "files.pythonhosted.org.", "github.com."] {
        assert_eq!(a(name).await, (ResponseCode::NoError, 1), "{name}");
    }
    assert_eq!(a("evil.example.net.").await, (ResponseCode::NXDomain, 0));
    assert!(
        !upstream.names()[before..].iter().any(|n| n.contains("evil")),
        "a denied name went upstream"
    );
    // Malformed (an unknown field): closes, is counted, and never widens.
    enforced["spec"]["external"]["allow"] = json!(["*"]);
    enforced["spec"]["surprise"] = json!(true);
    fake.update(enforced).unwrap();
    assert!(
        until(async || a("pypi.org.").await.0 == ResponseCode::NXDomain)
            .await
            .is_some(),
        "a malformed policy closes"
    );
    let metrics = http_get(metrics_at, "/metrics").await;
    assert!(
        metric(&metrics, "cluster_dns_dnspolicy_malformed_total").is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    assert!(metrics.contains("cluster_dns_dnspolicy_policies{mode=\"Enforce\",state=\"malformed\"} 1"));
    // Deleted: the pod sees everything again.
    fake.delete(fake_apiserver::Resource::DnsPolicies, "a", "trial")
        .unwrap();
    assert!(
        until(async || a("web.b.svc.cluster.local.").await == (ResponseCode::NoError, 1))
            .await
            .is_some()
    );
    running.stop().await.unwrap();
}

/// The latency of a policy change, from the API write to the first answer that follows it,
/// over 20 changes (figures quoted in BENCHMARKS.md; the test asserts only that each lands).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_changes_land_within_moments_of_the_api_event() {
    let fake = fake_apiserver::FakeApiServer::start().await.unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&small_cluster("")).unwrap();
    for d in docs.into_iter().filter(|d| !d.is_null()) {
        fake.create(d).unwrap();
    }
    let dir = support::temp_dir("dnspolicy-latency");
    let upstream = Recorder::start().await;
    let running = support::start(
        &small_corefile(upstream.addr, &format!("endpoint {}", fake.url()), ""),
        &dir,
    )
    .await;
    let server = running.dns_addrs()[0];
    let client: IpAddr = POD.parse().unwrap();
    let rcode = async || {
        ask(
            server,
            client,
            Via::Udp,
            &support::query("web.b.svc.cluster.local.", RecordType::A),
        )
        .await
        .map(|r| r.metadata.response_code)
    };
    assert!(
        until(async || rcode().await == Some(ResponseCode::NoError))
            .await
            .is_some()
    );
    let policy = json!({"apiVersion": "dns.cluster-dns.io/v1alpha1", "kind": "DNSPolicy",
        "metadata": {"name": "flip", "namespace": "a"},
        "spec": {"podSelector": {}, "visibleNamespaces": {"names": []}}});
    let mut took = Vec::new();
    for round in 0..20 {
        let want = if round % 2 == 0 {
            fake.create(policy.clone()).unwrap();
            ResponseCode::NXDomain
        } else {
            fake.delete(fake_apiserver::Resource::DnsPolicies, "a", "flip")
                .unwrap();
            ResponseCode::NoError
        };
        let t = until(async || rcode().await == Some(want)).await;
        took.push(t.expect("the change lands"));
    }
    running.stop().await.unwrap();
    took.sort();
    eprintln!(
        "dnspolicy change latency over 20 changes: median {:?}, max {:?}",
        took[10], took[19]
    );
}

/// The seeded world's policies, as the README's union rule reads them, agree with a few
/// hand-worked cases (the leak test's oracle checked on its own).
#[test]
fn the_oracle_combines_policies_as_the_readme_says() {
    let world = World {
        n: 20,
        policies: vec![
            vec![
                Policy {
                    only_a: false,
                    visible: Some((vec![3], None)),
                    allow: Some(vec![]),
                    refused: true,
                    audit: false,
                },
                Policy {
                    only_a: true,
                    visible: Some((vec![], Some(1))),
                    allow: Some(vec![ZONES[0]]),
                    refused: false,
                    audit: false,
                },
            ],
            vec![Policy {
                only_a: false,
                visible: Some((vec![], None)),
                allow: None,
                refused: false,
                audit: true,
            }],
        ]
        .into_iter()
        .chain(std::iter::repeat_n(Vec::new(), 18))
        .collect(),
    };
    let a = world.view(0, 0);
    assert!(a.sees(0) && a.sees(3) && a.sees(11) && !a.sees(2));
    assert!(a.may_ask("x.allowed.test.") && !a.may_ask("x.other.test."));
    assert_eq!(a.denial(), ResponseCode::NXDomain);
    let b = world.view(0, 1);
    assert!(b.sees(3) && !b.sees(11) && !b.may_ask("x.allowed.test."));
    assert_eq!(b.denial(), ResponseCode::Refused);
    assert!(!world.view(1, 0).restricted(), "audit changes nothing");
}

/// DNS over TLS, HTTPS and QUIC: the client the policy decides for is the pod at the
/// connection's source address, as over UDP. From the pod, a hidden namespace's Service is a
/// name that does not exist and a denied outside name is refused; from 127.0.0.1 (not a pod,
/// `unmapped allow`) both answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_transports_are_decided_for_the_pod_that_connects() {
    let dir = support::temp_dir("dnspolicy-encrypted");
    crate::transport::doq::certificates(&dir);
    let policy = "---\napiVersion: dns.cluster-dns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: isolate, namespace: a}\nspec: {podSelector: {}, visibleNamespaces: {names: []}, external: {allow: []}, action: REFUSED}\n";
    std::fs::write(dir.join("cluster.yaml"), small_cluster(policy)).unwrap();
    let ports = [
        crate::support::upstream::free_port(),
        crate::support::upstream::free_port(),
        crate::support::upstream::free_port(),
    ];
    let block = |scheme: &str, port: u16| {
        format!(
            "{scheme}://.:{port} {{\n bind 127.0.0.1\n tls cert.pem key.pem\n kubernetes cluster.local {{\n  manifests cluster.yaml\n  pods verified\n }}\n dnspolicy {{\n  unmapped allow\n }}\n template IN A example.net {{\n  answer \"{{{{ .Name }}}} 60 IN A 192.0.2.7\"\n }}\n}}\n"
        )
    };
    let corefile = format!(
        "{}{}{}",
        block("tls", ports[0]),
        block("https", ports[1]),
        block("quic", ports[2])
    );
    let running = support::start(&corefile, &dir).await;
    let at = |port: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let (dot, doh, quic) = (at(ports[0]), at(ports[1]), at(ports[2]));
    let ca = format!("+tls-ca={}", dir.join("ca.pem").display());
    let dig = |addr: SocketAddr, from: &str, how: &str, name: &str| {
        let out = support::dig(addr, &["-b", from, &ca, how, "+tls-hostname=dns.test", "A", name]);
        support::dig_status(&out)
    };
    for (addr, how) in [(dot, "+tls"), (doh, "+https")] {
        assert_eq!(
            dig(addr, POD, how, "web.b.svc.cluster.local"),
            "NXDOMAIN",
            "{how}"
        );
        assert_eq!(dig(addr, POD, how, "www.example.net"), "REFUSED", "{how}");
        assert_eq!(
            dig(addr, "127.0.0.1", how, "web.b.svc.cluster.local"),
            "NOERROR",
            "{how}"
        );
        assert_eq!(dig(addr, "127.0.0.1", how, "www.example.net"), "NOERROR", "{how}");
    }
    for (from, hidden, outside) in [
        (POD, ResponseCode::NXDomain, ResponseCode::Refused),
        ("127.0.0.1", ResponseCode::NoError, ResponseCode::NoError),
    ] {
        let endpoint = crate::transport::doq::client_bound(
            &dir,
            b"doq",
            false,
            SocketAddr::new(from.parse().unwrap(), 0),
        );
        let conn = crate::transport::doq::connect(&endpoint, quic).await.unwrap();
        let m = crate::transport::doq::ask(&conn, "web.b.svc.cluster.local.", RecordType::A).await;
        assert_eq!(m.metadata.response_code, hidden, "DoQ from {from}");
        let m = crate::transport::doq::ask(&conn, "www.example.net.", RecordType::A).await;
        assert_eq!(m.metadata.response_code, outside, "DoQ from {from}");
    }
    running.stop().await.unwrap();
}
