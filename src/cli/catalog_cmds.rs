//! `list`, `check` and `catalog export`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{CliError, Format, Global, Result, root};
use rocforge::catalog::checked::CheckReport;
use rocforge::catalog::listing::{Listed, ListedBundle, listing};
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
    let default = root.default_release().ok().flatten();
    // What this machine's store holds, per (line, component): any target set counts.
    let stored: BTreeSet<(String, String)> = super::options(g)
        .store()
        .entries()
        .into_iter()
        .map(|e| (e.release, e.component.to_string()))
        .collect();
    let listed = listing(&root, &releases, default.as_deref(), &stored)?;
    if g.format == Format::Json {
        super::print_json(&listed);
        return Ok(ExitCode::SUCCESS);
    }
    print_list_table(&listed.components, &listed.bundles);
    print_list_legend(&listed.components, &listed.bundles, default.as_deref());
    Ok(ExitCode::SUCCESS)
}

/// The components in aligned columns, then the bundles.
fn print_list_table(rows: &[Listed], bundles: &[ListedBundle]) {
    let table: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let mark = if r.default {
                " (default)"
            } else if r.preview {
                " (preview)"
            } else {
                ""
            };
            let built = match (r.built, r.stored) {
                (true, true) => "recorded, here",
                (true, false) => "recorded",
                (false, true) => "here",
                (false, false) => "-",
            };
            [
                r.name.clone(),
                r.version.clone(),
                format!("{}{mark}", r.release),
                built.to_string(),
                r.summary.clone(),
            ]
        })
        .collect();
    let header = ["component", "version", "release", "built", "summary"].map(String::from);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&table) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in std::iter::once(&header).chain(&table) {
        let [w0, w1, w2, w3] = widths;
        println!(
            "{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}",
            row[0], row[1], row[2], row[3], row[4]
        );
    }
    if !bundles.is_empty() {
        println!();
        let width = bundles
            .iter()
            .map(|b| b.name.len() + b.release.len() + 3)
            .max()
            .unwrap_or(0);
        for b in bundles {
            let label = format!("{} ({})", b.name, b.release);
            println!("{label:width$}  {}", b.components.join(", "));
        }
    }
}

/// What the marks mean, once, after the table: a reader of the table needs them there.
fn print_list_legend(rows: &[Listed], bundles: &[ListedBundle], default: Option<&str>) {
    println!();
    if let Some(d) = default {
        println!("default: {d}, the line used without --release");
    }
    if rows.iter().any(|r| r.preview) {
        println!(
            "preview: nothing built from the line has been recorded (release.toml `built`); never the default, selected with --release"
        );
    }
    println!(
        "built: recorded (built from this line and recorded in its release.toml), here (in this machine's store: `rocforge store list`)"
    );
    if !bundles.is_empty() {
        println!(
            "bundles: names that build, install and package take like a component, for the components listed"
        );
    }
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
        super::print_json(&CheckReport::new(&root, releases, &diags));
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
