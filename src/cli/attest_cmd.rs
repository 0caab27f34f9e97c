//! `verify`'s checks of the SBOM and provenance: beside a tarball, or attached to an image
//! (`verify oci://REGISTRY/REPO:TAG`).

use rocforge::diag::Hint;
use std::path::Path;
use std::process::ExitCode;

use super::{CliError, Format, Global, Result};
use rocforge::attest::{AttestError, check, report};
use rocforge::diag::Diagnostic;

fn attest_err(e: AttestError) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

/// The tarball's documents, once its own signature verified: checked when they are there
/// (both must be then), a warning when neither is (packaged before rocforge wrote them).
pub fn verify_tarball_documents(
    g: &Global,
    file: &Path,
    trust: &rocforge::trust::Resolved,
    signature: &rocforge::sign::Verified,
) -> Result<ExitCode> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let is_tarball = rocforge::package::tarball::Compression::of(&name).is_some();
    let any = [
        rocforge::attest::Kind::Sbom,
        rocforge::attest::Kind::Provenance,
    ]
    .iter()
    .any(|k| rocforge::attest::document_path(file, *k).exists());
    let checked = if is_tarball && any {
        check::verify_tarball(file, trust).map_err(attest_err)?
    } else {
        if is_tarball {
            eprintln!(
                "warning: {}: no SBOM or provenance beside it (packaged before rocforge wrote them)",
                file.display()
            );
        }
        Vec::new()
    };
    if g.format == Format::Json {
        super::print_json(&report::Verified::file(file, signature, checked));
    } else {
        for c in &checked {
            println!(
                "{}: good {} from key {}, subject {}, {}",
                c.document,
                kind_label(c.kind),
                c.key_id,
                c.subject,
                c.components.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn kind_label(k: rocforge::attest::Kind) -> &'static str {
    k.label()
}

/// `verify oci://REGISTRY/REPO:TAG`: the image's attached SBOM and provenance.
pub fn verify_image(g: &Global, image: &str, keys: &[String]) -> Result<ExitCode> {
    let keys = super::artifact_cmd::trusted(g, keys)?;
    let state = rocforge::trust::StateFile::load_default()
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
    let trust = rocforge::trust::Resolved::from_roots(&keys, &state.state);
    let (repo, reference) = check::parse_image_ref(image).map_err(attest_err)?;
    let client = rocforge::net::try_client(&rocforge::net::HttpOptions::default())
        .map_err(|e| Diagnostic::new(format!("cannot make an HTTP client: {e}")))?;
    let remote = rocforge::oci::Remote::new(client, repo);
    let (digest, checked) = check::verify_image(&remote, &reference, &trust).map_err(attest_err)?;
    if g.format == Format::Json {
        super::print_json(&report::Verified::image(image, digest, checked));
    } else {
        println!("{image}: {digest}");
        for c in &checked {
            println!(
                "{}: good {} from key {}, subject {}",
                c.document,
                kind_label(c.kind),
                c.key_id,
                c.subject
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
