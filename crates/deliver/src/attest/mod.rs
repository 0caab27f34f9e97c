//! What each tarball and image is made of and how it was made: an SPDX 2.3 SBOM
//! ([`sbom`]) and an in-toto statement with an SLSA Provenance v1 predicate ([`provenance`]),
//! both from what the store already records ([`inputs`]), signed with the release key,
//! written beside the tarball (`NAME.spdx.json`, `NAME.intoto.json`, each with `.minisig`),
//! attached to images as OCI referrers ([`referrers`]), and checked by `rocforge verify`
//! ([`check`]). docs/security.md says what they claim.

pub mod check;
pub mod inputs;
pub mod provenance;
pub mod referrers;
pub mod report;
pub mod sbom;

use std::path::{Path, PathBuf};

pub use inputs::ComponentRecord;

pub const SBOM_SUFFIX: &str = ".spdx.json";
pub const PROVENANCE_SUFFIX: &str = ".intoto.json";
/// The media types of the documents (the OCI artifact types of their referrers).
pub const SBOM_TYPE: &str = "application/spdx+json";
pub const PROVENANCE_TYPE: &str = "application/vnd.in-toto+json";

#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} is not a valid {kind}: {reason}")]
    Malformed {
        what: String,
        kind: &'static str,
        reason: String,
    },
    #[error("{what}: no {kind} (looked for {expected})")]
    Missing {
        what: String,
        kind: &'static str,
        expected: String,
    },
    #[error("{document} is not signed (no {document}.minisig)")]
    Unsigned { document: String },
    #[error("{0}")]
    OtherSubject(Box<OtherSubject>),
    #[error("{document} describes {claimed}, but {subject} is {actual}")]
    OtherComponent {
        document: String,
        subject: String,
        claimed: String,
        actual: String,
    },
    #[error(transparent)]
    Trust(#[from] crate::trust::TrustError),
    #[error(transparent)]
    Sign(#[from] crate::sign::SignError),
    #[error(transparent)]
    Oci(#[from] crate::oci::OciError),
    #[error("{reference}: {message}")]
    Registry { reference: String, message: String },
}

impl crate::diag::Hint for AttestError {
    fn hint(&self) -> String {
        match self {
            AttestError::Io { .. } => "check the path and its permissions".into(),
            AttestError::Malformed { .. } => {
                "do not use it: download it again, or package the component again".into()
            }
            AttestError::Missing { .. } => {
                "package with this rocforge (it writes both documents beside every tarball), or \
                 download them from the release with the tarball"
                    .into()
            }
            AttestError::Unsigned { .. } => {
                "package with a signing key (--key or ROCFORGE_SIGNING_KEY) so the documents are signed".into()
            }
            AttestError::OtherSubject(_) => {
                "the document was made for something else: fetch the SBOM and provenance that were \
                 published with this very file or image (same name, same release)"
                    .into()
            }
            AttestError::OtherComponent { .. } => {
                "the document does not belong to this artifact: fetch the ones published with it".into()
            }
            AttestError::Trust(e) => e.hint(),
            AttestError::Sign(e) => e.hint(),
            AttestError::Oci(e) => e.hint(),
            AttestError::Registry { .. } => {
                "check the registry (an OCI distribution registry that keeps manifests with a \
                 `subject`) and push the image again"
                    .into()
            }
        }
    }
}

/// A document whose subject is not the tarball or image it was given with.
#[derive(Debug)]
pub struct OtherSubject {
    pub document: String,
    /// "an SBOM", "a provenance statement".
    pub kind: &'static str,
    pub subject_kind: &'static str,
    pub subject: String,
    /// The sha256 the document names (hex), and the subject's.
    pub claimed: String,
    pub actual: String,
}

impl std::fmt::Display for OtherSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {} for another {}: it names sha256:{}, {} is sha256:{}",
            self.document, self.kind, self.subject_kind, self.claimed, self.subject, self.actual
        )
    }
}

