//! The release line's builder image, made ready before a build fetches anything.
//!
//! A build in a container needs the image the release names. When the runtime lacks it, the
//! image is pulled by the digest rocforge.lock pins, or built from the line's Containerfile:
//! `containers/Containerfile.<release>` beside a catalog directory, else the copy embedded in
//! the binary (as the catalog is), so an installed rocforge builds it from any directory. What
//! cannot be had is said at once, naming the image and the command, not minutes later as a
//! container that would not start.

use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};

use crate::catalog::{Catalog, CatalogRoot};
use crate::plan::LocalImage;
use crate::plan::key::ImageRef;
use crate::progress::Reporter;
use crate::runtime::debootstrap::{self, BaseError, Made};
use crate::runtime::{ContainerRuntime, Kind as RtKind, RuntimeError};
use crate::store::{Store, StoreError};

static EMBEDDED_CONTAINERS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/containers");

/// A release line's Containerfile: on disk, or the one built in.
#[derive(Debug, Clone)]
pub struct Containerfile {
    /// The path a user sees (`<built-in>/containers/…` for the embedded one).
    pub shown: String,
    pub text: String,
    /// The file on disk; None for the embedded one (written out to build it).
    pub path: Option<PathBuf>,
}

/// Which of a release line's images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// The image components are built in (release.toml `image`): the toolchain, no stack
    Builder,
    /// What the line's libraries need at run time (HIP runtime, ROCr, comgr, device
    /// libraries), no compiler: the base `image create --kind runtime` puts the stack on
    Runtime,
    /// The runtime image plus hipcc, headers and CMake packages: compile against the stack
    Devel,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Builder => "builder",
            Kind::Runtime => "runtime",
            Kind::Devel => "devel",
        }
    }

    /// `Containerfile.<release>` for the builder, `Containerfile.<kind>-<release>` otherwise.
    pub fn file_name(self, release: &str) -> String {
        match self {
            Kind::Builder => format!("Containerfile.{release}"),
            k => format!("Containerfile.{}-{release}", k.name()),
        }
    }

    /// The image's name: release.toml's `image` for the builder, else
    /// `localhost/rocforge/<kind>:<release>`.
    pub fn image(self, catalog: &Catalog) -> String {
        match self {
            Kind::Builder => catalog.release.image.clone(),
            k => format!("localhost/rocforge/{}:{}", k.name(), catalog.release.name),
        }
    }
}

/// The relative path of a release line's Containerfile.
pub fn relative_path(release: &str) -> String {
    format!("containers/Containerfile.{release}")
}

/// The catalog's Containerfile for its release line: the one beside a catalog directory, else
/// the embedded one of that line. None when there is neither.
pub fn containerfile(catalog: &Catalog) -> Option<Containerfile> {
    containerfile_of(catalog, Kind::Builder)
}

/// The catalog's Containerfile of `kind` for its release line, found as [`containerfile`] finds
/// the builder's.
pub fn containerfile_of(catalog: &Catalog, kind: Kind) -> Option<Containerfile> {
    let file = kind.file_name(&catalog.release.name);
    let rel = format!("containers/{file}");
    let embedded = |_: &str| embedded_file(&file);
    match &catalog.root {
        CatalogRoot::Embedded => embedded(&catalog.release.name),
        // A catalog directory without its own file (a copy of recipes/ alone) builds the
        // shipped one of the same line.
        CatalogRoot::Dir(_) => catalog
            .root
            .base_dir()
            .map(|base| base.join(&rel))
            .and_then(|path| {
                let text = std::fs::read_to_string(&path).ok()?;
                Some(Containerfile {
                    shown: path.display().to_string(),
                    text,
                    path: Some(path),
                })
            })
            .or_else(|| embedded(&catalog.release.name)),
    }
}

/// The Containerfile of `release` built into this binary.
pub fn embedded(release: &str) -> Option<Containerfile> {
    embedded_file(&format!("Containerfile.{release}"))
}

