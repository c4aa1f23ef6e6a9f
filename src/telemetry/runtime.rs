//! The runtime's figures `prometheus { runtime_metrics }` exports: what tokio's runtime and the
//! process really have, read at each scrape. Named as CoreDNS's Go runtime metrics where one is
//! the counterpart (`go_goroutines` for tokio's alive tasks, `go_threads` for the OS threads,
//! `go_sched_gomaxprocs_threads` for the worker threads that run tasks at once), and
//! `cluster_dns_runtime_*` for tokio's own (global queue depth, worker busy time, parks).
//! Go's garbage collector and memstats have no counterpart and are not made up.

use std::sync::Mutex;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, IntCounter, IntGauge, Opts, Registry};
use tokio::runtime::Handle;

use super::Families;

/// The runtime collector, registered once per process (the first block with
/// `runtime_metrics`); it stays registered through reloads.
#[derive(Clone, Debug)]
pub struct RuntimeMetrics;

impl Families for RuntimeMetrics {
    fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        registry.register(Box::new(RuntimeCollector::new(Handle::try_current().ok())?))?;
        Ok(Self)
    }
}

/// The figures, set from the runtime at each collection.
#[derive(Debug)]
struct Figures {
    tasks: IntGauge,
    threads: IntGauge,
    workers: IntGauge,
    global_queue: IntGauge,
    busy: Counter,
    parks: IntCounter,
}

/// Reads the runtime of `handle` (or the one collecting, when it was registered outside one).
#[derive(Debug)]
pub struct RuntimeCollector {
    handle: Option<Handle>,
    /// Held while a collection sets and reads the figures, so two scrapes never mix.
    figures: Mutex<Figures>,
    descs: Vec<Desc>,
}

/// The names, one per figure (the README's table).
pub const NAMES: &[&str] = &[
    "go_goroutines",
    "go_threads",
    "go_sched_gomaxprocs_threads",
    "cluster_dns_runtime_global_queue_depth",
    "cluster_dns_runtime_worker_busy_seconds_total",
    "cluster_dns_runtime_worker_parks_total",
];

impl RuntimeCollector {
    /// A collector of `handle`'s runtime (without one, of the runtime that collects, if any).
    pub fn new(handle: Option<Handle>) -> Result<Self, prometheus::Error> {
        let figures = Figures {
            tasks: IntGauge::with_opts(Opts::new(
                NAMES[0],
                "Number of tokio tasks that currently exist (cluster-dns's counterpart of goroutines).",
            ))?,
            threads: IntGauge::with_opts(Opts::new(NAMES[1], "Number of OS threads of the process."))?,
            workers: IntGauge::with_opts(Opts::new(
                NAMES[2],
                "The number of tokio worker threads that run tasks at once (Go: GOMAXPROCS).",
            ))?,
            global_queue: IntGauge::with_opts(Opts::new(
                NAMES[3],
                "Tasks waiting in the tokio runtime's global queue.",
            ))?,
            busy: Counter::with_opts(Opts::new(
                NAMES[4],
                "Time the tokio worker threads spent running tasks, summed over the workers.",
            ))?,
            parks: IntCounter::with_opts(Opts::new(
                NAMES[5],
                "Times a tokio worker thread parked (found no work and went to sleep), summed over the workers.",
            ))?,
        };
        let mut descs = Vec::new();
        for c in figures.collectors() {
            descs.extend(c.desc().into_iter().cloned());
        }
        Ok(Self {
            handle,
            figures: Mutex::new(figures),
            descs,
        })
    }
}

impl Figures {
    fn collectors(&self) -> [&dyn Collector; 6] {
        [
            &self.tasks,
            &self.threads,
            &self.workers,
            &self.global_queue,
            &self.busy,
            &self.parks,
        ]
    }
}

fn gauge(g: &IntGauge, v: usize) {
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
}

impl Collector for RuntimeCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let f = self
            .figures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let threads = procfs::process::Process::myself()
            .and_then(|p| p.stat())
            .map(|s| s.num_threads)
            .unwrap_or(0);
        f.threads.set(threads);
        let mut families = vec![f.threads.collect()];
        let handle = self.handle.clone().or_else(|| Handle::try_current().ok());
        // Outside a runtime there are no task figures to give: the families are left out.
        if let Some(handle) = handle {
            let m = handle.metrics();
            gauge(&f.tasks, m.num_alive_tasks());
            gauge(&f.workers, m.num_workers());
            gauge(&f.global_queue, m.global_queue_depth());
            let workers = 0..m.num_workers();
            let busy: f64 = workers
                .clone()
                .map(|w| m.worker_total_busy_duration(w).as_secs_f64())
                .sum();
            let parks: u64 = workers.map(|w| m.worker_park_count(w)).sum();
            // Counters set to the runtime's totals (which only grow), under the lock.
            f.busy.reset();
            f.busy.inc_by(busy);
            f.parks.reset();
            f.parks.inc_by(parks);
            families.extend([
                f.tasks.collect(),
                f.workers.collect(),
                f.global_queue.collect(),
                f.busy.collect(),
                f.parks.collect(),
            ]);
        }
        families.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(families: &[MetricFamily], name: &str) -> Option<f64> {
        let f = families.iter().find(|f| f.name() == name)?;
        let m = &f.get_metric()[0];
        Some(if f.get_field_type() == prometheus::proto::MetricType::COUNTER {
            m.get_counter().get_value()
        } else {
            m.get_gauge().get_value()
        })
    }

    #[test]
    fn a_multi_thread_runtime_shows_its_workers_and_tasks() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(3)
            .enable_all()
            .build()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        for _ in 0..5 {
            let rx = rx.clone();
            let started = started_tx.clone();
            rt.spawn(async move {
                let _ = started.send(());
                // Alive until the test lets go: a blocking wait in a task, on purpose.
                let _ = tokio::task::block_in_place(|| rx.lock().unwrap().recv());
            });
        }
        // Wait for every task to start (so each is alive, not only queued).
        for _ in 0..5 {
            started_rx.recv().unwrap();
        }
        let registry = Registry::new();
        registry
            .register(Box::new(
                RuntimeCollector::new(Some(rt.handle().clone())).unwrap(),
            ))
            .unwrap();
        let got = registry.gather();
        assert_eq!(value(&got, "go_sched_gomaxprocs_threads"), Some(3.0));
        assert!(value(&got, "go_goroutines").unwrap() >= 5.0, "{got:?}");
        // The 3 workers, the ones block_in_place made, and this test's own thread.
        assert!(value(&got, "go_threads").unwrap() >= 4.0);
        assert!(value(&got, "cluster_dns_runtime_worker_busy_seconds_total").is_some());
        assert!(value(&got, "cluster_dns_runtime_worker_parks_total").is_some());
        assert!(value(&got, "cluster_dns_runtime_global_queue_depth").is_some());
        drop(tx);
        rt.shutdown_background();
    }

    #[test]
    fn outside_a_runtime_only_the_threads() {
        let c = RuntimeCollector::new(None).unwrap();
        let got = c.collect();
        assert!(value(&got, "go_threads").unwrap() >= 1.0);
        assert!(value(&got, "go_goroutines").is_none());
    }
}
