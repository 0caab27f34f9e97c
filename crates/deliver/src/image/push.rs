//! Pushing the image to a registry.

use std::io;

use crate::oci::Remote;

use super::{
    Base, BaseSource, Image, ImageError, LAYER_TAR_GZIP, Layer, OCI_CONFIG, Reference, api_repo,
};

/// Pushes the image to `target` (`REGISTRY/NAME:TAG`): base layers mounted (same registry) or
/// copied, the new layer, the config, the manifest. Returns the manifest digest.
pub fn push(
    client: reqwest::blocking::Client,
    target: &Reference,
    base: &Base,
    layer: &Layer,
    image: &Image,
    reporter: &dyn crate::progress::Reporter,
) -> Result<String, ImageError> {
    let dest = Remote::new(client, api_repo(&target.repo))
        .on_retry(|what| reporter.note(&format!("push {}: {what}", target.full())));
    for l in &base.layers {
        if dest.has_blob(&l.digest)? {
            continue;
        }
        if let BaseSource::Registry(from) = &base.source
            && dest.repo.registry == from.repo.registry
            && dest
                .mount_blob(&l.digest, &from.repo.repository)
                .unwrap_or(false)
        {
            continue;
        }
        let task = reporter.task(&format!("copying base layer {}", l.digest), None, false);
        let size = l.size;
        dest.push_blob_with(&l.digest, size, &|| {
            let r = base.blob(&l.digest).map_err(io::Error::other)?;
            Ok(reqwest::blocking::Body::sized(r, size))
        })?;
        task.finish(&format!("copied base layer {}", l.digest));
    }
    let task = reporter.task("pushing the layer", None, false);
    dest.push_file(
        LAYER_TAR_GZIP,
        &layer.path,
        layer.digest.trim_start_matches("sha256:"),
        layer.size,
    )?;
    task.finish(&format!("pushed the layer {}", layer.digest));
    dest.push_bytes(OCI_CONFIG, &image.config)?;
    let digest = dest.put_manifest(&target.reference, &image.manifest)?;
    Ok(digest)
}
