//! Helpers shared by the benchmark binaries (`watch-bench`, `outage-bench`, `autopath-bench`,
//! `churn-bench`): dnsperf's QPS and medians,
//! a tiny blocking DNS client, starting the `cluster-dns` binary under test, `--name N`
//! arguments and a process's `/proc` status fields.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A tiny DNS client: one A query at a time over UDP.
#[derive(Debug)]
pub struct Dns {
    sock: UdpSocket,
    id: u16,
}

impl Dns {
    /// A client of `server`.
    pub fn new(server: SocketAddr) -> std::io::Result<Self> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        sock.connect(server)?;
        sock.set_read_timeout(Some(Duration::from_millis(500)))?;
        Ok(Self { sock, id: 1 })
    }

    /// Asks for `name` A; returns (rcode, answer count), or `None` without a reply.
    pub fn query(&mut self, name: &str) -> Option<(u8, u16)> {
        self.id = self.id.wrapping_add(1);
        let mut q = Vec::with_capacity(64);
        q.extend_from_slice(&self.id.to_be_bytes());
        q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
        for label in name.trim_end_matches('.').split('.') {
            q.push(u8::try_from(label.len()).ok()?);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        self.sock.send(&q).ok()?;
        let mut buf = [0u8; 4096];
        loop {
            let n = self.sock.recv(&mut buf).ok()?;
            if n >= 12 && buf[0..2] == self.id.to_be_bytes() {
                return Some((buf[3] & 0x0f, u16::from_be_bytes([buf[6], buf[7]])));
            }
        }
    }

    /// Asks for `name` every `poll` until its rcode is `want`; when it was seen, or `None`
    /// after `limit`.
    pub fn wait_rcode(&mut self, name: &str, want: u8, poll: Duration, limit: Duration) -> Option<Instant> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.query(name).is_some_and(|(rcode, _)| rcode == want) {
                return Some(Instant::now());
            }
            std::thread::sleep(poll);
        }
        None
    }
}

/// A running `cluster-dns`: the process, its log lines, and its DNS address.
#[derive(Debug)]
pub struct Spawned {
    /// The process.
    pub child: Child,
    /// Its log lines (stdout), as they come.
    pub log: mpsc::Receiver<String>,
    /// The address it serves DNS on (from its `serving DNS` line).
    pub addr: SocketAddr,
}

/// Starts `bin -conf corefile` with `RUST_LOG=info` and waits (up to 30 s) for its address.
pub fn spawn_cluster_dns(bin: &str, corefile: &Path) -> std::io::Result<Spawned> {
    spawn_cluster_dns_with(bin, corefile, &[])
}

/// [`spawn_cluster_dns`] with more environment variables.
pub fn spawn_cluster_dns_with(bin: &str, corefile: &Path, env: &[(&str, &str)]) -> std::io::Result<Spawned> {
    let mut child = Command::new(bin)
        .arg("-conf")
        .arg(corefile)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        // Its log lines are on stdout (as CoreDNS writes them); stderr has only what comes
        // before logging is set up (a Corefile that does not parse), shown as it comes.
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout"))?;
    let (tx, log) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    loop {
        let Ok(line) = log.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            return Err(std::io::Error::other("cluster-dns did not report its address"));
        };
        if line.contains("serving DNS")
            && let Some(addr) = line
                .split("addr=")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|a| a.parse().ok())
        {
            return Ok(Spawned { child, log, addr });
        }
    }
}

/// The number after `name` in `args` (`--pods 150000`), or `default`.
pub fn usize_arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A kB field of `/proc/PID/status` (`VmRSS:`, `VmHWM:`), 0 when the process is gone.
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// dnsperf (pinned to CPU 1, `-c 4 -q 200`) against 127.0.0.1:`port` over `file` for `secs`
/// seconds; its QPS.
pub fn dnsperf(port: u16, file: &Path, secs: usize) -> f64 {
    let out = Command::new("taskset")
        .args(["-c", "1", "dnsperf", "-s", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .arg("-d")
        .arg(file)
        .args(["-l", &secs.to_string(), "-c", "4", "-q", "200"])
        .output()
        .expect("dnsperf runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Queries per second:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no QPS in dnsperf output:\n{text}"))
}

/// CPU time `pid` has used so far (user + system), from `/proc/PID/stat`; zero when it is gone.
pub fn cpu_time(pid: u32) -> Duration {
    // After the command name (in parentheses, and it may hold spaces): state is field 3, utime
    // and stime are fields 14 and 15.
    stat_ticks(&format!("/proc/{pid}/stat"), 11)
}

/// CPU time (user + system) of this process's children that have ended and been waited for,
/// such as a dnsperf run: `cutime` and `cstime`, fields 16 and 17 of `/proc/self/stat`.
pub fn children_cpu_time() -> Duration {
    stat_ticks("/proc/self/stat", 13)
}

/// The sum of two adjacent clock-tick fields of the stat file at `path`, as a duration: the
/// fields `skip` places after the state field (the first one after the command name).
fn stat_ticks(path: &str, skip: usize) -> Duration {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let ticks = *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100)
    });
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let used: u64 = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(skip)
                .take(2)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    Duration::from_millis(used * 1000 / ticks.max(1))
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The end of the DNS name at `at` in the message `m` (its labels, or a compression pointer):
/// for the benchmarks' small readers of DNS messages.
pub fn skip_name(m: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *m.get(at)?;
        if len & 0xC0 == 0xC0 {
            return Some(at + 2);
        }
        if len == 0 {
            return Some(at + 1);
        }
        at += 1 + usize::from(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU time is read from this process's own `/proc` entry and grows while it works; a
    /// process that does not exist has used none.
    #[test]
    fn cpu_time_counts_what_a_process_used() {
        let me = std::process::id();
        let before = cpu_time(me);
        let start = Instant::now();
        let mut x = 0u64;
        // Work until 100 ms of CPU show, or give up after 10 s on a machine too busy for that.
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(100) && start.elapsed() < Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            used = cpu_time(me).saturating_sub(before);
        }
        assert!(used >= Duration::from_millis(100), "{used:?}");
        assert_eq!(cpu_time(u32::MAX), Duration::ZERO);
    }

    /// A child's CPU time is counted once it has been waited for, as dnsperf's runs are.
    #[test]
    fn children_cpu_time_counts_a_waited_child() {
        let before = children_cpu_time();
        let start = Instant::now();
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(50) && start.elapsed() < Duration::from_secs(20) {
            let status = Command::new("sh")
                .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
                .status()
                .unwrap();
            assert!(status.success());
            used = children_cpu_time().saturating_sub(before);
        }
        assert!(used >= Duration::from_millis(50), "{used:?}");
    }
}
