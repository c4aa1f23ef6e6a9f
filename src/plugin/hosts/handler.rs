//! [`Hosts`]: answers questions from the hosts table, and keeps the table in step with the file
//! (a background task re-reads it when its modification time or size changes).

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::SystemTime;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, PTR};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::config::HostsConfig;
use super::metrics::HostsMetrics;
use super::table::{Table, parse_hosts};
use crate::chain::{Chain, Next, Now, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::Fallthrough;
use crate::proto::Answer;
use crate::proto::{FlagEdit, Question, Reply};

/// What identifies one version of the file: its modification time and size, or `None` when it
/// cannot be read as a file (missing, a directory, no permission).
type Stamp = Option<(Option<SystemTime>, u64)>;

struct Inner {
    config: HostsConfig,
    zones: Vec<Name>,
    fallthrough: Fallthrough,
    table: RwLock<Arc<Table>>,
    stamp: Mutex<Stamp>,
    reload_started: AtomicBool,
    /// Set once by [`Hosts::with_metrics`]; every table stored after is recorded there.
    metrics: OnceLock<HostsMetrics>,
}

/// The `hosts` plugin of one server block. Cheap to clone: the state is shared behind an `Arc`.
#[derive(Clone)]
pub struct Hosts {
    inner: Arc<Inner>,
}

impl fmt::Debug for Hosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hosts")
            .field("path", &self.inner.config.path)
            .field("zones", &self.inner.config.zones)
            .field("entries", &self.entries())
            .finish_non_exhaustive()
    }
}

fn names(list: &[String]) -> Vec<Name> {
    list.iter()
        .filter_map(|z| Name::from_ascii(z).ok())
        .map(|n| n.to_lowercase())
        .collect()
}

fn stamp_of(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    meta.is_file().then(|| (meta.modified().ok(), meta.len()))
}

impl Inner {
    /// Reads the file (if it can be) and builds the table from it and the inline entries.
    fn load(&self, stamp: Stamp) -> Table {
        let path = &self.config.path;
        let file = match stamp {
            Some(_) => match std::fs::read_to_string(path) {
                Ok(text) => parse_hosts(&text, path),
                Err(e) => {
                    tracing::warn!(
                        "hosts: cannot read {}: {e}; serving the inline entries only",
                        path.display()
                    );
                    Vec::new()
                }
            },
            None => {
                tracing::warn!(
                    "hosts: {} does not exist or is not a file; serving the inline entries only",
                    path.display()
                );
                Vec::new()
            }
        };
        Table::build(&self.config.inline, &file, &self.zones, !self.config.no_reverse)
    }

    /// Re-reads the file if its stamp changed since the last read. True if it did.
    fn reload_if_changed(&self) -> bool {
        let now = stamp_of(&self.config.path);
        let mut last = self.stamp.lock().unwrap_or_else(PoisonError::into_inner);
        if *last == now {
            return false;
        }
        let table = self.load(now);
        tracing::info!(
            path = %self.config.path.display(),
            entries = table.entries(),
            "hosts: reloaded"
        );
        self.store(table);
        *last = now;
        true
    }

    /// Serves `table` from now on (and records it in the metrics, when attached).
    fn store(&self, table: Table) {
        if let Some(m) = self.metrics.get() {
            m.record(table.entries(), table.loaded_at());
        }
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
    }

    fn table(&self) -> Arc<Table> {
        Arc::clone(&self.table.read().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Plugin for Hosts {
    fn name(&self) -> &'static str {
        "hosts"
    }

    /// Its answers follow a file it reloads, not who asks: never replayed from the memo, kept
    /// by a cache.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Never
    }

    /// Its answers follow the file, which is re-read: never replayed (the default).
    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        self.answer(q).map_or(Now::Pass, Now::Reply)
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }

    fn start(&self, _chain: &Chain) {
        self.start_reload();
    }
}

