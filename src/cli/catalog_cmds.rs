//! `list`, `check` and `catalog export`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::{CliError, Format, Global, Result, root};
use rocforge::catalog::{Catalog, CatalogError, CatalogRoot};
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

/// One component of one release line, as `list` shows it.
struct Row {
    name: String,
    version: String,
    release: String,
    preview: bool,
    default: bool,
    recorded: bool,
    stored: bool,
    summary: String,
}

/// A bundle's name, its release line and its components.
type Bundle = (String, String, Vec<String>);

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
    let (rows, bundles) = list_rows(&root, &releases, default.as_deref(), &stored)?;
    if g.format == Format::Json {
        print_list_json(&rows, &bundles);
        return Ok(ExitCode::SUCCESS);
    }
    print_list_table(&rows, &bundles);
    print_list_legend(&rows, &bundles, default.as_deref());
    Ok(ExitCode::SUCCESS)
}

/// The components and bundles of each line in `releases`, in order.
fn list_rows(
    root: &CatalogRoot,
    releases: &[String],
    default: Option<&str>,
    stored: &BTreeSet<(String, String)>,
) -> Result<(Vec<Row>, Vec<Bundle>)> {
    let mut rows = Vec::new();
    // Bundles are names `build`, `install` and `package` take like components.
    let mut bundles: Vec<Bundle> = Vec::new();
    for r in releases {
        let c = Catalog::load(root.clone(), Some(r))?;
        for (name, members) in &c.release.bundles {
            bundles.push((
                name.clone(),
                r.clone(),
                members.iter().map(|m| m.value.clone()).collect(),
            ));
        }
        for recipe in c.recipes.values() {
            let name = recipe.name.value.clone();
            rows.push(Row {
                recorded: c.release.built.iter().any(|b| b.value == name),
                stored: stored.contains(&(r.clone(), name.clone())),
                name,
                version: recipe.version.clone(),
                release: r.clone(),
                preview: c.release.preview,
                default: default == Some(r.as_str()),
                summary: recipe.summary.clone(),
            });
        }
    }
    Ok((rows, bundles))
}

fn print_list_json(rows: &[Row], bundles: &[Bundle]) {
    let items: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({"name": r.name, "version": r.version, "release": r.release,
                "preview": r.preview, "default": r.default, "built": r.recorded,
                "stored": r.stored, "summary": r.summary})
        })
        .collect();
    let bundles: Vec<_> = bundles
        .iter()
        .map(|(name, release, members)| json!({"name": name, "release": release, "components": members}))
        .collect();
    super::print_json(
        &json!({"schema": "rocforge.list/1", "components": items, "bundles": bundles}),
    );
}

/// The components in aligned columns, then the bundles.
fn print_list_table(rows: &[Row], bundles: &[Bundle]) {
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
            let built = match (r.recorded, r.stored) {
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
            .map(|(n, r, _)| n.len() + r.len() + 3)
            .max()
            .unwrap_or(0);
        for (name, release, members) in bundles {
            let label = format!("{name} ({release})");
            println!("{label:width$}  {}", members.join(", "));
        }
    }
}

/// What the marks mean, once, after the table: a reader of the table needs them there.
fn print_list_legend(rows: &[Row], bundles: &[Bundle], default: Option<&str>) {
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
        let problems: Vec<_> = diags
            .iter()
            .map(|d| json!({"message": d.message, "location": d.position(), "hint": d.hint}))
            .collect();
        super::print_json(&json!({
            "schema": "rocforge.check/1",
            "catalog": root.describe(),
            "releases": releases,
            "ok": diags.is_empty(),
            "problems": problems,
        }));
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
