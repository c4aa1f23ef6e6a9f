//! Stage 5 of the answer path, map: the chain's reply made into the response message before
//! encoding ([`Response`]): its header bits (authoritative for our own answers, the upstream's
//! for a forwarded one, a plugin's flag edits over both), its sections, and what the later
//! stages need to know of it (the block, the question, the plugin that wrote it, how the memo
//! may replay it, a failure, a signer).

use hickory_proto::op::{Metadata, ResponseCode};
use hickory_proto::rr::{RData, Record, RecordType};

use crate::chain::{Answered, ReplayPlan, ResponseSigner};
use crate::proto::{FlagEdit, Question, Records, Reply};

/// The response an error-only or answered request gets, before encoding.
pub(super) struct Response {
    pub(super) meta: Metadata,
    pub(super) answers: Records,
    pub(super) authority: Vec<Record>,
    pub(super) additional: Vec<Record>,
    /// The block that answered (index into the router) and the zone that matched (index into
    /// its zones).
    pub(super) block: Option<(usize, usize)>,
    /// The question the chain was asked (for the query log and errors).
    pub(super) question: Option<Question>,
    /// The plugin that wrote the response.
    pub(super) plugin: &'static str,
    /// How the response may be replayed from the memo, when it may.
    pub(super) replay: Option<ReplayPlan>,
    /// The chain's own failure, for `errors`.
    pub(super) failure: Option<&'static str>,
    /// No reply is sent ([`Reply::Dropped`]).
    pub(super) dropped: bool,
    /// Signs the encoded response (a verified or rejected signed request, `tsig`).
    pub(super) signer: Option<Box<dyn ResponseSigner>>,
}

impl Response {
    /// The response of header `meta` with `rcode` and nothing else.
    pub(super) fn rcode(meta: Metadata, rcode: ResponseCode) -> Self {
        let mut meta = meta;
        meta.response_code = rcode;
        Self {
            meta,
            answers: Records::default(),
            authority: Vec::new(),
            additional: Vec::new(),
            block: None,
            question: None,
            plugin: "",
            replay: None,
            failure: None,
            dropped: false,
            signer: None,
        }
    }
}

/// The response to `question`, routed to `block` (block and zone index), that the chain
/// `answered`, over the header `meta`; signed by `signer`. `held`: the SOA serial of an IXFR
/// asker.
pub(super) fn answered(
    meta: Metadata,
    answered: Answered,
    block: (usize, usize),
    question: Question,
    held: Option<u32>,
    signer: Option<Box<dyn ResponseSigner>>,
) -> Response {
    let mut resp = from_reply(meta, answered.reply);
    // An IXFR from a client that holds the zone's current serial gets the SOA alone (RFC
    // 1995 section 2: the zone is up to date), as CoreDNS answers it; any other IXFR gets the
    // whole zone.
    if question.qtype == RecordType::IXFR
        && let Some(held) = held
        && let Some(soa) = resp.answers.first()
        && matches!(&soa.data, RData::SOA(s) if s.serial == held)
    {
        let soa = soa.clone();
        resp.answers = vec![soa].into();
    }
    resp.plugin = answered.by;
    resp.replay = answered.replay;
    resp.block = Some(block);
    resp.question = Some(question);
    resp.signer = signer;
    resp
}

/// The response to `question`, routed to `block`, that the block's check of signed requests
/// answered with `rcode` alone (signed by `signer` when it says so).
pub(super) fn rejected(
    meta: Metadata,
    rcode: ResponseCode,
    block: (usize, usize),
    question: Question,
    signer: Option<Box<dyn ResponseSigner>>,
) -> Response {
    let mut r = Response::rcode(meta, rcode);
    r.block = Some(block);
    r.question = Some(question);
    r.signer = signer;
    r
}

/// `reply`'s sections and header bits over `meta`, the server's.
fn from_reply(mut meta: Metadata, reply: Reply) -> Response {
    match reply {
        Reply::Authoritative(answer) => {
            meta.authoritative = true;
            edit_flags(&mut meta, answer.flags);
            meta.response_code = answer.rcode;
            Response {
                answers: answer.answers,
                authority: answer.authority,
                additional: answer.additional,
                ..Response::rcode(meta, answer.rcode)
            }
        }
        Reply::Forwarded(f) => {
            // The upstream's rcode and flags; not authoritative (we are not).
            meta.authoritative = false;
            meta.recursion_available = f.recursion_available;
            meta.authentic_data = f.authentic_data;
            meta.truncation = f.truncated;
            edit_flags(&mut meta, f.flags);
            Response {
                answers: f.answers.into(),
                authority: f.authority,
                additional: f.additional,
                ..Response::rcode(meta, f.rcode)
            }
        }
        Reply::Rcode(rcode) => Response::rcode(meta, rcode),
        Reply::Failed(f) => {
            let mut r = Response::rcode(meta, f.rcode);
            r.failure = Some(f.reason);
            r
        }
        Reply::Dropped => {
            let mut r = Response::rcode(meta, ResponseCode::Refused);
            r.dropped = true;
            r
        }
        Reply::Truncated => {
            meta.truncation = true;
            Response::rcode(meta, ResponseCode::NoError)
        }
    }
}

/// The header bits a plugin set or cleared on the reply (`header`), over the server's.
fn edit_flags(meta: &mut Metadata, edit: FlagEdit) {
    let bits = [
        (&mut meta.authoritative, edit.authoritative),
        (&mut meta.recursion_available, edit.recursion_available),
        (&mut meta.recursion_desired, edit.recursion_desired),
    ];
    for (bit, to) in bits {
        if let Some(to) = to {
            *bit = to;
        }
    }
}
