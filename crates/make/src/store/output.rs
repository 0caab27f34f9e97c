//! What `store list` and `store show` print as JSON.

use std::path::PathBuf;

use serde::Serialize;

use super::{EntryMeta, Store};

pub const STORE_SCHEMA: &str = "rocforge.store/1";
pub const STORE_ENTRY_SCHEMA: &str = "rocforge.store-entry/1";

/// Every entry of a store.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Listing {
    pub schema: &'static str,
    /// The store's directory.
    pub root: PathBuf,
    pub entries: Vec<EntryMeta>,
}

impl Listing {
    pub fn of(store: &Store, entries: Vec<EntryMeta>) -> Listing {
        Listing {
            schema: STORE_SCHEMA,
            root: store.root().to_path_buf(),
            entries,
        }
    }
}

/// One entry: its meta.json with the output's identifier beside its fields.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Shown {
    pub schema: &'static str,
    #[serde(flatten)]
    pub entry: EntryMeta,
}

impl Shown {
    pub fn new(entry: EntryMeta) -> Shown {
        Shown {
            schema: STORE_ENTRY_SCHEMA,
            entry,
        }
    }
}
