//! A shared build cache: before a step is built its content key is looked up, and a hit is
//! pulled into the store instead; after a build the new entry is pushed. Entries are signed by
//! the pusher's key and a pull accepts only trusted keys, so a shared cache cannot be poisoned.
//! The builder sees only the [`BuildCache`] trait; the OCI registry implementation is a
//! delivery (`cache_oci`), which packages an entry the way a release tarball is.

use std::path::{Path, PathBuf};

use crate::ids::ComponentName;
use crate::store::{EntryMeta, Store};

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(transparent)]
    Oci(#[from] crate::oci::OciError),
    #[error("cache entry {key}: {message}")]
    Invalid { key: String, message: String },
    #[error("cache entry {key}: {source}")]
    Signature {
        key: String,
        source: crate::sign::SignError,
    },
    /// The entry's tree did not unpack (the implementation's own extraction error).
    #[error("cache entry {key}: {source}")]
    Extract {
        key: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The implementation could not write a store entry as it sends it, with its hint.
    #[error("{source}")]
    Package {
        source: Box<dyn std::error::Error + Send + Sync>,
        hint: String,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl crate::diag::Hint for CacheError {
    fn hint(&self) -> String {
        match self {
            CacheError::Oci(e) => e.hint(),
            CacheError::Invalid { .. } | CacheError::Extract { .. } => {
                "the cache entry is damaged or forged; it was not used".into()
            }
            CacheError::Signature { source, .. } => source.hint(),
            CacheError::Package { hint, .. } => hint.clone(),
            CacheError::Store(e) => e.hint(),
            CacheError::Io { .. } => "check free disk space".into(),
        }
    }
}

/// A cache hit: where the entry is, pinned (e.g. a manifest digest), so the fetch reads exactly
/// what the lookup found.
#[derive(Debug, Clone)]
pub struct CacheHit {
    pub key: String,
    pub reference: String,
}

/// What a fetch produced, the tree being already in place.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub meta: EntryMeta,
    pub hash_input: serde_json::Value,
    /// The key ID of the trusted key that signed the entry.
    pub signer: String,
}

/// An unfinished build to push as a checkpoint.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub key: String,
    pub component: ComponentName,
    pub steps_done: Option<usize>,
    /// The compiler cache the build used, whose entries it read or wrote go with the build
    /// directory.
    pub ccache: Option<CompilerCache>,
}

/// A ccache directory shared by the builds of one builder image. The entries of one build are
/// those touched since it started (ccache gives a hit's files a new mtime, as its own
/// clean-up needs), newest first up to `max_bytes`: a resume on an empty machine then gets
/// what the stopped build compiled without the other builds' entries.
#[derive(Debug, Clone)]
pub struct CompilerCache {
    pub dir: PathBuf,
    pub since: std::time::SystemTime,
    pub max_bytes: u64,
}

impl CompilerCache {
    /// The cap on a checkpoint's compiler cache: a big library's objects for two targets fit
    /// (rocBLAS's are about 1 GiB), and a push stays short at the end of a job.
    pub const DEFAULT_MAX_BYTES: u64 = 4 << 30;
}

/// What a checkpoint push sent.
#[derive(Debug, Clone, Default)]
pub struct PushedCheckpoint {
    /// Compressed bytes of the build directory and of the compiler cache entries.
    pub tree_bytes: u64,
    pub ccache_bytes: u64,
    /// Compiler cache entries sent, and those left out by the cap.
    pub ccache_files: usize,
    pub ccache_left_out: usize,
}

/// A checkpoint unpacked as a build directory.
#[derive(Debug, Clone)]
pub struct PulledCheckpoint {
    pub signer: String,
    pub steps_done: Option<usize>,
    /// Compiler cache entries put into the local ccache directory (entries it already had are
    /// kept as they are): (files, bytes). None when the checkpoint carries none.
    pub ccache: Option<(usize, u64)>,
}

pub trait BuildCache: Sync {
    /// `oci://…`, for messages.
    fn describe(&self) -> String;
    /// Whether the cache holds `key`.
    fn lookup(&self, key: &str) -> Result<Option<CacheHit>, CacheError>;
    /// Writes the hit's tree into `tree` (an empty directory), checking the signature against
    /// the trusted keys and every byte against what was signed.
    fn fetch(&self, hit: &CacheHit, tree: &Path) -> Result<Fetched, CacheError>;
    /// Whether this cache can push (it has a signing key).
    fn can_push(&self) -> bool;
    /// How the checkpoint of `key` is named in this cache, for messages.
    fn checkpoint_name(&self, key: &str) -> String;
    /// Pushes the store entry `key`.
    fn push(&self, store: &Store, key: &str) -> Result<(), CacheError>;
    /// Pushes the build directory `build` of a stopped build, signed, as the checkpoint of its
    /// key (replacing an older one).
    fn push_checkpoint(
        &self,
        checkpoint: &Checkpoint,
        build: &Path,
    ) -> Result<PushedCheckpoint, CacheError>;
    /// Unpacks the checkpoint of `key` into `build` (an empty or missing directory), checked
    /// against the trusted keys, the key and the component; None when there is none. Its
    /// compiler cache entries go into `ccache` only once all of it has been checked.
    fn pull_checkpoint(
        &self,
        key: &str,
        component: &str,
        build: &Path,
        ccache: Option<&Path>,
    ) -> Result<Option<PulledCheckpoint>, CacheError>;
}

/// What a pull did.
pub enum Pulled {
    /// Not in the cache.
    Miss,
    /// Committed to the store from the cache.
    Pulled { tree: PathBuf, signer: String },
    /// Another process committed the key meanwhile.
    Present { tree: PathBuf },
}

/// Looks `key` up and, on a hit, commits it to `store` (through a reserved staging entry, so a
/// failed pull leaves nothing). `hash_input` is the plan's; the entry's must be the same.
pub fn pull_into_store(
    cache: &dyn BuildCache,
    store: &Store,
    key: &str,
    hash_input: &serde_json::Value,
    on_wait: &dyn Fn(),
) -> Result<Pulled, CacheError> {
    let Some(hit) = cache.lookup(key)? else {
        return Ok(Pulled::Miss);
    };
    let Some(staging) = store.reserve(key, on_wait)? else {
        return Ok(Pulled::Present {
            tree: store.tree(key),
        });
    };
    let fetched = cache.fetch(&hit, &staging.tree())?;
    if fetched.meta.key != key {
        return Err(CacheError::Invalid {
            key: key.into(),
            message: format!("its metadata names key {}", fetched.meta.key),
        });
    }
    if &fetched.hash_input != hash_input {
        return Err(CacheError::Invalid {
            key: key.into(),
            message: "its hash input differs from the plan's".into(),
        });
    }
    let dir = staging.commit(&fetched.meta, &fetched.hash_input)?;
    Ok(Pulled::Pulled {
        tree: dir.join("tree"),
        signer: fetched.signer,
    })
}

/// Why an entry must not be pushed to a shared cache, if it must not: host builds depend on
/// the host, and a locally built builder image keyed by its ID exists nowhere else. One keyed
/// by what it is built from (`built_from`) is the same image wherever it is built from those
/// inputs, checked against its version pins: its entries are shared.
pub fn not_shareable(meta: &EntryMeta) -> Option<&'static str> {
    if meta.runtime == crate::runtime::RuntimeName::Host || !meta.reproducible {
        Some("it was built with the host runtime")
    } else if meta
        .image
        .as_ref()
        .is_some_and(|i| i.local && i.built_from.is_none())
    {
        Some("its builder image was built locally")
    } else {
        None
    }
}

