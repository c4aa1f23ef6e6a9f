//! Reference authoritative servers for differential tests: Knot DNS (`knotd`) and NSD started on
//! a free loopback port with a generated configuration in a temporary folder, serving the same
//! zone file as cluster-dns's `file` ([`Peer::start`]), and a reply read from `dig`'s output in a
//! form that compares as sets ([`Seen`]). A peer is stopped (killed) when dropped; one whose
//! binary is missing is `None`, so a test says so and goes on.

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;

/// Which reference server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Knot DNS's `knotd`.
    Knot,
    /// NLnet Labs' `nsd`.
    Nsd,
}

impl Kind {
    /// Both.
    pub const ALL: [Kind; 2] = [Kind::Knot, Kind::Nsd];

    fn binary(self) -> &'static str {
        match self {
            Kind::Knot => "/usr/sbin/knotd",
            Kind::Nsd => "/usr/sbin/nsd",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Knot => "knot",
            Kind::Nsd => "nsd",
        })
    }
}

/// A running reference server; killed on drop.
#[derive(Debug)]
pub struct Peer {
    /// Which one.
    pub kind: Kind,
    /// Where it answers (UDP and TCP).
    pub addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

impl Peer {
    /// `kind` serving zone `origin` (for example `example.org.`) from the master file text
    /// `zone`, once it answers the zone's SOA (within 10 s). Panics when its binary is not
    /// installed (`./test.sh` installs Debian's `knot` and `nsd`), or does not come up (with
    /// its log).
    pub fn start(kind: Kind, origin: &str, zone: &str) -> Peer {
        Self::launch(
            kind,
            origin,
            zone,
            None,
            crate::support::upstream::free_port(),
            None,
        )
    }

    /// `kind` on `port` as the primary of zone `origin` (master file text `zone`) for a
    /// secondary at `secondary`: it allows 127.0.0.1 to transfer the zone, sends NOTIFY to `secondary`
    /// when the zone is loaded or reloaded ([`Peer::reload`]), and logs its transfers. Knot
    /// keeps the differences of each reload (`zonefile-load: difference`), so it answers IXFR
    /// with them; NSD 4.6 answers IXFR with the whole zone.
    pub fn primary_on(kind: Kind, origin: &str, zone: &str, secondary: SocketAddr, port: u16) -> Peer {
        Self::launch(kind, origin, zone, Some(secondary), port, None)
    }

    /// [`Peer::primary_on`] that transfers the zone only to requests signed with the TSIG key
    /// `key` (name, base64 secret; hmac-sha256), signs its responses and its NOTIFY with it.
    pub fn primary_signed_on(
        kind: Kind,
        origin: &str,
        zone: &str,
        (secondary, port): (SocketAddr, u16),
        key: (&str, &str),
    ) -> Peer {
        Self::launch(kind, origin, zone, Some(secondary), port, Some(key))
    }

