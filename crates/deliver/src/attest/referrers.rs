//! The documents attached to an image as OCI referrers (distribution spec 1.1): one artifact
//! manifest per document, its `subject` the image manifest, its `artifactType` the document's
//! media type, the signed document as its first layer and the minisig as its second.
//!
//! Registries without the referrers API (CNCF distribution 2.8 stores a manifest's `subject`
//! but answers 404 to `/referrers/`) are served through the spec's fallback: an image index
//! tagged `sha256-<hex of the image digest>` that lists the referrers. Both artifact manifests
//! are pushed before that index is written, in one PUT: a registry that refuses any step leaves
//! the image with no referrer claimed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{AttestError, Documents, Kind};
use crate::oci::{IMAGE_INDEX, IMAGE_MANIFEST, Remote, SIGNATURE_TYPE, TITLE};

/// OCI's empty JSON config (`{}`), which artifact manifests without a config use.
pub const EMPTY_TYPE: &str = "application/vnd.oci.empty.v1+json";
const EMPTY: &[u8] = b"{}";
/// The annotation on the referrers list that marks the entries rocforge listed.
pub const MADE_BY: &str = "dev.rocforge.attached-by";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An artifact manifest that refers to another manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactManifest {
    pub schema_version: u32,
    pub media_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The referrers list: what `/referrers/<digest>` answers and the fallback tag holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    pub schema_version: u32,
    pub media_type: String,
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
}

/// The fallback tag of an image digest: `sha256-<hex>`.
pub fn fallback_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

/// What [`attach_to_image`] pushed.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Attached {
    pub kind: Kind,
    /// The referrer manifest's digest.
    pub manifest: String,
}

fn layer(d: crate::oci::Descriptor, title: &str) -> Descriptor {
    Descriptor {
        media_type: d.media_type,
        digest: d.digest,
        size: d.size,
        artifact_type: None,
        annotations: [(TITLE.to_string(), title.to_string())].into(),
    }
}

/// Attaches both documents to the image whose manifest (of `image_media_type`, `image_size`
/// bytes) has `image_digest` in `remote`'s repository. Returns the referrer manifests.
pub fn attach_to_image(
    remote: &Remote,
    image_digest: &str,
    image_media_type: &str,
    image_size: u64,
    documents: &Documents,
) -> Result<Vec<Attached>, AttestError> {
    let subject = Descriptor {
        media_type: image_media_type.to_string(),
        digest: image_digest.to_string(),
        size: image_size,
        artifact_type: None,
        annotations: BTreeMap::new(),
    };
    let empty = remote.push_bytes(EMPTY_TYPE, EMPTY)?;
    let mut pushed = Vec::new();
    let mut listed = Vec::new();
    let mut supported = true;
    for kind in [Kind::Sbom, Kind::Provenance] {
        let (bytes, sig) = documents.get(kind);
        let Some(sig) = sig else {
            return Err(AttestError::Unsigned {
                document: format!("the image's {}", kind.label()),
            });
        };
        let name = format!("image{}", kind.suffix());
        let doc = layer(remote.push_bytes(kind.media_type(), bytes)?, &name);
        let sig = layer(
            remote.push_bytes(SIGNATURE_TYPE, sig.as_bytes())?,
            &format!("{name}.minisig"),
        );
        let manifest = ArtifactManifest {
            schema_version: 2,
            media_type: IMAGE_MANIFEST.into(),
            artifact_type: Some(kind.media_type().into()),
            config: Descriptor {
                media_type: EMPTY_TYPE.into(),
                digest: empty.digest.clone(),
                size: empty.size,
                artifact_type: None,
                annotations: BTreeMap::new(),
            },
            layers: vec![doc, sig],
            subject: Some(subject.clone()),
            annotations: BTreeMap::new(),
        };
        let bytes = serde_json::to_vec(&manifest).expect("plain data");
        let digest = crate::oci::digest_of(&bytes);
        let answer = remote.put_manifest_bytes(&digest, IMAGE_MANIFEST, &bytes)?;
        crate::fault::point("attest");
        // A registry with the referrers API says so (OCI-Subject) and lists it itself.
        supported &= answer.oci_subject.as_deref() == Some(image_digest);
        listed.push(Descriptor {
            media_type: IMAGE_MANIFEST.into(),
            digest: digest.clone(),
            size: bytes.len() as u64,
            artifact_type: Some(kind.media_type().into()),
            annotations: [(MADE_BY.to_string(), "rocforge".to_string())].into(),
        });
        pushed.push(Attached {
            kind,
            manifest: digest,
        });
    }
    if !supported {
        let tag = fallback_tag(image_digest);
        let mut index = match remote.get_manifest(&tag)? {
            Some((_, b)) => {
                serde_json::from_slice::<Index>(&b).map_err(|e| AttestError::Registry {
                    reference: remote.repo.reference(&tag),
                    message: format!("the referrers tag is not an image index: {e}"),
                })?
            }
            None => Index {
                schema_version: 2,
                media_type: IMAGE_INDEX.into(),
                manifests: Vec::new(),
            },
        };
        // A push replaces the documents an earlier push of this image listed (signatures
        // differ from one signing to the next, so their manifests do); others' referrers stay.
        index.manifests.retain(|m| {
            m.annotations.get(MADE_BY).map(String::as_str) != Some("rocforge")
                || !listed.iter().any(|d| d.artifact_type == m.artifact_type)
        });
        index.manifests.extend(listed);
        let bytes = serde_json::to_vec(&index).expect("plain data");
        remote.put_manifest_bytes(&tag, IMAGE_INDEX, &bytes)?;
    }
    Ok(pushed)
}

