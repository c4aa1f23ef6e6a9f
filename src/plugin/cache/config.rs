//! What a configured `cache` directive holds once parsed (`setup.rs` reads the Corefile into it):
//! its zones, its sections' bounds, `prefetch` and `serve_stale`; what the handler (`handler.rs`)
//! and the store (`store.rs`) run with.

use std::time::Duration;

/// Limits of the success or denial cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// Most entries.
    pub capacity: usize,
    /// TTL cap.
    pub max_ttl: Duration,
    /// TTL floor for forwarded answers (cluster answers never outlive their own TTL).
    pub min_ttl: Duration,
}

/// `prefetch`: refresh a popular entry before it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefetch {
    /// Hits within `duration` that make an entry popular.
    pub amount: u32,
    /// The window the hits are counted in (default 1 minute).
    pub duration: Duration,
    /// Refresh once the remaining TTL is at most this percentage of the original (default 10).
    pub percentage: u8,
}

/// `serve_stale`: answer expired entries when the upstream fails (RFC 8767).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeStale {
    /// How long past expiry an entry may be served (default 1 hour).
    pub duration: Duration,
    /// `verify` (the default here, RFC 8767's "try first"): ask upstream first, answer stale
    /// only if it fails within the client response timer. `immediate`: answer stale at once and
    /// refresh in the background (CoreDNS's default).
    pub verify: bool,
    /// `verify`'s client response timer: how long the upstream is waited for before the stale
    /// answer goes out (the refresh goes on in the background). `None` (`verify 0`): until the
    /// upstream answers or `forward` gives up. Default 1.8 s (RFC 8767 section 5).
    pub verify_timeout: Option<Duration>,
    /// The TTL of stale records (RESPONSE_TTL; default 30 s, as RFC 8767 recommends).
    pub response_ttl: u32,
    /// After a failed refresh, the entry is served stale without asking again for this long
    /// (FAILURE_RECHECK, at most 5 minutes; default 0: the next stale hit asks again).
    pub failure_recheck: Duration,
}

/// The `cache` plugin's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
    /// The zones cached (normalized): the arguments, else the server block's zones.
    pub zones: Vec<String>,
    /// Positive answers.
    pub success: Section,
    /// Negative answers (NXDOMAIN, NODATA).
    pub denial: Section,
    /// How long a SERVFAIL is cached (0: not at all).
    pub servfail: Duration,
    /// `prefetch`.
    pub prefetch: Option<Prefetch>,
    /// `serve_stale`.
    pub serve_stale: Option<ServeStale>,
    /// `serve_stale_policy prefer_positive` (needs `serve_stale`): a positive answer that
    /// answers the question is kept, and preferred, over a later NXDOMAIN, NODATA or failure
    /// while it is fresh or within the stale window; only a positive answer replaces it.
    pub prefer_positive: bool,
    /// `disable success ZONES`.
    pub disable_success: Vec<String>,
    /// `disable denial ZONES`.
    pub disable_denial: Vec<String>,
    /// `keepttl`: hits carry the stored TTLs instead of counting down (CoreDNS 1.9+; for
    /// clients behind a second cache, such as NodeLocal DNSCache).
    pub keepttl: bool,
}
