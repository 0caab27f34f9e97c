//! `rocforge publish DIR --to URL`: a release directory (what `package` wrote) uploaded to a
//! GitHub release (`github://OWNER/REPO@TAG`, [`github`]) or pushed to an OCI registry
//! (`oci://REGISTRY/REPO`, [`oci`]); and the PEP 503 wheel index for any wheels ([`wheels`]).

pub mod github;
pub mod oci;
pub mod plan;
pub mod wheels;

pub use plan::{PLAN_SCHEMA, PublishPlan};

use std::path::{Path, PathBuf};

use crate::package::index::Index;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("unknown destination {0:?}")]
    BadDestination(String),
    #[error("GITHUB_TOKEN is not set")]
    NoToken,
    #[error("cannot reach GitHub for {what}: {message}")]
    Unreachable { what: String, message: String },
    #[error("GitHub answered {status} to {what}{}", if message.is_empty() { String::new() } else { format!(": {message}") })]
    GitHub {
        what: String,
        status: u16,
        message: String,
    },
    #[error("the release {release} already holds other content under these names: {}", assets.join(", "))]
    TagTaken {
        release: String,
        assets: Vec<String>,
    },
    #[error(transparent)]
    Oci(#[from] crate::oci::OciError),
    #[error(transparent)]
    Package(#[from] crate::package::PackageError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{} holds no index.json: a publish sends what the signed index lists", .0.display())]
    NoIndex(PathBuf),
}

impl crate::diag::Hint for PublishError {
    fn hint(&self) -> String {
        match self {
            PublishError::BadDestination(_) => {
                "write github://OWNER/REPO@TAG or oci://REGISTRY/REPO".into()
            }
            PublishError::NoToken => {
                "export GITHUB_TOKEN (a token with contents: write on the repository; in CI the workflow's token)".into()
            }
            PublishError::Unreachable { .. } => "check the network (and ROCFORGE_GITHUB_API if set)".into(),
            PublishError::GitHub { status: 401 | 403, .. } => {
                "the token was refused: it needs contents: write on the repository".into()
            }
            PublishError::GitHub { .. } => "check OWNER/REPO and the tag".into(),
            PublishError::TagTaken { .. } => {
                "nothing was uploaded; a published release's files are never replaced: publish this directory under a new tag (e.g. the release's -2), or delete the old release on GitHub first if it was never used".into()
            }
            PublishError::Oci(e) => e.hint(),
            PublishError::Package(e) => e.hint(),
            PublishError::Io { .. } => "check the release directory".into(),
            PublishError::Invalid { .. } => {
                "regenerate the release directory with `rocforge package` / `rocforge index`".into()
            }
            PublishError::NoIndex(dir) => format!(
                "write it with `rocforge index {}` (--sign-key to sign it), or package into the directory with `rocforge package --out`",
                dir.display()
            ),
        }
    }
}

/// Where to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    GitHub {
        owner: String,
        repo: String,
        tag: String,
    },
    Oci(crate::oci::Repository),
}

impl Destination {
    pub fn parse(url: &str) -> Result<Destination, PublishError> {
        let bad = || PublishError::BadDestination(url.to_string());
        if let Some(rest) = url.strip_prefix("github://") {
            let (path, tag) = rest.split_once('@').ok_or_else(bad)?;
            let (owner, repo) = path.split_once('/').ok_or_else(bad)?;
            let ok = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            };
            if !ok(owner) || !ok(repo) || tag.is_empty() || tag.contains(['/', ' ', '?', '#']) {
                return Err(bad());
            }
            return Ok(Destination::GitHub {
                owner: owner.into(),
                repo: repo.into(),
                tag: tag.into(),
            });
        }
        if url.starts_with("oci://") {
            return crate::oci::Repository::parse(url)
                .map(Destination::Oci)
                .map_err(|_| bad());
        }
        Err(bad())
    }
}

/// What a publish did with each file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Outcome {
    pub file: String,
    /// uploaded, replaced, present, or pushed (with the tag)
    pub action: String,
}

/// A file a publish sends: what it is (`tarball`, `wheel`, `sbom`, `signature`, `index`, …)
/// and the sha256 the signed index pins for it, when it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseFile {
    pub path: PathBuf,
    pub kind: &'static str,
    pub sha256: Option<String>,
}

