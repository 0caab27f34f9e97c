//! Sources: turning a recipe's `[source]` and `[patches]` into an exact, patched tree.

pub mod cache;
pub mod derive;
pub mod git;
pub mod pairing;
pub mod patch;
pub mod prepare;
pub mod resolved;
pub mod series;
pub mod tree;
pub mod verify;
pub mod version;
