//! Readiness: what `/ready` reads. The runtime registers one [`ReadinessCheck`] per plugin of
//! the running configuration (each plugin says why it is not ready,
//! [`crate::chain::Plugin::not_ready`]) and turns readiness off for good at SIGTERM; the
//! `ready` plugin serves it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// Something that can say whether it is ready.
pub trait ReadinessCheck: Send + Sync + std::fmt::Debug {
    /// What `/ready` lists while it is not ready, one line each (`kubernetes: services: 401
    /// Unauthorized: ...`); empty when it is ready. Asked once per `/ready` request, so the
    /// answer and its reasons cannot disagree.
    fn not_ready(&self) -> Vec<String>;
}

/// The readiness registry shared by the runtime and `/ready`. Cheap to clone.
///
/// Invariant: the checks are replaced whole, under the write lock, by the one task that
/// applies a configuration; readers see the old set or the new one, never a mix.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    checks: Arc<RwLock<Vec<Arc<dyn ReadinessCheck>>>>,
    shutting_down: Arc<AtomicBool>,
}

impl Readiness {
    /// Replaces every check (a new configuration brings its own plugins).
    pub fn replace(&self, checks: Vec<Arc<dyn ReadinessCheck>>) {
        if let Ok(mut c) = self.checks.write() {
            *c = checks;
        }
    }

    /// Turns readiness off for good (SIGTERM: lameduck starts).
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// True once [`Readiness::set_shutting_down`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// What is not ready, one line each (see [`ReadinessCheck::not_ready`]); empty when ready.
    pub fn not_ready(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.is_shutting_down() {
            out.push("shutting down (lameduck)".to_owned());
        }
        if let Ok(checks) = self.checks.read() {
            out.extend(checks.iter().flat_map(|c| c.not_ready()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Flag(&'static str, Arc<AtomicBool>);
    impl ReadinessCheck for Flag {
        fn not_ready(&self) -> Vec<String> {
            if self.1.load(Ordering::Relaxed) {
                Vec::new()
            } else {
                vec![self.0.to_owned()]
            }
        }
    }

    #[test]
    fn checks_are_replaced_whole_and_shutdown_is_for_good() {
        let r = Readiness::default();
        assert!(r.not_ready().is_empty());
        let f = Arc::new(AtomicBool::new(false));
        r.replace(vec![Arc::new(Flag("kubernetes", f.clone()))]);
        assert_eq!(r.not_ready(), ["kubernetes"]);
        f.store(true, Ordering::Relaxed);
        assert!(r.not_ready().is_empty());
        r.replace(Vec::new());
        assert!(r.not_ready().is_empty());
        r.set_shutting_down();
        assert_eq!(r.not_ready(), ["shutting down (lameduck)"]);
    }
}
