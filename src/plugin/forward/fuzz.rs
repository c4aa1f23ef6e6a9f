//! The body of the `forward_reply` fuzz target (`fuzz/`), kept beside the code it drives so
//! `cargo test` replays its committed corpus through the same code
//! (`tests/integration/project/fuzz_corpus.rs`): arbitrary bytes as an upstream's reply, through the
//! matcher and the conversion to the answer the chain carries. Not part of the server.

use hickory_proto::op::{Message, MessageType};
use hickory_proto::rr::{Name, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinEncodable};

use super::exchange::{accept_reply, build_query};
use super::handler::forwarded;
use crate::proto::{Question, Reply};

/// The question the fuzzed upstream replies are matched against, and its message ID.
const REPLY_ID: u16 = 0x2b1d;

fn reply_question() -> Question {
    Question::new(
        Name::from_ascii("www.Example.com.").expect("a name"),
        RecordType::A,
    )
}

/// Arbitrary bytes as an upstream's reply to `A www.Example.com.` sent with ID 0x2b1d: the
/// forward plugin's matcher must accept only a response with that ID and that question (name
/// case-insensitively, type, class), and an accepted reply converts to the answer the chain
/// carries and encodes as the server would send it.
pub fn forward_reply(data: &[u8]) {
    let q = reply_question();
    let Some(msg) = accept_reply(data, REPLY_ID, &q) else {
        return;
    };
    assert_eq!(msg.metadata.id, REPLY_ID, "accepted a reply with another ID");
    assert_eq!(
        msg.metadata.message_type,
        MessageType::Response,
        "accepted a query"
    );
    let [rq] = msg.queries.as_slice() else {
        panic!("accepted a reply with {} questions", msg.queries.len());
    };
    assert_eq!(
        rq.name().to_lowercase(),
        q.name.to_lowercase(),
        "accepted another name"
    );
    assert_eq!((rq.query_type(), rq.query_class()), (q.qtype, q.qclass));
    let f = forwarded(msg);
    assert!(
        !f.additional.iter().any(|r| r.record_type() == RecordType::OPT),
        "the upstream's OPT is carried on"
    );
    let reply = Reply::Forwarded(f);
    let _ = reply.rcode();
}

/// A well-formed upstream reply to [`forward_reply`]'s question (a corpus seed).
pub fn forward_reply_seed() -> Vec<u8> {
    let q = reply_question();
    let bytes = build_query(&q, REPLY_ID).expect("a query");
    let mut msg = Message::from_bytes(&bytes).expect("our query parses");
    msg.metadata.message_type = MessageType::Response;
    msg.add_answer(hickory_proto::rr::Record::from_rdata(
        q.name.clone(),
        300,
        hickory_proto::rr::RData::A(hickory_proto::rr::rdata::A::new(192, 0, 2, 1)),
    ));
    msg.to_bytes().expect("a reply")
}
