//! `fetch`, `lock`, `dev`, `patch export` and `gc`: the source commands.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{Format, Global, Result};
use rocforge::app::{dev, source_gc};
use rocforge::source::prepare::Fetched;

#[derive(clap::Args, Debug)]
pub struct PatchExportArgs {
    /// The component whose checkout to export
    pub component: String,
    /// The checkout [default: ./rocforge-dev/<component>]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct GcArgs {
    /// Only list what would be removed
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(clap::Args, Debug)]
pub struct DevArgs {
    /// The component to check out
    pub component: String,
    /// Where to create the checkout [default: ./rocforge-dev/<component>]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// The components, each fetched on its own (not their dependencies)
    #[arg(required = true, value_name = "COMPONENT")]
    pub components: Vec<String>,
    /// Replace a directory of the source with your own: COMPONENT:PATH=DIR
    #[arg(long, value_name = "SPEC")]
    pub overlay: Vec<String>,
}

pub fn fetch(g: &Global, a: &FetchArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    let fetched = rocforge::app::fetch::fetch(
        &session,
        &a.components,
        &a.overlay,
        &mut |recipe, prepared, targets| {
            if g.format == Format::Json {
                return;
            }
            let series = recipe
                .patches
                .series(targets.iter().map(|t| t.arch.as_str()))
                .len();
            note!(
                g,
                "{} {} for {}: {}{} patch(es){}",
                recipe.name.value,
                recipe.version,
                rocforge::arch::comma_list(targets),
                prepared
                    .commit
                    .as_deref()
                    .map(|c| format!("commit {}, ", &c[..12.min(c.len())]))
                    .unwrap_or_default(),
                series,
                if prepared.cached {
                    ", already in the source cache"
                } else {
                    ""
                }
            );
            for (name, path) in &prepared.inputs {
                note!(g, "  input {name}: {}", path.display());
            }
            println!("{}", prepared.tree.display());
        },
    )?;
    if g.format == Format::Json {
        super::print_json(&Fetched::new(fetched));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn dev(g: &Global, a: &DevArgs) -> Result<ExitCode> {
    let session = super::session(g)?;
    let dest = dev::dev_dir(&a.component, a.dir.as_deref());
    let commits = dev::checkout(&session, &a.component, &dest)?;
    println!("{}", dest.display());
    let dir = a
        .dir
        .as_ref()
        .map(|d| format!(" --dir {}", d.display()))
        .unwrap_or_default();
    let release = g
        .release
        .as_ref()
        .map(|r| format!(" --release {r}"))
        .unwrap_or_default();
    // The follow-up must be a command that works as printed: the built-in catalog cannot take
    // patches, so it is exported once and the patches written into the export.
    let next = match super::root(g) {
        rocforge::catalog::CatalogRoot::Embedded => format!(
            "the built-in catalog is read-only, so export it once and write the patches there:\n  \
             rocforge catalog export rocforge-catalog\n  \
             rocforge --recipes rocforge-catalog/recipes{release} patch export {}{dir}",
            a.component
        ),
        rocforge::catalog::CatalogRoot::Dir(_) => {
            format!("rocforge{release} patch export {}{dir}", a.component)
        }
    };
    note!(
        g,
        "{}: {commits} patch(es) applied as commits on top of tag {}.\nEdit and commit there, then run: {next}",
        a.component,
        dev::BASE_TAG,
    );
    Ok(ExitCode::SUCCESS)
}

pub fn patch_export(g: &Global, a: &PatchExportArgs) -> Result<ExitCode> {
    let (component, dir) = (&a.component, a.dir.as_deref());
    let session = super::session(g)?;
    let exported = dev::export(&session, component, &dev::dev_dir(component, dir))?;
    for n in &exported.names {
        println!("{}", exported.dir.join(n).display());
    }
    if exported.differs {
        note!(
            g,
            "\nThe series differs from {}'s [patches]. Set it to:\n\n[patches]\nall = [{}]\n",
            exported.recipe_file,
            exported
                .names
                .iter()
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn gc(g: &Global, dry_run: bool) -> Result<ExitCode> {
    let plan = source_gc::plan(&super::options(g));
    let done = if dry_run { "would remove" } else { "removed" };
    for u in &plan.unused {
        println!("{done} {} {}", u.what, &u.key[..12]);
        if !dry_run {
            source_gc::remove(u)?;
        }
    }
    for dir in &plan.stale {
        println!("{done} leftover staging directory {}", dir.display());
        if !dry_run {
            let _ = rocforge::fsutil::remove_tree(dir);
        }
    }
    for (key, dir) in &plan.builds {
        println!(
            "{done} build directory of a stopped build {}",
            &key[..key.len().min(12)]
        );
        if !dry_run {
            let _ = rocforge::fsutil::remove_tree(dir);
        }
    }
    note!(
        g,
        "{} source tree(s) kept, {} {}",
        plan.kept,
        plan.unused.len() + plan.stale.len() + plan.builds.len(),
        if dry_run { "to remove" } else { "removed" }
    );
    Ok(ExitCode::SUCCESS)
}
