//! Message authentication a server block asks of the server (`tsig`): a check of each request's
//! wire form before its block's chain is asked, and the signature of the response after it is
//! encoded. The server calls these without knowing the scheme; the plugin that sets
//! [`crate::chain::BlockSettings::auth`] owns the wire details.

use std::fmt;

use hickory_proto::op::{OpCode, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

/// What a request is, for [`RequestAuth::check`]: its wire form and where its additional
/// section starts, and its question and opcode.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    /// The request as received.
    pub wire: &'a [u8],
    /// The offset of its additional section.
    pub additional_at: usize,
    /// How many records that section holds.
    pub additional_count: u16,
    /// The question name.
    pub name: &'a Name,
    /// The question type.
    pub qtype: RecordType,
    /// The opcode.
    pub opcode: OpCode,
}

/// What the server does with a request after [`RequestAuth::check`].
#[derive(Debug)]
pub enum Verdict {
    /// Not this check's business: answered as usual, unsigned.
    Pass,
    /// Answered with this rcode alone, unsigned (`REFUSED` for an unsigned request where a
    /// signature is required, `FORMERR` for a misplaced signature).
    Rcode(ResponseCode),
    /// Answered with this rcode alone (`NOTAUTH`), and the signer adds the error record.
    Reject(ResponseCode, Box<dyn ResponseSigner>),
    /// Verified: answered by the chain, and signed.
    Verified(Box<dyn ResponseSigner>),
}

/// Signs the responses to one request.
pub trait ResponseSigner: Send + Sync + fmt::Debug {
    /// The bytes [`ResponseSigner::sign`] adds to a message (the server leaves room for them
    /// under the client's size limit).
    fn overhead(&self) -> usize;

    /// Appends the signature record to `msg`, an encoded response (its ARCOUNT raised).
    /// Called once per message, in order, for a response of several messages (a zone
    /// transfer); `Err` when `msg` cannot take it.
    fn sign(&mut self, msg: &mut Vec<u8>) -> Result<(), String>;
}

/// A block's check of its requests (`tsig`).
pub trait RequestAuth: Send + Sync + fmt::Debug {
    /// The verdict on `req`, at `now` (seconds since the Unix epoch).
    fn check(&self, req: &SignedRequest<'_>, now: u64) -> Verdict;
}
