//! `verify`'s lines for the SBOM and provenance: beside a tarball, or attached to an image
//! (`verify oci://REGISTRY/REPO:TAG`).

use std::process::ExitCode;

use super::{Format, Global, Result};
use rocforge::app;
use rocforge::attest::check::Checked;
use rocforge::attest::report;

/// One checked document, as `verify` prints it (with the components it describes for a
/// tarball's).
pub fn document_line(c: &Checked, components: bool) -> String {
    let mut line = format!(
        "{}: good {} from key {}, subject {}",
        c.document,
        c.kind.label(),
        c.key_id,
        c.subject
    );
    if components {
        line.push_str(&format!(", {}", c.components.join(", ")));
    }
    line
}

/// `verify oci://REGISTRY/REPO:TAG`: the image's attached SBOM and provenance.
pub fn verify_image(
    g: &Global,
    image: &str,
    keys: &[String],
    index: Option<&str>,
) -> Result<ExitCode> {
    let keys = super::artifact_cmd::trusted(g, keys)?;
    let v = app::signature::verify_image(image, &keys)?;
    let pinned = index
        .map(|from| app::signature::image_in_index(image, &v.digest, from, &keys))
        .transpose()?;
    if g.format == Format::Json {
        let mut r = report::Verified::image(image, v.digest, v.documents);
        r.index = pinned.as_ref().map(|p| p.index.clone());
        super::print_json(&r);
    } else {
        println!("{image}: {}", v.digest);
        for c in &v.documents {
            println!("{}", document_line(c, false));
        }
        if let Some(p) = &pinned {
            println!(
                "{}: listed by the signed index {} (issued {}{}), {} component(s) for {}",
                p.entry.reference,
                p.index,
                p.issued,
                p.signer
                    .as_ref()
                    .map(|k| format!(", key {k}"))
                    .unwrap_or_default(),
                p.entry.components.len(),
                rocforge::arch::comma_list(&p.entry.targets),
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
