//! Filesystem steps that must never leave half-written state behind.

mod stage;

use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use stage::Staged;

/// Writes `bytes` to a temporary file beside `path`, syncs it, and renames it over `path`.
/// This is [`Staged`]'s idea for a regular file, kept on tempfile's `NamedTempFile`: it creates
/// the file 0600 (the mode every file written this way has had; `sign::readable` widens it
/// where others must read) under the `.tmp-<pid>-` name [`reap_temp`] looks for.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = temp_file_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir);
    Ok(())
}

/// Flushes everything written to the filesystem holding `path` (syncfs(2)): one call before
/// a directory tree written by other processes (a build, an unpacked archive) is marked
/// complete, so a power cut cannot leave the mark beside files still in the page cache. Best
/// effort, as [`sync_dir`].
pub fn sync_filesystem(path: &Path) {
    use std::os::fd::AsRawFd;
    if let Ok(f) = std::fs::File::open(path) {
        // SAFETY: a valid open descriptor; syncfs reads nothing from us.
        let _ = unsafe { libc::syncfs(f.as_raw_fd()) };
    }
}

/// Best effort: a directory fsync makes a rename durable; not every filesystem supports it.
pub fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// A fresh, uniquely named directory beside `target` (`.<name>.tmp-<pid>-…`), for building
/// something that is then renamed into place.
pub fn staging_dir(target: &Path) -> io::Result<PathBuf> {
    let parent = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-{}-", std::process::id()))
        .tempdir_in(parent)?;
    Ok(dir.keep())
}

/// Whether `dir` is a mount point (a bind mount given to a container, above all): a rename can
/// neither replace it (EBUSY) nor move anything into it from outside (EXDEV), so whatever is
/// staged for it must be staged inside it. A device unlike the parent's says so; a bind mount of
/// the parent's own filesystem keeps the device, and the kernel's mount table says so.
pub fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(canon) = dir.canonicalize() else {
        return false;
    };
    let (Ok(meta), Some(parent)) = (std::fs::metadata(&canon), canon.parent()) else {
        return false;
    };
    if !meta.is_dir() {
        return false;
    }
    if std::fs::metadata(parent).is_ok_and(|p| p.dev() != meta.dev()) {
        return true;
    }
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|table| {
        table
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .any(|m| Path::new(&unescape_mountinfo(m)) == canon)
    })
}

/// The kernel writes a space, tab, newline and backslash in a mount table path as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Opens `path` for reading only when it is a regular file (a link to one is followed). A FIFO
/// would block the open until some writer came and a device could be read forever: the open is
/// non-blocking, so it returns at once whatever the file is, and anything but a regular file is
/// refused, saying what it is. (Reads of a regular file never block, the flag or not.)
pub fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let t = f.metadata()?.file_type();
    if t.is_file() {
        return Ok(f);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file but {}", file_kind(t)),
    ))
}

/// What a file is, in words: for refusals of special files.
pub fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "a special file"
    }
}

/// The bytes of the regular file `path` ([`open_regular`]), refused past `limit` bytes: what
/// is read from outside is never read without end.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    open_regular(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "larger than {}, the limit for it",
                crate::units::format_size(limit)
            ),
        ));
    }
    Ok(buf)
}

/// A temporary file in `dir` named `.tmp-<pid>-…`: when a kill -9 leaves it behind,
/// [`reap_temp`] can tell it from one a live process is still writing.
pub fn temp_file_in(dir: &Path) -> io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(&format!(".tmp-{}-", std::process::id()))
        .tempfile_in(dir)
}

/// The same for a temporary directory.
pub fn temp_dir_in(dir: &Path) -> io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!(".tmp-{}-", std::process::id()))
        .tempdir_in(dir)
}