/// One referrer read back: the document, its signature and the subject its manifest names.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub kind: Kind,
    pub manifest: String,
    pub subject: Option<String>,
    pub document: Vec<u8>,
    pub signature: Option<String>,
}

/// The most one SBOM or provenance document may be: a stack of 15,000 files is a few MiB.
const MAX_DOCUMENT_BYTES: u64 = 16 << 20;
/// The most the documents of one image's referrers may hold together.
const MAX_DOCUMENTS_BYTES: u64 = 128 << 20;

/// The referrers of `image_digest` that carry one of the documents: through the referrers
/// API when the registry has it, else the fallback tag.
pub fn read_from_image(remote: &Remote, image_digest: &str) -> Result<Vec<Fetched>, AttestError> {
    let index = match remote.get_referrers(image_digest)? {
        Some(b) => Some(b),
        None => remote
            .get_manifest(&fallback_tag(image_digest))?
            .map(|(_, b)| b),
    };
    let Some(index) = index else {
        return Ok(Vec::new());
    };
    let index: Index = serde_json::from_slice(&index).map_err(|e| AttestError::Registry {
        reference: remote.repo.reference(&fallback_tag(image_digest)),
        message: format!("the referrers list is not an image index: {e}"),
    })?;
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut held: u64 = 0;
    for d in &index.manifests {
        let Some(kind) = d.artifact_type.as_deref().and_then(Kind::of_media_type) else {
            continue;
        };
        // A referrers list is the registry's word: the same document listed again is read
        // once, and what all of them hold is capped before any is checked.
        if !seen.insert(d.digest.as_str()) {
            continue;
        }
        let Some((_, bytes)) = remote.get_manifest(&d.digest)? else {
            return Err(AttestError::Registry {
                reference: remote.repo.reference(&d.digest),
                message: format!("the {} referrer is listed but missing", kind.label()),
            });
        };
        let m: ArtifactManifest =
            serde_json::from_slice(&bytes).map_err(|e| AttestError::Registry {
                reference: remote.repo.reference(&d.digest),
                message: format!("not an artifact manifest: {e}"),
            })?;
        let doc = m
            .layers
            .iter()
            .find(|l| l.media_type == kind.media_type())
            .ok_or_else(|| AttestError::Registry {
                reference: remote.repo.reference(&d.digest),
                message: format!("no {} layer", kind.media_type()),
            })?;
        let document = remote.get_blob_bytes(&doc.digest, MAX_DOCUMENT_BYTES)?;
        held += document.len() as u64;
        if held > MAX_DOCUMENTS_BYTES {
            return Err(AttestError::Registry {
                reference: remote.repo.reference(&fallback_tag(image_digest)),
                message: format!(
                    "its referrers hold more than {} of documents, more than any image's SBOM and provenance; the list is not what rocforge pushes",
                    crate::units::format_size(MAX_DOCUMENTS_BYTES)
                ),
            });
        }
        let signature = match m.layers.iter().find(|l| l.media_type == SIGNATURE_TYPE) {
            Some(s) => Some(
                String::from_utf8_lossy(&remote.get_blob_bytes(&s.digest, 64 << 10)?).into_owned(),
            ),
            None => None,
        };
        out.push(Fetched {
            kind,
            manifest: d.digest.clone(),
            subject: m.subject.map(|s| s.digest),
            document,
            signature,
        });
    }
    Ok(out)
}
