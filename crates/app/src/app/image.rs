//! `image build`: one of the release line's images from its Containerfile (beside the catalog,
//! else the one built into rocforge; for a line with an `[image-base]`, the base image made
//! with debootstrap first): the builder image (recorded in the store as a local image), or the
//! runtime and devel bases users' images are made of. The work is `build::image`'s, which
//! `build` also uses to make the builder image before it fetches anything.
//!
//! `image create`: a base image (from a registry, or podman's or docker's local storage, or the
//! line's runtime/devel base) plus one layer with the built stack, pushed or loaded.

use crate::diag::Hint;
use std::path::PathBuf;

mod report;

pub use report::{IMAGE_SCHEMA, Report};

use super::runtime::{RuntimeChoice, open_runtime};
use super::{Error, Result, Session};
use crate::build::image::{self, Containerfile, ImageError, Kind};
use crate::image as oci_image;
use crate::image::{ImageError as CreateError, Loader};
use crate::plan::LocalImage;
use crate::plan::key::RuntimeKind;
use crate::source::cache::Cache;

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

/// Builds the image of `kind` (the builder image is recorded); returns its reference and
/// image ID.
pub fn build_image(
    session: &Session,
    choice: Option<RuntimeChoice>,
    containerfile: Option<PathBuf>,
    kind: Kind,
) -> Result<LocalImage> {
    let catalog = &session.catalog;
    let config = session.config()?;
    let release = &catalog.release.name;
    if kind != Kind::Builder && containerfile.is_none() {
        let rt = open_runtime(choice, config)?;
        let file = image::containerfile_of(catalog, kind).ok_or_else(|| {
            let e = ImageError::NoKind {
                release: release.clone(),
                kind: kind.name(),
                file: format!("containers/{}", kind.file_name(release)),
            };
            Error::hinted(&e, e.hint())
        })?;
        let log = image::log_path(&session.store, &format!("{}-{release}", kind.name()))
            .map_err(|e| image_error(session, e))?;
        let id = image::build_kind(
            rt.as_ref(),
            catalog,
            kind,
            &file,
            &session.store,
            &log,
            session.reporter.as_ref(),
        )
        .map_err(|e| image_error(session, e))?;
        return Ok(LocalImage {
            reference: kind.image(catalog),
            id,
            inputs: None,
            packages: Vec::new(),
        });
    }
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
    if kind != Kind::Builder {
        let id = image::build_kind(
            rt.as_ref(),
            catalog,
            kind,
            &file,
            store,
            &log,
            session.reporter.as_ref(),
        )
        .map_err(|e| image_error(session, e))?;
        return Ok(LocalImage {
            reference: kind.image(catalog),
            id,
            inputs: None,
            packages: Vec::new(),
        });
    }
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

/// `image build --flavour NAME`: the line's builder image made ready first, as `build` does
/// (built when absent or stale), then the flavour FROM it built afresh, labelled with its
/// inputs and recorded, so a build of the recipes that name it finds it ready.
pub fn build_flavour(
    session: &Session,
    choice: Option<RuntimeChoice>,
    flavour: &str,
) -> Result<LocalImage> {
    let catalog = &session.catalog;
    let named = crate::build::flavour::named_by_recipes(catalog);
    if !named.contains_key(flavour) {
        let known: Vec<String> = named
            .iter()
            .map(|(f, by)| format!("{f} (named by {})", by.join(", ")))
            .collect();
        let hint = crate::diag::did_you_mean(flavour, named.keys().map(String::as_str))
            .unwrap_or_else(|| {
                if known.is_empty() {
                    format!(
                        "no recipe of {} names a flavour ([build] image = \"NAME\")",
                        catalog.release.name
                    )
                } else {
                    format!(
                        "the flavours of {}: {}",
                        catalog.release.name,
                        known.join("; ")
                    )
                }
            });
        return Err(Error::hinted(
            format!(
                "--flavour {flavour}: no recipe of {} builds in a builder image flavour of that name",
                catalog.release.name
            ),
            hint,
        ));
    }
    let config = session.config()?;
    let (_, lock) = session.plan_inputs()?;
    let rt = open_runtime(choice, config)?;
    if rt.kind() == crate::runtime::Kind::Host {
        return Err(Error::hinted(
            format!(
                "--flavour {flavour}: a flavour is a container image; the host runtime has none"
            ),
            "pass --runtime podman or --runtime docker",
        ));
    }
    let line = || {
        let runtime =
            super::runtime::runtime_image(catalog, lock, config, choice, RuntimeKind::Container);
        crate::plan::image_ref(catalog, lock, &session.store, &runtime)
    };
    let mut line_image = line();
    let ready = image::ensure(
        rt.as_ref(),
        catalog,
        &line_image,
        &session.store,
        session.reporter.as_ref(),
    )
    .map_err(|e| image_error(session, e))?;
    if matches!(ready, image::Ready::Built(_)) {
        line_image = line();
    }
    let flavoured = crate::build::flavour::image_ref(catalog, flavour, &line_image);
    let id = crate::build::flavour::build(
        rt.as_ref(),
        catalog,
        flavour,
        &flavoured,
        &session.store,
        session.reporter.as_ref(),
    )
    .map_err(|e| image_error(session, e))?;
    Ok(LocalImage {
        reference: flavoured.reference,
        id,
        inputs: flavoured.built_from,
        packages: Vec::new(),
    })
}

/// What `image create` is asked for.
pub struct CreateRequest<'a> {
    /// Components to install (with their run-time dependencies).
    pub components: &'a [String],
    /// `--base`: a registry reference, `containers-storage:NAME`, `docker-daemon:NAME`, or a
    /// plain `localhost/NAME:TAG` (podman's storage).
    pub base: Option<&'a str>,
    /// `--kind`: the line's runtime or devel base (built when absent), when no `--base`.
    pub kind: Option<Kind>,
    /// `--tag`; None: [`default_tag`].
    pub tag: Option<&'a str>,
    pub push: bool,
    /// `--record DIR`: write the pushed image's record there, for `rocforge index DIR`.
    pub record: Option<&'a std::path::Path>,
    pub load: Option<Loader>,
    /// Whose builds (`--runtime`), and which runtime builds a missing base.
    pub runtime: RuntimeKind,
    pub choice: Option<RuntimeChoice>,
    pub overlay: &'a [String],
    /// Move a registry tag that names other content.
    pub force: bool,
    /// Seconds for `created`: SOURCE_DATE_EPOCH as the binary read it; None: the newest the
    /// store entries record, else 0.
    pub epoch: Option<u64>,
}

