//! What `arch list` and `arch show` print as JSON.

use serde::Serialize;

use super::{Arch, ArchTable, TargetId};

pub const ARCHES_SCHEMA: &str = "rocforge.arches/1";
pub const ARCH_SCHEMA: &str = "rocforge.arch/1";

/// Every target the table knows, in its order.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Arches {
    pub schema: &'static str,
    pub arches: Vec<Arch>,
}

impl Arches {
    pub fn of(table: &ArchTable) -> Arches {
        Arches {
            schema: ARCHES_SCHEMA,
            arches: table.iter().cloned().collect(),
        }
    }
}

/// One target: the ID as asked for (or as its KFD version names it) and its table entry.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Shown {
    pub schema: &'static str,
    pub target: TargetId,
    pub arch: Arch,
}

impl Shown {
    pub fn new(target: TargetId, arch: &Arch) -> Shown {
        Shown {
            schema: ARCH_SCHEMA,
            target,
            arch: arch.clone(),
        }
    }
}
