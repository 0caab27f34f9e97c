//! What can go wrong with a download, and what the user can do about it.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::http::{format_delay, is_transient_status};
use crate::net::{Cause, mirror_hint};

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
}

impl crate::diag::Hint for DownloadError {
    /// What the user can do about it.
    fn hint(&self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Hint;

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
}
