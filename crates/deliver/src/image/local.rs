//! The base image read from podman's or docker's local storage.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::oci::{Descriptor, IMAGE_MANIFEST, ImageManifest};
use crate::package::tarball::HashingWriter;

use super::base::check_config;
use super::{
    Base, BaseSource, DOCKER_LAYER_GZIP, ImageError, LAYER_TAR, LAYER_TAR_GZIP, Loader, OCI_CONFIG,
    io_err,
};

/// What [`save`] recorded of each file it unpacked: its `sha256:` digest and size, computed
/// as the file was read from the tool's output.
const DIGESTS: &str = "digests.json";

/// `podman save --format oci-archive NAME` / `docker save NAME`, read from the tool's output
/// and unpacked into `dir` (made fresh; renamed into place only when complete), each file
/// hashed on the way.
fn save(tool: Loader, name: &str, shown: &str, dir: &Path) -> Result<(), ImageError> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    let tmp = tempfile::Builder::new()
        .prefix(".save-")
        .tempdir_in(parent)
        .map_err(io_err(parent))?;
    let mut cmd = std::process::Command::new(tool.tool());
    cmd.arg("save");
    if tool == Loader::Podman {
        cmd.args(["--format", "oci-archive"]);
    }
    let mut child = cmd
        .arg(name)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| ImageError::LocalMissing {
            reference: shown.to_string(),
            tool: tool.tool().into(),
            message: e.to_string(),
        })?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut digests: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let unpacked = (|| -> io::Result<()> {
        let mut ar = tar::Archive::new(io::BufReader::with_capacity(1 << 20, stdout));
        for e in ar.entries()? {
            let mut e = e?;
            if e.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let rel = e.path()?.to_path_buf();
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(io::Error::other(format!(
                    "the archive names {}",
                    rel.display()
                )));
            }
            let out = tmp.path().join(&rel);
            if let Some(d) = out.parent() {
                std::fs::create_dir_all(d)?;
            }
            let mut w = HashingWriter {
                inner: io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&out)?),
                hasher: Sha256::new(),
                bytes: 0,
            };
            io::copy(&mut e, &mut w)?;
            w.inner.flush()?;
            digests.insert(
                rel.to_string_lossy().into_owned(),
                (
                    format!("sha256:{}", hex::encode(w.hasher.finalize())),
                    w.bytes,
                ),
            );
        }
        Ok(())
    })();
    let status = child.wait().map_err(io_err(Path::new(tool.tool())))?;
    let stderr = errs.join().unwrap_or_default();
    if !status.success() {
        return Err(ImageError::LocalMissing {
            reference: shown.to_string(),
            tool: tool.tool().into(),
            message: stderr.trim().lines().last().unwrap_or_default().to_string(),
        });
    }
    unpacked.map_err(|e| ImageError::Base {
        reference: shown.to_string(),
        message: format!("`{} save` gave an unreadable archive: {e}", tool.tool()),
    })?;
    let list = tmp.path().join(DIGESTS);
    std::fs::write(&list, serde_json::to_vec(&digests).expect("plain data"))
        .map_err(io_err(&list))?;
    let tmp = tmp.keep();
    if let Err(e) = std::fs::rename(&tmp, dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        // Another create saved the same image meanwhile: its copy is as good.
        if !dir.join(DIGESTS).exists() {
            return Err(io_err(dir)(e));
        }
    }
    Ok(())
}

