//! Tarball downloads with one-pass verification.
//!
//! Bytes are streamed to `<dest>.part` and hashed in the same pass as they are written, so a
//! finished download is verified without reading it back. An interrupted download (a killed
//! earlier run, a dropped connection, a timeout, a 5xx) is resumed with `Range: bytes=N-` from
//! what is already on disk; only a verified file is ever renamed to `dest`. `file://` URLs (disk
//! mirrors) go through the same checksum rules.

mod error;
mod http;
mod part;

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use md5::Md5;
use reqwest::blocking::Client;
use sha2::{Digest, Sha256};

use crate::progress::{Reporter, Task};
pub use error::DownloadError;
use http::http_download;
use part::{Part, copy_file, hash_reader};

/// The longest wait between two attempts, whatever the backoff or a `Retry-After` says.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

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

/// The last segment of `url`'s path, when it names a file. Left percent-encoded: decoded, a
/// hostile URL could put terminal escapes in a progress line.
fn url_file_name(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let last = parsed.path_segments()?.next_back()?;
    (!last.is_empty()).then(|| last.to_string())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::thread;
    use std::time::Instant;

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
    fn part_path_appends_suffix() {
        assert_eq!(
            part_path(Path::new("/a/b.tar.gz")),
            Some(PathBuf::from("/a/b.tar.gz.part"))
        );
        assert_eq!(part_path(Path::new("/")), None);
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
