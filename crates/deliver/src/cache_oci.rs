//! The build cache on an OCI registry (`--cache oci://REGISTRY/REPO`).
//!
//! One artifact per store entry, tagged `key-<64-hex content key>`: an image manifest whose
//! config blob (`application/vnd.rocforge.cache.config.v1+json`) holds the entry's metadata,
//! its hash input and the descriptor of the tree, whose first layer is the tree as a rocforge
//! tarball (`application/vnd.rocforge.component.v1.tar+zstd`, the same format `package`
//! writes, manifest first) and whose second layer is a minisign signature of the config blob.
//! A pull checks the signature against the trusted keys, then every byte of the tree against
//! the signed digest and each file against the tarball's manifest, before the store sees it.

use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::cache::{
    BuildCache, CacheError, CacheHit, Checkpoint, CompilerCache, Fetched, PulledCheckpoint,
    PushedCheckpoint,
};
use crate::ids::ComponentName;
use crate::oci::{DigestReader, IMAGE_MANIFEST, ImageManifest, Remote, Repository, SIGNATURE_TYPE};
use crate::package::manifest::{FileEntry, Kind};
use crate::sign::{PublicKey, SecretKey};
use crate::store::{EntryMeta, Store};

/// A package error met while writing an entry as it is sent.
impl From<crate::package::PackageError> for CacheError {
    fn from(e: crate::package::PackageError) -> Self {
        use crate::diag::Hint;
        CacheError::Package {
            hint: e.hint(),
            source: Box::new(e),
        }
    }
}

pub const CONFIG_TYPE: &str = "application/vnd.rocforge.cache.config.v1+json";
pub const TREE_TYPE: &str = "application/vnd.rocforge.component.v1.tar+zstd";
pub const CACHE_SCHEMA: &str = "rocforge.cache/1";

/// The signed statement: everything a pull commits to the store, or the digest of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryConfig {
    pub schema: String,
    pub key: String,
    pub meta: EntryMeta,
    pub hash_input: serde_json::Value,
    pub tree: crate::oci::Descriptor,
}

pub const CHECKPOINT_CONFIG_TYPE: &str = "application/vnd.rocforge.checkpoint.config.v1+json";
pub const CHECKPOINT_TREE_TYPE: &str = "application/vnd.rocforge.checkpoint.v1.tar+zstd";
pub const CHECKPOINT_CCACHE_TYPE: &str = "application/vnd.rocforge.checkpoint.ccache.v1.tar+zstd";
pub const CHECKPOINT_SCHEMA: &str = "rocforge.checkpoint/1";

/// The signed statement of a checkpoint: which build directory it is and the digest of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointConfig {
    pub schema: String,
    pub key: String,
    pub component: ComponentName,
    /// Ninja steps the stopped build had done (None for other build tools).
    pub steps_done: Option<usize>,
    pub tree: crate::oci::Descriptor,
    /// The build's compiler cache entries, in the same format as the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ccache: Option<crate::oci::Descriptor>,
}

/// The tag of the checkpoint of the unfinished build of `key`.
pub fn checkpoint_tag(key: &str) -> String {
    format!("checkpoint-{key}")
}

/// Writes the build directory `build` as a zstd tar into `out`, manifest first (the format the
/// safe extractor reads), each entry with its file's own mtime: ninja compares output times
/// with its log, so a build directory unpacked with one time for all would rebuild. rocforge's
/// own marker is left out (the extractor refuses `.rocforge` names; the puller writes it anew).
/// Returns the sha256 hex and size of what was written.
fn write_checkpoint_tar(
    checkpoint: &Checkpoint,
    build: &Path,
    out: &std::fs::File,
) -> Result<(String, u64), CacheError> {
    let mut scan = crate::package::tarball::scan(build, &[])?;
    scan.files
        .retain(|f| !crate::package::manifest::has_reserved(&f.path));
    write_files_tar(checkpoint, build, scan.files, out)
}

