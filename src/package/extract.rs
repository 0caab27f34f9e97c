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
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::package::manifest::{
    FileEntry, Kind, MANIFEST_NAME, MAX_MANIFEST_BYTES, Manifest, has_reserved, normalize,
    symlink_refusal,
};

/// The default cap on what one install (or cache pull) unpacks.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 30;

/// The most a GNU long name or link (`L`, `K`) or a PAX header (`x`, `g`) may hold: paths in a
/// ROCm tree are a few hundred bytes, and anything beyond this is a memory bomb.
pub const MAX_EXTENSION_BYTES: u64 = 64 << 10;

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
    let corrupt = |e: io::Error| ExtractError::Corrupt {
        artifact: artifact.into(),
        message: e.to_string(),
    };
    let artifact = &shown(artifact);
    let unsafe_ = |path: &str, reason: &str| ExtractError::Unsafe {
        artifact: artifact.clone(),
        path: shown(path),
        reason: reason.into(),
    };
    let mismatch = |path: &str, reason: String| ExtractError::Mismatch {
        artifact: artifact.clone(),
        path: shown(path),
        reason,
    };
    let ioe = |path: &Path, source| ExtractError::Io {
        artifact: artifact.into(),
        path: path.to_path_buf(),
        source,
    };
    let root = Dir::open(dest).map_err(|e| ioe(dest, e))?;
    let mut ar = tar::Archive::new(reader);
    // Raw: the tar crate would read every long name and PAX header whole into memory.
    let mut entries = ar.entries().map_err(corrupt)?.raw(true);
    let mut next = || -> Result<Option<Next<_>>, ExtractError> {
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        loop {
            let Some(e) = entries.next() else {
                if long_name.is_some() || long_link.is_some() {
                    return Err(corrupt(io::Error::other(
                        "a long name or PAX header without the entry it describes",
                    )));
                }
                return Ok(None);
            };
            let mut e = e.map_err(corrupt)?;
            let kind = e.header().entry_type();
            let ext = kind.is_gnu_longname()
                || kind.is_gnu_longlink()
                || kind.is_pax_local_extensions()
                || kind.is_pax_global_extensions();
            if !ext {
                return Ok(Some(Next {
                    entry: e,
                    name: long_name,
                    link: long_link,
                }));
            }
            if e.size() > MAX_EXTENSION_BYTES {
                return Err(ExtractError::Unsafe {
                    artifact: artifact.clone(),
                    path: format!("<{kind:?} header>"),
                    reason: format!(
                        "{} bytes, more than the {MAX_EXTENSION_BYTES} a long name or PAX header may hold",
                        e.size()
                    ),
                });
            }
            let mut buf = Vec::new();
            (&mut e)
                .take(MAX_EXTENSION_BYTES)
                .read_to_end(&mut buf)
                .map_err(corrupt)?;
            let slot = if kind.is_gnu_longname() {
                &mut long_name
            } else if kind.is_gnu_longlink() {
                &mut long_link
            } else if kind.is_pax_local_extensions() {
                // rocforge's tarballs are GNU; PAX path and linkpath are honoured, a PAX size is
                // not (it would make this reader and tar(1) see different entries).
                for rec in pax_records(&buf).map_err(corrupt)? {
                    match rec.0.as_str() {
                        "path" => long_name = Some(rec.1),
                        "linkpath" => long_link = Some(rec.1),
                        "size" => {
                            return Err(ExtractError::Unsafe {
                                artifact: artifact.clone(),
                                path: "<PAX header>".into(),
                                reason: "a PAX size record (rocforge tarballs carry none)".into(),
                            });
                        }
                        _ => {}
                    }
                }
                continue;
            } else {
                continue;
            };
            if slot.is_some() {
                return Err(corrupt(io::Error::other(
                    "two long names describing the same entry",
                )));
            }
            if buf.last() == Some(&0) {
                buf.pop();
            }
            *slot = Some(buf);
        }
    };

    // The manifest.
    let Some(Next {
        entry: mut first,
        name: first_name,
        ..
    }) = next()?
    else {
        return Err(ExtractError::NoManifest {
            artifact: artifact.clone(),
        });
    };
    if first_name.is_some()
        || first.path_bytes().as_ref() != MANIFEST_NAME.as_bytes()
        || first.header().entry_type() != tar::EntryType::Regular
        || first.size() > MAX_MANIFEST_BYTES
    {
        return Err(ExtractError::NoManifest {
            artifact: artifact.clone(),
        });
    }
    let mut buf = Vec::new();
    (&mut first)
        .take(MAX_MANIFEST_BYTES)
        .read_to_end(&mut buf)
        .map_err(corrupt)?;
    drop(first);
    let manifest: Manifest = serde_json::from_slice(&buf).map_err(|e| ExtractError::Corrupt {
        artifact: artifact.clone(),
        message: format!("invalid manifest: {e}"),
    })?;
    if !crate::recipe::is_component_name(&manifest.name) {
        return Err(unsafe_(
            &manifest.name,
            "the manifest's component name is not a valid name (lowercase letters, digits, - _ ., at most 64)",
        ));
    }
    if !crate::package::manifest::is_plain_word(&manifest.version) {
        return Err(unsafe_(
            &manifest.version,
            "the manifest's version is not a plain word (at most 128 printable characters, no spaces)",
        ));
    }
    let mut expected: BTreeMap<String, FileEntry> = BTreeMap::new();
    let mut total: u64 = 0;
    for f in &manifest.files {
        let Some(p) = normalize(&f.path).filter(|p| *p == f.path) else {
            return Err(unsafe_(
                &f.path,
                "the manifest lists a path that is absolute, climbs with .., or is not normalized",
            ));
        };
        if has_reserved(&p) {
            return Err(unsafe_(
                &f.path,
                "the manifest lists a name beginning .rocforge, which rocforge keeps for its receipts and journal",
            ));
        }
        if f.kind == Kind::Symlink
            && let Some(rule) = symlink_refusal(&p, f.target.as_deref().unwrap_or_default())
        {
            return Err(unsafe_(
                &f.path,
                &format!("the manifest lists it as a symlink, and {rule}"),
            ));
        }
        total = total.saturating_add(f.size);
        expected.insert(p, f.clone());
    }
    if total > limit {
        return Err(ExtractError::TooBig {
            artifact: artifact.clone(),
            size: total,
            limit,
        });
    }

    let mut symlinks: BTreeSet<String> = BTreeSet::new();
    let mut files: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut written_total: u64 = 0;
    let mut out = Vec::new();
    while let Some(Next {
        mut entry,
        name,
        link,
    }) = next()?
    {
        let raw = name.unwrap_or_else(|| entry.path_bytes().into_owned());
        let raw = String::from_utf8(raw).map_err(|e| {
            unsafe_(
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
            return Err(unsafe_(&raw, reason));
        };
        if has_reserved(&path) {
            return Err(unsafe_(
                &path,
                "a name beginning .rocforge, which rocforge keeps for its receipts and journal",
            ));
        }
        let link_name = || {
            link.clone()
                .or_else(|| entry.link_name_bytes().map(|b| b.into_owned()))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
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
        // Every component below `dest` is opened without following links: one that is a
        // symlink (or a file) where a directory should be refuses the entry.
        let walk = |root: &Dir| -> Result<(Dir, CString), ExtractError> {
            root.parent_of(&path).map_err(|e| {
                if not_a_dir(&e) {
                    unsafe_(
                        &path,
                        "a directory above it is a symlink or a file (written through a link?)",
                    )
                } else {
                    ioe(&target_path, e)
                }
            })
        };
        let exists = |e: io::Error| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                unsafe_(
                    &path,
                    "already exists in the staging directory (another artifact of this install has it)",
                )
            } else {
                ioe(&target_path, e)
            }
        };
        match kind {
            tar::EntryType::Directory => {
                want_kind(Kind::Dir)?;
                let (parent, leaf) = walk(&root)?;
                parent.child_dir(&leaf, true).map_err(|e| {
                    if not_a_dir(&e) {
                        unsafe_(&path, "a directory path is already something else")
                    } else {
                        ioe(&target_path, e)
                    }
                })?;
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
                        artifact: artifact.clone(),
                        size: written_total,
                        limit: total,
                    });
                }
                let perm = if m.executable { 0o755 } else { 0o644 };
                let (parent, leaf) = walk(&root)?;
                let f = parent.create_file(&leaf, perm).map_err(exists)?;
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
                            shown(m.sha256.as_deref().unwrap_or("(none)"))
                        ),
                    ));
                }
                files.insert(path.clone());
            }
            tar::EntryType::Symlink => {
                let link = link_name();
                if let Some(rule) = symlink_refusal(&path, &link) {
                    return Err(unsafe_(
                        &path,
                        &format!("a symlink to {}: {rule}", shown(&link)),
                    ));
                }
                let m = want_kind(Kind::Symlink)?;
                if m.target.as_deref() != Some(link.as_str()) {
                    return Err(mismatch(
                        &path,
                        "the symlink target differs from the manifest's".into(),
                    ));
                }
                let (parent, leaf) = walk(&root)?;
                parent.symlink(&link, &leaf).map_err(exists)?;
                symlinks.insert(path.clone());
            }
            tar::EntryType::Link => {
                let m = want_kind(Kind::File)?;
                let link = link_name();
                let Some(src) = normalize(&link).filter(|s| files.contains(s)) else {
                    return Err(unsafe_(
                        &path,
                        &format!(
                            "a hard link to {}, which is not an earlier file of this tarball",
                            shown(&link)
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
                let (from_dir, from_leaf) =
                    root.parent_of(&src).map_err(|e| ioe(&dest.join(&src), e))?;
                let (parent, leaf) = walk(&root)?;
                parent
                    .hard_link(&from_dir, &from_leaf, &leaf)
                    .map_err(exists)?;
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

/// An entry with the long name and link that the extension headers before it gave it.
struct Next<'a, R: Read> {
    entry: tar::Entry<'a, R>,
    name: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
}

/// PAX records (`LEN KEY=VALUE\n`).
fn pax_records(mut buf: &[u8]) -> io::Result<Vec<(String, Vec<u8>)>> {
    let bad = || io::Error::other("a malformed PAX record");
    let mut out = Vec::new();
    while !buf.is_empty() {
        let sp = buf.iter().position(|&b| b == b' ').ok_or_else(bad)?;
        let len: usize = std::str::from_utf8(&buf[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        if len <= sp + 1 || len > buf.len() || buf[len - 1] != b'\n' {
            return Err(bad());
        }
        let rec = &buf[sp + 1..len - 1];
        let eq = rec.iter().position(|&b| b == b'=').ok_or_else(bad)?;
        out.push((
            String::from_utf8_lossy(&rec[..eq]).into_owned(),
            rec[eq + 1..].to_vec(),
        ));
        buf = &buf[len..];
    }
    Ok(out)
}

/// Whether opening a directory failed because a symlink or a file is there.
pub fn not_a_dir(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP))
}

/// A directory held open; paths below it are resolved one component at a time, never through
/// a symlink.
pub struct Dir(OwnedFd);

fn cstr(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Dir {
    pub fn open(path: &Path) -> io::Result<Dir> {
        let f = std::fs::File::open(path)?;
        if !f.metadata()?.is_dir() {
            return Err(io::Error::from(io::ErrorKind::NotADirectory));
        }
        Ok(Dir(f.into()))
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// The child directory `name`, created when `create`; a symlink or a file there is an
    /// error ([`not_a_dir`]).
    pub fn child_dir(&self, name: &CString, create: bool) -> io::Result<Dir> {
        if create {
            // SAFETY: a valid descriptor and a NUL-terminated name.
            let r = unsafe { libc::mkdirat(self.fd().as_raw_fd(), name.as_ptr(), 0o755) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
        }
        // SAFETY: as above; O_NOFOLLOW refuses a symlink as the last (only) component.
        let fd = cvt(unsafe {
            libc::openat(
                self.fd().as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: openat returned a fresh descriptor we own.
        Ok(Dir(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The directory holding `rel` (normalized, relative), its missing directories created, and
    /// the last component's name.
    pub fn parent_of(&self, rel: &str) -> io::Result<(Dir, CString)> {
        let mut parts: Vec<&str> = rel.split('/').collect();
        let leaf = cstr(parts.pop().unwrap_or_default())?;
        let mut dir = Dir(self.0.try_clone()?);
        for p in parts {
            dir = dir.child_dir(&cstr(p)?, true)?;
        }
        Ok((dir, leaf))
    }

    /// A new regular file (never through a symlink, never an existing one).
    pub fn create_file(&self, name: &CString, mode: u32) -> io::Result<std::fs::File> {
        // SAFETY: a valid descriptor and a NUL-terminated name.
        let fd = cvt(unsafe {
            libc::openat(
                self.fd().as_raw_fd(),
                name.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        })?;
        // SAFETY: openat returned a fresh descriptor we own.
        Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn symlink(&self, target: &str, name: &CString) -> io::Result<()> {
        let t = cstr(target)?;
        // SAFETY: valid descriptor, NUL-terminated strings.
        cvt(unsafe { libc::symlinkat(t.as_ptr(), self.fd().as_raw_fd(), name.as_ptr()) })?;
        Ok(())
    }

    /// Whether anything (a symlink included, not followed) is at `name`.
    pub fn exists(&self, name: &CString) -> io::Result<bool> {
        // SAFETY: all zeroes is a valid `stat` (plain integers), used only as an out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor, a NUL-terminated name, a writable stat.
        let r = unsafe {
            libc::fstatat(
                self.fd().as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::NotFound {
            Ok(false)
        } else {
            Err(e)
        }
    }

    /// Renames `name` here to `to_name` in `to` (the entry itself, a symlink included).
    pub fn rename_to(&self, name: &CString, to: &Dir, to_name: &CString) -> io::Result<()> {
        // SAFETY: valid descriptors, NUL-terminated names.
        cvt(unsafe {
            libc::renameat(
                self.fd().as_raw_fd(),
                name.as_ptr(),
                to.fd().as_raw_fd(),
                to_name.as_ptr(),
            )
        })?;
        Ok(())
    }

    /// `name` here as a hard link to `from_name` in `from` (flags 0: a symlink is linked as
    /// itself, never followed).
    pub fn hard_link(&self, from: &Dir, from_name: &CString, name: &CString) -> io::Result<()> {
        // SAFETY: valid descriptors, NUL-terminated names.
        cvt(unsafe {
            libc::linkat(
                from.fd().as_raw_fd(),
                from_name.as_ptr(),
                self.fd().as_raw_fd(),
                name.as_ptr(),
                0,
            )
        })?;
        Ok(())
    }
}
