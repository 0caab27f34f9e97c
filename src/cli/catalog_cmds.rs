//! `list`, `check` and `catalog export`.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::{CliError, Format, Global, Result, root};
use rocforge::catalog::{Catalog, CatalogError};
use rocforge::diag::Diagnostics;

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// List the components installed in --prefix instead
    #[arg(long)]
    pub installed: bool,
    /// With --installed [default: $ROCFORGE_PREFIX, else ~/.local/rocforge]
    #[arg(long, value_name = "DIR", requires = "installed")]
    pub prefix: Option<PathBuf>,
}

pub fn list(g: &Global) -> Result<ExitCode> {
    let root = root(g);
    let releases = rocforge::app::release_names(&root, g.release.as_deref())?;
    let mut rows = Vec::new();
    let mut previews = Vec::new();
    for r in &releases {
        let c = Catalog::load(root.clone(), Some(r))?;
        if c.release.preview {
            previews.push(r.clone());
        }
        for recipe in c.recipes.values() {
            rows.push((
                recipe.name.value.clone(),
                recipe.version.clone(),
                r.clone(),
                recipe.summary.clone(),
            ));
        }
    }
    if g.format == Format::Json {
        let items: Vec<_> = rows
            .iter()
            .map(|(n, v, r, s)| {
                json!({"name": n, "version": v, "release": r, "preview": previews.contains(r), "summary": s})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"schema": "rocforge.list/1", "components": items})
            )
            .unwrap_or_default()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // A preview line (release.toml `preview = true`) is marked; it is never the default line.
    for row in &mut rows {
        if previews.contains(&row.2) {
            row.2.push_str(" (preview)");
        }
    }
    let header = ("component", "version", "release", "summary");
    let w0 = rows
        .iter()
        .map(|r| r.0.len())
        .max()
        .unwrap_or(0)
        .max(header.0.len());
    let w1 = rows
        .iter()
        .map(|r| r.1.len())
        .max()
        .unwrap_or(0)
        .max(header.1.len());
    let w2 = rows
        .iter()
        .map(|r| r.2.len())
        .max()
        .unwrap_or(0)
        .max(header.2.len());
    println!(
        "{:w0$}  {:w1$}  {:w2$}  {}",
        header.0, header.1, header.2, header.3
    );
    for (n, v, r, s) in &rows {
        println!("{n:w0$}  {v:w1$}  {r:w2$}  {s}");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check(g: &Global) -> Result<ExitCode> {
    let root = root(g);
    let (releases, diags) = match &g.release {
        Some(r) => match Catalog::load(root.clone(), Some(r)) {
            Ok(_) => (vec![r.clone()], Diagnostics::default()),
            Err(CatalogError::Invalid(d)) => (vec![r.clone()], d),
            Err(e) => return Err(e.into()),
        },
        None => Catalog::check_all(&root)?,
    };
    if g.format == Format::Json {
        let problems: Vec<_> = diags
            .iter()
            .map(|d| json!({"message": d.message, "location": d.position(), "hint": d.hint}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "schema": "rocforge.check/1",
                "catalog": root.describe(),
                "releases": releases,
                "ok": diags.is_empty(),
                "problems": problems,
            }))
            .unwrap_or_default()
        );
        return Ok(if diags.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    if !diags.is_empty() {
        return Err(CliError::Diagnostics(diags));
    }
    let mut components = 0;
    for r in &releases {
        components += Catalog::load(root.clone(), Some(r))?.recipes.len();
    }
    println!(
        "ok: {} ({} component recipe(s) in {} release line(s): {})",
        root.describe(),
        components,
        releases.len(),
        releases.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}
