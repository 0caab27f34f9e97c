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
    /// The entries, each with the disk its tree takes (`tree_bytes`: measured now for an entry
    /// whose build did not record it).
    pub fn of(store: &Store, entries: Vec<EntryMeta>) -> Listing {
        let entries = entries
            .into_iter()
            .map(|mut e| {
                e.tree_bytes = store.tree_disk(&e);
                e
            })
            .collect();
        Listing {
            schema: STORE_SCHEMA,
            root: store.root().to_path_buf(),
            entries,
        }
    }

    /// The disk every entry's tree takes, summed.
    pub fn disk_bytes(&self) -> u64 {
        self.entries.iter().filter_map(|e| e.tree_bytes).sum()
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
