//! The release line's builder image, made ready before a build fetches anything.
//!
//! A build in a container needs the image the release names. When the runtime lacks it, the
//! image is pulled by the digest rocforge.lock pins, or built from the line's Containerfile:
//! `containers/Containerfile.<release>` beside a catalog directory, else the copy embedded in
//! the binary (as the catalog is), so an installed rocforge builds it from any directory. What
//! cannot be had is said at once, naming the image and the command, not minutes later as a
//! container that would not start.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::catalog::{Catalog, CatalogRoot};
use crate::plan::LocalImage;
use crate::plan::key::ImageRef;
use crate::progress::Reporter;
use crate::runtime::debootstrap::{self, BaseError, Made};
use crate::runtime::{ContainerRuntime, Kind as RtKind, RuntimeError};
use crate::store::{Store, StoreError};

pub use crate::catalog::containers::Containerfile;

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
    /// The runtime image plus CPython and the CPU libraries PyTorch links: the base of images
    /// whose stack carries wheels (torch, torchvision), which `image create` unpacks
    Python,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Builder => "builder",
            Kind::Runtime => "runtime",
            Kind::Devel => "devel",
            Kind::Python => "python",
        }
    }

    /// Whether its Containerfile builds FROM the line's runtime image (made first when absent).
    pub fn from_runtime(self) -> bool {
        matches!(self, Kind::Devel | Kind::Python)
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
    crate::catalog::containers::find(&catalog.root, &kind.file_name(&catalog.release.name))
}

/// The Containerfile of `release` built into this binary.
pub fn embedded(release: &str) -> Option<Containerfile> {
    crate::catalog::containers::embedded(&format!("Containerfile.{release}"))
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
    #[error(
        "the builder image {image} does not hold what {containerfile} pins: {}",
        mismatches(wrong)
    )]
    Pins {
        image: String,
        containerfile: String,
        /// (package, pinned version, installed version or None when not installed)
        wrong: Vec<(String, String, Option<String>)>,
    },
    #[error("cannot list the packages of the builder image {image} (dpkg-query -W in it failed)")]
    Packages { image: String, log: PathBuf },
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

