//! What the answerer keeps with zone entries between questions (`ServiceNames`, in each
//! entry's [`Derived`](crate::cluster::zone::Derived) slot) and the byte budget that bounds it.
//!
//! A client decides which Services get names kept (every SRV or PTR question about one), so
//! what is kept counts against a budget ([`KeptBudget`]): a value that does not fit is built
//! for its answer alone, as if nothing were kept. A kept value gives its bytes back when it is
//! dropped, which happens when its entry changes (writers swap entries whole) or leaves the
//! zone. The kubernetes plugin shows the bytes and the limit as
//! `cluster_dns_kubernetes_kept_names_bytes` and `..._limit_bytes`.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use hickory_proto::rr::Name;

/// The default budget: the names of about 50,000 endpoints (a name and its slot cost 100 to
/// 150 bytes).
pub const DEFAULT_KEPT_BYTES: usize = 8 << 20;

/// The key of names kept under `zone` (configured, lower case) with `endpoint_pod_names` set to
/// `pod_names`: what the names depend on, interned once per process so answerers compare it as
/// one integer. Answerers with equal settings get equal keys and share what either kept (a
/// reloaded Corefile's new answerer finds the old one's names); any difference gives another
/// key. One entry per distinct (zone, setting) ever configured.
pub fn kept_key(zone: &Name, pod_names: bool) -> u64 {
    static KEYS: OnceLock<Mutex<HashMap<(String, bool), u64>>> = OnceLock::new();
    let mut keys = KEYS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let next = u64::try_from(keys.len()).unwrap_or(u64::MAX);
    *keys
        .entry((zone.to_lowercase().to_ascii(), pod_names))
        .or_insert(next)
}

/// A change the budget reports to its observer (the metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeptChange {
    /// The bytes counted moved by this much.
    Used(i64),
    /// A budget of this many bytes came (positive) or went (negative).
    Limit(i64),
}

/// The bytes kept values may count, shared by one answerer and its clones.
///
/// Invariant: `used` is the sum of the bytes every live `ServiceNames` charged to it. A
/// value charges before it is kept (a charge that would pass `limit` is refused, in one
/// compare-and-swap, so concurrent charges never pass it together) and gives back exactly what
/// it charged when dropped.
pub struct KeptBudget {
    used: AtomicUsize,
    limit: usize,
    /// Told every change (the metrics): the limit when the budget comes and goes, each
    /// change of `used`.
    observe: Option<Box<dyn Fn(KeptChange) + Send + Sync>>,
}

impl fmt::Debug for KeptBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeptBudget")
            .field("used", &self.used.load(Ordering::Relaxed))
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

fn signed(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl KeptBudget {
    /// A budget of `limit` bytes; `observe` is told its limit now and each change after.
    pub fn new(limit: usize, observe: Option<Box<dyn Fn(KeptChange) + Send + Sync>>) -> Arc<Self> {
        if let Some(observe) = &observe {
            observe(KeptChange::Limit(signed(limit)));
        }
        Arc::new(Self {
            used: AtomicUsize::new(0),
            limit,
            observe,
        })
    }

    /// The bytes counted now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The bound.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Counts `bytes` if they fit under the limit.
    fn charge(&self, bytes: usize) -> bool {
        let fits = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok();
        if fits && let Some(observe) = &self.observe {
            observe(KeptChange::Used(signed(bytes)));
        }
        fits
    }

    /// Gives back `bytes` counted before.
    fn refund(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        if let Some(observe) = &self.observe {
            observe(KeptChange::Used(-signed(bytes)));
        }
    }
}

impl Drop for KeptBudget {
    /// Gone with the last value it counted (each holds it) and its answerer: its limit leaves
    /// the metric. `used` is 0 by then (every value refunded).
    fn drop(&mut self) {
        if let Some(observe) = &self.observe {
            observe(KeptChange::Limit(-signed(self.limit)));
        }
    }
}

/// The bytes a name takes: its own size, and its label bytes when they outgrow the 32 hickory
/// keeps inline.
fn name_bytes(name: &Name) -> usize {
    std::mem::size_of::<Name>() + if name.len() > 32 { name.len() } else { 0 }
}

/// An endpoint's name and its id (equal ids: equal names, ignoring case); `None` where the
/// endpoint label is not a DNS label.
pub(super) type EndpointName = Option<(Name, u32)>;

/// The names of one Service's answers (SRV and PTR targets) under one configured zone, kept
/// with its entry: building a name costs more than copying one.
pub(super) struct ServiceNames {
    /// What the names were built under ([`kept_key`]); `None` for names built for one answer.
    pub(super) key: Option<u64>,
    /// `<service>.<namespace>.svc.<zone>`; `None` if a label is not a DNS label.
    pub(super) service: Option<Name>,
    /// Per ready address of the entry, built when first asked for
    /// ([`ClusterAnswerer::endpoint_names`](super::ClusterAnswerer)).
    endpoints: OnceLock<Vec<EndpointName>>,
    /// The budget charged for this value (`None`: built for one answer, not kept) and how
    /// much.
    budget: Option<Arc<KeptBudget>>,
    charged: AtomicUsize,
}

impl ServiceNames {
    /// Names built for one answer: nothing charged.
    pub(super) fn fresh(service: Option<Name>) -> Self {
        Self {
            key: None,
            service,
            endpoints: OnceLock::new(),
            budget: None,
            charged: AtomicUsize::new(0),
        }
    }

    /// Names to keep under `key`, charged to `budget`; when they do not fit, the service's
    /// name is handed back (for names built for one answer).
    pub(super) fn kept(
        key: u64,
        service: Option<Name>,
        budget: &Arc<KeptBudget>,
    ) -> Result<Self, Option<Name>> {
        let bytes = std::mem::size_of::<Self>() + service.as_ref().map_or(0, name_bytes);
        if !budget.charge(bytes) {
            return Err(service);
        }
        Ok(Self {
            key: Some(key),
            service,
            endpoints: OnceLock::new(),
            budget: Some(budget.clone()),
            charged: AtomicUsize::new(bytes),
        })
    }

    /// The endpoint names, built by `build` the first time; kept with this value when it is
    /// kept and they fit the budget, handed back owned otherwise.
    pub(super) fn endpoints(&self, build: impl FnOnce() -> Vec<EndpointName>) -> EndpointNames<'_> {
        if let Some(kept) = self.endpoints.get() {
            return EndpointNames::Kept(kept);
        }
        let built = build();
        let bytes = built.capacity() * std::mem::size_of::<EndpointName>()
            + built
                .iter()
                .flatten()
                .map(|(n, _)| name_bytes(n) - std::mem::size_of::<Name>())
                .sum::<usize>();
        let fits = match &self.budget {
            Some(budget) => budget.charge(bytes),
            // Built for one answer: nothing to charge, kept for as long as the value lives.
            None => true,
        };
        if !fits {
            return EndpointNames::Owned(built);
        }
        let mut ours = false;
        let kept = self.endpoints.get_or_init(|| {
            ours = true;
            built
        });
        match (&self.budget, ours) {
            (Some(_), true) => {
                self.charged.fetch_add(bytes, Ordering::AcqRel);
            }
            // Another reader kept its list first; ours was dropped uncharged.
            (Some(budget), false) => budget.refund(bytes),
            (None, _) => {}
        }
        EndpointNames::Kept(kept)
    }
}

