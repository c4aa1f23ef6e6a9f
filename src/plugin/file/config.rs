//! What a configured `file` directive holds once parsed (`setup.rs` reads the Corefile into it):
//! its zone files, their origins and how often they are re-read; what the handler (`handler.rs`)
//! serves.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::rr::Name;

use crate::corefile::Location;
use crate::plugin::kit::ZoneData;

/// One `file` line: a master file and the zones read from it.
#[derive(Debug, Clone)]
pub struct ZoneFile {
    /// The file, as it is opened.
    pub path: PathBuf,
    /// Where the Corefile names it.
    pub at: Location,
    /// The zones read from it (each with the file's relative names under it) and, for each,
    /// what was read at setup (`None`: the file could not be read, and is tried again).
    pub zones: Vec<(Name, Option<Arc<ZoneData>>)>,
    /// How often the file is checked for a change; zero: never.
    pub reload: Duration,
    /// A change is a new modification time (`reload_by_mtime`), not a greater SOA serial.
    pub by_mtime: bool,
}

/// The `file` directives of one block.
#[derive(Debug, Clone, Default)]
pub struct FileConfig {
    /// The files, in Corefile order (a zone named twice is answered from the first).
    pub files: Vec<ZoneFile>,
    /// `fallthrough [ZONES...]`: `None` off; an empty list for every zone.
    pub fallthrough: Option<Vec<String>>,
}
