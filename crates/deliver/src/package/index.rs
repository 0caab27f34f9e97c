//! The static release index (`index.json`): every artifact of a release directory with its
//! URL (relative to the index), size, sha256 and dependencies, an issue date and an expiry.
//! Signed as a whole (`index.json.minisig`); an installer trusts an artifact because the signed
//! index pins its sha256. Schema: docs/index-schema.md.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PackageError;
use super::manifest::Dependency;
use super::tarball::{Compression, read_manifest};
use crate::ids::{ArtifactId, Sha256Digest};
use crate::units::{now_unix, rfc3339};

pub const INDEX_SCHEMA: &str = "rocforge.index/1";
pub const INDEX_NAME: &str = "index.json";
/// The largest index an installer reads.
pub const MAX_INDEX_BYTES: u64 = 16 << 20;

/// `index.json`: the signed list of a release directory's artifacts (docs/index-schema.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Index {
    pub schema: String,
    /// RFC 3339 UTC, e.g. 2025-06-01T12:00:00Z.
    pub issued: String,
    /// After this instant installers refuse the index (an old index cannot be replayed).
    pub expires: String,
    pub artifacts: Vec<Artifact>,
}

/// One tarball of the release: what it is, where it is, its digest and what it needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Artifact {
    #[serde(flatten)]
    pub id: ArtifactId,
    /// Relative to the index's URL (or absolute; installers refuse other hosts by default).
    pub url: String,
    pub size: u64,
    pub sha256: Sha256Digest,
    /// Sum of the files' sizes once extracted.
    pub installed_size: u64,
    /// `tests` for a test-client artifact (`<name>-tests`); absent otherwise.
    #[serde(
        default,
        skip_serializing_if = "crate::package::manifest::ArtifactKind::is_default"
    )]
    pub kind: crate::package::manifest::ArtifactKind,
    /// For kind `tests`: the library build it tests, by name and content key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<Dependency>,
    #[serde(default)]
    pub depends: Vec<Dependency>,
    #[serde(default)]
    pub glibc_floor: Option<String>,
    /// Run-time capabilities it needs from the host or another artifact (`hip-runtime`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Capabilities it provides (`hip-runtime` for the rocm-runtime component).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provides: Vec<String>,
    /// The exact runtime libraries behind `needs` (e.g. libamdhip64.so.6); see the manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_libs: Vec<String>,
    /// The artifact's detached signature, relative like `url`.
    #[serde(default)]
    pub signature: Option<String>,
    /// Its SBOM (SPDX 2.3 JSON, `STEM.spdx.json`); absent from indexes written before rocforge
    /// made them, and for tarballs without one beside them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbom: Option<Attachment>,
    /// Its provenance (in-toto statement, SLSA Provenance v1, `STEM.intoto.json`); absent as
    /// `sbom` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Attachment>,
}

/// A document published beside a tarball: pinned by the signed index like the tarball is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Attachment {
    /// Relative like the artifact's `url`.
    pub url: String,
    pub sha256: Sha256Digest,
    /// Its detached signature, relative like `url`.
    #[serde(default)]
    pub signature: Option<String>,
}

/// The document of `kind` beside `tarball`, when there is one.
fn attachment(
    tarball: &Path,
    kind: crate::attest::Kind,
) -> Result<Option<Attachment>, PackageError> {
    let path = crate::attest::document_path(tarball, kind);
    if !path.is_file() {
        return Ok(None);
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    Ok(Some(Attachment {
        sha256: sha256_file(&path)?,
        signature: crate::sign::signature_path(&path)
            .is_file()
            .then(|| format!("{name}.minisig")),
        url: name,
    }))
}

crate::carries_artifact_id!(Artifact);

/// The index of every tarball in `dir` (their manifests are read), issued now and expiring
/// after `valid_days`. Tarballs are listed by name.
pub fn build(dir: &Path, valid_days: u64) -> Result<Index, PackageError> {
    let mut tarballs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| PackageError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && Compression::of(n).is_some())
        })
        .collect();
    tarballs.sort();
    let mut artifacts = Vec::new();
    for p in tarballs {
        let m = read_manifest(&p)?;
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let sig = crate::sign::signature_path(&p);
        let meta = std::fs::metadata(&p).map_err(|source| PackageError::Io {
            path: p.clone(),
            source,
        })?;
        artifacts.push(Artifact {
            id: m.id,
            url: name.clone(),
            size: meta.len(),
            sha256: sha256_file(&p)?,
            installed_size: m.installed_size,
            kind: m.kind,
            tests: m.tests,
            depends: m.depends,
            glibc_floor: m.glibc_floor,
            needs: m.needs,
            runtime_libs: m.runtime_libs,
            provides: m.provides,
            signature: sig.is_file().then(|| format!("{name}.minisig")),
            sbom: attachment(&p, crate::attest::Kind::Sbom)?,
            provenance: attachment(&p, crate::attest::Kind::Provenance)?,
        });
    }
    let now = now_unix();
    Ok(Index {
        schema: INDEX_SCHEMA.into(),
        issued: rfc3339(now),
        expires: rfc3339(now + valid_days * 86_400),
        artifacts,
    })
}