/// Removes what killed processes left in `dir`: entries named `<start><pid>-…` (as
/// [`temp_file_in`], [`temp_dir_in`] and [`staging_dir`] name them) whose process is gone.
/// Returns what was removed. A pid reused by another live process only delays the removal.
pub fn reap_temp(dir: &Path, start: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(start)
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || crate::process::pid_alive(pid) {
            continue;
        }
        let gone = match e.file_type() {
            Ok(t) if t.is_dir() => remove_tree(&e.path()),
            _ => std::fs::remove_file(e.path()),
        };
        if gone.is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

/// Removes a directory tree, tolerating its absence.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The disk a directory tree takes: its blocks, as `du` counts them (a sparse file by what it
/// holds, a file with several links in the tree once, symlinks not followed). Entries that
/// vanish while it walks are skipped: a build directory may still be changing.
pub fn disk_usage(path: &Path) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    let mut dirs = vec![path.to_path_buf()];
    let root = std::fs::symlink_metadata(path)?;
    total += root.blocks() * 512;
    while let Some(dir) = dirs.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for e in entries {
            let Ok(e) = e else { continue };
            let Ok(m) = e.metadata() else { continue };
            if m.nlink() > 1 && !m.is_dir() && !seen.insert((m.dev(), m.ino())) {
                continue;
            }
            total += m.blocks() * 512;
            if m.is_dir() {
                dirs.push(e.path());
            }
        }
    }
    Ok(total)
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
/// is busy, so the user learns why nothing happens). A zero timeout means "try once". Ctrl-C
/// ([`crate::interrupt`]) ends the wait with [`io::ErrorKind::Interrupted`].
pub fn lock(
    dir: &Path,
    name: &str,
    timeout: std::time::Duration,
    on_wait: &dyn Fn(),
) -> io::Result<Lock> {
    lock_unless(dir, name, timeout, on_wait, &crate::interrupt::requested)
}

/// [`lock`], giving up with [`io::ErrorKind::Interrupted`] as soon as `cancelled` says so: a
/// wait for another process can last hours, and Ctrl-C must end it at once.
pub fn lock_unless(
    dir: &Path,
    name: &str,
    timeout: std::time::Duration,
    on_wait: &dyn Fn(),
    cancelled: &dyn Fn() -> bool,
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
        if cancelled() {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("interrupted while waiting for {}", path.display()),
            ));
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

/// The sha256 (lower-case hex) and size of a file, read once.
pub fn sha256_file(path: &Path) -> io::Result<(String, u64)> {
    use sha2::Digest;
    let mut f = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = match std::io::Read::read(&mut f, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), size))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counted as du counts it: a file linked twice once, a sparse file by its blocks, a
    /// symlink's target not at all.
    #[test]
    fn disk_usage_agrees_with_du() {
        use std::io::{Seek, SeekFrom};
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/one"), vec![7u8; 1 << 20]).unwrap();
        std::fs::hard_link(tree.join("a/one"), tree.join("a/b/same")).unwrap();
        let mut sparse = std::fs::File::create(tree.join("sparse")).unwrap();
        sparse.seek(SeekFrom::Start(64 << 20)).unwrap();
        sparse.write_all(b"end").unwrap();
        std::fs::write(tmp.path().join("outside"), vec![1u8; 4 << 20]).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), tree.join("link")).unwrap();
        let du = std::process::Command::new("du")
            .args(["-s", "--block-size=1"])
            .arg(&tree)
            .output()
            .unwrap();
        let du: u64 = String::from_utf8_lossy(&du.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let ours = disk_usage(&tree).unwrap();
        assert_eq!(ours, du);
        assert!((1 << 20..3 << 20).contains(&ours), "{ours}");
        assert!(disk_usage(&tmp.path().join("absent")).is_err());
    }

    #[test]
    fn a_cancelled_wait_ends_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let _held = lock(tmp.path(), "k", std::time::Duration::ZERO, &|| {}).unwrap();
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let e = lock_unless(
            tmp.path(),
            "k",
            std::time::Duration::from_secs(3600),
            &|| {},
            &|| asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 2,
        )
        .err()
        .expect("cancelled");
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn reap_temp_removes_only_what_dead_processes_left() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = {
            let mut c = std::process::Command::new("true").spawn().unwrap();
            c.wait().unwrap();
            c.id()
        };
        let me = std::process::id();
        let dir = tmp.path();
        std::fs::create_dir(dir.join(format!(".tmp-{dead}-a"))).unwrap();
        std::fs::write(dir.join(format!(".tmp-{dead}-b")), "").unwrap();
        std::fs::write(dir.join(format!(".tmp-{me}-c")), "").unwrap();
        std::fs::write(dir.join(".tmp-0123abc-d"), "").unwrap();
        std::fs::write(dir.join(format!("tmp-{dead}-e")), "").unwrap();
        let mut gone: Vec<String> = reap_temp(dir, ".tmp-")
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        gone.sort();
        assert_eq!(gone, [format!(".tmp-{dead}-a"), format!(".tmp-{dead}-b")]);
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 3);
        // What temp_file_in and staging_dir create is named for this process.
        let f = temp_file_in(dir).unwrap();
        assert!(
            f.path()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!(".tmp-{me}-"))
        );
        let s = staging_dir(&dir.join("prefix")).unwrap();
        assert!(
            s.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!(".prefix.tmp-{me}-"))
        );
    }
}
