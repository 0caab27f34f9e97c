//! The core wing: the values every other wing shares and the formats' vocabulary. Content
//! keys, component names and the artifact identity (ids), GPU targets (arch), diagnostics with
//! source excerpts and hints (diag), sizes, durations and dates (units), and what is hidden
//! from messages (redact). It depends on no other wing.

pub mod arch;
pub mod diag;
pub mod ids;
pub mod redact;
pub mod units;
