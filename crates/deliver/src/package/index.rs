//! The static release index (`index.json`): every artifact of a release directory with its
//! URL (relative to the index), size, sha256 and dependencies, an issue date and an expiry.
//! Signed as a whole (`index.json.minisig`); an installer trusts an artifact because the signed
//! index pins its sha256. Schema: docs/index-schema.md.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::PackageError;
use super::manifest::Dependency;
use super::tarball::{Compression, read_manifest};
use crate::ids::{ArtifactId, OciDigest, Sha256Digest};
use crate::units::{now_unix, rfc3339};

pub const INDEX_SCHEMA: &str = "rocforge.index/2";
/// The index schemas this rocforge reads: /1 lists tarballs only, /2 also the wheels beside them
/// (kind `wheel`).
pub const INDEX_SCHEMAS_READ: &[&str] = &["rocforge.index/1", INDEX_SCHEMA];
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
    /// Images `image create --push --record DIR` pushed, from their records in the release
    /// directory: the signed index pins each by digest. Absent when there are none (and in
    /// indexes written before images were listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageEntry>,
}

/// The suffix of an image's record in a release directory.
pub const IMAGE_RECORD_SUFFIX: &str = ".image.json";
pub const IMAGE_RECORD_SCHEMA: &str = "rocforge.image-record/1";
/// The largest image record read.
const MAX_IMAGE_RECORD_BYTES: u64 = 1 << 20;

/// An image of the release: a base with one layer holding a built stack, pushed to a registry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ImageEntry {
    /// Where it was pushed: `REGISTRY/NAME:TAG`.
    pub reference: String,
    /// The image manifest's digest: `docker pull NAME@DIGEST` fetches exactly this image.
    pub digest: OciDigest,
    pub release: String,
    /// Sorted LLVM target IDs its stack carries code for.
    pub targets: Vec<crate::arch::TargetId>,
    /// Where the stack is installed in it (ROCM_PATH).
    pub prefix: String,
    /// The base image's manifest digest.
    pub base_digest: OciDigest,
    /// The store entries in its layer, by content key.
    pub components: Vec<ImageComponent>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ImageComponent {
    pub name: crate::ids::ComponentName,
    pub version: String,
    pub key: crate::ids::ContentKey,
}

impl ImageEntry {
    /// `REGISTRY/NAME` of the reference, without its tag.
    pub fn repository(&self) -> &str {
        repository_of(&self.reference)
    }
}

/// `REGISTRY/NAME` of `REGISTRY[:PORT]/NAME[:TAG][@DIGEST]`.
pub fn repository_of(reference: &str) -> &str {
    let r = reference.split_once('@').map_or(reference, |(r, _)| r);
    match r.rfind(':') {
        Some(i) if !r[i..].contains('/') => &r[..i],
        _ => r,
    }
}

/// The file name of the record of the image pushed as `reference`.
pub fn image_record_name(reference: &str) -> String {
    format!(
        "{}{IMAGE_RECORD_SUFFIX}",
        crate::oci::sanitize_tag(reference)
    )
}

/// What `image create --record DIR` writes: `DIR/<tag>.image.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ImageRecord {
    pub schema: String,
    #[serde(flatten)]
    pub image: ImageEntry,
}

impl ImageRecord {
    pub fn new(image: ImageEntry) -> Self {
        ImageRecord {
            schema: IMAGE_RECORD_SCHEMA.into(),
            image,
        }
    }
}

