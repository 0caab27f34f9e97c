//! The content-addressed store of install trees.
//!
//! Layout: `<store>/<key>/{meta.json, hash-input.json, build.log, tree/}`. An entry is
//! assembled in `<store>/.tmp-<key>-…`, under the lock `<store>/.locks/<key>.lock`, and renamed
//! into place, so a present `meta.json` means a complete entry and a kill -9 at any moment
//! leaves none half-made. Locally built builder images are recorded in `<store>/.images/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::arch::TargetId;
use crate::ids::{ArtifactId, ComponentName, ContentKey};
use crate::plan::{LocalImage, StoreView};

pub mod output;

/// An entry's `meta.json`. Its layout predates [`ArtifactId`] (`component`, not `name`, and
/// the build's facts between the identity's fields) and stays, so every store on disk reads;
/// [`EntryMeta::artifact_id`] gives the identity the formats made from it carry.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntryMeta {
    pub component: ComponentName,
    pub key: ContentKey,
    /// Seconds since the epoch when the entry was committed.
    pub committed: u64,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub release: String,
    #[serde(default)]
    pub targets: Vec<TargetId>,
    #[serde(default)]
    pub runtime: crate::runtime::RuntimeName,
    /// False for host builds: their output depends on the host.
    #[serde(default = "yes")]
    pub reproducible: bool,
    #[serde(default)]
    pub image: Option<crate::plan::key::ImageRef>,
    #[serde(default)]
    pub started: u64,
    #[serde(default)]
    pub duration_secs: f64,
    #[serde(default)]
    pub source_commit: Option<String>,
    /// The SOURCE_DATE_EPOCH the build ran with (the source's own date): every packaged file's
    /// mtime and an application image's `created`. None in entries made before it was
    /// recorded, which package as they did then, with 0 ([`EntryMeta::source_date`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_date_epoch: Option<u64>,
    /// The code-object coverage gate's result (None for components without device code).
    #[serde(default)]
    pub coverage: Option<crate::inspect::CoverageRecord>,
    /// License files the build copied from the source, relative to the tree
    /// (`share/doc/<component>/…`).
    #[serde(default)]
    pub licenses: Vec<String>,
    /// The disk the entry's tree takes, and its build directory took when the build ended:
    /// together the most the build took at once (`[resources]` `installed` and `disk`, as
    /// measured). None in entries made before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_bytes: Option<u64>,
}

impl EntryMeta {
    /// The date packaging and `image create` give the entry's files. An entry from before the
    /// date was recorded gets 0, what it was packaged with then: its published tarballs stay
    /// byte for byte what packaging it again gives, and no hours-long build is needed.
    pub fn source_date(&self) -> u64 {
        self.source_date_epoch.unwrap_or(0)
    }

    pub fn artifact_id(&self) -> ArtifactId {
        ArtifactId {
            name: self.component.clone(),
            version: self.version.clone(),
            release: self.release.clone(),
            targets: self.targets.clone(),
            key: self.key.clone(),
        }
    }
}

fn yes() -> bool {
    true
}

pub struct Store {
    root: PathBuf,
    newest: OnceLock<BTreeMap<String, EntryMeta>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("no store entry {0}")]
    NotFound(String),
    /// Ctrl-C while another process held the entry's lock.
    #[error("interrupted while another rocforge process was building {key}")]
    Interrupted { key: String },
    /// Another process holds the entry's lock: it is building or replacing it.
    #[error("store entry {key} is in use by another rocforge process (a build of it)")]
    Busy { key: String },
}

