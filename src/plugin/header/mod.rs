//! The `header` plugin: sets or clears header flags of the questions the rest of the chain is
//! asked (`query` rules: the RD bit) and of the replies it gives (`response` rules: AA, RA, RD),
//! as CoreDNS's *header* does. See this folder's README.

pub mod handler;
pub mod setup;

pub use handler::Header;
pub use setup::HeaderConfig;
