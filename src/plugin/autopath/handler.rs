//! The `autopath` plugin's answers. For a question from a client whose search path it knows,
//! asked for a name under the path's first domain (the client's resolver has just appended it):
//! the question as asked goes down the chain first; if that is NXDOMAIN, the base name (the
//! question without that domain) is tried with each later search domain and finally bare, and
//! the first reply that is not NXDOMAIN is the answer, under a CNAME from the asked name to the
//! name that answered. When every try is NXDOMAIN the question as asked is answered in full
//! (the client walks its own list, as without autopath).
//!
//! Cost: the first ask and the tries are probes ([`Question::probe`]), so a cached NXDOMAIN is
//! not decoded only to be dropped; the rare walk that finds nothing asks the question once more
//! for its full NXDOMAIN (the cache counts that ask too).
//!
//! Replay: the walk depends on the client, so any reply it changed, and any NXDOMAIN in its
//! zones (which autopath would have walked for a pod client), is kept from the answer memo.
//! Replies autopath passed through unchanged and that are not NXDOMAIN are what the plain chain
//! answers for everyone, and may be replayed.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::CNAME;
use hickory_proto::rr::{DNSClass, Name, RData, Record};
use prometheus::IntCounter;

use super::config::{AutoPathConfig, SearchSource};
use crate::chain::{Chain, Next, Plugin, Replay, ReplyFuture};
use crate::plugin::kit::SearchPaths;
use crate::proto::{Question, Reply};

/// The plugin. See the module docs.
#[derive(Debug)]
pub struct AutoPath {
    config: AutoPathConfig,
    /// The search paths the plugin of the chain named by `@PLUGIN` offers, found when the
    /// chain starts.
    source: OnceLock<Arc<dyn SearchPaths>>,
    success: Option<IntCounter>,
}

impl AutoPath {
    /// The plugin for `config`, counting its successes in `success`.
    pub fn new(config: AutoPathConfig, success: Option<IntCounter>) -> Self {
        Self {
            config,
            source: OnceLock::new(),
            success,
        }
    }

    /// The search path of the client asking `q`, or `None` when it is not known. A fixed path
    /// is lent, not copied.
    fn search_path(&self, q: &Question) -> Option<Cow<'_, [Name]>> {
        match &self.config.source {
            SearchSource::Fixed(path) => Some(Cow::Borrowed(path)),
            SearchSource::Plugin(_) => {
                let mut path = self.source.get()?.search_path(q.client.ip())?;
                for domain in &self.config.own_search {
                    if !path.contains(domain) {
                        path.push(domain.clone());
                    }
                }
                Some(Cow::Owned(path))
            }
        }
    }

    fn in_zones(&self, name: &Name) -> bool {
        self.config.zones.iter().any(|z| z.zone_of(name))
    }
}

/// The names to try after the question as asked: `base` under each later search domain, then
/// `base` alone. Names that would be too long are left out. Each is built only when the walk
/// reaches it: most walks end at the first or second.
fn tries<'a>(base: &'a Name, later: &'a [Name]) -> impl Iterator<Item = Name> + 'a {
    let bare = std::iter::once_with(move || {
        let mut bare = base.clone();
        bare.set_fqdn(true);
        bare
    });
    later
        .iter()
        .filter_map(move |domain| base.clone().append_domain(domain).ok())
        .chain(bare)
}

/// `reply`, answered for `tried`, as the answer to `asked`: a CNAME from `asked` to the owner
/// of the first answer record, when it differs, before the records.
fn under_cname(asked: &Name, reply: Reply) -> Reply {
    let cname = |answers: &mut Vec<Record>| {
        let Some(first) = answers.first() else { return };
        if first.name.eq_case(asked) {
            return;
        }
        let record = Record::from_rdata(asked.clone(), first.ttl, RData::CNAME(CNAME(first.name.clone())));
        answers.insert(0, record);
    };
    match reply {
        Reply::Authoritative(mut a) => {
            cname(&mut a.answers);
            Reply::Authoritative(a)
        }
        Reply::Forwarded(mut f) => {
            cname(&mut f.answers);
            Reply::Forwarded(f)
        }
        other => other,
    }
}

