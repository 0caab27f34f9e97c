//! Publishing to an OCI registry: each tarball an ORAS-style artifact tagged
//! `<name>-<version>-<targets>-<key8>` (an image manifest whose config blob has rocforge's
//! artifact config type, the tarball as its layer, the signature as a second layer, and
//! annotations), and the signed index as one more artifact tagged by the release.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Outcome, PublishError};
use crate::oci::{
    Descriptor, IMAGE_MANIFEST, ImageManifest, Remote, SIGNATURE_TYPE, TITLE, sanitize_tag,
};
use crate::package::index::{Artifact, INDEX_NAME, Index};

pub const ARTIFACT_CONFIG: &str = "application/vnd.rocforge.artifact.config.v1+json";
pub const INDEX_CONFIG: &str = "application/vnd.rocforge.release.config.v1+json";
pub use crate::delivery::{COMPONENT_TAR_GZIP, COMPONENT_TAR_ZSTD, WHEEL_ZIP};
pub const INDEX_TYPE: &str = "application/vnd.rocforge.index.v1+json";
/// A signing-key list written by `rocforge key rotate` (schema rocforge.keys/1).
pub const KEY_LIST_TYPE: &str = "application/vnd.rocforge.keys.v1+json";

/// The tag of a tarball's artifact: its file name without the extension.
pub fn artifact_tag(file_name: &str) -> String {
    let stem = file_name
        .strip_suffix(".tar.zst")
        .or_else(|| file_name.strip_suffix(".tar.gz"))
        .unwrap_or(file_name);
    sanitize_tag(stem)
}

/// A file pushed as one layer of an artifact.
#[derive(Debug, Clone)]
pub struct Layer {
    pub media_type: &'static str,
    pub path: PathBuf,
    /// Known beforehand (a tarball's, from the index), else computed when pushed.
    pub sha256: Option<String>,
    /// What it is, as `publish` names it (`tarball`, `signature`, `index`, …).
    pub kind: &'static str,
}

impl Layer {
    /// The layer as a file of the release.
    pub fn file(&self) -> super::ReleaseFile {
        super::ReleaseFile {
            path: self.path.clone(),
            kind: self.kind,
            sha256: self.sha256.clone(),
        }
    }
}

/// One OCI artifact: a tarball and its signature under the tarball's tag.
#[derive(Debug, Clone)]
pub struct TarballArtifact {
    pub artifact: Artifact,
    pub tag: String,
    pub layers: Vec<Layer>,
}

/// What pushing a release directory does: an artifact per tarball its index lists, then the
/// index (with its signature and the key lists) under the release's tag.
#[derive(Debug, Clone)]
pub struct OciPlan {
    pub index: Index,
    pub tarballs: Vec<TarballArtifact>,
    pub release: String,
    pub release_tag: String,
    pub index_layers: Vec<Layer>,
}

/// The push of `dir`, read from its index.json; nothing is sent.
pub fn plan(dir: &Path) -> Result<OciPlan, PublishError> {
    let index_path = dir.join(INDEX_NAME);
    let text = std::fs::read(&index_path).map_err(|source| PublishError::Io {
        path: index_path.clone(),
        source,
    })?;
    let index: Index = serde_json::from_slice(&text).map_err(|e| PublishError::Invalid {
        path: index_path.display().to_string(),
        message: e.to_string(),
    })?;
    let mut tarballs = Vec::new();
    for a in &index.artifacts {
        if a.url.contains('/') {
            return Err(PublishError::Invalid {
                path: index_path.display().to_string(),
                message: format!("{} is not a file of the release directory", a.url),
            });
        }
        // The delivery's files, each a layer: the tarball (or wheel), then its signature,
        // its SBOM and provenance each before theirs.
        let layers = crate::delivery::Deliver::files(a, dir)
            .into_iter()
            .map(|f| Layer {
                kind: a.kind.upload_kind(f.role),
                media_type: f.media_type,
                sha256: f.sha256.map(|s| s.to_string()),
                path: f.path,
            })
            .collect();
        tarballs.push(TarballArtifact {
            artifact: a.clone(),
            tag: artifact_tag(&a.url),
            layers,
        });
    }
    let release = index
        .artifacts
        .first()
        .map(|a| a.release.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "index".into());
    let mut index_layers = vec![Layer {
        media_type: INDEX_TYPE,
        path: index_path.clone(),
        sha256: None,
        kind: "index",
    }];
    index_layers.extend(signature_layer(&index_path));
    index_layers.extend(key_list_layers(dir)?);
    Ok(OciPlan {
        release_tag: sanitize_tag(&release),
        release,
        index,
        tarballs,
        index_layers,
    })
}

