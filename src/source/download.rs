//! Tarball downloads with one-pass verification.
//!
//! Bytes are streamed to `<dest>.part` and hashed in the same pass as they are written, so a
//! finished download is verified without reading it back. An interrupted download (a killed
//! earlier run, a dropped connection, a timeout, a 5xx) is resumed with `Range: bytes=N-` from
//! what is already on disk; only a verified file is ever renamed to `dest`. `file://` URLs (disk
//! mirrors) go through the same checksum rules.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use md5::Md5;
use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use reqwest::header::{ACCEPT_ENCODING, CONTENT_RANGE, RANGE, RETRY_AFTER};
use sha2::{Digest, Sha256};

use crate::net::{Cause, mirror_hint};
use crate::progress::{Reporter, Task};

/// How often a wait before a retry looks for Ctrl-C.
const POLL: Duration = Duration::from_millis(100);

/// The longest wait between two attempts, whatever the backoff or a `Retry-After` says.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

const HTTP_CHUNK: usize = 256 * 1024;
/// Marks the error [`Part::write`] returns past [`DownloadOptions::max_bytes`].
const TOO_LARGE: &str = "more bytes than expected";
const FILE_CHUNK: usize = 1024 * 1024;

/// How hard [`download`] tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadOptions {
    /// Retries after the first attempt on transient failures (so `retries + 1` attempts at most).
    pub retries: u32,
    /// The first delay before a retry; doubled for each further retry, capped at [`MAX_BACKOFF`].
    pub backoff: Duration,
    /// Connect timeout and read idle timeout (the longest wait for the next bytes, not a limit
    /// on the whole transfer). It takes effect through the client: build it with
    /// [`client_with`]; a client from elsewhere keeps its own timeouts.
    pub timeout: Duration,
    /// The longest a whole download may take, retries included: a server that drips a byte now
    /// and then never trips the idle timeout, but trips this.
    pub deadline: Duration,
    /// The most bytes the file may have (an index's `size`): more is refused as they arrive, so
    /// an endless body cannot fill the disk before the digest is checked.
    pub max_bytes: Option<u64>,
}

/// The default [`DownloadOptions::deadline`].
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(2 * 3600);

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            retries: 5,
            backoff: Duration::from_millis(500),
            timeout: Duration::from_secs(60),
            deadline: DEFAULT_DEADLINE,
            max_bytes: None,
        }
    }
}

/// `url` with any user name, password and token-like query value replaced by `***`, for
/// messages, logs and records ([`crate::redact::url`]).
pub use crate::redact::url as redact_url;

/// A verified file at its destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    pub path: PathBuf,
    /// Size of the verified file.
    pub bytes: u64,
    /// Bytes kept from a `.part` file left by an earlier run (0 when starting fresh, or when
    /// those bytes had to be thrown away).
    pub resumed_from: u64,
    /// Requests made (0 for a cache hit and for `file://` URLs, which make no request).
    pub attempts: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot download {url}: unsupported URL scheme {scheme:?} (use https, http or file)")]
    UnsupportedScheme { url: String, scheme: String },
    #[error("invalid sha256 for {url}: {given:?} is not 64 hexadecimal digits")]
    InvalidDigest { url: String, given: String },
    #[error("cannot download {url}: HTTP {status}{}", attempts_suffix(*.attempts))]
    Http {
        url: String,
        status: u16,
        attempts: u32,
    },
    #[error("cannot download {url}: {} ({message}){}", cause.explain(url), attempts_suffix(*.attempts))]
    Transport {
        url: String,
        cause: Cause,
        message: String,
        attempts: u32,
    },
    #[error("sha256 mismatch for {url}: expected {expected}, got {actual}")]
    Checksum {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("invalid md5 for {url}: {given:?} is not 32 hexadecimal digits")]
    InvalidMd5 { url: String, given: String },
    #[error("md5 mismatch for {url}: expected {expected}, got {actual}")]
    Md5Mismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("cannot download {url}: {}: {source}", path.display())]
    Io {
        url: String,
        path: PathBuf,
        source: io::Error,
    },
    #[error("cannot download {url}: {} is being written by another process", path.display())]
    Busy { url: String, path: PathBuf },
    #[error(
        "cannot download {url}: the server sent more than the {limit} bytes expected; stopped before writing more"
    )]
    TooLarge { url: String, limit: u64 },
    #[error("cannot download {url}: not done after {}, the limit for one download", format_delay(*limit))]
    Deadline { url: String, limit: Duration },
    /// Ctrl-C ([`crate::interrupt`]) during the transfer or a wait before a retry.
    #[error("download of {url} interrupted")]
    Interrupted { url: String },
}

