//! The `process_*` metrics as Go's client reports them (the CoreDNS dashboards' CPU, memory and
//! file-descriptor panels read them): the `prometheus` crate's process collector, with
//! `process_cpu_seconds_total` in fractions of a second. The crate's collector keeps it as an
//! integer counter of whole seconds (1 s reported for 1.74 s used), which makes
//! `rate(process_cpu_seconds_total[...])` a staircase; here it is user + system time from
//! `/proc/self/stat` divided by the clock tick rate (`sysconf(_SC_CLK_TCK)`), as a float.
//! Linux only, like the crate's collector.

use prometheus::core::{Collector, Desc};
use prometheus::process_collector::ProcessCollector;
use prometheus::proto::MetricFamily;

const CPU: &str = "process_cpu_seconds_total";

/// The process collector with a fractional CPU counter.
#[derive(Debug)]
pub struct ProcessMetrics {
    inner: ProcessCollector,
}

impl ProcessMetrics {
    /// The metrics of this process.
    pub fn for_self() -> Self {
        Self {
            inner: ProcessCollector::for_self(),
        }
    }
}

/// User plus system CPU time of this process in seconds, from `/proc/self/stat`'s `utime` and
/// `stime` (in clock ticks); `None` when it cannot be read.
pub fn cpu_seconds() -> Option<f64> {
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    let ticks = stat.utime.saturating_add(stat.stime);
    // u64 -> f64 is exact below 2^53 ticks (over 2.8 million years at 100 Hz).
    #[allow(clippy::cast_precision_loss)]
    Some(ticks as f64 / procfs::ticks_per_second().max(1) as f64)
}

impl Collector for ProcessMetrics {
    fn desc(&self) -> Vec<&Desc> {
        self.inner.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut families = self.inner.collect();
        let secs = cpu_seconds();
        for family in &mut families {
            if family.name() != CPU {
                continue;
            }
            if let Some(secs) = secs {
                for m in family.mut_metric() {
                    let mut c = prometheus::proto::Counter::default();
                    c.set_value(secs);
                    m.set_counter(c);
                }
            }
        }
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Registry;

    fn ticks() -> u64 {
        let text = std::fs::read_to_string("/proc/self/stat").unwrap();
        // Fields after the command name (which is in parentheses and may hold spaces).
        let rest = &text[text.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after `(comm) `.
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    }

    fn exported(registry: &Registry) -> f64 {
        let family = registry
            .gather()
            .into_iter()
            .find(|f| f.name() == "process_cpu_seconds_total")
            .unwrap_or_else(|| panic!("no {CPU} gathered"));
        family.get_metric()[0].get_counter().get_value()
    }

    /// Burns CPU until the counter is caught between two whole seconds. The crate's collector
    /// never shows a fraction (this failed with it), the tick count read around the scrape
    /// brackets the value.
    #[test]
    fn cpu_seconds_has_the_fraction_of_the_ticks() {
        let registry = Registry::new();
        registry.register(Box::new(ProcessMetrics::for_self())).unwrap();
        let hz = procfs::ticks_per_second();
        assert!(hz > 0);
        let mut x = 0u64;
        for _ in 0..2000 {
            for i in 0..200_000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            }
            let before = ticks();
            let v = exported(&registry);
            let after = ticks();
            #[allow(clippy::cast_precision_loss)]
            let (lo, hi) = (before as f64 / hz as f64, after as f64 / hz as f64);
            assert!(lo <= v && v <= hi, "{lo} <= {v} <= {hi}");
            if v.fract() != 0.0 {
                return;
            }
        }
        panic!("{CPU} never had a fractional part ({x})");
    }
}