/// `files` of `root` (sorted, directories before what they hold) as a checkpoint tar.
fn write_files_tar(
    checkpoint: &Checkpoint,
    root: &Path,
    files: Vec<FileEntry>,
    out: &std::fs::File,
) -> Result<(String, u64), CacheError> {
    use crate::package::tarball;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CacheError::Io { path, source }
    };
    let manifest: crate::package::manifest::Manifest = serde_json::from_value(serde_json::json!({
        "schema": crate::package::manifest::MANIFEST_SCHEMA,
        "name": checkpoint.component,
        "version": "checkpoint",
        "targets": [],
        "key": checkpoint.key,
        "installed_size": files.iter().map(|f| f.size).sum::<u64>(),
        "files": files,
    }))
    .map_err(|e| OciCache::invalid(&checkpoint.key, format!("checkpoint manifest: {e}")))?;
    let mut hashed = Hashing {
        inner: std::io::BufWriter::with_capacity(1 << 20, out),
        hasher: <sha2::Sha256 as sha2::Digest>::new(),
        bytes: 0,
    };
    {
        // Fast over small: a build directory is pushed when a job's time is up.
        let mut enc = zstd::stream::write::Encoder::new(&mut hashed, 3).map_err(io(root))?;
        enc.multithread(tarball::zstd_workers()).map_err(io(root))?;
        let mut b = tar::Builder::new(enc);
        b.follow_symlinks(false);
        let json = serde_json::to_vec_pretty(&manifest).expect("plain data");
        let mut h = tarball::header(tar::EntryType::Regular, 0o644, json.len() as u64, 0);
        b.append_data(&mut h, crate::package::manifest::MANIFEST_NAME, &json[..])
            .map_err(io(root))?;
        for f in &manifest.files {
            let p = root.join(&f.path);
            let mtime = std::fs::symlink_metadata(&p)
                .map(|m| {
                    use std::os::unix::fs::MetadataExt;
                    m.mtime().max(0) as u64
                })
                .map_err(io(&p))?;
            tarball::append_files(&mut b, root, std::slice::from_ref(f), "", mtime)?;
        }
        b.into_inner()
            .and_then(|enc| enc.finish())
            .map_err(io(root))?;
    }
    std::io::Write::flush(&mut hashed.inner).map_err(io(root))?;
    Ok((
        hex::encode(<sha2::Sha256 as sha2::Digest>::finalize(hashed.hasher)),
        hashed.bytes,
    ))
}

/// The entries of `cc` that belong in a checkpoint: ccache's result and manifest files (the
/// files two directory levels down, `a/b/<hash>R`; its statistics, locks and temporary files
/// are elsewhere) touched since the build started, newest first while they fit in the cap.
/// Returns them as manifest entries with their directories, and how many were left out.
fn ccache_entries(cc: &CompilerCache) -> std::io::Result<(Vec<FileEntry>, usize)> {
    let one_char = |e: &std::fs::DirEntry| e.file_name().len() == 1;
    let mut found = Vec::new();
    let level = |dir: &Path| -> std::io::Result<Vec<std::fs::DirEntry>> {
        match std::fs::read_dir(dir) {
            Ok(rd) => rd.collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    };
    for a in level(&cc.dir)? {
        if !one_char(&a) || !a.file_type()?.is_dir() {
            continue;
        }
        for b in level(&a.path())? {
            if !one_char(&b) || !b.file_type()?.is_dir() {
                continue;
            }
            for f in level(&b.path())? {
                if !f.file_type()?.is_file() {
                    continue;
                }
                let m = f.metadata()?;
                let modified = m.modified()?;
                if modified < cc.since {
                    continue;
                }
                let Some(name) = f.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                let rel = format!(
                    "{}/{}/{name}",
                    a.file_name().to_string_lossy(),
                    b.file_name().to_string_lossy()
                );
                found.push((modified, rel, m.len()));
            }
        }
    }
    found.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| x.1.cmp(&y.1)));
    let mut total = 0u64;
    let mut kept = Vec::new();
    let mut left_out = 0;
    for (_, rel, size) in found {
        if total + size > cc.max_bytes {
            left_out += 1;
            continue;
        }
        total += size;
        kept.push((rel, size));
    }
    let mut entries = std::collections::BTreeMap::new();
    for (rel, size) in kept {
        let mut hashed = Hashing {
            inner: std::io::sink(),
            hasher: <sha2::Sha256 as sha2::Digest>::new(),
            bytes: 0,
        };
        std::io::copy(&mut std::fs::File::open(cc.dir.join(&rel))?, &mut hashed)?;
        let hasher = hashed.hasher;
        for (i, _) in rel.match_indices('/') {
            let dir = &rel[..i];
            entries
                .entry(dir.to_string())
                .or_insert_with(|| FileEntry::dir(dir));
        }
        entries.insert(
            rel.clone(),
            FileEntry {
                path: rel,
                kind: Kind::File,
                size,
                sha256: Some(hex::encode(<sha2::Sha256 as sha2::Digest>::finalize(
                    hasher,
                ))),
                executable: false,
                target: None,
            },
        );
    }
    Ok((entries.into_values().collect(), left_out))
}

