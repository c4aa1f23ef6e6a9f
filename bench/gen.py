#!/usr/bin/env python3
"""Generate one synthetic Kubernetes cluster in every benchmarked server's format.

    bench/gen.py --services N --out DIR --port BASE [--seed S]

Writes into DIR (deterministic for a given N and seed):

  cluster-NN.yaml, Corefile(.2w)  cluster-dns (Namespaces, Services, EndpointSlices, 500 objects
                                  a file), port BASE
                                  (Corefile.2w: BASE+5, for the two-worker scaling check)
  cluster.local.zone,
  10.in-addr.arpa.zone            RFC 1035 zones holding the records cluster-dns answers for the
                                  query mixes below (A, SRV with the same values, PTR, SOA, NS)
  knot.conf, knot-2w.conf         Knot DNS, port BASE+1 (1 UDP worker) and BASE+6 (2)
  nsd.conf                        NSD, port BASE+2
  unbound.conf                    Unbound (local-zone static + local-data), port BASE+3
  dnsmasq.conf                    dnsmasq (host-record / srv-host), port BASE+4
  queries/<mix>.txt               dnsperf input: a-clusterip, a-headless, srv, ptr, nxdomain
  expect.tsv                      one sample question per mix with its expected first answer

The cluster: about 80% ClusterIP services (named port http 80/TCP), 20% headless services with
5 to 20 ready endpoints (EndpointSlice port http 8080/TCP, no hostnames, so endpoint names are the
dashed IPs), over 20 namespaces. ClusterIPs come from 10.96.0.0/12, pod IPs from 10.244.0.0/16.
Stdlib only.
"""

import argparse
import ipaddress
import os
import random

ZONE = "cluster.local"
TTL = 30
SERIAL = 1
NAMESPACES = [
    "default", "kube-system", "payments", "checkout", "catalog", "search", "identity",
    "billing", "orders", "shipping", "inventory", "analytics", "monitoring", "logging",
    "ingress", "messaging", "storage", "ml-serving", "frontend", "backend",
]
WORDS = [
    "api", "web", "worker", "cache", "db", "queue", "gateway", "auth", "proxy", "store",
    "index", "stream", "events", "metrics", "report", "sync", "notify", "render", "upload", "cron",
]
# External names a pod resolves; with ndots:5 each is first tried under the search path.
EXTERNAL = [
    "api.example.com", "www.google.com", "s3.amazonaws.com", "registry-1.docker.io",
    "github.com", "api.github.com", "login.microsoftonline.com", "storage.googleapis.com",
    "sts.amazonaws.com", "pypi.org", "files.pythonhosted.org", "api.stripe.com",
    "hooks.slack.com", "oauth2.googleapis.com", "sqs.us-east-1.amazonaws.com",
    "dynamodb.eu-west-1.amazonaws.com", "cdn.jsdelivr.net", "quay.io", "gcr.io", "ghcr.io",
]
QUERY_LINES = 5000
DOCS_PER_FILE = 500


def dashed(ip):
    return ip.replace(".", "-")


def build(n, seed):
    rng = random.Random(seed)
    svc_net = ipaddress.ip_network("10.96.0.0/12")
    pod_net = ipaddress.ip_network("10.244.0.0/16")
    # Skip 10.96.0.0-10.96.0.255 (kubernetes, kube-dns live there in real clusters).
    cluster_ips = rng.sample(range(256, svc_net.num_addresses - 1), n)
    pod_pool = list(range(256, pod_net.num_addresses - 1))
    rng.shuffle(pod_pool)
    pod_next = 0
    services = []
    for i in range(n):
        ns = NAMESPACES[i % len(NAMESPACES)]
        name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{i:05d}"
        headless = rng.random() < 0.2
        svc = {"name": name, "ns": ns, "headless": headless}
        if headless:
            k = rng.randint(5, 20)
            eps = [str(pod_net.network_address + p) for p in pod_pool[pod_next:pod_next + k]]
            pod_next += k
            svc["endpoints"] = eps
        else:
            svc["ip"] = str(svc_net.network_address + cluster_ips[i])
        services.append(svc)
    return services


