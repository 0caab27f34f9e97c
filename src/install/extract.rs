//! Safe extraction of a tarball into a staging directory.
//!
//! The manifest (the first entry) says what the tarball holds; every later entry must be in it,
//! with the size the manifest records (checked before its bytes are read) and the sha256 it
//! records (checked as they arrive). Refused: absolute paths, `..`, symlinks whose target leaves
//! the tree, anything written through a symlink, hard links to anything but an earlier regular
//! file of the same tarball, device files, FIFOs, setuid/setgid bits, duplicates, and a total
//! beyond the manifest's (and the caller's cap). Nothing is ever written outside `dest`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::package::manifest::{
    FileEntry, Kind, MANIFEST_NAME, MAX_MANIFEST_BYTES, Manifest, normalize, symlink_inside,
};

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("{artifact}: the tarball is unreadable: {message}")]
    Corrupt { artifact: String, message: String },
    #[error("{artifact}: the first entry is not {MANIFEST_NAME}")]
    NoManifest { artifact: String },
    #[error("{artifact}: unsafe entry {path:?}: {reason}")]
    Unsafe {
        artifact: String,
        path: String,
        reason: String,
    },
    #[error("{artifact}: {path}: {reason}")]
    Mismatch {
        artifact: String,
        path: String,
        reason: String,
    },
    #[error("{artifact}: unpacks to {size} bytes, more than the limit of {limit} bytes")]
    TooBig {
        artifact: String,
        size: u64,
        limit: u64,
    },
    #[error("{artifact}: cannot write {}: {source}", path.display())]
    Io {
        artifact: String,
        path: PathBuf,
        source: io::Error,
    },
}

/// What was extracted.
pub struct Extracted {
    pub manifest: Manifest,
    /// Entries written, in tarball order (manifest paths).
    pub entries: Vec<FileEntry>,
}

