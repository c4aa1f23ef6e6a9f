//! Answers checked against references: the conformance table, Knot DNS and NSD on the same zone
//! file, and real Corefiles written by others.

pub mod corefiles;
pub mod differential;
pub mod table;
