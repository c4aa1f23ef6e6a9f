//! The message-byte budget of one listener: the bytes of a message's buffer beyond its first
//! [`FIRST_CHUNK`] (being received, or held while the message is answered) are reserved from
//! one [`Budget`] per listener, so that what clients can make the server hold is bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bytes of a message's buffer that do not come out of the listener's budget: every
/// query a stub resolver sends fits.
pub const FIRST_CHUNK: usize = 512;

/// Message bytes held beyond each message's first chunk, for one listener.
///
/// Invariant: `used` is the sum of the bytes of every live [`Reservation`] taken from it, and
/// never exceeds `max` (a reservation that would go over fails and changes nothing).
#[derive(Debug)]
pub struct Budget {
    used: AtomicUsize,
    max: usize,
}

impl Budget {
    /// A budget of `max` bytes.
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicUsize::new(0),
            max,
        })
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|n| *n <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Bytes taken from a [`Budget`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Reservation {
    /// An empty reservation on `budget`.
    pub fn new(budget: Arc<Budget>) -> Self {
        Self { budget, bytes: 0 }
    }

    /// Makes this reservation `bytes` long; false (and unchanged) when the budget lacks it.
    pub fn resize(&mut self, bytes: usize) -> bool {
        if bytes > self.bytes {
            if !self.budget.try_take(bytes - self.bytes) {
                return false;
            }
        } else {
            self.budget.give_back(self.bytes - bytes);
        }
        self.bytes = bytes;
        true
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// An empty reservation on the same budget.
    pub(super) fn fresh(&self) -> Self {
        Self::new(self.budget.clone())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}
