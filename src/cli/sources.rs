//! `fetch`, `lock`, `dev`, `patch export` and `gc`: the source commands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{CliError, Format, Global, Result, only_text_or_json, root};
use rocforge::arch::TargetId;
use rocforge::catalog::config::Config;
use rocforge::catalog::lock::Lockfile;
use rocforge::catalog::{Catalog, CatalogRoot};
use rocforge::diag::Diagnostic;
use rocforge::process::Cmd;
use rocforge::source::cache::Cache;
use rocforge::source::download::DownloadOptions;
use rocforge::source::patch::{self, PatchFile};
use rocforge::source::prepare::{self, SourceError, Sources};

#[derive(clap::Args, Debug)]
pub struct GcArgs {
    /// Only list what would be removed
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(clap::Args, Debug)]
pub struct DevArgs {
    pub component: String,
    /// Where to create the checkout [default: ./rocforge-dev/<component>]
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// The component
    pub component: String,
    /// Replace a directory of the source with your own: COMPONENT:PATH=DIR
    #[arg(long, value_name = "SPEC")]
    pub overlay: Vec<String>,
}

fn source_error(e: SourceError) -> CliError {
    CliError::hinted(&e, e.hint())
}

pub fn fetch(g: &Global, a: &FetchArgs) -> Result<ExitCode> {
    let (component, overlay_specs) = (&a.component, &a.overlay);
    only_text_or_json(g, "fetch")?;
    let session = super::session(g)?;
    session.lock()?;
    session.config()?;
    let overlays = session.overlays(overlay_specs)?;
    let targets = session.targets()?;
    let recipe = session.recipe(component)?;
    let prepared = prepare::prepare(&session.sources(&overlays, false)?, recipe, targets)
        .map_err(source_error)?;
    if g.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&prepared).unwrap_or_default()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let series = recipe
        .patches
        .series(targets.iter().map(|t| t.arch.as_str()))
        .len();
    eprintln!(
        "{component} {} for {}: {}{} patch(es){}",
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
        eprintln!("  input {name}: {}", path.display());
    }
    println!("{}", prepared.tree.display());
    Ok(ExitCode::SUCCESS)
}

fn dev_dir(component: &str, dir: Option<&Path>) -> PathBuf {
    dir.map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("rocforge-dev").join(component))
}

const BASE_TAG: &str = "rocforge-base";

