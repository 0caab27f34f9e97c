//! A series' result written to the directory, undone file by file if a write fails.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::apply::{FileState, MODE_EXEC, MODE_LINK};
use super::{PatchError, io_err};

pub(super) struct Change {
    pub(super) path: String,
    pub(super) before: Option<FileState>,
    pub(super) after: Option<(Vec<u8>, u32)>,
}

enum Undo {
    File {
        path: PathBuf,
        before: Option<FileState>,
    },
    CreatedDir(PathBuf),
    RemovedDir(PathBuf),
}

/// Applying a series changes many files in place, so it cannot be one rename of a staged copy
/// (the tree can be gigabytes); each file is still written through [`crate::fsutil::Staged`]
/// ([`put`]), and this undo log puts back what was changed when a later file fails.
pub(super) struct Writer<'a> {
    dir: &'a Path,
    journal: Vec<Undo>,
}

impl<'a> Writer<'a> {
    pub(super) fn new(dir: &'a Path) -> Self {
        Self {
            dir,
            journal: Vec::new(),
        }
    }

    pub(super) fn write_all(mut self, changes: &[Change]) -> Result<(), PatchError> {
        let result = self.write_inner(changes);
        if result.is_err() {
            self.roll_back();
        }
        result
    }

    fn write_inner(&mut self, changes: &[Change]) -> Result<(), PatchError> {
        // Removals first, so that a file can replace a directory that the series empties.
        for c in changes.iter().filter(|c| c.after.is_none()) {
            let path = self.dir.join(&c.path);
            fs::remove_file(&path).map_err(io_err(&path))?;
            self.journal.push(Undo::File {
                path: path.clone(),
                before: c.before.clone(),
            });
            let mut parent = path.parent();
            while let Some(p) = parent {
                if p == self.dir || !p.starts_with(self.dir) || fs::remove_dir(p).is_err() {
                    break;
                }
                self.journal.push(Undo::RemovedDir(p.to_path_buf()));
                parent = p.parent();
            }
        }
        for c in changes {
            let Some((data, mode)) = &c.after else {
                continue;
            };
            let path = self.dir.join(&c.path);
            self.make_parents(&path)?;
            let perm = match &c.before {
                Some(b) if b.mode != MODE_LINK => {
                    Some(match (b.perm & 0o111 != 0, *mode == MODE_EXEC) {
                        (false, true) => b.perm | ((b.perm & 0o444) >> 2),
                        (true, false) => b.perm & !0o111,
                        _ => b.perm,
                    })
                }
                _ => None,
            };
            put(&path, data, *mode, perm)?;
            self.journal.push(Undo::File {
                path,
                before: c.before.clone(),
            });
        }
        Ok(())
    }

    fn make_parents(&mut self, path: &Path) -> Result<(), PatchError> {
        let mut missing = Vec::new();
        let mut cur = path.parent();
        while let Some(p) = cur {
            if p == self.dir || fs::symlink_metadata(p).is_ok() {
                break;
            }
            missing.push(p.to_path_buf());
            cur = p.parent();
        }
        for p in missing.into_iter().rev() {
            fs::create_dir(&p).map_err(io_err(&p))?;
            self.journal.push(Undo::CreatedDir(p));
        }
        Ok(())
    }

    /// Best effort: puts back every file and directory changed so far, newest first.
    fn roll_back(&mut self) {
        while let Some(undo) = self.journal.pop() {
            match undo {
                Undo::File {
                    path,
                    before: Some(b),
                } => {
                    let perm = (b.mode != MODE_LINK).then_some(b.perm);
                    let _ = put(&path, &b.data, b.mode, perm);
                }
                Undo::File { path, before: None } => {
                    let _ = fs::remove_file(&path);
                }
                Undo::CreatedDir(p) => {
                    let _ = fs::remove_dir(&p);
                }
                Undo::RemovedDir(p) => {
                    let _ = fs::create_dir(&p);
                }
            }
        }
    }
}

/// Writes a file (through a temporary name and a rename) or a symbolic link at `path`.
/// `perm` is the permission to give an existing file; new files get 0666/0777 less the umask.
fn put(path: &Path, data: &[u8], mode: u32, perm: Option<u32>) -> Result<(), PatchError> {
    let staged = crate::fsutil::Staged::name_beside(path);
    let tmp = staged.path();
    let result = (|| -> io::Result<()> {
        if mode == MODE_LINK {
            symlink(std::ffi::OsStr::from_bytes(data), tmp)?;
        } else {
            let create_mode = if mode == MODE_EXEC { 0o777 } else { 0o666 };
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(create_mode)
                .open(tmp)?;
            f.write_all(data)?;
            f.sync_data()?;
            drop(f);
            if let Some(perm) = perm {
                fs::set_permissions(tmp, fs::Permissions::from_mode(perm))?;
            }
        }
        Ok(())
    })()
    .and_then(|()| staged.commit());
    result.map(drop).map_err(|e| PatchError::Io {
        path: path.to_path_buf(),
        source: e,
    })
}
