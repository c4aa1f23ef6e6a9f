//! `k8s_external` over real sockets with `dig`: the Services' external IPs and load-balancer
//! addresses under an external zone (A, AAAA, a load balancer's hostname as a CNAME, SRV with
//! glue, headless endpoints, the apex SOA and NS, NXDOMAIN and NODATA with the SOA), the
//! cluster zone answered as before, and through the fake API server a load balancer that gets
//! its address after the Service was created.

use std::time::Duration;

use fake_apiserver::FakeApiServer;
use serde_json::json;

use crate::support::{self, dig, dig_records as records, dig_status as status};

const CLUSTER: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: default}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.50
  clusterIPs: [10.96.0.50]
  externalIPs: [198.51.100.7]
  ports: [{name: http, port: 80, protocol: TCP}]
status:
  loadBalancer:
    ingress: [{ip: 192.0.2.10}]
---
apiVersion: v1
kind: Service
metadata: {name: lb-host, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.51
  ports: [{name: https, port: 443, protocol: TCP}]
status:
  loadBalancer:
    ingress: [{hostname: abc.elb.example.net}]
---
apiVersion: v1
kind: Service
metadata: {name: v6, namespace: default}
spec:
  clusterIP: 10.96.0.52
  externalIPs: ["2001:db8::7"]
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: default}
spec:
  clusterIP: 10.96.0.53
  ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  ports: [{name: pg, port: 5432, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: db-1
  namespace: default
  labels: {kubernetes.io/service-name: db}
addressType: IPv4
endpoints:
- addresses: [10.244.0.5]
  hostname: db-0
  conditions: {ready: true}
ports: [{name: pg, port: 5432, protocol: TCP}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_addresses_answer_under_the_external_zone() {
    let dir = support::temp_dir("k8s-external");
    std::fs::write(dir.join("cluster.yaml"), CLUSTER).unwrap();
    let corefile = ".:0 {\n bind 127.0.0.1\n kubernetes cluster.local {\n  manifests cluster.yaml\n }\n k8s_external example.org {\n  headless\n  ttl 10\n }\n}\n";
    let running = support::start(corefile, &dir).await;
    let addr = running.dns_addrs()[0];
    let q = move |args: &[&str]| {
        let mut all = vec!["+noall", "+comments", "+answer", "+authority", "+additional"];
        all.extend_from_slice(args);
        let out = dig(addr, &all);
        (status(&out), records(&out), out)
    };
    let got = tokio::task::spawn_blocking(move || {
        [
            q(&["A", "web.default.example.org"]),
            q(&["AAAA", "web.default.example.org"]),
            q(&["A", "lb-host.default.example.org"]),
            q(&["AAAA", "v6.default.example.org"]),
            q(&["A", "plain.default.example.org"]),
            q(&["SRV", "_http._tcp.web.default.example.org"]),
            q(&["SOA", "example.org"]),
            q(&["NS", "example.org"]),
            q(&["A", "db.default.example.org"]),
            q(&["A", "db-0.db.default.example.org"]),
            q(&["A", "nope.example.org"]),
            q(&["A", "web.default.svc.cluster.local"]),
            q(&["A", "WEB.Default.Example.ORG"]),
        ]
    })
    .await
    .unwrap();
    let soa = "example.org. 10 IN SOA dns.example.org. hostmaster.dns.example.org.";
    let has_soa = |r: &[String]| r.iter().any(|l| l.starts_with(soa));
    let mut web = got[0].1.clone();
    web.sort();
    assert_eq!(
        web,
        [
            "web.default.example.org. 10 IN A 192.0.2.10",
            "web.default.example.org. 10 IN A 198.51.100.7"
        ],
        "{}",
        got[0].2
    );
    assert_eq!(got[1].0, "NOERROR");
    assert!(
        has_soa(&got[1].1) && got[1].1.len() == 1,
        "NODATA with the SOA: {}",
        got[1].2
    );
    assert_eq!(
        got[2].1,
        ["lb-host.default.example.org. 10 IN CNAME abc.elb.example.net."]
    );
    assert_eq!(got[3].1, ["v6.default.example.org. 10 IN AAAA 2001:db8::7"]);
    assert_eq!(
        got[4].0, "NXDOMAIN",
        "a Service without external addresses: {}",
        got[4].2
    );
    assert!(has_soa(&got[4].1));
    let srv = &got[5].1;
    assert!(
        srv.contains(
            &"_http._tcp.web.default.example.org. 10 IN SRV 0 100 80 web.default.example.org.".to_owned()
        ),
        "{}",
        got[5].2
    );
    assert!(
        srv.contains(&"web.default.example.org. 10 IN A 192.0.2.10".to_owned()),
        "glue: {}",
        got[5].2
    );
    assert!(got[6].1[0].starts_with(soa), "{}", got[6].2);
    assert_eq!(got[7].1, ["example.org. 10 IN NS ns1.dns.example.org."]);
    assert_eq!(
        got[8].1,
        ["db.default.example.org. 10 IN A 10.244.0.5"],
        "headless: {}",
        got[8].2
    );
    assert_eq!(got[9].1, ["db-0.db.default.example.org. 10 IN A 10.244.0.5"]);
    assert_eq!(got[10].0, "NXDOMAIN");
    assert_eq!(
        got[11].1,
        ["web.default.svc.cluster.local. 5 IN A 10.96.0.50"],
        "the cluster zone as before"
    );
    // The owner echoes the question's case.
    assert!(
        got[12]
            .1
            .iter()
            .all(|l| l.starts_with("WEB.Default.Example.ORG. 10 IN A")),
        "{}",
        got[12].2
    );
    running.stop().await.unwrap();
}

/// A LoadBalancer Service whose address the controller writes later: SERVFAIL before the zone
/// has synced, NXDOMAIN under the external zone until the watch brings the status, then its
/// address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_address_that_comes_later_is_served() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}))
        .unwrap();
    let svc = |status: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "front", "namespace": "shop"},
               "spec": {"type": "LoadBalancer", "clusterIP": "10.96.1.1", "clusterIPs": ["10.96.1.1"],
                        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
               "status": status})
    };
    fake.create(svc(json!({}))).unwrap();
    // Stalled until the server has answered once: before the zone syncs, SERVFAIL, not NXDOMAIN.
    fake.stall(true);
    let corefile = format!(
        ".:0 {{\n bind 127.0.0.1\n kubernetes cluster.local {{\n  endpoint {}\n }}\n k8s_external ext.test\n}}\n",
        fake.url()
    );
    let running = support::start(&corefile, &support::temp_dir("k8s-external-watch")).await;
    let addr = running.dns_addrs()[0];
    let ask = move || {
        let out = dig(
            addr,
            &["+noall", "+comments", "+answer", "A", "front.shop.ext.test"],
        );
        (status(&out), records(&out))
    };
    // Asks every 20 ms (10 s at most) until the status is `want`; the last answer.
    let until = |want: &'static str| async move {
        let mut last = (String::new(), Vec::new());
        for _ in 0..500 {
            last = tokio::task::spawn_blocking(ask).await.unwrap();
            if last.0 == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        last
    };
    let before = tokio::task::spawn_blocking(ask).await.unwrap();
    assert_eq!(before.0, "SERVFAIL", "before the zone synced: {before:?}");
    fake.stall(false);
    let first = until("NXDOMAIN").await;
    assert_eq!(first.0, "NXDOMAIN", "no address yet: {first:?}");
    fake.update(svc(json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}})))
        .unwrap();
    let later = until("NOERROR").await;
    assert_eq!(later.1, ["front.shop.ext.test. 5 IN A 203.0.113.9"], "{later:?}");
    running.stop().await.unwrap();
}