fn mismatches(wrong: &[(String, String, Option<String>)]) -> String {
    wrong
        .iter()
        .map(|(p, pinned, installed)| match installed {
            Some(v) => format!("{p} pinned {pinned}, installed {v}"),
            None => format!("{p} pinned {pinned}, not installed"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn list(gone: &[(String, String)]) -> String {
    gone.iter()
        .map(|(p, v)| format!("{p} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ImageError {
    /// The log to show lines of, when the runtime wrote one.
    pub fn log(&self) -> Option<&Path> {
        match self {
            ImageError::Pull { log, .. }
            | ImageError::Build { log, .. }
            | ImageError::Gone { log, .. }
            | ImageError::Packages { log, .. } => Some(log),
            _ => None,
        }
    }
}

impl crate::diag::Hint for ImageError {
    fn hint(&self) -> String {
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
            ImageError::Pins { .. } => "a pin apt did not install (a command that skipped it, a later step that replaced or removed the package) leaves an image the pins do not describe: fix the Containerfile so each pinned version is what ends up installed".into(),
            ImageError::Packages { log, .. } => format!(
                "the image must run `dpkg-query`; the full log is {}",
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

/// Whether `build` can make the missing builder image on this machine, and how: from the
/// line's Containerfile, its base present, made with debootstrap, or pulled. `pinned`: the
/// digest rocforge.lock pins it by, pulled instead.
pub fn makeable(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    pinned: Option<&str>,
) -> (bool, String) {
    if let Some(digest) = pinned {
        return (
            true,
            format!(
                "`rocforge build` pulls it first by the digest rocforge.lock pins ({}), if its registry can be reached",
                &digest[..19.min(digest.len())]
            ),
        );
    }
    let Some(file) = containerfile(catalog) else {
        return (
            false,
            format!("it cannot be made here: {}", advice(catalog)),
        );
    };
    let made = format!("`rocforge build` makes it first from {}", file.shown);
    let Some(from) = debootstrap::from_of(&file.text) else {
        return (true, made);
    };
    if rt.image_id(&from).is_some() {
        return (true, format!("{made} (its base {from} is present)"));
    }
    match &catalog.release.image_base {
        Some(base) if base.name == from => {
            if crate::process::on_path("debootstrap") {
                (
                    true,
                    format!(
                        "{made}, its base {from} with debootstrap --variant={} {} (needs the Debian mirror)",
                        base.variant, base.suite
                    ),
                )
            } else {
                (
                    false,
                    format!(
                        "it cannot be made here yet: its base {from} is made with debootstrap, which is not installed (`sudo apt install debootstrap`)"
                    ),
                )
            }
        }
        _ => (
            true,
            format!("{made}, pulling its base {from} (needs its registry)"),
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
    match (&image.built_from, rt.image_id(&wanted)) {
        // Keyed by its inputs: present only as `image build` made it from those inputs, else
        // (the Containerfile changed, or the tag holds an image of unknown making) built now.
        (Some(inputs), Some(id)) => {
            let recorded = store.local_image_record(&catalog.release.name);
            if recorded.is_some_and(|l| {
                l.reference == image.reference && l.id == id && l.inputs.as_ref() == Some(inputs)
            }) {
                return Ok(Ready::Present);
            }
            // Made from these inputs elsewhere (its label says so): adopted once its apt pins
            // are checked, as if built here.
            if rt.image_label(&image.reference, INPUTS_LABEL).as_ref() == Some(inputs)
                && let Some(file) = containerfile(catalog)
            {
                let log = log_path(store, &catalog.release.name)?;
                let line = Named::line(catalog);
                record(rt, &line, &file, id, Some(inputs.clone()), store, &log)?;
                return Ok(Ready::Present);
            }
        }
        (None, Some(_)) => return Ok(Ready::Present),
        (_, None) => {}
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
    build(rt, catalog, &file, store, &log, reporter).map(|l| Ready::Built(l.id))
}

/// The label `rocforge image build` puts on a builder image it makes from inputs that pin it:
/// their digest ([`inputs_digest`]). Another machine, or another store on this one, that holds
/// the image then keys it by those inputs as the machine that made it does.
pub const INPUTS_LABEL: &str = "org.rocforge.image-inputs";

/// `sha256:…` of what the release line's builder image is made from, when that pins it: the
/// Containerfile's bytes (its apt version pins among them) and the `[image-base]` suite and
/// variant it builds FROM, or a FROM pinned by digest. The mirror is not part of it: mirrors
/// serve the same packages. None when the Containerfile builds FROM a tag nothing pins, or
/// copies files in (COPY, ADD) that these bytes do not hold: such an image is known only by
/// its ID.
pub fn inputs_digest(catalog: &Catalog) -> Option<String> {
    let file = containerfile(catalog)?;
    let from = debootstrap::from_of(&file.text)?;
    let base = catalog
        .release
        .image_base
        .as_ref()
        .filter(|b| b.name == from);
    if base.is_none() && !from.contains("@sha256:") {
        return None;
    }
    if copies_in(&file.text) {
        return None;
    }
    #[derive(serde::Serialize)]
    struct Inputs<'a> {
        schema: &'static str,
        containerfile_sha256: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        debootstrap: Option<(&'a str, &'a str, &'a str)>,
    }
    let inputs = Inputs {
        schema: "rocforge.image-inputs/1",
        containerfile_sha256: hex::encode(Sha256::digest(file.text.as_bytes())),
        debootstrap: base.map(|b| (b.name.as_str(), b.suite.as_str(), b.variant.as_str())),
    };
    Some(digest_of(&inputs))
}

/// `sha256:…` of a value's compact JSON: what an image is made from, as keys hold it.
pub(super) fn digest_of(inputs: &impl serde::Serialize) -> String {
    let bytes = serde_json::to_vec(inputs).expect("plain data");
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether a Containerfile copies files in (COPY, ADD), which its bytes do not hold.
pub(super) fn copies_in(text: &str) -> bool {
    logical_lines(text).any(|l| {
        l.split_whitespace()
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case("COPY") || w.eq_ignore_ascii_case("ADD"))
    })
}

/// A Containerfile's instructions, continuation lines joined and comment lines dropped.
fn logical_lines(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in text.lines() {
        let t = l.trim();
        if t.starts_with('#') {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(part) => {
                cur.push_str(part);
                cur.push(' ');
            }
            None => {
                cur.push_str(t);
                if !cur.trim().is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                cur.clear();
            }
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out.into_iter()
}

/// The `package=version` pins of a Containerfile's `apt-get install` (and `apt install`)
/// commands, in order, an architecture qualifier (`pkg:amd64`) dropped.
pub fn apt_pins(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in logical_lines(text) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut i = 0;
        while i < words.len() {
            let apt = matches!(words[i], "apt-get" | "apt");
            if !(apt && words.get(i + 1) == Some(&"install")) {
                i += 1;
                continue;
            }
            i += 2;
            while let Some(w) = words.get(i) {
                if matches!(*w, "&&" | "||" | ";" | "|") {
                    break;
                }
                let end = w.ends_with(';');
                let w = w.trim_end_matches(';');
                if !w.starts_with('-')
                    && let Some((name, version)) = w.split_once('=')
                {
                    let name = name.split(':').next().unwrap_or(name);
                    let pkg = name.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b)
                    });
                    if pkg && !name.is_empty() && !version.is_empty() {
                        let pair = (name.to_string(), version.to_string());
                        if !out.contains(&pair) {
                            out.push(pair);
                        }
                    }
                }
                i += 1;
                if end {
                    break;
                }
            }
        }
    }
    out
}

/// The pins `installed` (`name=version` lines) does not satisfy: (package, pinned, installed).
pub fn unmet_pins(
    pins: &[(String, String)],
    installed: &[String],
) -> Vec<(String, String, Option<String>)> {
    let have: std::collections::BTreeMap<&str, &str> = installed
        .iter()
        .filter_map(|l| l.split_once('='))
        .map(|(n, v)| (n.split(':').next().unwrap_or(n), v))
        .collect();
    pins.iter()
        .filter(|(n, v)| have.get(n.as_str()) != Some(&v.as_str()))
        .map(|(n, v)| {
            (
                n.clone(),
                v.clone(),
                have.get(n.as_str()).map(|s| s.to_string()),
            )
        })
        .collect()
}

/// `name=version` of every package installed in `image`, sorted: `dpkg-query -W` in a
/// throw-away container without network, its output written to a directory of the store's.
fn installed_packages(
    rt: &dyn ContainerRuntime,
    image: &str,
    scratch: &Path,
    log: &Path,
) -> Result<Vec<String>, ImageError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ImageError::Io { path, source }
    };
    // A store's first use may be adopting an image: nothing has made its scratch yet.
    std::fs::create_dir_all(scratch).map_err(io(scratch))?;
    let out = tempfile::tempdir_in(scratch).map_err(io(scratch))?;
    let spec = crate::runtime::RunSpec {
        name: format!("rocforge-image-packages-{}", std::process::id()),
        image: image.to_string(),
        mounts: vec![crate::runtime::Mount {
            host: out.path().to_path_buf(),
            container: "/out".into(),
            read_only: false,
        }],
        env: [(
            "PATH".to_string(),
            "/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        )]
        .into(),
        workdir: "/".into(),
        script: "dpkg-query -W -f '${binary:Package}=${Version}\\n' > /out/packages".into(),
        network: false,
        labels: [("rocforge.image-check".to_string(), image.to_string())].into(),
    };
    let exit = rt.run(&spec, log)?;
    let listed = out.path().join("packages");
    let text = std::fs::read_to_string(&listed)
        .ok()
        .filter(|_| exit.success());
    let Some(text) = text else {
        return Err(ImageError::Packages {
            image: image.to_string(),
            log: log.to_path_buf(),
        });
    };
    let mut packages: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    packages.sort();
    packages.dedup();
    Ok(packages)
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
/// names one), checks an image keyed by its inputs against the Containerfile's apt pins, and
/// records it as a local image (with its package list) in the store.
pub fn build(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    file: &Containerfile,
    store: &Store,
    log: &Path,
    reporter: &dyn Reporter,
) -> Result<LocalImage, ImageError> {
    // The file built may be another than the line's own (`image build --containerfile`):
    // only the line's own is what keys describe.
    let inputs = inputs_digest(catalog)
        .filter(|_| containerfile(catalog).is_some_and(|own| own.text == file.text));
    let label = inputs.as_ref().map(|i| (INPUTS_LABEL, i.as_str()));
    let line = Named::line(catalog);
    let id = build_as(rt, catalog, &line, file, label, store, log, reporter)?;
    record(rt, &line, file, id, inputs, store, log)
}

/// Records the builder image `id` made from `file` in the store, once its apt pins are met:
/// what keys naming its inputs rely on.
pub(super) fn record(
    rt: &dyn ContainerRuntime,
    named: &Named,
    file: &Containerfile,
    id: String,
    inputs: Option<String>,
    store: &Store,
    log: &Path,
) -> Result<LocalImage, ImageError> {
    let image = &named.image;
    let scratch = store.root().join(".tmp");
    let pins = apt_pins(&file.text);
    // The list backs keys that name the inputs and not the image: it is read (and the pins
    // checked) for those, and for any Containerfile that pins apt versions.
    let packages = if inputs.is_some() || !pins.is_empty() {
        let packages = installed_packages(rt, &id, &scratch, log)?;
        let wrong = unmet_pins(&pins, &packages);
        if !wrong.is_empty() {
            return Err(ImageError::Pins {
                image: image.clone(),
                containerfile: file.shown.clone(),
                wrong,
            });
        }
        packages
    } else {
        Vec::new()
    };
    let local = LocalImage {
        reference: image.clone(),
        id,
        inputs,
        packages,
    };
    store.record_local_image(&named.record, &local)?;
    Ok(local)
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
        Kind::Builder => build(rt, catalog, &file, store, &log, reporter)?.id,
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
        return build(rt, catalog, file, store, log, reporter).map(|l| l.id);
    }
    if kind.from_runtime() {
        ensure_kind(rt, catalog, Kind::Runtime, store, reporter)?;
    }
    build_as(
        rt,
        catalog,
        &Named::of_kind(catalog, kind),
        file,
        None,
        store,
        log,
        reporter,
    )
}

/// An image `build_as` makes, and under which names: the image, its Containerfile when written
/// out, its record in the store, how messages call it, and whether it builds FROM the line's
/// debootstrap base (the line's own images do; devel and flavours build FROM another of them).
pub(super) struct Named {
    pub image: String,
    pub file_name: String,
    pub record: String,
    pub kind: &'static str,
    pub from_base: bool,
}

impl Named {
    pub fn line(catalog: &Catalog) -> Named {
        Named::of_kind(catalog, Kind::Builder)
    }

    fn of_kind(catalog: &Catalog, kind: Kind) -> Named {
        Named {
            image: kind.image(catalog),
            file_name: kind.file_name(&catalog.release.name),
            record: catalog.release.name.clone(),
            kind: kind.name(),
            from_base: !kind.from_runtime(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn build_as(
    rt: &dyn ContainerRuntime,
    catalog: &Catalog,
    named: &Named,
    file: &Containerfile,
    label: Option<(&str, &str)>,
    store: &Store,
    log: &Path,
    reporter: &dyn Reporter,
) -> Result<String, ImageError> {
    if rt.kind() == RtKind::Host {
        return Err(ImageError::Host);
    }
    let image = &named.image;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ImageError::Io { path, source }
    };
    // The embedded file is written out: the runtime reads a file. Its directory is the build
    // context, as containers/ is for the one on disk (the Containerfiles copy nothing in).
    let scratch = store.root().join(".tmp");
    std::fs::create_dir_all(&scratch).map_err(io(&scratch))?;
    // A label is appended to a copy, so the file's own bytes (what `inputs_digest` reads)
    // stay as they are.
    let written;
    let path = match (&file.path, label) {
        (Some(p), None) => p.clone(),
        _ => {
            written = tempfile::tempdir_in(&scratch).map_err(io(&scratch))?;
            let p = written.path().join(&named.file_name);
            let mut text = file.text.clone();
            if let Some((key, value)) = label {
                text.push_str(&format!("\nLABEL {key}=\"{value}\"\n"));
            }
            std::fs::write(&p, text).map_err(io(&p))?;
            p
        }
    };
    reporter.note(&format!(
        "building the {} image {image} from {} (log: {})",
        named.kind,
        file.shown,
        log.display()
    ));
    // devel builds FROM the runtime image, which was made from the debootstrap base.
    if let Some(base) = catalog
        .release
        .image_base
        .as_ref()
        .filter(|_| named.from_base)
    {
        debootstrap::check_from(&path, base)?;
        if rt.image_id(&base.name).is_none() {
            reporter.note(&format!(
                "making the base image {} with {} --variant={} {} (log: {})",
                base.name,
                debootstrap::tool_for_this_user(),
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
        let gone = apt_versions_gone(&text);
        return Err(if gone.is_empty() {
            ImageError::Build {
                kind: named.kind,
                image: image.clone(),
                containerfile: file.shown.clone(),
                log: log.to_path_buf(),
            }
        } else {
            ImageError::Gone {
                kind: named.kind,
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

/// The `package=version` pins apt refused in a build log ("E: Version 'V' for 'P' was not
/// found"): a Containerfile pinned to a version the mirror has dropped.
pub fn apt_versions_gone(log: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for l in log.lines() {
        let Some(rest) = l.trim().strip_prefix("E: Version '") else {
            continue;
        };
        let Some((version, rest)) = rest.split_once("' for '") else {
            continue;
        };
        let Some((package, _)) = rest.split_once("' was not found") else {
            continue;
        };
        let pair = (package.to_string(), version.to_string());
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apt_pins_the_mirror_dropped() {
        let log = "Reading package lists...\nE: Version '7.0.2+dfsg-3' for 'hipcc' was not found\nE: Version '1.0' for 'zstd' was not found\nE: Version '1.0' for 'zstd' was not found\n";
        assert_eq!(
            apt_versions_gone(log),
            [
                ("hipcc".to_string(), "7.0.2+dfsg-3".to_string()),
                ("zstd".to_string(), "1.0".to_string())
            ]
        );
        assert!(apt_versions_gone("E: Unable to locate package x\n").is_empty());
    }

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

    #[test]
    fn apt_pins_are_read_from_install_commands_only() {
        let text = "FROM x\n# apt-get install -y commented=1.0\nRUN DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\\n      hipcc=7.0.2+dfsg-3 \\\n      clang-21:amd64=1:21.1.8-14 \\\n      unpinned \\\n && apt-get clean && echo a=b\nRUN apt install -y zstd=1.5;\n";
        assert_eq!(
            apt_pins(text),
            [
                ("hipcc".to_string(), "7.0.2+dfsg-3".to_string()),
                ("clang-21".to_string(), "1:21.1.8-14".to_string()),
                ("zstd".to_string(), "1.5".to_string()),
            ]
        );
        let installed = [
            "hipcc=7.0.2+dfsg-3".to_string(),
            "clang-21=1:21.1.8-13".to_string(),
        ];
        assert_eq!(
            unmet_pins(&apt_pins(text), &installed),
            [
                (
                    "clang-21".to_string(),
                    "1:21.1.8-14".to_string(),
                    Some("1:21.1.8-13".to_string())
                ),
                ("zstd".to_string(), "1.5".to_string(), None),
            ]
        );
    }

    #[test]
    fn the_shipped_debian_image_is_keyed_by_its_inputs_and_the_almalinux_ones_are_not() {
        let load = |r| crate::catalog::Catalog::load(CatalogRoot::Embedded, Some(r)).unwrap();
        let debian = inputs_digest(&load("debian-6.4")).unwrap();
        assert!(
            debian.starts_with("sha256:") && debian.len() == 71,
            "{debian}"
        );
        // FROM docker.io/library/almalinux:8, a tag nothing pins.
        assert_eq!(inputs_digest(&load("rocm-6.4.4")), None);
        let pins = apt_pins(&embedded("debian-6.4").unwrap().text);
        assert!(
            pins.iter()
                .any(|(p, v)| p == "hipcc" && v == "7.0.2+dfsg-3"),
            "{pins:?}"
        );
    }
}
