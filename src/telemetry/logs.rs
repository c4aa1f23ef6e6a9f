//! How the process writes its log lines, as far as the plugins that write their own need to know
//! (the `log` plugin's query lines): one process-wide setting, written once at start by the
//! runtime's logging set-up (`--log-format`) and read on every line.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set when `--log-format json`: every line, query lines included, is one JSON object.
static JSON: AtomicBool = AtomicBool::new(false);

/// Says whether the process's lines are JSON objects (the runtime calls it once at start).
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

/// True when the process's lines are JSON objects (`--log-format json`).
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}