impl crate::diag::Hint for StoreError {
    fn hint(&self) -> String {
        match self {
            StoreError::Io { .. } => "check free disk space and permissions of the store (--store, ROCFORGE_STORE)".into(),
            StoreError::NotFound(_) => "`rocforge store list` shows the entries; a key prefix of 8 or more characters is enough".into(),
            StoreError::Interrupted { .. } => "run the same command again to continue".into(),
            StoreError::Busy { .. } => "wait for that build to finish, then run the command again".into(),
        }
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A reserved entry being assembled; dropped without `commit`, it is removed.
pub struct Staging {
    staged: crate::fsutil::Staged,
    pub key: String,
    _lock: crate::fsutil::Lock,
}

impl Staging {
    pub fn dir(&self) -> &Path {
        self.staged.path()
    }

    pub fn tree(&self) -> PathBuf {
        self.dir().join("tree")
    }

    pub fn log(&self) -> PathBuf {
        self.dir().join("build.log")
    }

    /// Writes the metadata and renames the entry into place.
    pub fn commit(
        self,
        meta: &EntryMeta,
        hash_input: &serde_json::Value,
    ) -> Result<PathBuf, StoreError> {
        let hi = self.dir().join("hash-input.json");
        crate::fsutil::write_atomic(
            &hi,
            &serde_json::to_vec_pretty(hash_input).expect("plain data"),
        )
        .map_err(io(&hi))?;
        crate::fault::point("build");
        // The tree's files reach the disk before the mark that says they are whole.
        crate::fsutil::sync_filesystem(self.dir());
        // meta.json last: its presence marks a complete entry.
        let m = self.dir().join("meta.json");
        crate::fsutil::write_atomic(&m, &serde_json::to_vec_pretty(meta).expect("plain data"))
            .map_err(io(&m))?;
        crate::fault::point("build");
        let target = self.staged.target().to_path_buf();
        let dir = self.staged.commit().map_err(io(&target))?;
        crate::fault::point("build");
        Ok(dir)
    }
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

    pub fn tree(&self, key: &str) -> PathBuf {
        self.root.join(key).join("tree")
    }

    /// The disk an entry's tree takes: as its build recorded it, or measured now for an entry
    /// made before builds recorded it. None when the tree cannot be read.
    pub fn tree_disk(&self, entry: &EntryMeta) -> Option<u64> {
        entry
            .tree_bytes
            .or_else(|| crate::fsutil::disk_usage(&self.tree(&entry.key)).ok())
    }

    /// Locks live in `<store>/.locks`, out of the way of entry names.
    fn lock(
        &self,
        key: &str,
        timeout: Duration,
        on_wait: &dyn Fn(),
    ) -> std::io::Result<crate::fsutil::Lock> {
        crate::fsutil::lock(&self.root.join(".locks"), key, timeout, on_wait)
    }

    /// Reserves `key` for building. Returns None when another process committed it meanwhile
    /// (the caller then uses that entry). Waits while another process builds the same key.
    pub fn reserve(&self, key: &str, on_wait: &dyn Fn()) -> Result<Option<Staging>, StoreError> {
        self.reserve_unless(key, on_wait, &AtomicBool::new(false))
    }

    /// [`Store::reserve`], ending the wait for another process as soon as `stop` is set.
    pub fn reserve_unless(
        &self,
        key: &str,
        on_wait: &dyn Fn(),
        stop: &AtomicBool,
    ) -> Result<Option<Staging>, StoreError> {
        std::fs::create_dir_all(&self.root).map_err(io(&self.root))?;
        let lock = crate::fsutil::lock_unless(
            &self.root.join(".locks"),
            key,
            Duration::from_secs(48 * 3600),
            on_wait,
            &|| stop.load(Ordering::SeqCst) || crate::interrupt::requested(),
        )
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::Interrupted => StoreError::Interrupted {
                key: key.to_string(),
            },
            _ => io(&self.root)(e),
        })?;
        if self.contains(key) {
            return Ok(None);
        }
        // Named for the key, not the process: clean_staging finds it by its lock.
        let staged = crate::fsutil::Staged::dir_in(
            &self.root,
            &format!(".tmp-{key}-"),
            &self.entry_dir(key),
        )
        .map_err(io(&self.root))?;
        std::fs::create_dir_all(staged.path().join("tree")).map_err(io(staged.path()))?;
        Ok(Some(Staging {
            staged,
            key: key.to_string(),
            _lock: lock,
        }))
    }

