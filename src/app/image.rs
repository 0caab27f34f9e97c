//! `image build`: the release line's builder image from its Containerfile (and, for a line
//! with an `[image-base]`, the base image made with debootstrap first), recorded in the store
//! as a local image.

use std::path::{Path, PathBuf};

use super::runtime::{RuntimeChoice, open_runtime, runtime_error};
use super::{Error, Result, Session};
use crate::diag::Diagnostic;
use crate::plan::LocalImage;
use crate::runtime::debootstrap::{self, Made};
use crate::runtime::{ContainerRuntime, Kind};

/// How many lines of a failed build's log are shown.
const LOG_TAIL: usize = 40;

/// Builds the image and records it; returns its reference and image ID.
pub fn build_image(
    session: &Session,
    choice: Option<RuntimeChoice>,
    containerfile: Option<PathBuf>,
) -> Result<LocalImage> {
    let catalog = &session.catalog;
    let config = session.config()?;
    let release = &catalog.release.name;
    let file = containerfile.unwrap_or_else(|| {
        let base = catalog
            .root
            .base_dir()
            .unwrap_or_else(|| PathBuf::from("."));
        base.join("containers")
            .join(format!("Containerfile.{release}"))
    });
    if !file.is_file() {
        return Err(Diagnostic::new(format!("no Containerfile for {release}: {} does not exist", file.display()))
            .hint("builder images live in containers/Containerfile.<release>; pass --containerfile FILE, or run from a checkout of rocforge")
            .into());
    }
    let rt = open_runtime(choice, config)?;
    if rt.kind() == Kind::Host {
        return Err(Diagnostic::new("the host runtime cannot build images")
            .hint("use --runtime podman or docker")
            .into());
    }
    let store = &session.store;
    std::fs::create_dir_all(store.root().join(".logs"))
        .map_err(|e| Error::hinted(e, "check --store"))?;
    let log = store
        .root()
        .join(".logs")
        .join(format!("image-{release}.log"));
    let _ = std::fs::write(&log, "");
    let image = &catalog.release.image;
    session.reporter.note(&format!(
        "building {image} from {} (log: {})",
        file.display(),
        log.display()
    ));
    make_base(session, rt.as_ref(), &file, &log)?;
    let context = file.parent().unwrap_or(Path::new("."));
    let exit = rt
        .build_image(&file, context, image, &log)
        .map_err(runtime_error)?;
    if !exit.success() {
        return Err(failure(session, image, &file, &log));
    }
    let id = rt.image_id(image).ok_or_else(|| {
        Error::hinted(
            format!("{image} was built but cannot be found"),
            "run `rocforge doctor`",
        )
    })?;
    let local = LocalImage {
        reference: image.clone(),
        id,
    };
    store
        .record_local_image(release, &local)
        .map_err(|e| Error::hinted(&e, e.hint()))?;
    Ok(local)
}

/// The line's `[image-base]`, made with debootstrap and imported when the runtime lacks it.
fn make_base(session: &Session, rt: &dyn ContainerRuntime, file: &Path, log: &Path) -> Result<()> {
    let Some(base) = &session.catalog.release.image_base else {
        return Ok(());
    };
    let base_err = |e: debootstrap::BaseError| Error::hinted(&e, e.hint());
    debootstrap::check_from(file, base).map_err(base_err)?;
    if rt.image_id(&base.name).is_none() {
        session.reporter.note(&format!(
            "making the base image {} with debootstrap --variant={} {} (log: {})",
            base.name,
            base.variant,
            base.suite,
            log.display()
        ));
    }
    let tmp = session.store.root().join(".tmp");
    if let Made::Imported(id) = debootstrap::ensure(rt, base, &tmp, log).map_err(base_err)? {
        session
            .reporter
            .note(&format!("base image {} {id}", base.name));
    }
    Ok(())
}

/// A failed build: the log's tail shown, and the error naming apt pins the mirror dropped.
fn failure(session: &Session, image: &str, file: &Path, log: &Path) -> Error {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    for l in &lines[lines.len().saturating_sub(LOG_TAIL)..] {
        session.reporter.note(l);
    }
    let gone = crate::image::apt_versions_gone(&text);
    if gone.is_empty() {
        return Error::hinted(
            format!("building {image} failed"),
            format!("the full log is {}", log.display()),
        );
    }
    let list = gone
        .iter()
        .map(|(p, v)| format!("{p} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    Error::hinted(
        format!(
            "building {image} failed: {} pins {list}, which the mirror no longer has",
            file.display()
        ),
        format!(
            "pin the versions the mirror has now (`apt-cache policy PACKAGE` in the base image) and build again; the full log is {}",
            log.display()
        ),
    )
}
