//! Publishing to an OCI registry: each tarball an ORAS-style artifact tagged
//! `<name>-<version>-<targets>-<key8>` (an image manifest whose config blob has rocforge's
//! artifact config type, the tarball as its layer, the signature as a second layer, and
//! annotations), and the signed index as one more artifact tagged by the release.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Outcome, PublishError};
use crate::oci::{
    Descriptor, IMAGE_MANIFEST, ImageManifest, Remote, SIGNATURE_TYPE, TITLE, sanitize_tag,
};
use crate::package::index::{INDEX_NAME, Index};

pub const ARTIFACT_CONFIG: &str = "application/vnd.rocforge.artifact.config.v1+json";
pub const INDEX_CONFIG: &str = "application/vnd.rocforge.release.config.v1+json";
pub const COMPONENT_TAR_ZSTD: &str = "application/vnd.rocforge.component.v1.tar+zstd";
pub const COMPONENT_TAR_GZIP: &str = "application/vnd.rocforge.component.v1.tar+gzip";
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

fn file_descriptor(
    remote: &Remote,
    media_type: &str,
    path: &Path,
    sha256: Option<&str>,
) -> Result<Descriptor, PublishError> {
    let io = |source| PublishError::Io {
        path: path.to_path_buf(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    let sha = match sha256 {
        Some(s) => s.to_string(),
        None => super::sha256_file(path)?.0,
    };
    let mut d = remote.push_file(media_type, path, &sha, size)?;
    crate::fault::point("publish");
    if let Some(n) = path.file_name() {
        d.annotations
            .insert(TITLE.into(), n.to_string_lossy().into_owned());
    }
    Ok(d)
}

/// Pushes every tarball the directory's index lists, then the index. Blobs the registry has are
/// not uploaded again, so a re-run only re-tags.
pub fn publish(
    remote: &Remote,
    dir: &Path,
    reporter: &dyn crate::progress::Reporter,
) -> Result<Vec<Outcome>, PublishError> {
    let index_path = dir.join(INDEX_NAME);
    let text = std::fs::read(&index_path).map_err(|source| PublishError::Io {
        path: index_path.clone(),
        source,
    })?;
    let index: Index = serde_json::from_slice(&text).map_err(|e| PublishError::Invalid {
        path: index_path.display().to_string(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    for a in &index.artifacts {
        if a.url.contains('/') {
            return Err(PublishError::Invalid {
                path: index_path.display().to_string(),
                message: format!("{} is not a file of the release directory", a.url),
            });
        }
        let path = dir.join(&a.url);
        let media = if a.url.ends_with(".tar.gz") {
            COMPONENT_TAR_GZIP
        } else {
            COMPONENT_TAR_ZSTD
        };
        let task = reporter.task(&format!("pushing {}", a.url), None, false);
        let mut layers = vec![file_descriptor(remote, media, &path, Some(&a.sha256))?];
        let sig = crate::sign::signature_path(&path);
        if sig.is_file() {
            layers.push(file_descriptor(remote, SIGNATURE_TYPE, &sig, None)?);
        }
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
            ("org.opencontainers.image.created", index.issued.clone()),
            ("rocforge.key", a.key.to_string()),
            ("rocforge.targets", a.target_list()),
            ("rocforge.component", a.name.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let tag = artifact_tag(&a.url);
        remote.put_manifest(
            &tag,
            &ImageManifest {
                schema_version: 2,
                media_type: IMAGE_MANIFEST.into(),
                artifact_type: Some(ARTIFACT_CONFIG.into()),
                config,
                layers,
                annotations,
            },
        )?;
        crate::fault::point("publish");
        task.finish(&format!("{} → {}", a.url, remote.repo.reference(&tag)));
        out.push(Outcome {
            file: a.url.clone(),
            action: format!("pushed {}", remote.repo.reference(&tag)),
        });
    }
    // The index, tagged by the release.
    let release = index
        .artifacts
        .first()
        .map(|a| a.release.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "index".into());
    let tag = sanitize_tag(&release);
    let mut layers = vec![file_descriptor(remote, INDEX_TYPE, &index_path, None)?];
    let sig = crate::sign::signature_path(&index_path);
    if sig.is_file() {
        layers.push(file_descriptor(remote, SIGNATURE_TYPE, &sig, None)?);
    }
    // The key lists (keys.json, keys-N.json and their signatures) travel with the index, so a
    // puller that trusts an older key can follow a rotation (docs/security.md).
    let key_files: Vec<std::path::PathBuf> = crate::package::index::release_files(dir)?
        .into_iter()
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                crate::trust::is_key_list_name(n.strip_suffix(".minisig").unwrap_or(n))
            })
        })
        .collect();
    for k in &key_files {
        let is_sig = k.extension().is_some_and(|e| e == "minisig");
        let media = if is_sig {
            SIGNATURE_TYPE
        } else {
            KEY_LIST_TYPE
        };
        layers.push(file_descriptor(remote, media, k, None)?);
    }
    let config = serde_json::json!({
        "schema": "rocforge.release/1",
        "release": release,
        "issued": index.issued,
        "expires": index.expires,
        "artifacts": index.artifacts.iter().map(|a| artifact_tag(&a.url)).collect::<Vec<_>>(),
    });
    let config = remote.push_bytes(
        INDEX_CONFIG,
        &serde_json::to_vec_pretty(&config).expect("plain data"),
    )?;
    remote.put_manifest(
        &tag,
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
                ("org.opencontainers.image.version".to_string(), release),
            ]
            .into(),
        },
    )?;
    out.push(Outcome {
        file: INDEX_NAME.into(),
        action: format!("pushed {}", remote.repo.reference(&tag)),
    });
    Ok(out)
}
