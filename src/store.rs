//! The content-addressed store of install trees, as the planner sees it: which keys are
//! present, and the hash input of a component's most recent entry (to say what changed).
//!
//! Layout: `<store>/<key>/meta.json`, `<store>/<key>/hash-input.json`, `<store>/<key>/tree/`.
//! An entry exists only once its directory has been renamed into place, so a present
//! `meta.json` means a complete entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryMeta {
    pub component: String,
    pub key: String,
    /// Seconds since the epoch when the entry was committed.
    pub committed: u64,
}

/// What the planner asks of a store. A trait so plans can be computed against a fake in
/// unit tests and against a directory everywhere else.
pub trait StoreView {
    fn contains(&self, key: &str) -> bool;
    /// Hash input of the newest entry for `component`, if any.
    fn previous(&self, component: &str) -> Option<serde_json::Value>;
}

/// A store that has nothing: every component is new.
pub struct EmptyStore;

impl StoreView for EmptyStore {
    fn contains(&self, _: &str) -> bool {
        false
    }
    fn previous(&self, _: &str) -> Option<serde_json::Value> {
        None
    }
}

pub struct Store {
    root: PathBuf,
    newest: OnceLock<BTreeMap<String, EntryMeta>>,
}

impl Store {
    pub fn open(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            newest: OnceLock::new(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `$ROCFORGE_STORE`, else `$XDG_DATA_HOME/rocforge/store`, else `~/.local/share/rocforge/store`.
    pub fn default_root() -> PathBuf {
        if let Some(p) = std::env::var_os("ROCFORGE_STORE") {
            return PathBuf::from(p);
        }
        let data = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        data.join("rocforge/store")
    }

    pub fn entry_dir(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    fn newest(&self) -> &BTreeMap<String, EntryMeta> {
        self.newest.get_or_init(|| {
            let mut map: BTreeMap<String, EntryMeta> = BTreeMap::new();
            let Ok(rd) = std::fs::read_dir(&self.root) else {
                return map;
            };
            for e in rd.flatten() {
                let Ok(text) = std::fs::read(e.path().join("meta.json")) else {
                    continue;
                };
                let Ok(meta) = serde_json::from_slice::<EntryMeta>(&text) else {
                    continue;
                };
                let newer = map
                    .get(&meta.component)
                    .is_none_or(|m| (m.committed, &m.key) < (meta.committed, &meta.key));
                if newer {
                    map.insert(meta.component.clone(), meta);
                }
            }
            map
        })
    }
}

impl StoreView for Store {
    fn contains(&self, key: &str) -> bool {
        is_key(key) && self.root.join(key).join("meta.json").is_file()
    }

    fn previous(&self, component: &str) -> Option<serde_json::Value> {
        let meta = self.newest().get(component)?;
        let text = std::fs::read(self.root.join(&meta.key).join("hash-input.json")).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

fn is_key(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}