    /// `kind` on `port` as a secondary of zone `origin`, following it from `primary` and
    /// taking NOTIFY from 127.0.0.1; it logs its transfers (Knot at `info`). It holds no zone
    /// until the first transfer, so this does not wait for it to answer.
    pub fn secondary_on(kind: Kind, origin: &str, primary: SocketAddr, port: u16) -> Peer {
        assert!(
            Path::new(kind.binary()).exists(),
            "{kind} is not installed: ./test.sh installs it (apt-get install knot nsd)"
        );
        let dir = support::temp_dir(&format!("secondary-{kind}"));
        let d = dir.display();
        let (conf, args): (String, Vec<String>) = match kind {
            Kind::Knot => (
                format!(
                    "server:\n    rundir: \"{d}\"\n    listen: 127.0.0.1@{port}\n    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n\
                     database:\n    storage: \"{d}\"\n\
                     log:\n  - target: stderr\n    any: info\n\
                     remote:\n  - id: primary\n    address: {}@{}\n\
                     acl:\n  - id: notify\n    address: 127.0.0.1\n    action: notify\n\
                     template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n\
                     zone:\n  - domain: {origin}\n    master: primary\n    acl: notify\n",
                    primary.ip(),
                    primary.port()
                ),
                vec!["-c".into(), dir.join("peer.conf").display().to_string()],
            ),
            Kind::Nsd => (
                format!(
                    "server:\n    ip-address: 127.0.0.1@{port}\n    port: {port}\n    username: \"\"\n    chroot: \"\"\n    zonesdir: \"{d}\"\n    zonelistfile: \"{d}/zone.list\"\n    database: \"\"\n    pidfile: \"{d}/nsd.pid\"\n    xfrdfile: \"{d}/xfrd.state\"\n    xfrdir: \"{d}\"\n    server-count: 1\n    verbosity: 2\n    logfile: \"{d}/peer.log\"\n\
                     remote-control:\n    control-enable: no\n\
                     zone:\n    name: {origin}\n    zonefile: \"{d}/secondary.zone\"\n    request-xfr: {}@{} NOKEY\n    allow-notify: 127.0.0.1 NOKEY\n",
                    primary.ip(),
                    primary.port()
                ),
                vec![
                    "-d".into(),
                    "-c".into(),
                    dir.join("peer.conf").display().to_string(),
                ],
            ),
        };
        std::fs::write(dir.join("peer.conf"), conf).expect("write config");
        let log = std::fs::File::create(dir.join("stderr.log")).expect("log file");
        let child = Command::new(kind.binary())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the peer");
        Peer {
            kind,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            dir,
        }
    }

