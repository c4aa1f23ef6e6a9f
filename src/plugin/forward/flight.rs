//! Coalesced questions (single flight): identical forwarded questions in flight at once share
//! one upstream exchange. The first becomes the leader and asks; the others wait for its reply
//! (at most the forward's whole budget) and are counted. Identical means the same name (in any
//! case), type, class, DO, CD and RD bits, EDNS options and transport, so every waiter gets
//! the reply it would have got itself. A flood of one name then costs one exchange, and the
//! `max_concurrent` slots stay for other names.
//!
//! Invariant: a key is in [`Flights`] exactly while its leader's [`Leader`] lives; look-up and
//! insert happen under the one lock, so two questions never both lead one key. A leader that
//! is dropped unfinished (its client went away) closes the flight: its waiters ask themselves.
//!
//! Waiters hold no upstream slot, so they are bounded apart: at most `max_waiting` wait at once
//! (counted under the same lock as the joins, given back when a [`Waiter`] is dropped); past
//! that a question is told at once ([`Joined::Full`]) and fails fast, so a flood of one name
//! cannot pile up tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use hickory_proto::rr::{DNSClass, Name, RecordType};
use tokio::sync::watch;

use crate::proto::{EdnsOpt, Question, Reply};

/// What makes two questions the same upstream exchange.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlightKey {
    name: Name,
    qtype: RecordType,
    qclass: DNSClass,
    bits: (bool, bool, bool),
    tcp: bool,
    options: Vec<(u16, Vec<u8>)>,
}

impl FlightKey {
    /// The key of `q`, forwarded over TCP when `tcp`.
    pub fn of(q: &Question, tcp: bool) -> Self {
        Self {
            name: q.name.to_lowercase(),
            qtype: q.qtype,
            qclass: q.qclass,
            bits: (q.dnssec_ok, q.checking_disabled, q.recursion_desired),
            tcp,
            options: q
                .edns_options
                .iter()
                .map(|EdnsOpt { code, data }| (*code, data.clone()))
                .collect(),
        }
    }
}

type Slot = Arc<watch::Sender<Option<Reply>>>;

/// The most questions that wait for identical ones in flight at once, by default.
pub const DEFAULT_MAX_WAITING: usize = 10_000;

/// The questions in flight of one `forward`.
#[derive(Debug)]
pub struct Flights {
    map: Mutex<HashMap<FlightKey, Slot>>,
    /// Waiters now; only changed under `map`'s lock (joins) or by a [`Waiter`]'s drop.
    waiting: AtomicUsize,
    max_waiting: usize,
    /// Kept up to date with `waiting`, when exported (all forwards add to it).
    gauge: OnceLock<prometheus::IntGauge>,
}

impl Default for Flights {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_WAITING)
    }
}

/// What [`Flights::join`] made of a question.
#[derive(Debug)]
pub enum Joined<'a> {
    /// Nobody asks this yet: ask, then [`Leader::finish`].
    Leader(Leader<'a>),
    /// Someone asks it already: wait for the reply.
    Follower(Waiter<'a>),
    /// Someone asks it already, but `max_waiting` questions wait already: fail now.
    Full,
}

/// A question waiting for an identical one's reply; its place is given back when dropped.
#[derive(Debug)]
pub struct Waiter<'a> {
    flights: &'a Flights,
    rx: watch::Receiver<Option<Reply>>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.flights.waiting.fetch_sub(1, Ordering::AcqRel);
        if let Some(g) = self.flights.gauge.get() {
            g.dec();
        }
    }
}

/// The question that asks for its flight; removes the flight when dropped.
#[derive(Debug)]
pub struct Leader<'a> {
    flights: &'a Flights,
    key: FlightKey,
    slot: Slot,
}

impl Flights {
    /// Flights whose waiters are at most `max_waiting` at once.
    pub fn new(max_waiting: usize) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
            max_waiting,
            gauge: OnceLock::new(),
        }
    }

    /// Adds its waiters to `gauge` from now on (once).
    pub fn count_into(&self, gauge: prometheus::IntGauge) {
        let _ = self.gauge.set(gauge);
    }

    /// Joins the flight of `key`, leading it when there is none.
    pub fn join(&self, key: FlightKey) -> Joined<'_> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = map.get(&key) {
            if self.waiting.load(Ordering::Acquire) >= self.max_waiting {
                return Joined::Full;
            }
            self.waiting.fetch_add(1, Ordering::AcqRel);
            if let Some(g) = self.gauge.get() {
                g.inc();
            }
            return Joined::Follower(Waiter {
                flights: self,
                rx: slot.subscribe(),
            });
        }
        let slot: Slot = Arc::new(watch::channel(None).0);
        map.insert(key.clone(), slot.clone());
        Joined::Leader(Leader {
            flights: self,
            key,
            slot,
        })
    }

    /// Flights in progress.
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Questions waiting for an identical one's reply now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