/// Pushes the store entry `key` unless it must not be shared; returns what happened, for a note.
pub fn push_from_store(
    cache: &dyn BuildCache,
    store: &Store,
    key: &str,
) -> Result<String, CacheError> {
    let meta_path = store.entry_dir(key).join("meta.json");
    let meta: EntryMeta = std::fs::read(&meta_path)
        .map_err(|source| CacheError::Io {
            path: meta_path.clone(),
            source,
        })
        .and_then(|b| {
            serde_json::from_slice(&b).map_err(|e| CacheError::Invalid {
                key: key.into(),
                message: e.to_string(),
            })
        })?;
    if let Some(why) = not_shareable(&meta) {
        return Ok(format!(
            "{}: not pushed to {}: {why}",
            meta.component,
            cache.describe()
        ));
    }
    if !cache.can_push() {
        return Ok(format!(
            "{}: not pushed to {}: no cache signing key (--cache-key or ROCFORGE_CACHE_KEY)",
            meta.component,
            cache.describe()
        ));
    }
    cache.push(store, key)?;
    Ok(format!(
        "{}: pushed to {}",
        meta.component,
        cache.describe()
    ))
}

/// A stored entry the cache lacks is pushed when the cache may push: the machine that built it
/// first seeds the shared cache for the others, as if it had built it now. The note says what
/// happened; None when there is nothing to say (no signing key, or the cache has it).
pub fn seed(cache: &dyn BuildCache, store: &Store, key: &str) -> Option<String> {
    if !cache.can_push() {
        return None;
    }
    let failed = |e: CacheError| {
        let short = key.get(..12).unwrap_or(key);
        format!("{short}: not pushed to {}: {e}", cache.describe())
    };
    match cache.lookup(key) {
        Ok(Some(_)) => None,
        Ok(None) => Some(push_from_store(cache, store, key).unwrap_or_else(failed)),
        Err(e) => Some(failed(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(image: serde_json::Value) -> EntryMeta {
        serde_json::from_value(serde_json::json!({
            "component": "rocprim",
            "key": "0".repeat(64),
            "committed": 0,
            "runtime": "podman",
            "image": image,
        }))
        .unwrap()
    }

    /// A local image keyed by its ID exists on one machine only; one keyed by its inputs is
    /// the image every machine builds from them, so its entries are shared.
    #[test]
    fn only_an_id_keyed_local_image_keeps_entries_out_of_a_shared_cache() {
        let by_id = meta(serde_json::json!({
            "reference": "localhost/b:1", "digest": format!("sha256:{}", "1".repeat(64)), "local": true,
        }));
        assert_eq!(
            not_shareable(&by_id),
            Some("its builder image was built locally")
        );
        let by_inputs = meta(serde_json::json!({
            "reference": "localhost/b:1", "digest": null, "local": true,
            "built_from": format!("sha256:{}", "2".repeat(64)),
        }));
        assert_eq!(not_shareable(&by_inputs), None);
    }
}
