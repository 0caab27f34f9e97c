//! `publish`: a release directory's files uploaded to a GitHub release or an OCI registry, and
//! the PEP 503 index of its wheels written beside them.

use std::path::{Path, PathBuf};

use super::{Error, Result};
use crate::diag::Diagnostic;
use crate::package::index::{INDEX_NAME, Index};
use crate::progress::Reporter;
use crate::publish::{self, Destination, PublishError, wheels};

/// What a publish did.
pub struct Published {
    /// Each file uploaded or skipped (empty without a destination).
    pub files: Vec<publish::Outcome>,
    /// The wheel index pages written.
    pub wheel_index: Vec<PathBuf>,
}

/// Publishes `dir` (what `rocforge package --out DIR` wrote) to `to`, a `github://` or `oci://`
/// URL; without one only the wheel index is written.
pub fn publish(dir: &Path, to: Option<&str>, reporter: &dyn Reporter) -> Result<Published> {
    let err = |e: PublishError| Error::hinted(&e, e.hint());
    if !dir.is_dir() {
        return Err(
            Diagnostic::new(format!("{} is not a directory", dir.display()))
                .hint("publish the directory `rocforge package --out DIR` wrote")
                .into(),
        );
    }
    let dest = to.map(Destination::parse).transpose().map_err(err)?;
    // Every target of the release gets a page, not only those the wheels name.
    let targets: Vec<String> = std::fs::read(dir.join(INDEX_NAME))
        .ok()
        .and_then(|b| serde_json::from_slice::<Index>(&b).ok())
        .map(|i| {
            let mut t: Vec<String> = i
                .artifacts
                .iter()
                .flat_map(|a| a.targets.iter().map(|t| t.to_string()))
                .collect();
            t.sort();
            t.dedup();
            t
        })
        .unwrap_or_default();
    let pages = wheels::write_index(dir, &targets).map_err(err)?;
    if !pages.is_empty() {
        reporter.note(&format!(
            "wrote the wheel index ({} pages): pip install --index-url <URL of {}>/<target>/ …",
            pages.len(),
            dir.display()
        ));
    }
    let files = match &dest {
        Some(d) => publish::publish(dir, d, reporter).map_err(err)?,
        None if pages.is_empty() => {
            return Err(Diagnostic::new("nothing to do: no --to and no wheels")
                .hint("pass --to github://OWNER/REPO@TAG or --to oci://REGISTRY/REPO")
                .into());
        }
        None => Vec::new(),
    };
    Ok(Published {
        files,
        wheel_index: pages,
    })
}
