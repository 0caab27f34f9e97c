//! `plan`.

use std::process::ExitCode;

use super::{CliError, Format, Global, Result, root};
use rocforge::arch::TargetId;
use rocforge::catalog::Catalog;
use rocforge::diag::Diagnostic;
use rocforge::plan::{self, key::RuntimeKind, render};
use rocforge::store::Store;

pub fn targets(g: &Global, catalog: &Catalog) -> Result<Vec<TargetId>> {
    match &g.arch {
        None => {
            if catalog.release.arches.is_empty() {
                return Err(Diagnostic::new(format!(
                    "no --arch given and release {} names no default targets",
                    catalog.release.name
                ))
                .hint("pass --arch gfx90c (or a comma list)")
                .into());
            }
            Ok(catalog.release.arches.clone())
        }
        Some(list) => catalog.arches.resolve_list(list).map_err(|e| {
            CliError::One(Diagnostic::new(format!("--arch {list}: {e}")).hint(e.hint()))
        }),
    }
}

pub fn plan_cmd(
    g: &Global,
    components: &[String],
    explain: Option<&str>,
    runtime: RuntimeKind,
    overlays: &[String],
) -> Result<ExitCode> {
    let catalog = Catalog::load(root(g), g.release.as_deref())?;
    let targets = targets(g, &catalog)?;
    let lock = super::sources::lockfile(&catalog)?;
    let overlays = super::sources::overlays(&catalog, overlays)?;
    let store = Store::open(g.store.clone().unwrap_or_else(Store::default_root));
    let req = plan::Request {
        components: components.to_vec(),
        targets,
        runtime,
        runtime_image: super::build_cmd::runtime_image_default(&catalog, &lock, runtime),
        lock,
        overlays,
    };
    let plan = plan::plan(&catalog, &req, &store)?;
    if let Some(c) = explain {
        let step = plan.step(c).ok_or_else(|| {
            if catalog.get(c).is_some() {
                Diagnostic::new(format!("{c} is not part of this plan"))
                    .hint(format!("plan it directly: rocforge plan {c} --explain {c}"))
            } else {
                catalog.unknown_component(c)
            }
        })?;
        match g.format {
            Format::Json => println!(
                "{}",
                serde_json::to_string_pretty(&step.hash_input).unwrap_or_default()
            ),
            _ => print!("{}", render::explain(step)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    match g.format {
        Format::Text => print!("{}", render::text(&plan)),
        Format::Json => print!("{}", render::json(&plan)),
        Format::GithubMatrix => print!("{}", render::github_matrix(&plan)),
    }
    Ok(ExitCode::SUCCESS)
}
