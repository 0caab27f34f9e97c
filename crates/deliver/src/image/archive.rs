//! Writing the image as an archive podman or docker loads, and loading it.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::Path;

use crate::oci::{Descriptor, DigestReader, IMAGE_INDEX, IMAGE_MANIFEST, OciError};
use crate::package::tarball;

use super::{Base, Image, ImageError, Layer, REF_NAME, io_err};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Loader {
    Podman,
    Docker,
}

impl Loader {
    pub fn tool(self) -> &'static str {
        match self {
            Loader::Podman => "podman",
            Loader::Docker => "docker",
        }
    }
}

/// Adds one blob (streamed, its digest checked) to an archive.
fn append_blob<W: Write>(
    b: &mut tar::Builder<W>,
    name: &str,
    size: u64,
    digest: &str,
    r: impl Read,
) -> Result<(), ImageError> {
    let mut h = tarball::header(tar::EntryType::Regular, 0o644, size, 0);
    let mut dr = DigestReader::new(r.take(size));
    b.append_data(&mut h, name, &mut dr)
        .map_err(io_err(Path::new(name)))?;
    let (got, n) = dr.finish().map_err(io_err(Path::new(name)))?;
    if got != digest || n != size {
        return Err(ImageError::Oci(OciError::Invalid {
            reference: digest.to_string(),
            message: format!("the blob read back as {got} ({n} bytes)"),
        }));
    }
    Ok(())
}

fn append_bytes<W: Write>(
    b: &mut tar::Builder<W>,
    name: &str,
    bytes: &[u8],
) -> Result<(), ImageError> {
    let mut h = tarball::header(tar::EntryType::Regular, 0o644, bytes.len() as u64, 0);
    b.append_data(&mut h, name, bytes)
        .map_err(io_err(Path::new(name)))
}

fn append_dir<W: Write>(b: &mut tar::Builder<W>, name: &str) -> Result<(), ImageError> {
    let mut h = tarball::header(tar::EntryType::Directory, 0o755, 0, 0);
    b.append_data(&mut h, name, io::empty())
        .map_err(io_err(Path::new(name)))
}

/// Writes the image as an archive `loader` loads: an OCI image layout in a tar (oci-archive) for
/// podman, a docker-archive (manifest.json, config, layers) for docker. Base layers are
/// downloaded into it. `name` is the image name the loader gives it.
pub fn write_archive(
    path: &Path,
    loader: Loader,
    name: &str,
    base: &Base,
    layer: &Layer,
    image: &Image,
) -> Result<(), ImageError> {
    let f = std::fs::File::create(path).map_err(io_err(path))?;
    let mut b = tar::Builder::new(io::BufWriter::with_capacity(1 << 20, f));
    let hex = |d: &str| d.trim_start_matches("sha256:").to_string();
    type Out = tar::Builder<io::BufWriter<std::fs::File>>;
    let blob = |b: &mut Out, entry: String, d: &Descriptor| -> Result<(), ImageError> {
        if d.digest == layer.digest {
            let f = std::fs::File::open(&layer.path).map_err(io_err(&layer.path))?;
            append_blob(b, &entry, d.size, &d.digest, io::BufReader::new(f))
        } else {
            append_blob(b, &entry, d.size, &d.digest, base.blob(&d.digest)?)
        }
    };
    match loader {
        Loader::Podman => {
            append_bytes(&mut b, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
            let manifest = image.manifest_bytes();
            let index = serde_json::json!({
                "schemaVersion": 2,
                "mediaType": IMAGE_INDEX,
                "manifests": [{
                    "mediaType": IMAGE_MANIFEST,
                    "digest": image.digest(),
                    "size": manifest.len(),
                    "annotations": {REF_NAME: name},
                }],
            });
            append_bytes(
                &mut b,
                "index.json",
                &serde_json::to_vec(&index).expect("plain data"),
            )?;
            append_dir(&mut b, "blobs/")?;
            append_dir(&mut b, "blobs/sha256/")?;
            let mut blobs: BTreeMap<String, Option<&Descriptor>> = BTreeMap::new();
            blobs.insert(image.digest(), None);
            blobs.insert(image.manifest.config.digest.clone(), None);
            for l in &image.manifest.layers {
                blobs.insert(l.digest.clone(), Some(l));
            }
            for (d, desc) in blobs {
                let entry = format!("blobs/sha256/{}", hex(&d));
                match desc {
                    Some(desc) => blob(&mut b, entry, desc)?,
                    None if d == image.digest() => append_bytes(&mut b, &entry, &manifest)?,
                    None => append_bytes(&mut b, &entry, &image.config)?,
                }
            }
        }
        Loader::Docker => {
            let config_name = format!("{}.json", hex(&image.manifest.config.digest));
            let mut layer_names = Vec::new();
            for l in &image.manifest.layers {
                layer_names.push(format!("{}.tar.gz", hex(&l.digest)));
            }
            let manifest = serde_json::json!([{
                "Config": config_name,
                "RepoTags": [name],
                "Layers": layer_names,
            }]);
            append_bytes(
                &mut b,
                "manifest.json",
                &serde_json::to_vec(&manifest).expect("plain data"),
            )?;
            append_bytes(&mut b, &config_name, &image.config)?;
            let mut seen = std::collections::BTreeSet::new();
            for (l, n) in image.manifest.layers.iter().zip(&layer_names) {
                if seen.insert(n.clone()) {
                    blob(&mut b, n.clone(), l)?;
                }
            }
        }
    }
    let w = b.into_inner().map_err(io_err(path))?;
    w.into_inner()
        .map_err(|e| io_err(path)(e.into_error()))?
        .sync_all()
        .map_err(io_err(path))?;
    Ok(())
}

/// `podman load -i FILE` / `docker load -i FILE`; returns what it printed.
pub fn load(loader: Loader, archive: &Path) -> Result<String, ImageError> {
    use crate::process::{Cmd, ProcessError};
    let tool = loader.tool();
    let message = match Cmd::new(tool).arg("load").arg("-i").arg(archive).run() {
        Ok(stdout) => return Ok(stdout.trim().to_string()),
        Err(ProcessError::Spawn { source, .. }) => source.to_string(),
        Err(ProcessError::Failed { stdout, stderr, .. }) => {
            format!("{}\n{}", stderr.trim(), stdout.trim())
        }
    };
    Err(ImageError::Load {
        tool: tool.into(),
        message,
    })
}