fn attempts_suffix(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

impl DownloadError {
    /// The URL the error is about.
    pub fn url(&self) -> &str {
        match self {
            DownloadError::InvalidUrl { url, .. }
            | DownloadError::UnsupportedScheme { url, .. }
            | DownloadError::InvalidDigest { url, .. }
            | DownloadError::Http { url, .. }
            | DownloadError::Transport { url, .. }
            | DownloadError::Checksum { url, .. }
            | DownloadError::InvalidMd5 { url, .. }
            | DownloadError::Md5Mismatch { url, .. }
            | DownloadError::Io { url, .. }
            | DownloadError::Busy { url, .. }
            | DownloadError::TooLarge { url, .. }
            | DownloadError::Deadline { url, .. }
            | DownloadError::Interrupted { url } => url,
        }
    }

    /// What the user can do about it.
    pub fn hint(&self) -> String {
        match self {
            DownloadError::InvalidUrl { .. } | DownloadError::UnsupportedScheme { .. } => {
                "fix the recipe's url: it must be an https://, http:// or file:// URL".into()
            }
            DownloadError::InvalidDigest { .. } => {
                "the recipe's sha256 must be 64 hexadecimal digits (`sha256sum FILE` prints it)"
                    .into()
            }
            DownloadError::Http { url, status, .. } => match status {
                404 | 410 => format!(
                    "the file is not (or no longer) at this URL; check the recipe's url, or {}",
                    mirror_hint(url)
                ),
                401 | 403 => format!("the server refused access; {}", mirror_hint(url)),
                _ if is_transient_status(*status) => format!(
                    "the server kept failing; try again later, or {}",
                    mirror_hint(url)
                ),
                _ => format!("check the recipe's url, or {}", mirror_hint(url)),
            },
            DownloadError::Transport { url, cause, .. } if cause.permanent() => format!(
                "check the network and the URL (not retried: a {cause} does not clear in seconds); offline, {}",
                mirror_hint(url)
            ),
            DownloadError::Transport { url, .. } => {
                format!("check the network, or {}", mirror_hint(url))
            }
            DownloadError::Checksum { .. } => "the file changed upstream or the recipe's sha256 \
                                               is wrong; the partial file was deleted"
                .into(),
            DownloadError::InvalidMd5 { .. } => {
                "the recipe's md5 must be 32 hexadecimal digits (`md5sum FILE` prints it)".into()
            }
            DownloadError::Md5Mismatch { .. } => "the file at this URL is not the one upstream \
                                                  published the md5 for (changed upstream, or a \
                                                  wrong mirror); nothing was recorded and the \
                                                  partial file was deleted"
                .into(),
            DownloadError::Io { path, source, .. } => {
                if source.kind() == io::ErrorKind::NotFound && !is_part(path) {
                    format!(
                        "{} does not exist; check the mirror or the URL",
                        path.display()
                    )
                } else {
                    let dir = path.parent().unwrap_or(Path::new("."));
                    format!(
                        "check that {} is writable and has free space",
                        dir.display()
                    )
                }
            }
            DownloadError::Busy { .. } => {
                "another rocforge is downloading the same file; wait for it to finish".into()
            }
            DownloadError::TooLarge { .. } => {
                "the server is not sending the file the signed index describes; nothing was kept"
                    .into()
            }
            DownloadError::Deadline { .. } => {
                "the server is too slow; try again later, use another mirror, or raise the limit (install --timeout)"
                    .into()
            }
            DownloadError::Interrupted { .. } => {
                "run the same command again: the download resumes from the bytes kept".into()
            }
        }
    }
}

fn is_part(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "part")
}

/// A client with rocforge's user agent and the default timeouts.
pub fn client() -> Client {
    client_with(&DownloadOptions::default())
}

