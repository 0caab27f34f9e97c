//! One way to deliver. Every kind of thing a release hands out (a component's tarball, a test
//! client's, a wheel, an application image) answers the same questions through [`Deliver`]:
//! what it is, and which files of the release directory carry it, each with its role and
//! media type. The index lists the deliveries ([`Index::deliveries`]); publish sends exactly
//! their files and names each by its role, and a registry receives each delivery as one
//! artifact whose layers are those files, so no writer or publisher keeps its own list of
//! which suffix belongs to what.

use std::path::{Path, PathBuf};

use crate::ids::Sha256Digest;
use crate::package::index::{Artifact, DeliveryKind, ImageEntry, Index};

/// A component's install tree as a zstd tar, the form `package` writes by default.
pub const COMPONENT_TAR_ZSTD: &str = "application/vnd.rocforge.component.v1.tar+zstd";
pub const COMPONENT_TAR_GZIP: &str = "application/vnd.rocforge.component.v1.tar+gzip";
/// A Python wheel the index lists (kind `wheel`): a zip, as pip downloads it.
pub const WHEEL_ZIP: &str = "application/vnd.rocforge.wheel.v1+zip";
/// What `image create --record` writes for a pushed image (schema rocforge.image-record/1).
pub const IMAGE_RECORD_TYPE: &str = "application/vnd.rocforge.image-record.v1+json";

/// What a file does for its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The delivered bytes themselves: the tarball, the wheel.
    Payload,
    /// A detached minisign signature of the file before it.
    Signature,
    /// Its SPDX SBOM.
    Sbom,
    /// Its in-toto provenance statement.
    Provenance,
    /// The record of something delivered elsewhere (an image pushed to a registry).
    Record,
}

/// One file of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveredFile {
    pub path: PathBuf,
    pub role: Role,
    pub media_type: &'static str,
    /// What the signed index pins for it; None: read when it is sent.
    pub sha256: Option<Sha256Digest>,
}

impl DeliveredFile {
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// A thing a release delivers.
pub trait Deliver {
    /// Its kind, as the index and `install`/`test` select by it.
    fn kind(&self) -> DeliveryKind;
    /// How messages name it: `rocblas 4.4.1 for gfx90c`.
    fn label(&self) -> String;
    /// The files of release directory `dir` that carry it, its payload (or record) first,
    /// each signature right after the file it signs. Only files that exist are named, except
    /// the payload the index pins, which a publish must find.
    fn files(&self, dir: &Path) -> Vec<DeliveredFile>;
}

impl DeliveryKind {
    /// How `publish` names a file of `role` of a delivery of this kind.
    pub fn upload_kind(self, role: Role) -> &'static str {
        match role {
            Role::Signature => "signature",
            Role::Sbom => "sbom",
            Role::Provenance => "provenance",
            Role::Record => "image-record",
            Role::Payload => match self {
                DeliveryKind::Wheel => "wheel",
                _ => "tarball",
            },
        }
    }
}

/// `path`'s detached signature, when it is a regular file beside it.
pub fn signature_of(path: &Path) -> Option<DeliveredFile> {
    let sig = crate::sign::signature_path(path);
    std::fs::symlink_metadata(&sig)
        .is_ok_and(|m| m.is_file())
        .then_some(DeliveredFile {
            path: sig,
            role: Role::Signature,
            media_type: crate::oci::SIGNATURE_TYPE,
            sha256: None,
        })
}

/// `file` followed by its signature when it has one.
fn with_signature(file: DeliveredFile) -> impl Iterator<Item = DeliveredFile> {
    let sig = signature_of(&file.path);
    std::iter::once(file).chain(sig)
}

impl Deliver for Artifact {
    fn kind(&self) -> DeliveryKind {
        self.kind
    }

    fn label(&self) -> String {
        let what = match self.kind {
            DeliveryKind::Wheel => " (wheel)",
            DeliveryKind::Tests => " (test client)",
            _ => "",
        };
        format!(
            "{} {} for {}{what}",
            self.id.name,
            self.id.version,
            self.id.target_list()
        )
    }