def fqdn(svc):
    return f"{svc['name']}.{svc['ns']}.svc.{ZONE}."


def ptr_name(ip):
    return ".".join(reversed(ip.split("."))) + ".in-addr.arpa."


def srv_records(svc):
    """(priority, weight, port, target) as cluster-dns answers _http._tcp.<svc>."""
    if not svc["headless"]:
        return [(0, 100, 80, fqdn(svc))]
    eps = svc["endpoints"]
    w = 100 // len(eps)
    return [(0, w, 8080, f"{dashed(ip)}.{fqdn(svc)}") for ip in eps]


def write_yaml(path, services):
    out = []
    for ns in NAMESPACES:
        out.append(f"---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n")
    for s in services:
        if s["headless"]:
            out.append(
                "---\napiVersion: v1\nkind: Service\n"
                f"metadata: {{name: {s['name']}, namespace: {s['ns']}}}\n"
                "spec:\n  clusterIP: None\n  clusterIPs: [None]\n"
                f"  selector: {{app: {s['name']}}}\n"
                "  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: 8080}\n")
            eps = "".join(
                f"- addresses: [{ip}]\n  conditions: {{ready: true}}\n" for ip in s["endpoints"])
            out.append(
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                f"metadata:\n  name: {s['name']}-abcde\n  namespace: {s['ns']}\n"
                f"  labels:\n    kubernetes.io/service-name: {s['name']}\n"
                "    service.kubernetes.io/headless: \"\"\n"
                f"addressType: IPv4\nendpoints:\n{eps}"
                "ports:\n- {name: http, port: 8080, protocol: TCP}\n")
        else:
            out.append(
                "---\napiVersion: v1\nkind: Service\n"
                f"metadata: {{name: {s['name']}, namespace: {s['ns']}}}\n"
                f"spec:\n  type: ClusterIP\n  clusterIP: {s['ip']}\n  clusterIPs: [{s['ip']}]\n"
                f"  ipFamilies: [IPv4]\n  selector: {{app: {s['name']}}}\n"
                "  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: 8080}\n")
    # cluster-dns parses each manifests file with serde-saphyr's default budget (at most 1,024
    # documents and 250,000 nodes per file), so the objects are split over several files.
    names = []
    for k in range(0, len(out), DOCS_PER_FILE):
        name = f"{path}-{k // DOCS_PER_FILE:02d}.yaml"
        with open(name, "w") as f:
            f.write("".join(out[k:k + DOCS_PER_FILE]))
        names.append(os.path.basename(name))
    return names


def soa(origin):
    return (f"{origin} {TTL} IN SOA ns.dns.{ZONE}. hostmaster.{ZONE}. "
            f"{SERIAL} 7200 1800 86400 {TTL}")


def zone_records(services):
    """(name, type, rdata) for cluster.local. and 10.in-addr.arpa., apex records first."""
    fwd = [(f"{ZONE}.", "SOA", None), (f"{ZONE}.", "NS", f"ns.dns.{ZONE}."),
           (f"ns.dns.{ZONE}.", "A", "10.96.0.10")]
    rev = [("10.in-addr.arpa.", "SOA", None), ("10.in-addr.arpa.", "NS", f"ns.dns.{ZONE}.")]
    for s in services:
        name = fqdn(s)
        if s["headless"]:
            for ip in s["endpoints"]:
                fwd.append((name, "A", ip))
            for ip in s["endpoints"]:
                fwd.append((f"{dashed(ip)}.{name}", "A", ip))
        else:
            fwd.append((name, "A", s["ip"]))
            rev.append((ptr_name(s["ip"]), "PTR", name))
        for pr, w, port, target in srv_records(s):
            fwd.append((f"_http._tcp.{name}", "SRV", f"{pr} {w} {port} {target}"))
    return fwd, rev