/// The images recorded in `dir`, sorted by file name. A record that cannot be read, or is not
/// one, is refused naming its file: the index would otherwise pin an image nobody pushed.
pub fn images_in(dir: &Path) -> Result<Vec<ImageEntry>, PackageError> {
    let io = |path: &Path, source| PackageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let records = files_named(dir, |n| n.ends_with(IMAGE_RECORD_SUFFIX))?;
    let mut images = Vec::new();
    for p in records {
        let bad = |reason: String| PackageError::BadEntry {
            path: p.display().to_string(),
            reason,
        };
        // A regular file of bounded size: a FIFO or a huge file under that name is refused.
        let meta = std::fs::symlink_metadata(&p).map_err(|e| io(&p, e))?;
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        if meta.len() > MAX_IMAGE_RECORD_BYTES {
            return Err(bad(format!(
                "larger than {MAX_IMAGE_RECORD_BYTES} bytes; not an image record"
            )));
        }
        let text = std::fs::read(&p).map_err(|e| io(&p, e))?;
        let record: ImageRecord = serde_json::from_slice(&text)
            .map_err(|e| bad(format!("not an image record ({IMAGE_RECORD_SCHEMA}): {e}")))?;
        if record.schema != IMAGE_RECORD_SCHEMA {
            return Err(bad(format!(
                "schema {:?}, this rocforge reads {IMAGE_RECORD_SCHEMA}",
                record.schema
            )));
        }
        images.push(record.image);
    }
    Ok(images)
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
    /// What the entry delivers: absent for a component's tarball, `tests` for a test client's
    /// (`<name>-tests`), `wheel` for a Python wheel its build made.
    #[serde(default, skip_serializing_if = "DeliveryKind::is_default")]
    pub kind: DeliveryKind,
    /// For kind `tests`: the library build it tests, by name and content key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<Dependency>,
    #[serde(default)]
    pub depends: Vec<Dependency>,
    #[serde(default)]
    pub glibc_floor: Option<String>,
    /// What it needs from the host or another artifact (`hip-runtime`, by exact library) and
    /// provides (`hip-runtime` for the rocm-runtime component): its manifest's.
    #[serde(flatten)]
    pub facts: crate::package::manifest::RuntimeFacts,
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

/// What an index entry delivers.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryKind {
    /// A component's install tree, as a tarball: what `rocforge install` unpacks.
    #[default]
    Component,
    /// A component's test client (`<name>-tests`), as a tarball: what `rocforge test` installs.
    Tests,
    /// A Python wheel a component's build made (torch, torchvision), the same file its tarball
    /// carries under `share/rocforge/wheels`: what pip installs from the wheel index. Its id is
    /// that of the build that made it; `rocforge install` leaves it to pip.
    Wheel,
    /// An application image with a stack installed, pushed to a registry by `image create`
    /// (the index's `images`; never an `artifacts` entry): what `docker pull` fetches.
    Image,
    /// A kind of a newer index: listed, never installed.
    #[serde(other)]
    Unknown,
}

impl DeliveryKind {
    pub fn is_default(&self) -> bool {
        *self == DeliveryKind::Component
    }

    /// Whether the entry is a tarball that install and test unpack.
    pub fn is_tarball(&self) -> bool {
        matches!(self, DeliveryKind::Component | DeliveryKind::Tests)
    }
}

impl From<crate::package::manifest::ArtifactKind> for DeliveryKind {
    fn from(k: crate::package::manifest::ArtifactKind) -> Self {
        match k {
            crate::package::manifest::ArtifactKind::Component => DeliveryKind::Component,
            crate::package::manifest::ArtifactKind::Tests => DeliveryKind::Tests,
        }
    }
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
    let tarballs = files_named(dir, |n| Compression::of(n).is_some())?;
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
        let wheels = wheels_beside(dir, &name, &m)?;
        artifacts.push(Artifact {
            id: m.id,
            url: name.clone(),
            size: meta.len(),
            sha256: sha256_file(&p)?,
            installed_size: m.installed_size,
            kind: m.kind.into(),
            tests: m.tests,
            depends: m.depends,
            glibc_floor: m.glibc_floor,
            facts: m.facts,
            signature: sig.is_file().then(|| format!("{name}.minisig")),
            sbom: attachment(&p, crate::attest::Kind::Sbom)?,
            provenance: attachment(&p, crate::attest::Kind::Provenance)?,
        });
        artifacts.extend(wheels);
    }
    let images = images_in(dir)?;
    let now = now_unix();
    Ok(Index {
        schema: INDEX_SCHEMA.into(),
        issued: rfc3339(now),
        expires: rfc3339(now + valid_days * 86_400),
        artifacts,
        images,
    })
}

