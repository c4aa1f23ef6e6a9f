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

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

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

/// The questions in flight of one `forward`.
#[derive(Debug, Default)]
pub struct Flights {
    map: Mutex<HashMap<FlightKey, Slot>>,
}

/// What [`Flights::join`] made of a question.
#[derive(Debug)]
pub enum Joined<'a> {
    /// Nobody asks this yet: ask, then [`Leader::finish`].
    Leader(Leader<'a>),
    /// Someone asks it already: wait for the reply.
    Follower(watch::Receiver<Option<Reply>>),
}

/// The question that asks for its flight; removes the flight when dropped.
#[derive(Debug)]
pub struct Leader<'a> {
    flights: &'a Flights,
    key: FlightKey,
    slot: Slot,
}

impl Flights {
    /// Joins the flight of `key`, leading it when there is none.
    pub fn join(&self, key: FlightKey) -> Joined<'_> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = map.get(&key) {
            return Joined::Follower(slot.subscribe());
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
pub async fn wait(mut rx: watch::Receiver<Option<Reply>>) -> Option<Reply> {
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
                };
                assert_eq!(reply, Reply::Rcode(ResponseCode::NXDomain));
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert!(flights.is_empty(), "no flight left over");
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