/// One component in the image.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct CreatedComponent {
    pub name: String,
    pub version: String,
    pub key: String,
}

/// What `image create` made.
#[derive(Debug, Clone)]
pub struct Created {
    pub tag: String,
    pub digest: String,
    pub id: String,
    pub base: String,
    pub base_digest: String,
    pub layer_digest: String,
    pub layer_diff_id: String,
    pub layer_size: u64,
    pub layer_entries: usize,
    pub components: Vec<CreatedComponent>,
    pub targets: Vec<String>,
    pub prefix: String,
    pub created: u64,
    /// `NAME@DIGEST` as pushed.
    pub pushed: Option<String>,
    /// The loader and what it printed.
    pub loaded: Option<(Loader, String)>,
    /// Where HIP's runtime was found in the base, when the stack needs it.
    pub hip: Option<String>,
    /// The record `--record` wrote.
    pub recorded: Option<PathBuf>,
}

/// `localhost/rocforge/rocm:<release>-<kind>-<target>-<target>…`: what the image is, read
/// from its name.
pub fn default_tag(release: &str, kind: Kind, targets: &[String]) -> String {
    let mut t = format!("{release}-{}", kind.name());
    for x in targets {
        t.push('-');
        t.push_str(x);
    }
    format!("localhost/rocforge/rocm:{}", crate::oci::sanitize_tag(&t))
}

fn create_error(e: CreateError) -> Error {
    Error::from(e)
}