fn signature_layer(path: &Path) -> Option<Layer> {
    let sig = crate::sign::signature_path(path);
    sig.is_file().then_some(Layer {
        media_type: SIGNATURE_TYPE,
        path: sig,
        sha256: None,
        kind: "signature",
    })
}

/// The key lists (keys.json, keys-N.json and their signatures): they travel with the index,
/// so a puller that trusts an older key can follow a rotation (docs/security.md).
fn key_list_layers(dir: &Path) -> Result<Vec<Layer>, PublishError> {
    Ok(crate::package::index::release_files(dir)?
        .into_iter()
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                crate::trust::is_key_list_name(n.strip_suffix(".minisig").unwrap_or(n))
            })
        })
        .map(|path| {
            let sig = path.extension().is_some_and(|e| e == "minisig");
            Layer {
                media_type: if sig { SIGNATURE_TYPE } else { KEY_LIST_TYPE },
                kind: if sig { "signature" } else { "key-list" },
                path,
                sha256: None,
            }
        })
        .collect())
}

fn push_layer(remote: &Remote, layer: &Layer) -> Result<Descriptor, PublishError> {
    let path = &layer.path;
    let io = |source| PublishError::Io {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    let sha = match &layer.sha256 {
        Some(s) => s.clone(),
        None => super::sha256_file(path)?.0,
    };
    let mut d = remote.push_file(layer.media_type, path, &sha, size)?;
    crate::fault::point("publish");
    if let Some(n) = path.file_name() {
        d.annotations
            .insert(TITLE.into(), n.to_string_lossy().into_owned());
    }
    Ok(d)
}

/// Pushes what `plan` lists: every tarball's artifact, then the index's. Blobs the registry has
/// are not uploaded again, so a re-run only re-tags.
pub fn publish(
    remote: &Remote,
    plan: &OciPlan,
    reporter: &dyn crate::progress::Reporter,
) -> Result<Vec<Outcome>, PublishError> {
    let mut out = Vec::new();
    for t in &plan.tarballs {
        let a = &t.artifact;
        let task = reporter.task(&format!("pushing {}", a.url), None, false);
        push_tarball(remote, t, &plan.index.issued)?;
        crate::fault::point("publish");
        task.finish(&format!("{} → {}", a.url, remote.repo.reference(&t.tag)));
        out.push(Outcome {
            file: a.url.clone(),
            action: format!("pushed {}", remote.repo.reference(&t.tag)),
        });
    }
    push_index(remote, plan)?;
    out.push(Outcome {
        file: INDEX_NAME.into(),
        action: format!("pushed {}", remote.repo.reference(&plan.release_tag)),
    });
    Ok(out)
}

fn push_tarball(remote: &Remote, t: &TarballArtifact, issued: &str) -> Result<(), PublishError> {
    let a = &t.artifact;
    let layers = t
        .layers
        .iter()
        .map(|l| push_layer(remote, l))
        .collect::<Result<Vec<_>, _>>()?;
    let config = serde_json::json!({
        "schema": "rocforge.artifact/1",
        "name": a.name,
        "version": a.version,
        "release": a.release,
        "targets": a.targets,
        "key": a.key,
        "depends": a.depends,
        "glibc_floor": a.glibc_floor,
        "installed_size": a.installed_size,
    });
    let config = remote.push_bytes(
        ARTIFACT_CONFIG,
        &serde_json::to_vec_pretty(&config).expect("plain data"),
    )?;
    let annotations: BTreeMap<String, String> = [
        (TITLE, a.url.clone()),
        ("org.opencontainers.image.version", a.version.clone()),
        ("org.opencontainers.image.created", issued.to_string()),
        ("rocforge.key", a.key.to_string()),
        ("rocforge.targets", a.target_list()),
        ("rocforge.component", a.name.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    remote.put_manifest(
        &t.tag,
        &ImageManifest {
            schema_version: 2,
            media_type: IMAGE_MANIFEST.into(),
            artifact_type: Some(ARTIFACT_CONFIG.into()),
            config,
            layers,
            annotations,
        },
    )?;
    Ok(())
}

/// The index, tagged by the release.
fn push_index(remote: &Remote, plan: &OciPlan) -> Result<(), PublishError> {
    let index = &plan.index;
    let layers = plan
        .index_layers
        .iter()
        .map(|l| push_layer(remote, l))
        .collect::<Result<Vec<_>, _>>()?;
    let config = serde_json::json!({
        "schema": "rocforge.release/1",
        "release": plan.release,
        "issued": index.issued,
        "expires": index.expires,
        "artifacts": index.artifacts.iter().map(|a| artifact_tag(&a.url)).collect::<Vec<_>>(),
    });
    let config = remote.push_bytes(
        INDEX_CONFIG,
        &serde_json::to_vec_pretty(&config).expect("plain data"),
    )?;
    remote.put_manifest(
        &plan.release_tag,
        &ImageManifest {
            schema_version: 2,
            media_type: IMAGE_MANIFEST.into(),
            artifact_type: Some(INDEX_CONFIG.into()),
            config,
            layers,
            annotations: [
                (TITLE.to_string(), INDEX_NAME.to_string()),
                (
                    "org.opencontainers.image.created".to_string(),
                    index.issued.clone(),
                ),
                (
                    "org.opencontainers.image.version".to_string(),
                    plan.release.clone(),
                ),
            ]
            .into(),
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel the index lists goes out as an artifact of its own, typed as a wheel, with its
    /// signature; the tarball before it keeps the component's type.
    #[test]
    fn a_listed_wheel_is_pushed_as_a_wheel() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let tarball = "torch-2.6.0-gfx90c-0c2fac4d.tar.zst";
        let wheel = "torch-2.6.0+rocm6.4.3.gfx90c-cp313-cp313-linux_x86_64.whl";
        for f in [tarball, wheel, &format!("{wheel}.minisig")] {
            std::fs::write(d.join(f), f).unwrap();
        }
        let entry = |url: &str, kind: Option<&str>| {
            let mut e = serde_json::json!({
                "name": "torch", "version": "2.6.0", "release": "debian-6.4",
                "targets": ["gfx90c"], "key": "0c2fac4d6ef9e4cbeb13457f98aad0a306093e93e9525b1a1541ac92f0cc7b88",
                "url": url, "size": 1, "sha256": "0".repeat(64), "installed_size": 1,
                "depends": [], "glibc_floor": null, "signature": null,
            });
            if let Some(k) = kind {
                e["kind"] = k.into();
            }
            e
        };
        let index = serde_json::json!({
            "schema": crate::package::index::INDEX_SCHEMA,
            "issued": "2026-12-06T00:00:00Z", "expires": "2027-01-06T00:00:00Z",
            "artifacts": [entry(tarball, None), entry(wheel, Some("wheel"))],
        });
        std::fs::write(d.join(INDEX_NAME), index.to_string()).unwrap();
        let p = plan(d).unwrap();
        let types: Vec<Vec<&str>> = p
            .tarballs
            .iter()
            .map(|t| t.layers.iter().map(|l| l.media_type).collect())
            .collect();
        assert_eq!(
            types,
            [vec![COMPONENT_TAR_ZSTD], vec![WHEEL_ZIP, SIGNATURE_TYPE]]
        );
    }
}