/// An image in podman's storage (`podman save --format oci-archive`) or docker's (`docker
/// save`): the same [`Base`] as a registry's, every blob checked against its digest. The saved
/// image is kept in `work_dir` by its image ID, so the next create from it reads no archive.
/// A docker archive has no manifest: one is written (OCI, its layers the archive's tars), so
/// the same image gives the same digest.
pub fn local_base(
    tool: Loader,
    name: &str,
    shown: &str,
    work_dir: &Path,
) -> Result<Base, ImageError> {
    let id = image_id(tool, name, shown)?;
    let unpacked = work_dir.join("bases").join(format!("{}-{id}", tool.tool()));
    if !unpacked.join(DIGESTS).exists() {
        save(tool, name, shown, &unpacked)?;
    }
    let digests: BTreeMap<String, (String, u64)> = {
        let p = unpacked.join(DIGESTS);
        let b = std::fs::read(&p).map_err(io_err(&p))?;
        serde_json::from_slice(&b).map_err(|e| ImageError::Base {
            reference: shown.to_string(),
            message: format!("{}: {e}", p.display()),
        })?
    };
    let saved = Saved {
        dir: unpacked,
        digests,
        shown,
    };
    let mut blobs = BTreeMap::new();
    let (digest, config, layers) = match tool {
        Loader::Podman => saved.oci_image(&mut blobs)?,
        Loader::Docker => saved.docker_image(&mut blobs)?,
    };
    check_config(&config, layers.len()).map_err(|m| saved.bad(m))?;
    Ok(Base {
        name: name.to_string(),
        source: BaseSource::Local { blobs },
        digest,
        config,
        layers,
    })
}

/// The ID `tool` gives the image `name` (hex, without `sha256:`).
fn image_id(tool: Loader, name: &str, shown: &str) -> Result<String, ImageError> {
    use crate::process::{Cmd, ProcessError};
    let missing = |message: String| ImageError::LocalMissing {
        reference: shown.to_string(),
        tool: tool.tool().into(),
        message,
    };
    let id = match Cmd::new(tool.tool())
        .args(["image", "inspect", "--format", "{{.Id}}", name])
        .run()
    {
        Ok(out) => out.trim().trim_start_matches("sha256:").to_string(),
        Err(ProcessError::Spawn { source, .. }) => return Err(missing(source.to_string())),
        Err(ProcessError::Failed { stderr, .. }) => {
            return Err(missing(
                stderr.trim().lines().last().unwrap_or_default().to_string(),
            ));
        }
    };
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(missing(format!(
            "`{} image inspect` gave the ID {id:?}",
            tool.tool()
        )));
    }
    Ok(id)
}

/// A saved image unpacked in `dir`, with what [`save`] recorded of each file.
struct Saved<'a> {
    dir: PathBuf,
    digests: BTreeMap<String, (String, u64)>,
    /// The base as the user named it, for errors.
    shown: &'a str,
}

/// (manifest digest, config, layers) of a saved image.
type Parts = (String, serde_json::Value, Vec<Descriptor>);