/// A failed push, named by its tag; a registry that sent it elsewhere is said so.
fn push_error(tag: &str, e: CreateError) -> Error {
    let away = matches!(&e, CreateError::Oci(crate::oci::OciError::Unreachable { message, .. })
        if message.contains(crate::net::REDIRECTED_AWAY));
    let hint = if away {
        "rocforge pushes only to the registry --tag names: push to the host it redirects to by \
         --tag HOST/NAME:TAG, if that is the registry you mean"
            .to_string()
    } else {
        e.hint()
    };
    Error::hinted(format!("pushing {tag}: {e}"), hint)
}

/// The newest source date the store entries record, else 0.
fn newest_epoch(store: &crate::store::Store, keys: &[String]) -> u64 {
    keys.iter()
        .filter_map(|k| store.meta(k).ok().map(|m| m.source_date()))
        .max()
        .unwrap_or(0)
}

fn http_client(redirects: crate::net::Redirects) -> Result<reqwest::blocking::Client> {
    // Layers can be gigabytes: no idle limit, only for connecting.
    crate::net::try_client(&crate::net::HttpOptions {
        connect: Some(std::time::Duration::from_secs(30)),
        idle: None,
        redirects,
    })
    .map_err(|e| {
        Error::hinted(
            format!("cannot make an HTTP client: {e}"),
            "check the TLS set-up of this machine",
        )
    })
}

/// The image of the stack: base read and checked (HIP's runtime there when the stack needs it;
/// the registry's tag free or already this image), layer written, composed, then pushed and/or
/// loaded. Nothing is pushed before every check passed.
pub fn create(session: &Session, req: &CreateRequest<'_>) -> Result<Created> {
    if !req.push && req.load.is_none() {
        return Err(Error::hinted(
            "nothing to do: neither --push nor --load",
            "add --push (to --tag's registry) or --load podman|docker",
        ));
    }
    if req.record.is_some() && !req.push {
        // Refused before the hours of reading and writing layers, not after them.
        return Err(Error::hinted(
            "--record without --push: only a pushed image can be listed",
            "add --push",
        ));
    }
    let catalog = &session.catalog;
    let store = &session.store;
    let reporter = session.reporter.as_ref();
    let plan = session.built_plan(req.components, req.runtime, req.overlay)?;
    let target_names: Vec<String> = plan.targets.iter().map(|t| t.to_string()).collect();
    let (tag, target) = target_tag(&catalog.release.name, req, &target_names)?;
    let components: Vec<oci_image::Component> = plan
        .delivered()
        .into_iter()
        .map(|s| oci_image::Component {
            name: s.component.to_string(),
            version: s.version.clone(),
            key: s.key.to_string(),
            tree: store.tree(&s.key),
        })
        .collect();
    let keys: Vec<String> = components.iter().map(|c| c.key.clone()).collect();
    let created = req.epoch.unwrap_or_else(|| newest_epoch(store, &keys));

    let base_ref = base_reference(session, req)?;
    let work = Cache::default_root().join("image-work");
    let client = http_client(crate::net::Redirects::Any)?;
    let task = reporter.task(&format!("reading the base image {base_ref}"), None, false);
    let base = oci_image::read_base(client, &base_ref, &work).map_err(create_error)?;
    task.finish(&format!("base image {base_ref} ({})", base.digest));

    let task = reporter.task("writing the layer", None, false);
    let layer = oci_image::write_layer(&components, &catalog.release.prefix, created, &work)
        .map_err(create_error)?;
    task.finish(&format!(
        "layer {} ({} entries, {} bytes)",
        layer.digest, layer.entries, layer.size
    ));
    let hip = check_libraries(reporter, &base, &layer, &base_ref)?;
    let img = oci_image::compose(
        &base,
        &layer,
        &oci_image::Spec {
            components: &components,
            prefix: &catalog.release.prefix,
            release: &catalog.release.name,
            targets: &target_names,
            created,
        },
    );
    let digest = img.digest();
    // Issue #27's SBOM and provenance attach to the composed image here (`img`, `base`,
    // `components`), before it is pushed or loaded.

    let made = Made {
        base: &base,
        layer: &layer,
        img: &img,
    };
    let mut pushed = None;
    if req.push {
        pushed = Some(push_image(session, req.force, &tag, &target, &made, &keys)?);
    }
    let mut loaded = None;
    if let Some(loader) = req.load {
        loaded = Some(load_image(reporter, loader, &work, &tag, &made)?);
    }
    let recorded = match (req.record, &pushed) {
        (Some(dir), Some(_)) => {
            let entry = image_entry(session, &plan.targets, &tag, &digest, &base, &components)?;
            Some(record_image(dir, &entry)?)
        }
        _ => None,
    };
    Ok(Created {
        tag,
        id: img.id(),
        digest,
        base: base_ref,
        base_digest: base.digest.clone(),
        layer_digest: layer.digest.clone(),
        layer_diff_id: layer.diff_id.clone(),
        layer_size: layer.size,
        layer_entries: layer.entries,
        components: components
            .iter()
            .map(|c| CreatedComponent {
                name: c.name.clone(),
                version: c.version.clone(),
                key: c.key.clone(),
            })
            .collect(),
        targets: target_names,
        prefix: catalog.release.prefix.clone(),
        created,
        pushed,
        loaded,
        hip,
        recorded,
    })
}

