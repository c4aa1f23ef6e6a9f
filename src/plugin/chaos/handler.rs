//! The CH TXT answers: `version.bind` / `version.server` the version, `authors.bind` one record
//! per author in a random order, `hostname.bind` / `id.server` the host's name; TTL 0, class
//! CH, each string cut to 255 bytes. Other CH questions are refused (the plugins after it
//! answer IN only); other classes go on.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::TXT;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use rand::seq::SliceRandom;

use super::config::ChaosConfig;
use crate::chain::{Next, Now, Plugin, Replay, ReplyFuture};
use crate::proto::{Answer, FlagEdit, Question, Reply};

/// What a CH TXT name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Version,
    Authors,
    Hostname,
}

fn ask(name: &Name) -> Option<Ask> {
    match name.to_lowercase().to_ascii().as_str() {
        "version.bind." | "version.server." => Some(Ask::Version),
        "authors.bind." => Some(Ask::Authors),
        "hostname.bind." | "id.server." => Some(Ask::Hostname),
        _ => None,
    }
}

/// A TXT character-string holds at most 255 bytes: cut at a character boundary below that.
fn cut(s: &str) -> String {
    let mut end = s.len().min(255);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// The `chaos` plugin in a chain.
#[derive(Debug, Clone)]
pub struct Chaos {
    version: String,
    authors: Vec<String>,
    hostname: String,
}

impl Chaos {
    /// The plugin for `config` on host `hostname`.
    pub fn new(config: &ChaosConfig, hostname: &str) -> Self {
        Self {
            version: cut(&config.version),
            authors: config.authors.iter().map(|a| cut(a)).collect(),
            hostname: cut(hostname),
        }
    }

    /// The TXT strings answering `what`.
    fn strings(&self, what: Ask) -> Vec<String> {
        match what {
            Ask::Version => vec![self.version.clone()],
            Ask::Hostname => vec![self.hostname.clone()],
            Ask::Authors => {
                let mut authors = self.authors.clone();
                authors.shuffle(&mut rand::rng());
                authors
            }
        }
    }

    /// Its reply to a CH question (`None` for another class: the next plugin's business).
    pub fn answer(&self, q: &Question) -> Option<Reply> {
        if q.qclass != DNSClass::CH {
            return None;
        }
        let what = (q.qtype == RecordType::TXT).then(|| ask(&q.name)).flatten();
        let Some(what) = what else {
            return Some(Reply::Rcode(ResponseCode::Refused));
        };
        let answers = self
            .strings(what)
            .into_iter()
            .map(|s| {
                let mut r = Record::from_rdata(q.name.clone(), 0, RData::TXT(TXT::new(vec![s])));
                r.dns_class = DNSClass::CH;
                r
            })
            .collect();
        Some(Reply::Authoritative(Answer {
            rcode: ResponseCode::NoError,
            answers,
            authority: Vec::new(),
            additional: Vec::new(),
            chase_target: None,
            flags: FlagEdit::KEEP,
        }))
    }
}

impl Plugin for Chaos {
    fn name(&self) -> &'static str {
        "chaos"
    }

    fn classes(&self) -> &'static [DNSClass] {
        &[DNSClass::CH]
    }

    /// Fixed answers, but `authors.bind` in a fresh order each time.
    fn replay(&self, q: &Question) -> Replay {
        match ask(&q.name) {
            Some(Ask::Authors) => Replay::Never,
            _ => Replay::Same,
        }
    }

    fn serve_now(&self, q: &Question, _next: &Next<'_>) -> Now {
        self.answer(q).map_or(Now::Pass, Now::Reply)
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        next.follow(self.serve_now(q, &next), q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chaos() -> Chaos {
        let config = ChaosConfig {
            version: "v1".into(),
            authors: vec!["ann".into(), "bob".into()],
        };
        Chaos::new(&config, "node-1")
    }

    fn ch(name: &str, qtype: RecordType) -> Question {
        let mut q = Question::new(Name::from_ascii(name).unwrap(), qtype);
        q.qclass = DNSClass::CH;
        q
    }

    fn texts(reply: Option<Reply>) -> Vec<String> {
        let Some(Reply::Authoritative(a)) = reply else {
            panic!("an answer: {reply:?}")
        };
        a.answers
            .iter()
            .map(|r| {
                assert_eq!((r.dns_class, r.ttl), (DNSClass::CH, 0));
                r.data.to_string()
            })
            .collect()
    }

    #[test]
    fn each_name_answers_its_fact_in_any_case() {
        let c = chaos();
        assert_eq!(texts(c.answer(&ch("Version.BIND.", RecordType::TXT))), ["v1"]);
        assert_eq!(texts(c.answer(&ch("version.server.", RecordType::TXT))), ["v1"]);
        assert_eq!(
            texts(c.answer(&ch("hostname.bind.", RecordType::TXT))),
            ["node-1"]
        );
        assert_eq!(texts(c.answer(&ch("id.server.", RecordType::TXT))), ["node-1"]);
        let mut authors = texts(c.answer(&ch("authors.bind.", RecordType::TXT)));
        authors.sort();
        assert_eq!(authors, ["ann", "bob"]);
    }

    #[test]
    fn other_ch_questions_are_refused_and_other_classes_go_on() {
        let c = chaos();
        for q in [
            ch("version.bind.", RecordType::A),
            ch("foo.bind.", RecordType::TXT),
        ] {
            assert_eq!(c.answer(&q), Some(Reply::Rcode(ResponseCode::Refused)));
        }
        let inet = Question::new(Name::from_ascii("version.bind.").unwrap(), RecordType::TXT);
        assert_eq!(c.answer(&inet), None);
    }

    #[test]
    fn strings_are_cut_to_255_bytes() {
        let long = "é".repeat(200);
        let config = ChaosConfig {
            version: long,
            authors: Vec::new(),
        };
        let c = Chaos::new(&config, "h");
        assert_eq!(c.version.len(), 254);
    }
}