impl Drop for ServiceNames {
    fn drop(&mut self) {
        if let Some(budget) = &self.budget {
            budget.refund(*self.charged.get_mut());
        }
    }
}

/// [`ServiceNames::endpoints`]: kept with the value, or built for this answer.
pub(super) enum EndpointNames<'a> {
    Kept(&'a [EndpointName]),
    Owned(Vec<EndpointName>),
}

impl std::ops::Deref for EndpointNames<'_> {
    type Target = [EndpointName];
    fn deref(&self) -> &[EndpointName] {
        match self {
            Self::Kept(kept) => kept,
            Self::Owned(owned) => owned,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    /// Charges up to the limit and no further; every drop gives back what its value charged,
    /// endpoint lists included, and the observer sees the same sum.
    #[test]
    fn the_budget_is_charged_and_refunded_exactly() {
        let seen = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let limit = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let (observer, limits) = (seen.clone(), limit.clone());
        let budget = KeptBudget::new(
            1_000,
            Some(Box::new(move |change| match change {
                KeptChange::Used(d) => {
                    observer.fetch_add(d, Ordering::Relaxed);
                }
                KeptChange::Limit(d) => {
                    limits.fetch_add(d, Ordering::Relaxed);
                }
            })),
        );
        assert_eq!(limit.load(Ordering::Relaxed), 1_000);
        let service = || Some(n("a-long-service-name.some-namespace.svc.cluster.local."));
        let one = ServiceNames::kept(0, service(), &budget).expect("fits");
        let first = budget.used();
        assert!(first > std::mem::size_of::<ServiceNames>() + std::mem::size_of::<Name>());
        let endpoints = one.endpoints(|| {
            vec![Some((
                n("x.a-long-service-name.some-namespace.svc.cluster.local."),
                0,
            ))]
        });
        assert!(matches!(endpoints, EndpointNames::Kept(_)));
        assert!(budget.used() > first);
        // Asked again: the kept list, nothing charged twice.
        let used = budget.used();
        assert_eq!(one.endpoints(Vec::new).len(), 1);
        assert_eq!(budget.used(), used);
        // More than the limit: refused, nothing counted.
        let mut refused = 0;
        let mut kept = Vec::new();
        for _ in 0..10 {
            match ServiceNames::kept(0, service(), &budget) {
                Ok(v) => kept.push(v),
                Err(_) => refused += 1,
            }
        }
        assert!(refused > 0);
        assert!(budget.used() <= budget.limit());
        // An endpoint list that does not fit is handed back owned.
        let big: Vec<EndpointName> = (0..50)
            .map(|i| Some((n(&format!("e{i}.svc.cluster.local.")), i)))
            .collect();
        let last = kept.last().expect("one more fitted");
        assert!(matches!(last.endpoints(|| big), EndpointNames::Owned(_)));
        assert_eq!(seen.load(Ordering::Relaxed), signed(budget.used()));
        drop(kept);
        drop(one);
        assert_eq!(budget.used(), 0);
        assert_eq!(seen.load(Ordering::Relaxed), 0);
        // The budget goes: its limit leaves the metric.
        drop(budget);
        assert_eq!(limit.load(Ordering::Relaxed), 0);
    }

    /// Equal settings, equal keys; a different zone or endpoint naming, another key.
    #[test]
    fn kept_keys_follow_what_names_depend_on() {
        let (a, b) = (n("cluster.local."), n("example.org."));
        assert_eq!(kept_key(&a, false), kept_key(&n("Cluster.Local."), false));
        assert_ne!(kept_key(&a, false), kept_key(&a, true));
        assert_ne!(kept_key(&a, false), kept_key(&b, false));
        assert_eq!(kept_key(&b, true), kept_key(&b, true));
    }

    /// Names built for one answer charge nothing.
    #[test]
    fn fresh_names_charge_nothing() {
        let fresh = ServiceNames::fresh(Some(n("s.ns.svc.cluster.local.")));
        assert_eq!(fresh.endpoints(|| vec![None]).len(), 1);
        assert_eq!(fresh.endpoints(Vec::new).len(), 1);
    }
}
