//! Filesystem steps that must never leave half-written state behind.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes `bytes` to a temporary file beside `path`, syncs it, and renames it over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir);
    Ok(())
}

/// Best effort: a directory fsync makes a rename durable; not every filesystem supports it.
pub fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// A fresh, uniquely named directory beside `target`, for building something that is then
/// renamed into place.
pub fn staging_dir(target: &Path) -> io::Result<PathBuf> {
    let parent = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .tempdir_in(parent)?;
    Ok(dir.keep())
}

/// Removes a directory tree, tolerating its absence.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Copies a directory tree, keeping symlinks as symlinks and file permissions.
pub fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let ft = e.file_type()?;
        let dest = to.join(e.file_name());
        if ft.is_dir() {
            copy_tree(&e.path(), &dest)?;
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path())?, dest)?;
        } else {
            std::fs::copy(e.path(), dest)?;
        }
    }
    Ok(())
}

/// Lays `from`'s files into `to` as hard links (copies across filesystems), merging install
/// trees into one prefix: dependencies for a build, a scratch prefix for a test run. Files
/// already present in `to` win.
pub fn link_tree(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let ft = e.file_type()?;
        let dest = to.join(e.file_name());
        // symlink_metadata, not exists(): a dangling symlink is still "present".
        let present = std::fs::symlink_metadata(&dest).is_ok();
        if ft.is_dir() {
            link_tree(&e.path(), &dest)?;
        } else if ft.is_symlink() {
            if !present {
                std::os::unix::fs::symlink(std::fs::read_link(e.path())?, &dest)?;
            }
        } else if !present && std::fs::hard_link(e.path(), &dest).is_err() {
            std::fs::copy(e.path(), &dest)?;
        }
    }
    Ok(())
}

/// An exclusive advisory lock on `<dir>/<name>.lock`, held until dropped.
pub struct Lock {
    file: std::fs::File,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Takes the lock, waiting for another process to release it (`on_wait` is called once if it
/// is busy, so the user learns why nothing happens). A zero timeout means "try once".
pub fn lock(
    dir: &Path,
    name: &str,
    timeout: std::time::Duration,
    on_wait: &dyn Fn(),
) -> io::Result<Lock> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{name}.lock"));
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    let start = std::time::Instant::now();
    let mut told = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Lock { file }),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        if !told {
            on_wait();
            told = true;
        }
        if start.elapsed() >= timeout {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "another rocforge process has held {} for {}s",
                    path.display(),
                    timeout.as_secs()
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