/// A client connecting within `opts.timeout` and failing a request when no bytes arrive for
/// `opts.timeout` (an idle timeout: a long transfer is never cut off while it makes progress).
pub fn client_with(opts: &DownloadOptions) -> Client {
    crate::net::client(&crate::net::HttpOptions::timeout(opts.timeout))
}

/// Like [`client_with`], but a redirect is followed only to `start`'s origin or to one of
/// `hosts` ([`crate::net::Redirects::Confined`]).
pub fn client_confined(opts: &DownloadOptions, start: &reqwest::Url, hosts: &[String]) -> Client {
    crate::net::client(&crate::net::HttpOptions {
        redirects: crate::net::Redirects::Confined {
            start: start.clone(),
            hosts: hosts.to_vec(),
        },
        ..crate::net::HttpOptions::timeout(opts.timeout)
    })
}

/// Downloads `url` to `dest`, verifying its sha256 on the way.
///
/// Returns at once, without network, if `dest` already holds the right bytes. Otherwise the
/// body goes to `<dest>.part` (resumed if it exists), is verified, then renamed to `dest`.
pub fn download(
    client: &Client,
    url: &str,
    sha256: &str,
    dest: &Path,
    opts: &DownloadOptions,
    reporter: &dyn Reporter,
) -> Result<Downloaded, DownloadError> {
    let expected = normalize_digest(sha256).ok_or_else(|| DownloadError::InvalidDigest {
        url: redact_url(url),
        given: sha256.into(),
    })?;
    let origin = local_origin(url)?;
    let io_err = |path: &Path, source: io::Error| DownloadError::Io {
        url: redact_url(url),
        path: path.to_path_buf(),
        source,
    };

    if let Some(done) = cache_hit(url, dest, &expected, reporter)? {
        return Ok(done);
    }
    let part_path = part_path(dest).ok_or_else(|| {
        io_err(
            dest,
            io::Error::new(io::ErrorKind::InvalidInput, "not a file path"),
        )
    })?;
    if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    }
    // What the user asked for, by its name (rocrand_6.4.3.orig.tar.gz), not by the cache's
    // name for it (a digest).
    let label = url_file_name(url)
        .or_else(|| dest.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| redact_url(url));

    // A local copy is cheap: it always starts from zero, so the old bytes are not read.
    let mut part = Part::open(url, &part_path, origin.is_none())?;
    part.limit = opts.max_bytes;
    if opts.max_bytes.is_some_and(|m| part.len > m) {
        part.reset().map_err(|e| part.io_err(url, e))?;
    }
    // `-v` names every file fetched (redacted: a URL may carry a token).
    tracing::info!("download {} -> {}", redact_url(url), dest.display());
    let task = reporter.task(&label, None, true);
    task.set_position(part.len);
    let result = transfer(
        client,
        url,
        origin.as_deref(),
        Want::Sha256(&expected),
        &mut part,
        opts,
        reporter,
        &*task,
    )
    .and_then(|attempts| part.commit(url, dest).map(|()| attempts));
    finish_task(&*task, &result);
    // Nothing to resume from, or a copy (which restarts from zero anyway): leave no `.part`
    // behind.
    if result.is_err() && (origin.is_some() || part.len == 0) {
        let _ = part.remove(url);
    }
    result.map(|attempts| Downloaded {
        path: dest.to_path_buf(),
        bytes: part.len,
        // A copy never resumes: `part.kept` and `attempts` are 0 for it.
        resumed_from: part.kept,
        attempts,
    })
}

/// Where the bytes of `url` come from: `None` for http(s), the local path for a `file://` URL.
fn local_origin(url: &str) -> Result<Option<PathBuf>, DownloadError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| DownloadError::InvalidUrl {
        url: redact_url(url),
        reason: e.to_string(),
    })?;
    match parsed.scheme() {
        "http" | "https" => Ok(None),
        "file" => parsed
            .to_file_path()
            .map(Some)
            .map_err(|()| DownloadError::InvalidUrl {
                url: redact_url(url),
                reason: "a file:// URL must name an absolute local path".into(),
            }),
        other => Err(DownloadError::UnsupportedScheme {
            url: redact_url(url),
            scheme: other.into(),
        }),
    }
}

