//! `verify FILE` and `verify oci://…`: a file's minisign signature checked against the trusted
//! keys (through a key list when one is beside it or named), then the SBOM and provenance that
//! travel with a tarball or are attached to an image.

use std::path::{Path, PathBuf};

use super::Result;
use crate::attest::check::{self, Checked};
use crate::diag::Diagnostic;
use crate::sign::{self, PublicKey};
use crate::trust;

/// What `verify FILE` is asked.
pub struct FileRequest<'a> {
    pub file: &'a Path,
    /// The keys trusted before any key list is applied.
    pub keys: &'a [PublicKey],
    /// The signature file [default: FILE.minisig].
    pub sig: Option<&'a Path>,
    /// A key list to apply [default: keys.json beside FILE, if there is one].
    pub key_list: Option<&'a Path>,
    /// Where the key lists and revocations seen are kept [default: the user's state directory].
    pub state_dir: Option<&'a Path>,
}

/// The trust state kept in `dir`, else in the user's state directory.
fn state(dir: Option<&Path>) -> Result<trust::StateFile> {
    Ok(match dir {
        Some(d) => trust::StateFile::load(&d.join(trust::STATE_FILE))?,
        None => trust::StateFile::load_default()?,
    })
}

/// Verifies a file's signature with `trust` (from [`trust`]).
pub fn verify_file(req: &FileRequest<'_>, trust: &trust::Resolved) -> Result<sign::Verified> {
    let sig = req
        .sig
        .map(Path::to_path_buf)
        .unwrap_or_else(|| sign::signature_path(req.file));
    Ok(trust.verify_file(req.file, &sig)?)
}

/// A tarball's SBOM and provenance.
pub struct Documents {
    /// Each checked.
    pub checked: Vec<Checked>,
    /// A tarball with neither document beside it (packaged before rocforge wrote them).
    pub undocumented: bool,
}

/// Checks the documents beside `file` when it is a tarball (both must be there when either
/// is); nothing for other files.
pub fn documents(file: &Path, trust: &trust::Resolved) -> Result<Documents> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let is_tarball = crate::package::tarball::Compression::of(&name).is_some();
    let any = [crate::attest::Kind::Sbom, crate::attest::Kind::Provenance]
        .iter()
        .any(|k| crate::attest::document_path(file, *k).exists());
    let checked = if is_tarball && any {
        check::verify_tarball(file, trust)?
    } else {
        Vec::new()
    };
    Ok(Documents {
        checked,
        undocumented: is_tarball && !any,
    })
}

/// The trust `req` verifies with: the keys, through the key list (`--key-list`, else keys.json
/// beside the file) when there is one, and the revocations this user has seen. Its `notes` say
/// which lists were found and not used.
pub fn trust(req: &FileRequest<'_>) -> Result<trust::Resolved> {
    let list = req.key_list.map(Path::to_path_buf).or_else(|| {
        let p = req
            .file
            .parent()
            .unwrap_or(Path::new("."))
            .join(trust::KEY_LIST_NAME);
        (p.is_file() && p != req.file).then_some(p)
    });
    let Some(list) = list else {
        let state = state(req.state_dir)?;
        return Ok(trust::Resolved::from_roots(req.keys, &state.state));
    };
    let dir = match list.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = list
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut state = state(req.state_dir)?;
    let r = trust::resolve(req.keys, &mut trust::DirSource { dir }, &name, &mut state)?;
    if r.chain.is_none() && r.notes.is_empty() {
        return Err(
            Diagnostic::new(format!("{}: no such key list", list.display()))
                .hint("name a keys.json written by `rocforge key rotate`")
                .into(),
        );
    }
    Ok(r)
}

/// An image whose attached documents verified.
pub struct ImageVerified {
    /// The image's manifest digest.
    pub digest: String,
    pub documents: Vec<Checked>,
}

/// Verifies the SBOM and provenance attached to `image` (`oci://REGISTRY/REPO:TAG`).
pub fn verify_image(image: &str, keys: &[PublicKey]) -> Result<ImageVerified> {
    let state = trust::StateFile::load_default()?;
    let trust = trust::Resolved::from_roots(keys, &state.state);
    let (repo, reference) = check::parse_image_ref(image)?;
    let client = crate::net::try_client(&crate::net::HttpOptions::default())
        .map_err(|e| Diagnostic::new(format!("cannot make an HTTP client: {e}")))?;
    let remote = crate::oci::Remote::new(client, repo);
    let (digest, documents) = check::verify_image(&remote, &reference, &trust)?;
    Ok(ImageVerified { digest, documents })
}

/// The signed index's entry for an image that `verify oci://…` resolved to `digest`.
pub struct ImagePinned {
    /// The index as fetched (credentials hidden).
    pub index: String,
    pub issued: String,
    pub signer: Option<String>,
    pub entry: crate::package::index::ImageEntry,
}

/// Checks that the signed index at `from` lists `image` at exactly `digest`: a tag moved after
/// the release was signed, or an image the release never listed, is refused naming both.
pub fn image_in_index(
    image: &str,
    digest: &str,
    from: &str,
    keys: &[PublicKey],
) -> Result<ImagePinned> {
    use crate::install;
    use crate::package::index::repository_of;
    let url = install::index_url(from)?;
    let client = crate::download::client_confined(&Default::default(), &url, &[]);
    let loaded = install::load_index(&client, from, keys, false)?;
    let shown = crate::download::redact_url(loaded.url.as_str());
    let reference = image.strip_prefix("oci://").unwrap_or(image);
    let repo = repository_of(reference);
    let listed: Vec<_> = loaded
        .index
        .images
        .iter()
        .filter(|e| e.repository() == repo)
        .collect();
    if let Some(e) = listed.iter().find(|e| e.digest.as_str() == digest) {
        return Ok(ImagePinned {
            index: shown,
            issued: loaded.index.issued.clone(),
            signer: loaded.signer.clone(),
            entry: (*e).clone(),
        });
    }
    if listed.is_empty() {
        return Err(Diagnostic::new(format!(
            "{image}: the signed index {shown} lists no image of {repo}"
        ))
        .hint(
            "the publisher lists images with `rocforge image create … --push --record DIR` and \
             then `rocforge index DIR`; check the index URL",
        )
        .into());
    }
    let names: Vec<String> = listed
        .iter()
        .map(|e| format!("{} {}", e.reference, e.digest))
        .collect();
    Err(Diagnostic::new(format!(
        "{image} is {digest}, which the signed index {shown} does not list for {repo} (it lists {})",
        names.join(", ")
    ))
    .hint(
        "the tag was moved after the release was signed: pull the listed digest \
         (REGISTRY/NAME@sha256:…), or ask the publisher for a renewed index",
    )
    .into())
}
