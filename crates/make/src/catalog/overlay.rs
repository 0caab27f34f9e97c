//! `--overlay COMPONENT:PATH=DIR`, an input of a plan like the recipes and the lock: reading
//! and applying one is source work (`source::derive`).

use std::path::PathBuf;

use serde::Serialize;

/// Replace PATH of COMPONENT's source with DIR's contents.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Overlay {
    pub component: crate::ids::ComponentName,
    pub dest: String,
    #[serde(skip)]
    pub dir: PathBuf,
    /// Content digest of DIR: part of the source and content keys.
    pub sha256: String,
}