/// Whether a checkpoint's compiler-cache entry is one of ccache's own files (`a/b/<file>`,
/// and the directories `a` and `a/b`), the only kind a checkpoint brings: a configuration file
/// at the top (`ccache.conf`) would change every later build that uses this cache.
fn in_ccache_layout(e: &FileEntry) -> bool {
    let parts: Vec<&str> = e.path.split('/').collect();
    let one = |p: &str| p.chars().count() == 1;
    match e.kind {
        Kind::Dir => parts.len() <= 2 && parts.iter().all(|p| one(p)),
        Kind::File => parts.len() == 3 && one(parts[0]) && one(parts[1]) && !parts[2].is_empty(),
        _ => false,
    }
}

struct Hashing<W> {
    inner: W,
    hasher: sha2::Sha256,
    bytes: u64,
}

impl<W: std::io::Write> std::io::Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        sha2::Digest::update(&mut self.hasher, &buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub struct OciCache {
    remote: Remote<'static>,
    trusted: Vec<PublicKey>,
    key: Option<SecretKey>,
    /// The largest tree a pull unpacks.
    pub max_bytes: u64,
}

/// The tag of the entry for `key`.
pub fn tag(key: &str) -> String {
    format!("key-{key}")
}

impl OciCache {
    pub fn new(
        client: reqwest::blocking::Client,
        repo: Repository,
        trusted: Vec<PublicKey>,
        key: Option<SecretKey>,
    ) -> OciCache {
        OciCache {
            remote: Remote::new(client, repo),
            trusted,
            key,
            max_bytes: crate::package::extract::DEFAULT_MAX_BYTES,
        }
    }

    /// This cache telling `note` of each retry against its registry.
    pub fn on_retry(mut self, note: impl Fn(&str) + Send + Sync + 'static) -> OciCache {
        self.remote = self.remote.on_retry(note);
        self
    }

    /// This cache with another retry policy against its registry.
    pub fn with_retry(mut self, retry: crate::oci::Retry) -> OciCache {
        self.remote = self.remote.with_retry(retry);
        self
    }

    fn invalid(key: &str, message: impl Into<String>) -> CacheError {
        CacheError::Invalid {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The manifest at `reference`, of config type `config_type`, with its config blob checked
    /// against its signature by a trusted key: the config's bytes and the signer's key ID.
    fn signed_config(
        &self,
        key: &str,
        reference: &str,
        config_type: &str,
        what: &str,
    ) -> Result<(Vec<u8>, String), CacheError> {
        let (_, bytes) = self
            .remote
            .get_manifest(reference)?
            .ok_or_else(|| Self::invalid(key, "the manifest disappeared"))?;
        let manifest: ImageManifest = serde_json::from_slice(&bytes)
            .map_err(|e| Self::invalid(key, format!("unreadable manifest: {e}")))?;
        if manifest.config.media_type != config_type {
            return Err(Self::invalid(
                key,
                format!("not a {config_type} ({})", manifest.config.media_type),
            ));
        }
        let sig = manifest
            .layers
            .iter()
            .find(|l| l.media_type == SIGNATURE_TYPE)
            .ok_or_else(|| Self::invalid(key, "it is not signed"))?;
        let sig = self.remote.get_blob_bytes(&sig.digest, 64 << 10)?;
        let config = self
            .remote
            .get_blob_bytes(&manifest.config.digest, 16 << 20)?;
        let verified =
            crate::sign::verify_bytes(&self.trusted, &config, &String::from_utf8_lossy(&sig), what)
                .map_err(|source| CacheError::Signature {
                    key: key.into(),
                    source,
                })?;
        Ok((config, verified.key_id))
    }

    /// Downloads the signed tree `desc` and unpacks it into `tree` (made empty if missing);
    /// returns the entries written.
    fn extract_verified(
        &self,
        key: &str,
        desc: &crate::oci::Descriptor,
        tree: &Path,
        what: &str,
    ) -> Result<Vec<FileEntry>, CacheError> {
        // The tree's bytes are checked against the signed digest and size before any of them is
        // parsed: a forged blob never reaches the tar and JSON readers. It waits in a file
        // beside the tree (never more than the signed size), not in memory.
        let io = |source| CacheError::Io {
            path: tree.to_path_buf(),
            source,
        };
        let parent = tree
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io)?;
        let mut blob = tempfile::tempfile_in(parent).map_err(io)?;
        let resp = self.remote.get_blob(&desc.digest)?;
        let mut reader = DigestReader::new(resp.take(desc.size.saturating_add(1)));
        std::io::copy(&mut reader, &mut blob)
            .map_err(|e| Self::invalid(key, format!("the tree's download failed: {e}")))?;
        let (digest, size) = reader
            .finish()
            .map_err(|e| Self::invalid(key, e.to_string()))?;
        if digest != desc.digest || size != desc.size {
            return Err(Self::invalid(
                key,
                format!(
                    "the tree's bytes are {digest} ({size} bytes), the signed config says {} ({} bytes)",
                    desc.digest, desc.size
                ),
            ));
        }
        blob.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
        std::fs::create_dir_all(tree).map_err(io)?;
        let extracted = {
            let mut dec =
                zstd::stream::read::Decoder::new(blob.try_clone().map_err(io)?).map_err(io)?;
            crate::package::extract::extract(&mut dec, tree, what, self.max_bytes).map_err(
                |source| CacheError::Extract {
                    key: key.into(),
                    source: Box::new(source),
                },
            )?
        };
        if extracted.manifest.key != key {
            return Err(Self::invalid(
                key,
                format!("the tree's manifest names key {}", extracted.manifest.key),
            ));
        }
        Ok(extracted.entries)
    }
}

impl BuildCache for OciCache {
    fn checkpoint_name(&self, key: &str) -> String {
        checkpoint_tag(key)
    }

    fn describe(&self) -> String {
        format!(
            "oci://{}/{}",
            self.remote.repo.registry, self.remote.repo.repository
        )
    }

    fn lookup(&self, key: &str) -> Result<Option<CacheHit>, CacheError> {
        Ok(self
            .remote
            .get_manifest(&tag(key))?
            .map(|(digest, _)| CacheHit {
                key: key.into(),
                reference: digest,
            }))
    }

    fn fetch(&self, hit: &CacheHit, tree: &Path) -> Result<Fetched, CacheError> {
        let key = hit.key.as_str();
        let what = format!("cache entry {key}");
        let (config, signer) = self.signed_config(key, &hit.reference, CONFIG_TYPE, &what)?;
        // From here on only signed data is believed.
        let config: EntryConfig = serde_json::from_slice(&config)
            .map_err(|e| Self::invalid(key, format!("unreadable config: {e}")))?;
        if config.schema != CACHE_SCHEMA || config.key != key || config.meta.key != key {
            return Err(Self::invalid(
                key,
                format!(
                    "the signed config is for {} ({})",
                    config.key, config.schema
                ),
            ));
        }
        self.extract_verified(key, &config.tree, tree, &what)?;
        Ok(Fetched {
            meta: config.meta,
            hash_input: config.hash_input,
            signer,
        })
    }

    fn push_checkpoint(
        &self,
        checkpoint: &Checkpoint,
        build: &Path,
    ) -> Result<PushedCheckpoint, CacheError> {
        let Some(secret) = &self.key else {
            return Ok(PushedCheckpoint::default());
        };
        let key = checkpoint.key.as_str();
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CacheError::Io { path, source }
        };
        let parent = build.parent().unwrap_or(Path::new("."));
        let mut pushed = PushedCheckpoint::default();
        let tmp = crate::fsutil::temp_file_in(parent).map_err(io(parent))?;
        let (sha256, size) = write_checkpoint_tar(checkpoint, build, tmp.as_file())?;
        let tree = self
            .remote
            .push_file(CHECKPOINT_TREE_TYPE, tmp.path(), &sha256, size)?;
        drop(tmp);
        pushed.tree_bytes = size;
        let ccache = match &checkpoint.ccache {
            Some(cc) => {
                let (entries, left_out) = ccache_entries(cc).map_err(io(&cc.dir))?;
                pushed.ccache_left_out = left_out;
                pushed.ccache_files = entries.iter().filter(|e| e.kind == Kind::File).count();
                if pushed.ccache_files == 0 {
                    None
                } else {
                    let tmp = crate::fsutil::temp_file_in(parent).map_err(io(parent))?;
                    let (sha256, size) =
                        write_files_tar(checkpoint, &cc.dir, entries, tmp.as_file())?;
                    pushed.ccache_bytes = size;
                    Some(self.remote.push_file(
                        CHECKPOINT_CCACHE_TYPE,
                        tmp.path(),
                        &sha256,
                        size,
                    )?)
                }
            }
            None => None,
        };
        let config = CheckpointConfig {
            schema: CHECKPOINT_SCHEMA.into(),
            key: key.into(),
            component: checkpoint.component.clone(),
            steps_done: checkpoint.steps_done,
            tree: tree.clone(),
            ccache: ccache.clone(),
        };
        let config_bytes = serde_json::to_vec_pretty(&config).expect("plain data");
        let tag = checkpoint_tag(key);
        let sig = crate::sign::sign_reader(secret, &config_bytes[..], &tag).map_err(|source| {
            CacheError::Signature {
                key: key.into(),
                source,
            }
        })?;
        let config_desc = self
            .remote
            .push_bytes(CHECKPOINT_CONFIG_TYPE, &config_bytes)?;
        let sig_desc = self.remote.push_bytes(SIGNATURE_TYPE, sig.as_bytes())?;
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: IMAGE_MANIFEST.into(),
            artifact_type: Some(CHECKPOINT_CONFIG_TYPE.into()),
            config: config_desc,
            layers: std::iter::once(tree)
                .chain(ccache)
                .chain(std::iter::once(sig_desc))
                .collect(),
            annotations: [
                (
                    "org.opencontainers.image.title",
                    checkpoint.component.to_string(),
                ),
                ("rocforge.key", key.to_string()),
                ("rocforge.signer", secret.key_id()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        };
        self.remote.put_manifest(&tag, &manifest)?;
        Ok(pushed)
    }

    fn pull_checkpoint(
        &self,
        key: &str,
        component: &str,
        build: &Path,
        ccache: Option<&Path>,
    ) -> Result<Option<PulledCheckpoint>, CacheError> {
        let tag = checkpoint_tag(key);
        let Some((digest, _)) = self.remote.get_manifest(&tag)? else {
            return Ok(None);
        };
        let what = format!("checkpoint {key}");
        let (config, signer) = self.signed_config(key, &digest, CHECKPOINT_CONFIG_TYPE, &what)?;
        let config: CheckpointConfig = serde_json::from_slice(&config)
            .map_err(|e| Self::invalid(key, format!("unreadable checkpoint config: {e}")))?;
        if config.schema != CHECKPOINT_SCHEMA || config.key != key || config.component != component
        {
            return Err(Self::invalid(
                key,
                format!(
                    "the signed checkpoint is {} of {} ({}), not this build's",
                    config.key, config.component, config.schema
                ),
            ));
        }
        // The extractor gives each file its tar entry's mtime, as ninja compares them with its log.
        self.extract_verified(key, &config.tree, build, &what)?;
        // Checked whole before one entry reaches the ccache directory: a damaged part refuses
        // the checkpoint, and the caller drops the build directory with it.
        let restored = match (&config.ccache, ccache) {
            (Some(desc), Some(into)) => {
                let io = |source| CacheError::Io {
                    path: into.to_path_buf(),
                    source,
                };
                let parent = into.parent().unwrap_or(Path::new("."));
                std::fs::create_dir_all(parent).map_err(io)?;
                // What a pull killed here before left (it never reaches the ccache directory).
                crate::fsutil::reap_temp(parent, ".tmp-");
                let staging = crate::fsutil::temp_dir_in(parent).map_err(io)?;
                let unpacked = staging.path().join("ccache");
                let entries = self.extract_verified(
                    key,
                    desc,
                    &unpacked,
                    &format!("checkpoint {key} compiler cache"),
                )?;
                if let Some(odd) = entries.iter().find(|e| !in_ccache_layout(e)) {
                    return Err(Self::invalid(
                        key,
                        format!(
                            "its compiler cache holds {}, outside ccache's a/b/<file> layout",
                            odd.path
                        ),
                    ));
                }
                std::fs::create_dir_all(into).map_err(io)?;
                // Moved by renames (a crash leaves whole entries or none), never through a
                // link the ccache directory has; what it has already is kept.
                Some(
                    crate::package::extract::move_new_files(&unpacked, into, &entries)
                        .map_err(io)?,
                )
            }
            _ => None,
        };
        Ok(Some(PulledCheckpoint {
            signer,
            steps_done: config.steps_done,
            ccache: restored,
        }))
    }

    fn can_push(&self) -> bool {
        self.key.is_some()
    }

    fn push(&self, store: &Store, key: &str) -> Result<(), CacheError> {
        let Some(secret) = &self.key else {
            return Ok(());
        };
        if self.lookup(key)?.is_some() {
            return Ok(());
        }
        let dir = store.entry_dir(key);
        let read = |name: &str| -> Result<Vec<u8>, CacheError> {
            let p = dir.join(name);
            std::fs::read(&p).map_err(|source| CacheError::Io { path: p, source })
        };
        let meta: EntryMeta = serde_json::from_slice(&read("meta.json")?)
            .map_err(|e| Self::invalid(key, e.to_string()))?;
        let hash_input: serde_json::Value = serde_json::from_slice(&read("hash-input.json")?)
            .map_err(|e| Self::invalid(key, e.to_string()))?;
        // Named for this process, so a kill -9 mid-push leaves nothing the next build keeps.
        let tmp = crate::fsutil::temp_dir_in(store.root()).map_err(|source| CacheError::Io {
            path: store.root().to_path_buf(),
            source,
        })?;
        let packaged = crate::package::package_entry(
            store,
            key,
            &crate::package::Options {
                compression: crate::package::tarball::Compression::Zst,
                out_dir: tmp.path(),
                build_paths: Vec::new(),
                allow_build_paths: true,
                license: None,
                // The tarball only carries the tree to another store; what its manifest says
                // an install needs is never read.
                build_only: Vec::new(),
                dependency_keys: Default::default(),
                key: None,
            },
        )?;
        let t = &packaged.tarball;
        let mut tree = self
            .remote
            .push_file(TREE_TYPE, &t.path, &t.sha256, t.size)?;
        tree.annotations
            .insert("org.opencontainers.image.title".into(), t.file_name.clone());
        let config = EntryConfig {
            schema: CACHE_SCHEMA.into(),
            key: key.into(),
            meta: meta.clone(),
            hash_input,
            tree: tree.clone(),
        };
        let config_bytes = serde_json::to_vec_pretty(&config).expect("plain data");
        let sig =
            crate::sign::sign_reader(secret, &config_bytes[..], &tag(key)).map_err(|source| {
                CacheError::Signature {
                    key: key.into(),
                    source,
                }
            })?;
        let config_desc = self.remote.push_bytes(CONFIG_TYPE, &config_bytes)?;
        let sig_desc = self.remote.push_bytes(SIGNATURE_TYPE, sig.as_bytes())?;
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: IMAGE_MANIFEST.into(),
            artifact_type: Some(CONFIG_TYPE.into()),
            config: config_desc,
            layers: vec![tree, sig_desc],
            annotations: annotations(&meta, secret),
        };
        self.remote.put_manifest(&tag(key), &manifest)?;
        Ok(())
    }
}

fn annotations(meta: &EntryMeta, secret: &SecretKey) -> BTreeMap<String, String> {
    [
        ("org.opencontainers.image.title", meta.component.to_string()),
        ("org.opencontainers.image.version", meta.version.clone()),
        (
            "org.opencontainers.image.created",
            crate::units::rfc3339(meta.committed),
        ),
        ("rocforge.key", meta.key.to_string()),
        ("rocforge.targets", crate::arch::comma_list(&meta.targets)),
        ("rocforge.signer", secret.key_id()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::{Descriptor, digest_of};
    use std::io::{BufRead, Write};

    fn file(path: &str, size: u64) -> FileEntry {
        FileEntry {
            path: path.into(),
            kind: Kind::File,
            size,
            sha256: None,
            executable: false,
            target: None,
        }
    }

    /// A checkpoint brings ccache's own files only: a configuration at the top, or a file at
    /// another depth, refuses the checkpoint.
    #[test]
    fn a_checkpoint_brings_only_ccache_s_own_files() {
        assert!(in_ccache_layout(&file("0/a/3f9c2eR", 1)));
        assert!(in_ccache_layout(&FileEntry::dir("0")));
        assert!(in_ccache_layout(&FileEntry::dir("0/a")));
        for odd in ["ccache.conf", "0/ccache.conf", "0/a/b/c", "00/a/x", "0/a/"] {
            assert!(!in_ccache_layout(&file(odd, 1)), "{odd}");
        }
        assert!(!in_ccache_layout(&FileEntry::dir("0/a/b")));
    }

    /// Restoring into a ccache directory never writes through a link it holds (a build can
    /// plant one: the directory is mounted into build containers) and keeps what it has.
    #[test]
    fn restoring_a_compiler_cache_goes_through_no_link_and_keeps_what_is_there() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, into, outside) = (
            tmp.path().join("from"),
            tmp.path().join("ccache"),
            tmp.path().join("outside"),
        );
        for (p, text) in [
            ("0/a/new", "new"),
            ("0/b/linked", "x"),
            ("0/a/old", "theirs"),
        ] {
            let f = from.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
        std::fs::create_dir_all(into.join("0/a")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(into.join("0/a/old"), "ours").unwrap();
        std::os::unix::fs::symlink(&outside, into.join("0/b")).unwrap();
        let entries = [
            FileEntry::dir("0"),
            FileEntry::dir("0/a"),
            file("0/a/new", 3),
            file("0/b/linked", 1),
            file("0/a/old", 6),
        ];
        let moved = crate::package::extract::move_new_files(&from, &into, &entries).unwrap();
        assert_eq!(moved, (1, 3));
        assert_eq!(
            std::fs::read_to_string(into.join("0/a/new")).unwrap(),
            "new"
        );
        assert_eq!(
            std::fs::read_to_string(into.join("0/a/old")).unwrap(),
            "ours"
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    }

    /// A registry on 127.0.0.1 serving fixed manifests and blobs by path suffix, counting the
    /// bytes it sends.
    fn registry(
        files: Vec<(String, Vec<u8>)>,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let mut r = std::io::BufReader::new(c.try_clone().unwrap());
                let mut w = c;
                let mut line = String::new();
                let _ = r.read_line(&mut line);
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let body = files.iter().find(|(p, _)| path.ends_with(p.as_str()));
                let _ = match body {
                    Some((_, b)) => {
                        counter.fetch_add(b.len() as u64, std::sync::atomic::Ordering::SeqCst);
                        w.write_all(
                            format!(
                                "HTTP/1.0 200 OK\r\nContent-Type: {IMAGE_MANIFEST}\r\nContent-Length: {}\r\n\r\n",
                                b.len()
                            )
                            .as_bytes(),
                        )
                        .and_then(|()| w.write_all(b))
                    }
                    None => w.write_all(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"),
                };
            }
        });
        (format!("127.0.0.1:{port}"), sent)
    }

    /// Ninja compares an output's mtime with its log: a checkpoint carries each file's own
    /// time and the puller gives it back, and rocforge's marker stays out of it.
    #[test]
    fn a_checkpoint_keeps_each_files_mtime_through_the_safe_extractor() {
        let dir = tempfile::tempdir().unwrap();
        let build = dir.path().join("build");
        std::fs::create_dir_all(build.join("obj")).unwrap();
        std::fs::write(build.join(".rocforge-build"), b"").unwrap();
        let times = [
            ("obj/a.o", 1_000_000_000u64),
            ("build.ninja", 1_500_000_000),
        ];
        for (name, t) in times {
            let f = build.join(name);
            std::fs::write(&f, name).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&f)
                .unwrap()
                .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t))
                .unwrap();
        }
        let key = "cd".repeat(32);
        let checkpoint = Checkpoint {
            key: key.clone(),
            component: ComponentName::checked("rocblas"),
            steps_done: Some(1),
            ccache: None,
        };
        let tar = dir.path().join("cp.tar.zst");
        let out = std::fs::File::create(&tar).unwrap();
        let (sha, size) = write_checkpoint_tar(&checkpoint, &build, &out).unwrap();
        drop(out);
        let bytes = std::fs::read(&tar).unwrap();
        assert_eq!(
            (digest_of(&bytes), size),
            (format!("sha256:{sha}"), bytes.len() as u64)
        );
        let dest = dir.path().join("pulled");
        std::fs::create_dir_all(&dest).unwrap();
        let dec = zstd::stream::read::Decoder::new(std::fs::File::open(&tar).unwrap()).unwrap();
        let got = crate::package::extract::extract(dec, &dest, "checkpoint", 1 << 20).unwrap();
        assert_eq!(got.manifest.key, key.as_str());
        for (name, t) in times {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(dest.join(name)).unwrap();
            assert_eq!(m.mtime() as u64, t, "{name}");
        }
        assert!(!dest.join(".rocforge-build").exists());
    }

    #[test]
    fn a_forged_tree_is_refused_before_it_is_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let g = crate::sign::generate(dir.path(), None).unwrap();
        let sk = crate::sign::load_secret(&g.secret, None).unwrap();
        let pk = crate::sign::parse_public(&g.public_key).unwrap();
        let key = "ab".repeat(32);
        // The signed config vouches for a small tree; the registry serves, under its digest,
        // a zstd bomb: a GNU long name of 1 GiB, a few KB compressed.
        let honest = zstd::encode_all(&b"honest tree"[..], 3).unwrap();
        let mut bomb = Vec::new();
        {
            let enc = zstd::stream::write::Encoder::new(&mut bomb, 3).unwrap();
            let mut b = tar::Builder::new(enc);
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::GNULongName);
            h.set_size(1 << 30);
            h.set_cksum();
            b.append(&h, std::io::repeat(b'a').take(1 << 30)).unwrap();
            b.into_inner().unwrap().finish().unwrap();
        }
        let tree = Descriptor {
            media_type: TREE_TYPE.into(),
            digest: digest_of(&honest),
            size: honest.len() as u64,
            annotations: Default::default(),
        };
        let config = serde_json::to_vec(&serde_json::json!({
            "schema": CACHE_SCHEMA, "key": key,
            "meta": {"component": "x", "key": key, "committed": 0},
            "hash_input": null, "tree": tree,
        }))
        .unwrap();
        let sig = crate::sign::sign_reader(&sk, &config[..], &tag(&key)).unwrap();
        let blob = |t: &str, b: &[u8]| Descriptor {
            media_type: t.into(),
            digest: digest_of(b),
            size: b.len() as u64,
            annotations: Default::default(),
        };
        let manifest = serde_json::to_vec(&ImageManifest {
            schema_version: 2,
            media_type: IMAGE_MANIFEST.into(),
            artifact_type: None,
            config: blob(CONFIG_TYPE, &config),
            layers: vec![tree.clone(), blob(SIGNATURE_TYPE, sig.as_bytes())],
            annotations: Default::default(),
        })
        .unwrap();
        let (host, _) = registry(vec![
            (
                format!("/manifests/{}", digest_of(&manifest)),
                manifest.clone(),
            ),
            (format!("/blobs/{}", digest_of(&config)), config.clone()),
            (
                format!("/blobs/{}", digest_of(sig.as_bytes())),
                sig.clone().into_bytes(),
            ),
            (format!("/blobs/{}", tree.digest), bomb.clone()),
        ]);
        let cache = OciCache::new(
            rocforge_infra::download::client(),
            Repository::parse(&format!("oci://{host}/cache")).unwrap(),
            vec![pk],
            None,
        );
        let out = dir.path().join("tree");
        let hit = CacheHit {
            key: key.clone(),
            reference: digest_of(&manifest),
        };
        let Err(err) = cache.fetch(&hit, &out) else {
            panic!("a forged tree was accepted");
        };
        let msg = err.to_string();
        assert!(msg.contains("the signed config says"), "{msg}");
        assert!(!out.exists(), "the forged tree was unpacked");
    }
}
