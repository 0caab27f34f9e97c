//! `image build`: the builder, runtime or devel image from its Containerfile. `image create`:
//! a base image plus one layer with built components installed, pushed to a registry or loaded
//! into podman or docker (the use case is `app::image::create`).

use std::process::ExitCode;

use std::path::PathBuf;
use std::sync::Arc;

use super::progress::TermReporter;
use super::{Format, Global, Result};
use rocforge::build::image::Kind;
use rocforge::diag::Diagnostic;

#[derive(clap::Args, Debug)]
pub struct ImageBuildArgs {
    #[command(flatten)]
    pub runtime: super::RuntimeArg,
    /// Which image: builder (what components build in), runtime (what the stack needs to run:
    /// HIP runtime, ROCr, comgr, device libraries; no compiler), devel (runtime plus hipcc,
    /// headers and CMake packages), python (runtime plus CPython 3.13 and PyTorch's CPU
    /// libraries, for stacks with wheels)
    #[arg(long, value_enum, value_name = "KIND", default_value = "builder")]
    pub kind: Kind,
    /// The Containerfile [default: containers/Containerfile.<release> (builder) or
    /// Containerfile.<kind>-<release> beside the catalog, else the built-in one]
    #[arg(long, value_name = "FILE")]
    pub containerfile: Option<PathBuf>,
    /// A flavour of the builder image that recipes name (`[build] image = "NAME"`), from
    /// containers/Containerfile.builder-<NAME>-<release>: the line's builder image first
    /// (built when absent or stale), then the flavour FROM it, built afresh [e.g. python, for
    /// torch and torchvision]
    #[arg(long, value_name = "NAME", conflicts_with_all = ["containerfile", "kind"])]
    pub flavour: Option<String>,
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["base", "kind"])))]
pub struct CreateArgs {
    /// Components to install (with their dependencies); bundles like rocm-math work too
    #[arg(required = true)]
    pub components: Vec<String>,
    /// The base image: REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:… from a registry;
    /// containers-storage:NAME (or a plain localhost/NAME:TAG) from podman's local storage;
    /// docker-daemon:NAME from docker's
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// The release line's base instead of --base: runtime (what the stack needs to run), devel
    /// (runtime plus hipcc, headers, CMake packages) or python (runtime plus CPython 3.13 and
    /// PyTorch's CPU libraries: a stack with wheels, e.g. torch); built when absent, as
    /// `image build --kind`
    #[arg(long, value_enum, value_name = "KIND", conflicts_with = "base")]
    pub kind: Option<Kind>,
    /// The new image's name: REGISTRY/NAME:TAG [default with --kind:
    /// localhost/rocforge/rocm:<release>-<kind>-<targets>]
    #[arg(long, value_name = "REF")]
    pub tag: Option<String>,
    /// Push the image to --tag's registry
    #[arg(long)]
    pub push: bool,
    /// With --push: move a tag the registry already has for another image
    #[arg(long, requires = "push")]
    pub force: bool,
    /// With --push: write the pushed image's record (reference, digest, targets, components by
    /// content key) into DIR, the release directory, so `rocforge index DIR` lists it in the
    /// signed index
    #[arg(long, value_name = "DIR", requires = "push")]
    pub record: Option<PathBuf>,
    /// Load the image into podman (an oci-archive) or docker (a docker-archive)
    #[arg(long, value_enum, value_name = "TOOL")]
    pub load: Option<rocforge::image::Loader>,
    #[command(flatten)]
    pub runtime: super::RuntimeArg,
    /// The overlay the build was given (COMPONENT:PATH=DIR): it is part of the content key
    #[arg(long, value_name = "SPEC")]
    pub overlay: Vec<String>,
}

/// SOURCE_DATE_EPOCH when set.
fn epoch() -> Result<Option<u64>> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.trim().parse().map(Some).map_err(|_| {
            Diagnostic::new(format!(
                "SOURCE_DATE_EPOCH={v:?} is not a number of seconds"
            ))
            .hint("unset it, or set it to seconds since 1970")
            .into()
        }),
        Err(_) => Ok(None),
    }
}

pub fn create(g: &Global, a: &CreateArgs) -> Result<ExitCode> {
    let epoch = epoch()?;
    let reporter = Arc::new(TermReporter::new(g));
    let session = super::session_with(g, reporter.clone())?;
    let c = rocforge::app::image::create(
        &session,
        &rocforge::app::image::CreateRequest {
            components: &a.components,
            base: a.base.as_deref(),
            kind: a.kind,
            tag: a.tag.as_deref(),
            push: a.push,
            record: a.record.as_deref(),
            load: a.load,
            runtime: a.runtime.runtime.kind(),
            choice: a.runtime.runtime.choice(),
            overlay: &a.overlay,
            force: a.force,
            epoch,
        },
    )?;
    if g.format == Format::Json {
        super::print_json(&c.report());
    } else {
        println!("image   {}", c.tag);
        println!("digest  {}", c.digest);
        println!("id      {}", c.id);
        if let Some(p) = &c.pushed {
            println!("pushed  {p}");
        }
        if let Some(r) = &c.recorded {
            println!(
                "record  {}   (`rocforge index {}` lists it)",
                r.display(),
                r.parent()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            );
        }
        if let Some((_, said)) = &c.loaded {
            println!("loaded  {}", said.lines().last().unwrap_or_default());
        }
        println!(
            "run     podman run --rm --device /dev/kfd --device /dev/dri --group-add keep-groups {} …   (ROCM_PATH={})",
            c.tag, c.prefix
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn build(g: &Global, a: &ImageBuildArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    if let Some(flavour) = &a.flavour {
        let local =
            rocforge::app::image::build_flavour(&session, a.runtime.runtime.choice(), flavour)?;
        println!("{} {}", local.reference, local.id);
        match &local.inputs {
            Some(inputs) => note!(
                g,
                "recorded as the {flavour} flavour: the recipes built in it key it by what it is made from ({inputs})"
            ),
            None => note!(
                g,
                "recorded as a local image: the line's builder image is not pinned, so builds in it key it by this ID"
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let local = rocforge::app::image::build_image(
        &session,
        a.runtime.runtime.choice(),
        a.containerfile.clone(),
        a.kind,
    )?;
    println!("{} {}", local.reference, local.id);
    if a.kind == Kind::Builder {
        match &local.inputs {
            Some(inputs) => note!(
                g,
                "recorded with its {} packages, checked against the Containerfile's pins: builds key it by what it is made from ({inputs}), so another machine that builds it computes the same keys",
                local.packages.len()
            ),
            None => note!(
                g,
                "recorded as a local image: builds key it by this ID and never push it to a shared cache"
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}