/// Fills `part` with the verified bytes of `url`, from the network (`origin` is `None`) or by
/// copying the local file; returns the requests made (0 for a copy).
#[allow(clippy::too_many_arguments)]
fn transfer(
    client: &Client,
    url: &str,
    origin: Option<&Path>,
    want: Want<'_>,
    part: &mut Part,
    opts: &DownloadOptions,
    reporter: &dyn Reporter,
    task: &dyn Task,
) -> Result<u32, DownloadError> {
    match origin {
        None => http_download(client, url, want, part, opts, reporter, task),
        Some(src) => copy_file(url, src, part, task)
            .and_then(|()| part.check(url, want))
            .map(|()| 0),
    }
}

/// The digest a download is verified against.
#[derive(Debug, Clone, Copy)]
enum Want<'a> {
    Sha256(&'a str),
    /// Only for [`download_md5`]: a first download whose sha256 is not known yet.
    Md5(&'a str),
}

/// Downloads `url`, for which only an MD5 is on record, into `dir`, checking the md5 as the
/// bytes arrive (retries and `Range` resumption as for [`download`]). The verified file is
/// stored as `dir/<sha256>`, the name [`download`] gives it, so a later fetch pinned by that
/// sha256 needs no network. Returns the file and its sha256.
///
/// MD5 is weak: this is meant for `rocforge lock`, which records the sha256 so that every later
/// fetch verifies that instead.
pub fn download_md5(
    client: &Client,
    url: &str,
    md5: &str,
    dir: &Path,
    opts: &DownloadOptions,
    reporter: &dyn Reporter,
) -> Result<(Downloaded, String), DownloadError> {
    let md5 = md5.trim().to_ascii_lowercase();
    if md5.len() != 32 || !md5.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(DownloadError::InvalidMd5 {
            url: redact_url(url),
            given: md5,
        });
    }
    let origin = local_origin(url)?;
    fs::create_dir_all(dir).map_err(|e| DownloadError::Io {
        url: redact_url(url),
        path: dir.to_path_buf(),
        source: e,
    })?;
    let part_path = dir.join(format!("md5-{md5}.part"));
    // The sha256 is not known before the end, so an earlier run's bytes cannot be trusted to
    // belong to this file: always start from zero.
    let mut part = Part::open(url, &part_path, false)?;
    part.md5 = Some(Md5::new());
    tracing::info!("download {}", redact_url(url));
    let task = reporter.task(
        &url_file_name(url).unwrap_or_else(|| redact_url(url)),
        None,
        true,
    );
    let want = Want::Md5(&md5);
    let result = transfer(
        client,
        url,
        origin.as_deref(),
        want,
        &mut part,
        opts,
        reporter,
        &*task,
    );
    let attempts = match result {
        Ok(n) => n,
        Err(e) => {
            task.finish("failed");
            let _ = part.remove(url);
            return Err(e);
        }
    };
    let sha256 = part.digest();
    let dest = dir.join(&sha256);
    let committed = part.commit(url, &dest);
    finish_task(&*task, &committed);
    committed?;
    Ok((
        Downloaded {
            path: dest,
            bytes: part.len,
            resumed_from: 0,
            attempts,
        },
        sha256,
    ))
}

fn finish_task<T>(task: &dyn Task, result: &Result<T, DownloadError>) {
    task.finish(if result.is_ok() { "verified" } else { "failed" });
}

/// Lowercase hex of a sha256 given as hex (either case), optionally prefixed `sha256:`.
fn normalize_digest(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s.strip_prefix("sha256:").unwrap_or(s);
    (s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_ascii_lowercase())
}

fn part_path(dest: &Path) -> Option<PathBuf> {
    let mut name: OsString = dest.file_name()?.to_os_string();
    name.push(".part");
    Some(dest.with_file_name(name))
}

