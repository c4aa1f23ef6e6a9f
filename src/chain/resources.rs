//! Long-lived resources that plugins own across configurations: the kubernetes plugin's
//! cluster zone and the watches filling it, kept through a reload that does not change what
//! they are made from, so the new configuration takes them over without a relist.
//!
//! The store holds each resource weakly, by its type and a key of the plugin's choosing (what
//! the resource is made from). The configurations that use a resource hold it; once the last
//! of them is gone (the old generation after a reload that no longer needs it) the resource
//! is dropped, and what it runs stops with it.

use std::any::Any;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// One resource: its key, and the resource while some configuration holds it.
struct Entry {
    key: Box<dyn Any + Send + Sync>,
    value: Weak<dyn Any + Send + Sync>,
}

/// The store (see the module docs). One per process; the test harness makes its own.
///
/// Invariant: at most one live value per type and key. A lookup, and the insertion that
/// follows when nothing live was found, happen under the one lock; the value is made outside
/// it (making one may await the API server), and when two makers race for one key the value
/// stored first wins and the other is dropped unused.
#[derive(Default)]
pub struct Resources {
    entries: Mutex<Vec<Entry>>,
    /// Values that stand for every key of their type (the test harness gives the cluster
    /// zone it built to every `kubernetes` block this way).
    provided: Vec<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resources")
            .field("live", &self.live())
            .field("provided", &self.provided.len())
            .finish()
    }
}

/// A resource as [`Resources::get_or_make`] hands it out.
#[derive(Debug)]
pub struct Acquired<T> {
    /// The resource.
    pub value: Arc<T>,
    /// True when it was made by this call; false when a configuration already held it.
    pub made: bool,
}

impl Resources {
    /// A store in which every request for a `T` gets `value`, whatever its key.
    #[must_use]
    pub fn providing<T: Any + Send + Sync>(mut self, value: Arc<T>) -> Self {
        self.provided.push(value);
        self
    }

    /// The resource of type `T` made from `key`: the live one, or a new one from `make`.
    pub async fn get_or_make<K, T, E, F, Fut>(&self, key: K, make: F) -> Result<Acquired<T>, E>
    where
        K: PartialEq + Send + Sync + 'static,
        T: Any + Send + Sync,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        if let Some(value) = self.provided.iter().find_map(|v| v.clone().downcast::<T>().ok()) {
            return Ok(Acquired { value, made: false });
        }
        if let Some(value) = self.lookup::<K, T>(&key) {
            return Ok(Acquired { value, made: false });
        }
        let made = Arc::new(make().await?);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.retain(|e| e.value.strong_count() > 0);
        if let Some(value) = find::<K, T>(&entries, &key) {
            return Ok(Acquired { value, made: false });
        }
        let erased: Arc<dyn Any + Send + Sync> = made.clone();
        entries.push(Entry {
            key: Box::new(key),
            value: Arc::downgrade(&erased),
        });
        Ok(Acquired {
            value: made,
            made: true,
        })
    }

    /// How many resources some configuration holds.
    pub fn live(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.iter().filter(|e| e.value.strong_count() > 0).count()
    }

    fn lookup<K: PartialEq + 'static, T: Any + Send + Sync>(&self, key: &K) -> Option<Arc<T>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        find(&entries, key)
    }
}

/// The live value of type `T` under `key` in `entries`.
fn find<K: PartialEq + 'static, T: Any + Send + Sync>(entries: &[Entry], key: &K) -> Option<Arc<T>> {
    entries
        .iter()
        .filter(|e| e.key.downcast_ref::<K>() == Some(key))
        .find_map(|e| e.value.upgrade()?.downcast::<T>().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct Zone(u32);

    #[tokio::test]
    async fn a_held_resource_is_handed_out_again_and_a_dropped_one_is_made_anew() {
        let store = Resources::default();
        let made = AtomicUsize::new(0);
        let make = |n: u32| {
            made.fetch_add(1, Ordering::Relaxed);
            async move { Ok::<_, ()>(Zone(n)) }
        };
        let a = store.get_or_make("a", || make(1)).await.unwrap();
        assert!(a.made);
        let again = store.get_or_make("a", || make(2)).await.unwrap();
        assert!(!again.made && Arc::ptr_eq(&a.value, &again.value));
        let b = store.get_or_make("b", || make(3)).await.unwrap();
        assert_eq!((b.value.0, store.live()), (3, 2));
        // Another type under the same key is another resource.
        let other = store
            .get_or_make("a", || async { Ok::<_, ()>(7u8) })
            .await
            .unwrap();
        assert!(other.made);
        drop((a, again, other));
        assert_eq!(store.live(), 1, "only b is held");
        let fresh = store.get_or_make("a", || make(4)).await.unwrap();
        assert!(fresh.made && fresh.value.0 == 4);
        assert_eq!(
            made.load(Ordering::Relaxed),
            3,
            "the second ask of 'a' made nothing"
        );
        // A failed make stores nothing.
        assert_eq!(
            store
                .get_or_make::<_, Zone, _, _, _>("c", || async { Err("no") })
                .await
                .unwrap_err(),
            "no"
        );
        assert_eq!(store.live(), 2);
    }

    #[tokio::test]
    async fn a_provided_value_stands_for_every_key() {
        let zone = Arc::new(Zone(9));
        let store = Resources::default().providing(zone.clone());
        let got = store
            .get_or_make("any", || async { Ok::<_, ()>(Zone(1)) })
            .await
            .unwrap();
        assert!(!got.made && Arc::ptr_eq(&got.value, &zone));
    }

    /// Many tasks on a multi-threaded runtime ask for the same few keys at once: each key ends
    /// with one live value, which every asker of that key got.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_makers_of_one_key_end_with_one_value() {
        let store = Arc::new(Resources::default());
        let mut tasks = Vec::new();
        for i in 0..64u32 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let key = i % 4;
                let got = store
                    .get_or_make(key, || async move {
                        tokio::task::yield_now().await;
                        Ok::<_, ()>(Zone(i))
                    })
                    .await
                    .unwrap();
                (key, got.value)
            }));
        }
        let mut held = Vec::new();
        for t in tasks {
            held.push(t.await.unwrap());
        }
        assert_eq!(store.live(), 4);
        for key in 0..4 {
            let live = store.lookup::<u32, Zone>(&key).unwrap();
            for (k, v) in &held {
                if *k == key {
                    assert!(
                        Arc::ptr_eq(v, &live),
                        "key {key}: every asker got the stored value"
                    );
                }
            }
        }
    }
}
