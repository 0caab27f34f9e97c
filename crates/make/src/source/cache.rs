//! The source cache: fetched object stores, downloads, and patched source trees keyed by what
//! went into them. Entries are built in a staging directory and renamed into place, under a
//! file lock, so concurrent rocforge processes build each entry once and a crash leaves no
//! partial entry.
//!
//! Layout under `$ROCFORGE_CACHE` (default `$XDG_CACHE_HOME/rocforge`):
//! `git/<url hash>/` bare repositories, `downloads/<sha256>` verified files,
//! `src/<key>/tree` patched trees with `src/<key>/source.json`, `locks/` lock files.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Cache {
    root: PathBuf,
}

/// An exclusive lock held until dropped.
pub use crate::fsutil::Lock;

impl Cache {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `$ROCFORGE_CACHE`, else `$XDG_CACHE_HOME/rocforge`, else `~/.cache/rocforge`.
    pub fn default_root() -> PathBuf {
        if let Some(p) = std::env::var_os("ROCFORGE_CACHE") {
            return PathBuf::from(p);
        }
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(|| PathBuf::from(".cache"))
            .join("rocforge")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn source_dir(&self, key: &str) -> PathBuf {
        self.root.join("src").join(key)
    }

    pub fn download_path(&self, sha256: &str) -> PathBuf {
        self.root.join("downloads").join(sha256)
    }

    /// Takes an exclusive lock named `name` in the cache's `locks/` directory.
    pub fn lock(&self, name: &str, timeout: Duration, on_wait: &dyn Fn()) -> std::io::Result<Lock> {
        crate::fsutil::lock(&self.root.join("locks"), name, timeout, on_wait)
    }

    /// Source entries present: (key, directory).
    pub fn source_entries(&self) -> Vec<(String, PathBuf)> {
        let Ok(rd) = std::fs::read_dir(self.root.join("src")) else {
            return Vec::new();
        };
        let mut out: Vec<(String, PathBuf)> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (!name.starts_with('.') && e.path().join("source.json").is_file())
                    .then(|| (name, e.path()))
            })
            .collect();
        out.sort();
        out
    }

    /// Leftover staging directories of killed runs (names start with '.'), skipping any that a
    /// live process is still filling (it holds the entry's lock).
    pub fn stale_staging(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(self.root.join("src")) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let key = name.strip_prefix('.')?.split(".tmp-").next()?.to_string();
                let free = self
                    .lock(&format!("src-{key}"), Duration::ZERO, &|| {})
                    .is_ok();
                free.then(|| e.path())
            })
            .collect()
    }
}
