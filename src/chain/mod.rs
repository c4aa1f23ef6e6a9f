//! The plugin contract: what a plugin says about itself, the chain a question walks through a
//! server block's plugins, and what a directive's setup gives the runtime.
//!
//! The server reads only what a plugin declares ([`Plugin`]): its name (the `plugin` label of
//! the replies it writes), whether it may await I/O (the UDP workers hand such questions to a
//! task) and what its answer depends on ([`Replay`]: may the server send the same response again
//! for the same request bytes while the cluster zones are unchanged, and may a cache before the
//! plugin keep it, or was it decided for the client who asked?). The safe default is "decided for
//! this client": a plugin that forgets to declare costs speed, never a leak. Every store of
//! answers honours it (the memo, the cache and its prefetch and serve_stale); the test
//! `tests/integration/project/contract.rs` asks every registered directive from two clients. The server
//! never names a plugin; which plugins exist and their order is the registry's business
//! (`plugin::registry`).
//!
//! [`Plugin`] holds only what the server calls on every plugin. What some plugins have and
//! others use (upstreams, search paths, zone transfers, EDNS options, metadata, client classes,
//! a startup wait) a plugin offers by type ([`Plugin::offers`]), found one way:
//! [`Chain::offered`] and [`Next::offered`]. The chain collects the offers once when it is
//! built, and picks out those the server reads per question, so no question looks one up.
//!
//! The runtime reads only what a directive's setup gives it ([`Configured`]): the server
//! settings it writes ([`BlockSettings`], HTTP routes among them), the long-lived resources it
//! keeps in [`Resources`] across configurations and offers its block by type
//! ([`Capabilities`]), and the plugin or observer it builds. The runtime never names a plugin.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `walk.rs` | the [`Plugin`] trait, [`Next`], the [`Chain`] and its traced walk |
//! | `replay.rs` | the answer memo's contract: [`Replay`], [`Scope`], [`Lifetime`], [`ReplayPlan`] |
//! | `capability.rs` | what plugins offer, found by type ([`Capabilities`]), and the offers the server and the runtime read ([`EdnsOptions`], [`MetadataSource`], [`ClientClasses`], [`StartupWait`], [`OwnEndpoint`]) |
//! | `observer.rs` | [`Observer`] and the [`Exchange`] it sees |
//! | `setup.rs` | the setup contract: [`SetupCtx`], [`Configured`], [`BuildCtx`], [`Built`] |
//! | `settings.rs` | [`BlockSettings`], [`HttpRoute`], [`BlockFilter`] |
//! | `resources.rs` | [`Resources`]: the typed store that outlives configurations |
//! | `ready.rs` | [`Readiness`]: what `/ready` reads |
//! | `auth.rs` | [`RequestAuth`]: a block's check of signed requests and the signing of replies |
//!
//! What plugins share only with one another (upstreams, search paths, taps, shares, ...) is
//! not here: it is the plugin kit, `plugin::kit`.
//!
//! Imports `proto`, `corefile` and `telemetry`.

mod auth;
mod capability;
mod observer;
mod ready;
mod replay;
mod resources;
mod settings;
mod setup;
mod walk;

pub use auth::{RequestAuth, ResponseSigner, SignedRequest, Verdict};
pub use capability::{Capabilities, ClientClasses, EdnsOptions, MetadataSource, OwnEndpoint, StartupWait};
pub use observer::{Exchange, Observer};
pub use ready::{Readiness, ReadinessCheck};
pub use replay::{ClientClass, Lifetime, Replay, ReplayPlan, Replayed, Scope, ZoneMark, reorder};
pub use resources::{Acquired, Resources};
pub use settings::{
    BlockFilter, BlockSettings, HttpCtx, HttpRoute, ListenerSettings, ProxyPolicy, ProxyProtocol,
    QuicOptions, ReloadSettings, StreamTimeouts,
};
#[cfg(test)]
pub use setup::set_up;
pub use setup::{AcquireCtx, AcquireError, AcquireFuture, BuildCtx, Built, Configured, NamedFile, SetupCtx};
pub use walk::{Answered, Chain, Detached, DetachedNext, Next, Now, Plugin, ReplyFuture};