impl Plugin for AutoPath {
    fn name(&self) -> &'static str {
        "autopath"
    }

    /// Its tries may go upstream.
    fn awaits_io(&self) -> bool {
        true
    }

    /// What it passes through unchanged may be replayed; what depends on the client is kept
    /// from replay and from stores by [`Next::for_this_client_only`] while answering.
    fn replay(&self, _q: &Question) -> Replay {
        Replay::Same
    }

    fn start(&self, chain: &Chain) {
        if let SearchSource::Plugin(name) = &self.config.source
            && let Some((_, paths)) = chain
                .offered::<Arc<dyn SearchPaths>>()
                .find(|(p, _)| p.name() == name)
        {
            let _ = self.source.set(paths.clone());
        }
    }

    fn serve<'a>(&'a self, q: &'a Question, next: Next<'a>) -> ReplyFuture<'a> {
        Box::pin(async move {
            if q.qclass != DNSClass::IN || !self.in_zones(&q.name) {
                return next.serve(q).await;
            }
            // The search path and the base name (the labels before its first domain).
            let walk = self.search_path(q).and_then(|path| {
                let first = path.first()?;
                let depth = usize::from(q.name.num_labels()).checked_sub(usize::from(first.num_labels()))?;
                if depth == 0 || !first.zone_of(&q.name) {
                    return None;
                }
                // One label at a time (`Name::from_labels` collects three vectors first).
                let mut base = Name::new();
                for label in q.name.iter().take(depth) {
                    base = base.append_label(label).ok()?;
                }
                Some((path, base))
            });
            let Some((path, base)) = walk else {
                let reply = next.serve(q).await;
                if reply.rcode() == ResponseCode::NXDomain {
                    // What a pod client's walk would have changed: never replayed to one.
                    next.for_this_client_only();
                }
                return reply;
            };
            // The question as asked first, as a probe: a reply that is not NXDOMAIN is the
            // full one, and an NXDOMAIN's SOA is needed only if every try fails too.
            let reply = next.serve(&q.clone().probing(true)).await;
            if reply.rcode() != ResponseCode::NXDomain {
                return reply;
            }
            next.for_this_client_only();
            for name in tries(&base, &path[1..]) {
                // Only a reply that is not NXDOMAIN is kept: an NXDOMAIN may be the bare rcode.
                let answer = next.serve(&q.for_name(name).probing(true)).await;
                if answer.rcode() != ResponseCode::NXDomain {
                    if let Some(c) = &self.success {
                        c.inc();
                    }
                    return under_cname(&q.name, answer);
                }
            }
            // Every try failed: the client walks its own list, starting from the full NXDOMAIN
            // of the question as asked (a second pass down the chain, on this rare path only).
            next.serve(q).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn tries_follow_the_search_path_then_the_bare_name() {
        let later = [n("svc.cluster.local."), n("cluster.local."), n("ec2.internal.")];
        let got: Vec<String> = tries(&n("api.github.com"), &later)
            .map(|t| t.to_string())
            .collect();
        assert_eq!(
            got,
            [
                "api.github.com.svc.cluster.local.",
                "api.github.com.cluster.local.",
                "api.github.com.ec2.internal.",
                "api.github.com."
            ]
        );
    }

    #[test]
    fn the_cname_points_at_the_owner_that_answered() {
        let asked = n("web.other.ns.svc.cluster.local.");
        let owner = n("web.other.svc.cluster.local.");
        let a = Record::from_rdata(
            owner.clone(),
            5,
            RData::A(hickory_proto::rr::rdata::A::new(10, 0, 0, 1)),
        );
        let reply = Reply::Authoritative(crate::proto::Answer {
            rcode: ResponseCode::NoError,
            answers: vec![a].into(),
            authority: Vec::new(),
            additional: Vec::new(),
            chase_target: None,
            flags: crate::proto::FlagEdit::KEEP,
        });
        let Reply::Authoritative(out) = under_cname(&asked, reply) else {
            panic!()
        };
        assert_eq!(out.answers.len(), 2);
        assert_eq!(out.answers[0].name, asked);
        assert_eq!(out.answers[0].ttl, 5);
        assert_eq!(out.answers[0].data, RData::CNAME(CNAME(owner)));
    }
}