fn cache_hit(
    url: &str,
    dest: &Path,
    expected: &str,
    reporter: &dyn Reporter,
) -> Result<Option<Downloaded>, DownloadError> {
    let mut file = match File::open(dest) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(DownloadError::Io {
                url: redact_url(url),
                path: dest.into(),
                source: e,
            });
        }
    };
    let io_err = |source| DownloadError::Io {
        url: redact_url(url),
        path: dest.into(),
        source,
    };
    if !file.metadata().map_err(io_err)?.is_file() {
        return Err(io_err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    let mut hasher = Sha256::new();
    let bytes = hash_reader(&mut file, &mut hasher).map_err(io_err)?;
    let actual = hex::encode(hasher.finalize());
    if actual == expected {
        reporter.note(&format!(
            "{} is already downloaded and verified",
            dest.display()
        ));
        return Ok(Some(Downloaded {
            path: dest.to_path_buf(),
            bytes,
            resumed_from: 0,
            attempts: 0,
        }));
    }
    reporter.note(&format!(
        "{} exists but its sha256 is {actual}, not {expected}; downloading it again",
        dest.display()
    ));
    Ok(None)
}

fn hash_reader(r: &mut impl Read, hasher: &mut Sha256) -> io::Result<u64> {
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
struct Part {
    file: File,
    path: PathBuf,
    hasher: Sha256,
    /// Hashes the same bytes for a download checked by md5 ([`download_md5`]); None otherwise.
    md5: Option<Md5>,
    len: u64,
    /// Bytes still in the file from before this call (a killed earlier run).
    kept: u64,
    /// Whether the bytes came from more than one source (an earlier run, or several responses).
    stitched: bool,
    /// [`DownloadOptions::max_bytes`].
    limit: Option<u64>,
}

impl Part {
    /// Opens (creating) and locks the part file; with `hash_existing`, hashes what it holds so
    /// new bytes can be appended, otherwise empties it.
    fn open(url: &str, path: &Path, hash_existing: bool) -> Result<Part, DownloadError> {
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

    fn io_err(&self, url: &str, source: io::Error) -> DownloadError {
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

    fn write(&mut self, buf: &[u8]) -> io::Result<()> {
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
    fn reset(&mut self) -> io::Result<()> {
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

    fn digest(&self) -> String {
        hex::encode(self.hasher.clone().finalize())
    }

    fn md5_digest(&self) -> String {
        self.md5
            .as_ref()
            .map(|m| hex::encode(m.clone().finalize()))
            .unwrap_or_default()
    }

    fn matches(&self, want: Want<'_>) -> bool {
        match want {
            Want::Sha256(expected) => self.digest() == expected,
            Want::Md5(expected) => self.md5_digest() == expected,
        }
    }

    /// Compares the digest; on a mismatch deletes the file and says so.
    fn check(&mut self, url: &str, want: Want<'_>) -> Result<(), DownloadError> {
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

    fn remove(&mut self, url: &str) -> Result<(), DownloadError> {
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io_err(url, e)),
        }
    }

    /// Makes the verified bytes durable and moves them to `dest` atomically.
    fn commit(&mut self, url: &str, dest: &Path) -> Result<(), DownloadError> {
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

fn copy_file(url: &str, src: &Path, part: &mut Part, task: &dyn Task) -> Result<(), DownloadError> {
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

/// Why one attempt did not produce a complete body.
enum Failure {
    /// Worth another attempt: it resumes from the bytes already written.
    Transient {
        reason: String,
        status: Option<u16>,
        retry_after: Option<Duration>,
    },
    Fatal(DownloadError),
    /// [`DownloadOptions::deadline`] passed.
    Late,
}

/// How one attempt ended.
enum Step {
    /// The body is complete in the part file.
    Complete,
    /// 416 to our `Range`: the part file is as long as the resource (or longer).
    RangeNotSatisfiable,
}

/// Runs the attempts until the part file holds the verified body; returns the requests made.
fn http_download(
    client: &Client,
    url: &str,
    want: Want<'_>,
    part: &mut Part,
    opts: &DownloadOptions,
    reporter: &dyn Reporter,
    task: &dyn Task,
) -> Result<u32, DownloadError> {
    let max_attempts = opts.retries.saturating_add(1);
    let deadline = Instant::now() + opts.deadline;
    let late = || DownloadError::Deadline {
        url: redact_url(url),
        limit: opts.deadline,
    };
    let mut requests = 0u32;
    let mut failures = 0u32;
    // Whether we already started over from zero after a bad resumed file.
    let mut restarted = false;
    loop {
        requests = requests.saturating_add(1);
        if Instant::now() >= deadline {
            return Err(late());
        }
        let (reason, status, retry_after) = match attempt(client, url, part, task, deadline) {
            Ok(step) => {
                if part.matches(want) {
                    return Ok(requests);
                }
                // 416 means the part file is already as long as the resource; a mismatch then,
                // or after stitching responses together, may come from a stale prefix (changed
                // upstream since the earlier run) or a damaged one (a crash before the data
                // reached the disk): fetch the whole file once more before giving up.
                let retry_whole = matches!(step, Step::RangeNotSatisfiable) || part.stitched;
                if retry_whole && !restarted {
                    restarted = true;
                    reporter.note(&format!(
                        "{} did not verify after resuming; downloading {} again from the start",
                        part.path.display(),
                        redact_url(url)
                    ));
                    part.reset().map_err(|e| part.io_err(url, e))?;
                    task.set_position(0);
                    continue;
                }
                part.check(url, want)?;
                return Ok(requests);
            }
            Err(Failure::Late) => return Err(late()),
            Err(Failure::Fatal(mut e)) => {
                if let DownloadError::Http { attempts, .. }
                | DownloadError::Transport { attempts, .. } = &mut e
                {
                    *attempts = requests;
                }
                return Err(e);
            }
            Err(Failure::Transient {
                reason,
                status,
                retry_after,
            }) => (reason, status, retry_after),
        };
        failures = failures.saturating_add(1);
        if failures >= max_attempts {
            return Err(match status {
                Some(status) => DownloadError::Http {
                    url: redact_url(url),
                    status,
                    attempts: requests,
                },
                None => DownloadError::Transport {
                    url: redact_url(url),
                    cause: Cause::of_text(&reason),
                    message: reason,
                    attempts: requests,
                },
            });
        }
        let delay = backoff_delay(opts.backoff, failures, retry_after)
            .min(deadline.saturating_duration_since(Instant::now()));
        reporter.note(&format!(
            "retrying {} in {} (attempt {}/{max_attempts}): {reason}",
            redact_url(url),
            format_delay(delay),
            failures + 1,
        ));
        let until = Instant::now() + delay;
        while Instant::now() < until {
            if crate::interrupt::requested() {
                return Err(DownloadError::Interrupted {
                    url: redact_url(url),
                });
            }
            thread::sleep(until.saturating_duration_since(Instant::now()).min(POLL));
        }
    }
}

/// One request: streams the body into the part file, resuming from its length.
fn attempt(
    client: &Client,
    url: &str,
    part: &mut Part,
    task: &dyn Task,
    deadline: Instant,
) -> Result<Step, Failure> {
    let offset = part.len;
    let mut request = client.get(url).header(ACCEPT_ENCODING, "identity");
    if offset > 0 {
        request = request.header(RANGE, format!("bytes={offset}-"));
    }
    let mut response = request.send().map_err(|e| {
        // Without the URL, whose host name could read as a cause ("ssl.example.org").
        let e = e.without_url();
        let cause = Cause::of(&e);
        if e.is_redirect() || cause.permanent() {
            // A refused redirect, a name that does not resolve, a closed port or a bad
            // certificate fail the same way every time: retrying only delays the error.
            Failure::Fatal(DownloadError::Transport {
                url: redact_url(url),
                cause,
                message: describe(&e),
                attempts: 1,
            })
        } else {
            Failure::Transient {
                reason: describe(&e),
                status: None,
                retry_after: None,
            }
        }
    })?;
    let status = response.status();
    let fatal_io = |part: &Part, e| Failure::Fatal(part.io_err(url, e));
    match status {
        StatusCode::PARTIAL_CONTENT => {
            let start = response
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(content_range_start);
            if start != Some(offset) {
                // Not the range we asked for: start over cleanly on the next attempt.
                let got = response
                    .headers()
                    .get(CONTENT_RANGE)
                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                    .unwrap_or_else(|| "no Content-Range".into());
                part.reset().map_err(|e| fatal_io(part, e))?;
                task.set_position(0);
                return Err(Failure::Transient {
                    reason: format!("asked for bytes {offset}- but the server sent {got:?}"),
                    status: None,
                    retry_after: None,
                });
            }
            if offset > 0 {
                part.stitched = true;
            }
        }
        StatusCode::OK => {
            if offset > 0 {
                // The server ignores ranges: the body is the whole file.
                tracing::debug!(url, "server ignored Range; restarting from zero");
                part.reset().map_err(|e| fatal_io(part, e))?;
            }
        }
        StatusCode::RANGE_NOT_SATISFIABLE if offset > 0 => return Ok(Step::RangeNotSatisfiable),
        _ if is_transient_status(status.as_u16()) => {
            return Err(Failure::Transient {
                reason: format!("HTTP {status}"),
                status: Some(status.as_u16()),
                retry_after: retry_after(&response),
            });
        }
        _ => {
            return Err(Failure::Fatal(DownloadError::Http {
                url: redact_url(url),
                status: status.as_u16(),
                attempts: 1,
            }));
        }
    }

    let remaining = response.content_length();
    if let (Some(n), Some(limit)) = (remaining, part.limit)
        && part.len.saturating_add(n) > limit
    {
        return Err(Failure::Fatal(DownloadError::TooLarge {
            url: redact_url(url),
            limit,
        }));
    }
    if let Some(n) = remaining {
        task.set_total(part.len.saturating_add(n));
    }
    task.set_position(part.len);
    stream_body(&mut response, part, task, remaining, deadline).map_err(|e| match e {
        BodyError::Late => Failure::Late,
        BodyError::Interrupted => Failure::Fatal(DownloadError::Interrupted {
            url: redact_url(url),
        }),
        BodyError::Read(e, received) => Failure::Transient {
            reason: format!(
                "connection lost after {received} bytes: {}",
                describe_io(&e)
            ),
            status: None,
            retry_after: None,
        },
        BodyError::Short(received, expected) => Failure::Transient {
            reason: format!("body ended after {received} of {expected} bytes"),
            status: None,
            retry_after: None,
        },
        BodyError::Write(e) => fatal_io(part, e),
    })?;
    Ok(Step::Complete)
}

enum BodyError {
    Late,
    Interrupted,
    Read(io::Error, u64),
    Short(u64, u64),
    Write(io::Error),
}

fn stream_body(
    response: &mut Response,
    part: &mut Part,
    task: &dyn Task,
    expected: Option<u64>,
    deadline: Instant,
) -> Result<(), BodyError> {
    let mut buf = vec![0u8; HTTP_CHUNK];
    let mut received = 0u64;
    loop {
        if Instant::now() >= deadline {
            return Err(BodyError::Late);
        }
        // A source tarball can take minutes: Ctrl-C must not wait for its end.
        if crate::interrupt::requested() {
            return Err(BodyError::Interrupted);
        }
        let n = match response.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(BodyError::Read(e, received)),
        };
        part.write(&buf[..n]).map_err(BodyError::Write)?;
        received += n as u64;
        task.inc(n as u64);
    }
    match expected {
        Some(expected) if received < expected => Err(BodyError::Short(received, expected)),
        _ => Ok(()),
    }
}

fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// The first byte position of `Content-Range: bytes START-END/TOTAL`.
fn content_range_start(value: &str) -> Option<u64> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (start, _) = rest.split_once('-')?;
    start.trim().parse().ok()
}

/// `Retry-After` in seconds (the HTTP-date form is ignored).
fn retry_after(response: &Response) -> Option<Duration> {
    let secs: u64 = response
        .headers()
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs.min(MAX_BACKOFF.as_secs())))
}

/// `backoff * 2^(failures-1)`, at least `retry_after`, at most [`MAX_BACKOFF`].
fn backoff_delay(backoff: Duration, failures: u32, retry_after: Option<Duration>) -> Duration {
    let factor = 1u32
        .checked_shl(failures.saturating_sub(1))
        .unwrap_or(u32::MAX);
    let delay = backoff
        .checked_mul(factor)
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF);
    retry_after.map_or(delay, |r| delay.max(r)).min(MAX_BACKOFF)
}

fn format_delay(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// An error and its causes on one line ("error sending request: connection refused").
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

fn describe_io(e: &io::Error) -> String {
    match e.get_ref() {
        Some(inner) => describe(inner),
        None => e.to_string(),
    }
}

/// The last segment of `url`'s path, when it names a file. Left percent-encoded: decoded, a
/// hostile URL could put terminal escapes in a progress line.
fn url_file_name(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let last = parsed.path_segments()?.next_back()?;
    (!last.is_empty()).then(|| last.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_normalized() {
        let hex = "AB".repeat(32);
        assert_eq!(normalize_digest(&hex), Some("ab".repeat(32)));
        assert_eq!(
            normalize_digest(&format!("sha256:{}", "0".repeat(64))),
            Some("0".repeat(64))
        );
        assert_eq!(normalize_digest("abc"), None);
        assert_eq!(normalize_digest(&"g".repeat(64)), None);
        assert_eq!(normalize_digest(&"é".repeat(32)), None);
    }

    #[test]
    fn content_range_is_parsed() {
        assert_eq!(content_range_start("bytes 100-199/200"), Some(100));
        assert_eq!(content_range_start("bytes */200"), None);
        assert_eq!(content_range_start("items 1-2/3"), None);
        assert_eq!(content_range_start(""), None);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Duration::from_millis(500);
        assert_eq!(backoff_delay(b, 1, None), Duration::from_millis(500));
        assert_eq!(backoff_delay(b, 2, None), Duration::from_secs(1));
        assert_eq!(backoff_delay(b, 3, None), Duration::from_secs(2));
        assert_eq!(backoff_delay(b, 40, None), MAX_BACKOFF);
        assert_eq!(backoff_delay(Duration::MAX, 2, None), MAX_BACKOFF);
        assert_eq!(
            backoff_delay(b, 1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(format_delay(Duration::from_secs(1)), "1.0s");
        assert_eq!(format_delay(Duration::from_millis(10)), "10ms");
    }

    #[test]
    fn part_path_appends_suffix() {
        assert_eq!(
            part_path(Path::new("/a/b.tar.gz")),
            Some(PathBuf::from("/a/b.tar.gz.part"))
        );
        assert_eq!(part_path(Path::new("/")), None);
    }

    #[test]
    fn hints_name_a_mirror_prefix() {
        let e = DownloadError::Transport {
            url: "https://github.com/ROCm/x.tar.gz".into(),
            cause: Cause::Timeout,
            message: "timed out".into(),
            attempts: 6,
        };
        assert!(
            e.hint()
                .contains("[mirrors] \"https://github.com/\" = \"file:///srv/mirror/\"")
        );
        assert!(e.to_string().contains("after 6 attempts"));
    }

    /// A server on 127.0.0.1 that answers every request with 200 and `body` called per write,
    /// for ever (until the client goes).
    fn endless(pause: Duration) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        thread::spawn(move || {
            for c in l.incoming().flatten() {
                thread::spawn(move || {
                    let mut c = c;
                    let mut head = [0u8; 4096];
                    let _ = c.read(&mut head);
                    let _ = c.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
                    let chunk = vec![b'z'; if pause.is_zero() { 65536 } else { 1 }];
                    while c.write_all(&chunk).is_ok() {
                        thread::sleep(pause);
                    }
                });
            }
        });
        format!("http://127.0.0.1:{port}/a.tar.zst")
    }

    #[test]
    fn an_endless_body_stops_at_the_size_and_a_drip_at_the_deadline() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("a");
        let sha = "0".repeat(64);
        let opts = DownloadOptions {
            max_bytes: Some(100_000),
            retries: 0,
            ..Default::default()
        };
        let url = endless(Duration::ZERO);
        let rep = crate::progress::Silent;
        let err = download(&client_with(&opts), &url, &sha, &dest, &opts, &rep).unwrap_err();
        assert!(
            matches!(err, DownloadError::TooLarge { limit: 100_000, .. }),
            "{err}"
        );
        let part = part_path(&dest).unwrap();
        assert!(fs::metadata(&part).map_or(0, |m| m.len()) <= 100_000);

        let opts = DownloadOptions {
            deadline: Duration::from_secs(2),
            retries: 0,
            ..Default::default()
        };
        let url = endless(Duration::from_millis(200));
        let start = Instant::now();
        let err = download(&client_with(&opts), &url, &sha, &dest, &opts, &rep).unwrap_err();
        assert!(matches!(err, DownloadError::Deadline { .. }), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redact_url("http://u:pw@host/x?token=abc&a=1"),
            "http://***@host/x?token=***&a=1"
        );
        assert_eq!(redact_url("https://host/x"), "https://host/x");
    }
}
