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
pub fn verify_image(g: &Global, image: &str, keys: &[String]) -> Result<ExitCode> {
    let keys = super::artifact_cmd::trusted(g, keys)?;
    let v = app::signature::verify_image(image, &keys)?;
    if g.format == Format::Json {
        super::print_json(&report::Verified::image(image, v.digest, v.documents));
    } else {
        println!("{image}: {}", v.digest);
        for c in &v.documents {
            println!("{}", document_line(c, false));
        }
    }
    Ok(ExitCode::SUCCESS)
}
