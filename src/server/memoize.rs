//! After the answer path's stages: what the answer memo keeps of a response just sent over
//! UDP, and with what it is replayed ([`memo::MemoInfo`]): nothing for a failure, a block
//! whose observers need every question, a block with `metadata` or `tsig`, or an answer whose
//! plugins did not all declare it replayable (see [`memo`] for the rules).

use hickory_proto::op::Metadata;
use hickory_proto::rr::RecordType;

use super::map::Response;
use super::memo;
use super::observe;
use super::request::Parsed;
use super::route::Router;

/// Keeps `out`, the response just sent for `req` (its bytes `wire`), in `router`'s memo when
/// it may be replayed: made at the memo's `generation`, read before the answer was made.
pub(super) fn keep(
    router: &Router,
    wire: &[u8],
    generation: u64,
    req: &Parsed<'_>,
    resp: &Response,
    sent: &Metadata,
    out: &[u8],
) {
    if let Some(info) = memo_info(router, req, resp, sent, out) {
        router.memo.insert(wire, generation, out, info);
    }
}

/// What the memo keeps with `out`, the response just sent for `req`, or `None` when it must not
/// keep it (see [`memo`] for the rules).
fn memo_info(
    router: &Router,
    req: &Parsed<'_>,
    resp: &Response,
    sent: &Metadata,
    out: &[u8],
) -> Option<memo::MemoInfo> {
    if resp.failure.is_some() || observe::is_failure(sent.response_code) {
        return None;
    }
    let plan = resp.replay?;
    let (index, zone) = resp.block.as_ref()?;
    let block = router.blocks.get(*index)?;
    // Metadata is made per client (`kubernetes/client-namespace`): a replay would skip it.
    // A signed exchange is never replayed (its signature holds a time).
    if block.observers.need_every_question() || block.metadata.is_some() || block.auth.is_some() {
        return None;
    }
    let question = resp.question.as_ref()?;
    let shuffle = if plan.reordered {
        memo::shuffle_plan(
            out,
            req.question.len(),
            sent.truncation,
            &resp.answers,
            &resp.additional,
        )
        .ok()?
    } else {
        None
    };
    let (scope, serial_at) = memo_scope(router, &plan, resp, out);
    Some(memo::MemoInfo {
        block: *index,
        zone: *zone,
        qtype: question.qtype,
        dnssec_ok: question.dnssec_ok,
        rcode: sent.response_code,
        response: *sent,
        answers: resp.answers.len(),
        counted: plan.counted,
        by: resp.plugin,
        shuffle,
        scope,
        serial_at,
        lifetime: plan.lifetime,
        reads_zones: plan.lifetime.is_none() || plan.reads_zones,
        class: plan.class,
    })
}

/// The scope a memoized response is kept by, and where its SOA serial is: the plan's scope,
/// unless the answer holds a CNAME (made from its target's data too) or carries a SOA whose
/// serial cannot be found once or written on replay; then none (any change makes it stale).
fn memo_scope(
    router: &Router,
    plan: &crate::chain::ReplayPlan,
    resp: &Response,
    out: &[u8],
) -> (Option<u64>, Option<usize>) {
    let Some(scope) = plan.scope else {
        return (None, None);
    };
    if resp.answers.iter().any(|r| r.record_type() == RecordType::CNAME) {
        return (None, None);
    }
    let soas: Vec<&hickory_proto::rr::rdata::SOA> = resp
        .answers
        .iter()
        .chain(&resp.authority)
        .filter_map(|r| match &r.data {
            hickory_proto::rr::RData::SOA(soa) => Some(soa),
            _ => None,
        })
        .collect();
    match soas.as_slice() {
        [] => (Some(scope), None),
        [soa] if router.memo.patches_serials() => match memo::serial_offset(out, soa) {
            Some(at) => (Some(scope), Some(at)),
            None => (None, None),
        },
        _ => (None, None),
    }
}
