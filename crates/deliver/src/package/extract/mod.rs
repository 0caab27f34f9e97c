//! Safe extraction of a tarball into a staging directory.
//!
//! The manifest (the first entry) says what the tarball holds; every later entry must be in it,
//! with the size the manifest records (checked before its bytes are read) and the sha256 it
//! records (checked as they arrive). Refused: absolute paths, `..`, symlinks whose target leaves
//! the tree, anything written through a symlink, hard links to anything but an earlier regular
//! file of the same tarball, device files, FIFOs, setuid/setgid bits, duplicates, and a total
//! beyond the manifest's (and the caller's cap). Nothing is ever written outside `dest`.
//!
//! Every path is walked from `dest`'s descriptor one component at a time (`openat` with
//! `O_NOFOLLOW | O_DIRECTORY`), so a symlink already in `dest` (this tarball's or an earlier
//! artifact's) is never followed, whatever the names or the targets say. Names beginning
//! `.rocforge` are rocforge's own (receipts, the merge journal) and refused. GNU long names and
//! PAX records are read by this module, each capped at [`MAX_EXTENSION_BYTES`], and paths
//! shown in errors are escaped and cut ([`shown`]).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::CString;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::package::manifest::{
    FileEntry, Kind, MANIFEST_NAME, MAX_MANIFEST_BYTES, Manifest, has_reserved, normalize,
    symlink_refusal,
};

mod dir;
mod headers;

pub use dir::{Dir, not_a_dir};
use headers::{Next, next_entry};

/// The default cap on what one install (or cache pull) unpacks.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 30;

/// The most a GNU long name or link (`L`, `K`) or a PAX header (`x`, `g`) may hold: paths in a
/// ROCm tree are a few hundred bytes, and anything beyond this is a memory bomb.
pub const MAX_EXTENSION_BYTES: u64 = 64 << 10;

/// The most directories a path in an install tree may be below its top: ROCm's deepest are about
/// a dozen. A deeper tree costs an open directory per level to walk and remove (std's recursive
/// removal runs out of descriptors near a thousand), so a tarball of one deep empty file could
/// leave a staging directory no later command can remove.
pub const MAX_DEPTH: usize = 64;

pub use crate::redact::shown;

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("{artifact}: the tarball is unreadable: {message}")]
    Corrupt { artifact: String, message: String },
    #[error("{artifact}: the first entry is not {MANIFEST_NAME}")]
    NoManifest { artifact: String },
    #[error("{artifact}: unsafe entry \"{path}\": {reason}")]
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
    let names = Names::new(artifact);
    let root = Dir::open(dest).map_err(|e| names.io(dest, e))?;
    let mut ar = tar::Archive::new(reader);
    // Raw: the tar crate would read every long name and PAX header whole into memory.
    let mut entries = ar.entries().map_err(|e| names.corrupt(e))?.raw(true);
    let manifest = read_manifest(&mut entries, &names)?;
    let expected = Expected::from_manifest(&manifest, limit, &names)?;
    let stage = Stage {
        names: &names,
        dest,
        root,
    };
    let mut written = Written::default();
    let mut out = Vec::new();
    while let Some(next) = next_entry(&mut entries, &names)? {
        out.push(stage.unpack(next, &expected, &mut written)?);
    }
    if let Some(missing) = expected.files.keys().find(|p| !written.seen.contains(*p)) {
        return Err(names.mismatch(
            missing,
            "is in the manifest but not in the tarball (truncated?)".into(),
        ));
    }
    Ok(Extracted {
        manifest,
        entries: out,
    })
}

