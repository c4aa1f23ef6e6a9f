//! The plugin kit: what plugins share with one another and the server never reads (as
//! CoreDNS's `plugin/pkg`). Every plugin may import it; it imports no plugin, and the runtime
//! does not import it.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `capability.rs` | what plugins offer each other by type: [`Upstreams`], [`SearchPaths`], [`ZoneTransfer`], [`Notifier`], [`ClusterFamilies`] |
//! | `share.rs` | who a client is ([`ClientDirectory`]) and its share of the upstream ([`UpstreamShare`]) |
//! | `tap.rs` | [`Tap`]: dnstap's hook for `forward`'s upstream exchanges |
//! | `fallthrough.rs` | [`Fallthrough`]: the names a plugin's `fallthrough` hands on |
//! | `periodic.rs` | [`reload_every`]: the timer that checks a plugin's files for changes |
//! | `setup.rs` | [`previous`]: the earlier use of a directive whose setup folds repeated uses |
//! | `journal.rs` | [`Journal`]: a zone's differences between versions, for IXFR (`file`, `kubernetes`, `secondary`) |
//! | `held.rs` | [`HeldZone`]: a zone's version answering now and its journal, replaced whole by one task (`file`, `secondary`) |
//! | `zone.rs` | [`ZoneData`]: one authoritative zone's records and the lookup that answers from them (`file`, `secondary`) |
//! | `tsig.rs` | TSIG's MACs ([`tsig::Algorithm`]) and its client side ([`tsig::TsigKey`]: a request signed, each message of its response checked; `tsig`, `secondary`) |
//!
//! Imports `proto` and `chain`.

mod capability;
mod fallthrough;
mod held;
mod journal;
mod periodic;
mod setup;
mod share;
mod tap;
pub mod tsig;
mod zone;

pub use capability::{
    ClusterFamilies, Notifier, SearchPaths, ServiceFamilies, Upstreams, ZoneNotifier, ZoneTransfer,
};
pub use fallthrough::Fallthrough;
pub use held::{HeldZone, serve_held};
pub use journal::Journal;
pub use periodic::reload_every;
pub use setup::previous;
pub use share::{ClientDirectory, FairShare, PodNamespaces, Refusal, UpstreamShare, UpstreamTicket};
pub use tap::{Tap, TapKind, TapMessage, TapSink};
pub use zone::{Lookup, ZoneData, ZoneError, serial_after};
