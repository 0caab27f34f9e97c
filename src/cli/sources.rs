//! `fetch`, `lock`, `dev`, `patch export` and `gc`: the source commands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::progress::TermReporter;
use super::{CliError, Format, Global, Result, only_text_or_json, root};
use rocforge::arch::TargetId;
use rocforge::catalog::{Catalog, CatalogRoot};
use rocforge::config::Config;
use rocforge::diag::{Diagnostic, Diagnostics};
use rocforge::process::Cmd;
use rocforge::recipe::{GitRef, Recipe, Source};
use rocforge::source::cache::Cache;
use rocforge::source::derive::Overlay;
use rocforge::source::download::DownloadOptions;
use rocforge::source::git;
use rocforge::source::lock::{self, LockedImage, LockedInput, LockedSource, Lockfile};
use rocforge::source::patch::{self, PatchFile};
use rocforge::source::prepare::{self, SourceError, Sources};

pub fn lockfile(catalog: &Catalog) -> Result<Lockfile> {
    catalog
        .root
        .lockfile()
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))
}

pub fn overlays(catalog: &Catalog, specs: &[String]) -> Result<Vec<Overlay>> {
    specs
        .iter()
        .map(|spec| {
            let o = Overlay::parse(spec)
                .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
            if catalog.get(&o.component).is_none() {
                return Err(catalog.unknown_component(&o.component).into());
            }
            Ok(o)
        })
        .collect()
}

fn config(catalog: &Catalog) -> Result<Config> {
    Config::load(catalog.root.base_dir().as_deref()).map_err(CliError::Diagnostics)
}

fn source_error(e: SourceError) -> CliError {
    CliError::One(Diagnostic::new(e.to_string()).hint(e.hint()))
}

struct Ctx {
    catalog: Catalog,
    lock: Lockfile,
    config: Config,
    cache: Cache,
    overlays: Vec<Overlay>,
    reporter: TermReporter,
}

impl Ctx {
    fn load(g: &Global, overlay_specs: &[String]) -> Result<Ctx> {
        let catalog = Catalog::load(root(g), g.release.as_deref())?;
        let lock = lockfile(&catalog)?;
        let config = config(&catalog)?;
        let overlays = overlays(&catalog, overlay_specs)?;
        Ok(Ctx {
            catalog,
            lock,
            config,
            cache: Cache::new(Cache::default_root()),
            overlays,
            reporter: TermReporter::new(g.quiet),
        })
    }

    fn sources(&self, locked: bool, offline: bool) -> Sources<'_> {
        Sources {
            catalog: &self.catalog,
            lock: &self.lock,
            config: &self.config,
            cache: &self.cache,
            overlays: &self.overlays,
            locked,
            reporter: &self.reporter,
            download: DownloadOptions::default(),
            offline,
        }
    }

    fn recipe(&self, name: &str) -> Result<&Recipe> {
        self.catalog
            .get(name)
            .ok_or_else(|| self.catalog.unknown_component(name).into())
    }
}

