//! What the `rrl` plugin counts a reply (or a request) as: BIND's response kinds, and their
//! labels and allowance slots.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Record, RecordType};

use crate::proto::Reply;

/// What a response (or a request) is counted as: BIND's response kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// A NOERROR answer with records.
    Responses,
    /// A NOERROR answer without records, not a referral.
    Nodata,
    /// NXDOMAIN.
    Nxdomains,
    /// No answer, NS records in the authority section, not authoritative.
    Referrals,
    /// Any other rcode.
    Errors,
    /// A request (`requests-per-second`), before any answer.
    Requests,
}

impl Category {
    /// Every category, in slot order.
    pub const ALL: [Self; 6] = [
        Self::Responses,
        Self::Nodata,
        Self::Nxdomains,
        Self::Referrals,
        Self::Errors,
        Self::Requests,
    ];

    /// Its index in [`RrlConfig::rates`](super::RrlConfig::rates) and the counters.
    pub fn slot(self) -> usize {
        self as usize
    }

    /// Its `category` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Responses => "responses",
            Self::Nodata => "nodata",
            Self::Nxdomains => "nxdomains",
            Self::Referrals => "referrals",
            Self::Errors => "errors",
            Self::Requests => "requests",
        }
    }

    /// The category of `reply`; `None` for a reply that is not sent anyway, or that is
    /// already a limit's slip (`fairness`'s truncated reply, no bigger than its question).
    pub fn of(reply: &Reply) -> Option<Self> {
        let (rcode, authority, aa): (ResponseCode, &[Record], bool) = match reply {
            Reply::Dropped | Reply::Truncated => return None,
            Reply::Authoritative(a) => (a.rcode, &a.authority, true),
            Reply::Forwarded(f) => (f.rcode, &f.authority, f.flags.authoritative.unwrap_or(false)),
            Reply::Rcode(r) => (*r, &[], false),
            Reply::Failed(f) => (f.rcode, &[], false),
        };
        Some(match rcode {
            ResponseCode::NXDomain => Self::Nxdomains,
            ResponseCode::NoError if !reply.answers().is_empty() => Self::Responses,
            ResponseCode::NoError
                if !aa
                    && authority.iter().any(|r| r.record_type() == RecordType::NS)
                    && !authority.iter().any(|r| r.record_type() == RecordType::SOA) =>
            {
                Self::Referrals
            }
            ResponseCode::NoError => Self::Nodata,
            _ => Self::Errors,
        })
    }
}
