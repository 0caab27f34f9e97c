//! `image build`: the builder image from its Containerfile. `image create`: the base image plus one layer with built components installed, pushed to a
//! registry or loaded into podman or docker.

use std::process::ExitCode;

use serde_json::json;

use std::path::PathBuf;
use std::sync::Arc;

use super::progress::TermReporter;
use super::{CliError, Format, Global, Result};
use rocforge::diag::Diagnostic;
use rocforge::image::{self, ImageError};
use rocforge::progress::Reporter;
use rocforge::source::cache::Cache;

#[derive(clap::Args, Debug)]
pub struct ImageBuildArgs {
    #[command(flatten)]
    pub runtime: super::RuntimeArg,
    /// The Containerfile [default: containers/Containerfile.<release> beside the catalog, else the built-in one]
    #[arg(long, value_name = "FILE")]
    pub containerfile: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// Components to install (with their dependencies); bundles like rocm-math work too
    #[arg(required = true)]
    pub components: Vec<String>,
    /// The base image in a registry: REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:…
    #[arg(long, value_name = "REF")]
    pub base: String,
    /// The new image's name: REGISTRY/NAME:TAG
    #[arg(long, value_name = "REF")]
    pub tag: String,
    /// Push the image to --tag's registry
    #[arg(long)]
    pub push: bool,
    /// Load the image into podman (an oci-archive) or docker (a docker-archive)
    #[arg(long, value_enum, value_name = "TOOL")]
    pub load: Option<rocforge::image::Loader>,
    #[command(flatten)]
    pub runtime: super::RuntimeArg,
    /// The overlay the build was given (COMPONENT:PATH=DIR): it is part of the content key
    #[arg(long, value_name = "SPEC")]
    pub overlay: Vec<String>,
}

fn err(e: ImageError) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

fn client() -> Result<reqwest::blocking::Client> {
    // Layers can be gigabytes: no idle limit, only for connecting.
    rocforge::net::try_client(&rocforge::net::HttpOptions {
        connect: Some(std::time::Duration::from_secs(30)),
        idle: None,
        ..Default::default()
    })
    .map_err(|e| Diagnostic::new(format!("cannot make an HTTP client: {e}")).into())
}

/// SOURCE_DATE_EPOCH when set, else the newest the store entries record, else 0.
fn created(store: &rocforge::store::Store, keys: &[String]) -> Result<u64> {
    if let Ok(v) = std::env::var("SOURCE_DATE_EPOCH") {
        return v.trim().parse().map_err(|_| {
            Diagnostic::new(format!(
                "SOURCE_DATE_EPOCH={v:?} is not a number of seconds"
            ))
            .hint("unset it, or set it to seconds since 1970")
            .into()
        });
    }
    Ok(keys
        .iter()
        .filter_map(|k| {
            let b = std::fs::read(store.entry_dir(k).join("meta.json")).ok()?;
            serde_json::from_slice::<serde_json::Value>(&b).ok()?["source_date_epoch"].as_u64()
        })
        .max()
        .unwrap_or(0))
}