/// Which document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Sbom,
    Provenance,
}

impl Kind {
    pub fn suffix(self) -> &'static str {
        match self {
            Kind::Sbom => SBOM_SUFFIX,
            Kind::Provenance => PROVENANCE_SUFFIX,
        }
    }
    pub fn media_type(self) -> &'static str {
        match self {
            Kind::Sbom => SBOM_TYPE,
            Kind::Provenance => PROVENANCE_TYPE,
        }
    }
    /// As messages name it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Sbom => "SBOM",
            Kind::Provenance => "provenance statement",
        }
    }
    /// As a sentence names one: "an SBOM", "a provenance statement".
    pub fn with_article(self) -> &'static str {
        match self {
            Kind::Sbom => "an SBOM",
            Kind::Provenance => "a provenance statement",
        }
    }
    pub fn of_media_type(t: &str) -> Option<Kind> {
        [Kind::Sbom, Kind::Provenance]
            .into_iter()
            .find(|k| k.media_type() == t)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectKind {
    Tarball,
    Image,
}

impl SubjectKind {
    pub fn label(self) -> &'static str {
        match self {
            SubjectKind::Tarball => "tarball",
            SubjectKind::Image => "image",
        }
    }
}

/// What a pair of documents is about.
#[derive(Debug, Clone)]
pub struct Subject {
    pub kind: SubjectKind,
    /// A tarball's file name, or an image's `REGISTRY/REPO:TAG`.
    pub name: String,
    /// The tarball's or the image manifest's sha256 (hex, or `sha256:` digest).
    pub sha256: String,
    pub version: Option<String>,
    /// Where it can be fetched, when known (`oci://…@sha256:…` for an image).
    pub location: Option<String>,
    /// A tarball's content key.
    pub key: Option<String>,
    /// An image's base: reference and digest.
    pub base: Option<(String, String)>,
}

impl Subject {
    /// The last part of the SBOM's namespace: the tarball's name and content key, or the
    /// image's digest. Same subject, same namespace.
    pub fn namespace_id(&self) -> String {
        let hex = self.sha256.trim_start_matches("sha256:");
        match (&self.kind, &self.key) {
            (SubjectKind::Tarball, Some(k)) => format!("{}-{k}", self.name),
            _ => format!("image-sha256-{hex}"),
        }
    }
}

/// The two documents as bytes, each with its minisign signature when signed.
#[derive(Debug, Clone)]
pub struct Documents {
    pub sbom: Vec<u8>,
    pub provenance: Vec<u8>,
    pub sbom_signature: Option<String>,
    pub provenance_signature: Option<String>,
}

impl Documents {
    pub fn get(&self, kind: Kind) -> (&[u8], Option<&str>) {
        match kind {
            Kind::Sbom => (&self.sbom, self.sbom_signature.as_deref()),
            Kind::Provenance => (&self.provenance, self.provenance_signature.as_deref()),
        }
    }
}

/// Pretty JSON with a final newline: what is written, signed and hashed.
pub fn encode<T: serde::Serialize>(v: &T) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("plain data");
    b.push(b'\n');
    b
}

/// A tarball's name without `.tar.zst`/`.tar.gz`: the documents' stem.
pub fn stem(tarball_name: &str) -> &str {
    tarball_name
        .strip_suffix(".tar.zst")
        .or_else(|| tarball_name.strip_suffix(".tar.gz"))
        .unwrap_or(tarball_name)
}

/// Where a tarball's document of `kind` lives: beside it, `STEM.spdx.json` / `STEM.intoto.json`.
pub fn document_path(tarball: &Path, kind: Kind) -> PathBuf {
    let name = tarball
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    tarball.with_file_name(format!("{}{}", stem(&name), kind.suffix()))
}

/// Whether a release directory's file is one of the documents (or its signature).
pub fn is_document_name(name: &str) -> bool {
    let base = name.strip_suffix(".minisig").unwrap_or(name);
    base.ends_with(SBOM_SUFFIX) || base.ends_with(PROVENANCE_SUFFIX)
}

