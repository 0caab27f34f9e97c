//! The one way rocforge puts something in place: build it under a sibling temporary name, then
//! rename it over the target in one step. Dropped without [`Staged::commit`] (an error, a
//! panic, Ctrl-C unwinding), the temporary is removed, so a failure leaves the target as it
//! was. A kill -9 can still leave a temporary behind: its name carries the process id, and
//! [`super::reap_temp`] (or the store's lock-guarded cleanup) removes it once that process is
//! gone.
//!
//! Two kinds of temporary: a directory created at once ([`Staged::dir_beside`],
//! [`Staged::dir_in`]) to fill, and a free name ([`Staged::name_beside`]) where the caller
//! creates a file or a symbolic link (with the mode it wants, which a pre-created file would
//! not have).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A temporary beside its target, renamed into place by [`Staged::commit`], else removed.
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
    target: PathBuf,
    armed: bool,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn parent_of(target: &Path) -> &Path {
    target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn name_of(target: &Path) -> String {
    target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Staged {
    /// A new empty directory beside `target`, `.<name>.tmp-<pid>-…` ([`super::staging_dir`]).
    pub fn dir_beside(target: &Path) -> io::Result<Staged> {
        let path = super::staging_dir(target)?;
        Ok(Staged {
            path,
            target: target.to_path_buf(),
            armed: true,
        })
    }

    /// A new empty directory in `parent` named `<prefix>…`, for `target`: for temporaries
    /// found again by a name of their own (the store's `.tmp-<key>-…`, reserved by a lock).
    pub fn dir_in(parent: &Path, prefix: &str, target: &Path) -> io::Result<Staged> {
        std::fs::create_dir_all(parent)?;
        let path = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(parent)?
            .keep();
        Ok(Staged {
            path,
            target: target.to_path_buf(),
            armed: true,
        })
    }

    /// A free name beside `target`, `.<name>.tmp-<pid>-<n>`, where nothing is yet: the caller
    /// creates a file or a link at [`Staged::path`].
    pub fn name_beside(target: &Path) -> Staged {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = parent_of(target).join(format!(
            ".{}.tmp-{}-{n}",
            name_of(target),
            std::process::id()
        ));
        Staged {
            path,
            target: target.to_path_buf(),
            armed: true,
        }
    }

    /// Where to build.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the temporary over the target (a file is replaced; a directory only where the
    /// target does not exist) and syncs the parent directory so the rename is durable. On an
    /// error the temporary is removed and the target is as it was.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        std::fs::rename(&self.path, &self.target)?;
        self.armed = false;
        super::sync_dir(parent_of(&self.target));
        Ok(self.target.clone())
    }

    /// [`Staged::commit`] where the target may be an empty directory (a prefix or an export
    /// directory made beforehand): it is removed first. Not atomic in that one case, which only
    /// ever loses an empty directory.
    pub fn commit_over_empty(self) -> io::Result<PathBuf> {
        match std::fs::remove_dir(&self.target) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.commit()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ = match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.is_dir() => super::remove_tree(&self.path),
            Ok(_) => std::fs::remove_file(&self.path),
            Err(_) => Ok(()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_moves_in_and_dropped_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("t");
        let s = Staged::dir_beside(&target).unwrap();
        std::fs::write(s.path().join("f"), "x").unwrap();
        assert_eq!(s.commit().unwrap(), target);
        assert_eq!(std::fs::read_to_string(target.join("f")).unwrap(), "x");

        let s = Staged::dir_beside(&tmp.path().join("u")).unwrap();
        std::fs::write(s.path().join("f"), "x").unwrap();
        drop(s);
        let f = Staged::name_beside(&target.join("g"));
        std::os::unix::fs::symlink("f", f.path()).unwrap();
        drop(f);
        let mut left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .chain(std::fs::read_dir(&target).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["f", "t"]);
    }

    #[test]
    fn a_failed_commit_removes_the_temporary() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("t");
        std::fs::create_dir_all(target.join("full")).unwrap();
        let s = Staged::dir_beside(&target).unwrap();
        let staged = s.path().to_path_buf();
        assert!(s.commit().is_err(), "a non-empty directory is not replaced");
        assert!(!staged.exists());
        let s = Staged::dir_beside(&tmp.path().join("e")).unwrap();
        std::fs::create_dir(tmp.path().join("e")).unwrap();
        s.commit_over_empty().unwrap();
        assert!(tmp.path().join("e").is_dir());
    }
}
