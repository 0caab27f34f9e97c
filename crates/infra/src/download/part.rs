//! The `.part` file a download is written to: locked, hashed as it is written, resumed from
//! what an earlier run left, renamed into place only once verified.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use md5::Md5;
use sha2::{Digest, Sha256};

use super::{DownloadError, Want, redact_url};
use crate::progress::Task;

/// Marks the error [`Part::write`] returns past
/// [`DownloadOptions::max_bytes`](super::DownloadOptions::max_bytes).
const TOO_LARGE: &str = "more bytes than expected";
const FILE_CHUNK: usize = 1024 * 1024;

pub(super) fn hash_reader(r: &mut impl Read, hasher: &mut Sha256) -> io::Result<u64> {
    let mut buf = vec![0u8; FILE_CHUNK];
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        total += n as u64;
    }
}

/// `<dest>.part`, locked for this process, with a hasher that has seen exactly its bytes.
/// Not an [`crate::fsutil::Staged`]: a `.part` outlives a failed or interrupted run on
/// purpose, so that the next one resumes it instead of starting over.
pub(super) struct Part {
    pub(super) file: File,
    pub(super) path: PathBuf,
    pub(super) hasher: Sha256,
    /// Hashes the same bytes for a download checked by md5
    /// ([`download_md5`](super::download_md5)); None otherwise.
    pub(super) md5: Option<Md5>,
    pub(super) len: u64,
    /// Bytes still in the file from before this call (a killed earlier run).
    pub(super) kept: u64,
    /// Whether the bytes came from more than one source (an earlier run, or several responses).
    pub(super) stitched: bool,
    /// [`DownloadOptions::max_bytes`](super::DownloadOptions::max_bytes).
    pub(super) limit: Option<u64>,
}

impl Part {
    /// Opens (creating) and locks the part file; with `hash_existing`, hashes what it holds so
    /// new bytes can be appended, otherwise empties it.
    pub(super) fn open(url: &str, path: &Path, hash_existing: bool) -> Result<Part, DownloadError> {
        let io_err = |source| DownloadError::Io {
            url: redact_url(url),
            path: path.into(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(DownloadError::Busy {
                    url: redact_url(url),
                    path: path.into(),
                });
            }
            Err(fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(fs::TryLockError::Error(e)) => return Err(io_err(e)),
        }
        let mut hasher = Sha256::new();
        if !hash_existing {
            file.set_len(0).map_err(io_err)?;
        }
        let len = hash_reader(&mut file, &mut hasher).map_err(io_err)?;
        // Reading left the cursor at the end: new bytes are appended after what was hashed.
        file.seek(SeekFrom::Start(len)).map_err(io_err)?;
        Ok(Part {
            file,
            path: path.into(),
            hasher,
            md5: None,
            len,
            kept: len,
            stitched: len > 0,
            limit: None,
        })
    }

    pub(super) fn io_err(&self, url: &str, source: io::Error) -> DownloadError {
        if let (Some(limit), io::ErrorKind::FileTooLarge) = (self.limit, source.kind())
            && source.to_string() == TOO_LARGE
        {
            return DownloadError::TooLarge {
                url: redact_url(url),
                limit,
            };
        }
        DownloadError::Io {
            url: redact_url(url),
            path: self.path.clone(),
            source,
        }
    }

    pub(super) fn write(&mut self, buf: &[u8]) -> io::Result<()> {
        if let Some(limit) = self.limit
            && self.len.saturating_add(buf.len() as u64) > limit
        {
            return Err(io::Error::new(io::ErrorKind::FileTooLarge, TOO_LARGE));
        }
        // A crash point per 64 KiB boundary crossed, however the bytes arrive: a count tests
        // can rely on.
        for _ in (self.len >> 16)..((self.len + buf.len() as u64) >> 16) {
            crate::fault::point("fetch");
        }
        self.file.write_all(buf)?;
        self.hasher.update(buf);
        if let Some(m) = &mut self.md5 {
            m.update(buf);
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// Throws the bytes away and starts again from zero.
    pub(super) fn reset(&mut self) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.hasher = Sha256::new();
        if self.md5.is_some() {
            self.md5 = Some(Md5::new());
        }
        self.len = 0;
        self.kept = 0;
        self.stitched = false;
        Ok(())
    }

    pub(super) fn digest(&self) -> String {
        hex::encode(self.hasher.clone().finalize())
    }

    fn md5_digest(&self) -> String {
        self.md5
            .as_ref()
            .map(|m| hex::encode(m.clone().finalize()))
            .unwrap_or_default()
    }

    pub(super) fn matches(&self, want: Want<'_>) -> bool {
        match want {
            Want::Sha256(expected) => self.digest() == expected,
            Want::Md5(expected) => self.md5_digest() == expected,
        }
    }

    /// Compares the digest; on a mismatch deletes the file and says so.
    pub(super) fn check(&mut self, url: &str, want: Want<'_>) -> Result<(), DownloadError> {
        if self.matches(want) {
            return Ok(());
        }
        self.remove(url)?;
        let url = url.into();
        Err(match want {
            Want::Sha256(expected) => DownloadError::Checksum {
                url,
                expected: expected.into(),
                actual: self.digest(),
            },
            Want::Md5(expected) => DownloadError::Md5Mismatch {
                url,
                expected: expected.into(),
                actual: self.md5_digest(),
            },
        })
    }

    pub(super) fn remove(&mut self, url: &str) -> Result<(), DownloadError> {
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_err(url, e)),
        }
    }

    /// Makes the verified bytes durable and moves them to `dest` atomically.
    pub(super) fn commit(&mut self, url: &str, dest: &Path) -> Result<(), DownloadError> {
        self.file.sync_all().map_err(|e| self.io_err(url, e))?;
        crate::fault::point("fetch");
        fs::rename(&self.path, dest).map_err(|e| DownloadError::Io {
            url: redact_url(url),
            path: dest.into(),
            source: e,
        })?;
        sync_dir(dest).map_err(|e| DownloadError::Io {
            url: redact_url(url),
            path: dest.parent().unwrap_or(Path::new(".")).into(),
            source: e,
        })
    }
}

#[cfg(unix)]
fn sync_dir(dest: &Path) -> io::Result<()> {
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_: &Path) -> io::Result<()> {
    Ok(())
}

pub(super) fn copy_file(
    url: &str,
    src: &Path,
    part: &mut Part,
    task: &dyn Task,
) -> Result<(), DownloadError> {
    let src_err = |source| DownloadError::Io {
        url: redact_url(url),
        path: src.into(),
        source,
    };
    let mut file = crate::fsutil::open_regular(src).map_err(src_err)?;
    let meta = file.metadata().map_err(src_err)?;
    part.reset().map_err(|e| part.io_err(url, e))?;
    task.set_total(meta.len());
    let mut buf = vec![0u8; FILE_CHUNK];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(src_err(e)),
        };
        part.write(&buf[..n]).map_err(|e| part.io_err(url, e))?;
        task.inc(n as u64);
    }
}