impl Leader<'_> {
    /// Gives `reply` to every waiter; the flight ends.
    pub fn finish(self, reply: &Reply) {
        self.slot.send_replace(Some(reply.clone()));
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        let mut map = self.flights.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.get(&self.key).is_some_and(|s| Arc::ptr_eq(s, &self.slot)) {
            map.remove(&self.key);
        }
    }
}

/// Waits for the leader's reply; `None` when the leader went away without one.
pub async fn wait(mut waiter: Waiter<'_>) -> Option<Reply> {
    let rx = &mut waiter.rx;
    loop {
        if let Some(reply) = rx.borrow_and_update().clone() {
            return Some(reply);
        }
        if rx.changed().await.is_err() {
            return rx.borrow().clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::ResponseCode;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn question(name: &str) -> Question {
        Question::new(Name::from_ascii(name).unwrap(), RecordType::A)
    }

    /// Many tasks on a multi-threaded runtime join the same few keys at once: each key has one
    /// leader at a time, every follower gets its leader's reply, and no flight is left over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_joiners_share_one_leader_per_key() {
        let flights = Arc::new(Flights::default());
        let leaders = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..400 {
            let (flights, leaders) = (flights.clone(), leaders.clone());
            tasks.push(tokio::spawn(async move {
                let name = format!("n{}.example.", i % 4);
                let key = FlightKey::of(&question(&name), false);
                let reply = match flights.join(key) {
                    Joined::Leader(l) => {
                        leaders.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        let r = Reply::Rcode(ResponseCode::NXDomain);
                        l.finish(&r);
                        r
                    }
                    Joined::Follower(rx) => wait(rx).await.unwrap_or(Reply::Rcode(ResponseCode::ServFail)),
                    Joined::Full => panic!("10,000 places for 400 questions"),
                };
                assert_eq!(reply, Reply::Rcode(ResponseCode::NXDomain));
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert!(flights.is_empty(), "no flight left over");
        assert_eq!(flights.waiting(), 0, "every waiter's place given back");
        let n = leaders.load(Ordering::Relaxed);
        assert!((4..400).contains(&n), "{n} leaders for 400 questions on 4 names");
    }

    #[test]
    fn keys_differ_by_what_changes_the_answer() {
        let a = question("www.Example.org.");
        assert_eq!(
            FlightKey::of(&a, false),
            FlightKey::of(&question("WWW.example.ORG."), false)
        );
        assert_ne!(FlightKey::of(&a, false), FlightKey::of(&a, true));
        let mut aaaa = a.clone();
        aaaa.qtype = RecordType::AAAA;
        assert_ne!(FlightKey::of(&a, false), FlightKey::of(&aaaa, false));
        let mut ecs = a.clone();
        ecs.edns_options.push(EdnsOpt {
            code: 8,
            data: vec![0, 1, 24, 0, 192, 0, 2],
        });
        assert_ne!(FlightKey::of(&a, false), FlightKey::of(&ecs, false));
        let mut cd = a.clone();
        cd.checking_disabled = true;
        assert_ne!(FlightKey::of(&a, false), FlightKey::of(&cd, false));
    }

    /// Past `max_waiting` waiters a question is told at once; a waiter that ends (answered or
    /// gone) gives its place back.
    #[tokio::test]
    async fn waiters_are_bounded_and_give_their_places_back() {
        let flights = Flights::new(2);
        let key = FlightKey::of(&question("busy.example."), false);
        let Joined::Leader(leader) = flights.join(key.clone()) else {
            panic!("first leads")
        };
        let w1 = flights.join(key.clone());
        let w2 = flights.join(key.clone());
        assert!(matches!(w1, Joined::Follower(_)) && matches!(w2, Joined::Follower(_)));
        assert!(matches!(flights.join(key.clone()), Joined::Full));
        drop(w1);
        assert_eq!(flights.waiting(), 1);
        let Joined::Follower(w3) = flights.join(key.clone()) else {
            panic!("a place was given back")
        };
        leader.finish(&Reply::Rcode(ResponseCode::NXDomain));
        assert_eq!(wait(w3).await, Some(Reply::Rcode(ResponseCode::NXDomain)));
        drop(w2);
        assert_eq!(flights.waiting(), 0);
    }

    /// A leader dropped without a reply (its client gave up) lets its followers go on.
    #[tokio::test]
    async fn a_dropped_leader_releases_its_followers() {
        let flights = Flights::default();
        let key = FlightKey::of(&question("gone.example."), false);
        let Joined::Leader(leader) = flights.join(key.clone()) else {
            panic!("first leads")
        };
        let Joined::Follower(rx) = flights.join(key.clone()) else {
            panic!("second follows")
        };
        drop(leader);
        assert_eq!(wait(rx).await, None);
        assert!(
            matches!(flights.join(key), Joined::Leader(_)),
            "a new flight starts"
        );
    }
}