/// The index's entry for the image pushed as `tag` with manifest `digest`.
fn image_entry(
    session: &Session,
    targets: &[crate::arch::TargetId],
    tag: &str,
    digest: &str,
    base: &oci_image::Base,
    components: &[oci_image::Component],
) -> Result<crate::package::index::ImageEntry> {
    let stored = |what: &str, e: &dyn std::fmt::Display| {
        Error::hinted(
            format!("{e}"),
            format!("a store entry's {what}: run `rocforge store list`"),
        )
    };
    Ok(crate::package::index::ImageEntry {
        reference: tag.to_string(),
        digest: parse_digest(digest)?,
        release: session.catalog.release.name.clone(),
        targets: targets.to_vec(),
        prefix: session.catalog.release.prefix.clone(),
        base_digest: parse_digest(&base.digest)?,
        components: components
            .iter()
            .map(|c| {
                Ok(crate::package::index::ImageComponent {
                    name: c.name.parse().map_err(|e| stored("name", &e))?,
                    version: c.version.clone(),
                    key: c.key.parse().map_err(|e| stored("key", &e))?,
                })
            })
            .collect::<Result<_>>()?,
    })
}

fn parse_digest(d: &str) -> Result<crate::ids::OciDigest> {
    d.parse()
        .map_err(|e| Error::hinted(format!("{e}"), "the registry's or the image's digest"))
}