    /// What it answers for `name` `qtype` (dig +short, no recursion), once that is `want`
    /// (asked every 100 ms for up to 15 s); panics with its log otherwise.
    pub fn answers(&self, name: &str, qtype: &str, want: &str) -> String {
        let mut last = String::new();
        for _ in 0..150 {
            // (dig fails until the server listens.)
            let (at, port) = (format!("@{}", self.addr.ip()), self.addr.port().to_string());
            let out = support::run_dig(&[
                &at, "-p", &port, "+short", "+norec", "+time=1", "+tries=1", name, qtype,
            ]);
            last = String::from_utf8_lossy(&out.stdout).into_owned();
            if last.trim() == want {
                return last;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "{} answers {name} {qtype} with {last:?}, not {want:?}; its log:\n{}",
            self.kind,
            self.logs()
        );
    }

    /// What it answers for `name` `qtype` (dig +short, no recursion), once that is anything.
    pub fn answers_any(&self, name: &str, qtype: &str) -> String {
        for _ in 0..150 {
            let out = support::dig(self.addr, &["+short", "+norec", name, qtype]);
            if !out.trim().is_empty() {
                return out.trim().to_owned();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "{} never answered {name} {qtype}; its log:\n{}",
            self.kind,
            self.logs()
        );
    }

    /// Writes `zone` as the new master file and has the server read it again.
    pub fn reload(&self, zone: &str) {
        std::fs::write(self.dir.join("db.zone"), zone).expect("write zone");
        let status = match self.kind {
            Kind::Knot => Command::new("/usr/sbin/knotc")
                .arg("-c")
                .arg(self.dir.join("peer.conf"))
                .args(["zone-reload"])
                .stdout(Stdio::null())
                .status(),
            Kind::Nsd => Command::new("kill")
                .args(["-HUP", &self.child.id().to_string()])
                .status(),
        };
        assert!(
            status.is_ok_and(|s| s.success()),
            "{} did not reload:\n{}",
            self.kind,
            self.logs()
        );
    }

    fn launch(
        kind: Kind,
        origin: &str,
        zone: &str,
        secondary: Option<SocketAddr>,
        port: u16,
        key: Option<(&str, &str)>,
    ) -> Peer {
        // Knot's key section and the key its remote and ACL name; NSD's key clause and name.
        let (knot_key, knot_uses, nsd_key, nsd_uses) = match key {
            Some((name, secret)) => (
                format!("key:\n  - id: {name}\n    algorithm: hmac-sha256\n    secret: {secret}\n"),
                format!("    key: {name}\n"),
                format!("key:\n    name: {name}\n    algorithm: hmac-sha256\n    secret: \"{secret}\"\n"),
                name.to_owned(),
            ),
            None => (String::new(), String::new(), String::new(), "NOKEY".to_owned()),
        };
        assert!(
            Path::new(kind.binary()).exists(),
            "{kind} is not installed: ./test.sh installs it (apt-get install knot nsd)"
        );
        let dir = support::temp_dir(&format!("peer-{kind}"));
        let db = dir.join("db.zone");
        std::fs::write(&db, zone).expect("write zone");
        let d = dir.display();
        let (conf, args): (String, Vec<String>) = match kind {
            Kind::Knot => (
                format!(
                    "server:\n    rundir: \"{d}\"\n    listen: 127.0.0.1@{port}\n    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n\
                     {knot_key}database:\n    storage: \"{d}\"\n\
                     log:\n  - target: stderr\n    any: {}\n\
                     template:\n  - id: default\n    storage: \"{d}\"\n    zonefile-sync: -1\n{}\
                     zone:\n  - domain: {origin}\n    file: \"{}\"\n{}",
                    if secondary.is_some() { "info" } else { "warning" },
                    match secondary {
                        Some(to) => format!(
                            "    journal-content: changes\n    zonefile-load: difference\n\
                             remote:\n  - id: secondary\n    address: {}@{}\n{knot_uses}\
                             acl:\n  - id: transfer\n    address: 127.0.0.1\n    action: transfer\n{knot_uses}",
                            to.ip(),
                            to.port()
                        ),
                        None => "    journal-content: none\n".to_owned(),
                    },
                    db.display(),
                    if secondary.is_some() {
                        "    notify: secondary\n    acl: transfer\n"
                    } else {
                        ""
                    },
                ),
                vec!["-c".into(), dir.join("peer.conf").display().to_string()],
            ),
            Kind::Nsd => (
                format!(
                    "server:\n    ip-address: 127.0.0.1@{port}\n    port: {port}\n    username: \"\"\n    chroot: \"\"\n    zonesdir: \"{d}\"\n    zonelistfile: \"{d}/zone.list\"\n    database: \"\"\n    pidfile: \"{d}/nsd.pid\"\n    xfrdfile: \"{d}/xfrd.state\"\n    xfrdir: \"{d}\"\n    server-count: 1\n    verbosity: 1\n    logfile: \"{d}/peer.log\"\n\
                     remote-control:\n    control-enable: no\n\
                     {nsd_key}zone:\n    name: {origin}\n    zonefile: \"{}\"\n{}",
                    db.display(),
                    match secondary {
                        Some(to) => format!(
                            "    provide-xfr: 127.0.0.1 {nsd_uses}\n    notify: {}@{} {nsd_uses}\n",
                            to.ip(),
                            to.port()
                        ),
                        None => String::new(),
                    },
                ),
                vec![
                    "-d".into(),
                    "-c".into(),
                    dir.join("peer.conf").display().to_string(),
                ],
            ),
        };
        std::fs::write(dir.join("peer.conf"), conf).expect("write config");
        let log = std::fs::File::create(dir.join("stderr.log")).expect("log file");
        let child = Command::new(kind.binary())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the peer");
        let peer = Peer {
            kind,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            dir,
        };
        peer.wait_ready(origin);
        peer
    }

    /// Asks for the SOA every 100 ms until it answers NOERROR, for up to 10 s.
    fn wait_ready(&self, origin: &str) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            let (at, port) = (format!("@{}", self.addr.ip()), self.addr.port().to_string());
            let out = support::run_dig(&[&at, "-p", &port, "+time=1", "+tries=1", "+norec", origin, "SOA"]);
            if support::dig_status(&String::from_utf8_lossy(&out.stdout)) == "NOERROR" {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{} did not answer in 10 s:\n{}", self.kind, self.logs());
    }

    /// What it logged.
    pub fn logs(&self) -> String {
        ["stderr.log", "peer.log"]
            .iter()
            .filter_map(|f| std::fs::read_to_string(self.dir.join(f)).ok())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Its reply to `name` `qtype` (no recursion desired).
    pub fn ask(&self, name: &str, qtype: &str) -> Seen {
        ask(self.addr, name, qtype)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A reply as `dig` showed it: rcode, the AA and TC flags, and each section as a set of
/// single-spaced record lines (TTLs included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `NOERROR`, `NXDOMAIN`, ...
    pub rcode: String,
    /// Authoritative answer.
    pub aa: bool,
    /// Truncated.
    pub tc: bool,
    /// The answer section.
    pub answer: BTreeSet<String>,
    /// The authority section.
    pub authority: BTreeSet<String>,
    /// The additional section (the OPT record left out).
    pub additional: BTreeSet<String>,
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} aa={} tc={}",
            self.rcode,
            u8::from(self.aa),
            u8::from(self.tc)
        )?;
        for (title, section) in [
            ("answer", &self.answer),
            ("authority", &self.authority),
            ("additional", &self.additional),
        ] {
            for r in section {
                writeln!(f, "  {title}: {r}")?;
            }
        }
        Ok(())
    }
}

impl Seen {
    /// Reads `dig`'s output.
    pub fn parse(out: &str) -> Seen {
        let flags = out
            .split(";; flags: ")
            .nth(1)
            .and_then(|s| s.split(';').next())
            .unwrap_or("");
        let flag = |f: &str| flags.split_whitespace().any(|x| x == f);
        let mut seen = Seen {
            rcode: support::dig_status(out),
            aa: flag("aa"),
            tc: flag("tc"),
            answer: BTreeSet::new(),
            authority: BTreeSet::new(),
            additional: BTreeSet::new(),
        };
        let mut section: Option<&mut BTreeSet<String>> = None;
        for line in out.lines() {
            if line.starts_with(";; ANSWER SECTION") {
                section = Some(&mut seen.answer);
            } else if line.starts_with(";; AUTHORITY SECTION") {
                section = Some(&mut seen.authority);
            } else if line.starts_with(";; ADDITIONAL SECTION") {
                section = Some(&mut seen.additional);
            } else if line.trim().is_empty() || line.starts_with(';') {
                if line.trim().is_empty() {
                    section = None;
                }
            } else if let Some(s) = section.as_deref_mut() {
                s.insert(support::single_spaced(line));
            }
        }
        seen
    }
}

/// `dig` at `addr` for `name` `qtype`, without recursion desired, read as [`Seen`].
pub fn ask(addr: SocketAddr, name: &str, qtype: &str) -> Seen {
    Seen::parse(&support::dig(addr, &["+norec", name, qtype]))
}

/// `dig` at `addr` for every `(name, qtype)` of `questions` in one run (no recursion desired,
/// and `options` such as `+tcp`), the replies in the same order. Panics when a question got
/// no reply.
pub fn ask_many_with(addr: SocketAddr, options: &[&str], questions: &[(String, String)]) -> Vec<Seen> {
    let mut args: Vec<&str> = vec!["+norec"];
    args.extend_from_slice(options);
    for (name, qtype) in questions {
        args.push(name);
        args.push(qtype);
    }
    let out = support::dig(addr, &args);
    let replies: Vec<Seen> = out.split(";; Got answer:").skip(1).map(Seen::parse).collect();
    assert_eq!(
        replies.len(),
        questions.len(),
        "{addr}: {} questions, {} replies:\n{out}",
        questions.len(),
        replies.len()
    );
    replies
}