pub fn create(g: &Global, a: &CreateArgs) -> Result<ExitCode> {
    if !a.push && a.load.is_none() {
        return Err(Diagnostic::new("nothing to do: neither --push nor --load")
            .hint("add --push (to --tag's registry) or --load podman|docker")
            .into());
    }
    let target = image::Reference::parse(&a.tag)
        .map_err(|e| err(e.into()))
        .and_then(|r| {
            if r.reference.starts_with("sha256:") {
                Err(Diagnostic::new(format!("--tag {} names a digest", a.tag))
                    .hint("--tag is REGISTRY/NAME:TAG")
                    .into())
            } else {
                Ok(r)
            }
        })?;
    let reporter = Arc::new(TermReporter::new(g));
    let session = super::session_with(g, reporter.clone())?;
    let (catalog, store) = (&session.catalog, &session.store);
    let plan = session.built_plan(&a.components, a.runtime.runtime.kind(), &a.overlay)?;
    let targets = &plan.targets;
    // The requested components and what they need at run time: a build-only dependency
    // (Tensile for rocBLAS) is in the plan, built, and no part of the stack.
    let components: Vec<image::Component> = plan
        .delivered()
        .into_iter()
        .map(|s| image::Component {
            name: s.component.clone(),
            version: s.version.clone(),
            key: s.key.to_string(),
            tree: store.tree(&s.key),
        })
        .collect();
    let keys: Vec<String> = components.iter().map(|c| c.key.clone()).collect();
    let created = created(store, &keys)?;
    let client = client()?;

    let task = reporter.task(&format!("reading the base image {}", a.base), None, false);
    let base = image::pull_base(client.clone(), &a.base).map_err(err)?;
    task.finish(&format!("base image {} ({})", a.base, base.digest));

    let work = Cache::default_root().join("image-work");
    let task = reporter.task("writing the layer", None, false);
    let layer =
        image::write_layer(&components, &catalog.release.prefix, created, &work).map_err(err)?;
    task.finish(&format!(
        "layer {} ({} entries, {} bytes)",
        layer.digest, layer.entries, layer.size
    ));
    let target_names: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
    let img = image::compose(
        &base,
        &layer,
        &image::Spec {
            components: &components,
            prefix: &catalog.release.prefix,
            release: &catalog.release.name,
            targets: &target_names,
            created,
        },
    );
    let digest = img.digest();

    let mut pushed = None;
    if a.push {
        let d =
            image::push(client, &target, &base, &layer, &img, reporter.as_ref()).map_err(err)?;
        rocforge::app::attest::attach_image(&session, &target, &d, &base, &keys)?;
        pushed = Some(format!(
            "{}@{d}",
            a.tag.rsplit_once(':').map_or(a.tag.as_str(), |(n, _)| n)
        ));
    }
    let mut loaded = None;
    if let Some(loader) = a.load {
        let tmp = tempfile::Builder::new()
            .prefix(".image-")
            .suffix(".tar")
            .tempfile_in(&work)
            .map_err(|e| {
                err(ImageError::Io {
                    path: work.clone(),
                    source: e,
                })
            })?
            .into_temp_path();
        let task = reporter.task(&format!("loading into {}", loader.tool()), None, false);
        image::write_archive(&tmp, loader, &a.tag, &base, &layer, &img).map_err(err)?;
        let said = image::load(loader, &tmp).map_err(err)?;
        task.finish(&format!("loaded into {}: {}", loader.tool(), a.tag));
        loaded = Some(said);
    }

    if g.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "schema": "rocforge.image/1",
                "tag": a.tag,
                "digest": digest,
                "id": img.id(),
                "base": a.base,
                "base_digest": base.digest,
                "layer": {"digest": layer.digest, "diff_id": layer.diff_id, "size": layer.size, "entries": layer.entries},
                "components": components.iter().map(|c| json!({"name": c.name, "version": c.version, "key": c.key})).collect::<Vec<_>>(),
                "targets": target_names,
                "prefix": catalog.release.prefix,
                "created": created,
                "pushed": pushed,
                "loaded": a.load.map(|l| l.tool()),
            }))
            .unwrap_or_default()
        );
    } else {
        println!("image   {}", a.tag);
        println!("digest  {digest}");
        println!("id      {}", img.id());
        if let Some(p) = &pushed {
            println!("pushed  {p}");
        }
        if let Some(l) = &loaded {
            println!("loaded  {}", l.lines().last().unwrap_or_default());
        }
        println!(
            "run     podman run --rm --device /dev/kfd --device /dev/dri {} …   (ROCM_PATH={})",
            a.tag, catalog.release.prefix
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn build(g: &Global, a: &ImageBuildArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    let local = rocforge::app::image::build_image(
        &session,
        a.runtime.runtime.choice(),
        a.containerfile.clone(),
    )?;
    println!("{} {}", local.reference, local.id);
    eprintln!(
        "recorded as a local image: builds key it by this ID and never push it to a shared cache"
    );
    Ok(ExitCode::SUCCESS)
}
