//! A patch applied to a tree held in memory: the files a series touches read in, the tree built
//! from them, and one patch's deltas checked and applied.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use git2::{
    Delta, ErrorCode, Index, IndexEntry, IndexTime, ObjectType, Odb, Oid, Repository, Tree,
};

use super::diagnose::diagnose;
use super::parse::Parsed;
use super::{PatchError, git_err, io_err};

/// A repository whose objects live in memory only.
pub(super) fn memory_repo() -> Result<Repository, git2::Error> {
    let odb = Odb::new()?;
    odb.add_new_mempack_backend(1000)?;
    Repository::from_odb(odb)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileState {
    pub(super) data: Vec<u8>,
    /// Git mode: 0o100644, 0o100755 or 0o120000.
    pub(super) mode: u32,
    /// Permission bits on disk (regular files).
    pub(super) perm: u32,
}

const MODE_FILE: u32 = 0o100644;
pub(super) const MODE_EXEC: u32 = 0o100755;
pub(super) const MODE_LINK: u32 = 0o120000;

/// The file at `rel` under `dir`, if there is one; refuses paths through symbolic links.
pub(super) fn read_state(
    dir: &Path,
    rel: &str,
    patch: &str,
) -> Result<Option<FileState>, PatchError> {
    let mut cur = dir.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (k, part) in parts.iter().enumerate() {
        cur.push(part);
        let meta = match fs::symlink_metadata(&cur) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => return Ok(None),
            Err(e) => {
                return Err(PatchError::Io {
                    path: cur,
                    source: e,
                });
            }
        };
        let last = k + 1 == parts.len();
        if meta.file_type().is_symlink() {
            if !last {
                return Err(PatchError::BeyondSymlink {
                    patch: patch.to_string(),
                    file: rel.to_string(),
                });
            }
            let target = fs::read_link(&cur).map_err(io_err(&cur))?;
            return Ok(Some(FileState {
                data: target.as_os_str().as_bytes().to_vec(),
                mode: MODE_LINK,
                perm: 0,
            }));
        }
        if !last && !meta.is_dir() {
            return Ok(None);
        }
        if last {
            if !meta.is_file() {
                return Ok(None);
            }
            let data = fs::read(&cur).map_err(io_err(&cur))?;
            let perm = meta.permissions().mode() & 0o7777;
            let mode = if perm & 0o100 != 0 {
                MODE_EXEC
            } else {
                MODE_FILE
            };
            return Ok(Some(FileState { data, mode, perm }));
        }
    }
    Ok(None)
}

pub(super) fn build_tree(
    repo: &Repository,
    files: &BTreeMap<String, FileState>,
) -> Result<Oid, git2::Error> {
    let mut index = Index::new()?;
    for (path, st) in files {
        let id = repo.blob(&st.data)?;
        index.add(&IndexEntry {
            ctime: IndexTime::new(0, 0),
            mtime: IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: st.mode,
            uid: 0,
            gid: 0,
            file_size: st.data.len() as u32,
            id,
            flags: 0,
            flags_extended: 0,
            path: path.as_bytes().to_vec(),
        })?;
    }
    index.write_tree_to(repo)
}

/// A blob at `path` in `tree`: its content and mode.
pub(super) fn tree_entry(
    repo: &Repository,
    tree: &Tree<'_>,
    path: &str,
) -> Result<Option<(Vec<u8>, u32)>, git2::Error> {
    match tree.get_path(Path::new(path)) {
        Ok(entry) if entry.kind() == Some(ObjectType::Blob) => {
            let blob = repo.find_blob(entry.id())?;
            Ok(Some((blob.content().to_vec(), entry.filemode() as u32)))
        }
        Ok(_) => Ok(None),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn exists(tree: &Tree<'_>, path: &str) -> bool {
    tree.get_path(Path::new(path)).is_ok()
}

/// Applies one parsed patch to `tree`, returning the new tree's id.
pub(super) fn apply_one(repo: &Repository, tree: &Tree<'_>, p: &Parsed) -> Result<Oid, PatchError> {
    let perr = git_err(&p.name);
    // libgit2 overwrites a file a "new file" patch creates and reports a missing one as a bare
    // "apply failed": check both here, in delta order, as git does.
    let mut removed: BTreeSet<&str> = BTreeSet::new();
    let mut added: BTreeSet<&str> = BTreeSet::new();
    let present = |path: &str, removed: &BTreeSet<&str>, added: &BTreeSet<&str>| {
        added.contains(path) || (exists(tree, path) && !removed.contains(path))
    };
    for d in &p.deltas {
        if let Some(old) = d.old.as_deref() {
            if !present(old, &removed, &added) {
                return Err(PatchError::MissingFile {
                    patch: p.name.clone(),
                    file: old.to_string(),
                });
            }
            if matches!(d.status, Delta::Deleted | Delta::Renamed) {
                removed.insert(old);
                added.remove(old);
            }
        }
        if let Some(new) = d.new.as_deref()
            && matches!(d.status, Delta::Added | Delta::Renamed | Delta::Copied)
        {
            if present(new, &removed, &added) {
                return Err(PatchError::AlreadyExists {
                    patch: p.name.clone(),
                    file: new.to_string(),
                });
            }
            added.insert(new);
            removed.remove(new);
        }
    }

    let mut index = match repo.apply_to_tree(tree, &p.diff, None) {
        Ok(index) => index,
        Err(e) => {
            return Err(diagnose(repo, tree, p).unwrap_or_else(|| PatchError::Git {
                patch: p.name.clone(),
                message: format!("libgit2 could not apply the patch: {}", e.message()),
            }));
        }
    };
    // A patch that does not state the new mode (plain diffs, pure renames) keeps the old one;
    // libgit2 would make it 100644.
    for d in &p.deltas {
        if d.mode_given || d.status == Delta::Deleted {
            continue;
        }
        let (Some(old), Some(new)) = (d.old.as_deref(), d.new.as_deref()) else {
            continue;
        };
        let Ok(before) = tree.get_path(Path::new(old)) else {
            continue;
        };
        if let Some(mut entry) = index.get_path(Path::new(new), 0) {
            let mode = before.filemode() as u32;
            if entry.mode != mode {
                entry.mode = mode;
                index.add(&entry).map_err(&perr)?;
            }
        }
    }
    index.write_tree_to(repo).map_err(&perr)
}