def write_zone(path, records):
    with open(path, "w") as f:
        f.write(f"$TTL {TTL}\n")
        for name, rtype, rdata in records:
            if rtype == "SOA":
                f.write(soa(name) + "\n")
            else:
                f.write(f"{name} {TTL} IN {rtype} {rdata}\n")


def corefile(port, manifests):
    return (f".:{port} {{\n    bind 127.0.0.1\n"
            f"    kubernetes {ZONE} in-addr.arpa ip6.arpa {{\n"
            f"        manifests {' '.join(manifests)}\n        pods insecure\n"
            f"        ttl {TTL}\n    }}\n}}\n")


def write_knot(path, d, port, workers, tag):
    with open(path, "w") as f:
        f.write(f"""server:
    listen: 127.0.0.1@{port}
    rundir: {d}/knot-run{tag}
    udp-workers: {workers}
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: {d}/knot-db{tag}
template:
  - id: default
    storage: {d}
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    semantic-checks: off
zone:
  - domain: {ZONE}.
  - domain: 10.in-addr.arpa.
""")


def write_confs(out, base, fwd, rev, manifests):
    d = os.path.abspath(out)
    with open(os.path.join(out, "Corefile"), "w") as f:
        f.write(corefile(base, manifests))
    # The two-worker instances of the scaling check (cluster-dns: CLUSTER_DNS_UDP_WORKERS=2 TOKIO_WORKER_THREADS=2).
    with open(os.path.join(out, "Corefile.2w"), "w") as f:
        f.write(corefile(base + 5, manifests))
    for conf, port, workers, tag in (("knot.conf", base + 1, 1, ""),
                                     ("knot-2w.conf", base + 6, 2, "-2w")):
        write_knot(os.path.join(out, conf), d, port, workers, tag)
    with open(os.path.join(out, "nsd.conf"), "w") as f:
        f.write(f"""server:
    ip-address: 127.0.0.1@{base + 2}
    server-count: 1
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "{d}"
    database: ""
    pidfile: "{d}/nsd.pid"
    xfrdfile: "{d}/nsd-xfrd.state"
    xfrdir: "{d}"
    zonelistfile: "{d}/nsd-zone.list"
    logfile: "{d}/nsd.log"
    verbosity: 0
    hide-version: yes
    minimal-responses: yes
    refuse-any: yes
    # Debian's NSD has response rate limiting on (200 qps per source and name class): off, as
    # in Knot (module not loaded) and Unbound (ratelimit 0), or it drops most of the load.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: {ZONE}.
    zonefile: "{ZONE}.zone"
zone:
    name: 10.in-addr.arpa.
    zonefile: "10.in-addr.arpa.zone"
""")
    lines = [f"""server:
    interface: 127.0.0.1@{base + 3}
    port: {base + 3}
    num-threads: 1
    do-daemonize: no
    chroot: ""
    username: ""
    directory: "{d}"
    pidfile: "{d}/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 0
    do-ip6: no
    module-config: "iterator"
    access-control: 127.0.0.0/8 allow
    minimal-responses: yes
    rrset-roundrobin: no
    so-reuseport: no
    local-zone: "{ZONE}." static
    local-zone: "10.in-addr.arpa." static
"""]
    for name, rtype, rdata in fwd + rev:
        rr = soa(name) if rtype == "SOA" else f"{name} {TTL} IN {rtype} {rdata}"
        lines.append(f'    local-data: "{rr}"\n')
    lines.append("remote-control:\n    control-enable: no\n")
    with open(os.path.join(out, "unbound.conf"), "w") as f:
        f.write("".join(lines))
    dm = [f"port={base + 4}\nlisten-address=127.0.0.1\nbind-interfaces\nno-resolv\nno-hosts\n"
          f"no-negcache\nlocal=/{ZONE}/\nlocal=/10.in-addr.arpa/\nlocal-ttl={TTL}\n"
          f"pid-file={d}/dnsmasq.pid\n"]
    ptrs = {name: rdata for name, rtype, rdata in rev if rtype == "PTR"}
    for name, rtype, rdata in fwd:
        if rtype == "A":
            dm.append(f"host-record={name.rstrip('.')},{rdata}\n")
        elif rtype == "SRV":
            pr, w, port, target = rdata.split()
            dm.append(f"srv-host={name.rstrip('.')},{target.rstrip('.')},{port},{pr},{w}\n")
    # host-record already makes the PTR of each address; ptr-record pins the ClusterIPs' PTRs
    # to the service name (a pod IP's PTR points at its headless service name either way).
    for name, target in ptrs.items():
        dm.append(f"ptr-record={name.rstrip('.')},{target.rstrip('.')}\n")
    with open(os.path.join(out, "dnsmasq.conf"), "w") as f:
        f.write("".join(dm))