    fn files(&self, dir: &Path) -> Vec<DeliveredFile> {
        let path = dir.join(&self.url);
        let media_type = if self.kind == DeliveryKind::Wheel {
            WHEEL_ZIP
        } else if self.url.ends_with(".tar.gz") {
            COMPONENT_TAR_GZIP
        } else {
            COMPONENT_TAR_ZSTD
        };
        let mut out: Vec<DeliveredFile> = with_signature(DeliveredFile {
            path: path.clone(),
            role: Role::Payload,
            media_type,
            sha256: Some(self.sha256.clone()),
        })
        .collect();
        // A wheel's SBOM and provenance are its tarball's: they travel with the tarball.
        if self.kind != DeliveryKind::Wheel {
            for (kind, role) in [
                (crate::attest::Kind::Sbom, Role::Sbom),
                (crate::attest::Kind::Provenance, Role::Provenance),
            ] {
                let doc = crate::attest::document_path(&path, kind);
                if std::fs::symlink_metadata(&doc).is_ok_and(|m| m.is_file()) {
                    out.extend(with_signature(DeliveredFile {
                        path: doc,
                        role,
                        media_type: kind.media_type(),
                        sha256: None,
                    }));
                }
            }
        }
        out
    }
}

impl Deliver for ImageEntry {
    fn kind(&self) -> DeliveryKind {
        DeliveryKind::Image
    }

    fn label(&self) -> String {
        format!("the image {}@{}", self.reference, self.digest)
    }

    /// The image itself was pushed by `image create`; the release directory holds its record.
    fn files(&self, dir: &Path) -> Vec<DeliveredFile> {
        let path = dir.join(crate::package::index::image_record_name(&self.reference));
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            return Vec::new();
        }
        with_signature(DeliveredFile {
            path,
            role: Role::Record,
            media_type: IMAGE_RECORD_TYPE,
            sha256: None,
        })
        .collect()
    }
}

impl Index {
    /// Every delivery the index lists: its artifacts in order, then its images.
    pub fn deliveries(&self) -> Vec<&dyn Deliver> {
        self.artifacts
            .iter()
            .map(|a| a as &dyn Deliver)
            .chain(self.images.iter().map(|i| i as &dyn Deliver))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(url: &str, kind: DeliveryKind) -> Artifact {
        serde_json::from_value(serde_json::json!({
            "name": "rocrand", "version": "3.3.0", "release": "debian-6.4",
            "targets": ["gfx90c"], "key": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "url": url, "size": 1, "installed_size": 1,
            "sha256": "a".repeat(64), "kind": kind, "depends": [],
        }))
        .unwrap()
    }

    /// A tarball's delivery is the tarball, then its signature, its SBOM and provenance each
    /// followed by theirs; a wheel's is the wheel and its signature alone. Files that are not
    /// there are not named, except the payload.
    #[test]
    fn a_delivery_names_its_files_in_order_with_their_roles() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in [
            "rocrand-3.3.0.tar.zst.minisig",
            "rocrand-3.3.0.spdx.json",
            "rocrand-3.3.0.spdx.json.minisig",
            "rocrand-3.3.0.intoto.json",
            "torch-2.6.0-cp313-cp313-linux_x86_64.whl.minisig",
        ] {
            std::fs::write(d.join(f), "x").unwrap();
        }
        let tar = artifact("rocrand-3.3.0.tar.zst", DeliveryKind::Component);
        let files = tar.files(d);
        let seen: Vec<(String, Role, &str)> = files
            .iter()
            .map(|f| (f.name(), f.role, tar.kind().upload_kind(f.role)))
            .collect();
        assert_eq!(
            seen,
            [
                ("rocrand-3.3.0.tar.zst".into(), Role::Payload, "tarball"),
                (
                    "rocrand-3.3.0.tar.zst.minisig".into(),
                    Role::Signature,
                    "signature"
                ),
                ("rocrand-3.3.0.spdx.json".into(), Role::Sbom, "sbom"),
                (
                    "rocrand-3.3.0.spdx.json.minisig".into(),
                    Role::Signature,
                    "signature"
                ),
                (
                    "rocrand-3.3.0.intoto.json".into(),
                    Role::Provenance,
                    "provenance"
                ),
            ]
        );
        assert_eq!(files[0].media_type, COMPONENT_TAR_ZSTD);
        assert_eq!(
            files[0].sha256.as_ref().unwrap().to_string(),
            "a".repeat(64)
        );
        assert_eq!(files[2].media_type, crate::attest::SBOM_TYPE);

        let wheel = artifact(
            "torch-2.6.0-cp313-cp313-linux_x86_64.whl",
            DeliveryKind::Wheel,
        );
        let files = wheel.files(d);
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].media_type, WHEEL_ZIP);
        assert_eq!(wheel.kind().upload_kind(files[0].role), "wheel");
        assert!(wheel.label().ends_with("(wheel)"), "{}", wheel.label());
    }
}
