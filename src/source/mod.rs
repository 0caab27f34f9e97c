//! Sources: turning a recipe's `[source]` and `[patches]` into an exact, patched tree.

pub mod download;
pub mod patch;