    /// Removes staging directories of killed runs (their lock is free).
    pub fn clean_staging(&self) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return removed;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(key) = name
                .strip_prefix(".rebuild-")
                .and_then(|r| r.split('-').next())
                .filter(|k| is_key(k))
            {
                if self.settle_aside(key, false).is_ok() && !e.path().exists() {
                    removed.push(e.path());
                }
                continue;
            }
            let Some(rest) = name.strip_prefix(".tmp-") else {
                continue;
            };
            let key = rest.split('-').next().unwrap_or_default();
            // Only key-named staging is reserved through a lock; `.tmp-<pid>-…` (a cache push's
            // scratch) is reaped below by its process.
            if !is_key(key) {
                continue;
            }
            if let Ok(_lock) = self.lock(key, Duration::ZERO, &|| {}) {
                let _ = crate::fsutil::remove_tree(&e.path());
                removed.push(e.path());
            }
        }
        removed.extend(crate::fsutil::reap_temp(&self.root, ".tmp-"));
        removed
    }

    pub fn entries(&self) -> Vec<EntryMeta> {
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut out: Vec<EntryMeta> = rd
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| {
                serde_json::from_slice(&std::fs::read(e.path().join("meta.json")).ok()?).ok()
            })
            .collect();
        out.sort_by(|a, b| (a.committed, &a.component).cmp(&(b.committed, &b.component)));
        out
    }

    /// The metadata of the entry whose key is exactly `key`.
    pub fn meta(&self, key: &str) -> Result<EntryMeta, StoreError> {
        let path = self.entry_dir(key).join("meta.json");
        let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => StoreError::NotFound(key.to_string()),
            _ => io(&path)(e),
        })?;
        serde_json::from_slice(&bytes).map_err(|e| StoreError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })
    }

    /// The entry whose key is `key` or starts with it (at least 8 characters).
    pub fn find(&self, key: &str) -> Result<EntryMeta, StoreError> {
        let matches: Vec<EntryMeta> = self
            .entries()
            .into_iter()
            .filter(|e| key.len() >= 8 && e.key.starts_with(key))
            .collect();
        match matches.len() {
            1 => Ok(matches.into_iter().next().expect("one match")),
            _ => Err(StoreError::NotFound(key.to_string())),
        }
    }

    pub fn remove(&self, key: &str) -> Result<(), StoreError> {
        let dir = self.entry_dir(key);
        // Rename first so a crash mid-removal never leaves a half-entry under the key.
        let doomed = self.root.join(format!(".tmp-{key}-gc"));
        std::fs::rename(&dir, &doomed).map_err(io(&dir))?;
        crate::fsutil::remove_tree(&doomed).map_err(io(&doomed))
    }

    /// Removes the entry `key` unless another process holds its lock (a build committing or
    /// waiting on it): a tree in use is never pulled from under it. The entry is renamed out of
    /// its key first, so a crash leaves either the whole entry or none.
    pub fn remove_unless_busy(&self, key: &str) -> Result<(), StoreError> {
        let _lock = self.lock_now(key)?;
        if !self.contains(key) {
            return Err(StoreError::NotFound(key.to_string()));
        }
        self.remove(key)
    }

    /// Where a rebuild by process `pid` keeps the entry it replaces: named for the process, so
    /// only its own run, or a later one once it is gone, settles it.
    fn aside_dir(&self, key: &str, pid: u32) -> PathBuf {
        self.root.join(format!(".rebuild-{key}-{pid}"))
    }

    /// The asides of `key` and the processes that made them.
    fn asides(&self, key: &str) -> Vec<(PathBuf, u32)> {
        let prefix = format!(".rebuild-{key}-");
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let pid = name.strip_prefix(&prefix)?.parse().ok()?;
                Some((e.path(), pid))
            })
            .collect()
    }

    /// Moves the entry out of its key so the next build makes it again (`build --rebuild`).
    /// The old entry is kept until [`Store::settle_aside`] sees whether a new one was
    /// committed: a rebuild that fails or is stopped puts it back.
    pub fn set_aside(&self, key: &str) -> Result<(), StoreError> {
        let _lock = self.lock_now(key)?;
        for (old, pid) in self.asides(key) {
            // Left by a rebuild killed before it settled; the entry is the newer of the two.
            if !crate::process::pid_alive(pid) {
                crate::fsutil::remove_tree(&old).map_err(io(&old))?;
            }
        }
        let dir = self.entry_dir(key);
        let aside = self.aside_dir(key, std::process::id());
        std::fs::rename(&dir, &aside).map_err(io(&dir))
    }

    /// After this process's rebuild (`mine`), or for one whose process is gone: the old entry
    /// is removed when a new one was committed under its key, else it goes back. Left alone
    /// while another process holds the key (it is building it).
    pub fn settle_aside(&self, key: &str, mine: bool) -> Result<(), StoreError> {
        let me = std::process::id();
        for (aside, pid) in self.asides(key) {
            let ours = pid == me;
            if ours != mine || (!ours && crate::process::pid_alive(pid)) {
                continue;
            }
            let Ok(_lock) = self.lock_now(key) else {
                return Ok(());
            };
            if self.contains(key) {
                crate::fsutil::remove_tree(&aside).map_err(io(&aside))?;
            } else {
                let dir = self.entry_dir(key);
                std::fs::rename(&aside, &dir).map_err(io(&aside))?;
            }
        }
        Ok(())
    }

    /// The key's lock if it is free now: [`StoreError::Busy`] otherwise.
    fn lock_now(&self, key: &str) -> Result<crate::fsutil::Lock, StoreError> {
        self.lock(key, Duration::ZERO, &|| {})
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::TimedOut => StoreError::Busy {
                    key: key.to_string(),
                },
                _ => io(&self.root)(e),
            })
    }

    pub fn record_local_image(&self, release: &str, image: &LocalImage) -> Result<(), StoreError> {
        let p = self.root.join(".images").join(format!("{release}.json"));
        crate::fsutil::write_atomic(&p, &serde_json::to_vec_pretty(image).expect("plain data"))
            .map_err(io(&p))
    }

    /// What `rocforge image build` recorded for `release`'s builder image.
    pub fn local_image_record(&self, release: &str) -> Option<LocalImage> {
        let text = std::fs::read(self.root.join(".images").join(format!("{release}.json"))).ok()?;
        serde_json::from_slice(&text).ok()
    }

    fn newest(&self) -> &BTreeMap<String, EntryMeta> {
        self.newest.get_or_init(|| {
            let mut map: BTreeMap<String, EntryMeta> = BTreeMap::new();
            for meta in self.entries() {
                let newer = map
                    .get(meta.component.as_str())
                    .is_none_or(|m| (m.committed, &m.key) < (meta.committed, &meta.key));
                if newer {
                    map.insert(meta.component.to_string(), meta);
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

    fn duration(&self, component: &str) -> Option<f64> {
        self.newest()
            .get(component)
            .map(|m| m.duration_secs)
            .filter(|d| *d > 0.0)
    }

    fn measured(&self, component: &str) -> Option<crate::plan::Measured> {
        let m = self.newest().get(component)?;
        (m.duration_secs > 0.0).then_some(crate::plan::Measured {
            secs: m.duration_secs,
            targets: m.targets.len(),
            disk: m
                .tree_bytes
                .zip(m.build_bytes)
                .map(|(installed_bytes, build_bytes)| crate::plan::MeasuredDisk {
                    installed_bytes,
                    build_bytes,
                }),
        })
    }

    fn local_image(&self, release: &str) -> Option<LocalImage> {
        self.local_image_record(release)
    }
}

fn is_key(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}
/// Where license files go, relative to the install tree.
pub fn doc_dir(component: &str) -> String {
    format!("share/doc/{component}")
}

const LICENSE_WORDS: [&str; 5] = ["LICENSE", "LICENCE", "COPYING", "NOTICE", "COPYRIGHT"];

/// Whether a file name looks like a license file.
pub fn is_license_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    LICENSE_WORDS.iter().any(|p| up.starts_with(p))
}

/// Whether a file name in `share/doc/<component>/` names a license file: as
/// [`is_license_name`], or with one of those words anywhere (`hip-LICENSE.txt`).
pub fn mentions_license(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    LICENSE_WORDS.iter().any(|p| up.contains(p))
}
