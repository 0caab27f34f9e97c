//! `publish`: a release directory's files uploaded to a GitHub release or an OCI registry, and
//! the PEP 503 index of its wheels written beside them.

use crate::diag::Hint;
use std::path::{Path, PathBuf};

use super::{Error, Result};
use crate::diag::Diagnostic;
use crate::progress::Reporter;
use crate::publish::{self, PublishError, PublishPlan};

pub const PUBLISH_SCHEMA: &str = "rocforge.publish/1";

/// What a publish did (`publish --format json`).
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct Published {
    pub schema: &'static str,
    /// The destination as given; null when only the wheel index was written.
    pub to: Option<String>,
    /// Each file uploaded or skipped (empty without a destination).
    pub files: Vec<publish::Outcome>,
    /// The wheel index pages written.
    pub wheel_index: Vec<PathBuf>,
}

/// The publish of `dir` (what `rocforge package --out DIR` wrote) to `to`, a `github://` or
/// `oci://` URL (without one only the wheel index is written), computed from the directory
/// alone: nothing is sent or written.
pub fn plan(dir: &Path, to: Option<&str>) -> Result<PublishPlan> {
    let err = |e: PublishError| Error::hinted(&e, e.hint());
    if !dir.is_dir() {
        return Err(
            Diagnostic::new(format!("{} is not a directory", dir.display()))
                .hint("publish the directory `rocforge package --out DIR` wrote")
                .into(),
        );
    }
    let plan = publish::plan::plan(dir, to).map_err(err)?;
    if plan.to.is_none() && plan.wheel_index.is_empty() {
        return Err(Diagnostic::new("nothing to do: no --to and no wheels")
            .hint("pass --to github://OWNER/REPO@TAG or --to oci://REGISTRY/REPO")
            .into());
    }
    Ok(plan)
}

/// Publishes `dir` to `to`: [`plan`], then carried out.
pub fn publish(dir: &Path, to: Option<&str>, reporter: &dyn Reporter) -> Result<Published> {
    let plan = plan(dir, to)?;
    let files = publish::execute(&plan, reporter)?;
    Ok(Published {
        schema: PUBLISH_SCHEMA,
        to: to.map(str::to_string),
        files,
        wheel_index: plan.wheel_index,
    })
}
