#!/usr/bin/env python3
"""Helpers of bench/run.sh (stdlib only).

    report.py summary  < dnsperf-output        -> "QPS COMPLETED_PCT RCODES"
    report.py latency  < dnsperf-v-output      -> "ACHIEVED_QPS P50_US P99_US N"
    report.py median   QPS_TSV SIZE SERVER MIX -> the median QPS of those rows
    report.py write    RESULTS_DIR FILE         (re)writes FILE's "## Authoritative serving"
    report.py check    RESULTS_DIR              exit 1 (with reasons) if a server or run failed
"""

import os
import re
import statistics
import sys

HEADING = "## Authoritative serving"
MIXES = ["a-clusterip", "a-headless", "srv", "ptr", "nxdomain"]
MIX_DOC = {
    "a-clusterip": "A, ClusterIP service",
    "a-headless": "A, headless service (5-20 endpoints)",
    "srv": "SRV `_http._tcp.<svc>`",
    "ptr": "PTR of a ClusterIP",
    "nxdomain": "NXDOMAIN, `ndots:5` search-path misses",
}
PEERS = ["knot", "nsd", "unbound", "dnsmasq"]
NAMES = {"cluster-dns": "cluster-dns", "knot": "Knot DNS", "nsd": "NSD", "unbound": "Unbound",
         "dnsmasq": "dnsmasq", "cluster-dns-2w": "cluster-dns, 2 workers",
         "knot-2w": "Knot DNS, 2 workers"}


def summary(text):
    qps = re.search(r"Queries per second:\s+([\d.]+)", text)
    done = re.search(r"Queries completed:\s+\d+ \(([\d.]+)%\)", text)
    codes = re.search(r"Response codes:\s+(.*)", text)
    if not qps:
        return "0 0 none"
    rc = "none"
    if codes:
        rc = ",".join(f"{m[0]}:{m[1]}" for m in re.findall(r"([A-Z]+) \d+ \(([\d.]+)%\)", codes[1]))
    return f"{float(qps[1]):.0f} {done[1] if done else 0} {rc}"