/// The wheels `tarball` (named so in `dir`) carries under [`super::WHEEL_DIR`] that `package`
/// copied beside it, each as an entry of kind `wheel` with the tarball's id. A wheel there by
/// that name whose bytes are not the tarball's is refused: the index would pin a file that no
/// build made.
fn wheels_beside(
    dir: &Path,
    tarball: &str,
    m: &super::manifest::Manifest,
) -> Result<Vec<Artifact>, PackageError> {
    let mut out = Vec::new();
    let prefix = format!("{}/", super::WHEEL_DIR);
    for f in &m.files {
        let Some(name) = f.path.strip_prefix(&prefix) else {
            continue;
        };
        if f.kind != super::manifest::Kind::File || name.contains('/') || !name.ends_with(".whl") {
            continue;
        }
        let path = dir.join(name);
        if !path.is_file() {
            continue;
        }
        let sha256 = sha256_file(&path)?;
        if f.sha256.as_deref() != Some(sha256.to_string().as_str()) {
            return Err(PackageError::ForeignWheel {
                path: path.display().to_string(),
                tarball: tarball.to_string(),
                found: sha256.to_string(),
                recorded: f.sha256.clone().unwrap_or_else(|| "unrecorded".into()),
            });
        }
        let size = std::fs::metadata(&path)
            .map_err(|source| PackageError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        out.push(Artifact {
            id: m.id.clone(),
            url: name.to_string(),
            size,
            sha256,
            installed_size: size,
            kind: DeliveryKind::Wheel,
            tests: None,
            depends: m.depends.clone(),
            glibc_floor: m.glibc_floor.clone(),
            // A wheel needs what its tarball's libraries need, and provides nothing to installs.
            facts: crate::package::manifest::RuntimeFacts {
                provides: Vec::new(),
                ..m.facts.clone()
            },
            signature: crate::sign::signature_path(&path)
                .is_file()
                .then(|| format!("{name}.minisig")),
            sbom: None,
            provenance: None,
        });
    }
    Ok(out)
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
    if !INDEX_SCHEMAS_READ.contains(&index.schema.as_str()) {
        return Err(bad(format!(
            "schema {:?}, this rocforge reads {}",
            index.schema,
            INDEX_SCHEMAS_READ.join(", ")
        )));
    }
    // Renewed, it is written as this rocforge writes it.
    index.schema = INDEX_SCHEMA.into();
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
    files_named(dir, |n| {
        let base = n.strip_suffix(".minisig").unwrap_or(n);
        Compression::of(base).is_some()
            || base == "SHA256SUMS"
            || base == INDEX_NAME
            || crate::trust::is_key_list_name(base)
            || crate::attest::is_document_name(n)
    })
}

/// The entries of `dir` whose names `keep` accepts, sorted; hidden ones (a temporary file
/// being written) never.
fn files_named(dir: &Path, keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>, PackageError> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| PackageError::Io {
            path: dir.to_path_buf(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && keep(n))
        })
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod kind_tests {
    use super::DeliveryKind;

    /// A kind this rocforge does not know (a later one's) reads as Unknown, not as an error: the
    /// index stays readable and that entry is never installed.
    #[test]
    fn kinds_read_and_unknown_ones_are_kept_apart() {
        let read = |s: &str| serde_json::from_str::<DeliveryKind>(s).unwrap();
        assert_eq!(read("\"wheel\""), DeliveryKind::Wheel);
        assert_eq!(read("\"tests\""), DeliveryKind::Tests);
        assert_eq!(read("\"sbom-bundle\""), DeliveryKind::Unknown);
        assert!(!DeliveryKind::Unknown.is_tarball() && !DeliveryKind::Wheel.is_tarball());
        assert!(DeliveryKind::Component.is_tarball() && DeliveryKind::Tests.is_tarball());
    }
}
