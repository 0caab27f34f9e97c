//! What `verify --format json` prints: the signature that verified (a file) or the image's
//! digest (`verify oci://…`), and the SBOM and provenance checked with it.

use serde::Serialize;

use super::check::Checked;

pub const VERIFY_SCHEMA: &str = "rocforge.verify/1";

/// A verification that passed (one that fails prints `rocforge.error/1`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Verified {
    pub schema: &'static str,
    #[serde(flatten)]
    pub subject: Subject,
    /// The documents that passed: empty for a file with none beside it.
    pub documents: Vec<Checked>,
    /// `verify oci://… --index`: the signed index that lists the image at this digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
}

/// What was verified.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Subject {
    /// A signed file: its signature, then the documents beside a tarball.
    File {
        file: String,
        /// The trusted key that made the signature.
        key_id: String,
        trusted_comment: String,
    },
    /// An image (`verify oci://REGISTRY/REPO:TAG`): the documents attached to it.
    Image {
        /// As given.
        image: String,
        /// The image manifest's digest.
        digest: String,
    },
}

impl Verified {
    pub fn file(
        file: &std::path::Path,
        signature: &crate::sign::Verified,
        documents: Vec<Checked>,
    ) -> Self {
        Verified {
            schema: VERIFY_SCHEMA,
            subject: Subject::File {
                file: file.display().to_string(),
                key_id: signature.key_id.clone(),
                trusted_comment: signature.trusted_comment.clone(),
            },
            documents,
            index: None,
        }
    }

    pub fn image(image: &str, digest: String, documents: Vec<Checked>) -> Self {
        Verified {
            schema: VERIFY_SCHEMA,
            subject: Subject::Image {
                image: image.into(),
                digest,
            },
            documents,
            index: None,
        }
    }
}