pub fn fetch(g: &Global, component: &str, overlay_specs: &[String]) -> Result<ExitCode> {
    only_text_or_json(g, "fetch")?;
    let ctx = Ctx::load(g, overlay_specs)?;
    let targets = super::plan_cmd::targets(g, &ctx.catalog)?;
    let recipe = ctx.recipe(component)?;
    let prepared =
        prepare::prepare(&ctx.sources(g.locked, false), recipe, &targets).map_err(source_error)?;
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
    let targets_text: Vec<String> = targets.iter().map(TargetId::to_string).collect();
    eprintln!(
        "{component} {} for {}: {}{} patch(es){}",
        recipe.version,
        targets_text.join(","),
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

pub fn lock(g: &Global, check: bool, skip_images: bool) -> Result<ExitCode> {
    only_text_or_json(g, "lock")?;
    let root = root(g);
    let Some(base) = root.base_dir() else {
        return Err(Diagnostic::new("the built-in catalog's lock is part of the binary and cannot be rewritten")
            .hint("lock an editable copy: `rocforge catalog export DIR`, then `rocforge --recipes DIR/recipes lock`")
            .into());
    };
    let releases = root
        .releases()
        .map_err(|source| rocforge::catalog::CatalogError::Io {
            path: root.describe(),
            source,
        })?;
    let catalogs: Vec<Catalog> = releases
        .iter()
        .map(|r| Catalog::load(root.clone(), Some(r)))
        .collect::<std::result::Result<_, _>>()?;
    let path = base.join(lock::LOCK_FILE);
    let old = Lockfile::read(&path)
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
    let refs: Vec<&Catalog> = catalogs.iter().collect();
    if check {
        let problems = lock::check(&refs, &old, !skip_images);
        if g.format == Format::Json {
            println!("{}", serde_json::to_string_pretty(&json!({"schema": "rocforge.lock-check/1", "ok": problems.is_empty(), "problems": problems})).unwrap_or_default());
            return Ok(if problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        if problems.is_empty() {
            println!(
                "ok: {} matches the recipes",
                rocforge::catalog::display_path(&path)
            );
            return Ok(ExitCode::SUCCESS);
        }
        let mut d = Diagnostics::default();
        for p in problems {
            d.push(
                Diagnostic::new(format!("rocforge.lock is stale: {p}"))
                    .hint("run `rocforge lock` and commit rocforge.lock"),
            );
        }
        return Err(CliError::Diagnostics(d));
    }
    let config = Config::load(Some(&base)).map_err(CliError::Diagnostics)?;
    let reporter = TermReporter::new(g.quiet);
    let mut new = Lockfile::new();
    let mut d = Diagnostics::default();
    let client = rocforge::source::download::client();
    let cache = Cache::new(Cache::default_root());
    for c in &catalogs {
        let release = &c.release.name;
        for r in c.recipes.values() {
            let Source::Git { url, reference, .. } = &r.source else {
                continue;
            };
            let commit = match reference {
                GitRef::Rev(rev) => rev.clone(),
                GitRef::Tag(tag) => {
                    let fetch_url = config.resolve(url);
                    use rocforge::progress::Reporter;
                    let task = reporter.task(
                        &format!("resolve {release}/{} {tag}", r.name.value),
                        None,
                        false,
                    );
                    match git::resolve_tag(&fetch_url, tag) {
                        Ok(c) => {
                            task.finish(&format!(
                                "{release}/{}: {tag} = {}",
                                r.name.value,
                                &c[..12]
                            ));
                            c
                        }
                        Err(e) => {
                            task.finish(&format!("{release}/{}: failed", r.name.value));
                            d.push(
                                Diagnostic::new(format!("{release}/{}: {e}", r.name.value))
                                    .hint(e.hint()),
                            );
                            continue;
                        }
                    }
                }
            };
            new.sources.push(LockedSource {
                release: release.clone(),
                component: r.name.value.clone(),
                git: url.clone(),
                reference: lock::ref_string(reference),
                commit,
            });
        }
        for r in c.recipes.values() {
            for input in &r.inputs {
                let Some(md5) = &input.md5 else { continue };
                if let Some(l) = lock_md5_input(
                    &old,
                    &config,
                    &client,
                    &cache,
                    &reporter,
                    release,
                    &r.name.value,
                    input,
                    md5,
                    &mut d,
                ) {
                    new.inputs.push(l);
                }
            }
        }
        if lock::is_local_image(&c.release.image) {
            match lock::LockedLocalImage::current(c) {
                Some(l) => new.local_images.push(l),
                None => rocforge::progress::Reporter::note(
                    &reporter,
                    &format!(
                        "{release}: {} is built locally (`rocforge image build`) from a Containerfile this catalog does not carry, so rocforge.lock records nothing for it; builds key it by its image ID",
                        c.release.image
                    ),
                ),
            }
        } else if skip_images {
            if let Some(i) = old.image(release, &c.release.image) {
                new.images.push(i.clone());
            }
        } else {
            match rocforge::oci::resolve_digest(&client, &c.release.image) {
                Ok(digest) => new.images.push(LockedImage {
                    release: release.clone(),
                    reference: c.release.image.clone(),
                    digest,
                }),
                Err(e) => d.push(Diagnostic::new(format!("{release}: {e}")).hint(e.hint())),
            }
        }
    }
    if !d.is_empty() {
        // Nothing is written unless everything resolved: a half-updated lock would hide drift.
        return Err(CliError::Diagnostics(d));
    }
    let changed = new != old;
    new.write(&path)
        .map_err(|e| CliError::One(Diagnostic::new(e.to_string()).hint(e.hint())))?;
    if g.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&json!({"schema": "rocforge.lock/1", "path": path, "changed": changed, "sources": new.sources.len(), "images": new.images.len(), "inputs": new.inputs.len()})).unwrap_or_default());
    } else {
        println!(
            "{} {}: {} source(s), {} image(s), {} md5-pinned input(s)",
            if changed { "wrote" } else { "unchanged" },
            rocforge::catalog::display_path(&path),
            new.sources.len(),
            new.images.len(),
            new.inputs.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The lock entry of an `[[inputs]]` entry pinned by md5: the old entry when it was made for
/// the same URL and md5 (the file is not downloaded again), else a download whose md5 must
/// match, recorded by its sha256. A failure is pushed to `d` and gives None.
#[allow(clippy::too_many_arguments)]
fn lock_md5_input(
    old: &Lockfile,
    config: &Config,
    client: &reqwest::blocking::Client,
    cache: &Cache,
    reporter: &TermReporter,
    release: &str,
    component: &str,
    input: &rocforge::recipe::ExtraInput,
    md5: &str,
    d: &mut Diagnostics,
) -> Option<LockedInput> {
    use rocforge::progress::Reporter;
    if let Some(l) = old.input(release, component, &input.name)
        && l.url == input.url
        && l.md5 == *md5
    {
        return Some(l.clone());
    }
    let fetch_url = config.resolve(&input.url);
    if fetch_url != input.url {
        reporter.note(&format!(
            "{release}/{component}: downloading input {} from mirror {fetch_url}",
            input.name
        ));
    }
    match rocforge::source::download::download_md5(
        client,
        &fetch_url,
        md5,
        &cache.root().join("downloads"),
        &DownloadOptions::default(),
        reporter,
    ) {
        Ok((_, sha256)) => Some(LockedInput {
            release: release.to_string(),
            component: component.to_string(),
            name: input.name.clone(),
            url: input.url.clone(),
            md5: md5.to_string(),
            sha256,
        }),
        Err(e) => {
            d.push(
                Diagnostic::new(format!(
                    "{release}/{component}: input {} ({}): {e}",
                    input.name, input.url
                ))
                .hint(e.hint()),
            );
            None
        }
    }
}

fn dev_dir(component: &str, dir: Option<&Path>) -> PathBuf {
    dir.map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("rocforge-dev").join(component))
}

const BASE_TAG: &str = "rocforge-base";

pub fn dev(g: &Global, component: &str, dir: Option<&Path>) -> Result<ExitCode> {
    only_text_or_json(g, "dev")?;
    let ctx = Ctx::load(g, &[])?;
    let targets = super::plan_cmd::targets(g, &ctx.catalog)?;
    let recipe = ctx.recipe(component)?;
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
    let prepared = prepare::prepare(&ctx.sources(g.locked, false), &pristine, &targets)
        .map_err(source_error)?;
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
        .unwrap_or(&ctx.catalog.release.name);
    let series: Vec<PatchFile> = recipe
        .patches
        .series(targets.iter().map(|t| t.arch.as_str()))
        .into_iter()
        .map(|p| {
            let name = ctx.catalog.root.patch_display(release, component, p);
            ctx.catalog
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
    // Build directories kept for resuming a stopped build: tens of GiB for rocBLAS, and a gc is
    // the user asking for the disk back.
    let builds =
        rocforge::build::resume::leftovers(&cache.root().join("builds")).unwrap_or_default();
    for (key, dir) in &builds {
        println!(
            "{} build directory of a stopped build {}",
            if dry_run { "would remove" } else { "removed" },
            &key[..key.len().min(12)]
        );
        if !dry_run {
            let _ = rocforge::fsutil::remove_tree(dir);
        }
    }
    eprintln!(
        "{kept} source tree(s) kept, {} {}",
        removed.len() + stale.len() + builds.len(),
        if dry_run { "to remove" } else { "removed" }
    );
    Ok(ExitCode::SUCCESS)
}

/// `rocforge check --sources`: every component's patches and derivations against its real source.
pub fn check_sources(g: &Global, components: &[String], only_patched: bool) -> Result<ExitCode> {
    use rocforge::source::verify::{self, Outcome, SourceCheck};
    only_text_or_json(g, "check --sources")?;
    let root = root(g);
    let releases = super::catalog_cmds::release_names(g, &root)?;
    let reporter = TermReporter::new(g.quiet);
    let cache = Cache::new(Cache::default_root());
    let mut rows: Vec<(String, SourceCheck)> = Vec::new();
    let mut known_somewhere = vec![false; components.len()];
    let mut catalogs = Vec::new();
    let mut versions = verify::DependencyVersions::default();
    for r in &releases {
        catalogs.push(Catalog::load(root.clone(), Some(r))?);
    }
    for catalog in &catalogs {
        let lock = lockfile(catalog)?;
        let config = config(catalog)?;
        let targets = super::plan_cmd::targets(g, catalog)?;
        let mut wanted: Vec<String> = Vec::new();
        if components.is_empty() {
            wanted.extend(catalog.recipes.keys().cloned());
        } else {
            for (i, name) in components.iter().enumerate() {
                // A name may belong to one release line only; it must belong to at least one.
                if let Ok(members) = catalog.expand(std::slice::from_ref(name)) {
                    known_somewhere[i] = true;
                    wanted.extend(members);
                }
            }
        }
        wanted.sort();
        wanted.dedup();
        let sources = Sources {
            catalog,
            lock: &lock,
            config: &config,
            cache: &cache,
            overlays: &[],
            locked: g.locked,
            reporter: &reporter,
            download: DownloadOptions::default(),
            offline: false,
        };
        for name in &wanted {
            let Some(recipe) = catalog.get(name) else {
                continue;
            };
            let patched = recipe.patches.every().next().is_some() || !recipe.derive.is_empty();
            if only_patched && !patched {
                continue;
            }
            let scratch = tempfile::Builder::new()
                .prefix(".check-sources-")
                .tempdir_in(cache.root())
                .or_else(|_| {
                    std::fs::create_dir_all(cache.root())?;
                    tempfile::Builder::new()
                        .prefix(".check-sources-")
                        .tempdir_in(cache.root())
                })
                .map_err(|e| {
                    CliError::One(
                        Diagnostic::new(format!(
                            "cannot make a scratch directory in {}: {e}",
                            cache.root().display()
                        ))
                        .hint("check free disk space and permissions of ROCFORGE_CACHE"),
                    )
                })?;
            for c in
                verify::check_component(&sources, recipe, &targets, scratch.path(), &mut versions)
            {
                rows.push((catalog.release.name.clone(), c));
            }
        }
    }
    if let Some(i) = known_somewhere.iter().position(|k| !k) {
        return Err(catalogs
            .first()
            .map(|c| c.unknown_component(&components[i]))
            .unwrap_or_else(|| Diagnostic::new(format!("no component \"{}\"", components[i])))
            .into());
    }
    let failed = rows.iter().filter(|(_, c)| !c.outcome.ok()).count();
    if g.format == Format::Json {
        let items: Vec<_> = rows
            .iter()
            .map(|(r, c)| {
                let mut v = serde_json::to_value(c).unwrap_or_default();
                v["release"] = json!(r);
                v
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "schema": "rocforge.check-sources/1",
                "ok": failed == 0,
                "checks": items,
            }))
            .unwrap_or_default()
        );
    } else {
        let w_rel = rows.iter().map(|(r, _)| r.len()).max().unwrap_or(0).max(7);
        let w_comp = rows
            .iter()
            .map(|(_, c)| c.component.len())
            .max()
            .unwrap_or(0)
            .max(9);
        let arches = |c: &SourceCheck| c.arches.join(",");
        let w_arch = rows
            .iter()
            .map(|(_, c)| arches(c).len())
            .max()
            .unwrap_or(0)
            .max(6);
        println!(
            "{:w_rel$}  {:w_comp$}  {:w_arch$}  result",
            "release", "component", "arches"
        );
        for (r, c) in &rows {
            let result = match &c.outcome {
                Outcome::Applies { patches, derived } => {
                    format!("applies ({patches} patch(es), {derived} derived tree(s))")
                }
                Outcome::Conflict { message, .. } => format!("conflict: {message}"),
                Outcome::DeriveFails { message, .. } => format!("derivation fails: {message}"),
                Outcome::VersionDiffers { message, .. } => format!("version differs: {message}"),
                Outcome::DependencyVersion { message, .. } => {
                    format!("dependency version: {message}")
                }
                Outcome::Unreachable { message, .. } => format!("source unreachable: {message}"),
            };
            println!(
                "{r:w_rel$}  {:w_comp$}  {:w_arch$}  {result}",
                c.component,
                arches(c)
            );
        }
        let mut hints: Vec<&str> = rows
            .iter()
            .filter_map(|(_, c)| match &c.outcome {
                Outcome::Applies { .. } => None,
                Outcome::Conflict { hint, .. }
                | Outcome::DeriveFails { hint, .. }
                | Outcome::VersionDiffers { hint, .. }
                | Outcome::DependencyVersion { hint, .. }
                | Outcome::Unreachable { hint, .. } => Some(hint.as_str()),
            })
            .collect();
        hints.sort();
        hints.dedup();
        for h in hints {
            eprintln!("hint: {h}");
        }
        eprintln!(
            "{} check(s): {} apply, {failed} do not",
            rows.len(),
            rows.len() - failed
        );
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
