//! The core wing: the values every other wing shares and the formats' vocabulary. Content
//! keys, component names and the artifact identity (ids), GPU targets (arch), diagnostics with
//! source excerpts and hints (diag), sizes, durations and dates (units), and what is hidden
//! from messages (redact). It depends on no other wing.

pub mod arch;
pub mod diag;
pub mod ids;
pub mod open_enum;
pub mod redact;
pub mod units;

// What `open_enum!` expands to names these through `$crate`, so a crate using it needs neither.
#[doc(hidden)]
pub use schemars as __schemars;
#[doc(hidden)]
pub use serde as __serde;
