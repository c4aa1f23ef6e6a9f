//! What a configured `errors` directive holds once parsed (`setup.rs` reads the Corefile into it):
//! its `consolidate` patterns, each with its period and log level; what the observer (`handler.rs`)
//! logs with.

use std::time::Duration;

use regex::Regex;

/// The level a consolidated line is logged at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `warning`.
    Warning,
    /// `error` (the default).
    Error,
    /// `info`.
    Info,
    /// `debug`.
    Debug,
}

/// One `consolidate DURATION REGEXP [LEVEL] [show_first]` line.
#[derive(Debug, Clone)]
pub struct Consolidate {
    /// The period one summary line covers.
    pub period: Duration,
    /// The failures it folds.
    pub pattern: Regex,
    /// The summary's level.
    pub level: Level,
    /// `show_first`: the first failure of each period is logged at once (at `level`), and
    /// the summary is only written when more followed it.
    pub show_first: bool,
}

/// `errors { ... }`.
#[derive(Debug, Clone, Default)]
pub struct ErrorsConfig {
    /// `consolidate` lines, in file order: a failure goes to the first that matches.
    pub consolidate: Vec<Consolidate>,
}