/// Calls `visit` with the full path of every entry of the tar stream `reader` that is not an
/// extension header (a GNU long name's or PAX path's, read here and capped at
/// [`MAX_EXTENSION_BYTES`], else the header's own), until it returns true. For tar streams
/// from outside that are read rather than extracted (an image's layers): the tar crate's own
/// iterator reads those headers whole into memory, whatever size they declare.
pub fn visit_entries<R: Read>(
    reader: R,
    shown_as: &str,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> Result<(), ExtractError> {
    let names = Names::new(shown_as);
    let mut ar = tar::Archive::new(reader);
    let mut entries = ar.entries().map_err(|e| names.corrupt(e))?.raw(true);
    while let Some(mut next) = next_entry(&mut entries, &names)? {
        let path = match next.name.take() {
            Some(long) => long,
            None => next.entry.path_bytes().into_owned(),
        };
        if visit(&path) {
            break;
        }
    }
    Ok(())
}

/// How one tarball is named in its errors: as given when tar cannot read the stream, escaped
/// and cut ([`shown`]) in every other error.
struct Names<'a> {
    given: &'a str,
    artifact: String,
}

impl<'a> Names<'a> {
    fn new(given: &'a str) -> Self {
        Names {
            given,
            artifact: shown(given),
        }
    }

    fn corrupt(&self, e: io::Error) -> ExtractError {
        ExtractError::Corrupt {
            artifact: self.given.into(),
            message: e.to_string(),
        }
    }

    fn unsafe_(&self, path: &str, reason: &str) -> ExtractError {
        ExtractError::Unsafe {
            artifact: self.artifact.clone(),
            path: shown(path),
            reason: reason.into(),
        }
    }

    fn mismatch(&self, path: &str, reason: String) -> ExtractError {
        ExtractError::Mismatch {
            artifact: self.artifact.clone(),
            path: shown(path),
            reason,
        }
    }