impl Saved<'_> {
    fn bad(&self, message: String) -> ImageError {
        ImageError::Base {
            reference: self.shown.to_string(),
            message,
        }
    }

    /// The kept file `rel`, its digest and size. A kept file whose size changed since it was
    /// hashed is no longer what was checked.
    fn checked(&self, rel: &str) -> Result<(PathBuf, String, u64), ImageError> {
        let (d, size) = self.digests.get(rel).ok_or_else(|| ImageError::Base {
            reference: self.shown.to_string(),
            message: format!("its saved archive has no {rel}"),
        })?;
        let p = self.dir.join(rel);
        let now = std::fs::metadata(&p).map_err(io_err(&p))?.len();
        if now != *size {
            return Err(ImageError::Base {
                reference: self.shown.to_string(),
                message: format!(
                    "{} changed since it was saved ({now} bytes, not {size}): remove {}",
                    p.display(),
                    self.dir.display()
                ),
            });
        }
        Ok((p, d.clone(), *size))
    }

    fn read_json(&self, rel: &str) -> Result<(Vec<u8>, serde_json::Value), ImageError> {
        let (p, _, _) = self.checked(rel)?;
        let b = std::fs::read(&p).map_err(io_err(&p))?;
        let v = serde_json::from_slice(&b)
            .map_err(|e| self.bad(format!("{rel} in the saved archive is not JSON: {e}")))?;
        Ok((b, v))
    }

    /// The file of blob `d` in an OCI layout, which must read back as `d`.
    fn blob(&self, d: &str) -> Result<PathBuf, ImageError> {
        let hexd = d
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let hexd = hexd.ok_or_else(|| self.bad(format!("unsupported digest {d:?}")))?;
        let (p, got, _) = self.checked(&format!("blobs/sha256/{hexd}"))?;
        if got != d {
            return Err(self.bad(format!("its blob {d} reads back as {got}")));
        }
        Ok(p)
    }

    /// podman's oci-archive: an OCI layout whose index lists the one image.
    fn oci_image(&self, blobs: &mut BTreeMap<String, PathBuf>) -> Result<Parts, ImageError> {
        let bad = |m| self.bad(m);
        let (_, index) = self.read_json("index.json")?;
        let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
        let [m] = manifests.as_slice() else {
            return Err(bad(format!(
                "its saved index lists {} manifests, not one",
                manifests.len()
            )));
        };
        let digest = m["digest"].as_str().unwrap_or_default().to_string();
        let mp = self.blob(&digest)?;
        let mbytes = std::fs::read(&mp).map_err(io_err(&mp))?;
        let mut v: serde_json::Value = serde_json::from_slice(&mbytes)
            .map_err(|e| bad(format!("its manifest is not JSON: {e}")))?;
        if v["mediaType"].is_null() {
            v["mediaType"] = IMAGE_MANIFEST.into();
        }
        let m: ImageManifest = serde_json::from_value(v)
            .map_err(|e| bad(format!("its manifest is not an image manifest: {e}")))?;
        let cp = self.blob(&m.config.digest)?;
        let cbytes = std::fs::read(&cp).map_err(io_err(&cp))?;
        let config: serde_json::Value = serde_json::from_slice(&cbytes)
            .map_err(|e| bad(format!("its config is not JSON: {e}")))?;
        let mut layers = Vec::new();
        for l in m.layers {
            let p = self.blob(&l.digest)?;
            let media_type = match l.media_type.as_str() {
                DOCKER_LAYER_GZIP => LAYER_TAR_GZIP.to_string(),
                t if t.starts_with("application/vnd.oci.image.layer.v1.tar") => t.to_string(),
                t => return Err(bad(format!("unsupported layer type {t} ({})", l.digest))),
            };
            blobs.insert(l.digest.clone(), p);
            layers.push(Descriptor { media_type, ..l });
        }
        Ok((digest, config, layers))
    }

    /// docker's archive: manifest.json, the config and uncompressed layers, and no image
    /// manifest, so one is made here.
    fn docker_image(&self, blobs: &mut BTreeMap<String, PathBuf>) -> Result<Parts, ImageError> {
        let bad = |m| self.bad(m);
        let (_, manifest) = self.read_json("manifest.json")?;
        let entries = manifest.as_array().cloned().unwrap_or_default();
        let [m] = entries.as_slice() else {
            return Err(bad(format!(
                "its saved manifest.json lists {} images, not one",
                entries.len()
            )));
        };
        let config_rel = m["Config"].as_str().unwrap_or_default().to_string();
        let (cbytes, config) = self.read_json(&config_rel)?;
        let config_digest = crate::oci::digest_of(&cbytes);
        let diff_ids: Vec<String> = config["rootfs"]["diff_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str().map(str::to_string))
            .collect();
        let rels: Vec<String> = m["Layers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str().map(str::to_string))
            .collect();
        if rels.len() != diff_ids.len() {
            return Err(bad(format!(
                "its config lists {} layer(s), its archive {}",
                diff_ids.len(),
                rels.len()
            )));
        }
        let mut layers = Vec::new();
        for (rel, want) in rels.iter().zip(&diff_ids) {
            let (p, got, size) = self.checked(rel)?;
            // docker save writes each layer uncompressed: its digest is its diff_id.
            if &got != want {
                return Err(bad(format!(
                    "its layer {rel} reads back as {got}, not {want}"
                )));
            }
            blobs.insert(got.clone(), p);
            layers.push(Descriptor {
                media_type: LAYER_TAR.into(),
                digest: got,
                size,
                annotations: BTreeMap::new(),
            });
        }
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: IMAGE_MANIFEST.into(),
            artifact_type: None,
            config: Descriptor {
                media_type: OCI_CONFIG.into(),
                digest: config_digest,
                size: cbytes.len() as u64,
                annotations: BTreeMap::new(),
            },
            layers: layers.clone(),
            annotations: BTreeMap::new(),
        };
        let digest = crate::oci::digest_of(&serde_json::to_vec(&manifest).expect("plain data"));
        Ok((digest, config, layers))
    }
}