pub fn dev(g: &Global, a: &DevArgs) -> Result<ExitCode> {
    let (component, dir) = (&a.component, a.dir.as_deref());
    only_text_or_json(g, "dev")?;
    let session = super::session(g)?;
    let sources = session.sources(&[], false)?;
    let targets = session.targets()?;
    let recipe = session.recipe(component)?;
    let dest = dev_dir(component, dir);
    if dest.exists()
        && std::fs::read_dir(&dest)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(Diagnostic::new(format!(
            "{} already exists and is not empty",
            dest.display()
        ))
        .hint("choose another --dir, or remove the old checkout after exporting its patches")
        .into());
    }
    // The pristine tree: the same source with no patches, derivations or overlays.
    let mut pristine = recipe.clone();
    pristine.patches = Default::default();
    pristine.derive.clear();
    let prepared = prepare::prepare(&sources, &pristine, targets).map_err(source_error)?;
    rocforge::fsutil::copy_tree(&prepared.tree, &dest).map_err(|e| {
        CliError::One(
            Diagnostic::new(format!("cannot write {}: {e}", dest.display()))
                .hint("check free disk space and permissions"),
        )
    })?;
    let git = |args: &[&str]| {
        Cmd::new("git")
            .arg("-C")
            .arg(&dest)
            .args(args.iter().copied())
            .env("GIT_AUTHOR_NAME", "rocforge")
            .env("GIT_AUTHOR_EMAIL", "rocforge@localhost")
            .env("GIT_COMMITTER_NAME", "rocforge")
            .env("GIT_COMMITTER_EMAIL", "rocforge@localhost")
            .env("GIT_AUTHOR_DATE", "1970-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "1970-01-01T00:00:00Z")
            .run()
            .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint("is git installed?")))
    };
    git(&["init", "-q"])?;
    git(&["add", "-A", "-f"])?;
    let subject = format!(
        "{component} {} pristine source{}",
        recipe.version,
        prepared
            .commit
            .as_deref()
            .map(|c| format!(" at {c}"))
            .unwrap_or_default()
    );
    git(&["commit", "-q", "--no-verify", "-m", &subject])?;
    git(&["tag", BASE_TAG])?;
    let release = recipe
        .patches
        .release
        .as_deref()
        .unwrap_or(&session.catalog.release.name);
    let series: Vec<PatchFile> = recipe
        .patches
        .series(targets.iter().map(|t| t.arch.as_str()))
        .into_iter()
        .map(|p| {
            let name = session.catalog.root.patch_display(release, component, p);
            session
                .catalog
                .root
                .read_patch(release, component, p)
                .map(|bytes| PatchFile {
                    name: name.clone(),
                    bytes,
                })
                .map_err(|e| {
                    CliError::One(
                        Diagnostic::new(format!("cannot read {name}: {e}"))
                            .hint("run `rocforge check`"),
                    )
                })
        })
        .collect::<Result<_>>()?;
    let commits = patch::commit_series(&dest, &series)
        .map_err(|e| CliError::One(Diagnostic::new(format!("{component}: {e}")).hint(e.hint())))?;
    println!("{}", dest.display());
    eprintln!(
        "{component}: {} patch(es) applied as commits on top of tag {BASE_TAG}.\nEdit and commit there, then run: rocforge patch export {component}{}",
        commits.len(),
        dir.map(|d| format!(" --dir {}", d.display()))
            .unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn patch_export(g: &Global, component: &str, dir: Option<&Path>) -> Result<ExitCode> {
    only_text_or_json(g, "patch export")?;
    let catalog = Catalog::load(root(g), g.release.as_deref())?;
    let recipe = catalog
        .get(component)
        .ok_or_else(|| catalog.unknown_component(component))?;
    let CatalogRoot::Dir(recipes) = &catalog.root else {
        return Err(Diagnostic::new("the built-in catalog cannot be written")
            .hint("export it first: `rocforge catalog export DIR`, then use --recipes DIR/recipes")
            .into());
    };
    let src = dev_dir(component, dir);
    if !src.join(".git").exists() {
        return Err(Diagnostic::new(format!(
            "{} is not a `rocforge dev` checkout",
            src.display()
        ))
        .hint(format!("create one with `rocforge dev {component}`"))
        .into());
    }
    let out = recipes
        .parent()
        .unwrap_or(Path::new("."))
        .join("patches")
        .join(&catalog.release.name)
        .join(component);
    let names = patch::export_series(&src, BASE_TAG, &out)
        .map_err(|e| CliError::One(Diagnostic::new(format!("{component}: {e}")).hint(e.hint())))?;
    for n in &names {
        println!("{}", out.join(n).display());
    }
    let listed: Vec<&str> = recipe.patches.every().map(|p| p.as_str()).collect();
    let exported: Vec<&str> = names.iter().map(String::as_str).collect();
    if listed != exported {
        eprintln!(
            "\nThe series differs from {}'s [patches]. Set it to:\n\n[patches]\nall = [{}]\n",
            recipe.file.display,
            names
                .iter()
                .map(|n| format!("\"{n}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn gc(g: &Global, dry_run: bool) -> Result<ExitCode> {
    only_text_or_json(g, "gc")?;
    let root = root(g);
    let cache = Cache::new(Cache::default_root());
    let mut removed = Vec::new();
    let mut kept = 0usize;
    let mut catalogs: std::collections::BTreeMap<String, Option<(Catalog, Lockfile, Config)>> =
        Default::default();
    for (key, dir) in cache.source_entries() {
        let meta: serde_json::Value = std::fs::read(dir.join("source.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let release = meta["release"].as_str().unwrap_or_default().to_string();
        let component = meta["component"].as_str().unwrap_or_default();
        let targets: Vec<TargetId> = meta["targets"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t.as_str()?.parse().ok()).collect())
            .unwrap_or_default();
        let entry = catalogs.entry(release.clone()).or_insert_with(|| {
            let c = Catalog::load(root.clone(), Some(&release)).ok()?;
            let l = c.root.lockfile().ok()?;
            let cfg = Config::load(c.root.base_dir().as_deref()).ok()?;
            Some((c, l, cfg))
        });
        // Kept unless we can prove the catalog no longer produces it.
        let referenced = match entry {
            None => false,
            Some((c, l, cfg)) => match c.get(component) {
                None => false,
                Some(recipe) => {
                    let reporter = rocforge::progress::Silent;
                    let s = Sources {
                        catalog: c,
                        lock: l,
                        config: cfg,
                        cache: &cache,
                        overlays: &[],
                        locked: false,
                        reporter: &reporter,
                        download: DownloadOptions::default(),
                        offline: true,
                    };
                    let pristine = {
                        let mut p = recipe.clone();
                        p.patches = Default::default();
                        p.derive.clear();
                        p
                    };
                    // Overlay builds and dev checkouts' pristine trees are produced too.
                    match (
                        prepare::source_plan(&s, recipe, &targets),
                        prepare::source_plan(&s, &pristine, &targets),
                    ) {
                        (Ok(a), Ok(b)) => {
                            a.key == key || b.key == key || meta["overlays"].is_array()
                        }
                        _ => true,
                    }
                }
            },
        };
        if referenced {
            kept += 1;
        } else {
            removed.push((key, dir, format!("{release}/{component}")));
        }
    }
    let stale = cache.stale_staging();
    for (key, dir, what) in &removed {
        println!(
            "{} {what} {}",
            if dry_run { "would remove" } else { "removed" },
            &key[..12]
        );
        if !dry_run {
            rocforge::fsutil::remove_tree(dir).map_err(|e| {
                CliError::One(
                    Diagnostic::new(format!("cannot remove {}: {e}", dir.display()))
                        .hint("check permissions"),
                )
            })?;
        }
    }
    for dir in &stale {
        println!(
            "{} leftover staging directory {}",
            if dry_run { "would remove" } else { "removed" },
            dir.display()
        );
        if !dry_run {
            let _ = rocforge::fsutil::remove_tree(dir);
        }
    }
    eprintln!(
        "{kept} source tree(s) kept, {} {}",
        removed.len() + stale.len(),
        if dry_run { "to remove" } else { "removed" }
    );
    Ok(ExitCode::SUCCESS)
}