fn embedded_file(name: &str) -> Option<Containerfile> {
    let text = EMBEDDED_CONTAINERS.get_file(name)?.contents_utf8()?;
    Some(Containerfile {
        shown: format!("<built-in>/containers/{name}"),
        text: text.to_string(),
        path: None,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("the builder image {image} is not present, and {why}")]
    Missing { image: String, why: String },
    #[error("the builder image {image} is not present, and pulling it failed")]
    Pull { image: String, log: PathBuf },
    #[error("building the {kind} image {image} from {containerfile} failed")]
    Build {
        kind: &'static str,
        image: String,
        containerfile: String,
        log: PathBuf,
    },
    #[error(
        "building the {kind} image {image} failed: {containerfile} pins {}, which the mirror no longer has",
        list(gone)
    )]
    Gone {
        kind: &'static str,
        image: String,
        containerfile: String,
        gone: Vec<(String, String)>,
        log: PathBuf,
    },
    #[error("{image} was built but the runtime cannot find it")]
    Vanished { image: String },
    #[error("the host runtime cannot build images")]
    Host,
    #[error("release {release} has no {kind} image: there is no {file} (nor a built-in one)")]
    NoKind {
        release: String,
        kind: &'static str,
        file: String,
    },
    #[error(transparent)]
    Base(#[from] BaseError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn list(gone: &[(String, String)]) -> String {
    gone.iter()
        .map(|(p, v)| format!("{p} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ImageError {
    pub fn hint(&self) -> String {
        match self {
            ImageError::Missing { image, .. } => format!(
                "write that Containerfile (the next build makes the image from it), pull the image (`podman pull {image}`), or pass --runtime host to build without containers (not reproducible)"
            ),
            ImageError::Pull { log, .. } => format!(
                "check the network and the registry login (`podman login`); the full log is {}",
                log.display()
            ),
            ImageError::Build { log, .. } => format!("the full log is {}", log.display()),
            ImageError::Gone { log, .. } => format!(
                "pin the versions the mirror has now (`apt-cache policy PACKAGE` in the base image) and build again; the full log is {}",
                log.display()
            ),
            ImageError::Vanished { .. } => "run `rocforge doctor`".into(),
            ImageError::Host => "use --runtime podman or docker".into(),
            ImageError::NoKind { .. } => {
                "write that Containerfile, or pass --base with an image of your own".into()
            }
            ImageError::Base(e) => e.hint(),
            ImageError::Runtime(e) => e.hint(),
            ImageError::Store(e) => e.hint(),
            ImageError::Io { .. } => "check free disk space and permissions of the store".into(),
        }
    }

    /// The log to show lines of, when the runtime wrote one.
    pub fn log(&self) -> Option<&Path> {
        match self {
            ImageError::Pull { log, .. }
            | ImageError::Build { log, .. }
            | ImageError::Gone { log, .. } => Some(log),
            _ => None,
        }
    }
}

/// The command that makes the image, or why none can: for `doctor` and errors.
pub fn advice(catalog: &Catalog) -> String {
    let missing = |rel: String| match catalog.root.base_dir() {
        Some(base) => base.join(rel).display().to_string(),
        None => rel,
    };
    match containerfile(catalog) {
        Some(_) => format!(
            "`rocforge image build{}` builds it ({})",
            release_flag(catalog),
            relative_path(&catalog.release.name)
        ),
        None => format!(
            "pull it (`podman pull {}`), or write {} to build it from",
            catalog.release.image,
            missing(relative_path(&catalog.release.name))
        ),
    }
}

/// ` --release NAME` (and `--recipes DIR`) as the command line must repeat them.
fn release_flag(catalog: &Catalog) -> String {
    let mut out = String::new();
    if let CatalogRoot::Dir(dir) = &catalog.root {
        out.push_str(&format!(
            " --recipes {}",
            crate::process::shell_quote(&dir.display().to_string())
        ));
    }
    out + &format!(" --release {}", catalog.release.name)
}

/// What [`ensure`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Host builds need no image.
    NotNeeded,
    Present,
    /// Pulled by the digest rocforge.lock pins.
    Pulled,
    /// Built here from the Containerfile: its image ID (keys change with it).
    Built(String),
}

/// Makes the builder image `image` (as the plan pins it) present in `rt`: pulls a pinned
/// registry image by digest, or builds the line's Containerfile. Says what it does, with the
/// log, through `reporter`.
pub fn ensure(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    image: &ImageRef,
    store: &Store,
    reporter: &dyn Reporter,
) -> Result<Ready, ImageError> {
    if rt.kind() == RtKind::Host {
        return Ok(Ready::NotNeeded);
    }
    let pinned = image
        .digest
        .as_ref()
        .filter(|_| !image.local && !image.runtime_id);
    let wanted = match pinned {
        Some(digest) => format!("{}@{digest}", repository(&image.reference)),
        None => image.reference.clone(),
    };
    if rt.image_id(&wanted).is_some() {
        return Ok(Ready::Present);
    }
    let log = log_path(store, &catalog.release.name)?;
    if pinned.is_some() {
        reporter.note(&format!(
            "pulling the builder image {wanted} (pinned by rocforge.lock; log: {})",
            log.display()
        ));
        let exit = rt.pull(&wanted, &log)?;
        if !exit.success() {
            return Err(ImageError::Pull { image: wanted, log });
        }
        return Ok(Ready::Pulled);
    }
    let Some(file) = containerfile(catalog) else {
        let rel = relative_path(&catalog.release.name);
        return Err(ImageError::Missing {
            image: wanted,
            why: match catalog.root.base_dir() {
                Some(base) => format!(
                    "there is no {} (nor a built-in one) to build it from",
                    base.join(rel).display()
                ),
                None => format!("this rocforge has no built-in {rel} to build it from"),
            },
        });
    };
    build(rt, catalog, &file, store, &log, reporter).map(Ready::Built)
}

/// `<store>/.logs/image-<release>.log`, emptied.
pub fn log_path(store: &Store, release: &str) -> Result<PathBuf, ImageError> {
    let dir = store.root().join(".logs");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ImageError::Io { path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let log = dir.join(format!("image-{release}.log"));
    std::fs::write(&log, "").map_err(io(&log))?;
    Ok(log)
}

fn repository(reference: &str) -> &str {
    reference
        .rsplit_once(':')
        .filter(|(_, tag)| !tag.contains('/'))
        .map_or(reference, |(r, _)| r)
}

/// Builds the release's builder image from `file` (its debootstrap base first, when the line
/// names one), records it as a local image and returns its ID.
pub fn build(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    file: &Containerfile,
    store: &Store,
    log: &Path,
    reporter: &dyn Reporter,
) -> Result<String, ImageError> {
    let id = build_as(rt, catalog, Kind::Builder, file, store, log, reporter)?;
    store.record_local_image(
        &catalog.release.name,
        &LocalImage {
            reference: catalog.release.image.clone(),
            id: id.clone(),
        },
    )?;
    Ok(id)
}

/// Builds the release's image of `kind` from its Containerfile when the runtime lacks it (the
/// runtime image first, for devel); returns its name and image ID. The builder image is also
/// recorded, as [`build`] does.
pub fn ensure_kind(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    kind: Kind,
    store: &Store,
    reporter: &dyn Reporter,
) -> Result<(String, String), ImageError> {
    let image = kind.image(catalog);
    if let Some(id) = rt.image_id(&image) {
        return Ok((image, id));
    }
    let file = containerfile_of(catalog, kind).ok_or_else(|| ImageError::NoKind {
        release: catalog.release.name.clone(),
        kind: kind.name(),
        file: format!("containers/{}", kind.file_name(&catalog.release.name)),
    })?;
    let log = log_path(store, &format!("{}-{}", kind.name(), catalog.release.name))?;
    let id = match kind {
        Kind::Builder => build(rt, catalog, &file, store, &log, reporter)?,
        k => build_kind(rt, catalog, k, &file, store, &log, reporter)?,
    };
    Ok((image, id))
}

/// Builds the runtime or devel image from `file` (devel FROM the runtime image, made first
/// when absent); returns its image ID.
pub fn build_kind(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    kind: Kind,
    file: &Containerfile,
    store: &Store,
    log: &Path,
    reporter: &dyn Reporter,
) -> Result<String, ImageError> {
    if kind == Kind::Builder {
        return build(rt, catalog, file, store, log, reporter);
    }
    if kind == Kind::Devel {
        ensure_kind(rt, catalog, Kind::Runtime, store, reporter)?;
    }
    build_as(rt, catalog, kind, file, store, log, reporter)
}

fn build_as(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    kind: Kind,
    file: &Containerfile,
    store: &Store,
    log: &Path,
    reporter: &dyn Reporter,
) -> Result<String, ImageError> {
    if rt.kind() == RtKind::Host {
        return Err(ImageError::Host);
    }
    let image = &kind.image(catalog);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ImageError::Io { path, source }
    };
    // The embedded file is written out: the runtime reads a file. Its directory is the build
    // context, as containers/ is for the one on disk (the Containerfiles copy nothing in).
    let scratch = store.root().join(".tmp");
    std::fs::create_dir_all(&scratch).map_err(io(&scratch))?;
    let written;
    let path = match &file.path {
        Some(p) => p.clone(),
        None => {
            written = tempfile::tempdir_in(&scratch).map_err(io(&scratch))?;
            let p = written.path().join(kind.file_name(&catalog.release.name));
            std::fs::write(&p, &file.text).map_err(io(&p))?;
            p
        }
    };
    reporter.note(&format!(
        "building the {} image {image} from {} (log: {})",
        kind.name(),
        file.shown,
        log.display()
    ));
    // devel builds FROM the runtime image, which was made from the debootstrap base.
    if let Some(base) = catalog
        .release
        .image_base
        .as_ref()
        .filter(|_| kind != Kind::Devel)
    {
        debootstrap::check_from(&path, base)?;
        if rt.image_id(&base.name).is_none() {
            reporter.note(&format!(
                "making the base image {} with debootstrap --variant={} {} (log: {})",
                base.name,
                base.variant,
                base.suite,
                log.display()
            ));
        }
        if let Made::Imported(id) = debootstrap::ensure(rt, base, &scratch, log)? {
            reporter.note(&format!("base image {} {id}", base.name));
        }
    }
    let context = path.parent().unwrap_or(Path::new("."));
    let exit = rt.build_image(&path, context, image, log)?;
    if !exit.success() {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let gone = crate::image::apt_versions_gone(&text);
        return Err(if gone.is_empty() {
            ImageError::Build {
                kind: kind.name(),
                image: image.clone(),
                containerfile: file.shown.clone(),
                log: log.to_path_buf(),
            }
        } else {
            ImageError::Gone {
                kind: kind.name(),
                image: image.clone(),
                containerfile: file.shown.clone(),
                gone,
                log: log.to_path_buf(),
            }
        });
    }
    rt.image_id(image).ok_or_else(|| ImageError::Vanished {
        image: image.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_release_line_has_its_containerfile_built_in() {
        for release in ["rocm-6.4.4", "rocm-7.14.0", "debian-6.4"] {
            let f = embedded(release).unwrap_or_else(|| panic!("{release}"));
            assert!(f.text.contains("\nFROM "), "{release}");
            assert_eq!(
                f.shown,
                format!("<built-in>/containers/Containerfile.{release}")
            );
        }
        assert!(embedded("rocm-0.0").is_none());
    }

    #[test]
    fn a_pinned_reference_loses_its_tag() {
        assert_eq!(repository("ghcr.io/o/b:6.4"), "ghcr.io/o/b");
        assert_eq!(repository("localhost:5000/b"), "localhost:5000/b");
    }
}