def percentile(sorted_xs, p):
    """Nearest-rank percentile."""
    if not sorted_xs:
        return 0.0
    k = max(0, min(len(sorted_xs) - 1, int(-(-p * len(sorted_xs) // 100)) - 1))
    return sorted_xs[k]


def latency(lines):
    lat = []
    qps = 0.0
    for line in lines:
        if line.startswith("> "):
            try:
                lat.append(float(line.rsplit(None, 1)[1]))
            except (ValueError, IndexError):
                pass
        else:
            m = re.search(r"Queries per second:\s+([\d.]+)", line)
            if m:
                qps = float(m[1])
    lat.sort()
    return (f"{qps:.0f} {percentile(lat, 50) * 1e6:.0f} {percentile(lat, 99) * 1e6:.0f} "
            f"{len(lat)}")


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def qps_rows(res, name="qps.tsv"):
    """{(size, server, mix): [qps, ...]} and {(size, server, mix): [(pct, rcodes), ...]}"""
    q, health = {}, {}
    for row in read_tsv(os.path.join(res, name)):
        size, server, mix, _rep, r = row[:5]
        qps, pct, rc = (r.split() + ["0", "0", "none"])[:3]
        q.setdefault((size, server, mix), []).append(float(qps))
        health.setdefault((size, server, mix), []).append((float(pct), rc))
    return q, health


def med(xs):
    return statistics.median(xs) if xs else 0.0


def fmt_qps(xs):
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:,.0f}"
    return f"{med(xs):,.0f} ({min(xs) / 1000:,.0f}k-{max(xs) / 1000:,.0f}k)"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def problems(res):
    out = []
    for size, server, why in (r[:3] for r in read_tsv(os.path.join(res, "fail.tsv"))):
        out.append(f"{server} ({size} services): {why}")
    for name in ("qps.tsv", "scale.tsv"):
        _, health = qps_rows(res, name)
        for (size, server, mix), hs in sorted(health.items()):
            want = "NXDOMAIN" if mix == "nxdomain" else "NOERROR"
            for pct, rc in hs:
                if pct < 99.0:
                    out.append(f"{server} {mix} ({size}): only {pct}% of queries answered")
                elif rc != f"{want}:100.00":
                    out.append(f"{server} {mix} ({size}): response codes {rc}, want all {want}")
    return sorted(set(out))


def section(res):
    meta = dict((r + [""])[:2] for r in read_tsv(os.path.join(res, "meta.tsv")))
    params = dict(kv.split("=", 1) for kv in meta.get("params", "").split())
    sizes = [r[0] for r in read_tsv(os.path.join(res, "sizes.tsv"))]
    records = {r[0]: r[1] for r in read_tsv(os.path.join(res, "sizes.tsv"))}
    q, _ = qps_rows(res)
    sq, _ = qps_rows(res, "scale.tsv")
    # lat.tsv: size server mix target "achieved p50 p99 n"
    lat = {(r[0], r[1], r[2]): " ".join(r[3:]).split() for r in read_tsv(os.path.join(res, "lat.tsv"))}
    rss = {(r[0], r[1]): int(r[2] or 0) for r in read_tsv(os.path.join(res, "rss.tsv"))}
    # cpu.tsv: size server mix rep µs-per-query (the server's CPU time over the run's queries)
    cpu = {}
    for r in read_tsv(os.path.join(res, "cpu.tsv")):
        cpu.setdefault((r[0], r[1], r[2]), []).append(float(r[4]))
    servers = [s for s in ["cluster-dns"] + PEERS if any(k[1] == s for k in q)]
    mixes = [m for m in MIXES if any(k[2] == m for k in q)]
    versions = [f"{NAMES.get(k[2:], k[2:])}: {v}" for k, v in meta.items() if k.startswith("v:")]
    dur, reps = params.get("duration", "?"), params.get("repeats", "?")
    o = [HEADING, ""]
    o.append(
        "cluster-dns and four authoritative peers serve the same synthetic cluster "
        "(`bench/gen.py`: 80% ClusterIP services, 20% headless with 5-20 endpoints, "
        "20 namespaces; Knot and NSD from RFC 1035 zone files, Unbound from `local-data`, "
        "dnsmasq from `host-record`/`srv-host`, each holding exactly the records cluster-dns "
        "answers for the mixes) on 127.0.0.1, each loaded by dnsperf with the same query "
        "files, duration and concurrency.")
    o.append("")
    o.append(f"- Command: `{meta.get('command', 'bench/run.sh')}`")
    o.append(f"- Date: {meta.get('date', '?')}; load phase {int(meta.get('elapsed', 0)) // 60} min "
             f"{int(meta.get('elapsed', 0)) % 60} s")
    o.append(f"- Machine: {meta.get('nproc', '?')} CPUs ({meta.get('cpu', '?')}), Linux "
             f"{meta.get('kernel', '?')}; shared with other builds while it ran, so expect noise "
             "(the min-max of the repeats is shown)")
    o.append("- Versions: " + "; ".join(versions))
    o.append(
        f"- Method: every server pinned to CPU {params.get('server_cpu', 0)} with one worker "
        "(cluster-dns `CLUSTER_DNS_UDP_WORKERS=1 TOKIO_WORKER_THREADS=1`, Knot `udp-workers: 1`, NSD `server-count: 1`, "
        "Unbound `num-threads: 1`, dnsmasq is single-threaded), dnsperf pinned to CPU "
        f"{params.get('client_cpu', 1)} with `-c {params.get('clients', '?')} "
        f"-q {params.get('outstanding', '?')} -T 1`, {dur} s per run, {reps} repeats taken "
        "round-robin over the servers (all stay up; the idle ones cost nothing); QPS is the "
        "median of the repeats (min-max in parentheses). Latency: one more "
        f"{params.get('lat_duration', '?')} s run at 80% of that server's median peak "
        "(`dnsperf -Q`) with `-v`; p50/p99 are nearest-rank percentiles over every query's "
        "latency as dnsperf measures it (dnsperf 2.10 reports only the mean). Peak RSS: "
        "`VmHWM` of the largest process in the server's tree after all its runs (NSD forks an "
        "xfrd and a server process). `cluster-dns ÷ server` is cluster-dns's QPS over that "
        "server's for the same mix. CPU µs/query: the server's user + system CPU time over "
        "each peak run (`/proc/PID/stat`, its whole process tree) divided by the queries "
        "answered, median of the repeats; it does not depend on whether dnsperf or the server "
        "bound the run, which QPS does (dnsperf's core tops out near 160k queries a second "
        "here). `÷ by CPU` is that server's CPU per query over cluster-dns's: above 1, "
        "cluster-dns spends less per query.")
    o.append("")
    for size in sizes:
        o.append(f"### {int(size):,} services ({int(records.get(size, 0)):,} records)")
        o.append("")
        o.append("| mix | server | QPS (median, min-max) | cluster-dns ÷ server | CPU µs/query | "
                 "÷ by CPU | p50 µs | p99 µs | latency run at QPS | peak RSS MiB |")
        o.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for mix in mixes:
            cd = med(q.get((size, "cluster-dns", mix), []))
            cd_cpu = med(cpu.get((size, "cluster-dns", mix), []))
            for s in servers:
                xs = q.get((size, s, mix), [])
                if not xs:
                    o.append(f"| {mix} | {NAMES[s]} | did not run | | | | | | | |")
                    continue
                la = lat.get((size, s, mix), ["", "", "", ""])
                r = "" if s == "cluster-dns" else ratio(cd, med(xs))
                us = med(cpu.get((size, s, mix), []))
                rc = "" if s == "cluster-dns" else ratio(us, cd_cpu)
                kb = rss.get((size, s), 0)
                o.append(f"| {mix} | {NAMES[s]} | {fmt_qps(xs)} | {r} | {us:.2f} | {rc} | "
                         f"{la[2] if len(la) > 2 else ''} | "
                         f"{la[3] if len(la) > 3 else ''} | {la[1] if len(la) > 1 else ''} | "
                         f"{kb / 1024:.1f} |")
        o.append("")
    o.extend(goals(sizes, q, sq, lat, rss))
    bad = problems(res)
    if bad:
        o.append("Problems in this run:")
        o.append("")
        o.extend(f"- {b}" for b in bad)
        o.append("")
    return "\n".join(o) + "\n"


def verdict(ok):
    return "met" if ok else "**not met**"


def goals(sizes, q, sq, lat, rss):
    if not sizes:
        return []
    big, small = sizes[-1], sizes[0]
    o = [f"### Goal checks (issue 6), {int(big):,}-service zone", "",
         "| goal | measured | |", "| --- | --- | --- |"]
    cd = {m: med(q.get((big, "cluster-dns", m), [])) for m in MIXES}
    a = cd["a-clusterip"]
    for peer in ("knot", "nsd"):
        p = med(q.get((big, peer, "a-clusterip"), []))
        if p:
            o.append(f"| A (ClusterIP) QPS at least {NAMES[peer]}'s, one worker each | "
                     f"{a:,.0f} vs {p:,.0f}: {ratio(a, p)}x | {verdict(a >= p)} |")
        ph = med(q.get((big, peer, "a-headless"), []))
        h = cd["a-headless"]
        if ph:
            o.append(f"| A (headless) QPS at least {NAMES[peer]}'s | {h:,.0f} vs {ph:,.0f}: "
                     f"{ratio(h, ph)}x | {verdict(h >= ph)} |")
    la = lat.get((big, "cluster-dns", "a-clusterip"))
    if la and len(la) > 3:
        p99 = float(la[3] or 0)
        o.append(f"| A p99 under 1 ms at 80% of peak | p99 {p99:,.0f} µs (p50 {la[2]} µs) at "
                 f"{la[1]} QPS | {verdict(0 < p99 < 1000)} |")
    nx = cd["nxdomain"]
    if nx and a:
        o.append(f"| NXDOMAIN search-path misses at the QPS of positive answers (within 10%) | "
                 f"{nx:,.0f} vs A {a:,.0f}: {ratio(nx, a)}x | {verdict(nx >= 0.9 * a)} |")
    if big != small:
        parts, ok = [], True
        for m in MIXES:
            b, s = cd[m], med(q.get((small, "cluster-dns", m), []))
            if b and s:
                parts.append(f"{m} {ratio(b, s)}")
                ok = ok and b >= 0.9 * s
        o.append(f"| {int(big):,} services within 10% of {int(small):,} (cluster-dns QPS, "
                 f"{int(big):,} ÷ {int(small):,}) | {', '.join(parts)} | {verdict(ok)} |")
        rb, rs = rss.get((big, "cluster-dns"), 0), rss.get((small, "cluster-dns"), 0)
        if rb and rs:
            o.append(f"| (memory, for reference) cluster-dns peak RSS | {rs / 1024:.1f} MiB -> "
                     f"{rb / 1024:.1f} MiB | |")
    w2 = med(sq.get((big, "cluster-dns-2w", "a-clusterip"), []))
    if w2 and a:
        k1 = med(q.get((big, "knot", "a-clusterip"), []))
        k2 = med(sq.get((big, "knot-2w", "a-clusterip"), []))
        knot = (f"; Knot under the same setup: {k2:,.0f} vs {k1:,.0f}, {ratio(k2, k1)}x"
                if k1 and k2 else "")
        o.append(f"| two workers at least 1.7x one (A, ClusterIP) | {w2:,.0f} vs {a:,.0f}: "
                 f"{ratio(w2, a)}x{knot} | {verdict(w2 >= 1.7 * a)} |")
        o.append("")
        o.append("Scaling setup: the one-worker figure is the table's (server on CPU 0, dnsperf "
                 "on CPU 1); the two-worker server (`CLUSTER_DNS_UDP_WORKERS=2 TOKIO_WORKER_THREADS=2`, Knot "
                 "`udp-workers: 2`) is pinned to CPUs 0,1 and dnsperf stays on CPU 1, so on a "
                 "2-CPU machine the load generator shares a core with the second worker and "
                 "1.7x is out of reach for any server; Knot's ratio is the reference for what "
                 "this box allows.")
    o.append("")
    return o


def write(res, path):
    new = section(res)
    text = ""
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    if not text.strip():
        text = ("# Benchmarks\n\nEach section is written by its own benchmark; "
                "see the command in it.\n\n")
    lines = text.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.rstrip() == HEADING), None)
    if start is None:
        if not text.endswith("\n\n"):
            text = text.rstrip("\n") + "\n\n"
        text += new
    else:
        end = next((i for i in range(start + 1, len(lines))
                    if lines[i].startswith("## ")), len(lines))
        tail = "".join(lines[end:])
        text = "".join(lines[:start]) + new + ("\n" + tail if tail else "")
    with open(path, "w") as f:
        f.write(text)


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "summary":
        print(summary(sys.stdin.read()))
    elif cmd == "latency":
        print(latency(sys.stdin))
    elif cmd == "median":
        path, size, server, mix = sys.argv[2:6]
        q, _ = qps_rows(os.path.dirname(path), os.path.basename(path))
        print(f"{med(q.get((size, server, mix), [])):.0f}")
    elif cmd == "write":
        write(sys.argv[2], sys.argv[3])
    elif cmd == "check":
        bad = problems(sys.argv[2])
        for b in bad:
            print(f"bench: {b}", file=sys.stderr)
        sys.exit(1 if bad else 0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