def spread(rng, population, lines=QUERY_LINES):
    """Every item at least once, padded with random repeats to `lines`, shuffled."""
    out = list(population)
    while len(out) < lines:
        out.append(rng.choice(population))
    rng.shuffle(out)
    return out


def write_queries(out, services, seed):
    rng = random.Random(seed + 1)
    qdir = os.path.join(out, "queries")
    os.makedirs(qdir, exist_ok=True)
    cip = [s for s in services if not s["headless"]]
    hdl = [s for s in services if s["headless"]]
    mixes = {
        "a-clusterip": [f"{fqdn(s)} A" for s in spread(rng, cip)],
        "a-headless": [f"{fqdn(s)} A" for s in spread(rng, hdl)],
        "srv": [f"_http._tcp.{fqdn(s)} SRV" for s in spread(rng, services)],
        "ptr": [f"{ptr_name(s['ip'])} PTR" for s in spread(rng, cip)],
    }
    nx = []
    for _ in range(QUERY_LINES):
        ext = rng.choice(EXTERNAL)
        form = rng.randrange(3)
        if form == 0:
            nx.append(f"{ext}.{rng.choice(NAMESPACES)}.svc.{ZONE}. A")
        elif form == 1:
            nx.append(f"{ext}.svc.{ZONE}. A")
        else:
            nx.append(f"{ext}.{ZONE}. A")
    mixes["nxdomain"] = nx
    for mix, qs in mixes.items():
        with open(os.path.join(qdir, f"{mix}.txt"), "w") as f:
            f.write("\n".join(qs) + "\n")
    # One sample per mix with the answer every server must give (checked with dig).
    c, h = cip[0], hdl[0]
    srv_c = srv_records(c)[0]
    with open(os.path.join(out, "expect.tsv"), "w") as f:
        f.write(f"a-clusterip\t{fqdn(c)}\tA\t{c['ip']}\n")
        f.write(f"a-headless\t{fqdn(h)}\tA\t{len(h['endpoints'])} records\n")
        f.write(f"srv\t_http._tcp.{fqdn(c)}\tSRV\t{' '.join(map(str, srv_c))}\n")
        f.write(f"ptr\t{ptr_name(c['ip'])}\tPTR\t{fqdn(c)}\n")
        f.write(f"nxdomain\t{nx[0].split()[0]}\tA\tNXDOMAIN\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--services", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=15300, help="cluster-dns's port; peers +1..+4")
    ap.add_argument("--seed", type=int, default=6)
    a = ap.parse_args()
    if a.services < 10:
        ap.error("--services must be at least 10")
    os.makedirs(a.out, exist_ok=True)
    services = build(a.services, a.seed)
    manifests = write_yaml(os.path.join(a.out, "cluster"), services)
    fwd, rev = zone_records(services)
    write_zone(os.path.join(a.out, f"{ZONE}.zone"), fwd)
    write_zone(os.path.join(a.out, "10.in-addr.arpa.zone"), rev)
    write_confs(a.out, a.port, fwd, rev, manifests)
    write_queries(a.out, services, a.seed)
    nh = sum(s["headless"] for s in services)
    ne = sum(len(s.get("endpoints", ())) for s in services)
    print(f"gen: {a.services} services ({a.services - nh} ClusterIP, {nh} headless, "
          f"{ne} endpoints), {len(fwd) + len(rev)} records -> {a.out}")


if __name__ == "__main__":
    main()