/// What a publish of `dir` sends, sorted by name: the release's own files (index.json,
/// SHA256SUMS, the key lists and the wheels the wheel index links, each with its signature)
/// and the files of every delivery `index` lists ([`crate::delivery::Deliver`]). Also the names of the files there that none of
/// them claims, which are not sent: a release holds what its signed index pins.
pub fn files(dir: &Path, index: &Index) -> Result<(Vec<ReleaseFile>, Vec<String>), PublishError> {
    use crate::delivery::Role;
    let mut out: Vec<ReleaseFile> = Vec::new();
    for d in index.deliveries() {
        for f in d.files(dir) {
            // Not followed: a link's target would be hashed and uploaded in its place.
            let meta = std::fs::symlink_metadata(&f.path).map_err(|source| PublishError::Io {
                path: f.path.clone(),
                source,
            })?;
            if !meta.is_file() {
                return Err(PublishError::Invalid {
                    path: f.path.display().to_string(),
                    message: format!(
                        "{} of {} is not a regular file",
                        if f.role == Role::Payload {
                            "the payload"
                        } else {
                            "a file"
                        },
                        d.label()
                    ),
                });
            }
            out.push(ReleaseFile {
                kind: d.kind().upload_kind(f.role),
                sha256: f.sha256.as_ref().map(|s| s.to_string()),
                path: f.path,
            });
        }
    }
    let mut unclaimed = Vec::new();
    let present = crate::package::index::release_files(dir)?
        .into_iter()
        .chain(wheels::wheel_files(dir)?);
    for path in present {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = name.strip_suffix(".minisig").unwrap_or(&name);
        // A wheel the index does not list (a pure-Python dependency put beside the built
        // ones) is still sent: the wheel index this publish writes links it.
        let own = if base.ends_with(".whl") {
            Some("wheel")
        } else if base == crate::package::index::INDEX_NAME {
            Some("index")
        } else if base == "SHA256SUMS" {
            Some("checksums")
        } else if crate::trust::is_key_list_name(base) {
            Some("key-list")
        } else {
            None
        };
        match own {
            Some(kind) => {
                if kind == "wheel"
                    && let Some(sig) = crate::delivery::signature_of(&path)
                {
                    out.push(ReleaseFile {
                        kind: "signature",
                        sha256: None,
                        path: sig.path,
                    });
                }
                out.push(ReleaseFile {
                    kind: if base == name { kind } else { "signature" },
                    sha256: None,
                    path,
                })
            }
            None if out.iter().any(|f| f.path == path) => {}
            None => unclaimed.push(name),
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    Ok((out, unclaimed))
}

/// The sha256 (hex) and size of a file.
pub fn sha256_file(path: &Path) -> Result<(String, u64), PublishError> {
    crate::fsutil::sha256_file(path).map_err(|source| PublishError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub fn client() -> Result<reqwest::blocking::Client, PublishError> {
    crate::net::try_client(&crate::net::HttpOptions::default()).map_err(|e| {
        PublishError::Unreachable {
            what: "client".into(),
            message: e.to_string(),
        }
    })
}

/// `$GITHUB_TOKEN`, when set and not empty.
fn github_token() -> Option<String> {
    std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty())
}

/// Carries out `plan`: writes its wheel index pages, then sends its uploads.
pub fn execute(
    plan: &PublishPlan,
    reporter: &dyn crate::progress::Reporter,
) -> Result<Vec<Outcome>, PublishError> {
    wheels::write_pages(&plan.pages)?;
    if !plan.pages.is_empty() {
        reporter.note(&format!(
            "wrote the wheel index ({} pages): pip install --index-url <URL of {}>/<target>/ …",
            plan.pages.len(),
            plan.dir.display()
        ));
    }
    let Some(dest) = &plan.destination else {
        return Ok(Vec::new());
    };
    let client = client()?;
    match (dest, &plan.oci) {
        (Destination::GitHub { owner, repo, tag }, _) => {
            let token = github_token().ok_or(PublishError::NoToken)?;
            let api = std::env::var("ROCFORGE_GITHUB_API")
                .ok()
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| "https://api.github.com".into());
            let gh = github::GitHub::new(client, api, token, owner, repo);
            let files: Vec<PathBuf> = plan.uploads.iter().map(|u| u.path.clone()).collect();
            gh.publish(tag, &files, reporter)
        }
        (Destination::Oci(repo), Some(oci_plan)) => {
            let shown = format!("oci://{}/{}", repo.registry, repo.repository);
            let remote = crate::oci::Remote::new(client, repo.clone())
                .on_retry(|what| reporter.note(&format!("publish {shown}: {what}")));
            oci::publish(&remote, oci_plan, reporter)
        }
        (Destination::Oci(_), None) => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        assert_eq!(
            Destination::parse("github://me/rocm-builds@v1.0").unwrap(),
            Destination::GitHub {
                owner: "me".into(),
                repo: "rocm-builds".into(),
                tag: "v1.0".into()
            }
        );
        assert!(Destination::parse("github://me/x").is_err());
        assert!(Destination::parse("github://me@v1").is_err());
        assert!(matches!(
            Destination::parse("oci://127.0.0.1:5000/r/a").unwrap(),
            Destination::Oci(_)
        ));
        assert!(Destination::parse("s3://x/y").is_err());
    }
}
