//! `image build`: the release line's builder image from its Containerfile (beside the catalog,
//! else the one built into rocforge; for a line with an `[image-base]`, the base image made
//! with debootstrap first), recorded in the store as a local image. The work is
//! `build::image`'s, which `build` also uses to make the image before it fetches anything.

use std::path::PathBuf;

use super::runtime::{RuntimeChoice, open_runtime};
use super::{Error, Result, Session};
use crate::build::image::{self, Containerfile, ImageError};
use crate::plan::LocalImage;

/// How many lines of a failed build's log are shown.
const LOG_TAIL: usize = 40;

/// A failed image build, its log's tail shown first, as a failed component build's is.
pub fn image_error(session: &Session, e: ImageError) -> Error {
    if let Some(log) = e.log() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(LOG_TAIL)..] {
            session.reporter.note(l);
        }
    }
    Error::hinted(&e, e.hint())
}

/// Builds the image and records it; returns its reference and image ID.
pub fn build_image(
    session: &Session,
    choice: Option<RuntimeChoice>,
    containerfile: Option<PathBuf>,
) -> Result<LocalImage> {
    let catalog = &session.catalog;
    let config = session.config()?;
    let release = &catalog.release.name;
    let file = match containerfile {
        Some(path) => Containerfile {
            shown: path.display().to_string(),
            text: std::fs::read_to_string(&path).map_err(|e| {
                Error::hinted(
                    format!("--containerfile {}: {e}", path.display()),
                    "name an existing Containerfile",
                )
            })?,
            path: Some(path),
        },
        None => image::containerfile(catalog).ok_or_else(|| {
            Error::hinted(
                format!(
                    "no Containerfile for {release}: neither {} nor a built-in one",
                    catalog
                        .root
                        .base_dir()
                        .unwrap_or_default()
                        .join(image::relative_path(release))
                        .display()
                ),
                "pass --containerfile FILE",
            )
        })?,
    };
    let rt = open_runtime(choice, config)?;
    let store = &session.store;
    let log = image::log_path(store, release).map_err(|e| image_error(session, e))?;
    image::build(
        rt.as_ref(),
        catalog,
        &file,
        store,
        &log,
        session.reporter.as_ref(),
    )
    .map_err(|e| image_error(session, e))
}
