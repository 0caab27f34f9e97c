//! Directories held open by descriptor, walked without following links.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

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