/// Writes `DIR/<reference as a tag>.image.json` for `rocforge index DIR`, through a temporary file and a
/// rename, so a crash leaves the old record or the new one.
fn record_image(
    dir: &std::path::Path,
    entry: &crate::package::index::ImageEntry,
) -> Result<PathBuf> {
    use crate::package::index::{ImageRecord, image_record_name};
    let io = |p: &std::path::Path, e: std::io::Error| {
        Error::hinted(
            format!("{}: {e}", p.display()),
            "--record DIR: a directory rocforge may write (the release directory)",
        )
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let path = dir.join(image_record_name(&entry.reference));
    let mut bytes =
        serde_json::to_vec_pretty(&ImageRecord::new(entry.clone())).expect("plain data");
    bytes.push(b'\n');
    let tmp = crate::fsutil::temp_file_in(dir).map_err(|e| io(dir, e))?;
    std::fs::write(tmp.path(), &bytes).map_err(|e| io(tmp.path(), e))?;
    tmp.as_file().sync_all().map_err(|e| io(tmp.path(), e))?;
    tmp.persist(&path).map_err(|e| io(&path, e.error))?;
    Ok(path)
}

/// `--tag` (else the default name `--kind` gives), as written and parsed: a name with a tag,
/// and a registry's when the image is pushed.
fn target_tag(
    release: &str,
    req: &CreateRequest<'_>,
    target_names: &[String],
) -> Result<(String, oci_image::Reference)> {
    let tag = match (req.tag, req.kind) {
        (Some(t), _) => t.to_string(),
        (None, Some(k)) => default_tag(release, k, target_names),
        (None, None) => {
            return Err(Error::hinted(
                "no --tag: only --kind has a default name",
                "pass --tag REGISTRY/NAME:TAG, or --kind runtime|devel for the line's base and its default name",
            ));
        }
    };
    let target = oci_image::Reference::parse(&tag)
        .map_err(|e| create_error(e.into()))
        .and_then(|r| {
            if r.reference.starts_with("sha256:") {
                Err(Error::hinted(
                    format!("--tag {tag} names a digest"),
                    "--tag is REGISTRY/NAME:TAG",
                ))
            } else {
                Ok(r)
            }
        })?;
    if req.push && oci_image::BaseRef::parse(&tag) != oci_image::BaseRef::Registry(tag.clone()) {
        return Err(Error::hinted(
            format!("--push to {tag}: localhost/ names podman's local storage, not a registry"),
            "push to a registry by --tag HOST:PORT/NAME:TAG (or HOST/NAME:TAG), or use --load podman|docker",
        ));
    }
    Ok((tag, target))
}

/// The base to read: `--base`, else the line's `--kind` base in local storage (built when
/// absent).
fn base_reference(session: &Session, req: &CreateRequest<'_>) -> Result<String> {
    match (req.base, req.kind) {
        (Some(b), _) => Ok(b.to_string()),
        (None, Some(kind)) => {
            let config = session.config()?;
            // The line's bases live in podman's storage, or docker's when asked for.
            let choice = match req.choice {
                Some(RuntimeChoice::Docker) => Some(RuntimeChoice::Docker),
                _ => Some(RuntimeChoice::Podman),
            };
            let rt = open_runtime(choice, config)?;
            let (name, _) = image::ensure_kind(
                rt.as_ref(),
                &session.catalog,
                kind,
                &session.store,
                session.reporter.as_ref(),
            )
            .map_err(|e| image_error(session, e))?;
            Ok(match choice {
                Some(RuntimeChoice::Docker) => format!("docker-daemon:{name}"),
                _ => format!("containers-storage:{name}"),
            })
        }
        (None, None) => Err(Error::hinted(
            "no base image: neither --base nor --kind",
            "pass --kind runtime|devel (the line's bases, built when absent) or --base REF",
        )),
    }
}

/// Checks the base has every library the layer's programs link that the layer does not ship;
/// returns where HIP's runtime was found, when the stack needs it.
fn check_libraries(
    reporter: &dyn crate::progress::Reporter,
    base: &oci_image::Base,
    layer: &oci_image::Layer,
    base_ref: &str,
) -> Result<Option<String>> {
    // A stack that links HIP without shipping it runs only on a base that has it: refused
    // here, before anything is pushed, rather than found when a user's program fails to load.
    let mut hip = None;
    if let Some(needer) = layer.needs.get(oci_image::HIP_SONAME) {
        let task = reporter.task(
            &format!("looking for {} in the base", oci_image::HIP_SONAME),
            None,
            false,
        );
        match base.provides(oci_image::HIP_SONAME).map_err(create_error)? {
            Some(found) => {
                task.finish(&format!("{}: {found}", oci_image::HIP_SONAME));
                hip = Some(found);
            }
            None => {
                task.finish(&format!("{}: not in the base", oci_image::HIP_SONAME));
                return Err(create_error(CreateError::NoHip {
                    reference: base_ref.to_string(),
                    soname: oci_image::HIP_SONAME.into(),
                    needer: needer.clone(),
                }));
            }
        }
    }
    // The wheels unpacked in the layer import only with the Python they were built for.
    for (wheel, python) in &layer.wheels {
        let task = reporter.task(
            &format!("looking for Python {python} in the base"),
            None,
            false,
        );
        match base.python(python).map_err(create_error)? {
            Some(found) => task.finish(&format!("Python {python} for {wheel}: {found}")),
            None => {
                task.finish(&format!("Python {python}: not in the base"));
                return Err(create_error(CreateError::NoPython {
                    reference: base_ref.to_string(),
                    python: python.clone(),
                    wheel: wheel.clone(),
                }));
            }
        }
    }
    // Every other library the stack links must be in the base too (libsqlite3 for rocFFT, Boost
    // for MIOpen, ...): one missing is a program that does not load, refused here.
    let mut rest = layer.needs.clone();
    if hip.is_some() {
        rest.remove(oci_image::HIP_SONAME);
    }
    if !rest.is_empty() {
        let task = reporter.task(
            "checking the base has every library the stack links",
            None,
            false,
        );
        let lacks = base.lacks(&rest).map_err(create_error)?;
        if !lacks.is_empty() {
            task.finish(&format!("{} missing", lacks.len()));
            return Err(create_error(CreateError::Unresolved {
                reference: base_ref.to_string(),
                missing: lacks,
            }));
        }
        task.finish(&format!("{} libraries found in the base", rest.len()));
    }
    Ok(hip)
}

/// The composed image and what it is made of.
struct Made<'a> {
    base: &'a oci_image::Base,
    layer: &'a oci_image::Layer,
    img: &'a oci_image::Image,
}