/// `dir/index.json` issued anew: the same artifacts, issued now and expiring after
/// `valid_days`. For re-signing a published release before it expires, without its tarballs;
/// the caller checks the old signature first, since whatever is read here gets signed.
pub fn renew(dir: &Path, valid_days: u64) -> Result<Index, PackageError> {
    let path = dir.join(INDEX_NAME);
    let bad = |reason: String| PackageError::BadEntry {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read(&path).map_err(|source| PackageError::Io {
        path: path.clone(),
        source,
    })?;
    if text.len() as u64 > MAX_INDEX_BYTES {
        return Err(bad(format!("larger than {MAX_INDEX_BYTES} bytes")));
    }
    let mut index: Index =
        serde_json::from_slice(&text).map_err(|e| bad(format!("not a release index: {e}")))?;
    if index.schema != INDEX_SCHEMA {
        return Err(bad(format!(
            "schema {:?}, this rocforge writes {INDEX_SCHEMA}",
            index.schema
        )));
    }
    let now = now_unix();
    index.issued = rfc3339(now);
    index.expires = rfc3339(now + valid_days * 86_400);
    Ok(index)
}

fn sha256_file(p: &Path) -> Result<Sha256Digest, PackageError> {
    let (hex, _) = crate::fsutil::sha256_file(p).map_err(|source| PackageError::Io {
        path: p.to_path_buf(),
        source,
    })?;
    Ok(Sha256Digest::parse(&hex).expect("a sha256 in lower-case hex"))
}

/// Writes `dir/index.json` and, with a key, `dir/index.json.minisig`. Returns the paths.
pub fn write(
    dir: &Path,
    index: &Index,
    key: Option<&crate::sign::SecretKey>,
) -> Result<Vec<PathBuf>, PackageError> {
    let path = dir.join(INDEX_NAME);
    let mut text = serde_json::to_vec_pretty(index).expect("plain data");
    text.push(b'\n');
    crate::fsutil::write_atomic(&path, &text)
        .and_then(|()| crate::sign::readable(&path))
        .map_err(|source| PackageError::Io {
            path: path.clone(),
            source,
        })?;
    let mut out = vec![path.clone()];
    crate::fault::point("package");
    let sig = crate::sign::signature_path(&path);
    match key {
        Some(k) => out.push(crate::sign::sign_file(k, &path)?),
        None => {
            // A stale signature would be worse than none.
            let _ = std::fs::remove_file(&sig);
        }
    }
    Ok(out)
}

/// Every file of a release directory a publisher uploads: tarballs and their signatures,
/// their SBOMs and provenance statements (and signatures), SHA256SUMS (and its signature), the index (and its signature) and the key lists
/// (`keys.json`, `keys-N.json` and their signatures), sorted by name. The seam for publishing
/// to GitHub Releases, OCI registries or any HTTP directory.
pub fn release_files(dir: &Path) -> Result<Vec<PathBuf>, PackageError> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| PackageError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let base = n.strip_suffix(".minisig").unwrap_or(n);
            !n.starts_with('.')
                && (Compression::of(base).is_some()
                    || base == "SHA256SUMS"
                    || base == INDEX_NAME
                    || crate::trust::is_key_list_name(base)
                    || crate::attest::is_document_name(n))
        })
        .collect();
    out.sort();
    Ok(out)
}