/// Signs both documents (when a key is given).
pub fn sign(
    sbom: Vec<u8>,
    provenance: Vec<u8>,
    names: (&str, &str),
    key: Option<&crate::sign::SecretKey>,
) -> Result<Documents, AttestError> {
    let sig = |bytes: &[u8], name: &str| -> Result<Option<String>, AttestError> {
        key.map(|k| crate::sign::sign_reader(k, bytes, name))
            .transpose()
            .map_err(AttestError::from)
    };
    Ok(Documents {
        sbom_signature: sig(&sbom, names.0)?,
        provenance_signature: sig(&provenance, names.1)?,
        sbom,
        provenance,
    })
}

/// The SBOM and provenance of a packaged tarball, from its manifest; `known` describes
/// dependencies the store holds (for their versions and sources).
pub fn tarball_documents(
    manifest: &crate::package::manifest::Manifest,
    source_commit: Option<String>,
    tarball_name: &str,
    tarball_sha256: &str,
    known: &[ComponentRecord],
    key: Option<&crate::sign::SecretKey>,
) -> Result<Documents, AttestError> {
    let record = ComponentRecord::from_manifest(manifest, source_commit);
    let subject = Subject {
        kind: SubjectKind::Tarball,
        name: tarball_name.to_string(),
        sha256: tarball_sha256.to_string(),
        version: Some(manifest.id.version.clone()),
        location: None,
        key: Some(manifest.id.key.to_string()),
        base: None,
    };
    let sbom = encode(&sbom::document(
        &subject,
        std::slice::from_ref(&record),
        known,
    ));
    let prov = encode(&provenance::component_statement(&subject, &record));
    let s = stem(tarball_name);
    sign(
        sbom,
        prov,
        (
            &format!("{s}{SBOM_SUFFIX}"),
            &format!("{s}{PROVENANCE_SUFFIX}"),
        ),
        key,
    )
}

/// The documents of an image whose manifest has `digest`, stacking `components` on `base`.
pub fn image_documents(
    reference: &str,
    digest: &str,
    base: Option<(String, String)>,
    components: &[ComponentRecord],
    prefix: &str,
    key: Option<&crate::sign::SecretKey>,
) -> Result<Documents, AttestError> {
    let subject = Subject {
        kind: SubjectKind::Image,
        name: reference.to_string(),
        sha256: digest.to_string(),
        version: None,
        location: Some(format!(
            "oci://{}@{digest}",
            reference.rsplit_once(':').map_or(reference, |(n, _)| n)
        )),
        key: None,
        base,
    };
    let sbom = encode(&sbom::document(&subject, components, &[]));
    let prov = encode(&provenance::image_statement(&subject, components, prefix));
    sign(sbom, prov, ("image.spdx.json", "image.intoto.json"), key)
}

/// Writes the documents beside `tarball` (and their signatures, or removes stale ones when
/// unsigned), each through a temporary file and a rename. Returns the paths written.
pub fn write_beside(tarball: &Path, docs: &Documents) -> Result<Vec<PathBuf>, AttestError> {
    let mut out = Vec::new();
    for kind in [Kind::Sbom, Kind::Provenance] {
        let (bytes, sig) = docs.get(kind);
        let path = document_path(tarball, kind);
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| AttestError::Io { path: p, source }
        };
        crate::fsutil::write_atomic(&path, bytes)
            .and_then(|()| crate::sign::readable(&path))
            .map_err(io(&path))?;
        out.push(path.clone());
        let sig_path = crate::sign::signature_path(&path);
        match sig {
            Some(s) => {
                crate::fsutil::write_atomic(&sig_path, s.as_bytes())
                    .and_then(|()| crate::sign::readable(&sig_path))
                    .map_err(io(&sig_path))?;
                out.push(sig_path);
            }
            None => {
                let _ = std::fs::remove_file(&sig_path);
            }
        }
    }
    Ok(out)
}