/// Extracts the tar stream `reader` into `dest` (an existing, empty-of-these-paths directory).
/// `artifact` names the tarball in errors; `limit` caps the total size of regular files.
pub fn extract(
    reader: impl Read,
    dest: &Path,
    artifact: &str,
    limit: u64,
) -> Result<Extracted, ExtractError> {
    let corrupt = |e: io::Error| ExtractError::Corrupt {
        artifact: artifact.into(),
        message: e.to_string(),
    };
    let unsafe_ = |path: &str, reason: &str| ExtractError::Unsafe {
        artifact: artifact.into(),
        path: path.into(),
        reason: reason.into(),
    };
    let mismatch = |path: &str, reason: String| ExtractError::Mismatch {
        artifact: artifact.into(),
        path: path.into(),
        reason,
    };
    let ioe = |path: &Path, source| ExtractError::Io {
        artifact: artifact.into(),
        path: path.to_path_buf(),
        source,
    };
    let mut ar = tar::Archive::new(reader);
    let mut entries = ar.entries().map_err(corrupt)?;

    // The manifest.
    let mut first = match entries.next() {
        Some(e) => e.map_err(corrupt)?,
        None => {
            return Err(ExtractError::NoManifest {
                artifact: artifact.into(),
            });
        }
    };
    if first.path_bytes().as_ref() != MANIFEST_NAME.as_bytes()
        || first.header().entry_type() != tar::EntryType::Regular
        || first.size() > MAX_MANIFEST_BYTES
    {
        return Err(ExtractError::NoManifest {
            artifact: artifact.into(),
        });
    }
    let mut buf = Vec::new();
    (&mut first)
        .take(MAX_MANIFEST_BYTES)
        .read_to_end(&mut buf)
        .map_err(corrupt)?;
    drop(first);
    let manifest: Manifest = serde_json::from_slice(&buf).map_err(|e| ExtractError::Corrupt {
        artifact: artifact.into(),
        message: format!("invalid manifest: {e}"),
    })?;
    let mut expected: BTreeMap<String, FileEntry> = BTreeMap::new();
    let mut total: u64 = 0;
    for f in &manifest.files {
        let Some(p) = normalize(&f.path).filter(|p| *p == f.path) else {
            return Err(unsafe_(
                &f.path,
                "the manifest lists a path that is absolute, climbs with .., or is not normalized",
            ));
        };
        if f.kind == Kind::Symlink && !f.target.as_deref().is_some_and(|t| symlink_inside(&p, t)) {
            return Err(unsafe_(
                &f.path,
                "the manifest lists a symlink that points outside the prefix",
            ));
        }
        total = total.saturating_add(f.size);
        expected.insert(p, f.clone());
    }
    if total > limit {
        return Err(ExtractError::TooBig {
            artifact: artifact.into(),
            size: total,
            limit,
        });
    }

    let mut symlinks: BTreeSet<String> = BTreeSet::new();
    let mut files: BTreeSet<String> = BTreeSet::new();
    let mut dirs: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut written_total: u64 = 0;
    let mut out = Vec::new();
    for entry in entries {
        let mut entry = entry.map_err(corrupt)?;
        let raw = entry.path_bytes().into_owned();
        let raw = String::from_utf8(raw)
            .map_err(|_| unsafe_("<non-UTF-8 name>", "the path is not UTF-8"))?;
        let Some(path) = normalize(&raw) else {
            let reason = if raw.starts_with('/') {
                "absolute path"
            } else {
                "the path climbs out of the prefix with .."
            };
            return Err(unsafe_(&raw, reason));
        };
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().map_err(corrupt)?;
        if mode & 0o6000 != 0 {
            return Err(unsafe_(&path, "setuid or setgid bit"));
        }
        if !seen.insert(path.clone()) {
            return Err(unsafe_(&path, "appears twice"));
        }
        // Nothing may be written through a symlink, or below a file.
        let mut anc = path.as_str();
        while let Some((parent, _)) = anc.rsplit_once('/') {
            if symlinks.contains(parent) {
                return Err(unsafe_(&path, "written through a symlink"));
            }
            if files.contains(parent) {
                return Err(unsafe_(&path, "below a regular file"));
            }
            anc = parent;
        }
        let target_path = dest.join(&path);
        let manifest_entry = expected.get(&path);
        let want_kind = |k: Kind| -> Result<&FileEntry, ExtractError> {
            match manifest_entry {
                Some(e) if e.kind == k => Ok(e),
                Some(e) => Err(mismatch(
                    &path,
                    format!(
                        "is a {k:?} in the tarball but a {:?} in the manifest",
                        e.kind
                    ),
                )),
                None => Err(mismatch(&path, "is not in the manifest".into())),
            }
        };
        match kind {
            tar::EntryType::Directory => {
                want_kind(Kind::Dir)?;
                ensure_parent(dest, &target_path).map_err(|e| ioe(&target_path, e))?;
                match std::fs::create_dir(&target_path) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                        return Err(ioe(&target_path, e));
                    }
                    _ => {}
                }
                let m =
                    std::fs::symlink_metadata(&target_path).map_err(|e| ioe(&target_path, e))?;
                if !m.is_dir() {
                    return Err(unsafe_(&path, "a directory path is already something else"));
                }
                dirs.insert(path.clone());
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let m = want_kind(Kind::File)?;
                let size = entry.size();
                if size != m.size {
                    return Err(mismatch(
                        &path,
                        format!(
                            "the tarball says {size} bytes, the manifest {} bytes",
                            m.size
                        ),
                    ));
                }
                written_total = written_total.saturating_add(size);
                if written_total > total {
                    return Err(ExtractError::TooBig {
                        artifact: artifact.into(),
                        size: written_total,
                        limit: total,
                    });
                }
                ensure_parent(dest, &target_path).map_err(|e| ioe(&target_path, e))?;
                let perm = if m.executable { 0o755 } else { 0o644 };
                let f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(perm)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&target_path)
                    .map_err(|e| ioe(&target_path, e))?;
                let mut w = io::BufWriter::with_capacity(256 * 1024, f);
                let mut h = Sha256::new();
                let mut got: u64 = 0;
                let mut chunk = vec![0u8; 256 * 1024];
                loop {
                    let n = entry.read(&mut chunk).map_err(corrupt)?;
                    if n == 0 {
                        break;
                    }
                    got += n as u64;
                    if got > m.size {
                        return Err(mismatch(
                            &path,
                            format!("more than the {} bytes the manifest records", m.size),
                        ));
                    }
                    h.update(&chunk[..n]);
                    w.write_all(&chunk[..n]).map_err(|e| ioe(&target_path, e))?;
                }
                w.flush().map_err(|e| ioe(&target_path, e))?;
                if got != m.size {
                    return Err(mismatch(
                        &path,
                        format!("{got} bytes, the manifest says {}", m.size),
                    ));
                }
                let sha = hex::encode(h.finalize());
                if Some(&sha) != m.sha256.as_ref() {
                    return Err(mismatch(
                        &path,
                        format!(
                            "sha256 {sha} does not match the manifest's {}",
                            m.sha256.as_deref().unwrap_or("(none)")
                        ),
                    ));
                }
                files.insert(path.clone());
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                if !symlink_inside(&path, &link) {
                    return Err(unsafe_(
                        &path,
                        &format!("a symlink to {link}, outside the prefix"),
                    ));
                }
                let m = want_kind(Kind::Symlink)?;
                if m.target.as_deref() != Some(link.as_str()) {
                    return Err(mismatch(
                        &path,
                        "the symlink target differs from the manifest's".into(),
                    ));
                }
                ensure_parent(dest, &target_path).map_err(|e| ioe(&target_path, e))?;
                std::os::unix::fs::symlink(&link, &target_path)
                    .map_err(|e| ioe(&target_path, e))?;
                symlinks.insert(path.clone());
            }
            tar::EntryType::Link => {
                let m = want_kind(Kind::File)?;
                let link = entry
                    .link_name_bytes()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let Some(src) = normalize(&link).filter(|s| files.contains(s)) else {
                    return Err(unsafe_(
                        &path,
                        &format!(
                            "a hard link to {link}, which is not an earlier file of this tarball"
                        ),
                    ));
                };
                let src_m = &expected[&src];
                if src_m.sha256 != m.sha256 {
                    return Err(mismatch(
                        &path,
                        "a hard link whose content differs from the manifest's".into(),
                    ));
                }
                ensure_parent(dest, &target_path).map_err(|e| ioe(&target_path, e))?;
                std::fs::hard_link(dest.join(&src), &target_path)
                    .map_err(|e| ioe(&target_path, e))?;
                files.insert(path.clone());
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                return Err(unsafe_(&path, "a device file"));
            }
            tar::EntryType::Fifo => return Err(unsafe_(&path, "a FIFO")),
            other => {
                return Err(unsafe_(&path, &format!("unsupported entry type {other:?}")));
            }
        }
        out.push(manifest_entry.cloned().expect("checked above"));
    }
    if let Some(missing) = expected.keys().find(|p| !seen.contains(*p)) {
        return Err(mismatch(
            missing,
            "is in the manifest but not in the tarball (truncated?)".into(),
        ));
    }
    Ok(Extracted {
        manifest,
        entries: out,
    })
}

/// Creates the missing parent directories of `path` (below `dest`) as real directories.
fn ensure_parent(dest: &Path, path: &Path) -> io::Result<()> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    if parent == dest {
        return Ok(());
    }
    match std::fs::symlink_metadata(parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "parent is not a directory",
        )),
        Err(_) => {
            ensure_parent(dest, parent)?;
            match std::fs::create_dir(parent) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
                _ => Ok(()),
            }
        }
    }
}