/// Pushes the image to `target` unless its tag names other content (and not `force`), then
/// attaches its SBOM and provenance; returns `NAME@DIGEST`.
fn push_image(
    session: &Session,
    force: bool,
    tag: &str,
    target: &oci_image::Reference,
    made: &Made<'_>,
    keys: &[String],
) -> Result<String> {
    let digest = made.img.digest();
    // Our pushes stay on --tag's registry: a redirect elsewhere is refused, not followed.
    let start = reqwest::Url::parse(&target.repo.base_url())
        .map_err(|e| Error::hinted(format!("--tag {tag}: {e}"), "--tag is REGISTRY/NAME:TAG"))?;
    let push_client = http_client(crate::net::Redirects::SameOrigin { start })?;
    let dest = crate::oci::Remote::new(push_client.clone(), oci_image::api_repo(&target.repo));
    match dest.get_manifest(&target.reference) {
        Ok(Some((existing, _))) if existing != digest && !force => {
            return Err(create_error(CreateError::TagTaken {
                tag: tag.to_string(),
                existing,
                ours: digest,
            }));
        }
        Ok(_) => {}
        Err(e) => return Err(push_error(tag, e.into())),
    }
    let reporter = session.reporter.as_ref();
    let d = oci_image::push(
        push_client,
        target,
        made.base,
        made.layer,
        made.img,
        reporter,
    )
    .map_err(|e| push_error(tag, e))?;
    // The SBOM and provenance go beside the image as referrers, signed.
    crate::app::attest::attach_image(session, target, &d, made.base, keys)?;
    Ok(format!(
        "{}@{d}",
        tag.rsplit_once(':').map_or(tag, |(n, _)| n)
    ))
}

/// Writes the image as `loader`'s archive (in `work`) and loads it; returns what it printed.
fn load_image(
    reporter: &dyn crate::progress::Reporter,
    loader: Loader,
    work: &std::path::Path,
    tag: &str,
    made: &Made<'_>,
) -> Result<(Loader, String)> {
    let tmp = tempfile::Builder::new()
        .prefix(".image-")
        .suffix(".tar")
        .tempfile_in(work)
        .map_err(|e| {
            create_error(CreateError::Io {
                path: work.to_path_buf(),
                source: e,
            })
        })?
        .into_temp_path();
    let task = reporter.task(&format!("loading into {}", loader.tool()), None, false);
    oci_image::write_archive(&tmp, loader, tag, made.base, made.layer, made.img)
        .map_err(create_error)?;
    let said = oci_image::load(loader, &tmp).map_err(create_error)?;
    task.finish(&format!("loaded into {}: {tag}", loader.tool()));
    Ok((loader, said))
}