impl Hosts {
    /// The plugin for `config`, with the file read now. A missing file is not an error: it is
    /// logged and the inline entries are served until it appears (when reloading is on).
    pub fn new(config: &HostsConfig) -> Self {
        let inner = Inner {
            config: config.clone(),
            zones: names(&config.zones),
            fallthrough: Fallthrough::new(config.fallthrough.as_deref()),
            table: RwLock::new(Arc::new(Table::build(&[], &[], &[], false))),
            stamp: Mutex::new(None),
            reload_started: AtomicBool::new(false),
            metrics: OnceLock::new(),
        };
        let stamp = stamp_of(&config.path);
        let table = inner.load(stamp);
        inner.store(table);
        *inner.stamp.lock().unwrap_or_else(PoisonError::into_inner) = stamp;
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Records the table's size and build time in `metrics` now and after every re-read
    /// (`coredns_hosts_entries`, `coredns_hosts_reload_timestamp_seconds`).
    pub fn with_metrics(self, metrics: HostsMetrics) -> Self {
        let table = self.inner.table();
        metrics.record(table.entries(), table.loaded_at());
        let _ = self.inner.metrics.set(metrics);
        self
    }

    /// Starts the task that checks the file every `reload` period and re-reads it when its
    /// modification time or size changed. Does nothing when `reload` is zero or the task runs
    /// already. The task holds only a weak reference: it ends once every clone of this `Hosts`
    /// is dropped. Must be called inside a tokio runtime.
    pub fn start_reload(&self) {
        let every = self.inner.config.reload;
        if every.is_zero() || self.inner.reload_started.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(crate::plugin::kit::reload_every(
            weak,
            every,
            "hosts",
            |inner: &Inner| {
                inner.reload_if_changed();
            },
        ));
    }

    /// Re-reads the file now if it changed since the last read; true if it did. (The reload
    /// task calls this; so can a caller that wants an immediate check.)
    pub fn reload_now(&self) -> bool {
        self.inner.reload_if_changed()
    }

    /// The number of distinct (name, address) entries served, file and inline together
    /// (CoreDNS's `coredns_hosts_entries`).
    pub fn entries(&self) -> usize {
        self.inner.table().entries()
    }

    fn falls_through(&self, name: &Name) -> bool {
        self.inner.fallthrough.covers(name)
    }

    fn reply(rcode: ResponseCode, answers: Vec<Record>) -> Reply {
        Reply::Authoritative(Answer {
            rcode,
            answers: answers.into(),
            authority: Vec::new(),
            additional: Vec::new(),
            chase_target: None,
            flags: FlagEdit::KEEP,
        })
    }

    /// Answers `q` from the hosts data, or `None` when the question goes to the next plugin:
    ///
    /// * PTR: answered for an address in the data, whatever the zones; otherwise the next
    ///   plugin (fallthrough or not), as CoreDNS.
    /// * A name outside the plugin's zones: the next plugin.
    /// * A name in the data: its A or AAAA records, or NODATA (NOERROR, no records) for the
    ///   other family and other types (`fallthrough_unsupported`: other types go on, in the
    ///   fallthrough zones).
    /// * Another name: the next plugin where `fallthrough` covers it, NXDOMAIN otherwise.
    ///
    /// Answers are authoritative; the authority section stays empty (there is no SOA).
    pub fn answer(&self, q: &Question) -> Option<Reply> {
        let table = self.inner.table();
        let ttl = self.inner.config.ttl;
        if q.qtype == RecordType::PTR {
            let names = table.reverse(&q.name)?;
            let answers = names
                .iter()
                .map(|n| Record::from_rdata(q.name.clone(), ttl, RData::PTR(PTR(n.clone()))))
                .collect();
            return Some(Self::reply(ResponseCode::NoError, answers));
        }
        if !self.inner.zones.iter().any(|z| z.zone_of(&q.name)) {
            return None;
        }
        let Some(addrs) = table.lookup(&q.name) else {
            if self.falls_through(&q.name) {
                return None;
            }
            return Some(Self::reply(ResponseCode::NXDomain, Vec::new()));
        };
        let answers: Vec<Record> = match q.qtype {
            RecordType::A => addrs
                .v4
                .iter()
                .map(|ip| Record::from_rdata(q.name.clone(), ttl, RData::A(A(*ip))))
                .collect(),
            RecordType::AAAA => addrs
                .v6
                .iter()
                .map(|ip| Record::from_rdata(q.name.clone(), ttl, RData::AAAA(AAAA(*ip))))
                .collect(),
            _ => {
                if self.inner.config.fallthrough_unsupported && self.falls_through(&q.name) {
                    return None;
                }
                Vec::new()
            }
        };
        Some(Self::reply(ResponseCode::NoError, answers))
    }
}

#[cfg(test)]
mod tests;

/// The metrics a [`Hosts`] keeps (`metrics.rs`'s families), driven through its file.
#[cfg(test)]
mod metrics_tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use prometheus::Registry;

    use super::{Hosts, HostsConfig, HostsMetrics};
    use crate::telemetry::{Families, render_registry};

    fn value(registry: &Registry, name: &str) -> f64 {
        let text = render_registry(registry);
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn entries_and_reload_time_follow_the_file() {
        let dir = std::env::temp_dir().join(format!("hosts-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hosts");
        std::fs::write(&path, "10.0.0.1 a.example.org\n10.0.0.2 b.example.org\n").unwrap();
        let config = HostsConfig {
            path: path.clone(),
            path_at: None,
            zones: vec![".".to_owned()],
            inline: Vec::new(),
            ttl: 3600,
            no_reverse: false,
            reload: std::time::Duration::ZERO,
            fallthrough: None,
            fallthrough_unsupported: false,
        };
        let registry = Registry::new();
        let m = HostsMetrics::register(&registry).unwrap();
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let hosts = Hosts::new(&config).with_metrics(m);
        assert_eq!(value(&registry, "coredns_hosts_entries"), 2.0);
        let first = value(&registry, "coredns_hosts_reload_timestamp_seconds");
        assert!(first >= start.floor() - 1.0, "{first} < {start}");

        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(
            &path,
            "10.0.0.1 a.example.org\n10.0.0.2 b.example.org\n10.0.0.3 c.example.org d.example.org\n",
        )
        .unwrap();
        assert!(hosts.reload_now());
        assert_eq!(value(&registry, "coredns_hosts_entries"), 4.0);
        let second = value(&registry, "coredns_hosts_reload_timestamp_seconds");
        assert!(second > first, "{second} <= {first}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
