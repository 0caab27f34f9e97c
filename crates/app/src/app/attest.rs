//! The SBOM and provenance of an image `image create` pushed, signed with the release key and
//! attached to it as OCI referrers. One call after the push; the documents come from the
//! store entries the image's layer holds.

use super::{Error, Result, Session};
use crate::attest::{self, ComponentRecord, referrers::Attached};

/// The release signing key as `package` finds it without `--key`: `$ROCFORGE_SIGNING_KEY`,
/// else the default key file when there is one.
fn signing_key() -> Result<Option<crate::sign::SecretKey>> {
    let path = std::env::var_os("ROCFORGE_SIGNING_KEY")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let p = crate::sign::default_key_dir().join(crate::sign::SECRET_KEY_FILE);
            p.is_file().then_some(p)
        });
    let Some(path) = path else {
        return Ok(None);
    };
    let password = std::env::var(crate::sign::PASSWORD_ENV)
        .ok()
        .filter(|p| !p.is_empty());
    crate::sign::load_secret(&path, password)
        .map(Some)
        .map_err(Error::from)
}

/// Attaches the signed SBOM and provenance to the image `target` whose manifest has `digest`,
/// made of the store entries `keys` on `base`. Without a signing key nothing is attached
/// (said through the reporter): unsigned documents would prove nothing.
pub fn attach_image(
    session: &Session,
    target: &crate::image::Reference,
    digest: &str,
    base: &crate::image::Base,
    keys: &[String],
) -> Result<Vec<Attached>> {
    let Some(key) = signing_key()? else {
        session.reporter.note(
            "WARNING: no signing key (ROCFORGE_SIGNING_KEY or `rocforge key generate`): the \
             image's SBOM and provenance are not attached",
        );
        return Ok(Vec::new());
    };
    let hinted = <Error as From<attest::AttestError>>::from;
    let components = keys
        .iter()
        .map(|k| {
            let entry = session.store.entry_dir(k);
            let mut c = ComponentRecord::from_store_entry(&entry, None).map_err(hinted)?;
            c.license = session.catalog.get(&c.name).map(|r| r.license.clone());
            Ok(c)
        })
        .collect::<Result<Vec<_>>>()?;
    let client = crate::net::try_client(&crate::net::HttpOptions::default()).map_err(|e| {
        Error::hinted(
            format!("cannot make an HTTP client: {e}"),
            "check TLS setup",
        )
    })?;
    let remote = crate::oci::Remote::new(client, crate::image::api_repo(&target.repo));
    let (_, manifest) = remote.get_manifest(digest)?.ok_or_else(|| {
        Error::hinted(
            format!("{} has no manifest {digest} after the push", target.full()),
            "push the image again",
        )
    })?;
    let media_type = serde_json::from_slice::<serde_json::Value>(&manifest)
        .ok()
        .and_then(|v| v["mediaType"].as_str().map(str::to_string))
        .unwrap_or_else(|| crate::oci::IMAGE_MANIFEST.to_string());
    let docs = attest::image_documents(
        &target.full(),
        digest,
        Some((base.name.clone(), base.digest.clone())),
        &components,
        &session.catalog.release.prefix,
        Some(&key),
    )
    .map_err(hinted)?;
    let task = session
        .reporter
        .task("attaching the SBOM and provenance", None, false);
    let attached = attest::referrers::attach_to_image(
        &remote,
        digest,
        &media_type,
        manifest.len() as u64,
        &docs,
    )
    .map_err(hinted)?;
    task.finish(&format!(
        "attached the SBOM and provenance to {}@{digest}",
        target.repo.reference("").trim_end_matches(':')
    ));
    Ok(attached)
}