    fn io(&self, path: &Path, source: io::Error) -> ExtractError {
        ExtractError::Io {
            artifact: self.artifact.clone(),
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Reads the manifest, which must be the first entry, a regular file of at most
/// [`MAX_MANIFEST_BYTES`] under its own short name.
fn read_manifest<R: Read>(
    entries: &mut tar::Entries<'_, R>,
    names: &Names,
) -> Result<Manifest, ExtractError> {
    let no_manifest = || ExtractError::NoManifest {
        artifact: names.artifact.clone(),
    };
    let Some(Next {
        entry: mut first,
        name: first_name,
        ..
    }) = next_entry(entries, names)?
    else {
        return Err(no_manifest());
    };
    if first_name.is_some()
        || first.path_bytes().as_ref() != MANIFEST_NAME.as_bytes()
        || first.header().entry_type() != tar::EntryType::Regular
        || first.size() > MAX_MANIFEST_BYTES
    {
        return Err(no_manifest());
    }
    let mut buf = Vec::new();
    (&mut first)
        .take(MAX_MANIFEST_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| names.corrupt(e))?;
    drop(first);
    let manifest: Manifest = serde_json::from_slice(&buf).map_err(|e| ExtractError::Corrupt {
        artifact: names.artifact.clone(),
        message: format!("invalid manifest: {e}"),
    })?;
    if !crate::recipe::is_component_name(&manifest.name) {
        return Err(names.unsafe_(
            &manifest.name,
            "the manifest's component name is not a valid name (lowercase letters, digits, - _ ., at most 64)",
        ));
    }
    if !crate::package::manifest::is_plain_word(&manifest.version) {
        return Err(names.unsafe_(
            &manifest.version,
            "the manifest's version is not a plain word (at most 128 printable characters, no spaces)",
        ));
    }
    Ok(manifest)
}

/// What the manifest promises: its entries by path, and the total size of its files.
struct Expected {
    files: BTreeMap<String, FileEntry>,
    total: u64,
}

impl Expected {
    /// Checks every path the manifest lists before any entry is written, so a tarball that could
    /// never install is refused whole, and its total against `limit`.
    fn from_manifest(manifest: &Manifest, limit: u64, names: &Names) -> Result<Self, ExtractError> {
        let mut files: BTreeMap<String, FileEntry> = BTreeMap::new();
        let mut total: u64 = 0;
        for f in &manifest.files {
            let Some(p) = normalize(&f.path).filter(|p| *p == f.path) else {
                return Err(names.unsafe_(
                    &f.path,
                    "the manifest lists a path that is absolute, climbs with .., or is not normalized",
                ));
            };
            let depth = p.matches('/').count();
            if depth > MAX_DEPTH {
                return Err(names.unsafe_(
                    &f.path,
                    &format!(
                        "the manifest lists a path {depth} directories deep; an install tree is at most {MAX_DEPTH}"
                    ),
                ));
            }
            if has_reserved(&p) {
                return Err(names.unsafe_(
                    &f.path,
                    "the manifest lists a name beginning .rocforge, which rocforge keeps for its receipts and journal",
                ));
            }
            if f.kind == Kind::Symlink
                && let Some(rule) = symlink_refusal(&p, f.target.as_deref().unwrap_or_default())
            {
                return Err(names.unsafe_(
                    &f.path,
                    &format!("the manifest lists it as a symlink, and {rule}"),
                ));
            }
            total = total.saturating_add(f.size);
            files.insert(p, f.clone());
        }
        if total > limit {
            return Err(ExtractError::TooBig {
                artifact: names.artifact.clone(),
                size: total,
                limit,
            });
        }
        Ok(Expected { files, total })
    }
}

/// What the entries so far have written: later entries are checked against it.
#[derive(Default)]
struct Written {
    symlinks: BTreeSet<String>,
    files: BTreeSet<String>,
    seen: BTreeSet<String>,
    bytes: u64,
}

impl Written {
    /// Takes `path` for this entry: refused when an earlier entry had it, or when it would be
    /// written through a symlink or below a file.
    fn claim(&mut self, path: &str, names: &Names) -> Result<(), ExtractError> {
        if !self.seen.insert(path.to_string()) {
            return Err(names.unsafe_(path, "appears twice"));
        }
        // Nothing may be written through a symlink, or below a file.
        let mut anc = path;
        while let Some((parent, _)) = anc.rsplit_once('/') {
            if self.symlinks.contains(parent) {
                return Err(names.unsafe_(path, "written through a symlink"));
            }
            if self.files.contains(parent) {
                return Err(names.unsafe_(path, "below a regular file"));
            }
            anc = parent;
        }
        Ok(())
    }

    /// Counts a regular file's `size` (as its header says) before any of its bytes are read.
    fn count(
        &mut self,
        path: &str,
        size: u64,
        m: &FileEntry,
        expected: &Expected,
        names: &Names,
    ) -> Result<(), ExtractError> {
        if size != m.size {
            return Err(names.mismatch(
                path,
                format!(
                    "the tarball says {size} bytes, the manifest {} bytes",
                    m.size
                ),
            ));
        }
        self.bytes = self.bytes.saturating_add(size);
        if self.bytes > expected.total {
            return Err(ExtractError::TooBig {
                artifact: names.artifact.clone(),
                size: self.bytes,
                limit: expected.total,
            });
        }
        Ok(())
    }
}

/// The directory entries are written into, held open.
struct Stage<'a> {
    names: &'a Names<'a>,
    dest: &'a Path,
    root: Dir,
}

impl Stage<'_> {
    /// Checks one entry's path and kind and writes it; returns its manifest entry.
    fn unpack<R: Read>(
        &self,
        next: Next<'_, R>,
        expected: &Expected,
        written: &mut Written,
    ) -> Result<FileEntry, ExtractError> {
        let Next {
            mut entry,
            name,
            link,
        } = next;
        let names = self.names;
        let path = entry_path(
            name.unwrap_or_else(|| entry.path_bytes().into_owned()),
            names,
        )?;
        let link_name = |entry: &tar::Entry<'_, R>| {
            link.clone()
                .or_else(|| entry.link_name_bytes().map(|b| b.into_owned()))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().map_err(|e| names.corrupt(e))?;
        if mode & 0o6000 != 0 {
            return Err(names.unsafe_(&path, "setuid or setgid bit"));
        }
        written.claim(&path, names)?;
        let manifest_entry = expected.files.get(&path);
        let want_kind = |k: Kind| -> Result<&FileEntry, ExtractError> {
            match manifest_entry {
                Some(e) if e.kind == k => Ok(e),
                Some(e) => Err(names.mismatch(
                    &path,
                    format!(
                        "is a {k:?} in the tarball but a {:?} in the manifest",
                        e.kind
                    ),
                )),
                None => Err(names.mismatch(&path, "is not in the manifest".into())),
            }
        };
        match kind {
            tar::EntryType::Directory => {
                want_kind(Kind::Dir)?;
                self.make_dir(&path)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let m = want_kind(Kind::File)?;
                written.count(&path, entry.size(), m, expected, names)?;
                self.write_file(&path, m, &mut entry)?;
                written.files.insert(path.clone());
            }
            tar::EntryType::Symlink => {
                let link = link_name(&entry);
                if let Some(rule) = symlink_refusal(&path, &link) {
                    return Err(
                        names.unsafe_(&path, &format!("a symlink to {}: {rule}", shown(&link)))
                    );
                }
                let m = want_kind(Kind::Symlink)?;
                self.symlink(&path, m, &link)?;
                written.symlinks.insert(path.clone());
            }
            tar::EntryType::Link => {
                let m = want_kind(Kind::File)?;
                self.hard_link(&path, m, &link_name(&entry), expected, written)?;
                written.files.insert(path.clone());
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                return Err(names.unsafe_(&path, "a device file"));
            }
            tar::EntryType::Fifo => return Err(names.unsafe_(&path, "a FIFO")),
            other => {
                return Err(names.unsafe_(&path, &format!("unsupported entry type {other:?}")));
            }
        }
        Ok(manifest_entry.cloned().expect("checked above"))
    }

    /// The directory holding `path` and its last component. Every component below `dest` is
    /// opened without following links: one that is a symlink (or a file) where a directory
    /// should be refuses the entry.
    fn walk(&self, path: &str) -> Result<(Dir, CString), ExtractError> {
        self.root.parent_of(path).map_err(|e| {
            if not_a_dir(&e) {
                self.names.unsafe_(
                    path,
                    "a directory above it is a symlink or a file (written through a link?)",
                )
            } else {
                self.names.io(&self.dest.join(path), e)
            }
        })
    }

    /// The error for a failed create of `path`: something already there is another artifact's.
    fn exists(&self, path: &str, e: io::Error) -> ExtractError {
        if e.kind() == io::ErrorKind::AlreadyExists {
            self.names.unsafe_(
                path,
                "already exists in the staging directory (another artifact of this install has it)",
            )
        } else {
            self.names.io(&self.dest.join(path), e)
        }
    }

    /// A symlink whose target the manifest records (checked against the tree's rules already).
    fn symlink(&self, path: &str, m: &FileEntry, link: &str) -> Result<(), ExtractError> {
        if m.target.as_deref() != Some(link) {
            return Err(self.names.mismatch(
                path,
                "the symlink target differs from the manifest's".into(),
            ));
        }
        let (parent, leaf) = self.walk(path)?;
        parent
            .symlink(link, &leaf)
            .map_err(|e| self.exists(path, e))?;
        Ok(())
    }

    fn make_dir(&self, path: &str) -> Result<(), ExtractError> {
        let (parent, leaf) = self.walk(path)?;
        parent.child_dir(&leaf, true).map_err(|e| {
            if not_a_dir(&e) {
                self.names
                    .unsafe_(path, "a directory path is already something else")
            } else {
                self.names.io(&self.dest.join(path), e)
            }
        })?;
        Ok(())
    }

    /// Writes a regular file's bytes, hashing them as they arrive: the stream is never trusted
    /// past the size the manifest records.
    fn write_file<R: Read>(
        &self,
        path: &str,
        m: &FileEntry,
        entry: &mut tar::Entry<'_, R>,
    ) -> Result<(), ExtractError> {
        let names = self.names;
        let target_path = self.dest.join(path);
        let perm = if m.executable { 0o755 } else { 0o644 };
        let (parent, leaf) = self.walk(path)?;
        let f = parent
            .create_file(&leaf, perm)
            .map_err(|e| self.exists(path, e))?;
        let mut w = io::BufWriter::with_capacity(256 * 1024, f);
        let mut h = Sha256::new();
        let mut got: u64 = 0;
        let mut chunk = vec![0u8; 256 * 1024];
        loop {
            let n = entry.read(&mut chunk).map_err(|e| names.corrupt(e))?;
            if n == 0 {
                break;
            }
            got += n as u64;
            if got > m.size {
                return Err(names.mismatch(
                    path,
                    format!("more than the {} bytes the manifest records", m.size),
                ));
            }
            h.update(&chunk[..n]);
            w.write_all(&chunk[..n])
                .map_err(|e| names.io(&target_path, e))?;
        }
        w.flush().map_err(|e| names.io(&target_path, e))?;
        if got != m.size {
            return Err(names.mismatch(path, format!("{got} bytes, the manifest says {}", m.size)));
        }
        let sha = hex::encode(h.finalize());
        if Some(&sha) != m.sha256.as_ref() {
            return Err(names.mismatch(
                path,
                format!(
                    "sha256 {sha} does not match the manifest's {}",
                    shown(m.sha256.as_deref().unwrap_or("(none)"))
                ),
            ));
        }
        // The tarball's time (rocforge writes SOURCE_DATE_EPOCH), not the moment of unpacking:
        // a dependency pulled on another machine must not look newer than the objects of a
        // checkpoint built against it, or ninja compiles them again. Never in the future.
        let mtime = entry.header().mtime().unwrap_or(0);
        let when = std::time::UNIX_EPOCH
            .checked_add(std::time::Duration::from_secs(mtime))
            .map_or_else(std::time::SystemTime::now, |t| {
                t.min(std::time::SystemTime::now())
            });
        w.get_ref()
            .set_modified(when)
            .map_err(|e| names.io(&target_path, e))?;
        Ok(())
    }

    /// Links `path` to `link`, which must be an earlier regular file of this tarball with the
    /// same content in the manifest.
    fn hard_link(
        &self,
        path: &str,
        m: &FileEntry,
        link: &str,
        expected: &Expected,
        written: &Written,
    ) -> Result<(), ExtractError> {
        let names = self.names;
        let Some(src) = normalize(link).filter(|s| written.files.contains(s)) else {
            return Err(names.unsafe_(
                path,
                &format!(
                    "a hard link to {}, which is not an earlier file of this tarball",
                    shown(link)
                ),
            ));
        };
        let src_m = &expected.files[&src];
        if src_m.sha256 != m.sha256 {
            return Err(names.mismatch(
                path,
                "a hard link whose content differs from the manifest's".into(),
            ));
        }
        let (from_dir, from_leaf) = self
            .root
            .parent_of(&src)
            .map_err(|e| names.io(&self.dest.join(&src), e))?;
        let (parent, leaf) = self.walk(path)?;
        parent
            .hard_link(&from_dir, &from_leaf, &leaf)
            .map_err(|e| self.exists(path, e))?;
        Ok(())
    }
}

/// An entry's path, normalized; refused when it is not UTF-8, leaves the tree or is one of
/// rocforge's own names.
fn entry_path(raw: Vec<u8>, names: &Names) -> Result<String, ExtractError> {
    let raw = String::from_utf8(raw).map_err(|e| {
        names.unsafe_(
            &String::from_utf8_lossy(e.as_bytes()),
            "the path is not UTF-8",
        )
    })?;
    let Some(path) = normalize(&raw) else {
        let reason = if raw.starts_with('/') {
            "absolute path"
        } else if raw.split('/').any(|c| c == "..") {
            "the path climbs out of the prefix with .."
        } else {
            "the path is empty or holds a NUL or a backslash"
        };
        return Err(names.unsafe_(&raw, reason));
    };
    if has_reserved(&path) {
        return Err(names.unsafe_(
            &path,
            "a name beginning .rocforge, which rocforge keeps for its receipts and journal",
        ));
    }
    Ok(path)
}

/// Moves the files among `entries` (an [`extract`] result) from `from` into `to`, each by one
/// rename, walking `to` as [`extract`] does, never through a link: a file `to` already has, or
/// one whose directory there is a symlink or a file, stays where it is. For a cache that keeps
/// what it has (ccache names an entry by what made it). Returns the files and bytes moved.
pub fn move_new_files(
    from: &Path,
    to: &Path,
    entries: &[FileEntry],
) -> std::io::Result<(usize, u64)> {
    let src = Dir::open(from)?;
    let dst = Dir::open(to)?;
    let (mut files, mut bytes) = (0, 0);
    for e in entries.iter().filter(|e| e.kind == Kind::File) {
        let (parent, leaf) = match dst.parent_of(&e.path) {
            Ok(p) => p,
            Err(err) if not_a_dir(&err) => continue,
            Err(err) => return Err(err),
        };
        if parent.exists(&leaf)? {
            continue;
        }
        let (from_dir, from_leaf) = src.parent_of(&e.path)?;
        from_dir.rename_to(&from_leaf, &parent, &leaf)?;
        files += 1;
        bytes += e.size;
    }
    Ok((files, bytes))
}

/// Moves what [`extract`] put into `from` (`entries`, its result) into `to`, the staging shared
/// by the artifacts of one install. `staged` maps every non-directory path already in `to` to
/// the artifact that brought it (`artifact` names this one): a path two artifacts have is
/// refused, naming both. Paths in `to` are walked as in [`extract`], never through a link.
pub fn gather(
    from: &Path,
    to: &Path,
    entries: &[FileEntry],
    artifact: &str,
    staged: &mut BTreeMap<String, String>,
) -> Result<(), ExtractError> {
    let ioe = |path: &str, source| ExtractError::Io {
        artifact: shown(artifact),
        path: to.join(path),
        source,
    };
    let src = Dir::open(from).map_err(|e| ioe("", e))?;
    let dst = Dir::open(to).map_err(|e| ioe("", e))?;
    for e in entries {
        let (parent, leaf) = dst.parent_of(&e.path).map_err(|err| {
            if not_a_dir(&err) {
                ExtractError::Unsafe {
                    artifact: shown(artifact),
                    path: shown(&e.path),
                    reason: "a directory above it is a file or a symlink another artifact of this install has".into(),
                }
            } else {
                ioe(&e.path, err)
            }
        })?;
        if e.kind == Kind::Dir {
            parent.child_dir(&leaf, true).map_err(|err| {
                if not_a_dir(&err) {
                    ExtractError::Unsafe {
                        artifact: shown(artifact),
                        path: shown(&e.path),
                        reason: format!(
                            "a directory here, a file or symlink in {}",
                            shown(
                                staged
                                    .get(&e.path)
                                    .map_or("another artifact", String::as_str)
                            )
                        ),
                    }
                } else {
                    ioe(&e.path, err)
                }
            })?;
            continue;
        }
        if let Some(other) = staged.get(&e.path) {
            return Err(ExtractError::Unsafe {
                artifact: shown(artifact),
                path: shown(&e.path),
                reason: format!("{} has it too", shown(other)),
            });
        }
        if parent.exists(&leaf).map_err(|err| ioe(&e.path, err))? {
            return Err(ExtractError::Unsafe {
                artifact: shown(artifact),
                path: shown(&e.path),
                reason: "a directory in another artifact of this install".into(),
            });
        }
        let (from_dir, from_leaf) = src.parent_of(&e.path).map_err(|err| ioe(&e.path, err))?;
        from_dir
            .rename_to(&from_leaf, &parent, &leaf)
            .map_err(|err| ioe(&e.path, err))?;
        staged.insert(e.path.clone(), artifact.to_string());
    }
    Ok(())
}
